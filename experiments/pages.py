"""The generated parts of the results pages, from the committed run files and tables:

    python -m experiments.pages                  # every committed suite, the headline, quick
    python -m experiments.pages --suite wave2    # that suite's, the headline, quick
    python -m experiments.pages --check [--suite NAME]   # write nothing: one line per difference, exit 1

For each suite it writes RUNLOG.md beside its tables (experiments/runlog.py: what ran, when, at
which commit, load, machine, re-runs; repro's is results/RUNLOG.md) and fills the block between
``<!-- generated:begin ... -->`` and ``<!-- generated:end -->`` in its README (repro's:
results/README.md) with its key tables as its tables.md has them (accuracy; per-epoch time and
speedup, measured; an emulated suite's ms per epoch at each bandwidth; stragglers) and links to
its plots, the main one shown. Always: the cross-suite table (experiments/headline.py) between
``<!-- generated:headline:begin ... -->`` and ``<!-- generated:headline:end -->`` in
results/README.md and README.md, and, once results/quick/tables.md exists, the quick suite's
accuracy table and main plot between ``<!-- generated:quick:begin ... -->`` and
``<!-- generated:quick:end -->`` in README.md. A page without a block is left alone; a begin
marker without its end marker is an error (one line). Everything outside the blocks is kept
byte for byte, and the same committed files give the same bytes, so ``./run_all.sh --check
SUITE`` (experiments/recompute.py) compares them and fails on any difference.
"""
from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from pathlib import Path

import pandas as pd

from . import headline, runlog, timing_render
from .suites.suite import dataset_slug, load_suite
from .suites.layout import committed_suites, folders, loadavg_path, page_path

REPO = Path(__file__).resolve().parents[1]
KINDS = ("generated", "headline", "quick")  # <!-- generated:begin -->, generated:headline:begin, ...
PLOT_KINDS = ("val_vs_time", "val_vs_epoch", "val_vs_bytes", "speedup_vs_workers",
              "speedup_vs_bandwidth", "val_vs_emulated_time", "bytes_per_epoch", "pareto",
              "stale_error")
MAX_IMAGES = 3  # main plots shown in a suite's block (one per dataset); the rest are links
# the sections of tables.md a suite's block shows: section title, which of its subsections
KEY_SECTIONS = (("Accuracy", lambda sub: True),
                ("Per-epoch time", lambda sub: "modeled" not in sub and "emulated" not in sub),
                ("Emulated cluster", lambda sub: "ms per epoch, emulated @ each bandwidth" in sub),
                ("Stragglers", lambda sub: True))


class MarkerError(ValueError):
    """A page whose generated-block markers do not pair up (the message is one line)."""


def _begin(kind: str) -> str:
    return "<!-- generated:begin" if kind == "generated" else f"<!-- generated:{kind}:begin"


def _end(kind: str) -> str:
    return "<!-- generated:end -->" if kind == "generated" else f"<!-- generated:{kind}:end -->"


def blocks(text: str, where: str = "page") -> dict:
    """{kind: (index of its begin line, index of its end line)} of the page's blocks; MarkerError
    for a begin without an end, an end without a begin, a block opened twice or inside another."""
    out, open_ = {}, None
    for i, line in enumerate(text.splitlines()):
        s = line.strip()
        for kind in KINDS:
            if s.startswith(_begin(kind)):
                if open_ is not None:
                    raise MarkerError(f"{where}:{i + 1}: {_begin(kind)} inside the {open_[0]} block "
                                      f"begun on line {open_[1] + 1} (no {_end(open_[0])} before it)")
                if kind in out:
                    raise MarkerError(f"{where}:{i + 1}: a second {_begin(kind)} block")
                open_ = (kind, i)
            elif s == _end(kind):
                if open_ is None or open_[0] != kind:
                    raise MarkerError(f"{where}:{i + 1}: {_end(kind)} without {_begin(kind)} ... --> before it")
                out[kind], open_ = (open_[1], i), None
    if open_ is not None:
        raise MarkerError(f"{where}:{open_[1] + 1}: {_begin(open_[0])} ... --> without "
                          f"{_end(open_[0])} after it")
    return out


