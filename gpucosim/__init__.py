"""gpucosim's command line and run-time tools: `gpucosim run APP` on any backend, the
timeline (Chrome trace JSON for Perfetto), crash reports, dumps, the register map.

    gpucosim run examples/demo.py --sim model --trace build/demo.json

An app may report how far it is, for the launcher's progress bar:
`gpucosim.progress(done, total, label)` (a no-op outside `gpucosim run`).

Modules: cli (the subcommands), launch (starting a run on a backend), session (one run
inside the app's process), timeline (the trace format), trace (the drivers' half of the
timeline), hwtrace (the hardware's half, from cocotb), crash (crash and exit reports),
dump (dword dumps), regmap (registers for people), console (output and the status line), plot.
"""

__version__ = "0.1.0"

import os as _os

# numpy's OpenBLAS starts a worker thread per core at import, and each spins for ~0.1 s
# of CPU before it sleeps; nothing here does linear algebra. One thread keeps the run's
# CPU time its own (DeviceClock.cpu_seconds) and leaves the other core to other work.
# Set before anything imports numpy; processes started from here inherit it.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .session import progress  # noqa: E402,F401  (the API apps use)
