"""experiments/pages.py, runlog.py, headline.py: RUNLOG.md and the pages' generated
blocks come from the committed run files and tables, byte for byte the same from the same files
(whatever the time zone), a changed block or run log is a difference, and a page whose markers do
not pair up is refused in one line. Tiny hand-made run folders and tables in tmp, no training."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest

from experiments import pages, recompute
from experiments.analysis import runlog as run_facts
from experiments.analysis.timing import NO_DIFFERENCE, NOT_CLEAN
from experiments.render import blocks, runlog
from experiments.studies.across_suites import headline_render as headline
from experiments.suites.suite import load_suite
from fake_runs import fake_suite, recompute_args as args

BEGIN, END = "<!-- generated:begin (python -m experiments.pages; do not edit) -->", "<!-- generated:end -->"


def stamp(runs: Path, starts: dict, commit: str = "abc1234") -> None:
    """Give each run folder the start time, wall seconds and commit the runner would record."""
    for d in sorted(runs.glob("*/*/")):
        info = json.loads((d / "run.json").read_text())
        info.update({"status": "complete", "started": starts[d.name], "seconds": 30.4})
        (d / "run.json").write_text(json.dumps(info))
        summary = json.loads((d / "summary.json").read_text())
        summary.update({"git_commit": commit, "total_train_time": 20.0, "epochs": 3})
        (d / "summary.json").write_text(json.dumps(summary))


STARTS = {"exact_w2_s0": "2026-12-02T10:00:00", "exact_w2_s1": "2026-12-02T10:01:00",
          "digest-I10_w2_s0": "2026-12-02T10:02:00"}


@pytest.fixture
def suite(tmp_path):
    path, runs = fake_suite(tmp_path)
    stamp(runs, STARTS)
    t0 = 1796205600  # 2026-12-02T10:00:00 UTC
    samples = runs.parent / "loadavg.csv"  # beside the runs, as results/<suite>/loadavg.csv
    samples.write_text("".join(f"{t0 + 20 * i},{1 + i / 10:.2f},1.00,1.00\n" for i in range(12)))
    return path, runs, samples


def render(path, runs, samples, tmp_path):
    return runlog.render(load_suite(path), runs, samples, tmp_path / "results", "./run_all.sh --suite fake")


def test_runlog_is_generated_from_the_run_files_the_same_in_any_time_zone(suite, tmp_path, monkeypatch):
    path, runs, samples = suite
    text = render(path, runs, samples, tmp_path)
    assert text == render(path, runs, samples, tmp_path)
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert render(path, runs, samples, tmp_path) == text
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert "Command: `./run_all.sh --suite fake`" in text
    assert "Runs: 3 complete of 3 planned" in text and "[loadavg.csv](loadavg.csv)" in text
    # one period of work: 10:00:00 to 10:02:30 (last start + 30 s), the samples inside it (t0 .. t0+150)
    assert ("| 1 | abc1234 | 3 | toy (3) | 2026-12-02 10:00:00 | 2026-12-02 10:02:30 | 91 | "
            "1.35 (max 1.70, 8) |") in text
    assert ("| exact_w2_s0 | abc1234 | 2026-12-02 10:00:00 | 2026-12-02 10:00:30 | 30.4 | 20.0 | 3 | "
            "1.05 (max 1.10, 2) |") in text
    assert "None: every run folder is a planned run" in text
    assert ("| box (x86_64), 2 cores, 8.0 GiB RAM, GPU: none | 2 workers on 2 cores (1 thread(s) "
            "each) | loopback (one host) | 3 |") in text


def test_runlog_lists_reruns_commits_and_summaries_that_differ_from_their_plan(suite, tmp_path):
    path, runs, samples = suite
    stamp(runs, {**STARTS, "exact_w2_s0": "2026-12-02T10:05:00"})  # after the runs planned after it
    d = runs / "toy" / "digest-I10_w2_s0"
    info = json.loads((d / "run.json").read_text())
    (d / "run.json").write_text(json.dumps({**info, "flags": {"hidden": 8, "sync_interval": 10}}))
    summary = json.loads((d / "summary.json").read_text())
    summary["config"]["hidden"] = 16
    summary["git_commit"] = "def5678-dirty"
    (d / "summary.json").write_text(json.dumps(summary))
    text = render(path, runs, samples, tmp_path)
    notes = text.split("## Re-runs and irregularities")[1].split("\n## ")[0]
    assert "- toy at abc1234: exact_w2_s0 (2026-12-02 10:05:00) started after runs" in notes
    assert ("toy/digest-I10_w2_s0: summary.json's config differs from run.json's flags in hidden "
            "(16, planned 8)") in notes
    assert "toy/digest-I10_w2_s0: code commit def5678-dirty" in notes
    assert "| def5678 |" in text.split("## Periods of work")[1].split("## Code")[0]  # a period of its own


def test_a_run_folder_moved_with_its_suite_is_read_where_it_lies(suite, tmp_path):
    """The --out path a run's argv and command record (provenance) is not where it must lie: the
    suite's folder moved (results/ -> elsewhere/fake/) gives the same RUNLOG.md, nothing flagged."""
    path, runs, samples = suite
    for d in sorted(runs.glob("*/*/")):
        out = ["--out", f"results/runs/{d.parent.name}/{d.name}"]
        info = json.loads((d / "run.json").read_text())
        (d / "run.json").write_text(json.dumps({**info, "argv": ["python", "-m", "digest", *out]}))
        summary = json.loads((d / "summary.json").read_text())
        summary["command"] = " ".join(["python", "-m", "digest", *out])
        (d / "summary.json").write_text(json.dumps(summary))
    text = render(path, runs, samples, tmp_path)
    moved = tmp_path / "elsewhere" / "fake"
    shutil.copytree(runs.parent, moved)
    assert runlog.render(load_suite(path), moved / "runs", moved / "loadavg.csv", moved,
                         "./run_all.sh --suite fake") == text
    assert "None: every run folder is a planned run" in text


