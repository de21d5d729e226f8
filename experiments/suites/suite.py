"""Declarative experiment suites: datasets x methods (label + flags) x worker counts x seeds.

A suite is a YAML file in experiments/configs/ (``quick``, ``full``) or any path to one. Each run it
expands to has the exact ``python -m digest train`` flags it passes, a config hash (sha256 of their
canonical JSON) and a stable directory ``<root>/<dataset>/<label>_w<M>_s<seed>``.

Timing protocol (docs/methods.md section 11; experiments/suites/schedule.py orders the runs,
experiments/analysis/timing.py reads them): ``rounds: R`` repeats every run R times (round r > 0: directory
``..._s<seed>_r<r>``, config hash of the flags plus the round; round 0 keeps the name and hash of a
suite without rounds); ``aa: true`` adds, after every exact label, its A/A twin ``exact-aa`` (the
same method and flags: the noise floor of the speedups); ``warmup: W`` (default 3) is how many
first epochs of each run the paired speedups leave out.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from digest.advise.protocol import WARMUP
from digest.config import AROUND_THE_RUN

from . import keys

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
RESERVED = AROUND_THE_RUN  # set by the runner, never part of a config
AA_SUFFIX = "-aa"  # "exact-aa": the second exact label of an A/A suite


@dataclass(frozen=True)
class MethodSpec:
    label: str                      # e.g. "varco-fixed-8"
    method: str                     # registered method name, e.g. "varco"
    flags: dict = field(default_factory=dict)  # e.g. {"comp_schedule": "fixed", "comp_ratio": 8}
    workers: tuple | None = None    # restricts the suite's worker counts for this method
    # {M: seeds} for this method at M, before the suite's: more seeds where the comparison the
    # suite is about is made, without repeating every other method
    seeds_by_workers: dict = field(default_factory=dict)
    # restrict the suite's datasets / emulated networks for this method (each a subset of the
    # suite's): a method added to a sweep at a few of its points, beside references run at all
    datasets: tuple | None = None
    networks: tuple | None = None

    def nets(self, suite: "Suite") -> tuple:
        """The networks this method runs at: its own, else the suite's; (None,) for no emulation."""
        return self.networks or suite.networks or (None,)

    def seeds(self, suite: "Suite", workers: int) -> tuple:
        if workers in self.seeds_by_workers:
            return self.seeds_by_workers[workers]
        return suite.seeds_by_workers.get(workers, suite.seeds)


@dataclass(frozen=True)
class Suite:
    name: str
    datasets: tuple
    workers: tuple
    seeds: tuple
    epochs: int
    model: dict                     # model + hyperparameters: model, layers, hidden, lr, ...
    methods: tuple                  # of MethodSpec
    seeds_by_workers: dict = field(default_factory=dict)  # {M: seeds} overrides seeds at M
    # link bandwidths of an emulated cluster (--emulate-network, digest/runtime/netem.py): every method
    # runs at each, labelled "<label>@<bandwidth>"; empty = no emulation
    networks: tuple = ()
    rounds: int = 1                 # every run R times (the timing protocol's rounds)
    aa: bool = False                # an A/A twin after every exact label
    warmup: int = WARMUP            # first epochs each run's per-epoch times leave out
    fit_epochs: tuple = ()          # epochs at which tables.md gives the training fit (0-based)
    budgets: tuple = ()             # epoch budgets at which tables.md gives accuracy as if stopped
    # long runs: a checkpoint every N epochs, so that an interrupted run resumes from it (not
    # part of a run's config or hash: a checkpointed run trains as an uncheckpointed one)
    checkpoint_every: int = 0


NET_SEP = "@"  # "digest-I10@100mbit": the method's label, then the emulated link bandwidth


def base_label(label: str) -> str:
    return label.split(NET_SEP, 1)[0]


def network_of(label: str) -> str | None:
    """The emulated bandwidth a run label names ("exact@1gbit" -> "1gbit"), or None."""
    return label.split(NET_SEP, 1)[1] if NET_SEP in label else None


# models a label may name as its first word ("sage-digest-I10"): such a run is compared with that
# model's exact run ("sage-exact"), not with the suite's default model's ("exact")
MODEL_PREFIXES = ("sage", "gat", "gcn")


def exact_for(label: str) -> str:
    """The label of the exact run a method's run is compared with: same network, same model
    ("sage-partition" -> "sage-exact", "digest-I10@1gbit" -> "exact@1gbit")."""
    base, net = base_label(label), network_of(label)
    model = base.split("-", 1)[0]
    ref = f"{model}-exact" if "-" in base and model in MODEL_PREFIXES else "exact"
    return ref if net is None else f"{ref}{NET_SEP}{net}"


