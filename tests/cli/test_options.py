"""Every method option's bad values through ``python -m digest train`` (digest.cli.main, in this
process): one line on stderr, exit status 2, no traceback, nothing written (no run folder, no
partition cache). Every option of every registered method has a case here: a method added with
an option and no bad value below fails ``test_every_option_has_a_bad_value``."""
from __future__ import annotations

import dataclasses

import pytest

from digest.config import SECTIONS
from digest.methods import methods_with_option, option_groups
from helpers import files_under, here

# (flag, bad value, what the one line says)
BAD = [
    # every method's parameter sync (ParamOptions)
    ("--local-steps", "0", "--local-steps must be >= 1"),
    # exact's ablation (ExactOptions)
    ("--halo-grad", "maybe", "argument --halo-grad: invalid choice: 'maybe'"),
    # the store (DIGEST, DIGEST-A, SAT, vanishing)
    ("--sync-interval", "0", "--sync-interval must be >= 1"),
    ("--sync-interval", "2.5", "argument --sync-interval: invalid int value: '2.5'"),
    # compression (VARCO, DIGEST's store)
    ("--compressor", "zip", "argument --compressor: invalid choice: 'zip'"),
    ("--comp-schedule", "sometimes", "argument --comp-schedule: invalid choice: 'sometimes'"),
    ("--comp-max", "0.5", "need 1 <= --comp-min <= --comp-max"),
    ("--comp-min", "0.5", "need 1 <= --comp-min <= --comp-max"),
    ("--comp-min", "64", "need 1 <= --comp-min <= --comp-max"),  # above --comp-max 32
    ("--comp-min", "nan", "need 1 <= --comp-min <= --comp-max"),
    ("--comp-slope", "-1", "--comp-slope must be >= 0"),
    ("--comp-ratio", "0.5", "--comp-ratio must be >= 1"),
    ("--comp-ratio", "nan", "--comp-ratio must be >= 1"),
    ("--comp-layers", "3", "--comp-layers [3]: exchanged layers are 1..2"),  # L = 3
    ("--comp-layers", "one", "--comp-layers 'one': give layer numbers, e.g. 1,2"),
    # AdaQP
    ("--quant-bits", "3", "argument --quant-bits: invalid choice: 3"),
    ("--quant-assign", "best", "argument --quant-assign: invalid choice: 'best'"),
    ("--quant-adapt-every", "0", "--quant-adapt-every must be >= 1"),
    # BNS-GCN, PipeGCN
    ("--boundary-rate", "1.5", "--boundary-rate must be in [0, 1]"),
    ("--boundary-rate", "nan", "--boundary-rate must be in [0, 1]"),
    ("--pipe-smoothing", "1", "--pipe-smoothing must be in [0, 1)"),
    # SANCUS
    ("--skip-threshold", "-0.1", "--skip-threshold must be >= 0"),
    ("--skip-threshold", "nan", "--skip-threshold must be >= 0"),
    ("--max-staleness", "-1", "--max-staleness must be >= 0"),
    # the vanishing schedules
    ("--sync-schedule", "weekly", "argument --sync-schedule: invalid choice: 'weekly'"),
    ("--drift-threshold", "-1", "--drift-threshold must be >= 0"),
    ("--drift-threshold", "nan", "--drift-threshold must be >= 0"),
    # mini-batch
    ("--batch-size", "0", "--batch-size must be >= 1"),
    ("--mb-fanouts", "10,x", "--mb-fanouts"),
    ("--mb-seeds", "all", "argument --mb-seeds: invalid choice: 'all'"),
    ("--mb-features", "cache", "argument --mb-features: invalid choice: 'cache'"),
    ("--mb-local-only=yes", None, "argument --mb-local-only/--no-mb-local-only: ignored explicit "
                                  "argument 'yes'"),
    # SAT
    ("--sat-predictor", "oracle", "argument --sat-predictor: invalid choice: 'oracle'"),
    ("--sat-window", "0", "--sat-window must be >= 1"),
    ("--sat-lr", "0", "--sat-lr must be > 0"),
    ("--sat-replay", "0", "--sat-replay must be >= 1"),
    ("--sat-snapshots", "epoch", "argument --sat-snapshots: invalid choice: 'epoch'"),
    ("--sat-steps", "0", "--sat-steps must be >= 1"),
    ("--sat-residual=yes", None, "argument --sat-residual/--no-sat-residual: ignored explicit argument"),
    ("--sat-base", "median", "argument --sat-base: invalid choice: 'median'"),
    ("--sat-base", "mean", "--sat-base mean needs --sat-residual and --sat-predictor lstm-gcn"),
    ("--sat-gate=on", None, "argument --sat-gate/--no-sat-gate: ignored explicit argument 'on'"),
    ("--sat-shared=1", None, "argument --sat-shared/--no-sat-shared: ignored explicit argument"),
    # Sylvie
    ("--sylvie-bits", "3", "argument --sylvie-bits: invalid choice: 3"),
    ("--sylvie-scale-dtype", "float16", "argument --sylvie-scale-dtype: invalid choice"),
    ("--pipeline=no", None, "argument --pipeline/--no-pipeline: ignored explicit argument 'no'"),
    ("--sync-every", "-1", "--sync-every must be >= 0 (0 = never synchronous)"),
    ("--sylvie-step0", "ones", "argument --sylvie-step0: invalid choice: 'ones'"),
]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def test_every_option_has_a_bad_value():
    options = {_flag(f.name) for g in option_groups() for f in dataclasses.fields(g)}
    covered = {flag.split("=")[0] for flag, _, _ in BAD}
    assert options - covered == set(), "options without a bad-value case"
    assert covered - options == set(), "cases of options no method has"


