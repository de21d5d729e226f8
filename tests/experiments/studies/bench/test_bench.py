"""experiments/studies/bench/command.py, experiments/studies/bench/analysis.py and experiments/studies/bench/render.py: the report says every ratio, met or not,
states no explanation without the measured number that shows it, and the CPU-time cost model reads
the per-worker columns the trainer writes (the measurements themselves are benchmarks, not tests)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from experiments.studies.bench import analysis as performance
from experiments.studies.bench import render as perf_report
from experiments.studies.bench import scale_render as scale_render
from experiments.studies.bench import contest
from experiments.analysis.costmodel import parse_network


def _contestants(ours, ref):
    return {contest.OURS: {"median_s": ours, "peak_mem_mb": 100.0, "times_s": [ours]},
            contest.PLAIN_SP: {"median_s": ref, "peak_mem_mb": 100.0, "times_s": [ref]}}


def _side(t, cpu):
    return {"repr_bytes_per_epoch": 1e6, "bytes_by_category_per_epoch": {"params": 1e6},
            "mean_epoch_s": t, "median_epoch_s": t, "mean_comm_s": 0.1, "modeled_epoch_s": t,
            "modeled_cpu_epoch_s": cpu, "peak_mem_mb_per_worker": 500.0, "command": "c",
            "runs": 1, "epochs_per_run": 3}


def test_render_states_every_ratio_met_or_not():
    machine = {"machine": {"cores": 2, "cpu": "x", "ram_gib": 1, "gpu": "none"},
               "versions": {"torch": "t"}}
    doc = {"ratios": {
        "date": "d", "command": "python -m experiments.studies.bench", "load_start": "1", "load_end": "1",
        "machine": machine,
        "photo": {"epochs": 2, "warmup": 1, "ratio": 1.2, "reference": contest.PLAIN_SP,
                  "contestants": _contestants(1.2, 1.0), "ratios_by_reference": {contest.PLAIN_SP: 1.2}},
        "physics": {"epochs": 2, "warmup": 1, "ratio": 0.1, "reference": contest.PLAIN_SP,
                    "contestants": _contestants(0.1, 1.0), "ratios_by_reference": {contest.PLAIN_SP: 0.1}},
        "digest_vs_exact": {"dataset": "Physics", "workers": 4, "network": "10 Gbit/s, 5 us",
                            "exact": _side(1.0, 0.4), "digest": _side(0.9, 0.3),
                            "bytes_ratio": 0.07, "time_ratio": 0.9, "time_ratio_median": 0.9,
                            "modeled_ratio": 1.0, "modeled_cpu_ratio": 0.75}}}
    text = perf_report.render(doc)
    assert "| 1.200 | <= 1.10 | NOT met |" in text and "| 0.100 | <= 0.33 | met |" in text
    assert "| 0.070 | <= 0.10 | met |" in text and "| 0.900 | <= 0.75 | NOT met |" in text
    assert "0.750" in text and "modeled" in text
    assert text.count("- ") >= 4  # one sentence per ratio


def test_modeled_cpu_uses_cpu_seconds_bytes_and_messages():
    net = parse_network("1gbyte,1ms")
    m = pd.DataFrame({"cpu_time_w0": [1.0, 2.0], "bytes_w0": [1e9, 0], "messages_w0": [10, 0],
                      "cpu_time_w1": [0.5, 3.0], "bytes_w1": [0, 0], "messages_w1": [0, 0]})
    # epoch 0: max(1 + 1 + 0.01, 0.5) = 2.01; epoch 1: max(2, 3) = 3
    assert abs(performance.modeled_cpu(m, net) - (2.01 + 3) / 2) < 1e-9
    assert performance.modeled_cpu(pd.DataFrame({"x": [1]}), net) is None


def test_cpu_seconds_sum_the_workers_and_render_with_utilisation():
    m = pd.DataFrame({"cpu_time_w0": [1.0, 2.0], "cpu_time_w1": [0.5, 0.5], "epoch_time": [1, 1]})
    assert performance.cpu_seconds(m) == (1.5 + 2.5) / 2
    assert performance.cpu_seconds(pd.DataFrame({"x": [1]})) is None
    machine = {"machine": {"cores": 2, "cpu": "x", "ram_gib": 1, "gpu": "none"}, "versions": {}}
    exact, digest = _side(1.0, 0.4), _side(0.9, 0.3)
    exact["cpu_s_per_epoch"], digest["cpu_s_per_epoch"] = 2.0, 1.62
    doc = {"ratios": {"date": "d", "command": "c", "load_start": "1", "load_end": "1",
                      "machine": machine, "git_commit": "abcdef0123",
                      "digest_vs_exact": {"dataset": "Physics", "workers": 4, "network": "n",
                                          "exact": exact, "digest": digest, "bytes_ratio": 0.07,
                                          "time_ratio": 0.9, "time_ratio_median": 0.9,
                                          "modeled_ratio": 1.0, "modeled_cpu_ratio": None,
                                          "cpu_ratio": 0.81}}}
    text = perf_report.render(doc)
    assert "| 0.810 | (reported) |" in text and "at git commit abcdef0." in text
    # 2.0 CPU s / (2 cores x 1.0 s) and 1.62 / (2 x 0.9): both cores busy all epoch
    assert "| core utilisation (CPU seconds / (cores x epoch time)) | 100% | 90% |" in text
    assert "0.81x exact's" in text and "is 19% of exact's CPU work" in text


def _committed_scale() -> dict:
    """The committed scale record (a fresh copy each call: tests edit it)."""
    return json.loads((Path(perf_report.__file__).parents[3] / "results" / "performance" / "performance.json")
                      .read_text())["scale"]


def test_scale_sentences_follow_the_measurements():
    s = _committed_scale()
    s["machine"]["machine"].update(cores=2, ram_gib=23.5)
    runs = s["runs"]
    for name, times, mem in (("exact_w4", [30.0] * 3, [3000.0] * 4),
                             ("digest_w4", [30.0, 20.0, 20.0], [3000.0] * 4),
                             ("exact_w1", [10.0] * 3, [9000.0])):
        runs[name].update(epoch_times_s=times, mean_epoch_s=sum(times) / 3,
                          peak_mem_mb_per_worker=mem)
    text = " ".join(scale_render.scale_sentences(s))
    assert "0.67x over the later ones" in text
    assert "(within the machine's 23.5 GiB)" in text and "1 worker's epoch is the fastest" in text
    runs["exact_w1"].update(epoch_times_s=[40.0] * 3, mean_epoch_s=40.0)
    runs["exact_w4"]["peak_mem_mb_per_worker"] = [7000.0] * 4  # 27.3 GiB in all
    text = " ".join(scale_render.scale_sentences(s))
    assert "MORE than the machine's 23.5 GiB" in text and "fastest" not in text


def test_scale_partition_lines_say_when_a_cached_partition_was_reused():
    s = _committed_scale()
    for v in s["partitions"].values():  # as records before this field: built by their own run
        v.pop("cache_reused", None)
    text = "\n".join(scale_render.scale_section(s, "t"))
    assert "with writing the part files" in text and "reused" not in text
    four = s["partitions"]["4"]
    four.update(cache_reused=True, cache_built_utc="2026-11-30 13:41 UTC", partition_and_save_s=11.0)
    text = "\n".join(scale_render.scale_section(s, "t"))
    assert (f"- METIS into 4 parts: {four['partition_s']:.0f} s, measured when its cache was built "
            "(2026-11-30 13:41 UTC); this run reused the cache (checked in 11 s); edge cut") in text


def test_history_keeps_every_earlier_run():
    runs = [{"date": f"2026-11-30 {h:02d}:00 UTC", "load_start": "1 1 1",
             "digest_vs_exact": {"time_ratio": 0.8}} for h in range(10)]
    doc = {}
    for r in runs:  # each run becomes the previous one of the next
        doc = {**r, "history": performance.history(doc)}
    assert [h["date"] for h in doc["history"]] == [r["date"] for r in runs[:-1]]  # 9, none dropped
    assert performance.history({}) == []  # no earlier run


def _sentences_of(text: str) -> list[str]:
    """The sentences of the report's bullet lines (the prose; tables and headers are numbers)."""
    out = []
    for line in text.splitlines():
        if line.startswith("- "):
            out += [x for x in re.split(r"(?<=[.:;])\s+(?=[A-Z])", line[2:]) if x.strip()]
    return out


