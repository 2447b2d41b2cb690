"""A stand-in for PyTorch in hubd's tests (PyTorch cannot be installed there).

Only what hubd.patch_torch_hub() touches: the torch.hub submodule, imported
with the package as in real torch, and a torch.load that returns the file's
bytes instead of unpickling tensors.
"""

from . import hub  # noqa: F401  (real torch imports torch.hub with the package)

__version__ = "0.0+hubd.fake"


def load(f, map_location=None, weights_only=False):
    """Stand-in for torch.load: the raw bytes of the file."""
    with open(f, "rb") as fh:
        return fh.read()