@pytest.mark.parametrize("flag,value,said", BAD, ids=[f"{f}={v}" for f, v, _ in BAD])
def test_a_bad_method_option_is_one_line_and_exit_2(flag, value, said, tmp_path, capsys,
                                                    monkeypatch):
    name = flag.split("=")[0][2:].replace("-", "_")
    _refused(["--method", methods_with_option(name)[0], flag, *([] if value is None else [value])],
             said, tmp_path, capsys, monkeypatch)


def _refused(flags, said, tmp_path, capsys, monkeypatch):
    """``train`` with ``flags`` on a 200-node graph at 2 workers: exit 2, one line, nothing written."""
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    args = ["train", "--dataset", "synthetic:nodes=200", "--workers", 2, "--out", tmp_path / "run",
            *flags]
    rc, err = here(args, capsys)
    assert rc == 2 and len(err) == 1, (rc, err)
    assert err[0].startswith("error: ") and said in err[0], err
    assert files_under(tmp_path) == []


# The options every method has (digest/config.py's sections), each bad value refused the same way.
# Free-form ones have no bad value of their own: --dataset's and --resume's are in
# tests/cli/test_cli.py (BAD_INPUT), --emulate-network's and --emulate-latency's in
# tests/runtime/test_netem.py; --out, --data-root and --profile name folders to write.
GENERAL = [
    ("--sparse", "some", "argument --sparse: invalid choice: 'some'"),
    ("--partitioner", "kahip", "argument --partitioner: invalid choice: 'kahip'"),
    ("--partition-file", "nowhere.txt", "--partition-file nowhere.txt: no such file"),
    ("--normalize-features=yes", None, "argument --normalize-features/--no-normalize-features: "
                                       "ignored explicit argument 'yes'"),
    ("--model", "gin", "argument --model: invalid choice: 'gin'"),
    ("--layers", "0", "--layers must be >= 1"),
    ("--hidden", "0", "--hidden must be >= 1"),
    ("--dropout", "1", "--dropout must be in [0, 1)"),
    ("--batch-norm=1", None, "argument --batch-norm/--no-batch-norm: ignored explicit argument"),
    ("--lr", "nan", "--lr must be > 0"),
    ("--weight-decay", "-0.1", "--weight-decay must be >= 0"),
    ("--weight-decay", "nan", "--weight-decay must be >= 0"),
    ("--epochs", "0", "--epochs must be >= 1"),
    ("--eval-every", "0", "--eval-every must be >= 1"),
    ("--stop-at-val", "1.5", "--stop-at-val must be in [0, 1]"),
    ("--workers", "0", "--workers must be"),
    ("--slow-workers", "1:0.5", "--slow-workers"),
    ("--slow-workers", "5:2", "--slow-workers"),  # rank 5 of a world of 2
    ("--timeout", "0", "--timeout must be > 0"),
    ("--checkpoint-every", "-1", "--checkpoint-every must be >= 0"),
    ("--overwrite=1", None, "argument --overwrite/--no-overwrite: ignored explicit argument"),
    ("--device", "tpu", "argument --device: invalid choice: 'tpu'"),
    ("--progress=1", None, "argument --progress/--no-progress: ignored explicit argument"),
    ("--pin-workers", "always", "argument --pin-workers: invalid choice: 'always'"),
    ("--cpu-quota", "half", "argument --cpu-quota: invalid choice: 'half'"),
    ("--heap-reuse", "0", "argument --heap-reuse: invalid choice: '0'"),
]
FREE_FORM = {"--dataset", "--data-root", "--out", "--resume", "--profile", "--emulate-network",
             "--emulate-latency", "--method"}


def test_every_general_option_has_a_bad_value():
    options = {_flag(f.name) for section in SECTIONS.values() for f in dataclasses.fields(section)}
    covered = {flag.split("=")[0] for flag, _, _ in GENERAL}
    assert options - covered - FREE_FORM == set(), "general options without a bad-value case"
    assert covered - options == set()


@pytest.mark.parametrize("flag,value,said", GENERAL, ids=[f"{f}={v}" for f, v, _ in GENERAL])
def test_a_bad_general_option_is_one_line_and_exit_2(flag, value, said, tmp_path, capsys,
                                                     monkeypatch):
    _refused([flag, *([] if value is None else [value])], said, tmp_path, capsys, monkeypatch)