def test_every_sentence_of_the_committed_report_states_a_number():
    """An explanation only with the measurement that shows it. The committed
    performance.json rendered now (and a record with every ratio met) has no sentence without a
    number, and none of the fixed explanations that used to be chosen by a threshold."""
    doc = json.loads((Path(perf_report.__file__).parents[3] / "results" / "performance" / "performance.json")
                     .read_text())
    met = json.loads(json.dumps(doc))
    met["ratios"]["photo"]["ratio"] = 0.9
    for d in (doc, met):
        text = perf_report.render(d)
        sentences = _sentences_of(text)
        assert len(sentences) > 10
        bare = [x for x in sentences if not re.search(r"\d", x)]
        assert not bare, bare
        for fixed in ("because", "Adam is fused", "compute-bound", "too few to amortise",
                      "costs nothing measurable", "loopback copies"):
            assert fixed not in text, fixed


def test_history_rows_whose_code_no_commit_holds_are_not_reported():
    """A row without a commit (or with uncommitted changes) cannot be traced to
    code anyone can rerun: the report leaves it out and says how many; the json keeps it."""
    doc = json.loads((Path(__file__).resolve().parents[4] / "results" / "performance" / "performance.json").read_text())
    hist = [{**h} for h in doc["ratios"]["history"][:1]]
    hist += [{**hist[0], "date": "no-commit", "git_commit": None},
             {**hist[0], "date": "dirty", "git_commit": "d9990238864d2b16b7601bd4d6873035d8fa2bb5-dirty"},
             {**hist[0], "date": "clean", "git_commit": "d9990238864d2b16b7601bd4d6873035d8fa2bb5"}]
    text = perf_report.render({"ratios": {**doc["ratios"], "history": hist}})
    rows = [line for line in text.splitlines() if line.startswith("| ") and " UTC |" in line
            or line.startswith(("| no-commit", "| dirty", "| clean"))]
    assert not any(r.startswith(("| no-commit", "| dirty")) for r in rows)
    assert any(r.startswith("| clean | d999023 |") for r in rows)
    assert "earlier run(s) are not shown: their code is in no commit" in text
    assert not any(" | - | " in line for line in text.splitlines())


