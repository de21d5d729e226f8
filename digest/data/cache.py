"""On-disk partition cache: partition a dataset once, let every worker load only its own part.

Layout of one cache entry ``<data root>/.partitions/<name>-<method><parts>-<key>/``::

    book.pt        PartitionBook (part_of, inner, halo, send, stats)
    part{m}.pt     LocalPart of worker m, as a dict of its fields
    manifest.json  key fields, graph summary, partition stats, sha256 of every file (written LAST)

Every file is written atomically (temp file in the same folder, fsync, ``os.replace``), so a
crashed build leaves no manifest, and a cache without a valid manifest, or with any file whose
checksum differs, is rebuilt, never used. Concurrent builders (several ranks on one node)
serialise on ``<dir>.lock`` with ``fcntl.flock``: the first builds, the others wait and validate.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import sys
from dataclasses import fields
from pathlib import Path

import torch

from ..files import write_atomic
from .graph import Graph, degree
from .graph_file import file_sha256
from .loaders import load_dataset
from .registry import DatasetError, data_root, parse_spec
from .local_graph import LocalPart, extract_part
from .part_file import partition_from_file
from .partition import PartitionBook, partition

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
BOOK = "book.pt"


class CacheError(RuntimeError):
    """A cache file is missing, unreadable or does not match its manifest checksum."""


def cache_root(root: str | os.PathLike | None = None) -> Path:
    """``<data root>/.partitions``; data root = ``root`` or ``$DIGEST_DATA`` or ``./data``."""
    return Path(data_root(root)).expanduser() / ".partitions"


def cache_key(dataset_spec: str, dataset_options: dict, parts: int, method: str, seed: int,
              sparse, dataset_seed: int | None = None) -> str:
    """16 hex digits of sha256 over a canonical JSON of every field that changes the cache.

    ``seed`` is the partition seed; ``dataset_seed`` (random splits, synthetic graphs) defaults
    to the same value but is keyed separately so the two can be split later.
    """
    fields_ = {
        "format": FORMAT_VERSION, "dataset": dataset_spec, "options": dataset_options,
        "parts": int(parts), "method": method, "partition_seed": int(seed),
        "dataset_seed": int(seed if dataset_seed is None else dataset_seed), "sparse": sparse,
    }
    text = json.dumps(fields_, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# writing

def _atomic_write(path: Path, write) -> str:
    """``digest.files.write_atomic``, then the written file's sha256 (for the manifest)."""
    return file_sha256(write_atomic(path, write))


def _compact(t):
    """A view (e.g. from torch.split) would drag its whole base storage into torch.save."""
    if isinstance(t, torch.Tensor) and t.layout == torch.strided and \
            t.untyped_storage().nbytes() != t.numel() * t.element_size():
        return t.clone()
    return t


def _graph_summary(graph: Graph) -> dict:
    return {"name": graph.name, "nodes": graph.num_nodes, "edges": graph.num_edges,
            "features": graph.num_features, "classes": int(graph.num_classes),
            "sparse_x": bool(graph.x.is_sparse), "meta": graph.meta}


