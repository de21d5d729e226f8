"""The reproduction report: a user's run of a suite against the committed one.

    python -m experiments.reproduce --suite quick --runs runs/quick/runs --out runs/quick

run_all.sh calls it after the tables and plots. Per dataset, method and M that the user's runs
cover (their seeds only: a run with ``--seeds``, or a partial one, is compared for what ran):

- accuracy: the user's test accuracy at best validation (mean over the seeds run) minus the
  committed runs' at the same seeds, in points, and whether it lies within the committed spread:
  the committed mean over all its seeds +- max(2 std, 0.5 points) where 2 or more seeds are
  committed, +- 1.5 points where one is. "identical" when every run's per-epoch train loss and
  validation accuracy equal the committed run's of the same seed to the last digit (the same seed,
  flags, torch build and thread count give bit-identical training);
- bytes per epoch (every epoch's bytes_total, run by run, same seed) must be equal: what crosses
  the wire is fixed by the method, graph, partition and seed. Not compared: DIGEST-A's (when a
  worker pulls depends on timing), nor, where the training itself is not identical, those of the
  methods whose traffic follows the values (SANCUS's skips, AdaQP's adaptive widths, the drift
  schedule). DIGEST-A is not judged at all: its accuracy too follows the workers' relative speeds
  (the staleness they give), i.e. the machine and its load; it is shown and named in the last line;
- per-epoch time as a ratio to exact (epoch_time.csv's speedup_vs_exact; a timing suite's
  timing.csv speedup, with the committed 95% interval), the user's machine against the committed
  one: information only, since a ratio moves with the machine and its load.

The last line: "reproduced" when every point's accuracy is within the spread and its bytes are
equal where compared, else "differs" and where ("nothing to compare" where no committed run
matches what ran). Written to OUT/reproduction.md and printed; exit status 1 when it differs.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from .suites.suite import load_suite
from .suites.layout import folders
from .suites.load import load

REPO = Path(__file__).resolve().parents[1]
SPREAD_SEEDS, SPREAD_FLOOR, ONE_SEED = 2.0, 0.5, 1.5  # points: x std, its floor, one seed's band
TIMING = {"digest-async", "digest-async-vanishing"}  # bytes, accuracy follow timing: not judged
SAME = ("train_loss", "val_acc")  # identical training: these columns equal, epoch by epoch


def value_dependent(config: dict) -> bool:
    """Whether a run's bytes follow its values (equal only where the training is identical)."""
    return (config.get("method") == "sancus" or config.get("quant_assign") == "adaptive"
            or config.get("sync_schedule") == "drift")


def _equal(a: pd.DataFrame, b: pd.DataFrame, cols) -> bool:
    cols = [c for c in cols if c in a.columns and c in b.columns]
    return len(a) == len(b) and bool(cols) and all(a[c].equals(b[c]) for c in cols)


def _csv(path: Path) -> dict:
    """{(dataset, method, workers): row} of a table, {} when there is none."""
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError):
        return {}
    return {(r["dataset"], r["method"], int(r["workers"])): r for r in df.to_dict("records")}


def ratio(key, folder: Path) -> tuple[float, str]:
    """Per-epoch time as a ratio to exact at ``key`` in a tables folder: (value, interval text)."""
    timed = _csv(folder / "timing.csv").get(key)
    if timed is not None and pd.notna(timed.get("speedup")):
        lo, hi = timed.get("speedup_lo"), timed.get("speedup_hi")
        return float(timed["speedup"]), f" [{lo:.2f}, {hi:.2f}]" if pd.notna(lo) else ""
    row = _csv(folder / "epoch_time.csv").get(key)
    return (float(row["speedup_vs_exact"]), "") if row is not None else (float("nan"), "")


def compare(mine: list, theirs: list, out: Path, committed: Path) -> list[dict]:
    """One dict per (dataset, method, M) of ``mine`` (RunRecords): the columns of the report."""
    groups: dict = {}
    for r in mine:
        groups.setdefault((r.dataset, r.label, r.workers), []).append(r)
    rows = []
    for key, runs in groups.items():
        ref = {r.seed: r for r in theirs if (r.dataset, r.label, r.workers) == key}
        row = {"dataset": key[0], "method": key[1], "M": key[2], "seeds": len(runs),
               "acc": 100 * pd.Series([r.summary.get("test_at_best_val") for r in runs]).mean()}
        paired = [(r, ref[r.seed]) for r in runs if r.seed in ref]
        if not ref:
            rows.append({**row, "verdict": "not compared (no committed run)"})
            continue
        all_c = pd.Series([c.summary.get("test_at_best_val") for c in ref.values()]) * 100
        same = [100 * c.summary.get("test_at_best_val") for _, c in paired] or list(all_c)
        half = max(SPREAD_SEEDS * all_c.std(), SPREAD_FLOOR) if len(all_c) > 1 else ONE_SEED
        identical = len(paired) == len(runs) and all(_equal(r.metrics, c.metrics, SAME)
                                                     for r, c in paired)
        row.update(committed=sum(same) / len(same), delta=row["acc"] - sum(same) / len(same),
                   band=(all_c.mean() - half, all_c.mean() + half), half=half,
                   identical=identical)
        row["within"] = row["band"][0] <= row["acc"] <= row["band"][1]
        row["MiB"] = sum(r.metrics["bytes_total"].mean() for r in runs) / len(runs) / 2**20
        config = runs[0].summary.get("config", {})
        timing = config.get("method") in TIMING
        if timing:
            row["bytes"] = "not compared (timing-dependent)"
        elif not paired:
            row["bytes"] = "not compared (no committed run at these seeds)"
        elif all(_equal(r.metrics, c.metrics, ["bytes_total"]) for r, c in paired):
            row["bytes"] = "equal"
        elif value_dependent(config) and not identical:
            row["bytes"] = "not compared (follow the values, which differ)"
        else:
            row["bytes"] = "DIFFER"
        row["ratio"], (row["ratio_c"], row["interval"]) = ratio(key, out)[0], ratio(key, committed)
        bad = [*([] if row["within"] else ["accuracy"]), *(["bytes"] if row["bytes"] == "DIFFER" else [])]
        row["verdict"] = ("differs: " + " and ".join(bad)) if bad else (
            "identical" if identical else "reproduced")
        if timing:
            row["verdict"] = "not judged (timing-dependent)" + ("" if row["within"] else ", outside")
        rows.append(row)
    return rows


