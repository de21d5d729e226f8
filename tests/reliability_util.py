"""Run ``python -m digest ...`` as a user would (a real subprocess in its own session), watching
every process it starts, so a test can assert how it ended and that nothing outlived it."""
from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
FAULTS = ("DIGEST_TEST_KILL_RANK", "DIGEST_TEST_KILL_EPOCH", "DIGEST_TEST_RAISE_RANK",
          "DIGEST_TEST_KILL_AFTER", "DIGEST_EPOCH_HOOK")
HOOK = f"{ROOT / 'tests' / 'faults.py'}:inject"  # the trainer's epoch hook that injects them


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str
    seconds: float
    survivors: list  # descendants still alive (not zombies) 5 s after the command ended

    @property
    def lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _terminal_signals() -> None:
    """In the child: SIGINT and SIGQUIT as in a terminal (a shell's background job ignores them)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def cli(args, data_root, cwd, env: dict | None = None, timeout: float = 180,
        interrupt_after: float | None = None, interrupt_when: Path | None = None) -> Result:
    """``python -m digest *args``; ``env`` adds variables (the fault-injection hooks);
    ``interrupt_after`` seconds, or once the file ``interrupt_when`` exists (the run is training,
    not still starting up): Ctrl-C, i.e. SIGINT to the whole process group, as a terminal sends it
    (``seconds`` then counts from the interrupt)."""
    full = {k: v for k, v in os.environ.items() if k not in FAULTS and k != "DIGEST_DEBUG"}
    full.update(DIGEST_DATA=str(data_root), PYTHONPATH=str(ROOT), **(env or {}))
    if set(env or ()) & set(FAULTS):
        full["DIGEST_EPOCH_HOOK"] = HOOK
    # the one warning pytest.ini also ignores (torch's, from digest/models/sparse.py's CSR tensors)
    full["PYTHONWARNINGS"] = "ignore:Sparse invariant checks are implicitly disabled:UserWarning"
    cwd = Path(cwd)
    cwd.mkdir(parents=True, exist_ok=True)
    out, err = cwd / f".out{time.monotonic_ns()}", cwd / f".err{time.monotonic_ns()}"
    t0 = time.monotonic()
    with open(out, "w") as fo, open(err, "w") as fe:
        proc = subprocess.Popen([sys.executable, "-m", "digest", *map(str, args)], cwd=cwd,
                                env=full, stdout=fo, stderr=fe, start_new_session=True,
                                preexec_fn=_terminal_signals)
        seen: dict[int, psutil.Process] = {}
        while proc.poll() is None:
            due = interrupt_after is not None and time.monotonic() - t0 > interrupt_after
            if due or (interrupt_when is not None and Path(interrupt_when).exists()):
                os.killpg(proc.pid, signal.SIGINT)
                interrupt_after, interrupt_when, t0 = None, None, time.monotonic()
            if time.monotonic() - t0 > timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise AssertionError(f"python -m digest {' '.join(map(str, args))} hung")
            try:
                for c in psutil.Process(proc.pid).children(recursive=True):
                    seen.setdefault(c.pid, c)
            except psutil.Error:
                pass
            time.sleep(0.1)
    seconds = time.monotonic() - t0
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in seen.values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    survivors = [p.pid for p in seen.values() if _alive(p)]
    for pid in survivors:  # never leave them behind, even when the test fails
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    result = Result(proc.returncode, out.read_text(), err.read_text(), seconds, survivors)
    out.unlink()
    err.unlink()
    return result


def here(args, capsys) -> tuple[int, list[str]]:
    """``python -m digest *args`` without a new interpreter: exit status, stderr lines."""
    from digest.cli import main
    capsys.readouterr()
    rc = main([str(a) for a in args])
    return rc, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def rows(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


METRICS = ("epoch", "train_loss", "train_acc", "val_acc", "test_acc")


def metrics_of(path) -> list[tuple]:
    """The columns that must be reproducible (times and memory are not), as written."""
    return [tuple(r.get(k) for k in METRICS) for r in rows(path)]


def leftovers(directory) -> list[str]:
    """Temp files a killed writer could leave (atomic writes use *.tmp)."""
    return [str(p) for p in Path(directory).rglob("*.tmp")]


def assert_resumes_identically(common: list, data_root, tmp_path) -> None:
    """``common`` (a ``train`` command without --epochs/--out) run for 6 epochs directly, and for 4
    with a checkpoint every 2 then resumed to 6: the same metrics.csv rows. The direct run and the
    first part are independent: they run side by side (most of each is interpreter start-up)."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(2) as pool:
        direct = pool.submit(cli, [*common, "--epochs", 6, "--out", tmp_path / "direct"],
                             data_root, tmp_path)
        first = pool.submit(cli, [*common, "--epochs", 4, "--checkpoint-every", 2, "--out",
                                  tmp_path / "run"], data_root, tmp_path)
        direct, first = direct.result(), first.result()
    assert direct.rc == 0, direct.stderr[-3000:]
    assert first.rc == 0, first.stderr[-3000:]
    resumed = cli(["train", "--resume", tmp_path / "run", "--epochs", 6, "--no-progress"],
                  data_root, tmp_path)
    assert resumed.rc == 0, resumed.stderr[-3000:]
    assert metrics_of(tmp_path / "run" / "metrics.csv") == metrics_of(tmp_path / "direct" /
                                                                       "metrics.csv")
