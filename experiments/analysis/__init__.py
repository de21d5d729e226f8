"""The harness's statistics: frames and numbers computed from a suite's loaded runs (or its
committed tables), never markdown or figures. Per-epoch time over whole periods (``periods``),
paired ratios and their verdicts (``paired``, ``timing``, ``rule_change``), the paper-style
tables (``tables``, ``straggler``, ``method_state``, ``cluster``, ``pareto``, ``curves``), the
verdict (``verdict``), the headline's rows (``headline``), the run log's facts (``runlog``) and a
reproduction's comparison (``reproduce``). experiments/render/ writes what these compute."""
