"""The verdict: at an accuracy the reader accepts, which method reaches it first on their
network, and what it gives up (docs/methods.md sections 11-12). ``analysis`` (cells: time to
target, paired speedups, the A/A check), ``points`` (what decides each network point and the
cluster it stands for), ``schedule_check`` (each method's own schedule against the
decomposition), ``render`` and ``screen`` (the page, its one-screen table and figures),
``command`` (``python -m experiments.studies.verdict``)."""


def shared_blocks() -> dict:
    """The verdict's lead block of README.md and results/README.md."""
    from .command import lead, states
    graphs = states()  # the benchmark's runs, read once for every page
    return {"verdict": lambda folder: lead(folder, graphs)}
