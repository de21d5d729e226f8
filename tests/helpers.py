"""The tests' shared harness (test modules import from here and from fake_runs.py, never from
each other):

- constants: the repository root, the shared real-data mirror, the small CLI dataset;
- graphs: the 9-node hand-made toy graph (exact answers), small synthetic graphs;
- workers: ``run_workers`` (a function in M real worker processes through the launcher the CLI
  uses, warm: the forkserver imported torch once), ``launch_world`` (partition a graph, then one
  launch), ``train_runs`` (several configurations trained in that one launch, per-epoch records)
  and ``total`` / ``mean`` over its records;
- the command line: ``cli`` (``python -m digest`` in a new interpreter, in a session of its own,
  the whole process group and every process it started killed on timeout), ``here`` (the same
  ``digest.cli.main`` in this process), ``rows`` / ``metrics_of`` / ``leftovers`` of run folders;
- ``resumed``: a run checkpointed part-way and continued by a new trainer.

Experiment fixtures (run folders written without training) are in fake_runs.py.

Session-scoped data roots are fixtures (conftest.py)."""
from __future__ import annotations

import csv
import os
import sys
from pathlib import Path

import pytest
import torch

import digest.cli  # noqa: F401  (registers every method before a worker unpickles a config)
from digest.runtime import faults

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
SHARED_DATASETS = ROOT.parent / "shared" / "datasets"

# the small synthetic graph the command-line tests train on (300 nodes: seconds per run)
DATASET = "synthetic:nodes=300,avg_degree=5,features=16,classes=4,seed=1"


def needs_shared(name: str):
    """Skip (with the reason) when ../shared/datasets/<name> is absent."""
    return pytest.mark.skipif(not (SHARED_DATASETS / name).exists(),
                              reason=f"{SHARED_DATASETS / name} is absent (real-data test)")


# -- graphs ----------------------------------------------------------------------------------------
# 9 nodes, 12 undirected edges, 3 parts. Owners interleave so that ids and positions differ.
PART_OF = torch.tensor([0, 1, 0, 2, 1, 0, 2, 1, 2])
UNDIRECTED = [(0, 2), (0, 1), (1, 4), (2, 5), (5, 3), (3, 6), (4, 7), (7, 8), (6, 8), (2, 3),
              (1, 7), (5, 4)]
CUT = {(0, 1), (5, 3), (7, 8), (2, 3), (5, 4)}  # ends owned by different parts


def toy_graph(n: int = 9, edges=UNDIRECTED, sparse: bool = False, width: int = 5):
    """The hand-made graph: node i has feature i + 1 in column i % width (node 3 also -2 in the
    last column: a negative entry), label (2 - i) % 3, and a fixed train / val / test split
    (every class in training); ``n`` > 9 adds isolated nodes. Features sparse with ``sparse``."""
    from digest.data.graph import Graph, canonical_edges
    x = torch.zeros(n, width)
    x[torch.arange(n), torch.arange(n) % width] = torch.arange(1, n + 1, dtype=torch.float32)
    x[3, width - 1] = -2.0
    train = torch.zeros(n, dtype=torch.bool)
    val, test = train.clone(), train.clone()
    train[[i for i in (0, 1, 3, 5, 8) if i < n]] = True
    val[[i for i in (2, 4) if i < n]] = True
    test[[i for i in range(6, n) if i != 8]] = True
    return Graph(name="toy", x=x.to_sparse() if sparse else x, y=(2 - torch.arange(n)) % 3,
                 edge_index=canonical_edges(torch.tensor(edges).t(), n), train_mask=train,
                 val_mask=val, test_mask=test, num_classes=3,
                 meta={"source": "hand", "opts": {"a": 1}})


def small_graph(seed: int, nodes: int = 300, classes: int = 4, avg_degree: float = 8,
                features: int = 12):
    """The synthetic graph of the in-process multi-worker tests (each file its own seed)."""
    from digest.data.synthetic import make_synthetic
    return make_synthetic(nodes=nodes, classes=classes, avg_degree=avg_degree,
                          features=features, seed=seed)


# -- workers ---------------------------------------------------------------------------------------
def _body(fn, cfg, part_dir, extra):
    from digest.data import cache
    from digest.runtime import comm

    rt = comm.setup(cfg.runtime.timeout, "cpu")
    torch.set_num_threads(1)
    try:
        part = cache.load_part(Path(part_dir), rt.rank)
        return fn(cfg, rt, part, **extra)
    finally:
        comm.teardown()


def run_workers(fn, cfg, part_dir, world: int, **extra) -> list:
    """``fn(cfg, runtime, part, **extra)`` on every rank of ``world`` worker processes started by
    the launcher ``python -m digest train --workers M`` uses (torch.distributed over gloo, workers
    forked from the warm forkserver); returns the results by rank. ``fn`` must be importable (a
    module-level function). One worker runs in this process, as under the CLI, but for a method
    with a loop of its own (DIGEST-A: its rpc agent starts once per process)."""
    from digest.methods import get
    from digest.runtime.launch import launch_all
    args = (fn, cfg, str(part_dir), extra)
    if world == 1 and get(cfg.method).trainer is None:  # (DIGEST-A's rpc: once per process)
        return [_body(*args)]
    results = launch_all(_body, args, world)
    return [results[r] for r in range(world)]