def fill(text: str, contents: dict, where: str = "page") -> str:
    """The page with each block named in ``contents`` holding that text (between a blank line
    after its begin marker and one before its end marker); the rest byte for byte."""
    lines = text.splitlines(keepends=True)
    for kind, (b, e) in sorted(blocks(text, where).items(), key=lambda kv: -kv[1][0]):
        if contents.get(kind) is not None:
            body = contents[kind].rstrip("\n")
            lines[b + 1:e] = ["\n", *(x + "\n" for x in body.split("\n")), "\n"]
    return "".join(lines)


def sections(md: str) -> list:
    """tables.md's '## ' sections: [(title, intro lines, [(subtitle, lines), ...]), ...]."""
    out = []
    for line in md.splitlines():
        if line.startswith("## "):
            out.append((line[3:].strip(), [], []))
        elif line.startswith("### ") and out:
            out[-1][2].append((line[4:].strip(), []))
        elif out:
            (out[-1][2][-1][1] if out[-1][2] else out[-1][1]).append(line)
    return out


def _trim(lines: list) -> list:
    text = "\n".join(lines).strip("\n")
    return text.split("\n") if text else []


def key_tables(md: str, link: str, names=None) -> list:
    """The markdown lines of the KEY_SECTIONS (those ``names`` only, if given) of a tables.md,
    headings made bold (a page's own headings stay the only ones), each naming its number in
    tables.md (at ``link``)."""
    out = []
    for title, intro, subs in sections(md):
        words = re.sub(r"^\d+\.\s*", "", title)
        keep = next((f for name, f in KEY_SECTIONS if words.startswith(name)
                     and (names is None or name in names)), None)
        chosen = [(t, body) for t, body in subs if keep and keep(t)]
        if keep is None or (subs and not chosen):
            continue
        number = title.split(".", 1)[0]
        out += [f"**[Table {number}]({link}). {words}**", ""]
        out += [*_trim(intro), ""] if _trim(intro) else []
        for t, body in chosen:
            out += [f"*{t}*", "", *_trim(body), ""]
    return out


def plot_lines(datasets: list, plots: Path, page_dir: Path, emulated: bool) -> list:
    """The main plot of each dataset (up to MAX_IMAGES shown) and links to all its plots."""
    main = "speedup_vs_bandwidth" if emulated else "val_vs_time"
    rel = lambda p: Path(os.path.relpath(p, page_dir)).as_posix()  # noqa: E731
    images, links = [], []
    for d in datasets:
        files = [(k, plots / f"{dataset_slug(d)}_{k}.png") for k in PLOT_KINDS]
        files = [(k, p) for k, p in files if p.exists()]
        if not files:
            continue
        shown = dict(files).get(main)
        if shown is not None and len(images) < 2 * MAX_IMAGES:  # an image and a blank line each
            images += [f"![{d}: {main.replace('_', ' ')}]({rel(shown)})", ""]
        links.append(f"- {d}: " + ", ".join(f"[{k.replace('_', ' ')}]({rel(p)})" for k, p in files))
    out = [f"**Plots** ([{rel(plots)}/]({rel(plots)}/)):", "", *images, *links]
    return out if links else []


BLOCK_LINES = 45  # a suite block's tables beyond this: only the accuracy table (pages <= 150 lines)


def suite_block(suite_name: str, results: Path, plots: Path, page_dir: Path) -> str | None:
    """A suite's generated block, from its tables.md (None when it has none)."""
    md_path = Path(results) / "tables.md"
    if not md_path.exists():
        return None
    rel = lambda p: Path(os.path.relpath(p, page_dir)).as_posix()  # noqa: E731
    md = md_path.read_text()
    datasets = _datasets(Path(results))
    lines = [f"*Generated by `python -m experiments.pages` from [tables.md]({rel(md_path)}), which "
             f"`./run_all.sh --check {suite_name}` rebuilds from the committed runs; what ran, "
             f"when, at which commit and load: [RUNLOG.md]({rel(Path(results) / 'RUNLOG.md')}).*", ""]
    tables = key_tables(md, rel(md_path))
    if len(tables) > BLOCK_LINES:  # a page stays short: the accuracy table, the rest one link away
        tables = key_tables(md, rel(md_path), ("Accuracy",)) + [
            "", f"Per-epoch times and speedups: [tables.md]({rel(md_path)}), section 2 onwards."]
    if len(tables) > BLOCK_LINES:  # even that is long (a sweep): every table one link away
        tables = [f"Accuracy, per-epoch times and speedups: [tables.md]({rel(md_path)})."]
    lines += tables + rule_line(Path(results), rel(md_path))
    lines += plot_lines(datasets, Path(plots), Path(page_dir),
                        (Path(results) / "cluster_epoch_time.csv").exists())
    return "\n".join(lines).rstrip("\n") + "\n"


