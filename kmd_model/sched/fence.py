"""The fence driver: 32-bit seqnos written by RELEASE_MEM, compared wrap-safely.

As in amdgpu_fence.c: every job ends with a RELEASE_MEM that writes the job's seqno to
one dword of fence memory and raises an interrupt. `process()` reads that dword and
signals every pending fence up to it, so one interrupt (or one poll) can retire many
jobs, and a lost interrupt only delays signalling until the next one or the fallback
poll. Seqnos are free running 32-bit values: `a` is later than `b` when
(int32)(a - b) > 0, which stays right across 2^32 as long as fewer than 2^31 fences are
in flight. The first seqno is a parameter, so tests can start just below the wrap.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

import numpy as np

from ..log import get_logger

log = get_logger("fence")

SEQ_MASK = 0xFFFF_FFFF


def seq_diff(a: int, b: int) -> int:
    """(int32)(a - b): > 0 when a is later than b."""
    d = (a - b) & SEQ_MASK
    return d - (1 << 32) if d & 0x8000_0000 else d


def seq_after(a: int, b: int) -> bool:
    return seq_diff(a, b) > 0


def seq_passed(seq: int, value: int) -> bool:
    """Is fence `seq` signalled when fence memory holds `value`?"""
    return seq_diff(value, seq) >= 0


class Fence:
    """One hardware fence: a seqno, the job it ends, and how it ended."""

    __slots__ = ("seq", "job", "signalled", "error")

    def __init__(self, seq: int, job: Any = None):
        self.seq = seq
        self.job = job
        self.signalled = False
        self.error: Exception | None = None  # set when cancelled by a reset

    def __repr__(self) -> str:
        state = "error" if self.error else "signalled" if self.signalled else "pending"
        return f"Fence({self.seq:#010x} {state})"


class FenceDriver:
    """Fence memory (a dword in the kernel's write-back page) and the pending fences."""

    def __init__(self, mem32: np.ndarray, index: int, gpu_addr: int, initial_seq: int,
                 on_signal: Callable[[Fence], None] | None = None):
        if not 0 <= initial_seq <= SEQ_MASK:
            raise ValueError(f"initial seqno must fit in 32 bits, not {initial_seq!r}")
        self.mem32, self.index, self.gpu_addr = mem32, index, gpu_addr
        self.on_signal = on_signal
        self.sync_seq = (initial_seq - 1) & SEQ_MASK  # last seqno emitted
        self.last_seq = self.sync_seq  # last seqno seen in fence memory
        self.pending: deque[Fence] = deque()
        self.mem32[index] = self.sync_seq
        self.emitted = 0
        self.signalled = 0

    def read(self) -> int:
        """The seqno the GPU last wrote (a plain memory read: the cheap check)."""
        return int(self.mem32[self.index])

    def next_seq(self) -> int:
        self.sync_seq = (self.sync_seq + 1) & SEQ_MASK
        self.emitted += 1
        return self.sync_seq

    def track(self, fence: Fence) -> None:
        """A fence whose RELEASE_MEM is now in the ring."""
        self.pending.append(fence)

    def process(self) -> int:
        """Signal every pending fence the fence memory has reached; return how many."""
        value = self.read()
        if not self.pending or value == self.last_seq:
            return 0
        if seq_after(value, self.sync_seq):
            log.warning("fence memory holds %#010x, beyond the last emitted %#010x",
                        value, self.sync_seq)
            return 0
        self.last_seq = value
        n = 0
        while self.pending and seq_passed(self.pending[0].seq, value):
            f = self.pending.popleft()
            if not f.signalled:
                f.signalled = True
                n += 1
                if self.on_signal:
                    self.on_signal(f)
        if n:
            self.signalled += n
            log.debug("signalled %d fence(s) up to %#010x", n, value)
        return n

    def force_completion(self, value: int | None = None) -> None:
        """Write `value` (default: the last emitted seqno) to fence memory and signal up to
        it: after a reset nothing more will be written for the jobs that were lost."""
        value = self.sync_seq if value is None else value
        self.mem32[self.index] = value
        self.process()
        self.last_seq = value
