"""gpucosim's command line and run-time tools: `gpucosim run APP` on any backend, the
timeline (Chrome trace JSON for Perfetto), crash reports, dumps, the register map.

    gpucosim run examples/demo.py --sim model --trace build/demo.json

An app may report how far it is, for the launcher's progress bar:
`gpucosim.progress(done, total, label)` (a no-op outside `gpucosim run`).

Here: cli (the subcommands), checks (what they check before a run) and what they read
back: crash (crash and exit reports), dump (dword dumps), regmap (registers for people),
inputs (the bounds on the files they read).
Beside them, a folder per concept:
- run/: running an app: launch (starting a run on a backend), app_runner (its cocotb
  side), session (one run inside the app's process), app (finding and loading the app),
  stops (--timeout and the signals that stop a run), outputs (outputs that name gpucosim's
  own stdout or stderr), console (output and the status line);
- trace/: what the drivers and the hardware did, on one timeline: timeline (the trace
  format), swtrace (the drivers' half), hwtrace and sdma_monitor (the hardware's half, from
  cocotb), waves (waveforms), plot (a timeline drawn).
"""

__version__ = "0.1.0"

import os as _os

# numpy's OpenBLAS starts a worker thread per core at import, and each spins for ~0.1 s
# of CPU before it sleeps; nothing here does linear algebra. One thread keeps the run's
# CPU time its own (DeviceClock.cpu_seconds) and leaves the other core to other work.
# Set before anything imports numpy; processes started from here inherit it.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .run.session import progress  # noqa: E402  (the API apps use)

__all__ = ["progress"]
