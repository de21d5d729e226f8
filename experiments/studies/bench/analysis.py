"""The bench's record, performance.json (``python -m experiments.studies.bench``; docs/performance.md): the
targets of its ratios, a graph's result from the interleaved epochs, the DIGEST-versus-exact
part from its alternated runs, which run measured which part, the history of earlier runs, and
the numbers the report states beside the ratios (core utilisation, the halo's share, the
paired verdict of results/repro_speed). experiments/studies/bench/render.py writes the report."""
from __future__ import annotations

import csv
import re
import statistics
from pathlib import Path

from digest.training import record
from experiments.analysis.costmodel import modeled_epoch_times, parse_network

from .contest import OURS

GOALS = {"photo": 1.10, "physics": 0.33, "digest_bytes": 0.10, "digest_time": 0.75}
NETWORK = "10gbit,5us"
PARTS = ("photo", "physics", "digest_vs_exact")  # the parts of a ratios record, each measured by a run


def digest_vs_exact(runs: dict, dataset: str, workers: int, epochs: int) -> dict:
    """The DIGEST-versus-exact part of a ratios record from the alternated CLI runs
    (``{method: [cli_run result]}``, experiments/studies/bench/contest.py): per method the
    representation and parameter bytes per epoch, mean and median epoch time over epochs >= 1,
    communication time, the cost model's times, CPU seconds, peak memory; then DIGEST / exact."""
    import pandas as pd

    net = parse_network(NETWORK)
    res = {}
    for method, rs in runs.items():
        m = pd.concat([x["metrics"] for x in rs], ignore_index=True)
        later = m[m["epoch"] >= 1]
        rep = m["bytes_halo_fwd"] + m["bytes_halo_bwd"] + m["bytes_store"]
        res[method] = {
            "repr_bytes_per_epoch": float(rep.mean()),
            "bytes_by_category_per_epoch": {c: float(m[f"bytes_{c}"].mean())
                                            for c in ("halo_fwd", "halo_bwd", "store", "params")},
            "mean_epoch_s": float(later["epoch_time"].mean()),
            "median_epoch_s": float(later["epoch_time"].median()),
            "mean_comm_s": float(later["comm_time"].mean()),
            # the history's "modeled" column keeps its definition (wall compute); the cost model
            # itself now uses CPU seconds, which is modeled_cpu_epoch_s here
            "modeled_epoch_s": float(modeled_epoch_times(later, net, compute="wall").mean()),
            "modeled_cpu_epoch_s": modeled_cpu(later, net),
            "cpu_s_per_epoch": cpu_seconds(later),
            "peak_mem_mb_per_worker": float(m["peak_mem_mb"].max()),
            "command": rs[0]["command"], "runs": len(rs), "epochs_per_run": epochs,
        }
    d, e = res["digest"], res["exact"]
    return {"dataset": dataset, "workers": workers, "network": net.label, **{k: res[k] for k in res},
            "bytes_ratio": d["repr_bytes_per_epoch"] / e["repr_bytes_per_epoch"],
            "time_ratio": d["mean_epoch_s"] / e["mean_epoch_s"],
            "time_ratio_median": d["median_epoch_s"] / e["median_epoch_s"],
            "modeled_ratio": d["modeled_epoch_s"] / e["modeled_epoch_s"],
            "modeled_cpu_ratio": (d["modeled_cpu_epoch_s"] / e["modeled_cpu_epoch_s"]
                                  if d["modeled_cpu_epoch_s"] and e["modeled_cpu_epoch_s"] else None),
            "cpu_ratio": (d["cpu_s_per_epoch"] / e["cpu_s_per_epoch"]
                          if d["cpu_s_per_epoch"] and e["cpu_s_per_epoch"] else None)}


def cpu_seconds(metrics) -> float | None:
    """Mean CPU seconds per epoch summed over the workers (every thread of each process, kernel
    time of the loopback transfers included). When the workers saturate the machine's cores, the
    epoch time follows this total, whatever the bytes. None without cpu_time_w columns."""
    cols = [record.per_worker(record.CPU_TIME, r)
            for r in record.worker_ranks(metrics.columns, record.CPU_TIME)]
    return float(metrics[cols].sum(axis=1).mean()) if cols else None


def modeled_cpu(metrics, net) -> float | None:
    """The cost model with each worker's CPU seconds as its compute time: on a machine whose
    workers share cores, wall-clock compute includes waiting for a core, which a cluster with a
    machine per worker would not see. None when the run has no cpu_time_w columns."""
    ranks = record.worker_ranks(metrics.columns, record.CPU_TIME)
    if not ranks:
        return None
    col = record.per_worker
    per = [metrics[col(record.CPU_TIME, r)] + metrics[col(record.BYTES, r)] / net.bandwidth
           + metrics[col(record.MESSAGES, r)] * net.latency for r in ranks]
    import pandas as pd
    return float(pd.concat(per, axis=1).max(axis=1).mean())