def is_exact(label: str) -> bool:
    """Whether a run label is a reference (exact) run of the tables."""
    return label == exact_for(label)


def aa_label(label: str) -> str:
    """The A/A twin of an exact label: "exact" -> "exact-aa", "sage-exact@1gbit" ->
    "sage-exact-aa@1gbit"."""
    net = network_of(label)
    return base_label(label) + AA_SUFFIX + ("" if net is None else f"{NET_SEP}{net}")


def is_aa(label: str) -> bool:
    """Whether a label is the A/A twin of its exact label (compared with it like any method)."""
    return label == aa_label(exact_for(label))


def methods_of(suite: "Suite") -> tuple:
    """The suite's methods, each exact one followed by its A/A twin when the suite says ``aa``."""
    out = []
    for m in suite.methods:
        out.append(m)
        if suite.aa and is_exact(m.label):
            out.append(dataclasses.replace(m, label=aa_label(m.label)))
    return tuple(out)


def labels(suite: "Suite") -> list[str]:
    """Every run label of the suite, in order (methods, then networks within each)."""
    return list(dict.fromkeys(f"{m.label}{NET_SEP}{n}" if n else m.label for m in methods_of(suite)
                              for n in m.nets(suite)))


@dataclass(frozen=True)
class Run:
    dataset: str
    spec: MethodSpec
    workers: int
    seed: int
    flags: dict                     # exactly what is passed to `python -m digest train`
    round: int = 0                  # the timing protocol's repetition (0 without rounds)
    position: int | None = field(default=None, compare=False)  # its place in its round's order
    checkpoint_every: int = field(default=0, compare=False)  # the suite's (not in the hash)
    resume: bool = field(default=False, compare=False)  # argv continues its checkpoint

    @property
    def label(self) -> str:
        return self.spec.label

    @property
    def hash(self) -> str:
        """The flags' hash; a later round's hashes its round too (round 0's is the flags' own,
        so a suite that adds rounds keeps its runs)."""
        return config_hash(self.flags if not self.round else {**self.flags, "round": self.round})

    @property
    def name(self) -> str:
        return f"{self.label}_w{self.workers}_s{self.seed}" + (f"_r{self.round}" if self.round else "")

    def directory(self, root: str | Path) -> Path:
        return Path(root) / dataset_slug(self.dataset) / self.name

    def argv(self, out: str | Path) -> list[str]:
        """``python -m digest train``'s arguments (less ``python``); with ``resume``, those that
        continue the run checkpointed in ``out`` with its own settings."""
        if self.resume:
            return ["-m", "digest", "train", "--resume", str(out), "--no-progress"]
        every = ["--checkpoint-every", str(self.checkpoint_every)] if self.checkpoint_every else []
        return ["-m", "digest", "train", *to_argv(self.flags), *every, "--out", str(out),
                "--no-progress"]


def config_hash(flags: dict) -> str:
    canonical = json.dumps(flags, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def dataset_slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")


def to_argv(flags: dict) -> list[str]:
    argv = []
    for key in sorted(flags):
        value, flag = flags[key], "--" + key.replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + flag[2:])
        else:
            argv += [flag, str(value)]
    return argv


def _check_flags(flags: dict, where: str) -> None:
    from digest.flags import all_flags

    from .registry import register_methods
    register_methods()  # every method's options are flags too
    bad = sorted((set(flags) - all_flags()) | (set(flags) & RESERVED))
    if bad:
        raise ValueError(f"{where}: not a `digest train` flag here: {', '.join(bad)}")


METHOD_KEYS = {"label", "method", "flags", "workers", "seeds_by_workers", "datasets", "networks"}
SUITE_KEYS = {"name", "datasets", "workers", "seeds", "epochs", "model", "methods",
              "seeds_by_workers", "networks", "rounds", "aa", "warmup", "fit_epochs",
              "budgets", "checkpoint_every"}


