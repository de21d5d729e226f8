#!/usr/bin/env bash
# Reproduce every table and plot:
#
#   ./run_all.sh --quick   the embedded synthetic graph through every method at 1, 2, 4 workers
#                          (experiments/configs/quick.yaml; minutes on a laptop)
#   ./run_all.sh --suite repro   the main comparison (synthetic, CS, Physics; results/, plots/)
#   ./run_all.sh --suite NAME    any suite of experiments/configs (results/NAME/, plots/NAME/):
#                          wave2 (PipeGCN, BNS-GCN, SANCUS, AdaQP, digest-vanishing), depth (sweeps,
#                          1-8 workers), models (SAGE, GAT), arxiv (arxiv-like stand-in), straggler
#                          (DIGEST-A), cluster, cluster_overlap (emulated network: the sweep;
#                          PipeGCN's overlap; both need root or user namespaces)
#   ./run_all.sh --suite NAME --seeds 0,1   only those seeds' runs, so that a suite longer than a
#                          sitting (arxiv: about 2 h here) runs in parts; the tables read the runs
#                          complete so far ("k complete of n")
#   ./run_all.sh           all of it: the full suite (experiments/configs/full.yaml: every dataset
#                          found in the data root, missing ones skipped with the reason printed),
#                          then every other suite but quick (many hours on 2 cores)
#   ./run_all.sh --check [SUITE]   no training: recompute SUITE's committed tables (default repro)
#                          from its committed run files, and its RUNLOG.md and the pages' generated
#                          blocks (python -m experiments.pages), and list every difference (exit 1 if any)
#
# Layout (quick never overwrites the committed full results):
#   full:  runs in results/runs/<dataset>/<label>_w<M>_s<seed>/, tables in results/ (tables.md and
#          one CSV per table), plots in plots/
#   quick: the same under results/quick/ and plots/quick/
#
# Each run is `python -m digest train ...` (its exact command is in its summary.json and in
# runs.csv); a run already complete with the same config hash is skipped, so an interrupted
# run_all.sh resumes where it stopped and a second call does no training and rewrites the tables.
# NETWORK=BANDWIDTH,LATENCY (default 10gbit,5us) sets the modeled-cluster columns (labelled modeled).
set -uo pipefail
cd "$(dirname "$0")"
suite=full results=results plots=plots seeds=()
usage() {  # one line, nothing run: a flag this script does not take is never passed over
  echo "error: $1; usage: ./run_all.sh [--quick | --suite NAME [--seeds LIST] | --check [SUITE]]" >&2
  exit 2
}
case "${1:-}" in
  --quick) [ $# -eq 1 ] || usage "--quick takes nothing after it, got '${*:2}'"
           suite=quick results=results/quick plots=plots/quick ;;
  --suite) [ $# -ge 2 ] || usage "--suite needs a name from experiments/configs"
           suite="$2"
           # repro is a subset of full: same runs, same place; any other suite gets its own folder
           case "$suite" in full|repro) ;; *) results="results/$suite" plots="plots/$suite" ;; esac
           if [ $# -gt 2 ]; then
             [ "$3" = --seeds ] || usage "after --suite NAME only --seeds LIST, got '${*:3}'"
             [ $# -ge 4 ] || usage "--seeds needs a list such as 0,1"
             [ $# -eq 4 ] || usage "nothing after --seeds LIST, got '${*:5}'"
             seeds=(--seeds "$4")
           fi ;;
  --check) [ $# -le 2 ] || usage "--check takes one suite, got '${*:2}'"
           check="${2:-repro}" ;;
  "") ;;
  -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) usage "unknown option '$1'" ;;
esac
. scripts/env.sh
set -uo pipefail
if [ -n "${check:-}" ]; then
  exec python -m experiments.recompute --suite "$check"
fi
network="${NETWORK:-10gbit,5us}"
# the tables read every complete run of the suite, so their header names the suite's command
# (without --seeds), as `--check` rebuilds it
if [ ${#seeds[@]} -gt 0 ]; then set -- --suite "$suite"; fi
export RUN_ALL_COMMAND="./run_all.sh${*:+ $*}"
start=$SECONDS

python -m experiments.runner --suite "$suite" --out "$results/runs" "${seeds[@]}"
status=$?
# 130: interrupted; 2: a wrong suite name or --seeds (the runner said why in one line)
if [ "$status" -eq 130 ] || [ "$status" -eq 2 ]; then exit "$status"; fi
python -m experiments.tables --suite "$suite" --runs "$results/runs" --out "$results" \
  --network "$network" || status=1
python -m experiments.plots --suite "$suite" --runs "$results/runs" --out "$plots" \
  --network "$network" || status=1
# RUNLOG.md and the generated blocks of the suite's README, results/README.md and README.md
python -m experiments.pages --suite "$suite" || status=1

echo
echo "run_all.sh ($suite suite) finished in $((SECONDS - start)) s"
echo "  runs:   $results/runs/<dataset>/<label>_w<M>_s<seed>/ (metrics.csv, summary.json, log.txt)"
echo "  tables: $results/tables.md and $results/*.csv"
echo "  plots:  $plots/*.png"
echo "  pages:  $results/RUNLOG.md (what ran, when, at which commit) and the generated blocks"
if [ -z "${1:-}" ]; then  # the full reproduction: then every other suite but quick
  for other in experiments/configs/*.yaml; do
    name="$(basename "$other" .yaml)"
    case "$name" in full|repro|quick|*_quick) continue ;; esac
    "$0" --suite "$name" || status=1
  done
fi
[ "$status" -eq 0 ] || echo "some runs or steps failed (see the FAILED lines above); exit status $status"
exit "$status"
