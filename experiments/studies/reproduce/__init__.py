"""A user's runs of a suite against the committed ones: ``analysis`` (accuracy, bytes, time
ratios and the verdict per method), ``render`` (reproduction.md), ``command`` (``python -m
experiments.studies.reproduce``, which ``./run_all.sh --quick`` ends with)."""
