"""Symmetric contention (docs/methods.md section 11), as the tables' header states it: how many
workers shared how many cores, pinned or not, under a per-worker CPU quota or not, read from each
run's summary.json (``machine.pinning``, ``emulation.cpu_quota``; digest/runtime/placement.py
writes them)."""
from __future__ import annotations

from ..suites.load import Loaded
from ..analysis.timing import every_round


def _pinning(text: str | None) -> str:
    if text is None:
        return "pinning not recorded"
    if text.startswith("worker "):
        return "pinned (worker w on core w mod C)"
    if text.startswith("not needed"):
        return "not pinned (not needed: no more workers than cores)"
    return "not pinned (--pin-workers off)" if text == "off" else f"not pinned ({text})"


def has_quota(summary: dict) -> bool:
    """Whether a run's workers ran under a per-worker CPU quota (digest/runtime/placement.py)."""
    quota = (summary.get("emulation") or {}).get("cpu_quota")
    return quota is not None and not str(quota).startswith("none")


def _quota(summary: dict) -> str:
    emulation = summary.get("emulation")
    if not emulation:
        return "no CPU quota (not emulated)"
    quota = emulation.get("cpu_quota")
    if quota is None:
        return "CPU quota not recorded"
    quota = str(quota)
    return f"CPU quota of {quota}" if has_quota(summary) \
        else f"no CPU quota ({quota.removeprefix('none: ')})"


def contention(loaded: Loaded) -> list[str]:
    """One line per distinct placement: how many workers shared how many cores, pinned or not,
    with a CPU quota or not; none when no run recorded its placement (runs before pinning)."""
    sums = [r.summary for r in every_round(loaded)]
    if not any("pinning" in s.get("machine", {}) or "cpu_quota" in (s.get("emulation") or {})
               for s in sums):
        return []
    lines = {}
    for s in sums:
        m = s.get("machine", {})
        per_node = m.get("workers_per_node") or m.get("workers")
        text = (f"{per_node} worker(s) shared {m.get('cores')} core(s), "
                f"{_pinning(m.get('pinning'))}, {_quota(s)}")
        lines[text] = lines.get(text, 0) + 1
    return [f"Contention: {text} ({n} run{'s' if n > 1 else ''})" for text, n in lines.items()]
