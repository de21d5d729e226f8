"""results/reliability/README.md: the fault campaign's report (its trials:
experiments/studies/faults/campaign.py), one row per method counting every check its trials passed, and the
trials that did not."""
from __future__ import annotations

from datetime import datetime, timezone

from .campaign import (ACC_TOL, DATASET, EPOCHS, EVERY, FLAP_S, ROOT, WORKERS, passed)


COLUMNS = {  # the report's per-method table: header -> how a trial counts in it
    "faults hit": lambda r: r["killed_rc"] != 0 and "checkpoint_epoch" in r or
    r.get("fault") == "flap" and r["killed_rc"] == 0,
    "one-line error": lambda r: r["killed_rc"] == 1 and r["killed_lines"] == 1,
    "names the rank": lambda r: r["names_rank"],
    "no result left": lambda r: not r["result_left"],
    "damaged set refused": lambda r: r.get("damaged_refused", False),
    "resumed": lambda r: r.get("resume_rc") == 0,
    "identical / within tol.": lambda r: r["verdict"] in ("identical", "within tolerance"),
    "processes left": lambda r: r["survivors"],
    "namespaces left": lambda r: r.get("namespaces_left", 0),  # created, there at the end
    "temp files left": lambda r: r.get("temp_left", 0),
    "all checks": passed,
}
# The columns a trial whose link came back (``flap``) has: its run must finish, so there is no
# error line, no lost rank, nothing to refuse or resume; the rest read "n/a" on its rows.
RIDDEN_OUT = ("faults hit", "identical / within tol.", "processes left", "namespaces left",
              "temp files left", "all checks")



LINK_FAULTS = (  # what the report says of the faults beside the SIGKILL, where trials had them
    "Behind emulated links ({network}: digest/runtime/netem.py, `--emulate-network {network}`), "
    "the fault may also be a SIGSTOP of the rank (`stop`: the launcher ends the run once the rank "
    "has stayed stopped for DIGEST_STOPPED_GRACE_S, 30 s, and names it), its link cut for good "
    "(`cut`: its end of its veth taken down inside its namespace; the collective timeout, "
    "`--timeout 30`, ends the run and the line names the rank whose link was down), each then "
    "checked as a kill is, or its link cut for {flap} s (`flap`, at the start of step `epoch`): "
    "the run must ride it out, every metrics.csv row identical to the uninterrupted run's (also "
    "behind the link), no resume. `seconds`: how long the faulted run took.")


def report(trials: list[dict], command: str, seconds: float,
           table: str = "results/reliability/trials.csv", network: str | None = None) -> str:
    from digest.training.metrics import git_commit, machine, versions
    m = machine(WORKERS, WORKERS, 1)
    lines = [
        "# Reliability: the fault campaign", "",
        f"Command: `{command}` (code {git_commit(ROOT)}, {datetime.now(timezone.utc):%Y-%m-%d}; "
        f"{seconds / 60:.0f} min). Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB, "
        f"GPU {m['gpu']}; {m['cores_shared']}. Versions: "
        + ", ".join(f"{k} {v}" for k, v in versions().items()) + ". One row per trial: "
        f"{table}.", "",
        f"Every trial: `python -m digest train --dataset {DATASET} --workers {WORKERS} --hidden 16 "
        f"--dropout 0 --epochs {EPOCHS} --checkpoint-every {EVERY}` (DIGEST methods: "
        "`--sync-interval 3`; DIGEST-A: `--eval-every 5`), "
        "rank `rank` SIGKILLed at a random moment of a random step `epoch` (or the first step "
        "after it that starts with a checkpoint committed; digest/runtime/faults.py); then a copy "
        "of the run with its committed checkpoint file corrupted (odd trials: truncated) must be "
        "refused by `--resume` in one line; then a newer damaged set is planted where the kill "
        "left none, and `--resume` must finish the run. Synchronous methods: every metrics.csv "
        "row (epoch, train loss, accuracies) identical to the uninterrupted run's. DIGEST-A "
        f"(asynchronous: a continuation, not a replay): all {EPOCHS} x {WORKERS} gradients "
        f"applied and final test, final and best validation accuracy within {ACC_TOL} of the "
        "uninterrupted run's. Processes left: any process of the run alive 5 s after it ended "
        "(then killed); namespaces left: network namespaces created during a trial and still "
        "there when the campaign ended; temp files: `*.tmp` or progress.csv in the finished run.",
        ""]
    faults = list(dict.fromkeys(r.get("fault", "kill") for r in trials))
    if faults != ["kill"]:
        lines += [LINK_FAULTS.format(network=network or "loopback", flap=FLAP_S), ""]
    lines += ["| method | fault | trials | " + " | ".join(COLUMNS) + " |",
              "|---|---|---:|" + "---:|" * len(COLUMNS)]
    for method, fault in dict.fromkeys((r["method"], r.get("fault", "kill")) for r in trials):
        mine = [r for r in trials if r["method"] == method and r.get("fault", "kill") == fault]
        lines.append(f"| {method} | {fault} | {len(mine)} | " + " | ".join(
            str(sum(int(f(r)) for r in mine)) if fault != "flap" or name in RIDDEN_OUT else "n/a"
            for name, f in COLUMNS.items()) + " |")
    failed = [r for r in trials if not passed(r)]
    lines += ["", f"{len(trials) - len(failed)} of {len(trials)} trials passed every check."]
    if failed:
        lines += ["", "Trials that did not:", ""] + [
            f"- {r['method']} trial {r['trial']} ({r.get('fault', 'kill')}, rank {r['rank']}, "
            f"step {r['epoch']}): "
            f"{r['verdict']}; killed run: exit {r['killed_rc']}, `{r['error']}`"
            for r in failed]
    return "\n".join(lines) + "\n"

