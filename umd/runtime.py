"""The runtime object an application holds first, the Device, and the dispatch machinery
every API object shares (the tracing hook, _Dispatched).

The entry points of Device and Queue (alloc, write, signal, ...) are not methods of the
classes: they are looked up in the dispatch table of the API version the application
asked for (umd/api.py), so one UMD serves every version side by side. The functions
named `<class>_<call>[_v<N>]` are what the tables point at: the Device's here (but
Device.alloc and Device.memory, with the Buffer, in umd/memory.py, and Device.queue in
umd/queue/create.py), the Queue's recording in umd/queue/record.py and umd/queue/commands.py,
its flush, finish and close in umd/queue/flush.py, its events, timestamps and GPU-side waits
in umd/events.py, its transfers (fill, copy, upload, download) in umd/queue/transfer.py.
"""

from __future__ import annotations

import atexit
import difflib
import functools
import inspect
import operator
import os
import sys
import threading
import types
import weakref
from typing import TYPE_CHECKING, Any, Callable

from kmd_model.uapi import InfoQuery

from .calls import _keyword_mistake, app_signature, named_args
from .errors import OPEN_NEW_DEVICE, DeviceLost, UmdError
from .submit import ENV as ASYNC_ENV
from .winsys import Winsys
from .winsys.ioctl import DRIVER_CLOSED
from .winsys.pool import MemoryManager

if TYPE_CHECKING:
    from .api import DispatchTable
    from .memory import Buffer
    from .queue import Queue
    from .submit import Submitter

KMD_MAJOR = 2  # the KMD API this UMD speaks (GPU virtual addresses, GEM_VA)


# ---------------------------------------------------------------------------- tracing hook

# Set by a tracer (gpucosim's timeline): every API call then runs as
# `api_hook("Queue.write", fn, args, kwargs)`, which must call fn(*args, **kwargs) and
# return its result. None costs the dispatched entry points nothing and the few plain
# methods (Event.wait, Buffer.free, umd.open) one global lookup.
api_hook: Callable[[str, Callable, tuple, dict], Any] | None = None