def test_a_generation_only_record_renders_beside_the_scale_runs_memory():
    s = _committed_scale()
    gen = {"spec": "synthetic:preset=x", "generate_only": True, "nodes": 10, "edges": 40,
           "features": 3, "classes": 2, "generate_s": 12.4, "generate_peak_rss_gib": 7.25,
           "date": "d", "command": "c", "git_commit": "abcdef123", "runs": {}}
    text = "\n".join(scale_render.generation_section(gen, s))
    assert "Generation only: `synthetic:preset=x`" in text and "12 s" in text and "7.2 GiB" in text
    worst = max(sum(r["peak_mem_mb_per_worker"]) for r in s["runs"].values()
                if "peak_mem_mb_per_worker" in r)
    assert f"{worst / 1024:.1f} GiB for its workers together" in text
    doc = {"scale": s, "scale_variants": {"synthetic:preset=x": gen}}
    assert "## Generation only" in perf_report.render(doc)
    assert "the scale run above" not in "\n".join(scale_render.generation_section(gen, None))


def _tiny_graph(seed=0):
    """12 nodes on a ring with chords, 30 bag-of-words columns (about 10% nonzero), 3 classes."""
    import types

    import torch
    g = torch.Generator().manual_seed(seed)
    n = 12
    src = torch.arange(n)
    pairs = torch.cat([torch.stack([src, (src + 1) % n]), torch.stack([src, (src + 5) % n])], 1)
    ei = torch.cat([pairs, pairs.flip(0)], 1)
    x = (torch.rand(n, 30, generator=g) < 0.1).float() * torch.rand(n, 30, generator=g)
    return types.SimpleNamespace(x=x, edge_index=ei, num_nodes=n, num_classes=3,
                                 y=torch.randint(0, 3, (n,), generator=g),
                                 train_mask=torch.arange(n) % 2 == 0)


