"""``python -m digest advise`` checked and fitted against the committed runs: ``runs`` (the
emulated runs advise learns from), ``fit`` (its constants, digest/advise/calibration.json),
``table`` (epochs to target, digest/advise/convergence.json), ``check`` (predictions against
measurements), ``render`` (results/advise/), ``command`` (``python -m
experiments.studies.advise``)."""
