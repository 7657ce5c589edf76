"""Per-module logging, switched by one environment variable.

    GPUCOSIM_LOG="kmd=debug,ioctl=info,ring=debug,ih=info"   # module=level, comma separated
    GPUCOSIM_LOG="debug"                                     # every module at debug
    GPUCOSIM_LOG="all=info,ring=debug"

The modules are MODULES; a name that is not one of them is an error (a typo would
otherwise log nothing, silently). Underneath it is plain `logging` (`gpucosim.<module>`
loggers), so a program can also configure the `gpucosim` logger tree itself. Off by
default; when off, a call site guarded by `log.isEnabledFor(...)` costs one attribute
lookup and a compare, and nothing is formatted (the ring's disassembly is only built when
`ring` is at debug). A bad GPUCOSIM_LOG is reported in one line and ignored.
"""

from __future__ import annotations

import difflib
import logging
import os
import sys

ENV = "GPUCOSIM_LOG"
ROOT = "gpucosim"

_configured_from: str | None = None

MODULES = {
    "umd": "the user-mode driver: flushes and the IBs it submits",
    "ioctl": "every ioctl, strace-like, with its result and time",
    "kmd": "bring-up, self-tests, errors and GPU resets",
    "cs": "the CS checker: what it copied and checked",
    "ring": "ring writes (disassembled at debug) and doorbells",
    "fence": "fences signalled",
    "ih": "IH entries the interrupt handler reads",
    "sched": "jobs put in the ring and retired",
    "bo": "buffer objects created and freed",
    "vm": "GPU virtual memory: mappings (GEM_VA), VMIDs, TLB flushes",
    "bus": "every MMIO access",
    "cp": "packets the CP starts (when `gpucosim run` watches the hardware)",
    "sdma": "packets the SDMA copy engine starts (the reference model)",
}
LEVELS = ("debug", "info", "warning", "error")

# A library stays silent unless asked: without this, python would print our warnings
# (GPU resets ...) through its last-resort handler. Programs that configure logging
# themselves still get everything through propagation.
logging.getLogger(ROOT).addHandler(logging.NullHandler())


def get_logger(module: str) -> logging.Logger:
    """The logger of one driver module: `gpucosim.<module>`."""
    if module not in MODULES:
        raise ValueError(f"log module {module!r} is not in kmd_model.log.MODULES")
    _configure_from_env()
    return logging.getLogger(f"{ROOT}.{module}")


def _level(name: str) -> int:
    lv = logging.getLevelName(name.strip().upper())
    if not isinstance(lv, int) or name.strip().lower() not in LEVELS:
        raise ValueError(f"{ENV}: unknown log level {name.strip()!r} (use {', '.join(LEVELS)})")
    return lv


def parse(spec: str) -> list[tuple[str | None, int]]:
    """`module=level,...` (the GPUCOSIM_LOG syntax) as [(module or None for all, level)];
    ValueError naming the first unknown module or level."""
    out = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        mod, sep, lv = item.partition("=")
        if not sep:  # a bare level applies to every module
            name, colon, after = item.partition(":")
            # (`all` too: it was "unknown log level 'all'", where the modules' list offers "or all")
            if name.strip() in (*MODULES, "all") or (colon and after.strip().lower() in LEVELS):
                # (`ioctl` or `ioctl:info`: a module where a level goes, said as "unknown log level";
                # `--log all` was told the syntax, not the spelling it meant: all=info)
                known = name.strip() if name.strip() in (*MODULES, "all") else next(
                    iter(difflib.get_close_matches(name.strip(), MODULES, n=1)), "all")
                meant = f"{known}={after.strip().lower() if colon else 'info'}"
                raise ValueError(f"{ENV}: {item!r}: did you mean {meant}? (a module's level is MODULE=LEVEL, "
                                 f"ioctl=info; a level alone is every module's: {', '.join(LEVELS)})")
            mod, lv = "all", mod
        mod = mod.strip()
        if mod in ("all", "*", ROOT):
            out.append((None, _level(lv)))
        elif mod in MODULES:
            out.append((mod, _level(lv)))
        else:
            like = difflib.get_close_matches(mod, MODULES, n=1)
            raise ValueError(f"{ENV}: unknown module {mod!r}" + (f": did you mean {like[0]}?" if like else "")
                             + f" (modules: {', '.join(MODULES)}, or all)")
    return out


def configure(spec: str, stream=None) -> None:
    """Apply a `module=level,...` spec (the GPUCOSIM_LOG syntax) and make sure the
    `gpucosim` tree has a handler writing to `stream` (stderr by default)."""
    root = logging.getLogger(ROOT)
    for mod, level in parse(spec):
        (root if mod is None else root.getChild(mod)).setLevel(level)
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
    try:
        configure(spec)
    except ValueError as e:  # a library does not crash its program over a log setting
        print(f"gpucosim: {e}; {ENV} is ignored", file=sys.stderr)