def test_runlog_lists_specs_renamed_since_a_run_and_runs_on_a_graph_their_spec_no_longer_gives(
        suite, tmp_path, monkeypatch):
    path, runs, samples = suite
    d = runs / "toy" / "exact_w2_s0"
    info = json.loads((d / "run.json").read_text())
    info["relabelled"] = {"from": "toy:old", "why": "a preset changed"}
    (d / "run.json").write_text(json.dumps(info))
    stale = {"exact_w2_s1": "signal 0.1 -> 0.007"}  # what load.graph_changed finds per run
    monkeypatch.setattr(run_facts, "graph_changed", lambda run, summary: stale.get(run.name, ""))
    notes = render(path, runs, samples, tmp_path).split("## Re-runs and irregularities")[1]
    assert ("- toy/exact_w2_s0: ran as --dataset toy:old; renamed since to the spec that gives "
            "the graph it ran on (a preset changed)") in notes
    assert ("- toy/exact_w2_s1: drawn at generator options its spec no longer gives (signal 0.1 "
            "-> 0.007): not in the tables") in notes
    assert "digest-I10_w2_s0" not in notes.split("\n## ")[0]


def test_runlog_says_once_that_a_suite_was_renamed_since_its_runs(suite, tmp_path):
    path, runs, samples = suite
    folders = sorted(runs.glob("*/*/run.json"))
    for f in folders:
        info = json.loads(f.read_text())
        f.write_text(json.dumps({**info, "renamed": {"from": "oldname", "why": "named by its question"}}))
    notes = render(path, runs, samples, tmp_path).split("## Re-runs and irregularities")[1]
    assert notes.count("ran as suite oldname") == 1
    assert (f"- {len(folders)} run folders ran as suite oldname (results/oldname/runs: the --out "
            "their argv records); renamed since (named by its question)") in notes


def test_few_missing_runs_are_named_and_many_are_counted_by_part():
    few = ["CS exact@1gbit_w4_s0", "CS partition@1gbit_w4_s0_r1"]
    assert runlog.missing(few) == "CS exact@1gbit_w4_s0, CS partition@1gbit_w4_s0_r1"
    many = ([f"CS m{i}@10gbit_w4_s0" for i in range(3)] + ["CS exact@1gbit_w4_s0_r2"]
            + ["Physics minibatch_w4_s1", "Physics sat_w4_s2", "Physics exact_w4_s2"])
    assert runlog.missing(many, listed=3) == (
        "7 runs (CS 10gbit: 3, CS 1gbit: 1, Physics seed 1: 1, Physics seed 2: 2; each planned run "
        "is named in the plan file)")


