"""Models: one small file per architecture on top of ``base.GNN``."""
from .base import GNN, GraphView
from .gat import GAT
from .gcn import GCN
from .sage import SAGE

MODELS = {"gcn": GCN, "sage": SAGE, "gat": GAT}

__all__ = ["GNN", "GraphView", "GCN", "SAGE", "GAT", "MODELS"]
