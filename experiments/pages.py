"""The generated parts of the results pages, from the committed run files and tables:

    python -m experiments.pages                  # every committed suite, the headline, quick
    python -m experiments.pages --suite field_methods    # that suite's, the headline, quick
    python -m experiments.pages --check [--suite NAME]   # write nothing: one line per difference, exit 1

For each suite it writes RUNLOG.md beside its tables (experiments/render/runlog.py: what ran, when, at
which commit, load, machine, re-runs; repro's is results/repro/RUNLOG.md) and fills the block between
``<!-- generated:begin ... -->`` and ``<!-- generated:end -->`` in its README (results/<suite>/README.md,
experiments/suites/layout.py) with its key tables as its tables.md has them (accuracy; per-epoch time and
speedup, measured; an emulated suite's ms per epoch at each bandwidth; stragglers) and links to
its plots, the main one shown. Always: the cross-suite table (experiments/studies/across_suites/headline_render.py) between
``<!-- generated:headline:begin ... -->`` and ``<!-- generated:headline:end -->`` in
results/accuracy/README.md; the A/A noise floor across suites (experiments/studies/across_suites/noise_render.py)
between ``<!-- generated:noise:begin ... -->`` and ``<!-- generated:noise:end -->`` in
results/README.md; the benchmark's verdict (experiments/studies/verdict/command.py: per graph, the fastest
method to exact's accuracy at each bandwidth, its table and figure) between
``<!-- generated:verdict:begin ... -->`` and ``<!-- generated:verdict:end -->`` in both pages, which
it leads; and, once results/quick/tables.md exists, the quick suite's
accuracy table and main plot between ``<!-- generated:quick:begin ... -->`` and
``<!-- generated:quick:end -->`` in README.md. A page without a block is left alone; a begin
marker without its end marker is an error (one line). Everything outside the blocks is kept
byte for byte, and the same committed files give the same bytes, so ``./run_all.sh --check
SUITE`` (experiments/recompute.py) compares them and fails on any difference.
"""
from __future__ import annotations

import argparse
import difflib
import importlib
import os
import pkgutil
import sys
from pathlib import Path

from .render import runlog
from .render.blocks import MarkerError, fill
from .render.suite_block import quick_block, suite_block
from .suites.layout import committed_suites, folders, loadavg_path, page_path
from .suites.suite import Suite, load_suite

REPO = Path(__file__).resolve().parents[1]
STUDIES = REPO / "experiments" / "studies"


def suite_outputs(suite: Suite, results: Path, plots: Path, runs: Path, samples: Path | None,
                  command: str) -> dict:
    """{path: text} of a suite's generated files: RUNLOG.md and its README with its block."""
    results = Path(results)
    out = {results / "RUNLOG.md": runlog.render(suite, runs, samples, results, command)}
    page = results / page_path(suite.name).name  # README.md beside its tables
    if page.exists():
        out[page] = fill(page.read_text(), {"generated": suite_block(
            suite.name, results, plots, results)}, str(page))
    return out


# with a generated block shared across suites (headline, quick, noise, verdict)
SHARED_PAGES = (Path("results/README.md"), Path("README.md"), Path("results/accuracy/README.md"))


def study_blocks() -> dict:
    """{block name: page folder -> text} of every study that fills a block of the shared pages
    (its package's ``shared_blocks()``), found by name: the core imports no study."""
    blocks = {}
    for info in sorted(pkgutil.iter_modules([str(STUDIES)]), key=lambda i: i.name):
        study = importlib.import_module(f"experiments.studies.{info.name}")
        blocks.update(getattr(study, "shared_blocks", dict)())
    return blocks


def add_shared(out: dict, pages=SHARED_PAGES) -> dict:
    """``out`` with the quick block and the studies' blocks (headline, noise, verdict) filled in
    each of ``pages`` that exists (a page without a block's markers keeps none), from its text
    in ``out`` if there, else on disk."""
    blocks = study_blocks()
    for page in pages:
        if page in out or page.exists():
            text = out[page] if page in out else page.read_text()
            out[page] = fill(text, {"quick": quick_block(page.parent),
                                    **{name: make(page.parent) for name, make in blocks.items()}},
                             str(page))
    return out


def outputs(suites: list[Suite]) -> dict:
    """{path: text} of every generated file of these suites (as run_all.sh lays them out) and
    the shared blocks."""
    out: dict = {}
    for suite in suites:
        results, plots, command = folders(suite.name)
        out.update(suite_outputs(suite, Path(results), Path(plots), Path(results) / "runs",
                                 loadavg_path(suite.name), command))
    return add_shared(out)


def differences(expected: dict) -> list:
    """One line per generated file that differs from what it should be (the first line that
    differs, and how many do)."""
    out = []
    for path, text in expected.items():
        if not Path(path).exists():
            out.append(f"{path}: missing (python -m experiments.pages writes it)")
            continue
        committed = Path(path).read_text()
        if committed == text:
            continue
        old, new = committed.splitlines(), text.splitlines()
        ops = [op for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
               if op[0] != "equal"]
        if not ops:
            out.append(f"{path}: differs in line endings from what the committed files give")
            continue
        _, i1, i2, j1, j2 = ops[0]
        was = old[i1] if i1 < i2 else "(no line)"
        now = new[j1] if j1 < j2 else "(no line)"
        out.append(f"{path}:{i1 + 1}: committed {was[:120]!r} != generated {now[:120]!r} "
                   f"({len(ops)} differing stretch(es); python -m experiments.pages rewrites it)")
    return out


def check(expected_fn) -> list:
    """``differences`` of ``expected_fn()``, a marker error as one more line."""
    try:
        return differences(expected_fn())
    except MarkerError as e:
        return [str(e)]


def write(expected: dict) -> list:
    """Write the files whose text changed; their paths."""
    changed = [p for p, t in expected.items() if not Path(p).exists() or Path(p).read_text() != t]
    for p in changed:
        Path(p).parent.mkdir(parents=True, exist_ok=True)
        Path(p).write_text(expected[p])
    return [str(p) for p in changed]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.pages", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", action="append", default=None,
                   help="only this suite's RUNLOG.md and page (repeatable; default: every "
                   "committed suite); the headline, quick and noise blocks always")
    p.add_argument("--check", action="store_true", help="write nothing; list every difference")
    args = p.parse_args(argv)
    cwd = os.getcwd()
    os.chdir(REPO)  # paths as run_all.sh has them: relative to the repository
    try:
        suites = [load_suite(s) for s in (args.suite or committed_suites())]
        if args.check:
            diff = check(lambda: outputs(suites))
            for line in diff:
                print(line)
            print(f"pages: {len(diff)} difference(s)" if diff else
                  f"pages: {', '.join(s.name for s in suites)}, the headline, quick and noise blocks as generated",
                  file=sys.stderr)
            return 1 if diff else 0
        written = write(outputs(suites))
        print(f"pages: {len(written)} file(s) rewritten" + (": " + ", ".join(written) if written else ""))
        return 0
    except (MarkerError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        os.chdir(cwd)


if __name__ == "__main__":
    sys.exit(main())
