#!/usr/bin/env bash
# Re-run a suite on your machine and compare it with the committed results:
#
#   ./run_all.sh --quick   the embedded synthetic graph through every method at 1, 2, 4 workers
#                          (experiments/configs/quick.yaml; 7 minutes on 2 cores, install included), then the
#                          reproduction report: your accuracy, bytes and time ratios against the
#                          committed run's, and one verdict line (reproduced / differs, and where)
#   ./run_all.sh --suite repro   the main comparison (synthetic, CS, Physics)
#   ./run_all.sh --suite NAME    any suite of experiments/configs: field_methods (PipeGCN, BNS-GCN,
#                          SANCUS, AdaQP, digest-vanishing), depth (sweeps, 1-8 workers), models
#                          (SAGE, GAT), arxiv (arxiv-like stand-in), straggler (DIGEST-A), cluster,
#                          cluster_overlap (emulated network: the sweep; PipeGCN's overlap; both
#                          need root or user namespaces)
#   ./run_all.sh --suite NAME --seeds 0,1   only those seeds' runs, so that a suite longer than a
#                          sitting (arxiv: about 2 h here) runs in parts; the tables read the runs
#                          complete so far ("k complete of n"), the report compares what ran
#   ./run_all.sh           all of it: the full suite (experiments/configs/full.yaml: every dataset
#                          found in the data root, missing ones skipped with the reason printed),
#                          then every other suite but quick (many hours on 2 cores)
#   ./run_all.sh --check [SUITE]   no training: recompute SUITE's committed tables (default repro)
#                          from its committed run files, and its RUNLOG.md and the pages' generated
#                          blocks (python -m experiments.pages), and list every difference (exit 1 if any)
#
# Where a run goes (any of the above but --check, followed by one of):
#   (default)        your folder runs/<suite>/ (git ignores runs/): run folders in
#                    runs/<suite>/runs/<dataset>/<label>_w<M>_s<seed>/, tables in runs/<suite>/
#                    (tables.md, one CSV per table, reproduction.md: the report), plots in
#                    runs/<suite>/plots/. Nothing committed is read as done, nothing committed is
#                    written: every run of the suite trains, except your own complete ones.
#   --out DIR        the same under DIR/<suite>/ (a folder outside the repository or one git ignores)
#   --into-results   maintainers: regenerate the committed results in place (full and repro:
#                    results/repro/, plots/repro/; quick: results/quick/, plots/quick/; NAME:
#                    results/NAME/, plots/NAME/) and the pages' generated blocks (python -m
#                    experiments.pages); no report (the committed run would be compared with itself)
#
# Each run is `python -m digest train ...` (its exact command is in its summary.json and in
# runs.csv); a run already complete in the same folder with the same config hash is skipped, so an
# interrupted run_all.sh resumes where it stopped and a second call does no training and rewrites
# the tables (and the report). Exit status 1 when a run or step failed, or the report says differs.
# NETWORK=BANDWIDTH,LATENCY (default 10gbit,5us) sets the modeled-cluster columns (labelled modeled).
set -uo pipefail
cd "$(dirname "$0")"
mode=full suite=full seeds=() where=() out="" into=""
usage() {  # one line, nothing run: a flag this script does not take is never passed over
  echo "error: $1; usage: ./run_all.sh [--quick | --suite NAME [--seeds LIST] | --check [SUITE]]" \
       "[--out DIR | --into-results]" >&2
  exit 2
}
case "${1:-}" in
  --quick) mode="--quick" suite=quick; shift ;;
  --suite) [ $# -ge 2 ] || usage "--suite needs a name from experiments/configs"
           mode="--suite NAME" suite="$2"; shift 2 ;;
  --check) [ $# -le 2 ] || usage "--check takes one suite, got '${*:2}'"
           check="${2:-repro}"; shift $# ;;
  ""|--out|--into-results) ;;
  -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) usage "unknown option '$1'" ;;