def _x(v: float) -> str:
    return "n/a" if pd.isna(v) else f"{v:.2f}x"


def render(suite: str, rows: list[dict], runs: Path, committed: Path, commits) -> tuple[str, bool]:
    """The report (markdown) and whether it says differs."""
    compared = [r for r in rows if "committed" in r and not r["verdict"].startswith("not judged")]
    loose = [r for r in rows if r["verdict"].startswith("not judged")]
    bad = [r for r in compared if r["verdict"].startswith("differs")]
    lines = [f"# Reproduction report: suite {suite}", "",
             f"Your runs ({runs}, commit {commits[0]}) against the committed ones ({committed}/runs, "
             f"commit {commits[1]}). Accuracy: test accuracy at best validation (%), your mean over "
             f"the seeds you ran; Δ against the committed runs at those seeds; within = inside the "
             f"committed mean ± max({SPREAD_SEEDS:g} std, {SPREAD_FLOOR} points) over its seeds, or "
             f"± {ONE_SEED} points for a one-seed method. Bytes: every epoch's bytes_total, run by "
             f"run, must be equal. DIGEST-A's bytes and accuracy follow the workers' relative speeds (the "
             f"staleness they give), i.e. the machine and its load: shown, not judged. Per-epoch time "
             f"/ exact's: yours against the committed machine's, information only (not judged).", "",
             "| graph | method | M | seeds | yours % | committed % | Δ | within | MiB/epoch | bytes "
             "| time ratio yours | committed | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "committed" not in r:
            lines.append(f"| {r['dataset']} | {r['method']} | {r['M']} | {r['seeds']} | "
                         f"{r['acc']:.2f} | | | | | | | | {r['verdict']} |")
            continue
        lines.append(
            f"| {r['dataset']} | {r['method']} | {r['M']} | {r['seeds']} | {r['acc']:.2f} | "
            f"{r['committed']:.2f} | {r['delta']:+.2f} | {'yes' if r['within'] else 'NO'} "
            f"(±{r['half']:.2f}) | {r['MiB']:.3f} | {r['bytes']} | {_x(r['ratio'])} | "
            f"{_x(r['ratio_c'])}{r['interval']} | {r['verdict']} |")
    same = sum(r.get("identical", False) for r in compared)
    where = "; ".join(f"{r['dataset']} {r['method']} M={r['M']} ({r['verdict'][9:]}: "
                      f"Δ {r['delta']:+.2f} points, bytes {r['bytes']})" for r in bad)
    aside = "; not judged (timing-dependent): " + ", ".join(
        f"{r['dataset']} {r['method']} M={r['M']} (Δ {r['delta']:+.2f} points)" for r in loose)
    verdict = (f"reproduction of suite {suite}: " + (
        f"differs at {len(bad)} of {len(compared)} points: {where}" if bad else
        f"reproduced ({len(compared)} of {len(rows)} points judged: accuracy within the committed "
        f"spread, bytes equal where compared; {same} identical to the last digit)" if compared else
        "nothing to compare (no committed run of what ran)") + (aside if loose else ""))
    return "\n".join([*lines, "", verdict, ""]), bool(bad)


def _commit(c: str | None) -> str:
    return "?" if not c else c[:7] + ("-dirty" if c.endswith("-dirty") else "")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.reproduce", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", required=True, help="suite name in experiments/configs or a YAML path")
    p.add_argument("--runs", required=True, help="your runs folder (run_all.sh: runs/<suite>/runs)")
    p.add_argument("--out", required=True, help="your tables folder: reproduction.md goes there")
    p.add_argument("--committed", default=None,
                   help="the committed tables folder, its runs in runs/ (default: the suite's)")
    args = p.parse_args(argv)
    try:
        name = load_suite(args.suite).name
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    committed = Path(args.committed or folders(name)[0])  # relative: to the repository
    if not committed.is_absolute() and not committed.exists():
        committed = REPO / committed
    mine, theirs = load(args.runs, args.suite).records, load(committed / "runs", args.suite).records
    commits = [", ".join(sorted({_commit(r.summary.get("git_commit")) for r in x})) or "none"
               for x in (mine, theirs)]
    text, differs = render(name, compare(mine, theirs, Path(args.out), committed), Path(args.runs),
                      committed, commits)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "reproduction.md").write_text(text)
    print(text, end="")
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
