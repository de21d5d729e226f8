"""What runs and measures: processes started as a user starts them and watched (``launch``,
``watch``), a suite's runs, resumably (``suite_runs``), the machine's load sampled beside them
(``loadavg``), the fault campaign's trials and the fault it injects (``campaign``, ``faults``:
loaded inside every worker, so this package imports nothing at its top), and the bench's
measurements (``contest``, ``reference``, ``scale``)."""
