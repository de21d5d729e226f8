"""Run records: the per-epoch table, the summary, the machine they came from; written atomically
so that a killed run leaves a complete result or none (never a truncated CSV)."""
from __future__ import annotations

import csv
import io
import json
import os
import platform
import resource
import subprocess
from pathlib import Path

import torch

from ..files import write_text_atomic


def csv_text(rows: list[dict]) -> str:
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def _status_mb(field: str) -> float | None:
    """A memory line of /proc/self/status in MiB, or None (not Linux)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        pass
    return None  # pragma: no cover


def peak_memory_mb() -> float:
    """Peak resident memory of this process in MiB: Linux's VmHWM, the high-water mark of this
    program's own memory. ``ru_maxrss`` (the fallback elsewhere) also counts the parent's resident
    memory at the fork + exec that started a worker, so a launcher that had just generated a large
    dataset would make every worker report its size."""
    peak = _status_mb("VmHWM")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 if peak is None else peak


def startup_memory() -> dict:
    """This worker's memory once its trainer is built: the peak so far (the start-up's, e.g. a
    view's CSR build) and what stays resident into training (MiB; None where not Linux)."""
    rss = _status_mb("VmRSS")
    return {"startup_peak_mb": peak_memory_mb(), "resident_after_startup_mb": rss}


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def machine(world: int, local_world: int, threads: int) -> dict:
    """The hardware a result came from, and how many workers shared its cores."""
    try:
        import psutil
        ram = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:  # pragma: no cover
        ram = None
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    cores = available_cores()
    return {"host": platform.node(), "cpu": platform.processor() or platform.machine(),
            "cores": cores, "ram_gib": ram, "gpu": gpu, "workers": world,
            "workers_per_node": local_world, "threads_per_worker": threads,
            "cores_shared": f"{local_world} worker{'s' if local_world > 1 else ''} on {cores} cores"}


def versions() -> dict:
    import numpy
    import torch_geometric
    out = {"python": platform.python_version(), "torch": torch.__version__,
           "torch_geometric": torch_geometric.__version__, "numpy": numpy.__version__}
    try:
        import pymetis  # noqa: F401
        from importlib.metadata import version
        out["pymetis"] = version("pymetis")
    except Exception:  # pragma: no cover
        pass
    return out


def git_commit(here: Path | None = None) -> str:
    """HEAD, with "-dirty" when tracked files outside results/ and plots/ differ from it. Those two
    folders hold outputs, committed run files included: a suite that reruns a
    committed run rewrites its summary.json, which must not mark the code of every later run as
    uncommitted."""
    try:
        here = Path(here or Path(__file__).resolve().parent)
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                                ":(top)", ":(top,exclude)results", ":(top,exclude)plots"],
                               cwd=here, capture_output=True, text=True, timeout=5).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except Exception:
        return "unknown"


def best_validation(rows: list[dict]) -> dict:
    """Test accuracy at the epoch of best validation accuracy (OGB protocol; first best wins)."""
    evaluated = [r for r in rows if r.get("val_acc") not in (None, "")]
    if not evaluated:
        return {"best_val": None, "test_at_best_val": None, "best_epoch": None}
    best = max(evaluated, key=lambda r: (r["val_acc"], -r["epoch"]))
    return {"best_val": best["val_acc"], "test_at_best_val": best["test_acc"],
            "best_epoch": best["epoch"]}


def write_json(path, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, default=str) + "\n")
