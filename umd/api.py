"""API versions and their dispatch tables.

An application names the API version it was written for: `umd.open(api_version=1)`;
`umd.open()` gives the newest (LATEST).
Each version is served through its own dispatch table (entry point name -> function)
plus its defaults, like a Vulkan/OpenCL loader's tables, so an application written for
version 1 keeps its behaviour when version 2 changes a default or a call's semantics,
and sees only the calls its version has.

Version 1
    Device: alloc, queue, info, counters, memory, close
    Queue:  write (submits at once), wait_mem, signal, emit_raw, flush, finish, close
    default flush threshold: 16 commands
Version 2 (batching by default, fills and timestamps)
    Queue.write no longer submits at once: writes are batched until flush(), a wait, or
    the flush threshold; the default threshold is 64 commands;
    new calls: Queue.fill, Queue.timestamp, Queue.copy/upload/download, Queue.wait_event
    (GPU-side waits on another queue's event); Device.queue(engine="gfx"|"copy", priority=...).
Version 3 (asynchronous submission)
    Device.queue(..., async_submit=True): the queue's flushes are submitted by the
    device's submission thread (umd/submit.py); everything else as version 2.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from typing import Callable

import kmd_model
from kmd_model.uapi import KmdError

from kmd_model.ioctl.copyin import shown

from . import events, memory, tracebacks
from . import runtime as rt
from .args import _flag, _index
from .errors import UmdError
from .queue import Queue, commands, flush, transfer
from .queue import create as device_queue
from .winsys import Winsys


@dataclass(frozen=True)
class DispatchTable:
    """One API version (umd.TABLES[version]): `version`; `flush_threshold`, the commands a
    queue records before it flushes by itself; `entries`, each entry point's name
    ("Queue.write") and the function serving it in this version; `notes`, what the version
    changed. A Device or Queue of the version looks its calls up here."""

    version: int
    flush_threshold: int  # commands recorded before an implicit flush
    entries: dict[str, Callable] = field(default_factory=dict)
    notes: str = ""

    def __post_init__(self) -> None:
        # Python names a call's argument mistakes by the function's __qualname__ (and help()
        # by its __name__): the app called q.write(..., value=1), so "Queue.write() got an
        # unexpected keyword argument 'value'", not the name of the function behind the entry
        # (queue_write_batched()). Tracebacks still name the function's own code.
        for key, fn in self.entries.items():
            fn.__qualname__, fn.__name__ = key, key.split(".", 1)[1]

    def derive(self, version: int, *, add: dict[str, Callable] = {}, remove: tuple[str, ...] = (),
               notes: str, **defaults) -> "DispatchTable":
        """The table of API version `version`: this one's entries with `add` added or
        replacing theirs and `remove` gone, `notes` saying what changed, and any of the
        defaults (flush_threshold=...) changed."""
        entries = {k: v for k, v in self.entries.items() if k not in remove}
        entries.update(add)
        return replace(self, version=version, entries=entries, notes=notes, **defaults)

    def missing(self, kind: str, name: str) -> str:
        """Why `kind.name` is not there, for the AttributeError, with what was probably meant."""
        key = f"{kind}.{name}"
        has = [v for v, t in TABLES.items() if key in t.entries]
        if has:
            return f"{key}() is not in API version {self.version} (it is in version {', '.join(map(str, has))})"
        msg = f"{kind} has no entry point {name!r} in API version {self.version}"
        ours = sorted(k.split(".", 1)[1] for k in self.entries if k.startswith(kind + "."))
        alias = ALIASES.get(key)
        if alias is not None and alias in ours:
            return f"{msg}: {kind}.{alias}() is what this API calls it"
        close = difflib.get_close_matches(name, ours, n=1)
        if close:
            return f"{msg}: did you mean {close[0]}()?"
        return f"{msg} (it has {', '.join(ours)})"


V1 = DispatchTable(1, flush_threshold=16, entries={
    "Device.alloc": memory.device_alloc,
    "Device.queue": device_queue.device_queue_v1,
    "Device.info": rt.device_info,
    "Device.counters": rt.device_counters,
    "Device.memory": memory.device_memory,
    "Device.close": rt.device_close,
    "Queue.write": commands.queue_write_now,
    "Queue.wait_mem": commands.queue_wait_mem,
    "Queue.signal": events.queue_signal,
    "Queue.emit_raw": commands.queue_emit_raw,
    "Queue.flush": flush.queue_flush,
    "Queue.finish": flush.queue_finish,
    "Queue.close": flush.queue_close,
}, notes="write() submits at once")

V2 = V1.derive(2, flush_threshold=64, add={
    "Device.queue": device_queue.device_queue,
    "Queue.write": commands.queue_write_batched,
    "Queue.fill": transfer.queue_fill,
    "Queue.timestamp": events.queue_timestamp,
    "Queue.copy": transfer.queue_copy,
    "Queue.upload": transfer.queue_upload,
    "Queue.download": transfer.queue_download,
    "Queue.wait_event": events.queue_wait_event,
}, notes="write() is batched; fill(), timestamp(), copy(), upload(), download(), wait_event(); "
         "queue(engine='copy')")

V3 = V2.derive(3, add={
    "Device.queue": device_queue.device_queue_v3,
}, notes="queue(async_submit=True): a submission thread makes the CS ioctls")

TABLES: dict[int, DispatchTable] = {1: V1, 2: V2, 3: V3}
LATEST = max(TABLES)


def _entry_points(kind: str) -> str:
    """The calls of `kind` (Device, Queue) for its class's help(): they are its API version's
    dispatch entries, not methods of the class, so help(umd.Queue) and help(q) listed no
    write(), signal() or flush() at all (only seq_done and seq_of, the UMD's own helpers)."""
    import inspect
    import re

    lines = []
    for key, fn in TABLES[LATEST].entries.items():
        if not key.startswith(kind + "."):
            continue
        sig = inspect.signature(fn)
        params = [p for p in list(sig.parameters.values())[1:] if not p.name.startswith("_")]  # (self; the UMD's own)
        shown = str(sig.replace(parameters=[p.replace(annotation=p.empty) for p in params],
                                return_annotation=sig.empty))
        doc = " ".join((inspect.getdoc(fn) or "").split("\n\n")[0].split())
        doc = re.sub(r"^API v\d+(?: \(([^)]*)\))?: ", lambda m: f"{m.group(1)}: " if m.group(1) else "", doc)
        depth, end = 0, len(doc)
        for i, c in enumerate(doc):  # (its first sentence: up to a '.' or ';' outside parentheses)
            depth += (c == "(") - (c == ")")
            if c in ".;" and depth == 0 and doc[i + 1:i + 2] in ("", " ") and doc[i - 1:i] != ".":
                end = i
                break
        since = min(v for v, t in TABLES.items() if key in t.entries)
        lines.append(f"  {key.split('.', 1)[1]}{shown}: {doc[:end]}"
                     + (f" (API v{since} on)" if since > 1 else ""))
    return (f"\n\nIts calls (API version {LATEST}'s; an older version has fewer: umd.api's docstring; "
            f"help() of one, e.g. help({kind[0].lower() if kind == 'Queue' else 'gpu'}.{'write' if kind == 'Queue' else 'alloc'}), "
            f"says more):\n" + "\n".join(lines))


for _cls in (rt.Device, Queue):
    _cls._own_doc = _cls.__doc__  # (what the class says of itself, without the list: docs/api.md's)
    _cls.__doc__ = (_cls.__doc__ or "").rstrip() + _entry_points(_cls._kind)

# The names other runtimes give these calls (the C library's, CUDA's, OpenCL's): a call by
# one of them is answered with the name this API uses.
ALIASES = {"Queue.memset": "fill", "Queue.memcpy": "copy", "Queue.enqueue_copy": "copy",
           "Queue.fence": "signal", "Queue.sync": "finish", "Queue.synchronize": "finish",
           "Queue.submit": "flush", "Device.malloc": "alloc", "Device.create_queue": "queue",
           "Device.stream": "queue"}


@rt.api_call("umd.open")
def open(api_version: int = LATEST, *, winsys=None, pools: bool = True) -> rt.Device:
    """Open the GPU (the bound render node) for an application written for `api_version`
    (default: the newest, LATEST; older versions stay selectable and keep their behaviour;
    one this UMD does not serve is a ValueError naming those it does, and a value that is
    no int, "2" among them, a TypeError). `pools=False`: every buffer is a BO of its own,
    made and freed by ioctls (no BO cache, no slabs), to measure what the pools save.

    Called by a script run by python (`python app.py`: its `__main__`'s own code), it also
    installs an excepthook (unless the program has one; the script's `import umd` or
    `import kmd_model` did already): an uncaught UMD or KMD error, argument mistake or ^C is
    then printed as `gpucosim run` prints it, the script's own frames and the one-line error,
    without the drivers' frames (kmd_model/tracebacks.py, umd/tracebacks.py); a bug of the
    script's own keeps Python's whole traceback."""
    # a script run by python gets its uncaught UMD errors and ^C as `gpucosim run` prints them
    tracebacks.install_for_script()
    served = f"{', '.join(map(str, list(TABLES)[:-1]))} or {list(TABLES)[-1]} (leave it out for the newest, {LATEST})"
    try:  # an integer, numpy's too (as every other integer argument); not a bool, a float or "2"
        version = _index("open", "api_version", api_version)
    except TypeError as e:  # (its words, then the versions there are)
        said, _, what = str(e).partition(" must be an int, ")
        raise TypeError(f"{said} must be an int: {served}, {what}") from None
    except ValueError:  # (an int too wide to print)
        version = None
    if version not in TABLES:
        raise ValueError(f"open: api_version {shown(api_version)} is not a version this UMD serves: {served}")
    pools = _flag("open", "pools", pools)
    if winsys is not None and not isinstance(winsys, Winsys):
        raise TypeError(f"open: winsys must be a umd.winsys.Winsys (None: the bound render node's), not "
                        f"{shown(winsys)}")
    try:
        if winsys is None:
            kmd_model.bound()
    except KmdError:
        # umd.open() at the top of an app file that has a main(): `gpucosim run` imports it
        # before it brings the device up (then calls main()); a script without a main() is
        # run whole once the device is up, and `python app.py` binds none
        raise UmdError("open: no GPU is bound yet: an app with a main() run by `gpucosim run` opens it in "
                       "main() (the file's top level runs before the device is up; a script without a main() "
                       "runs once it is up); a script run by python binds one first: import kmd_model; from "
                       "testbench.refmodel import RefModel; kmd_model.bind(RefModel()) (docs/tutorial.md)") from None
    return rt.Device(TABLES[version], winsys, pools)
