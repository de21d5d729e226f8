"""Every torch.distributed call of the suite lives here: set-up, the all-to-all that moves halo
rows, parameter all-reduce, small control messages, and the byte counter.

A reader looking for "where do bytes cross process boundaries" needs only this file: the
counter below is incremented by the functions that send, by category.
"""
from __future__ import annotations

import datetime
import os
import time
from collections import defaultdict
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor

# What the byte counter distinguishes (METHODS.md section 6).
CATEGORIES = ("halo_fwd", "halo_bwd", "store", "params")


class Traffic:
    """Bytes and messages this process sent to OTHER processes, by category, plus the wall time
    spent inside communication calls. Reset by the trainer at every epoch."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.bytes = defaultdict(int)
        self.messages = 0
        self.seconds = 0.0

    def snapshot(self) -> dict:
        out = {f"bytes_{c}": int(self.bytes.get(c, 0)) for c in CATEGORIES}
        out["bytes_total"] = sum(out.values())
        out["messages"] = self.messages
        out["comm_time"] = self.seconds
        return out


traffic = Traffic()


@dataclass
class Runtime:
    """Where this process stands: ``rank`` of ``world_size``, its ``local_rank`` on the node."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    device: torch.device
    backend: str


def setup(timeout_s: float = 300.0, device: str = "auto") -> Runtime:
    """Join the process group described by torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT). Without it (a plain single process) an in-memory store makes a
    group of one, so every code path is the same. gloo on CPU, NCCL on CUDA."""
    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    use_cuda = torch.cuda.is_available() if device == "auto" else device == "cuda"
    dev = torch.device(f"cuda:{local_rank}") if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(dev)
    backend = "nccl" if use_cuda else "gloo"
    timeout = datetime.timedelta(seconds=timeout_s)  # a dead peer becomes an error, not a hang
    if not dist.is_initialized():
        if "MASTER_ADDR" in os.environ:
            dist.init_process_group(backend, rank=rank, world_size=world, timeout=timeout)
        else:
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1,
                                    timeout=timeout)
    return Runtime(rank, world, local_rank, local_world, dev, backend)


def teardown():
    if dist.is_initialized():
        dist.destroy_process_group()


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def all_to_all_rows(send: Tensor, send_counts: list[int], recv_counts: list[int],
                    category: str) -> Tensor:
    """ONE all-to-all of row blocks: ``send`` holds the rows for peer 0, then peer 1, ...;
    the result holds the rows from peer 0, then peer 1, ... Shapes ``[sum(send_counts), F]`` ->
    ``[sum(recv_counts), F]``."""
    tail = tuple(send.shape[1:])
    recv = send.new_empty((sum(recv_counts), *tail))
    if world_size() == 1:
        return recv.copy_(send) if send.numel() else recv
    t0 = time.perf_counter()
    dist.all_to_all_single(recv, send.contiguous(), recv_counts, send_counts)
    traffic.seconds += time.perf_counter() - t0
    row_bytes = send.element_size() * (int(torch.tensor(tail).prod()) if tail else 1)
    me = rank()
    traffic.bytes[category] += sum(c for p, c in enumerate(send_counts) if p != me) * row_bytes
    traffic.messages += sum(1 for p, c in enumerate(send_counts) if p != me and c)
    return recv


def all_reduce_(t: Tensor, category: str | None = "params", op=dist.ReduceOp.SUM) -> Tensor:
    """In-place all-reduce. Counted as a ring all-reduce: each process sends 2 (M-1)/M of the
    buffer in 2 (M-1) messages. ``category=None`` marks control traffic (metrics), not counted."""
    M = world_size()
    if M == 1:
        return t
    t0 = time.perf_counter()
    dist.all_reduce(t, op=op)
    if category is not None:
        traffic.seconds += time.perf_counter() - t0
        traffic.bytes[category] += int(2 * (M - 1) * t.numel() * t.element_size() // M)
        traffic.messages += 2 * (M - 1)
    return t


def all_gather_object(obj) -> list:
    """Small per-epoch records of every worker, for rank 0's metrics (control, not counted)."""
    if world_size() == 1:
        return [obj]
    out = [None] * world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast_(t: Tensor, src: int = 0) -> Tensor:
    """Start-up only (identical initial parameters); not counted as training traffic."""
    if world_size() > 1:
        dist.broadcast(t, src)
    return t


def barrier():
    if world_size() > 1:
        dist.barrier()