def test_the_sparse_features_variant_is_the_same_model_as_the_dense_one():
    """Same seed, same weights; its forward (and with dropout 0 its gradients) equal the dense
    variant's on every adjacency form: the sparse-features reference is the same GCN."""
    import torch
    import torch.nn.functional as F

    from experiments.studies.bench.reference import plain_setup
    graph = _tiny_graph()
    out, grads = {}, {}
    for features in ("dense", "sparse"):
        for adjacency in ("edge_index", "sparse"):
            model, x, adj = plain_setup(graph, hidden=8, layers=3, dropout=0.0,
                                        adjacency=adjacency, features=features)
            assert (x.layout == torch.sparse_csr) == (features == "sparse")
            model.train()
            logits = model(x, adj)
            F.cross_entropy(logits[graph.train_mask], graph.y[graph.train_mask]).backward()
            out[features, adjacency] = logits.detach()
            grads[features, adjacency] = [p.grad.clone() for p in model.parameters()]
    ref = out["dense", "edge_index"]
    assert ref.abs().max() > 0
    for key, logits in out.items():
        torch.testing.assert_close(logits, ref, rtol=1e-5, atol=1e-6, msg=str(key))
        for g, g0 in zip(grads[key], grads["dense", "edge_index"]):
            torch.testing.assert_close(g, g0, rtol=1e-4, atol=1e-6, msg=str(key))
    # with dropout, the eval forward is the same model's too
    dense, xd, ei = plain_setup(graph, hidden=8, dropout=0.5)
    sparse, xs, _ = plain_setup(graph, hidden=8, dropout=0.5, features="sparse")
    dense.eval(), sparse.eval()
    torch.testing.assert_close(sparse(xs, ei), dense(xd, ei), rtol=1e-5, atol=1e-6)


def test_sparse_dropout_drops_stored_values_only():
    import torch

    from experiments.studies.bench.reference import dropout_any
    x = _tiny_graph().x
    xs = x.to_sparse_csr()
    torch.manual_seed(0)
    d = dropout_any(xs, 0.5, True).to_dense()
    kept = d != 0
    assert kept.sum() < (x != 0).sum() and not (kept & (x == 0)).any()
    torch.testing.assert_close(d[kept], 2 * x[kept])
    assert dropout_any(xs, 0.5, False) is xs


def _physics_record(ref_ms: dict) -> dict:
    res = {contest.OURS: {"median_s": 0.25, "peak_mem_mb": 1000.0, "times_s": [0.25],
                        "features": {"layout": "sparse", "rows": 100, "columns": 400, "nonzeros": 200}}}
    for name, ms in ref_ms.items():
        lay = "sparse" if name == contest.PLAIN_SPX else "dense"
        res[name] = {"median_s": ms / 1e3, "peak_mem_mb": 1000.0, "times_s": [ms / 1e3],
                     "features": {"layout": lay, "rows": 100, "columns": 400, "nonzeros": 200}}
    return performance.graph_result("Physics", res, 2, 1)


