"""A user's runs of a suite against the committed ones, compared (the reproduction report:
experiments/studies/reproduce/render.py writes it, ``python -m experiments.studies.reproduce`` runs both; the rules
are that command's): per (dataset, method, M), accuracy against the committed spread, bytes per
epoch run by run, the per-epoch time ratio to exact, and the verdict."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments.suites.registry import register_methods


SPREAD_SEEDS, SPREAD_FLOOR, ONE_SEED = 2.0, 0.5, 1.5  # points: x std, its floor, one seed's band
SAME = ("train_loss", "val_acc")  # identical training: these columns equal, epoch by epoch


def bytes_follow(config: dict) -> str:
    """What a run's bytes follow, as its method registers it: "timing" (asynchronous: bytes and
    accuracy not judged), "values" (equal only where the training is identical) or "data"."""
    method = register_methods().METHODS.get(config.get("method", "exact"))
    return "data" if method is None else method.bytes_follow(config)


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
        follows = bytes_follow(config)
        timing = follows == "timing"
        if timing:
            row["bytes"] = "not compared (timing-dependent)"
        elif not paired:
            row["bytes"] = "not compared (no committed run at these seeds)"
        elif all(_equal(r.metrics, c.metrics, ["bytes_total"]) for r, c in paired):
            row["bytes"] = "equal"
        elif follows == "values" and not identical:
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

