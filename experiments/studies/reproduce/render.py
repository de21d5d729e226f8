"""The reproduction report, reproduction.md (the comparison: experiments/studies/reproduce/analysis.py):
one row per point the user's runs cover, and the last line, reproduced or differs and where."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .analysis import ONE_SEED, SPREAD_FLOOR, SPREAD_SEEDS


def commits(*records) -> list[str]:
    """Each list of runs' git commits, short ("abc1234", "-dirty" kept), comma-separated."""
    return [", ".join(sorted({_commit(r.summary.get("git_commit")) for r in x})) or "none"
            for x in records]


def _commit(c: str | None) -> str:
    return "?" if not c else c[:7] + ("-dirty" if c.endswith("-dirty") else "")


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