esac
allowed="--out DIR or --into-results"
[ "$mode" = "--suite NAME" ] && allowed="--seeds LIST, --out DIR or --into-results"
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) [ "$mode" = "--suite NAME" ] || usage "--seeds goes after --suite NAME"
             [ $# -ge 2 ] || usage "--seeds needs a list such as 0,1"
             seeds=(--seeds "$2"); shift 2 ;;
    --out) [ $# -ge 2 ] && [ -n "$2" ] || usage "--out needs a folder"
           out="$2"; shift 2 ;;
    --into-results) into=1; shift ;;
    *) usage "after ${mode/full/./run_all.sh} only $allowed, got '$*'" ;;
  esac
done
[ -z "$out" ] || [ -z "$into" ] || usage "--out DIR and --into-results exclude each other"
name="$(basename "$suite" .yaml)"
if [ -n "$into" ]; then  # the committed folders (experiments/suites/layout.py has the same)
  where=(--into-results) results="results/$name" plots="plots/$name"
  case "$suite" in full|repro) results=results/repro plots=plots/repro ;; esac
else
  [ -z "$out" ] || where=(--out "$out")
  results="${out:-runs}/$name" plots="${out:-runs}/$name/plots"
  git check-ignore -q "$results/tables.md" 2>/dev/null
  if [ $? -eq 1 ]; then  # inside the repository and not ignored: git would track it
    usage "--out $out: git would track what the run writes there ($results/); choose a folder git ignores (runs/, the default) or one outside the repository"
  fi
fi
. scripts/env.sh
set -uo pipefail
if [ -n "${check:-}" ]; then
  exec python -m experiments.recompute --suite "$check"
fi
network="${NETWORK:-10gbit,5us}"
# the tables read every complete run of the suite, so their header names the suite's command
# (without --seeds), as `--check` rebuilds it: the committed tables' without --into-results
command=(./run_all.sh)
case "$mode" in --quick) command+=(--quick) ;; "--suite NAME") command+=(--suite "$suite") ;; esac
[ -z "$out" ] || command+=(--out "$out")
export RUN_ALL_COMMAND="${command[*]}"
start=$SECONDS

python -m experiments.runner --suite "$suite" --out "$results/runs" "${seeds[@]}"
status=$?
# 130: interrupted; 2: a wrong suite name or --seeds (the runner said why in one line)
if [ "$status" -eq 130 ] || [ "$status" -eq 2 ]; then exit "$status"; fi
python -m experiments.tables --suite "$suite" --runs "$results/runs" --out "$results" \
  --network "$network" || status=1
python -m experiments.plots --suite "$suite" --runs "$results/runs" --out "$plots" \
  --network "$network" || status=1
if [ -n "$into" ]; then
  # RUNLOG.md and the generated blocks of the suite's README, results/README.md and README.md
  python -m experiments.pages --suite "$suite" || status=1
else  # your runs against the committed ones: results/<suite>/ (experiments/suites/layout.py)
  echo
  python -m experiments.studies.reproduce --suite "$suite" --runs "$results/runs" --out "$results"
  case $? in 0) ;; 1) status=1 ;; *) status=1; echo "the reproduction report failed" ;; esac
fi

echo
echo "run_all.sh ($suite suite) finished in $((SECONDS - start)) s"
echo "  runs:   $results/runs/<dataset>/<label>_w<M>_s<seed>/ (metrics.csv, summary.json, log.txt)"
echo "  tables: $results/tables.md and $results/*.csv"
echo "  plots:  $plots/*.png"
if [ -n "$into" ]; then
  echo "  pages:  $results/RUNLOG.md (what ran, when, at which commit) and the generated blocks"
else
  echo "  report: $results/reproduction.md (your runs against the committed ones)"
fi
if [ "$mode" = full ]; then  # the full reproduction: then every other suite but quick
  for other in experiments/configs/*.yaml; do
    name="$(basename "$other" .yaml)"
    case "$name" in full|repro|quick|*_quick) continue ;; esac
    "$0" --suite "$name" "${where[@]}" || status=1
  done
fi
[ "$status" -eq 0 ] || echo "some runs or steps failed, or the reproduction differs (see above); exit status $status"
exit "$status"
