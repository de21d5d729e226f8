"""The fault campaign (results/reliability.md): for every method, N trials of a SIGKILL of a random rank at a
random moment of a random epoch after the first checkpoint, then ``--resume``; each resumed run
checked against the method's uninterrupted run, and each trial's committed checkpoint, damaged in
a copy, refused in one line::

    python -m experiments.fault_campaign --trials 10      # every method; results/reliability.md
    python -m experiments.fault_campaign --methods exact --trials 2 --out /tmp/f --report /tmp/f/r.md

A trial, as a user meets it: the command runs as a real ``python -m digest train`` (2 workers,
``experiments/watch.py`` watching every process it starts). The fault is
``experiments/faults.py``'s epoch hook: a SIGKILL of rank ``rank`` at a random moment of step
``epoch`` or the first step after it that starts with a checkpoint committed. Then:

- the killed run must fail with one line naming a lost worker, leave no result and no process;
- a copy of the run whose committed checkpoint file is corrupted (a byte flipped) or truncated
  must be refused in one line by ``--resume``;
- a newer, damaged, uncommitted set is planted (as a kill while writing one leaves it) unless the
  kill left one itself; ``--resume`` must still continue from the committed set to the end;
- synchronous methods: every metrics.csv row (epoch, loss, accuracies) equal to the
  uninterrupted run's; DIGEST-A (asynchronous, so a continuation and not a replay): the whole
  budget (epochs x workers gradients) and final and best accuracies within ``ACC_TOL``;
- no process, no network namespace and no temp file left behind.

Writes ``OUT/trials.csv`` (one row per trial) and the report (markdown) with the command, the
machine and the versions. Trials of a method run one after another; the runs live in ``--work``.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import random
import shutil
import subprocess
import sys
import time
import zipfile
from datetime import datetime, timezone
from pathlib import Path

from experiments.watch import run

from .suites.registry import register_methods

ROOT = Path(__file__).resolve().parents[1]
DATASET = "synthetic:nodes=300,avg_degree=5,features=16,classes=4,seed=1"
WORKERS, EPOCHS, EVERY = 2, 60, 12
# DIGEST-A, resumed against uninterrupted: final and best accuracies (60 validation and 60 test
# nodes, one node is 0.017). The settings are tests/asynchronous/test_async_resume.py's (60 epochs, no
# dropout: near convergence), where the spread measured was about 0.05; after 40 epochs with
# dropout 0.5 the runs were still on the steep part of the curve (0.57 against 0.80 test).
ACC_TOL = 0.1
METRICS = ("epoch", "train_loss", "train_acc", "val_acc", "test_acc")


def asynchronous(method: str) -> bool:
    """DIGEST-A and its variants: their own trainer, resumed within tolerance, not identically."""
    from digest.methods import get
    register_methods()
    return get(method).trainer is not None


def train_args(method: str, out: Path) -> list:
    from digest.methods import methods_with_option
    stale = ["--sync-interval", 3] if method in methods_with_option("sync_interval") else []
    # DIGEST-A evaluates snapshots of the server's parameters after the run: every 5th epoch
    return ["train", "--dataset", DATASET, "--method", method, "--workers", WORKERS, "--hidden",
            16, "--dropout", 0, "--epochs", EPOCHS, "--checkpoint-every", EVERY, "--eval-every",
            5 if asynchronous(method) else 1, *stale, "--timeout", 30, "--no-progress", "--out", out]


def environment(data: Path, fault: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("DIGEST_TEST") and k not in ("DIGEST_EPOCH_HOOK", "DIGEST_DEBUG",
                                                             "DIGEST_FAULT")}
    env.update(DIGEST_DATA=str(data), PYTHONPATH=str(ROOT))
    env["PYTHONWARNINGS"] = "ignore:Sparse invariant checks are implicitly disabled:UserWarning"
    if fault:
        env.update(DIGEST_EPOCH_HOOK="experiments.faults:inject", DIGEST_FAULT=fault)
    return env


def digest(args: list, cwd: Path, env: dict):
    return run([sys.executable, "-m", "digest", *args], cwd, env, timeout=300)


def rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def namespaces() -> set[str]:
    """The host's named network namespaces (none where `ip` is missing)."""
    try:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return set()
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def damage(path: Path, how: str) -> None:
    """``corrupt``: flip one byte in the middle of the file's largest tensor (torch.load alone
    would not notice); ``truncated``: cut the file in half."""
    data = bytearray(path.read_bytes())
    if how == "truncated":
        path.write_bytes(bytes(data[: len(data) // 2]))
        return
    with zipfile.ZipFile(path) as z:
        info = max(z.infolist(), key=lambda i: i.file_size)
    at = info.header_offset  # local header: 30 bytes, then the name and extra field
    start = at + 30 + int.from_bytes(data[at + 26:at + 28], "little") + \
        int.from_bytes(data[at + 28:at + 30], "little")
    data[start + info.file_size // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def refusal(out: Path) -> tuple[int, list[str]]:
    """``--resume out`` in this process (it must stop before starting any worker)."""
    from digest.cli import main
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["train", "--resume", str(out), "--no-progress"])
    return rc, [line for line in err.getvalue().splitlines() if line.strip()]


def compare(method: str, out: Path, ref: Path) -> str:
    """"" when the resumed run is what it must be, else what differs."""
    got, want = rows(out / "metrics.csv"), rows(ref / "metrics.csv")
    if not asynchronous(method):
        for g, w in zip(got, want):
            if [g.get(k) for k in METRICS] != [w.get(k) for k in METRICS]:
                return f"epoch {g['epoch']} differs: {[g.get(k) for k in METRICS]}"
        return "" if len(got) == len(want) else f"{len(got)} rows, not {len(want)}"
    s, r = (json.loads((p / "summary.json").read_text()) for p in (out, ref))
    if s["epochs"] != EPOCHS or s["server_versions"] != WORKERS * EPOCHS:
        return f"budget: {s['epochs']} epochs, {s['server_versions']} gradients"
    far = [k for k, a, b in (("test", s["final"]["test_acc"], r["final"]["test_acc"]),
                             ("val", s["final"]["val_acc"], r["final"]["val_acc"]),
                             ("best val", s["best_val"], r["best_val"])) if abs(a - b) > ACC_TOL]
    return f"{', '.join(far)} accuracy off by more than {ACC_TOL}" if far else ""


def trial(method: str, i: int, rng: random.Random, ref: Path, work: Path, data: Path) -> dict:
    out = work / method / f"trial{i}"
    shutil.rmtree(out, ignore_errors=True)
    rank, epoch, fraction = rng.randrange(WORKERS), rng.randrange(EVERY, EPOCHS - 4), rng.random()
    row = {"method": method, "trial": i, "rank": rank, "epoch": epoch,
           "fraction": round(fraction, 3)}
    before = namespaces()
    committed = out / "checkpoint" / "config.json"
    hit = digest(train_args(method, out), work,
                 environment(data, f"{rank}:{epoch}:{fraction:.3f}:{committed}"))
    lines = hit.lines
    row.update(killed_rc=hit.rc, killed_lines=len(lines), error=lines[-1] if lines else "",
               names_rank=bool(lines) and f"rank {rank} (killed by signal SIGKILL)" in lines[-1],
               result_left=(out / "summary.json").exists() or (out / "metrics.csv").exists())
    if hit.rc == 0 or not committed.exists():
        return {**row, "verdict": "fault missed: the run ended first" if hit.rc == 0 else
                "no committed checkpoint", "survivors": len(hit.survivors)}
    saved = json.loads(committed.read_text())["epoch"]
    newer = [p for p in committed.parent.glob("epoch*") if int(p.name[5:]) > saved]
    row.update(checkpoint_epoch=saved, partial_set_left=bool(newer))

    # the committed set damaged (in a copy): refused in one line, nothing started
    how = ("corrupt", "truncated")[i % 2]
    copy = work / method / f"trial{i}_damaged"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(out, copy)
    damage(copy / "checkpoint" / f"epoch{saved}" / f"rank{rng.randrange(WORKERS)}.pt", how)
    rc, err = refusal(copy)
    shutil.rmtree(copy)
    row.update(damage=how, damaged_rc=rc, damaged_refused=rc == 1 and len(err) == 1 and
               err[0].startswith("error: checkpoint") and how in err[0])

    if not newer:  # what a kill while writing the next set leaves: it must be ignored
        planted = committed.parent / f"epoch{saved + EVERY}"
        planted.mkdir()
        (planted / "rank0.pt").write_bytes(b"PK\x03\x04 truncated")
    resumed = digest(["train", "--resume", out, "--no-progress"], work, environment(data))
    # names new since the trial began (another job's count too: main() keeps those still there
    # when the campaign ends)
    row.update(resume_rc=resumed.rc, survivors=len(hit.survivors) + len(resumed.survivors),
               namespaces_new=" ".join(sorted(namespaces() - before)))
    if resumed.rc != 0:
        row["verdict"] = "resume failed: " + (resumed.lines[-1] if resumed.lines else "")
        return row
    row["temp_left"] = len(list(out.rglob("*.tmp"))) + (out / "progress.csv").exists()
    row["verdict"] = compare(method, out, ref) or ("identical" if not asynchronous(method) else
                                                    "within tolerance")
    return row


def passed(row: dict) -> bool:
    """Everything a trial must show (the module docstring's list)."""
    return (row["verdict"] in ("identical", "within tolerance") and row["killed_rc"] == 1
            and row["killed_lines"] == 1 and row["error"].startswith("error: lost worker")
            and not row["result_left"] and row.get("damaged_refused") is True
            and row["survivors"] == 0 and row.get("namespaces_left", 0) == 0
            and row.get("temp_left") == 0)


COLUMNS = {  # the report's per-method table: header -> how a trial counts in it
    "faults hit": lambda r: r["killed_rc"] != 0 and "checkpoint_epoch" in r,
    "one-line error": lambda r: r["killed_rc"] == 1 and r["killed_lines"] == 1,
    "names the killed rank": lambda r: r["names_rank"],
    "no result left": lambda r: not r["result_left"],
    "damaged set refused": lambda r: r.get("damaged_refused", False),
    "resumed": lambda r: r.get("resume_rc") == 0,
    "identical / within tol.": lambda r: r["verdict"] in ("identical", "within tolerance"),
    "processes left": lambda r: r["survivors"],
    "namespaces left": lambda r: r.get("namespaces_left", 0),  # created, there at the end
    "temp files left": lambda r: r.get("temp_left", 0),
    "all checks": passed,
}


def report(trials: list[dict], command: str, seconds: float,
           table: str = "results/reliability/trials.csv") -> str:
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
        "after it that starts with a checkpoint committed; experiments/faults.py); then a copy "
        "of the run with its committed checkpoint file corrupted (odd trials: truncated) must be "
        "refused by `--resume` in one line; then a newer damaged set is planted where the kill "
        "left none, and `--resume` must finish the run. Synchronous methods: every metrics.csv "
        "row (epoch, train loss, accuracies) identical to the uninterrupted run's. DIGEST-A "
        f"(asynchronous: a continuation, not a replay): all {EPOCHS} x {WORKERS} gradients "
        f"applied and final test, final and best validation accuracy within {ACC_TOL} of the "
        "uninterrupted run's. Processes left: any process of the run alive 5 s after it ended "
        "(then killed); namespaces left: network namespaces created during a trial and still "
        "there when the campaign ended; temp files: `*.tmp` or progress.csv in the finished run.",
        "",
        "| method | trials | " + " | ".join(COLUMNS) + " |",
        "|---|---:|" + "---:|" * len(COLUMNS)]
    for method in dict.fromkeys(r["method"] for r in trials):
        mine = [r for r in trials if r["method"] == method]
        lines.append(f"| {method} | {len(mine)} | "
                     + " | ".join(str(sum(int(f(r)) for r in mine)) for f in COLUMNS.values())
                     + " |")
    failed = [r for r in trials if not passed(r)]
    lines += ["", f"{len(trials) - len(failed)} of {len(trials)} trials passed every check."]
    if failed:
        lines += ["", "Trials that did not:", ""] + [
            f"- {r['method']} trial {r['trial']} (rank {r['rank']}, step {r['epoch']}): "
            f"{r['verdict']}; killed run: exit {r['killed_rc']}, `{r['error']}`"
            for r in failed]
    return "\n".join(lines) + "\n"


def write(table: Path, trials: list[dict]) -> None:
    with open(table, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in trials for k in r)),
                           restval="")
        w.writeheader()
        w.writerows(trials)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.fault_campaign", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--methods", help="comma-separated (default: every registered method)")
    p.add_argument("--trials", type=int, default=10, help="trials per method (default 10)")
    p.add_argument("--seed", type=int, default=0, help="of the random ranks, steps and moments")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "reliability")
    p.add_argument("--report", type=Path, default=ROOT / "results" / "reliability.md")
    p.add_argument("--work", type=Path, default=Path("/tmp/fault_campaign"),
                   help="where the runs live (failed trials' runs are kept there)")
    args = p.parse_args(argv)
    from tqdm import tqdm

    from digest.methods import METHODS
    register_methods()
    methods = args.methods.split(",") if args.methods else sorted(METHODS)
    unknown = [m for m in methods if m not in METHODS]
    if unknown or args.trials < 1:
        print(f"error: unknown method {', '.join(unknown)}" if unknown else
              "error: --trials must be >= 1", file=sys.stderr)
        return 2
    data = args.work / "data"
    os.environ["DIGEST_DATA"] = str(data)  # refusal() runs the CLI in this process
    args.out.mkdir(parents=True, exist_ok=True)
    table = args.out / "trials.csv"
    table.unlink(missing_ok=True)
    command = "python -m experiments.fault_campaign" + "".join(
        f" {a}" for a in (sys.argv[1:] if argv is None else argv))
    rng, trials, t0 = random.Random(args.seed), [], time.monotonic()
    bar = tqdm(total=len(methods) * (args.trials + 1), unit="run", desc="fault campaign")
    try:
        for method in methods:
            bar.set_postfix_str(f"{method} uninterrupted")
            ref = args.work / method / "uninterrupted"
            shutil.rmtree(ref, ignore_errors=True)
            done = digest(train_args(method, ref), args.work, environment(data))
            bar.update()
            if done.rc != 0:
                print(f"error: {method}'s uninterrupted run failed: "
                      f"{done.lines[-1] if done.lines else done.rc}", file=sys.stderr)
                return 1
            for i in range(args.trials):
                bar.set_postfix_str(f"{method} trial {i}")
                row = trial(method, i, rng, ref, args.work, data)
                row["passed"] = passed(row)
                if row["passed"]:
                    shutil.rmtree(args.work / method / f"trial{i}", ignore_errors=True)
                trials.append(row)
                write(table, trials)  # after every trial: an interrupted campaign keeps them
                bar.update()
    except KeyboardInterrupt:  # the trials done are kept, and reported as such
        interrupted = True
    else:
        interrupted = False
    finally:
        bar.close()
    if not trials:
        print("interrupted before any trial ended" if interrupted else "no trial ran",
              file=sys.stderr)
        return 130 if interrupted else 1
    final = namespaces()  # left behind: created during a trial and still there now
    for row in trials:
        row["namespaces_left"] = len(set(row.get("namespaces_new", "").split()) & final)
        row["passed"] = passed(row)
    write(table, trials)
    shown = table.resolve().relative_to(ROOT) if table.resolve().is_relative_to(ROOT) else table
    text = report(trials, command, time.monotonic() - t0, str(shown))
    if interrupted:
        text += f"\nInterrupted after {len(trials)} of {len(methods) * args.trials} trials.\n"
    args.report.write_text(text)
    failed = sum(not r["passed"] for r in trials)
    print(("interrupted; " if interrupted else "") +
          f"{len(trials) - failed} of {len(trials)} trials passed every check; {table}, "
          f"{args.report}" + (f"; failed runs kept in {args.work}" if failed else ""))
    return 130 if interrupted else 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
