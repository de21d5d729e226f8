"""The studies: each a package that holds one question's analysis, rendering and command
(``python -m experiments.studies.NAME``), its tests under tests/experiments/. A study imports the
harness's core (suites, running, analysis, render) and never another study; the core imports no
study (tests/test_layering.py checks both), so a study is read, changed or deleted as one unit.

A study that fills a block of the shared pages (README.md, results/README.md, ...) says so with
``shared_blocks()`` in its ``__init__``: {block name: page folder -> text}; ``python -m
experiments.pages`` finds it by name."""
