"""DIGEST: distributed GNN training with periodic stale representation synchronisation, beside
the exact (propagation-based), partition-based and VARCO methods. ``python -m digest --help``."""
import warnings

# torch's sparse CSR is stable enough for the products we use; its "beta" notice is noise
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")

__version__ = "0.1.0"