def save_parts(graph: Graph, book: PartitionBook, directory: str | os.PathLike,
               key_fields: dict | None = None) -> Path:
    """Write ``book.pt``, ``part{m}.pt`` (one part extracted and freed at a time) and, last,
    ``manifest.json``. ``key_fields`` (``{"key": ..., ...}``) goes into the manifest."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MANIFEST).unlink(missing_ok=True)  # the entry is invalid until we finish
    for stale in directory.glob(".*.tmp"):  # left by a crashed writer
        stale.unlink(missing_ok=True)
    files = {}
    book_dict = {"num_parts": book.num_parts, "part_of": book.part_of, "inner": book.inner,
                 "halo": book.halo, "send": book.send, "stats": book.stats}
    files[BOOK] = _atomic_write(directory / BOOK, lambda f: torch.save(book_dict, f))
    deg = degree(graph.edge_index, graph.num_nodes)
    for m in range(book.num_parts):
        part = extract_part(graph, book, m, deg=deg)
        d = {f.name: getattr(part, f.name) for f in fields(part)}  # no deepcopy (asdict copies)
        d = {k: [_compact(t) for t in v] if isinstance(v, list) else _compact(v) for k, v in d.items()}
        files[f"part{m}.pt"] = _atomic_write(directory / f"part{m}.pt", lambda f: torch.save(d, f))
        del part, d
    manifest = {"format": FORMAT_VERSION, **(key_fields or {}), "num_parts": book.num_parts,
                "graph": _graph_summary(graph), "stats": book.stats, "files": files}
    text = json.dumps(manifest, indent=1, sort_keys=True, default=str).encode()
    _atomic_write(directory / MANIFEST, lambda f: f.write(text))
    dir_fd = os.open(directory, os.O_RDONLY)  # make the renames durable
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return directory


# ---------------------------------------------------------------------------------------------
# reading

def load_manifest(directory: str | os.PathLike) -> dict:
    path = Path(directory) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CacheError(f"partition cache {directory}: cannot read {MANIFEST} ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_VERSION \
            or not isinstance(manifest.get("files"), dict):
        raise CacheError(f"partition cache {directory}: {MANIFEST} is not format {FORMAT_VERSION}")
    return manifest


def _verify(directory: Path, name: str, manifest: dict) -> Path:
    path = directory / name
    expected = manifest["files"].get(name)
    if expected is None:
        raise CacheError(f"partition cache {directory}: {name} is not in the manifest")
    try:
        actual = file_sha256(path)
    except OSError as e:
        raise CacheError(f"partition cache {directory}: cannot read {name} ({e.strerror})") from None
    if actual != expected:
        raise CacheError(f"partition cache {directory}: {name} checksum mismatch")
    return path


def _load_verified(directory: str | os.PathLike, name: str) -> dict:
    directory = Path(directory)
    path = _verify(directory, name, load_manifest(directory))
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception:
        pass
    try:
        # Fallback only for objects the safe unpickler refuses (e.g. a Graph.meta value of an
        # unusual type). This is our own local cache and its checksum was just verified.
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:
        raise CacheError(f"partition cache {directory}: cannot load {name} ({type(e).__name__})") from None


def load_book(directory: str | os.PathLike) -> PartitionBook:
    d = _load_verified(directory, BOOK)
    return PartitionBook(**d)


def load_part(directory: str | os.PathLike, m: int) -> LocalPart:
    d = _load_verified(directory, f"part{m}.pt")
    return LocalPart(**d)


def validate(directory: str | os.PathLike, key: str | None = None, graph: Graph | None = None) -> str | None:
    """Why the cache entry cannot be used (one line), or None when it is complete and intact."""
    directory = Path(directory)
    try:
        manifest = load_manifest(directory)
        if key is not None and manifest.get("key") != key:
            return f"key {manifest.get('key')} != {key}"
        M = manifest.get("num_parts")
        expected = {BOOK, *(f"part{m}.pt" for m in range(M if isinstance(M, int) else 0))}
        if not isinstance(M, int) or M < 1 or set(manifest["files"]) != expected:
            return "manifest does not list book.pt and every part file"
        if graph is not None:
            have, want = manifest.get("graph", {}), _graph_summary(graph)
            for k in ("nodes", "edges", "features", "classes"):
                if have.get(k) != want[k]:
                    return f"graph {k} {have.get(k)} != {want[k]}"
        for name in sorted(expected):
            _verify(directory, name, manifest)
    except CacheError as e:
        return str(e)
    return None


def _split_spec(spec: str) -> tuple[str, dict]:
    """``"synthetic:nodes=10,avg_degree=3"`` -> ``("synthetic", {"avg_degree": "3", "nodes": "10"})``
    so that option order does not change the key."""
    name, _, rest = spec.partition(":")
    opts = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        k, _, v = item.partition("=")
        opts[k.strip()] = v.strip()
    return name, dict(sorted(opts.items()))


def _canonical_spec(spec: str, hand_made: bool) -> tuple[str, dict]:
    """Canonical dataset name and typed options (``'cora'`` and ``'Cora'`` share a cache entry).
    A name the registry does not know is accepted only with a hand-made ``graph``."""
    try:
        info, opts = parse_spec(spec)
    except DatasetError:
        if not hand_made:
            raise
        return _split_spec(spec)
    if info.kind == 'file':  # the file's content and where it is (the meta records both)
        opts.update(path=str(Path(opts['path']).resolve()), sha256=file_sha256(opts['path']))
    return info.name, dict(sorted(opts.items()))


def prepare_partition(spec: str, parts: int, method: str = "metis", seed: int = 0,
                      root: str | os.PathLike | None = None, sparse="auto",
                      graph: Graph | None = None, partition_file: str | None = None) -> Path:
    """Return the cache folder of (spec, parts, method, seed, sparse), building it if it is
    missing, stale or corrupted. The graph is loaded with ``digest.data.load_dataset`` unless
    ``graph`` is passed (then it must be the graph ``spec`` names). ``partition_file``: the
    assignment made elsewhere in place of ``method``'s (``part_file.py``), keyed by its content."""
    name, opts = _canonical_spec(spec, hand_made=graph is not None)
    if partition_file is not None:  # its content and where it is (the stats record both)
        method, opts = "file", {**opts, "partition_file": str(Path(partition_file).resolve()),
                                "partition_sha256": file_sha256(partition_file)}
    key = cache_key(name, opts, parts, method, seed, sparse)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "graph"
    directory = cache_root(root) / f"{safe}-{method}{parts}-{key}"
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.with_name(directory.name + ".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        existed = directory.exists()
        reason = validate(directory, key, graph)
        if reason is None:
            return directory
        if graph is None:  # first: a dataset that cannot be read is ONE error line, no notice
            graph = load_dataset(spec, root, seed=seed, sparse=sparse)
        if existed:
            print(f"rebuilding partition cache: {reason}", file=sys.stderr)
        else:
            print(f"building partition cache: {directory}", file=sys.stderr)
        book = partition(graph, parts, method, seed) if partition_file is None else \
            partition_from_file(graph, partition_file, parts)
        key_fields = {"key": key, "dataset": spec, "options": opts, "parts": parts,
                      "method": method, "partition_seed": seed, "dataset_seed": seed,
                      "sparse": sparse, "partition_file": partition_file}
        save_parts(graph, book, directory, key_fields)
    return directory