def launch_world(tmp, name: str, world: int, fn, cfg, graph, **extra) -> tuple:
    """Partition ``graph`` into ``world`` parts (cached under ``tmp`` as dataset ``name``), then ONE
    launch of ``fn`` on every rank. Returns (partition folder, results by rank)."""
    from digest.data.cache import prepare_partition
    part_dir = prepare_partition(name, world, "metis", 0, tmp, graph=graph)
    return part_dir, run_workers(fn, cfg, part_dir, world, **extra)


def train_runs(cfg, rt, part, runs: dict, setup=None, per_step=None, finish=None) -> dict:
    """Every configuration of ``runs`` ({name: flags over ``cfg``}) trained on this worker, one
    after the other, in this one launch (worker start-up dominates the cost of a short run).
    ``out[name]``: one record per epoch: the loss, the epoch's traffic (comm.traffic), the halo
    policy's state, and ``input_bytes`` / ``input_messages`` (the halo's input features, fetched
    once and counted in epoch 0; 0 later). Hooks (module-level functions, for pickling):
    ``setup(trainer) -> ctx`` after the trainer is built, ``per_step(trainer, epoch, ctx) -> dict``
    merged into the epoch's record, ``finish(trainer, ctx) -> value`` kept as ``out["end"][name]``.
    A configuration the trainer refuses is recorded as its error message instead."""
    from digest.config import validate
    from digest.runtime import comm
    from digest.training.trainer import Trainer
    torch.set_num_threads(1)
    out: dict = {"end": {}}
    for name, over in runs.items():
        try:
            run_cfg = cfg.replace(**over)
            validate(run_cfg)
            trainer = Trainer(run_cfg, rt, part)
        except ValueError as e:
            out[name] = str(e)
            continue
        ctx = setup(trainer) if setup else None
        records = []
        for epoch in range(run_cfg.optim.epochs):
            comm.traffic.reset()
            loss = trainer.step(epoch)
            fetched = trainer.input_fetch if epoch == 0 else (0, 0)
            rec = {"loss": loss, **comm.traffic.snapshot(), **trainer.policy.state(),
                   "input_bytes": fetched[0], "input_messages": fetched[1]}
            if per_step:
                rec.update(per_step(trainer, epoch, ctx))
            records.append(rec)
        out[name] = records
        if finish:
            out["end"][name] = finish(trainer, ctx)
    return out


def resumed(cfg, rt, part, out_dir, stop: int, trainer_cls=None) -> list[float]:
    """Losses of ``cfg`` run to epoch ``stop``, checkpointed, restored into a new trainer (of
    ``trainer_cls``, default ``Trainer``) and run on to the end: equal to an uninterrupted run's
    when resume restores everything a step depends on."""
    from digest.training import checkpoint
    from digest.training.trainer import Trainer
    trainer_cls = trainer_cls or Trainer
    first = trainer_cls(cfg, rt, part)
    losses = [first.step(t) for t in range(stop)]
    checkpoint.save(out_dir, first, stop)
    second = trainer_cls(cfg, rt, part)
    assert checkpoint.load(out_dir, second)[0] == stop
    return losses + [second.step(t) for t in range(stop, cfg.optim.epochs)]


def fit_async_counted(cfg, rt, part, out_dir: str) -> dict:
    """One DIGEST-A run (any method with AsyncTrainer's loop) on this worker, recording what a
    hand count of its bytes needs: its applied steps' records (bytes, messages, store_syncs), for
    every pull in order the owners whose newer block came back (which depends on the arrival
    order), the model's parameter count, the rows this worker sends and receives per owner."""
    from pathlib import Path

    from digest.asynchronous.client import AsyncClient
    from digest.methods import get
    pulls = []
    real = AsyncClient.pull_rows

    def pull_rows(self, known):
        got = real(self, known)
        pulls.append([o for o, item in enumerate(got) if item is not None])
        return got
    AsyncClient.pull_rows = pull_rows
    try:
        trainer = get(cfg.method).trainer(cfg, rt, part)
        trainer.fit(Path(out_dir), {})
    finally:
        AsyncClient.pull_rows = real
    return {"steps": trainer.pos.rows, "pulls": pulls,
            "params": sum(p.numel() for p in trainer.model.parameters()),
            "sent": sum(i.numel() for p, i in enumerate(part.send_idx) if p != part.rank),
            "recv": list(part.recv_counts), "input": part.halo_input_bytes(),
            "input_messages": sum(1 for p, c in enumerate(part.recv_counts)
                                  if p != part.rank and c)}


