"""``python -m digest advise``: which method to run on a graph and a cluster, predicted before
running (docs/methods.md section 13).

- ``job``: the partitioned graph, counted (rows, edges, rows sent to each peer, statistics);
- ``traffic``: every registered method's bytes per step and per epoch, from the methods' own step
  counts (digest/policies/counting.py), in the units a run records;
- ``work``: each worker's compute per step (dense, sparse and elementwise work of the model);
- ``cost``: the time model (compute at a rate, communication over a link, latency, overlap),
  and its constants (``calibration.json``, fitted by ``python -m experiments.studies.advise fit``);
- ``epochs``: epochs to a target from the benchmark's convergence runs on the nearest graph
  (``convergence.json``, written by ``python -m experiments.studies.advise table``);
- ``report``: the ranked rows, as a table or JSON.
"""
