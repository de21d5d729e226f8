"""Every torch.distributed call of the suite lives here: set-up, the all-to-all that moves halo
rows, parameter all-reduce, small control messages, and the byte counter.

A reader looking for "where do bytes cross process boundaries" needs only this file: the
byte counter (``traffic``, digest/runtime/traffic.py) is incremented by the functions here that
send, by category.
"""
from __future__ import annotations

import datetime
import os
import signal
import sys
import time
import warnings
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor

from . import listen
from .traffic import CATEGORIES, Traffic, traffic  # noqa: F401  (the byte counter: comm.traffic)


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
            _die_with_parent()
            dist.init_process_group(backend, rank=rank, world_size=world, timeout=timeout)
        else:
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1,
                                    timeout=timeout)
    return Runtime(rank, world, local_rank, local_world, dev, backend)


def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when its launcher (our launcher or torchrun's agent) dies, even
    by SIGKILL, so that a killed launcher never leaves orphan workers behind."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGKILL)


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
    _all_to_all(recv, send.contiguous(), send_counts, recv_counts)
    traffic.seconds += time.perf_counter() - t0
    row_bytes = send.element_size() * (int(torch.tensor(tail).prod()) if tail else 1)
    me = rank()
    traffic.bytes[category] += sum(c for p, c in enumerate(send_counts) if p != me) * row_bytes
    traffic.messages += sum(1 for p, c in enumerate(send_counts) if p != me and c)
    return recv


def _all_to_all(recv: Tensor, send: Tensor, send_counts: list[int], recv_counts: list[int]):
    """gloo: every receive is posted before any send. gloo's own all-to-all sends first; a pair
    starts moving a payload only once the receiver said it is ready, and that notice travels in
    the same TCP stream as the receiver's own outgoing payload, so it can wait behind it: on a
    slow link the two directions then run one after the other (measured on the emulated 20mbit
    links, digest/runtime/netem.py: 1 MB each way took 0.41-0.83 s instead of 0.40 s; receives first:
    0.42-0.47 s). Other backends: their all-to-all."""
    if dist.get_backend() != "gloo":
        out = recv.cuda() if send.device.type == "cpu" else recv  # NCCL: CUDA tensors only
        dist.all_to_all_single(out, send.to(out.device), recv_counts, send_counts)
        if out is not recv:
            recv.copy_(out)
        return
    me = rank()
    into, out = recv.split(recv_counts), send.split(send_counts)
    pending = [dist.irecv(into[p], p) for p, c in enumerate(recv_counts) if p != me and c]
    pending += [dist.isend(out[p], p) for p, c in enumerate(send_counts) if p != me and c]
    if recv_counts[me]:
        into[me].copy_(out[me])
    for work in pending:
        work.wait()


def all_reduce_(t: Tensor, category: str | None = "params", op=dist.ReduceOp.SUM) -> Tensor:
    """In-place all-reduce. Counted as a ring all-reduce: each process sends 2 (M-1)/M of the
    buffer in 2 (M-1) messages. ``category=None`` marks control traffic (metrics), not counted."""
    M = world_size()
    if M == 1:
        return t
    t0 = time.perf_counter()
    on = t.cuda() if t.device.type == "cpu" and dist.get_backend() == "nccl" else t  # NCCL: CUDA only
    dist.all_reduce(on, op=op)
    if on is not t:
        t.copy_(on)
    if category is not None:
        traffic.seconds += time.perf_counter() - t0
        traffic.bytes[category] += int(2 * (M - 1) * t.numel() * t.element_size() // M)
        traffic.messages += 2 * (M - 1)
    return t


def all_gather(t: Tensor, category: str | None) -> Tensor:
    """Every worker's ``t``, stacked by rank: ``[M, *t.shape]`` (the same bytes on every worker).
    Counted as a ring all-gather: each process sends its own block to the M - 1 others, i.e.
    (M - 1) |t| bytes in M - 1 messages. ``category=None``: start-up or control, not counted."""
    M = world_size()
    if M == 1:
        return t[None].clone()
    out = [torch.empty_like(t) for _ in range(M)]
    t0 = time.perf_counter()
    dist.all_gather(out, t.contiguous())
    if category is not None:
        traffic.seconds += time.perf_counter() - t0
        traffic.bytes[category] += (M - 1) * t.numel() * t.element_size()
        traffic.messages += M - 1
    return torch.stack(out)


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


# -- torch.distributed.rpc (DIGEST-A's parameter server and representation store) ---------------
# RPC gets its own TCPStore: rank 0 opens it on a port the OS picks (port 0, so no race and no
# hard-coded port) and tells the others through the process group. Besides the M ranks, extra
# members may join the rpc group (DIGEST-A's server process, which is in no process group): they
# get the store's address from rank 0 and call rpc_join. Bytes of an rpc call are counted by the
# CALLER, both directions (its request and the reply it asked for), under the category it names,
# so a worker's traffic is what its own pulls and pushes cost.

_RPC_SCHEME = "digest-rpc"
_rpc_member = None  # (store, rpc rank, rpc world size) of this process, for the rendezvous


def _rpc_rendezvous(url, **kwargs):
    yield _rpc_member


def rpc_name(r: int) -> str:
    return f"worker{r}"


def rpc_init(timeout_s: float = 300.0, threads: int | None = None, extra: int = 0,
             start_extra=None) -> None:
    """Start this process's rpc agent (TensorPipe) as ``worker<rank>``. Collective: every rank.
    ``extra`` more members join as rpc ranks M, M + 1, ...: rank 0 calls ``start_extra(host,
    port)`` once the rpc store listens, to start them; each of them calls ``rpc_join``."""
    me, M = rank(), world_size()
    host = os.environ.get("MASTER_ADDR", "127.0.0.1")
    timeout = datetime.timedelta(seconds=timeout_s)
    port = torch.zeros(1, dtype=torch.long)
    if me == 0:
        # on DIGEST_BIND_ADDR only, where the launcher set it
        store = listen.master_store(host, 0, M + extra, timeout=timeout)
        port[0] = store.port
        if start_extra is not None:
            start_extra(host, store.port)
    broadcast_(port)  # over the process group, which already exists
    if me != 0:
        store = dist.TCPStore(host, int(port), M + extra, is_master=False, timeout=timeout)
    _rpc_agent(rpc_name(me), me, M + extra, store, timeout_s, threads)


def rpc_join(name: str, me: int, members: int, host: str, port: int, timeout_s: float = 300.0,
             threads: int | None = None) -> None:
    """Join the rpc group of ``members`` as rpc rank ``me`` named ``name``, from a process outside
    the process group (DIGEST-A's server), through the store rank 0 opened at ``host:port``."""
    store = dist.TCPStore(host, port, members, is_master=False,
                          timeout=datetime.timedelta(seconds=timeout_s))
    _rpc_agent(name, me, members, store, timeout_s, threads)


def _rpc_agent(name: str, me: int, members: int, store, timeout_s: float, threads: int | None):
    from torch.distributed import rpc
    from torch.distributed.rendezvous import _rendezvous_handlers, register_rendezvous_handler

    global _rpc_member
    _rpc_member = (store, me, members)
    if _RPC_SCHEME not in _rendezvous_handlers:
        register_rendezvous_handler(_RPC_SCHEME, _rpc_rendezvous)
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=f"{_RPC_SCHEME}://", rpc_timeout=timeout_s,
        num_worker_threads=threads or max(4, 2 * members), **listen.tensorpipe_options())  # TCP only, emulated
    with warnings.catch_warnings():  # torch's own rpc init calls all_gather_object on a Backend
        warnings.filterwarnings("ignore", message="You are using a Backend", category=UserWarning)
        rpc.init_rpc(name, rank=me, world_size=members, rpc_backend_options=options)


def rpc_shutdown(graceful: bool = True, timeout_s: float = 300.0) -> None:
    """Graceful: wait (at most ``timeout_s``) until every rank got here and all outstanding calls
    are answered, then stop. Not graceful (after an error): stop this agent now, wait for nobody."""
    global _rpc_member
    from torch.distributed import rpc
    try:
        if graceful:
            rpc.shutdown(graceful=True, timeout=timeout_s)
        else:
            try:
                rpc.shutdown(graceful=False)
            except Exception:  # noqa: BLE001 - cleaning up after an error: report that one
                pass
    finally:
        _rpc_member = None


# how TensorPipe words a lost or silent peer (a remote exception keeps its own message)
_RPC_LOST = ("eof", "pipe closed", "connection", "Connection", "timeout", "timed out", "shut down",
             "shutdown", "tensorpipe")


def _tensor_bytes(obj) -> int:
    if isinstance(obj, Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(o) for o in obj)
    if isinstance(obj, dict):
        return sum(_tensor_bytes(o) for o in obj.values())
    return 0


def rpc_sync(name: str, fn, args: tuple = (), category: str | None = None,
             timeout_s: float | None = None):
    """``fn(*args)`` run by the rpc member ``name`` (in its rpc thread pool; ``rpc_name(r)`` for
    rank r); returns its result. Tensors travel both ways and are counted under ``category``
    (None: control, not counted)."""
    from torch.distributed import rpc
    t0 = time.perf_counter()
    try:
        out = rpc.rpc_sync(name, fn, args=args,
                           timeout=-1.0 if timeout_s is None else timeout_s)
    except RuntimeError as e:  # the transport's errors: the peer is gone or not answering
        if isinstance(e, dist.DistError) or not any(s in str(e) for s in _RPC_LOST):
            raise  # an exception of fn itself, re-raised here by rpc
        raise dist.DistNetworkError(f"rpc to {name} failed, the peer is lost: {e}") from e
    if category is not None:
        traffic.seconds += time.perf_counter() - t0
        traffic.bytes[category] += _tensor_bytes(args) + _tensor_bytes(out)
        traffic.messages += 2  # request and reply
    return out


# -- non-blocking collectives (PipeGCN) ----------------------------------------------------------
# An all-to-all started now and finished later, so that it overlaps computation. Its bytes are
# counted when it is started; the only time counted (traffic.seconds) is the time spent WAITING for
# it, i.e. the communication that computation did not hide. Every rank must start its
# non-blocking collectives in the same order (as for every collective).


class Pending:
    """A started all-to-all of row blocks. ``wait()`` returns the received rows
    ``[sum(recv_counts), F]`` (once finished, again without waiting); ``ready()`` says whether it
    has finished without waiting. ``waited``: seconds spent in ``wait()``."""

    def __init__(self, work, recv: Tensor, send: Tensor | None):
        self.work, self.recv, self.send = work, recv, send  # send kept alive until finished
        self.waited = 0.0

    def ready(self) -> bool:
        return self.work is None or self.work.is_completed()

    def wait(self) -> Tensor:
        if self.work is not None:
            t0 = time.perf_counter()
            self.work.wait()
            self.waited = time.perf_counter() - t0
            traffic.seconds += self.waited
            self.work, self.send = None, None
        return self.recv


def all_to_all_rows_async(send: Tensor, send_counts: list[int], recv_counts: list[int],
                          category: str) -> Pending:
    """``all_to_all_rows`` started without blocking (``async_op=True``); the rows arrive at
    ``wait()``. Shapes as ``all_to_all_rows``. ``send`` must not change until then (it is kept)."""
    tail = tuple(send.shape[1:])
    recv = send.new_empty((sum(recv_counts), *tail))
    if world_size() == 1:
        return Pending(None, recv.copy_(send) if send.numel() else recv, None)
    send = send.contiguous()
    work = dist.all_to_all_single(recv, send, recv_counts, send_counts, async_op=True)
    row_bytes = send.element_size() * (int(torch.tensor(tail).prod()) if tail else 1)
    me = rank()
    traffic.bytes[category] += sum(c for p, c in enumerate(send_counts) if p != me) * row_bytes
    traffic.messages += sum(1 for p, c in enumerate(send_counts) if p != me and c)
    return Pending(work, recv, send)
