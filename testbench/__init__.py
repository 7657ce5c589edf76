"""The hardware side: designs, simulators, cocotb devices, the reference model, campaigns."""

import os as _os

# As in gpucosim/__init__.py: no OpenBLAS worker threads (they spin at numpy's import).
# pytest's conftest imports this package first, so its workers and simulators inherit it.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
