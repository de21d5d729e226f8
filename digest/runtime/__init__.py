"""Processes and the wire: every torch.distributed call and the byte counter (``comm``), the local
launcher and its watch on unresponsive workers, where sockets listen, the emulated cluster
(``netem``), allocator tuning and profiling. Knows nothing of GNNs."""
