"""The bench: our trainer against plain PyG (``contest``, ``reference``), the scale runs
(``scale``), and the performance goals (``analysis``, ``render``, ``scale_render``:
results/performance/), ``command`` (``python -m experiments.studies.bench``)."""
