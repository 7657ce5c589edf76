"""Per-module logging, switched by one environment variable.

    GPUCOSIM_LOG="kmd=debug,ioctl=info,ring=debug,ih=info"   # module=level, comma separated
    GPUCOSIM_LOG="debug"                                     # every module at debug
    GPUCOSIM_LOG="all=info,ring=debug"

Modules: kmd, ioctl, ring, fence, ih, cs, bo, sched, bus (every MMIO access), umd,
cmdbuf, cp (packets the CP starts, when `gpucosim run` watches the hardware) (any name
works: it is the `gpucosim.<name>` python logger). Underneath it is plain `logging`, so a program can
also configure the `gpucosim` logger tree itself. Off by default; when off, a call site
guarded by `log.isEnabledFor(...)` costs one attribute lookup and a compare, and nothing
is formatted (the ring's disassembly is only built when `ring` is at debug).
"""

from __future__ import annotations

import logging
import os
import sys

ENV = "GPUCOSIM_LOG"
ROOT = "gpucosim"

_configured_from: str | None = None

# A library stays silent unless asked: without this, python would print our warnings
# (GPU resets ...) through its last-resort handler. Programs that configure logging
# themselves still get everything through propagation.
logging.getLogger(ROOT).addHandler(logging.NullHandler())


def get_logger(module: str) -> logging.Logger:
    """The logger of one driver module: `gpucosim.<module>`."""
    _configure_from_env()
    return logging.getLogger(f"{ROOT}.{module}")


def _level(name: str) -> int:
    lv = logging.getLevelName(name.strip().upper())
    if not isinstance(lv, int):
        raise ValueError(f"{ENV}: unknown log level {name!r} (use debug, info, warning, error)")
    return lv


def configure(spec: str, stream=None) -> None:
    """Apply a `module=level,...` spec (the GPUCOSIM_LOG syntax) and make sure the
    `gpucosim` tree has a handler writing to `stream` (stderr by default)."""
    root = logging.getLogger(ROOT)
    for item in filter(None, (s.strip() for s in spec.split(","))):
        mod, sep, lv = item.partition("=")
        if not sep:  # a bare level applies to every module
            mod, lv = "all", mod
        logger = root if mod.strip() in ("all", "*", ROOT) else root.getChild(mod.strip())
        logger.setLevel(_level(lv))
    if root.level == logging.NOTSET:
        root.setLevel(logging.WARNING)  # modules not named stay quiet
    if not any(getattr(h, "_gpucosim", False) for h in root.handlers):
        h = logging.StreamHandler(stream or sys.stderr)
        h.setFormatter(_Formatter())
        h._gpucosim = True  # type: ignore[attr-defined]
        root.addHandler(h)
        root.propagate = False


class _Formatter(logging.Formatter):
    """`[ring] message`: the module, without the `gpucosim.` prefix."""

    def format(self, record: logging.LogRecord) -> str:
        name = record.name[len(ROOT) + 1:] if record.name.startswith(ROOT + ".") else record.name
        text = f"[{name}] {record.getMessage()}"
        if record.levelno >= logging.WARNING:
            text = f"[{name}] {record.levelname}: {record.getMessage()}"
        return text


def _configure_from_env() -> None:
    global _configured_from
    spec = os.environ.get(ENV, "")
    if spec == (_configured_from or "") or not spec:
        return
    _configured_from = spec
    configure(spec)
