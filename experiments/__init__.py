"""Experiment harness: declarative suites, a resumable runner, tables, plots and a
network cost model. Every run goes through ``python -m digest train``, the path a user takes."""
