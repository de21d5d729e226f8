"""digest/config.py: flat flags in, nested config out, and back; a config crosses a process
boundary (pickle) as itself."""
from __future__ import annotations

import pickle

import pytest

import digest.cli  # noqa: F401  (registers every method)
from digest.config import ConfigError, TrainConfig


def test_of_and_flat_are_inverses():
    cfg = TrainConfig.of(method="pipegcn", hidden=64, pipe_smoothing=0.95)
    assert cfg.model.hidden == 64 and cfg.options.pipe_smoothing == 0.95
    assert TrainConfig.of(**cfg.flat()) == cfg


def test_a_flag_of_another_method_is_refused():
    with pytest.raises(ConfigError, match="does not apply to --method exact"):
        TrainConfig.of(method="exact", pipe_smoothing=0.95)


@pytest.mark.parametrize("flags", [{}, {"method": "sat", "sync_interval": 5, "sat_gate": False},
                                   {"method": "adaqp", "quant_bits": 4, "quant_assign": "adaptive"}])
def test_a_pickled_config_is_the_same_config(flags):
    cfg = TrainConfig.of(**flags, workers=4, seed=3)
    back = pickle.loads(pickle.dumps(cfg))
    assert back == cfg and type(back.options) is type(cfg.options)
