"""Where a run's sockets listen (docs/running.md, security).

torch.distributed has no authentication: whoever reaches a store's port can read and write the
run's keys. A single-node run (``--workers M`` without torchrun) therefore listens on loopback
only, and an emulated cluster (``--emulate-network``, digest/runtime/netem.py) only on addresses of its
own network namespaces. Three kinds of listener exist in a run, and each is pinned here:

- the c10d TCP stores (the elastic launcher's rendezvous store, the store its workers share, and
  DIGEST-A's rpc store in comm.rpc_init): a ``TCPStore`` given a host name still binds every
  interface (``*:PORT``), so these are created on a socket we bind ourselves and hand over as
  ``master_listen_fd``;
- gloo's pair sockets: ``GLOO_SOCKET_IFNAME`` names the interface they bind;
- TensorPipe's (DIGEST-A's rpc agents, its server included): ``TP_SOCKET_IFNAME``.

``DIGEST_BIND_ADDR`` carries the address to the workers (and DIGEST-A's server): when it is set,
every store this process opens binds there. Under torchrun it is unset and nothing changes: the
stores listen where the user's rendezvous endpoint and torch's defaults say.
"""
from __future__ import annotations

import datetime
import os
import socket
from contextlib import contextmanager

BIND_ENV = "DIGEST_BIND_ADDR"
LOOPBACK = "127.0.0.1"
WIRE_ENV = "DIGEST_TP_WIRE_ONLY"
BACKEND = "digest-loopback"  # the elastic launcher's rendezvous backend for single-node runs


def bind_addr() -> str | None:
    """The address this process's stores bind, or None (torch's default: every interface)."""
    return os.environ.get(BIND_ENV) or None


def master_store(host: str, port: int = 0, world_size: int | None = None,
                 timeout: datetime.timedelta = datetime.timedelta(seconds=300),
                 wait_for_workers: bool = False, multi_tenant: bool = False,
                 bind: str | None = None):
    """A ``TCPStore`` server; on ``bind`` (default: ``bind_addr()``) only, when one is given.
    ``port`` 0: the OS picks one (no race); read it from ``.port``."""
    import torch.distributed as dist

    bind = bind or bind_addr()
    fd = None
    if bind is not None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bind, port))
        sock.listen(512)
        port, fd = sock.getsockname()[1], sock.detach()  # the store owns (and closes) it now
    return dist.TCPStore(host, port, world_size, True, timeout, wait_for_workers=wait_for_workers,
                         multi_tenant=multi_tenant, master_listen_fd=fd)


def _loopback_handler(params):
    """The c10d rendezvous of torch's elastic launcher, with both of its stores (the rendezvous
    store and the one its workers share) bound to loopback."""
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler

    timeout = datetime.timedelta(seconds=int(params.get_as_int("read_timeout", 60)))
    store = master_store(LOOPBACK, 0, timeout=timeout, multi_tenant=True, bind=LOOPBACK)
    handler = create_handler(store, C10dRendezvousBackend(store, params.run_id), params)
    handler._backend_name = BACKEND  # the registry checks that the handler says its name
    # rank 0 of the rendezvous hosts the workers' store: on loopback too
    handler._create_tcp_store_server = lambda addr, port: master_store(
        LOOPBACK, port, multi_tenant=True, bind=LOOPBACK)
    return handler


def register_loopback_rendezvous() -> str:
    """Register (once) and return the name of the loopback rendezvous backend."""
    from torch.distributed.elastic.rendezvous import rendezvous_handler_registry as registry
    registry.register(BACKEND, _loopback_handler)  # the same creator again is a no-op
    return BACKEND


@contextmanager
def worker_env(values: dict):
    """``values`` in os.environ while workers are launched (they inherit the launcher's
    environment as it is then); the launcher's own environment is restored afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def tensorpipe_options() -> dict:
    """TensorPipe's transports and channels: all of them, except in an emulated cluster
    (``DIGEST_TP_WIRE_ONLY``), where every rpc byte must cross the shaped links: TCP ("uv") and
    the basic channel only (shared memory and cross-memory attach would bypass them)."""
    return {"_transports": ["uv"], "_channels": ["basic"]} if os.environ.get(WIRE_ENV) else {}


def loopback_env() -> dict:
    """What a single-node run's workers need to listen on loopback only."""
    return {BIND_ENV: LOOPBACK, "GLOO_SOCKET_IFNAME": "lo", "TP_SOCKET_IFNAME": "lo"}