def test_physics_divides_by_the_sparse_features_variant_and_shows_the_dense_ones():
    x = _physics_record({contest.PLAIN_EI: 8000.0, contest.PLAIN_SP: 6000.0, contest.PLAIN_SPX: 1000.0})
    assert x["reference"] == contest.PLAIN_SPX and abs(x["ratio"] - 0.25) < 1e-12
    assert set(x["ratios_by_reference"]) == {contest.PLAIN_EI, contest.PLAIN_SP, contest.PLAIN_SPX}
    text = perf_report._physics_sentence(x, 0.33)
    assert "plain PyG fed the same sparse features (plain PyG, sparse features" in text
    assert "takes 0.25x its epoch (4.0x faster)" in text and "is met" in text
    assert f"0.031x ({contest.PLAIN_EI}) and 0.042x ({contest.PLAIN_SP})" in text
    assert "(400 input columns, 0.50% of the entries nonzero)" in text
    slow = _physics_record({contest.PLAIN_EI: 8000.0, contest.PLAIN_SP: 6000.0, contest.PLAIN_SPX: 500.0})
    assert "takes 0.50x its epoch (2.0x faster)" in perf_report._physics_sentence(slow, 0.33)
    assert "NOT met" in perf_report._physics_sentence(slow, 0.33)
    line = perf_report._features_line(x)
    assert f'held sparse by ours and "{contest.PLAIN_SPX}"' in line
    assert f'held dense by "{contest.PLAIN_EI}" and "{contest.PLAIN_SP}"' in line


def test_a_run_that_skips_parts_keeps_them_with_the_run_that_measured_them():
    """--skip photo,digest: the kept parts carry their own run's date and command, the page says
    which run measured which part, and the history counts each part once, in its own run."""
    doc = json.loads((Path(perf_report.__file__).parents[3] / "results" / "performance" / "performance.json")
                     .read_text())
    old = doc["ratios"]
    old = {**old, **{k: {kk: vv for kk, vv in old[k].items() if kk != "run"}
                     for k in performance.PARTS if k in old}}  # as a record written before parts had one
    old["date"], old["command"], old["git_commit"] = "2026-11-30 20:59 UTC", "old cmd", "a" * 40
    new = {"date": "2026-12-03 10:00 UTC", "command": "new cmd", "git_commit": "b" * 40,
           "load_start": "1", "load_end": "2", "machine": old["machine"],
           "physics": _physics_record({contest.PLAIN_EI: 8000.0, contest.PLAIN_SPX: 1000.0})}
    new["physics"]["run"] = performance.run_info(new)
    new["history"] = performance.history(old)
    kept = performance.kept_parts(old, {"photo", "digest"})
    assert set(kept) == {"photo", "digest_vs_exact"}
    assert kept["digest_vs_exact"]["run"]["command"] == "old cmd"
    r = {**kept, **new}
    assert performance.measured_in(r, "physics") and not performance.measured_in(r, "photo")
    summary = performance.summary(r)
    assert summary["photo"] is None and summary["digest_time"] is None
    assert summary["physics_reference"] == contest.PLAIN_SPX
    assert new["history"][-1]["date"] == old["date"] and new["history"][-1]["digest_time"]
    text = perf_report.render({"ratios": r})
    assert "The ratios come from 2 runs of the bench" in text
    assert "- Physics, 1 worker: run on 2026-12-03 10:00 UTC with `new cmd` at git commit bbbbbbb" in text
    assert ("- Photo, 1 worker; DIGEST vs exact: run on 2026-11-30 20:59 UTC with `old cmd` at "
            "git commit aaaaaaa") in text
    assert "interleaved epochs on a shared, loaded machine" in text
    # the DIGEST range counts the kept part once: in its own run's history row
    times = [h["digest_time"] for h in r["history"]
             if performance.traceable(h.get("git_commit")) and h.get("digest_time") is not None]
    assert f"Across the {len(times)} runs of the DIGEST-versus-exact part" in text
    assert "(the history below), DIGEST's mean epoch took" in text  # the kept part counted once
    assert f"| {contest.PLAIN_SP} (dense features) |" in text  # the old run's Physics reference
    assert "paired ratios with a bootstrap interval" in text and "unpaired" in text
