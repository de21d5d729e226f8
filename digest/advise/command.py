"""``python -m digest advise``: its flags, and the request they make (docs/methods.md section 13).

    python -m digest advise --dataset CS --workers 4 --bandwidth 100mbit
    python -m digest advise --dataset Physics --workers 8 --bandwidth 10gbit --latency 5us \\
        --compute-rate 2tflops --target 0.995 --json

No training: the graph is partitioned (or the partition cache read) and counted, and every
registered method's steps are priced by the time model. A bad value is one line, exit status 2.
"""
from __future__ import annotations

import sys

from ..config import TrainConfig, validate
from ..data import check_request
from ..errors import UsageError
from .cost import Network, calibrated
from .epochs import load_table
from .job import load_job
from .protocol import TARGET, TARGETS
from .report import Request, as_json, rows, text
from .units import parse_bandwidth, parse_latency, parse_rate

EPOCHS = 200  # the budget of the benchmark's convergence runs the epochs come from


def add_arguments(p) -> None:
    p.add_argument("--dataset", required=True, help="dataset spec, as for train")
    p.add_argument("--workers", type=int, required=True, help="workers M (one device each)")
    p.add_argument("--bandwidth", required=True,
                   help="each worker's link, each way, in tc's units: 10gbit, 100mbit, 1gbyte; "
                   "inf for links that cost nothing")
    p.add_argument("--latency", default="0us", help="per message, e.g. 5us (default 0)")
    p.add_argument("--compute-rate", default="auto",
                   help="auto: one core of the machine the benchmark's runs were fitted on, per "
                   "worker; or a worker's dense rate in GFLOP/s (500, 2tflops): every compute "
                   "constant scaled to it, a prediction (docs/methods.md section 13)")
    p.add_argument("--target", type=float, default=TARGET,
                   help="fraction of exact's best validation accuracy ("
                   + ", ".join(f"{t:g}" for t in TARGETS[:-1]) + f" or {TARGETS[-1]:g})")
    p.add_argument("--json", action="store_true", help="the same rows as JSON")
    p.add_argument("--model", default="gcn", choices=("gcn", "sage", "gat"))
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--epochs", type=int, default=EPOCHS,
                   help="the run's budget (VARCO's schedule and bytes per epoch depend on it)")
    p.add_argument("--data-root", default=None)


def check_dataset(spec: str, workers: int) -> None:
    """An unknown dataset, bad options, a bad graph file, or workers outside 1 .. nodes:
    UsageError (exit 2); a graph this machine cannot hold: MemoryError (1). Before anything is
    read or partitioned (``train``'s check)."""
    if workers < 1:
        raise UsageError(f"--workers must be between 1 and the number of nodes, got {workers}")
    check_request(spec, workers, "--workers")


def request(args) -> Request:
    """The request of parsed ``args``; a bad value raises UsageError."""
    net = Network(parse_bandwidth(args.bandwidth), parse_latency(args.latency))
    gflops = parse_rate(args.compute_rate)
    rates = calibrated()
    source = (f"auto: one core of the benchmark's machine per worker ({rates.gflops():.1f} "
              "GFLOP/s dense; constants fitted on its emulated runs, digest/advise/calibration.json)")
    if gflops is not None:
        source = (f"stated {gflops:g} GFLOP/s per worker: the fitted constants scaled by "
                  f"{rates.gflops():.1f} / {gflops:g} (a prediction)")
        rates = rates.at_gflops(gflops)
    if f"{args.target:g}" not in {f"{t:g}" for t in load_table()["targets"]}:
        raise UsageError(f"--target {args.target:g}: choose one of "
                         + ", ".join(f"{t:g}" for t in load_table()["targets"]))
    try:
        cfg = TrainConfig.of(dataset=args.dataset, workers=args.workers, model=args.model,
                             hidden=args.hidden, layers=args.layers, dropout=args.dropout,
                             epochs=args.epochs, data_root=args.data_root)
        validate(cfg)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return Request(cfg, net, rates, source, args.target)


def run(args) -> int:
    check_dataset(args.dataset, args.workers)
    req = request(args)
    d = req.cfg.data
    job = load_job(d.dataset, args.workers, d.data_root, d.partitioner, 0, d.sparse)
    ranked = rows(job, req, load_table())
    sys.stdout.write(as_json(job, req, ranked) if args.json else text(job, req, ranked))
    return 0