def suite_from_dict(d: dict) -> Suite:
    unknown = sorted(set(d) - SUITE_KEYS)
    if unknown:
        raise ValueError(f"suite {d.get('name')}: unknown key(s) {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(SUITE_KEYS))})")
    for m in d["methods"]:  # a misspelt key would silently change the suite
        unknown = sorted(set(m) - METHOD_KEYS)
        if unknown:
            raise ValueError(f"suite {d['name']} method {m.get('label')}: unknown key(s) "
                             f"{', '.join(unknown)} (known: {', '.join(sorted(METHOD_KEYS))})")
    methods = tuple(MethodSpec(m["label"], m["method"], dict(m.get("flags") or {}),
                               tuple(m["workers"]) if m.get("workers") else None,
                               keys.seeds_by_workers(m),
                               tuple(m["datasets"]) if m.get("datasets") else None,
                               tuple(str(n) for n in m["networks"]) if m.get("networks") else None)
                    for m in d["methods"])
    for m in methods:  # a method's own points must be points of the suite
        for key, own, whole in [("datasets", m.datasets, d["datasets"]),
                                ("networks", m.networks, [str(n) for n in d.get("networks") or ()])]:
            extra = sorted(set(own or ()) - set(whole))
            if extra:
                raise ValueError(f"suite {d['name']} method {m.label}: {key} {', '.join(extra)} "
                                 f"not among the suite's ({', '.join(whole) or 'none'})")
    first = {}
    for m in methods:  # a label may come back only as the same method at other points
        seen = first.setdefault(m.label, m)
        if (seen.method, seen.flags) != (m.method, m.flags):
            raise ValueError(f"suite {d['name']}: label {m.label} names two different methods "
                             f"({seen.method} {seen.flags}, {m.method} {m.flags})")
    if any(NET_SEP in m.label for m in methods):
        raise ValueError(f"suite {d['name']}: '{NET_SEP}' in a method label is reserved for the "
                         "network of an emulated sweep")
    suite = Suite(d["name"], tuple(d["datasets"]), tuple(d["workers"]), tuple(d["seeds"]),
                  int(d["epochs"]), dict(d.get("model") or {}), methods,
                  keys.seeds_by_workers(d), tuple(str(n) for n in d.get("networks") or ()),
                  **keys.protocol(d), fit_epochs=keys.fit_epochs(d), budgets=keys.budgets(d),
                  checkpoint_every=keys.checkpoint_every(d))
    _check_aa(suite)
    _check_flags(suite.model, f"suite {suite.name} model")
    for m in methods:
        _check_flags(m.flags, f"suite {suite.name} method {m.label}")
    counts = Counter(str(r.directory(".")) for r in expand(suite))
    twice = sorted(n for n, k in counts.items() if k > 1)
    if twice:
        raise ValueError(f"suite {suite.name}: run(s) listed twice: {', '.join(twice)}")
    return suite


def _check_aa(suite: Suite) -> None:
    """A label written as an A/A twin ("exact-aa") must run exactly what its exact label runs."""
    specs = {m.label: m for m in suite.methods}
    for m in suite.methods:
        if is_aa(m.label):
            ref = specs.get(exact_for(m.label))
            if ref is None or (ref.method, ref.flags) != (m.method, m.flags):
                raise ValueError(f"suite {suite.name}: {m.label} is an A/A label, so it must run "
                                 f"what {exact_for(m.label)} runs (the same method and flags)")


# suites renamed by their question; their run folders say so in run.json ("renamed")
RENAMED = {"wave2": "field_methods", "wave3": "sat_sylvie_minibatch",
           "wave3_physics": "sat_sylvie_minibatch_physics", "settings": "authors_settings",
           "depth": "knobs"}


def load_suite(name_or_path: str) -> Suite:
    path = Path(name_or_path)
    if not path.suffix:
        path = CONFIGS / f"{name_or_path}.yaml"
    if not path.exists():
        if name_or_path in RENAMED:
            raise ValueError(f"suite {name_or_path!r} is now {RENAMED[name_or_path]!r} (suites are "
                             "named by the question they answer; results/README.md)")
        known = ", ".join(sorted(p.stem for p in CONFIGS.glob("*.yaml")))
        raise ValueError(f"no suite {name_or_path!r} (known: {known}; or give a YAML path)")
    return suite_from_dict(yaml.safe_load(path.read_text()))


def expand(suite: Suite) -> list[Run]:
    """Every run of the suite, in a stable order: dataset, method, workers, seed, round (the
    tables' order; experiments/suites/schedule.py orders them for running)."""
    runs = []
    for dataset in suite.datasets:
        for base in methods_of(suite):
            if base.datasets and dataset not in base.datasets:
                continue
            for net in base.nets(suite):
                spec = base if net is None else dataclasses.replace(
                    base, label=f"{base.label}{NET_SEP}{net}",
                    flags={**base.flags, "emulate_network": net})
                for workers in spec.workers or suite.workers:
                    for seed in spec.seeds(suite, workers):
                        flags = {**suite.model, "dataset": dataset, "method": spec.method,
                                 "workers": workers, "seed": seed, "epochs": suite.epochs,
                                 **spec.flags}
                        runs += [Run(dataset, spec, workers, seed, flags, r,
                                     checkpoint_every=suite.checkpoint_every)
                                 for r in range(suite.rounds)]
    return runs