def test_markers_pair_up_or_the_page_is_refused_in_one_line():
    page = f"# Title\n\nprose\n{BEGIN}\nold\n{END}\nmore prose\n"
    assert blocks.blocks(page, "p.md") == {"generated": (3, 5)}
    assert blocks.fill(page, {"generated": "| a |\n"}, "p.md") == \
        f"# Title\n\nprose\n{BEGIN}\n\n| a |\n\n{END}\nmore prose\n"
    assert blocks.fill(page, {"generated": None}, "p.md") == page  # nothing to put there: unchanged
    for bad, where in ((f"x\n{BEGIN}\nold\n", "p.md:2"), (f"{END}\n", "p.md:1"),
                       (f"{BEGIN}\n{BEGIN}\n{END}\n", "p.md:2"),
                       (f"{BEGIN}\n<!-- generated:headline:begin -->\n{END}\n", "p.md:2")):
        with pytest.raises(blocks.MarkerError) as e:
            blocks.blocks(bad, "p.md")
        assert str(e.value).startswith(where + ": ") and "\n" not in str(e.value), e.value


def test_a_changed_block_or_run_log_is_a_difference(suite, tmp_path, monkeypatch):
    path, runs, samples = suite
    monkeypatch.chdir(tmp_path)
    results, plots = Path("results"), Path("plots")
    assert recompute.main(args(path, tmp_path, "--write")) == 0  # tables, plots, RUNLOG.md
    page = results / "README.md"
    page.write_text(f"# fake\n\nprose\n\n{BEGIN}\n{END}\n\nmore\n")

    def expected():
        return pages.suite_outputs(load_suite(path), results, plots, runs, samples, "./run_all.sh --suite fake")
    assert set(pages.write(expected())) == {str(results / "RUNLOG.md"), str(page)}
    text = page.read_text()
    assert text.startswith(f"# fake\n\nprose\n\n{BEGIN}\n\n*Generated by") and text.endswith(f"{END}\n\nmore\n")
    assert "**[Table 1](tables.md). Accuracy" in text and "| exact | 2 | 2 |" in text
    assert "![toy: val vs time](../plots/toy_val_vs_time.png)" in text
    assert pages.write(expected()) == [] and pages.check(expected) == []  # the same bytes again

    page.write_text(text.replace("| exact | 2 | 2 |", "| exact | 2 | 3 |"))
    (results / "RUNLOG.md").write_text((results / "RUNLOG.md").read_text() + "hand-written\n")
    diff = pages.check(expected)
    assert len(diff) == 2 and diff[0].startswith("results/RUNLOG.md:") and "hand-written" in diff[0]
    assert diff[1].startswith("results/README.md:") and "| exact | 2 | 3 |" in diff[1]
    page.write_text(f"# fake\n{BEGIN}\n")  # the end marker lost
    assert pages.check(expected)[-1] == (f"results/README.md:2: <!-- generated:begin ... --> "
                                         f"without {END} after it")


def test_recompute_checks_and_rewrites_the_run_log(suite, tmp_path, capsys):
    path, runs, _ = suite
    assert recompute.main(args(path, tmp_path, "--write")) == 0
    log = tmp_path / "results" / "RUNLOG.md"
    assert log.exists() and "# Run log: suite fake" in log.read_text()
    assert recompute.main(args(path, tmp_path)) == 0
    log.write_text(log.read_text().replace("abc1234", "abc9999"))
    capsys.readouterr()
    assert recompute.main(args(path, tmp_path)) == 1
    assert any(line.startswith(f"{log}:") for line in capsys.readouterr().out.splitlines())


def write_tables(results: Path, rows: list, cluster: list | None = None) -> None:
    results.mkdir(parents=True, exist_ok=True)
    acc = pd.DataFrame([{"dataset": d, "method": m, "workers": 4, "seeds": 3, "test_mean": t,
                         "test_std": 0.004, "best_val_mean": t, "test_at_best_val": f"{t * 100:.2f} ± 0.40"}
                        for d, m, t, _ in rows])
    acc.to_csv(results / "accuracy.csv", index=False)
    pd.DataFrame([{"dataset": d, "method": m, "workers": 4, "seeds": 3, "epoch_ms": 100 / s,
                   "speedup_vs_exact": s} for d, m, _, s in rows]).to_csv(results / "epoch_time.csv", index=False)
    if cluster:
        pd.DataFrame([{"dataset": d, "method": "exact", "workers": 4, "bandwidth": bw, "bit_s": b}
                      for d, bw, b in cluster]).to_csv(results / "cluster_epoch_time.csv", index=False)


