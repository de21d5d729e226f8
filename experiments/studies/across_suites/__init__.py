"""Tables across the committed suites: the headline accuracy table (``headline``,
``headline_render``: results/accuracy/README.md) and the A/A noise floor of every timed suite
(``noise``, ``noise_render``: results/README.md)."""


def shared_blocks() -> dict:
    """The headline and noise blocks of the shared pages."""
    from . import headline_render, noise_render
    floor = noise_render.block()  # the same for every page: read the suites' timing.csv once
    return {"headline": headline_render.table, "noise": lambda folder: floor}
