"""Which synthetic generator settings make a stand-in as hard as its real graph: ``command``
(``python -m experiments.studies.synthetic_scan``)."""
