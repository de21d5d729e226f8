#!/usr/bin/env bash
# The test command: installs what it needs into ./.venv, then runs the unit tests (no network, no
# GPU). Extra arguments go to pytest, e.g. ./run_tests.sh -k partition
set -euo pipefail
cd "$(dirname "$0")"
. scripts/env.sh
set -euo pipefail
exec python -m pytest -q -p no:cacheprovider tests "$@"