RUN_KEYS = ("date", "command", "git_commit", "load_start", "load_end", "machine")


def run_info(r: dict) -> dict:
    """The record of the run that measured a part: date, command, commit, load, machine."""
    return {k: r.get(k) for k in RUN_KEYS}


def measured_in(r: dict, key: str) -> dict:
    """Part ``key`` of ratios record ``r`` if run ``r`` measured it, else ``{}`` (a part kept from
    an earlier run carries that run's record in ``part["run"]``; records written before parts
    carried one were measured whole)."""
    part = r.get(key) or {}
    run = part.get("run")
    return part if run is None or run.get("date") == r.get("date") else {}


def summary(r: dict) -> dict:
    """The headline numbers of an earlier ratios run, kept in the json's history: only the parts
    that run measured (a part it kept from an earlier run is in that run's summary)."""
    dv = measured_in(r, "digest_vs_exact")
    return {"date": r.get("date"), "command": r.get("command"), "load_start": r.get("load_start"),
            "git_commit": r.get("git_commit"),
            "photo": measured_in(r, "photo").get("ratio"),
            "physics": measured_in(r, "physics").get("ratio"),
            "physics_reference": measured_in(r, "physics").get("reference"),
            "digest_bytes": dv.get("bytes_ratio"), "digest_time": dv.get("time_ratio"),
            "digest_modeled": dv.get("modeled_ratio"), "digest_modeled_cpu": dv.get("modeled_cpu_ratio")}


def kept_parts(old: dict, skip: set) -> dict:
    """The previous record's parts that this run leaves out (``skip``: photo, physics, digest),
    each carrying the record of the run that measured it."""
    keys = {"digest": "digest_vs_exact"}
    out = {}
    for name in skip:
        key = keys.get(name, name)
        if old.get(key):
            out[key] = {**old[key], "run": old[key].get("run") or run_info(old)}
    return out


def graph_result(name: str, res: dict, epochs: int, warmup: int) -> dict:
    """A graph's record from ``interleaved``'s results: the ratio divides our median by the
    FASTEST plain variant's (the hardest reference; on Physics the sparse-features variant); the
    ratio against every plain variant is kept beside it."""
    plain = [n for n in res if n != OURS]
    ref = min(plain, key=lambda n: res[n]["median_s"])
    return {"dataset": name, "epochs": epochs, "warmup": warmup, "contestants": res,
            "reference": ref, "ratio": res[OURS]["median_s"] / res[ref]["median_s"],
            "ratios_by_reference": {n: res[OURS]["median_s"] / res[n]["median_s"] for n in plain}}


def history(old: dict) -> list[dict]:
    """The new run's history: the previous run's history and the previous run itself. Every
    earlier run stays (a few hundred bytes each): the spread across runs is the point."""
    return old.get("history", []) + ([summary(old)] if old.get("date") else [])


REPRO_SPEED = Path(__file__).resolve().parents[3] / "results" / "repro_speed"


def traceable(commit: str | None) -> bool:
    """A git commit that holds the code that ran: recorded, and no uncommitted changes."""
    return bool(commit) and not str(commit).endswith("-dirty")


def measured_from(r: dict, key: str) -> bool:
    """Whether run ``r`` itself measured part ``key`` (not kept it from an earlier run)."""
    run = (r.get(key) or {}).get("run")
    return bool(r.get(key)) and (run is None or run.get("date") == r.get("date"))


def repro_speed_verdict(dataset: str) -> str | None:
    """results/repro_speed/timing.csv's verdict for DIGEST (I = 10) on ``dataset``, if there."""
    try:
        with open(REPRO_SPEED / "timing.csv", newline="") as fh:
            for row in csv.DictReader(fh):
                if row["dataset"] == dataset and row["method"] == "digest-I10":
                    return row["verdict"]
    except (OSError, KeyError):
        return None
    return None


def halo_share(rows: dict) -> tuple[int, float] | None:
    """(M, mean local rows at the most parts M / the 1/M share of the single part's rows), or
    None without a 1-part and a multi-part record."""
    if 1 not in rows or len(rows) < 2:
        return None
    m = max(rows)
    return m, statistics.mean(rows[m]) / (statistics.mean(rows[1]) / m)


def machine_of(r: dict, part: dict | None = None) -> dict:
    """The machine of the run that measured ``part`` (the latest run's without a record)."""
    run = (part or {}).get("run") or {}
    return (run.get("machine") or r["machine"])["machine"]


def utilisation(side: dict, r: dict, part: dict | None = None) -> float:
    """CPU seconds per epoch over (cores x mean epoch time): 1.0 = every core busy all epoch."""
    return side["cpu_s_per_epoch"] / (machine_of(r, part)["cores"] * side["mean_epoch_s"])


def sync_interval(dv: dict) -> str:
    """DIGEST's sync interval, read from its recorded command."""
    found = re.search(r"--sync-interval (\d+)", dv["digest"].get("command", ""))
    return found.group(1) if found else "?"