def test_headline_rows_come_from_the_committed_tables(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_tables(Path("results/repro"), [("CS", "exact", 0.9275, 1.0), ("CS", "partition", 0.9216, 1.41),
                                   ("CS", "digest-I10", 0.92794, 1.16), ("Physics", "exact", 0.96, 1.0)])
    write_tables(Path("results/cluster"), [
        (headline.PRODUCTS, f"{m}@{bw}", t, s) for m, t, s in (("exact", 0.9874, 1.0),
                                                               ("digest-I10", 0.9867, 6.93))
        for bw in ("10gbit", "1gbit", "50mbit")],
        cluster=[(headline.PRODUCTS, bw, b) for bw, b in (("1gbit", 1e9), ("50mbit", 5e7), ("10gbit", 1e10))])
    Path("results/repro/README.md").write_text("page\n")
    keys = (headline.Key("repro", ("CS",), ("partition", "digest-I10", "varco-variable")),
            headline.Key("cluster", (headline.PRODUCTS,), ("digest-I10",), emulated=True))
    text = headline.table(Path("."), keys=keys)
    assert text == headline.table(Path("."), keys=keys)
    body = [line for line in text.splitlines() if line.startswith("| [")]
    assert body == [  # no varco rows: the tables have none; cluster: highest, then lowest bandwidth
        "| [repro](results/repro/README.md) | CS | partition | 4 | loopback | 3 | 92.16 ± 0.40 | "
        "92.75 ± 0.40 | -0.59 | not timed with A/A |",
        "| [repro](results/repro/README.md) | CS | digest-I10 | 4 | loopback | 3 | 92.79 ± 0.40 | "
        "92.75 ± 0.40 | +0.04 | not timed with A/A |",
        "| [cluster](results/cluster/tables.md) | sweep-40k (synthetic) | digest-I10 | 4 | "
        "emulated 10gbit | 3 | 98.67 ± 0.40 | 98.74 ± 0.40 | -0.07 | not timed with A/A |",
        "| [cluster](results/cluster/tables.md) | sweep-40k (synthetic) | digest-I10 | 4 | "
        "emulated 50mbit | 3 | 98.67 ± 0.40 | 98.74 ± 0.40 | -0.07 | not timed with A/A |"]
    assert "products-like" not in text  # the 40,000-node sweep graph has a name of its own
    assert "](repro/README.md)" in headline.table(Path("results"), keys=keys)  # links from results/


def test_a_speed_suite_s_paired_speedup_replaces_the_ratio_of_means(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_tables(Path("results/repro"), [("CS", "exact", 0.9275, 1.0), ("CS", "partition", 0.9216, 1.41),
                                   ("CS", "digest-I10", 0.92794, 1.16)])
    keys = (headline.Key("repro", ("CS",), ("partition", "digest-I10"), speed="repro_speed"),)
    before = headline.table(Path("."), keys=keys)
    assert "| not timed with A/A |" in before and "1.41x" not in before  # no repro_speed yet
    Path("results/repro_speed").mkdir(parents=True)
    pd.DataFrame([{"dataset": "CS", "method": m, "workers": 4, "pairs": 9, "speedup": v,
                   "speedup_lo": lo, "speedup_hi": hi, "verdict": verdict}
                  for m, v, lo, hi, verdict in (
                      ("exact-aa", 1.0, 0.96, 1.04, "A/A (noise floor)"),
                      ("partition", 1.32, 1.21, 1.40, "faster"),
                      ("digest-I10", 1.04, 0.97, 1.10, NO_DIFFERENCE))]
                 ).to_csv("results/repro_speed/timing.csv", index=False)
    text = headline.table(Path("."), keys=keys)
    body = [line for line in text.splitlines() if line.startswith("| [")]
    assert body[0].endswith("| -0.59 | 1.32x [1.21, 1.40], faster |")
    assert body[1].endswith("| +0.04 | 1.04x [0.97, 1.10], no measurable difference |")
    assert "under the timing protocol (repro_speed; docs/methods.md section 11)" in text
    timing = pd.read_csv("results/repro_speed/timing.csv")  # a point not clean: no verdict shown
    timing.loc[timing.method == "partition", "verdict"] = NOT_CLEAN
    timing.loc[timing.method == "digest-I10", "pairs"] = 3  # and fewer pairs than asked, said
    timing.to_csv("results/repro_speed/timing.csv", index=False)
    dirty = [line for line in headline.table(Path("."), keys=keys).splitlines() if "| [" in line]
    assert dirty[0].endswith("| 1.32x [1.21, 1.40], A/A not clean: no verdict |")
    assert dirty[1].endswith("| 1.04x [0.97, 1.10], no measurable difference; 3 pairs: below "
                             "the 6 the protocol asks |")


def test_a_one_seed_row_is_compared_with_exact_at_its_seed(tmp_path, monkeypatch):
    """A method run at seed 0 only, against exact at 3 seeds: exact's column and the difference are
    exact's seed 0 from runs.csv (not its 3-seed mean); without runs.csv, the mean."""
    monkeypatch.chdir(tmp_path)
    write_tables(Path("results/repro"), [("CS", "exact", 0.92, 1.0), ("CS", "sat-I10", 0.91, 0.1)])
    acc = pd.read_csv("results/repro/accuracy.csv")
    acc.loc[acc.method == "sat-I10", ["seeds", "test_at_best_val"]] = [1, "91.00"]
    acc.to_csv("results/repro/accuracy.csv", index=False)
    keys = (headline.Key("repro", ("CS",), ("sat-I10",)),)
    mean = [line for line in headline.table(Path("."), keys=keys).splitlines() if "| [" in line]
    assert mean[0].endswith("| 1 | 91.00 | 92.00 ± 0.40 | -1.00 | not timed with A/A |")
    pd.DataFrame([{"dataset": "CS", "method": m, "workers": 4, "seed": seed, "test_at_best_val": t}
                  for m, seed, t in (("exact", 0, 0.9325), ("exact", 1, 0.91), ("exact", 2, 0.9175),
                                     ("sat-I10", 0, 0.91))]).to_csv("results/repro/runs.csv", index=False)
    paired = [line for line in headline.table(Path("."), keys=keys).splitlines() if "| [" in line]
    assert paired[0].endswith("| 1 | 91.00 | 93.25 (seed 0) | -2.25 | not timed with A/A |")


def test_quick_block_waits_for_the_quick_tables_then_shows_accuracy_and_the_main_plot(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    readme = Path("README.md")
    empty = ("# x\n<!-- generated:quick:begin (python -m experiments.pages; do not edit) -->\n"
             "<!-- generated:quick:end -->\nrest\n")
    readme.write_text(empty)
    assert pages.add_shared({}, (readme,)) == {readme: empty}  # no results/quick/tables.md yet
    Path("results/quick").mkdir(parents=True)
    Path("results/quick/tables.md").write_text(
        "# Results\n\nheader\n\n## 1. Accuracy: test accuracy (%)\n| method | toy |\n|---|---|\n"
        "| exact | 90.00 |\n\n## 2. Per-epoch time (ms)\n\n### toy: measured\n\n| a |\n")
    pd.DataFrame({"dataset": ["toy"], "method": ["exact"]}).to_csv("results/quick/accuracy.csv")
    Path("plots/quick").mkdir(parents=True)
    Path("plots/quick/toy_val_vs_time.png").write_bytes(b"png")
    text = pages.add_shared({}, (readme,))[readme]
    block = text.split("-->\n", 1)[1].split("<!-- generated:quick:end -->")[0]
    assert "**[Table 1](results/quick/tables.md). Accuracy: test accuracy (%)**" in block
    assert "| exact | 90.00 |" in block and "Per-epoch" not in block
    assert block.rstrip().endswith("![toy: validation accuracy against time](plots/quick/toy_val_vs_time.png)")
    assert text.endswith("<!-- generated:quick:end -->\nrest\n")


def test_a_suite_block_too_long_for_its_page_links_its_tables_in_a_paragraph_of_its_own(tmp_path):
    from experiments.render.suite_block import BLOCK_LINES, suite_block
    rows = "".join(f"| m{i} | 90.00 |\n" for i in range(BLOCK_LINES + 5))
    (tmp_path / "tables.md").write_text(f"# Results\n\n## 1. Accuracy: test accuracy (%)\n| method | toy |\n|---|---|\n{rows}")
    pd.DataFrame({"dataset": ["toy"], "method": ["exact"]}).to_csv(tmp_path / "accuracy.csv")
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "toy_val_vs_time.png").write_bytes(b"png")
    block = suite_block("toy", tmp_path, tmp_path / "plots", tmp_path)
    lines = block.splitlines()
    link = lines.index("Accuracy, per-epoch times and speedups: [tables.md](tables.md).")
    assert lines[link + 1] == "" and lines[link + 2].startswith("**Plots**")  # not run into it
    assert "\n\n\n" not in block  # one blank line between parts, never two