def rule_line(results: Path, link: str) -> list:
    """One line on what the corrected timing rule changed in a speed suite (timing_rule_change.csv;
    nothing for other suites)."""
    path = results / "timing_rule_change.csv"
    change = pd.read_csv(path) if path.exists() else None
    if change is None or change.empty:
        return []
    return ["", f"**The corrected timing rule** (docs/methods.md section 11: per-epoch time a mean "
            f"over whole periods, the bootstrap over rounds and seeds, the A/A check): "
            f"{timing_render.summary(change)}; the rows: [tables.md]({link}), section 2.", ""]


def _datasets(results: Path) -> list:
    """The datasets of a suite's accuracy.csv, in its order."""
    try:
        return list(dict.fromkeys(pd.read_csv(results / "accuracy.csv").dataset))
    except (OSError, ValueError, AttributeError):
        return []


def quick_block(page_dir: Path) -> str | None:
    """README.md's quick block: the quick suite's accuracy table and main plot (None until
    results/quick/tables.md exists)."""
    results, plots, command = folders("quick")
    md_path = Path(results) / "tables.md"
    if not md_path.exists():
        return None
    rel = lambda p: Path(os.path.relpath(p, page_dir)).as_posix()  # noqa: E731
    datasets = _datasets(Path(results))
    lines = [f"*Generated by `python -m experiments.pages` from the committed `{command}` run "
             f"([{rel(md_path)}]({rel(md_path)}), [RUNLOG.md]({rel(Path(results) / 'RUNLOG.md')})).*", ""]
    lines += key_tables(md_path.read_text(), rel(md_path), ("Accuracy",))
    main = Path(plots) / f"{dataset_slug(datasets[0])}_val_vs_time.png" if datasets else None
    if main is not None and main.exists():
        lines += ["", f"![{datasets[0]}: validation accuracy against time]({rel(main)})"]
    return "\n".join(lines) + "\n"


def suite_outputs(suite_ref: str, results: Path, plots: Path, runs: Path, samples: Path | None,
                  command: str) -> dict:
    """{path: text} of a suite's generated files: RUNLOG.md and its README with its block."""
    results = Path(results)
    out = {results / "RUNLOG.md": runlog.render(suite_ref, runs, samples, results, command)}
    page = results / page_path(suite_ref).name  # repro's page is repro.md beside the index
    if page.exists():
        out[page] = fill(page.read_text(), {"generated": suite_block(
            load_suite(suite_ref).name, results, plots, results)}, str(page))
    return out


SHARED_PAGES = (Path("results/README.md"), Path("README.md"))  # with a headline block


def add_shared(out: dict, pages=SHARED_PAGES) -> dict:
    """``out`` with the headline (and quick) blocks filled in each of ``pages`` that exists,
    from its text in ``out`` if there, else on disk."""
    for page in pages:
        if page in out or page.exists():
            out[page] = fill(out[page] if page in out else page.read_text(),
                             {"headline": headline.table(page.parent),
                              "quick": quick_block(page.parent)}, str(page))
    return out


def outputs(suites: list) -> dict:
    """{path: text} of every generated file of these suites (as run_all.sh lays them out) and
    the shared blocks."""
    out: dict = {}
    for name in suites:
        results, plots, command = folders(name)
        out.update(suite_outputs(name, Path(results), Path(plots), Path(results) / "runs",
                                 loadavg_path(name), command))
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
                   "committed suite); the headline and quick blocks always")
    p.add_argument("--check", action="store_true", help="write nothing; list every difference")
    args = p.parse_args(argv)
    cwd = os.getcwd()
    os.chdir(REPO)  # paths as run_all.sh has them: relative to the repository
    try:
        suites = [load_suite(s).name for s in args.suite] if args.suite else committed_suites()
        if args.check:
            diff = check(lambda: outputs(suites))
            for line in diff:
                print(line)
            print(f"pages: {len(diff)} difference(s)" if diff else
                  f"pages: {', '.join(suites)}, the headline and quick blocks as generated",
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
