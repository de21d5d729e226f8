"""The fault campaign: kill, stop, cut or flap a worker mid-run (digest/runtime/faults.py),
watch what the run says and whether ``--resume`` recovers it (``campaign``, ``watch``),
``render`` (results/reliability*/), ``command`` (``python -m experiments.studies.faults``)."""
