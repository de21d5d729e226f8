"""The one training loop (``trainer``) and what it records: per-epoch rows and summaries
(``records``), result files (``metrics``), checkpoints, exact evaluation, emulated stragglers."""
