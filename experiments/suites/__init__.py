"""The harness's ground floor: suites (experiments/configs/*.yaml) and what follows from one
without measuring anything: its runs and their flags (``suite``), the order they start in
(``schedule``), where its files live (``layout``), its complete runs read back (``load``), and
every method registered as ``python -m digest`` has them (``registry``)."""
