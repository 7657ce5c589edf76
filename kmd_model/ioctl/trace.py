"""The strace-like trace of ioctls. With `GPUCOSIM_LOG=ioctl=info` every call is printed as
strace prints syscalls; `Kmd.trace_hooks` get each call's record.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass
from enum import Enum
from typing import Any

import numpy as np

from ..uapi import CsChunkDep, CsChunkFence, CsChunkIb, HwIp, KmdError
from .copyin import hexed, shown


@dataclass(frozen=True)
class IoctlRecord:
    """One traced call, handed to `Kmd.trace_hooks` (the demo prints these)."""

    fd: int
    request: str
    args: Any
    result: Any  # the out-structure, or None on error
    error: KmdError | None
    cycles: int
    wall_us: float

    def __str__(self) -> str:
        # as strace does (-s), long structures are cut, so a line fits a terminal; the
        # record keeps them whole (`args`, `result`)
        res = f"-1 {self.error.name} ({self.error.message})" if self.error else _clip(fmt(self.result))
        return (f"ioctl(fd {self.fd}, {self.request}, {_clip(fmt(self.args))}) = {res} "
                f"<{self.cycles} cycles, {self.wall_us:.0f} us>")


CLIP = 64  # characters of an ioctl's arguments or result shown in a trace line


def _clip(text: str) -> str:
    """Cut as strace -s does, keeping the closing bracket: a structure's `}`, or the `)` of a
    wrong-kind argument's repr (an Opaque), so the line still reads as one value."""
    return text if len(text) <= CLIP else text[:CLIP - 4] + "..." + text[-1]


# ------------------------------------------------------------------------------ formatting

def _fmt_value(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, Enum):
        return v.name or str(v.value)
    if isinstance(v, int):
        return str(v) if -10 < v < 10 else hexed(v)
    if isinstance(v, np.ndarray):
        return f"<{v.dtype}[{v.size}] view>"
    # a chunk's fields are the kernel's copy: ints, or values of the wrong kind (Opaque)
    if isinstance(v, CsChunkIb):
        where = (f"bo {_dec(v.handle)}+{_hex(v.offset)}" if v.handle else _hex(v.gpu_addr) if v.gpu_addr is not None
                 else "?")
        ring = "" if (v.ip_type, v.ring) == (HwIp.GFX, 0) else f", {_ip_name(v.ip_type)} {_dec(v.ring)}"
        return f"Ib({where}, {_dec(v.size_dw)} dw{ring})"
    if isinstance(v, CsChunkDep):
        return f"Dep({_ip_name(v.ip_type)} {_dec(v.ring)}, ctx {_dec(v.ctx_id)}, seq {_fmt_value(v.handle)})"
    if isinstance(v, CsChunkFence):
        return f"Fence(bo {_dec(v.handle)}+{_hex(v.offset)})"
    if is_dataclass(v):
        return fmt(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}={_fmt_value(x)}" for k, x in v.items()) + "}"
    return repr(v)


def _ip_name(ip: Any) -> str:
    return HwIp(ip).name if isinstance(ip, int) and ip in HwIp._value2member_map_ else shown(ip)


def _hex(v: Any) -> str:
    return hexed(v) if isinstance(v, int) and not isinstance(v, bool) else shown(v)


def _dec(v: Any) -> str:
    return shown(v)  # (an int as str() gives it, up to copyin.WIDEST bits)


def fmt(obj: Any) -> str:
    """`{a=1, b=0x1000}`: a dataclass's fields, leaving out zero/None defaults."""
    if not is_dataclass(obj):
        return _fmt_value(obj)
    parts = []
    for f in fields(obj):
        v = getattr(obj, f.name)
        if v is None or (f.default is not None and not isinstance(v, np.ndarray) and v == f.default) \
                or (isinstance(v, (dict, list)) and not v):
            continue
        parts.append(f"{f.name}={_fmt_value(v)}")
    return "{" + ", ".join(parts) + "}"
