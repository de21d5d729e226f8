"""digest/runtime/faults.py, the one fault-injection hook: its spec, when a fault is due, and the
timed kill the fault campaign uses, in a bare interpreter (the reliability tests use the rest
through real runs: tests/cli/test_reliability.py, tests/runtime/test_netem.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from digest.runtime.faults import due, parse

ROOT = Path(__file__).resolve().parents[2]


def test_parse_reads_action_keys_and_a_path_with_commas_last():
    assert parse("kill,rank=1,epoch=3") == {"action": "kill", "rank": "1", "epoch": 3}
    assert parse("kill,rank=group") == {"action": "kill", "rank": "group"}
    assert parse("kill,rank=0,from=2,delay=0.25,after=/a,b/config.json") == {
        "action": "kill", "rank": "0", "from": 2, "delay": 0.25, "after": "/a,b/config.json"}
    assert parse("cut,rank=1,epoch=5,seconds=2.5") == {"action": "cut", "rank": "1", "epoch": 5,
                                                       "seconds": 2.5}


@pytest.mark.parametrize("spec, words", [("explode,rank=1", "unknown action 'explode'"),
                                         ("kill,rank=1,when=3", "unknown key 'when'"),
                                         ("raise,rank=1,delay=0.5", "delay= needs kill or stop"),
                                         ("stop,rank=group,epoch=2", "rank=group needs kill"),
                                         ("kill,epoch=2", "names no rank="),
                                         ("kill,rank=1,seconds=3", "seconds= goes with cut"),
                                         ("cut,rank=1,seconds=0", "seconds= goes with cut")])
def test_parse_refuses_what_it_does_not_know(spec, words):
    with pytest.raises(ValueError, match=words):
        parse(spec)


def test_due_at_the_epoch_from_an_epoch_on_the_rank_and_after_a_file(tmp_path):
    at3 = parse("kill,rank=1,epoch=3")
    assert [due(at3, e, 1) for e in range(5)] == [False, False, False, True, False]
    assert not due(at3, 3, 0)
    group = parse("kill,rank=group,epoch=3")
    assert due(group, 3, 0) and not due(group, 3, 1)  # rank 0 kills the group
    flag = tmp_path / "config.json"
    later = parse(f"kill,rank=1,from=2,after={flag}")
    assert [due(later, e, 1) for e in range(4)] == [False] * 4  # no file yet
    flag.write_text("{}")
    assert [due(later, e, 1) for e in range(4)] == [False, False, True, True]


def _steps(fault: str | None) -> subprocess.CompletedProcess:
    """Six steps of rank 1 calling the hook, then a wait for any pending timer."""
    code = ("import threading, time\nfrom digest.runtime.faults import inject\n"
            "for e in range(6):\n    inject(e, 1)\n    time.sleep(0.05)\n"
            "for t in threading.enumerate():\n    if t is not threading.main_thread():\n"
            "        t.join(30)\nprint('survived')")
    env = {"PYTHONPATH": str(ROOT), **({"DIGEST_FAULT": fault} if fault else {})}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.slow  # a run of its own, killed and launched again
def test_a_delayed_kill_lands_on_the_chosen_rank_once_the_file_exists(tmp_path):
    committed = tmp_path / "config.json"
    timed = f"from=2,delay=0.5,after={committed}"
    assert _steps(f"kill,rank=1,{timed}").stdout.strip() == "survived"  # no checkpoint yet
    committed.write_text("{}")
    assert _steps(f"kill,rank=0,{timed}").stdout.strip() == "survived"  # another rank
    assert _steps(f"kill,rank=1,from=9,delay=0.5").stdout.strip() == "survived"  # a later step
    assert _steps(None).stdout.strip() == "survived"  # inert without DIGEST_FAULT
    killed = _steps(f"kill,rank=1,{timed}")
    assert killed.returncode == -9 and killed.stdout == ""


def test_raise_fails_the_step_with_the_rank_and_epoch():
    got = _steps("raise,rank=1,epoch=4")
    assert got.returncode == 1
    assert "RuntimeError: injected failure in rank 1 at epoch 4" in got.stderr


def test_cut_outside_an_emulated_run_says_it_needs_one():
    got = _steps("cut,rank=1,epoch=4")
    assert got.returncode == 1 and "cut needs an emulated link (--emulate-network)" in got.stderr
