"""Experiment harness: declarative suites, a resumable runner, tables, plots, pages and the
bench. Every run goes through ``python -m digest train``, the path a user takes.

Layers, bottom to top (docs/architecture.md; tests/test_layering.py enforces them): ``suites``
(suite files -> runs, where a suite's files live, run order, its runs read back) < ``running``
(what runs and measures) < ``analysis`` (frames and statistics, no markdown) < ``render`` (one page,
section or kind of figure a module) < the commands, the modules at this package's top, each a
``python -m experiments.X`` entry point that loads a suite once and passes it down."""
