"""DIGEST: distributed full-graph GNN training with periodic stale representation
synchronisation, beside the exact (propagation-based), partition-based, VARCO and peer methods.

One training loop (``Trainer``); a method is a *halo policy* (where a layer's halo rows come from)
plus a *parameter-sync policy*, registered by name (``register``). This module is the public API:
everything a user or a method author needs, importable as ``from digest import ...``. The command
line is ``python -m digest --help`` (``train`` below runs it from Python); the layers are described
in docs/architecture.md.
"""
import warnings

# torch's sparse CSR is stable enough for the products we use; its "beta" notice is noise
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")

__version__ = "0.2.0"  # the one version string (pyproject.toml reads it from here)

from .config import ConfigError, TrainConfig, validate  # noqa: E402
from .data import DatasetError, list_datasets, load_dataset  # noqa: E402
from .data.cache import load_part, prepare_partition  # noqa: E402
from .data.graph import Graph  # noqa: E402
from .data.local_graph import LocalPart, extract_part  # noqa: E402
from .data.partition import PartitionBook, partition  # noqa: E402
from .errors import UsageError  # noqa: E402
from .methods import METHODS, Method, register  # noqa: E402
from .methods import get as get_method  # noqa: E402
from .models import GNN, MODELS  # noqa: E402
from .options import Options, option  # noqa: E402
from .policies.compress import CompressionOptions  # noqa: E402
from .policies.halo import ExactHalo, HaloPlan, HaloPolicy, NoHalo, exchange  # noqa: E402
from .policies.params import (GradAllReduce, ModelAveraging, ParamOptions,  # noqa: E402
                              ParamPolicy, make_param_policy)
from .policies.store import StaleHalo, StoreOptions  # noqa: E402
from .runtime import comm  # noqa: E402
from .training.trainer import Trainer  # noqa: E402


def train(config: TrainConfig | dict | None = None, **flags) -> dict | None:
    """Train one run as ``python -m digest train`` does: the same checks, partition cache and
    worker processes (``--workers``), the same files in the run's folder.

    Args:
        config: a ``TrainConfig``, or ``train``'s flags by field name (``{"dataset": "Cora"}``).
        **flags: more flags, over ``config``'s (``dataset="file:graph.pt", workers=2``).

    Returns:
        The run's summary (its summary.json: ``best_val``, ``test_at_best_val``, ``config``, ...),
        also when the folder held this run complete already; None on a torchrun rank but 0.

    Raises:
        UsageError (a bad flag, graph file or partition file), DatasetError, or the worker
        failure, with a one-line message.
    """
    import json
    from pathlib import Path

    from .training.run import run
    base = config.flat() if isinstance(config, TrainConfig) else dict(config or {})
    summary, out = run({**base, **flags})
    done = Path(out) / "summary.json"
    return summary if summary is not None or not done.is_file() else json.loads(done.read_text())


__all__ = [
    "__version__",
    # configuration and the method registry
    "TrainConfig", "ConfigError", "validate", "Options", "option", "UsageError",
    "METHODS", "Method", "register", "get_method",
    # data: datasets, partitioning, one worker's local graph
    "Graph", "DatasetError", "load_dataset", "list_datasets", "partition", "PartitionBook",
    "prepare_partition", "load_part", "LocalPart", "extract_part",
    # the policies a method composes
    "HaloPolicy", "HaloPlan", "ExactHalo", "NoHalo", "exchange", "StaleHalo", "StoreOptions",
    "CompressionOptions", "ParamPolicy", "ParamOptions", "GradAllReduce", "ModelAveraging",
    "make_param_policy",
    # the loop, the models, the collectives (every torch.distributed call); a whole run
    "Trainer", "GNN", "MODELS", "comm", "train",
]
