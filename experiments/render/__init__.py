"""The harness's pages and figures: each module renders one page or one section (markdown) or one
kind of figure from what experiments/analysis/ computes: tables.md (``report`` with ``timing``,
``method_state``, ``pareto``, ``cluster``, ``contention``), the generated blocks of the results
pages (``blocks``, ``suite_block``, ``headline``), RUNLOG.md (``runlog``), the verdict page
(``verdict``), the reproduction report (``reproduce``) and the plots (``plots``), with the shared
``markdown`` cells and ``figures`` styles."""