def api_call(name: str) -> Callable:
    """Mark a function as an API entry point `name`, seen by `api_hook`."""
    def deco(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def call(*args, **kwargs):
            hook = api_hook
            try:
                return fn(*args, **kwargs) if hook is None else hook(name, fn, args, kwargs)
            except TypeError as e:
                if (better := _keyword_mistake(name, fn, args, kwargs, e)) is None:
                    raise
            raise better  # (outside the handler: not "During handling of the above exception")
        return call
    return deco


def _hooked(name: str, bound: Callable) -> Callable:
    @functools.wraps(bound)  # help() and inspect.signature show the entry point, not the wrapper
    def call(*args, **kwargs):
        hook = api_hook
        return bound(*args, **kwargs) if hook is None else hook(name, bound, args, kwargs)
    return call


# ---------------------------------------------------------------------------- handles

class _Handle:
    """A handle to what this process holds of the GPU (its file, a context, device memory):
    copy.copy, deepcopy and pickle are refused. A copy of a Buffer shared its memory, and
    freeing both gave that memory to two later buffers at once; pickle failed on an
    internal function's name."""

    _what = "the GPU"
    _hint = ""
    _made_by = ""  # the call that gives an app one ("umd.open()"): what a constructor call of the class's says

    def __init_subclass__(cls, **kwargs) -> None:
        """A class an app gets from a call (`_made_by`), not by calling it: `umd.Device()` was
        "Device.__init__() missing 1 required positional argument: 'table'", an argument no
        page names. Arguments that do not fit its __init__ now say which call makes one."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None or not cls._made_by:
            return

        @functools.wraps(init)
        def __init__(self, *args, **kw):
            try:
                init(self, *args, **kw)
            except TypeError:
                try:  # (only the arguments' own mistake, not a TypeError from inside __init__)
                    inspect.signature(init).bind(self, *args, **kw)
                except TypeError:
                    raise TypeError(f"umd.{type(self).__name__}() is made by the UMD, not called by an app: "
                                    f"{type(self)._made_by}") from None
                raise
        cls.__init__ = __init__

    def __reduce_ex__(self, protocol):
        raise TypeError(f"cannot copy or pickle {self!r}: it is a handle to {self._what} of this process{self._hint}")

    def __setattr__(self, name: str, value: Any) -> None:
        """An app's misspelt setting (`q.flush_treshold = 1`, `q.max_in_flight = 4`) was a new
        attribute nobody reads: the queue went on with its own, silently. A new attribute the
        app sets whose name is that close to one the object has is refused, naming it; any
        other (an app's own note on a buffer: `buf.name = "weights"`) is taken as ever."""
        if name.startswith("_") or name in self.__dict__ or hasattr(type(self), name) \
                or sys._getframe(1).f_globals.get("__name__", "").partition(".")[0] == "umd":
            object.__setattr__(self, name, value)
            return
        known = [n for n in dir(self) if not n.startswith("_")]
        close = [] if name in known else difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        if close:  # (an entry point, `q.write = ...`, is replaced as before)
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}: did you mean {close[0]}? (set as "
                                 f"{name!r}, nothing would read it)")
        object.__setattr__(self, name, value)


def fixed(kind: str, name: str, how: str = "", *, doc: str) -> property:
    """An attribute set when the object is made and read-only after (kept as `_<name>`):
    `q.engine = "copy"` was taken and the queue went on as a gfx queue, `ev.queue = None`
    and `gpu.dev_info = ...` ended a later call in an AttributeError far from the line.
    `doc`: what it is, for help() and docs/api.md (umd/apidoc.py)."""
    def refuse(self, v) -> None:
        raise AttributeError(f"{kind}.{name} is fixed when the {kind.lower()} is made{how}")
    return property(lambda self: self.__dict__["_" + name], refuse, doc=f"{doc} (read-only)")


def record(kind: str, name: str, what: str) -> property:
    """What the UMD itself records of an object as it goes (kept as `_<name>`, which the UMD
    sets, and read as that, not through this property): read-only to the app. `ev.seq = 0`
    was taken, and the next ev.wait() waited for another submission."""
    def refuse(self, v) -> None:
        raise AttributeError(f"{kind}.{name} is the UMD's own record ({what}): read-only")
    # (its doc: help(umd.Event) showed operator.attrgetter's own for each such attribute)
    return property(operator.attrgetter("_" + name), refuse, doc=f"{what} (read-only: the UMD's own record)")


# ---------------------------------------------------------------------------- dispatch

class _Dispatched(_Handle):
    """Entry points come from the object's dispatch table (see umd/api.py). Once the object
    is closed, every entry point but close() raises ValueError naming the call (as Python's
    files do): a command recorded into a closed queue would otherwise be lost silently."""

    _kind = ""
    _closed = False
    # read-only to the app: `queue.closed = False` would take calls again on a queue whose
    # context is gone (the KMD then refuses them, as not the call's own one-line error)
    closed = property(lambda self: self._closed, lambda self, v: _refuse_closed(self),
                      doc="True once closed (its close(), or a queue's device's close()); every entry point "
                          "but close() then raises ValueError naming the call. A file the driver closed (its "
                          "unload: every call is DeviceLost) leaves it open until close() (read-only)")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        table: DispatchTable = self.__dict__["_table"]
        fn = table.entries.get(f"{self._kind}.{name}")
        if fn is None:
            raise AttributeError(table.missing(self._kind, name))
        if self.closed and fn is not table.entries.get(f"{self._kind}.close"):
            how = self.__dict__.get("_closed_how", "")
            return _closed_call(f"{name}: the {self._kind.lower()} is closed{how}")
        bound = types.MethodType(fn, self)
        if fn is not table.entries.get(f"{self._kind}.close"):
            bound = _unless_lost(self.ws, name, bound)
        else:
            bound = _named_args(bound)
        if api_hook is not None:
            bound = _hooked(f"{self._kind}.{name}", bound)
        bound.__signature__ = app_signature(fn)  # (help(gpu.alloc) showed the UMD's own `_owner`)
        self.__dict__[name] = bound  # later calls skip the lookup (until close: _set_closed)
        return bound

    def _set_closed(self) -> None:
        """Closed from now on: the entry points cached so far are dropped, so each call
        goes through __getattr__ again and is refused there."""
        for k, v in list(self.__dict__.items()):
            if isinstance(v, (types.MethodType, types.FunctionType)):  # (private attributes are data)
                del self.__dict__[k]
        dev = self.__dict__.get("device")
        if dev is not None and getattr(dev, "closing", False):  # (a queue the app never closed itself)
            self.__dict__["_closed_how"] = " (its device was closed: Device.close closes its queues)"
        self._closed = True

    def __dir__(self) -> list[str]:
        own = [k.split(".", 1)[1] for k in self.__dict__["_table"].entries if k.startswith(self._kind + ".")]
        return sorted(set(super().__dir__()) | set(own))


def _state(obj: "_Dispatched") -> str:
    """What a Device's or Queue's repr ends with: " closed", " lost" (the driver closed its
    file: every call is DeviceLost until close()), or nothing while it runs."""
    if obj.closed:
        return " closed"
    ws = obj.__dict__.get("ws")
    return " lost" if ws is not None and ws.lost() else ""


def _refuse_closed(obj: "_Dispatched") -> None:
    raise AttributeError(f"{obj._kind}.closed is the UMD's own record (close() sets it): read-only")


def _unless_lost(ws: Winsys, name: str, bound: Callable) -> Callable:
    """Entry point `name`, refused once the driver closed the Device's file under it (its
    unload or reload: kmd_model.rebind, unbind): each call met what went with the file in its
    own way (the KMD's EBADF, a revoked mapping's MappingRevoked, or an alloc from a slab that
    handed out dead memory). close() is not refused: it closes what is left (Queue._close_lost)."""
    named = named_args(bound.__qualname__)(bound)

    @functools.wraps(bound)  # (help(), the argument errors and __qualname__ stay the entry point's)
    def call(*args, **kwargs):
        if ws.lost():
            raise DeviceLost(f"{name}: {DRIVER_CLOSED}: {OPEN_NEW_DEVICE}")
        return named(*args, **kwargs)
    return call


def _named_args(bound: Callable) -> Callable:
    """Entry point `bound` (close()), its keyword mistakes said as _keyword_mistake says them."""
    call = named_args(bound.__qualname__)(bound)
    call.__self__ = bound.__self__  # (a tracer's api_hook finds the object closed as a bound method's)
    return call


def _closed_call(message: str):
    def refuse(*args, **kwargs):
        raise ValueError(message)
    return refuse


# ---------------------------------------------------------------------------- Device

class Device(_Dispatched):
    """An opened GPU: `umd.open(api_version=1)`."""

    _kind = "Device"
    _what = "the GPU's render node"
    _made_by = "gpu = umd.open()"
    api_version = fixed("Device", "api_version", ": umd.open(api_version=...) opens another",
                        doc="the API version the app opened it for (umd.open(api_version=...)): which entry "
                            "points it and its queues have, and their defaults")
    name = fixed("Device", "name", doc="the backend the device runs on, as DEV_INFO names it (\"model\", "
                                       "\"verilator\", \"icarus\")")
    dev_info = fixed("Device", "dev_info", doc="the KMD's DEV_INFO answer (kmd_model.uapi.DevInfo): the "
                                               "backend, its capabilities (has_dma ...), the IB alignment "
                                               "and size limits, the VM's range and page size")

    def __init__(self, table: "DispatchTable", winsys: Winsys | None = None, pools: bool = True):
        # asynchronous submission (umd/submit.py): the default of every queue's async_submit
        # (GPUCOSIM_ASYNC_SUBMIT, a driver setting as Mesa's GALLIUM_THREAD), and the thread,
        # started with the first async queue; the thread that opened the device owns the KMD
        env = os.environ.get(ASYNC_ENV, "0")
        if env not in ("0", "1"):
            raise ValueError(f"open: {ASYNC_ENV} must be 0 or 1, not {env!r}")
        self.async_default = env == "1"
        self.owner_thread = threading.get_ident()
        self.submitter: Submitter | None = None
        self._table = table
        self._api_version = table.version
        self.ws = winsys or Winsys()
        fw = self.ws.query(InfoQuery.FW_VERSION)
        if fw.kmd_version[0] != KMD_MAJOR:
            raise DeviceLost(f"KMD {fw.kmd_name} {'.'.join(map(str, fw.kmd_version))}: this UMD needs major "
                             f"version {KMD_MAJOR}")
        self._dev_info = i = self.ws.query(InfoQuery.DEV_INFO)
        self._name = i.backend
        self.queues: list[Queue] = []
        self.buffers: set[Buffer] = set()
        self.closing = False  # Device.close is freeing everything
        # the VA range and the BOs behind Buffers (umd/winsys/va.py, umd/winsys/pool.py)
        self.mm = MemoryManager(self, i.va_start, i.va_end, i.va_alignment, pools)
        _open_devices.add(self)

    def __repr__(self) -> str:
        return f"<umd.Device {self.name} api v{self.api_version}{_state(self)}>"

    def __enter__(self) -> "Device":
        return self

    def __exit__(self, typ, exc, tb) -> None:
        """`with umd.open() as gpu:` closes the device at the end, as close() does (every queue
        submits and finishes what it has, every buffer is freed), even when the body raised
        (whose exception is then the one raised)."""
        _close_after(self.close, exc)


_open_devices: "weakref.WeakSet[Device]" = weakref.WeakSet()


@atexit.register
def _unsubmitted_at_exit() -> None:
    """A program that ends with commands recorded and never submitted (no flush(), finish()
    or close() after its last write) loses them: the GPU never ran them, and nothing said so
    (`gpucosim run`'s exit report does: its LEAK line; it unbinds the driver before this
    runs, so a Device of its run is lost here and skipped). One line per such queue on
    stderr, as the interpreter ends. An async queue's flushes still queued on the submission
    thread are submitted first (as gpucosim run does: the app's flush() returned, as a
    synchronous flush's submission would have), else the thread, a daemon, died with them;
    a refusal of one, which the app's next call would have raised, is one line too."""
    from . import submit as umd_submit

    try:
        umd_submit.drain_all()
    except Exception:  # (at the interpreter's end: a report, never a traceback of its own)
        pass
    for dev in list(_open_devices):
        try:
            if dev.closed or dev.ws.lost():
                continue
            for q in dev.queues:
                if q.async_submit and not q.closed:
                    umd_submit.collect(q)
                    for _, err in q.async_errors:
                        print(f"umd: the program ended with a flush of {q!r} refused on the submission thread, "
                              f"never raised to it: {err}", file=sys.stderr, flush=True)
                cb = q.cmdbuf
                if q.closed or not cb.commands:
                    continue
                labels = [str(lb) for lb in list(cb.labels.values()) + [lb for _, lb in cb._pending_labels]]
                n = cb.commands
                print(f"umd: the program ended with {n} command{'s' * (n != 1)} of {q!r} recorded and never "
                      f"submitted: the GPU never ran {'it' if n == 1 else 'them'} (flush(), finish() or close() "
                      f"submits{'; the first ' + labels[0] if labels else ''})", file=sys.stderr, flush=True)
        except Exception:  # (at the interpreter's end: a report, never a traceback of its own)
            continue


def _close_after(close: Callable[[], None], exc: BaseException | None) -> None:
    """A `with` block's close. When the body raised (the app's exception, a ^C), that is what
    propagates: a refusal the close raises (a submission recorded before it) goes into its
    notes instead of replacing it, as the cause the app would look for first."""
    if exc is None:
        close()
        return
    try:
        close()
    except UmdError as e:
        exc.add_note(f"and when the with block closed it: {type(e).__name__}: {e}")
        for note in getattr(e, "__notes__", ()):  # (the errors it raised with it: "and: ...")
            exc.add_note(note)


def device_info(self: Device) -> Any:
    """The KMD's DEV_INFO (kmd_model.uapi.DevInfo; the same as `dev_info`): the backend
    ("model", "verilator", "icarus"), the hardware's version, bus width and address bits,
    its capabilities (has_dma, has_ih, sdma_rings, the packets it parses), the IB and job
    limits (ib_align_dw, max_ib_dw, max_job_dw, max_job_ibs, max_ib_chunks), and the VM: the
    range an app's buffers are mapped in (va_start, va_end), its page size and levels."""
    return self.dev_info


def device_counters(self: Device) -> Any:
    """INFO COUNTERS (kmd_model.uapi.Counters): `hw`, the device's performance counters
    (busy cycles, DMA bytes, the clock), `packets`, PERF_PACKETS by packet kind, and `kmd`,
    the driver's statistics (ioctls, CSs, interrupts, fences, resets). The device-wide ones
    need CAP_PERFMON (a Device over open_render_node(cap_perfmon=True), or a run with
    `gpucosim run APP --kmd cap_perfmon=1`); without it `hw` holds the clock alone,
    `packets` is empty and `kmd` counts this file's own work only."""
    return self.ws.query(InfoQuery.COUNTERS)


def device_close(self: Device) -> None:
    """Close every queue (each submits and finishes what it has), free every buffer, close
    the render node. A submission the KMD refused and the app was not told of yet (an async
    queue's, or what a queue had recorded) is raised here, once everything is closed (as a
    file's close() raises what its last flush could not write)."""
    if self.closed:
        return
    if self.ws.lost():  # the driver closed the file (its unload or reload): what went with it is gone
        return _close_lost(self)
    errors = []
    self.closing = True
    for q in list(self.queues):
        try:
            q._close()
        except UmdError as e:  # (only refusals nobody was told of: _close swallows the rest)
            errors.append(e)
    for b in list(self.buffers):
        q = b.owner
        if q is not None and getattr(q, "abandoned", False) and b is q.qbo:
            q.q32 = q.q32.copy()  # its events answer from the page as it was at the device's close
        b.free()
    self.mm.close()
    if self.submitter is not None:
        self.submitter.close()  # nothing is queued any more: the queues are closed
        self.ws.submitter = None
    self.ws.close()
    self._set_closed()
    _raise_first(errors)


def _close_lost(self: Device) -> None:
    """Close a Device whose file the driver closed under it (kmd_model.rebind, unbind): its
    BOs, contexts and mappings went with the file, so nothing is submitted, waited for or
    freed by ioctl (each raised: close() got no further than its first queue, and the
    Device stayed open). A queue's commands that never ran are raised once all is closed."""
    errors = []
    self.closing = True
    for q in list(self.queues):
        try:
            q._close()  # (Queue._close_lost)
        except UmdError as e:
            errors.append(e)
    for b in list(self.buffers):
        b._freed_how = "its device's file was closed by the driver"
        b._view = b._revoke = None
        b._freed = True
    self.buffers.clear()
    if self.submitter is not None:
        self.submitter.stop()
        self.ws.submitter = None
    self._set_closed()
    _raise_first(errors)


def _raise_first(errors: list) -> None:
    """Raise the first of `errors`, each other as a note of it ("and: GpuError: ..."),
    after it the notes it had (the errors raised with it: a queue's, in Device.close)."""
    if errors:
        for e in errors[1:]:
            errors[0].add_note(f"and: {type(e).__name__}: {e}")
            for note in getattr(e, "__notes__", ()):
                errors[0].add_note(note)
        raise errors[0]
