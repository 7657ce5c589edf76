"""The ioctl table (request -> argument type and handler), the call that runs one, and the
argument checks every handler shares.

Each handler validates its arguments completely before it changes anything, so a
failed ioctl has no effect, and fails with `KmdError(errno, "<IOCTL>: what was wrong")`.
"""

from __future__ import annotations

import errno
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .. import uapi
from ..log import get_logger
from ..uapi import KmdError, Request
from .copyin import Opaque, copy_in, hexed, is_a, kernel_int, shown, type_name
from .trace import IoctlRecord

if TYPE_CHECKING:
    from ..core.file import File
    from ..core.kmd import Kmd

log = get_logger("ioctl")

Handler = Callable[["Kmd", "File", Any], Any]


@dataclass(frozen=True)
class IoctlDesc:
    """What IOCTLS holds per request (its key): the argument type and the handler, and what
    the handler needs worked out of its copied-in arguments alone (`prepare`, run before
    the driver's lock is taken; its result is the handler's fourth argument)."""

    args: type
    handler: Handler
    prepare: Callable[[Any], Any] | None = None


IOCTLS: dict[Request, IoctlDesc] = {}


def ioctl_def(request: Request, prepare: Callable[[Any], Any] | None = None) -> Callable[[Handler], Handler]:
    def reg(fn: Handler) -> Handler:
        IOCTLS[request] = IoctlDesc(uapi.ARGS[request], fn, prepare)
        return fn
    return reg


@dataclass(frozen=True)
class Call:
    """An ioctl as the kernel copied it in (`copy_in_call`), before the driver's lock is taken."""

    name: str  # the request's name, for messages and traces
    desc: IoctlDesc | None
    args: Any  # the kernel's copy of the arguments, or an Opaque of what was given
    error: KmdError | None  # the refusal the copy found, raised under the lock (after EBADF)
    prep: Any = None  # what the request's `prepare` made of the copy (IoctlDesc)


def copy_in_call(request: Any, args: Any, max_chunks: int | None = None) -> Call:
    """copy_from_user for one ioctl: the request number and every argument field read once
    (ioctl/copyin.py); a CS's chunk list longer than `max_chunks` (the most a CS may carry)
    is not copied, its length alone kept for the CS's refusal. It takes no lock and touches
    nothing of the driver's: whatever client code reading them runs (an `int` subclass's
    `__int__`, a property, a `__repr__`) runs here, not under the driver's lock, where a
    client that blocked in it would stop every client."""
    # an ioctl number is an integer (a numpy one too, as for every integer argument); a
    # float or bool equal to one is not, and is named as given, not as the ioctl it equals
    request = kernel_int(request)
    is_int = isinstance(request, int) and not isinstance(request, bool)  # a plain int or a uapi enum now
    if is_int:
        request = int(request)
        name = Request(request).name if request in Request._value2member_map_ else hexed(request)
    else:
        name = shown(request)
    desc = IOCTLS.get(request) if is_int else None
    if desc is None:
        return Call(name, None, Opaque(args), KmdError(errno.EINVAL, f"unknown ioctl request {name}"))
    if not is_a(args, desc.args):  # (its real type: isinstance would ask the client's object)
        return Call(name, desc, Opaque(args), KmdError(
            errno.EINVAL, f"{name}: arguments must be {'an' if desc.args.__name__[0] in 'AEIOU' else 'a'} "
                          f"{desc.args.__name__}, not {type_name(args)}"))
    # the handler sees the kernel's copy, never the client's objects; what it needs of the
    # copy alone (plain integers checked and keyed) is worked out here, outside the lock
    copy = copy_in(args, desc.args, max_chunks)
    return Call(name, desc, copy, None, desc.prepare(copy) if desc.prepare is not None else None)


def dispatch(file: "File", call: Call) -> Any:
    """Run a copied-in ioctl on `file` (under the driver's lock: File.ioctl)."""
    kmd = file.kmd
    dev = kmd.dev
    kmd.stats["ioctls"] += 1
    file.ioctls += 1
    t0, c0 = time.perf_counter_ns(), dev.now()
    name = call.name
    out, err = None, None
    try:
        if file.closed:  # (by the client's code the copy ran, too: a close from another thread or re-entrant)
            raise KmdError(errno.EBADF, f"{name}: the file is closed")
        if call.error is not None:
            raise call.error
        try:
            if call.desc.prepare is not None:
                out = call.desc.handler(kmd, file, call.args, call.prep)
            else:
                out = call.desc.handler(kmd, file, call.args)
        except KmdError as e:
            raise e.within(name)
        return out
    except KmdError as e:
        err = e
        kmd.stats["ioctl_errors"] += 1
        file.ioctl_errors += 1
        raise
    finally:
        if kmd.trace_hooks or log.isEnabledFor(logging.INFO):
            rec = IoctlRecord(file.fd, name, call.args, out, err, dev.now() - c0,
                              (time.perf_counter_ns() - t0) / 1000)
            if log.isEnabledFor(logging.INFO):
                log.info("%s", rec)
            for hook in kmd.trace_hooks:
                hook(rec)


# ------------------------------------------------------------------------------ argument checks

def _int(who: str, name: str, v: Any, lo: int = 0, hi: int | None = None, bits: int = 64) -> int:
    """An integer argument, as the C structure's field would hold it (`bits` wide)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise KmdError(errno.EINVAL, f"{who}: {name} must be an int, not {v!r}")
    v = int(v)
    if v >> bits and v > 0 and hi is None:  # (a field with a range names it instead: an int32's is no 64-bit one)
        raise KmdError(errno.EINVAL, f"{who}: {name} must fit in {bits} bits, not {hexed(v)}")
    if v < lo or (hi is not None and v > hi):
        rng = f">= {lo:#x}" if hi is None else f"{lo:#x} to {hi:#x}" if hi != lo else f"{lo}"
        if hi is None and lo in (0, 1):
            rng = f">= {lo}" if lo == 0 else "> 0"
        raise KmdError(errno.EINVAL, f"{who}: {name} must be {rng}, not {hexed(v)}" if v > 9 or v < -9
                       else f"{who}: {name} must be {rng}, not {v}")
    return v
