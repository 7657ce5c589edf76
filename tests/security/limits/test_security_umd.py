"""The UMD's fences and memory behind a held CP: submissions across the seqno's wrap are
waited for (the zero-filled fence dword is no seqno) and no IB in flight is reused; the
flush limit (max_inflight) holds, times out by name and keeps what was recorded; a full
GTT is OutOfMemory naming the queue, and the queue works again once memory is free.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import kmd_model
import umd
from kmd_model.uapi import Domain
from testbench.refmodel import RefModel

from ..security_helpers import Holder, quiet


# ------------------------------------------------------------------------------ the UMD's fences and memory

def _wrap(dev, first_seq: int):
    """Submissions from `first_seq` on, in flight behind a held CP: finish() waits for
    them (it does not take the zero-filled fence dword for a seqno), no IB in flight is
    reused, and everything lands once the CP moves."""
    kmd = kmd_model.bind(dev, initial_seq=first_seq)
    gpu = umd.open(api_version=2)
    buf = gpu.alloc(0x1000)
    hold = Holder()
    q = gpu.queue(flush_threshold=1)
    for i in range(6):
        q.write(buf, 4 * i, 0x100 + i)  # one submission each, across the wrap
    seqs = [s.seq for s in q.inflight]
    assert seqs[0] == first_seq and seqs[-1] == (first_seq + 5) & 0xFFFF_FFFF  # each context counts on its own
    assert not q.seq_done(seqs[0]) and not q.seq_done(seqs[-1])
    with pytest.raises(umd.GpuTimeout, match=rf"^finish: queue \(context {q.ctx_id}\) not idle after 5000 cycles$"):
        q.finish(5000)
    assert len(q.inflight) == 6 and not q.pool.free  # nothing in flight came back to the pool
    q.write(buf, 0x40, 0x200)  # a new IB, not one in flight
    assert q.pool.created == 7
    assert not buf.u32[:7].any()
    hold.release()
    q.finish()
    assert buf.u32[:6].tolist() == [0x100 + i for i in range(6)] and buf.u32[0x10] == 0x200
    assert q.seq_done(seqs[-1]) and q.fence_trusted
    gpu.close()
    quiet(kmd)


def check_fence_wrap_from_top(dev):
    _wrap(dev, 0xFFFF_FFFE)


def check_fence_wrap_from_zero(dev):
    _wrap(dev, 0)


def _held_flushes(dev, n: int):
    """A held CP and `n` flushes: the queue never has more than max_inflight submissions (nor
    IBs) in flight; the flush past the limit waits, times out with a message naming the
    queue and the limit, and keeps what was recorded; once the CP moves, every write lands."""
    kmd = kmd_model.bind(dev, job_timeout=1 << 40)
    gpu = umd.open(api_version=2)
    buf = gpu.alloc(4 * n)
    hold = Holder()
    q = gpu.queue(max_inflight=8)
    q.timeout = 20_000
    timed_out = 0
    i, recorded = 0, False
    while i < n:
        try:
            if not recorded:
                q.write(buf, 4 * i, i + 1)  # raises when it cannot have an IB: not recorded
                recorded = True
            q.flush()  # raises when it cannot submit: still recorded
            i, recorded = i + 1, False
        except umd.GpuTimeout as e:
            assert re.fullmatch(rf"(write \(a new IB\)|flush): queue \(context {q.ctx_id}\) has 8 submissions in flight, "
                                rf"its limit \(max_inflight=8\), and the oldest \(seqno {q.inflight[0].seq:#x}\) "
                                r"has not finished after 20000 cycles", str(e)), str(e)
            timed_out += 1
            assert len(q.inflight) == 8 and q.pool.created <= 9
            if timed_out == 3:
                hold.release()
    q.finish()
    assert timed_out == 3 and q.pool.created <= 9
    assert np.array_equal(buf.u32[:n], np.arange(1, n + 1, dtype=np.uint32))
    gpu.close()
    quiet(kmd)


def check_held_cp_flushes(dev):
    _held_flushes(dev, 10_000 if dev.name == "model" else 200)


def check_out_of_memory(dev):
    """GTT full: a queue that needs a new IB gets OutOfMemory naming the queue and its limit,
    not a raw KMD error, and works again once memory is free (without pools: every IB is
    a BO of its own)."""
    kmd = kmd_model.bind(dev)
    gpu = umd.open(api_version=2, pools=False)
    buf = gpu.alloc(0x1000)
    q = gpu.queue(flush_threshold=1 << 20)
    q.write(buf, 0, 1)
    q.finish()  # the queue's first IB is back in its pool
    gtt = kmd.bo.heaps[Domain.GTT]
    hog = []
    while gtt.largest_free >= 0x1000:
        hog.append(gpu.alloc(gtt.largest_free, "gtt"))
    q.write(buf, 4, 2)  # reuses the pooled IB: no memory needed
    with pytest.raises(umd.OutOfMemory, match=rf"^write \(a new IB\): no memory for 0x1000 bytes on queue \(context "
                       rf"{q.ctx_id}\), with nothing of its own in flight \(max_inflight=32\): ENOMEM: "
                       r"GEM_CREATE: no 0x1000 bytes free in GTT"):
        for i in range(300):  # more than one IB's worth, recorded before a flush
            q.write(buf, 8 + 4 * (i % 500), i)
    for h in hog:
        h.free()
    q.finish()
    assert buf.u32[:2].tolist() == [1, 2]
    q.write(buf, 0x100, 0x33)
    q.finish()
    assert buf.u32[0x40] == 0x33
    gpu.close()
    quiet(kmd)


CHECKS = [check_fence_wrap_from_top, check_fence_wrap_from_zero, check_held_cp_flushes, check_out_of_memory]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())