def async_bytes_by_hand(worker: dict, width: int) -> list[dict]:
    """What each applied step of ``fit_async_counted``'s worker moved, counted by hand: its
    gradient up and the server's parameters back (float32, one rpc: 2 messages); after a step that
    synced, its boundary rows up (``width`` float32 columns: the hidden layers side by side) and,
    from each owner whose newer block came back, that owner's rows of its halo (push and pull: 2
    rpcs); at step 0 the halo's input features, fetched once. The start-up fill and seed and a
    dropped step are not a step's traffic (docs/digest-a.md, Metrics)."""
    out, pulls, synced = [], iter(worker["pulls"]), 0
    for i, step in enumerate(worker["steps"]):
        rec = {"bytes_params": 2 * 4 * worker["params"], "bytes_store": 0, "bytes_halo_fwd": 0,
               "messages": 2}
        if step["store_syncs"] > synced:
            synced = step["store_syncs"]
            pulled = sum(worker["recv"][o] for o in next(pulls))
            rec["bytes_store"] = (worker["sent"] + pulled) * width * 4
            rec["messages"] += 4
        if i == 0:
            rec["bytes_halo_fwd"] = worker["input"]
            rec["messages"] += worker["input_messages"]
        out.append(rec)
    assert next(pulls, None) is None, "a pull after no step that synced"
    return out


def total(ranks: list, run: str, key: str) -> list:
    """Per-epoch sum over the workers of ``key`` in ``train_runs``'s records of ``run``."""
    return [sum(r[run][t][key] for r in ranks) for t in range(len(ranks[0][run]))]


def mean(ranks: list, run: str, key: str) -> list:
    return [v / len(ranks) for v in total(ranks, run, key)]


def hidden(ranks: list, run: str, key: str = "bytes_halo_fwd") -> list:
    """``total`` of a byte column without the input features fetched in epoch 0."""
    fetched = total(ranks, run, "input_bytes") if key == "bytes_halo_fwd" else None
    got = total(ranks, run, key)
    return [g - f for g, f in zip(got, fetched)] if fetched else got


# -- the command line ------------------------------------------------------------------------------
FAULTS = ("DIGEST_FAULT", "DIGEST_EPOCH_HOOK")  # digest/runtime/faults.py: the fault and its hook


def cli(args, data_root, cwd, env: dict | None = None, timeout: float = 240,
        interrupt_when: Path | None = None, program: list | None = None):
    """``python -m digest *args`` as a user runs it (experiments/studies/faults/watch.py: a new interpreter in a
    session of its own, every process it starts watched; past ``timeout`` its process group and
    every process it started are SIGKILLed and TimeoutError raised). ``env`` adds variables (the
    fault to inject: ``DIGEST_FAULT``, digest/runtime/faults.py); ``interrupt_when``: Ctrl-C once that file exists
    (an event, never a fixed delay); ``program``: another command than ``python -m digest``
    (torchrun, run_all.sh)."""
    from experiments.studies.faults.watch import run
    full = {k: v for k, v in os.environ.items() if k not in FAULTS and k != "DIGEST_DEBUG"}
    full.update(DIGEST_DATA=str(data_root), PYTHONPATH=str(ROOT), **(env or {}))
    if "DIGEST_FAULT" in (env or {}):
        full["DIGEST_EPOCH_HOOK"] = faults.HOOK
    # the one warning pytest.ini also ignores (torch's, from digest/models/sparse.py's CSR tensors)
    full["PYTHONWARNINGS"] = "ignore:Sparse invariant checks are implicitly disabled:UserWarning"
    argv = program if program is not None else [sys.executable, "-m", "digest"]
    return run([*argv, *args], cwd, full, timeout, None, interrupt_when)


def here(args, capsys) -> tuple[int, list[str]]:
    """``python -m digest *args`` without a new interpreter (``digest.cli.main``, whose workers
    come from the warm launcher): exit status (argparse's SystemExit included), stderr lines."""
    from digest.cli import main
    capsys.readouterr()
    try:
        rc = main([str(a) for a in args])
    except SystemExit as e:  # argparse: a bad flag or value
        rc = e.code
    return rc, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def rows(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


METRICS = ("epoch", "train_loss", "train_acc", "val_acc", "test_acc")


def metrics_of(path, columns=METRICS) -> list[tuple]:
    """The columns that must be reproducible (times and memory are not), as written."""
    return [tuple(r.get(k) for k in columns) for r in rows(path)]


def leftovers(directory) -> list[str]:
    """Temp files a killed writer could leave (atomic writes use *.tmp)."""
    return [str(p) for p in Path(directory).rglob("*.tmp")]


def files_under(directory) -> list[str]:
    """Every file under ``directory`` but lock files (a lock holds no data)."""
    return sorted(str(p) for p in Path(directory).rglob("*")
                  if p.is_file() and not p.name.endswith(".lock"))
