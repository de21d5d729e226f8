#!/usr/bin/env bash
# The test command: installs what it needs into ./.venv, then runs the tests (no network, no GPU).
#
#   ./run_tests.sh          the fast tier (what CI and the README call first): every method's core
#                           properties in-process through the warm worker pool; minutes
#   ./run_tests.sh --all    everything, the slow tier too (pytest -m slow: network namespaces,
#                           torchrun, two-node runs, SIGKILL and Ctrl-C, real-data accuracy, the
#                           long DIGEST-A runs: each starts processes from scratch)
#
# Extra arguments go to pytest, e.g. ./run_tests.sh -k partition, ./run_tests.sh --all -x
set -euo pipefail
cd "$(dirname "$0")"
tier=(-m "not slow")
if [ "${1:-}" = "--all" ]; then
  tier=()
  shift
fi
. scripts/env.sh
set -euo pipefail
exec python -m pytest -q -p no:cacheprovider "${tier[@]}" tests "$@"
