"""tables.md's timing protocol (docs/methods.md section 11; the numbers: experiments/analysis/timing.py):
the per-epoch times (means over whole periods) and speedups of section 2 and the time-to-accuracy
speedups of section 3 as means of paired, same-round ratios with their 95% interval and their
number of pairs, beside the A/A noise floor; each speedup carries the verdict its interval
supports."""
from __future__ import annotations

import math

import pandas as pd

from ..analysis import rule_change
from ..analysis.timing import (AA_BAND, LEVEL, MIN_PAIRS, NO_DIFFERENCE, REPLICATES, VERDICT_WORDS,
                               Interval, clean, every_round, few_pairs, half_width_pct)
from ..suites.load import Loaded
from .markdown import cell, md_table


def _nan(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def interval(lo, hi) -> str:
    return "" if _nan(lo) or _nan(hi) else f"[{lo:.2f}, {hi:.2f}]"


def speedup_cell(row) -> str:
    """'1.52x [1.41, 1.60], faster'; 'no measurable difference (1.02x [0.97, 1.06])'; a point
    that is not clean says so; fewer than MIN_PAIRS pairs are said beside the interval
    ('1.52x [1.41, 1.60], faster; 3 pairs: below the 6 the protocol asks'); the reference and the
    A/A row say what they are; strings ('not reached') as they are."""
    v = row.speedup
    if isinstance(v, str):
        return v
    if row.verdict == "reference":
        return "1.00x (reference)"
    if _nan(v):
        return "n/a (no exact run in the same round)"
    text = f"{v:.2f}x {interval(row.speedup_lo, row.speedup_hi)}".strip()
    few = few_pairs(int(row.pairs)) if interval(row.speedup_lo, row.speedup_hi) else ""
    if row.verdict == "A/A (noise floor)":
        text = f"{text} (A/A: noise floor)"
    elif row.verdict == NO_DIFFERENCE:
        text = f"{NO_DIFFERENCE} ({text})"
    elif row.verdict in VERDICT_WORDS:
        text = f"{text}, {row.verdict}"
    return f"{text}; {few}" if few else text


def _runs(row) -> str:
    return f"{row.runs} ({row.seeds} seed(s) x {row.rounds} round(s))"


def protocol_note(loaded: Loaded, timing: pd.DataFrame) -> str:
    """What the paired columns are, with this suite's rounds, warm-up and timed epochs."""
    records = every_round(loaded)
    epochs = sorted({len(r.metrics) for r in records})
    rounds = sorted({r.round for r in records})
    timed = sorted({x.strip() for t in timing["timed_epochs"] for x in str(t).split(" / ")})
    aa = "an A/A label (exact-aa: exact under a second label)" if any(
        v == "A/A (noise floor)" for v in timing["verdict"]) else "no A/A label"
    return (f"\nTiming protocol (docs/methods.md section 11): {len(rounds)} round(s); at each point "
            "(dataset, M, network, seed) every method ran once per round, back to back, in a "
            "seeded random order (run.json: round, position and start time; runs started before "
            "the shuffle record no position: their rounds were rotated by one method); "
            f"{aa}. Warm-up: the first {loaded.warmup} epoch(s) of each run "
            f"(of {'/'.join(map(str, epochs))}) are left out; a run's per-epoch time is the MEAN "
            "over a window of whole periods of its method after the warm-up (timed epochs: "
            f"{'; '.join(timed)}; 'a x p' = a periods of p epochs; 'whole run' where not one "
            "period fits). Speedup = MEAN over pairs (same dataset, M, seed and round, both "
            "runs timed over the same window) of exact's time / the method's; [lo, hi] = its "
            f"{LEVEL:.0%} percentile-bootstrap interval ({REPLICATES} replicates, fixed seed; "
            "over pairs, i.e. rounds and seeds; its percentiles widened for few pairs: "
            f"experiments/analysis/paired.py); a cell from fewer than {MIN_PAIRS} pairs says so: "
            f"its interval holds less than {LEVEL:.0%}. A point is clean where its A/A interval "
            f"lies inside [{AA_BAND[0]}, {AA_BAND[1]}]; there the verdict is 'faster' / 'slower' "
            f"where the interval lies wholly above / below the A/A interval and '{NO_DIFFERENCE}' "
            "where it overlaps it (without an A/A label: against 1); a point that is not clean "
            "gets no verdict ('A/A not clean'). Accuracy, bytes and the other per-seed tables "
            "read round 0 (one run per seed).\n")


def epoch_tables(timing: pd.DataFrame, kind: str) -> str:
    """Section 2's measured tables: per-epoch time (mean over whole periods) and paired speedup,
    per M."""
    out = []
    for dataset, part in timing.groupby("dataset", sort=False):
        ms = sorted(set(part.workers))
        rows = []
        for label in dict.fromkeys(part.method):
            row = [label]
            for w in ms:
                hit = part[(part.method == label) & (part.workers == w)]
                row += ([cell(hit.epoch_ms.iloc[0], ".1f"), speedup_cell(hit.iloc[0]),
                         _runs(hit.iloc[0])] if len(hit) else ["", "", ""])
            rows.append(row)
        out.append(f"\n### {dataset}: {kind}, paired over rounds\n\n")
        out.append(md_table(["method", *[h for w in ms for h in (
            f"M={w} mean ms", f"M={w} speedup [{LEVEL:.0%}]", f"M={w} runs")]], rows))
    return "".join(out)


def floor_table(timing: pd.DataFrame) -> str:
    """The noise floor at every point: each A/A row's interval, its pairs and its half-width,
    (hi - lo) / 2 in percent of a 1x ratio (pinned, quota-capped runs aim at 10% or less), and
    whether the point is clean."""
    aa = timing[timing["verdict"] == "A/A (noise floor)"]
    if aa.empty:
        return ""
    rows = [[r.dataset, r.method, r.workers, f"{r.speedup:.2f}x",
             interval(r.speedup_lo, r.speedup_hi), r.pairs,
             "" if _nan(r.speedup_lo) else f"{half_width_pct(r.speedup_lo, r.speedup_hi):.1f}%",
             ("clean" if clean_row(r) else "not clean: no verdict")
             + (f" ({few_pairs(r.pairs)})" if few_pairs(r.pairs) else "")]
            for r in aa.itertuples()]
    ok = sum(clean_row(r) for r in aa.itertuples())
    return ("\n### The noise floor at each point\n\nThe A/A ratio (exact against its twin label, "
            "paired like every method), its interval and half-width, (hi - lo) / 2 of a 1x "
            "ratio: a speedup must clear this interval before it means anything at its point. A "
            f"point is clean where the A/A interval lies inside [{AA_BAND[0]}, {AA_BAND[1]}]: "
            f"{ok} of {len(aa)} point(s) are clean.\n\n"
            + md_table(["dataset", "A/A label", "M", "A/A", f"interval [{LEVEL:.0%}]", "pairs",
                        "half-width", "check"], rows))


def clean_row(r) -> bool:
    """Whether an A/A row of timing.csv shows its point clean (timing.clean, on the table)."""
    return clean(Interval(r.speedup, r.speedup_lo, r.speedup_hi, r.pairs))


def seed_floor_table(seeds: pd.DataFrame | None) -> str:
    """The noise floor at each seed apart (timing_floor_seeds.csv), where the A/A label ran at
    several: the table above pools them."""
    if seeds is None or seeds.empty:
        return ""
    rows = [[r.dataset, r.method, r.workers, r.seed, r.pairs, interval(r.aa_lo, r.aa_hi),
             f"{r.half_width_pct:.1f}%"] for r in seeds.itertuples()]
    return ("\nThe same at each seed apart (a seed draws its own split and model: a point of "
            "its own), from that seed's rounds alone:\n\n"
            + md_table(["dataset", "A/A label", "M", "seed", "pairs", f"interval [{LEVEL:.0%}]",
                        "half-width"], rows))


def tta_tables(tta: pd.DataFrame, kind: str) -> str:
    """Section 3's paired time-to-accuracy speedups, on the training clock."""
    if tta.empty:
        return ""
    out = ["\nTime to accuracy on the training clock: the epochs' times summed up to the first "
           "evaluation at the target (the warm-up counted: it is training; evaluation left out, "
           "its seconds beside); epochs and times: median over every round's runs; speedup = "
           "mean over same-round pairs of exact's time / the method's, bootstrapped over "
           "pairs. time_to_accuracy.csv keeps round 0's table (one run per seed).\n"]
    for dataset, part in tta.groupby("dataset", sort=False):
        out.append(f"\n### {dataset}: {kind}, paired over rounds\n\n")
        out.append(md_table(
            ["target", "method", "M", "target val", "runs reached", "pairs", "epochs", "train s",
             "evaluation s left out", f"speedup [{LEVEL:.0%}]"],
            [[f"{r.target:g}", r.method, r.workers, cell(r.target_val, ".4f"), r.reached,
              r.pairs or "–", cell(r.epochs, ".1f"), cell(r.train_s, ".2f"), cell(r.eval_s_excluded, ".2f"),
              speedup_cell(r)]
             for r in part.itertuples()]))
    return "".join(out)


def change_table(change: pd.DataFrame | None) -> str:
    """What the corrected timing rule changed (experiments/analysis/rule_change.py): the rows whose verdict
    changed or whose ratio moved by 5% or more, former beside today's."""
    if change is None or change.empty:
        return ""
    moved = rule_change.notable(change)
    head = (f"\n### What the corrected timing rule changed\n\nThe same runs under the rule these "
            "speedups were first published with (a run's time = its median timed epoch; the "
            "bootstrap also over epochs; a verdict from the overlap with the A/A interval alone) "
            f"and under today's: {summary(change)}.")
    if moved.empty:
        return head + "\n"
    rows = [[r.dataset, r.method, r.workers,
             f"{r.former:.2f}x {interval(r.former_lo, r.former_hi)}", r.former_verdict,
             f"{r.speedup:.2f}x {interval(r.speedup_lo, r.speedup_hi)}", r.verdict,
             f"{r.change_pct:+.0f}%"] for r in moved.itertuples()]
    return head + " Those rows:\n\n" + md_table(
        ["dataset", "method", "M", "former ratio", "former verdict", "ratio", "verdict",
         "change"], rows)


def summary(change: pd.DataFrame) -> str:
    """'3 of 20 verdicts changed, 5 ratios moved by 5% or more (largest -22%: digest-I10@50mbit)'."""
    verdicts = int((change.former_verdict != change.verdict).sum())
    big = change[change.change_pct.abs() >= 100 * rule_change.MOVED]
    text = f"{verdicts} of {len(change)} verdicts changed, {len(big)} ratio(s) moved by 5% or more"
    if len(big):
        top = big.loc[big.change_pct.abs().idxmax()]
        text += f" (largest {top.change_pct:+.0f}%: {top.method} at M={top.workers})"
    return text
