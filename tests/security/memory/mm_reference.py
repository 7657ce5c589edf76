"""The reference of tests/security/memory/test_security_mm_state.py's state machine: what each
file's VM maps (RMap: which VA page holds which page of which BO, with which permissions),
its live handles and BOs (RBo: what each must hold) and the layout the machine's files use;
`event` (hypothesis's statistics) and `_err` (an ioctl's errno, only KmdError may come out),
which its rules (mm_memory_rules.py, mm_job_rules.py) share.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import event as _event

from kmd_model.uapi import Domain, KmdError, VmFlags
from spec import vm as vm_spec


PAGE = 0x1000
R, W, X = VmFlags.READABLE, VmFlags.WRITEABLE, VmFlags.EXECUTABLE
RWX = R | W | X
WINDOW = 48  # pages of VA each file's GEM_VA calls aim at
WIN0 = 0x0200_0000 - 24 * PAGE  # across a 2 MiB boundary: two page tables
IB_VA = 0x0010_0000  # each file's IB BO (va_start), out of the window
IB_SIZE = 0x4000
FLAG_OFF = 0x3000  # the held job's flag in the IB BO
HOLD_IB_OFF = 0x2000
JOB_TIMEOUT = 400_000
SPAN = 1 << vm_spec.leaf_bits(vm_spec.LEVELS - 2)  # what one page table covers


@dataclass(eq=False)
class RBo:
    file: "RFile"
    handle: int
    size: int
    domain: Domain
    flags: int
    kbo: object  # the kernel's Bo (to read its memory and check its life)
    data: np.ndarray  # what it must hold (bytes)
    closed: bool = False
    held: bool = False  # the held job may reach it
    big: bool = False  # (VRAM filler: only its ends compared)
    alias: object = None  # an alias of its CPU mapping made with the buffer protocol

    def word(self, off: int) -> int:
        return int(self.data[off:off + 4].view("<u4")[0])


@dataclass(eq=False)
class RMap:
    va: int
    size: int
    bo: RBo
    offset: int
    flags: int

    @property
    def end(self) -> int:
        return self.va + self.size


@dataclass(eq=False)
class RFile:
    f: object
    ctx: int  # NORMAL: the held job's
    hctx: int  # HIGH: every other job (the CP's second queue, which runs while the first polls)
    ib: object  # the IB BO's CPU view (dwords)
    ib_handle: int
    ib_kbo: object  # (its flag is set through device memory once the file is closed)
    bos: dict = field(default_factory=dict)  # handle -> RBo
    maps: list = field(default_factory=list)  # RMap, live BOs' and closed BOs the held job keeps (zombies)
    views: list = field(default_factory=list)  # (view, RBo)
    regions: set = field(default_factory=set)  # the page tables its GEM_VAs made (by SPAN)
    stale: list = field(default_factory=list)  # handles it closed


def event(what: str) -> None:
    """hypothesis's statistics (--hypothesis-show-statistics); nothing in the random walk."""
    try:
        _event(what)
    except Exception:  # (outside a hypothesis test)
        WALK_EVENTS[what] = WALK_EVENTS.get(what, 0) + 1


WALK_EVENTS: dict[str, int] = {}


def _err(fn, *args):
    """(errno or 0, result): only KmdError may come out, one line naming its ioctl."""
    try:
        return 0, fn(*args)
    except KmdError as e:
        assert "\n" not in e.message, e.message
        return e.errno, None
