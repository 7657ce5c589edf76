"""Comparing runs of the reference model: configure()'s checks (as the RTL memory
model's), snapshot() and diff_snapshots(), mem_diff() against a byte compare, and the
sparse memory digest against a full one.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from kmd_model import regs
from spec import ih, pm4
from testbench.refmodel import RefModel, diff_snapshots, mem_diff, snapshot

from .refmodel_helpers import IB1, IH_RING, OUT, Driver, w32


# ---------------------------------------------------------------------------- configure, snapshot

def test_configure_checks_like_the_rtl_memory_model():
    dev = RefModel()
    with pytest.raises(ValueError, match="unknown AXI response"):
        dev.configure(error_window=(0, 16, "BAD"))
    with pytest.raises(ValueError, match="rd_latency must be 0..65535"):
        dev.configure(rd_latency=70000)
    with pytest.raises(ValueError, match="unknown stall channel"):
        dev.configure(stall={"x": 0.1})
    with pytest.raises(ValueError, match="multiple of 32"):
        RefModel(mem_size=100)


def stream(d):
    ib = pm4.write_data(OUT + 0x40, [1, 2, 3]) + pm4.release_mem(OUT + 0x50, 9, int_sel="SEND_INT", int_ctxid=4)
    w32(d.dev, IB1, ib)
    d.submit(pm4.indirect_buffer(IB1, len(ib)), pm4.release_mem(OUT, 0, data_sel="TIMESTAMP"))


def test_snapshot_compares_two_runs():
    a, b = Driver(), Driver()
    stream(a)
    b.dev.delay(1000)  # other timing, same state
    stream(b)
    sa, sb = a.dev.snapshot(exclude=[(OUT, OUT + 8)]), snapshot(b.dev, exclude=[(OUT, OUT + 8)])
    assert diff_snapshots(sa, sb) == []
    assert "TIMESTAMP_LO" not in sa["regs"] and "PERF_BUSY_CYCLES" not in sa["regs"]
    assert "RB_DOORBELL" not in sa["regs"] and sa["regs"]["PERF_PACKETS[4]"] == 2
    assert sa["ih"] == [dict(ih.decode(ih.encode(CLIENT_ID=ih.Client.GRBM_CP, SOURCE_ID=ih.Source.EOP,
                                                 DATA0=4, DATA1=9, DATA3=OUT + 0x50)))]
    assert a.dev.snapshot()["mem"] != b.dev.snapshot()["mem"], "the timestamps differ"
    # the RELEASE_MEM timestamp and the IH entry's: 104 and 1104 cycles, two bytes each
    assert mem_diff(a.dev.mem, b.dev.mem) == [(IH_RING + 4, IH_RING + 6), (OUT, OUT + 2)]
    b.dev.mem[OUT + 0x44] = 0x77
    b.io.write(regs.SCRATCH, 3)
    sb2 = b.dev.snapshot(exclude=[(OUT, OUT + 8)])
    assert diff_snapshots(sa, sb2, ("model", "rtl")) == [
        "SCRATCH: model 0x0, rtl 0x3",
        f"memory digests differ (model {sa['mem'][:12]}, rtl {sb2['mem'][:12]}); use mem_diff"]
    assert mem_diff(a.dev.mem, b.dev.mem, exclude=[(OUT, OUT + 8), (IH_RING, IH_RING + 16)]) == [
        (OUT + 0x44, OUT + 0x45)]


def test_mem_diff_by_qwords_is_the_byte_compare():
    """mem_diff compares 8 bytes at a time where it can: the same ranges as a byte compare,
    at the ends of the memory and of qwords, with exclusions and limits, and on memories
    it cannot view as qwords."""
    def by_bytes(a, b, exclude=(), limit=16):
        idx = np.flatnonzero(a != b)
        for x, y in exclude:
            idx = idx[(idx < x) | (idx >= y)]
        if not idx.size:
            return []
        breaks = np.flatnonzero(np.diff(idx) > 1)
        starts, ends = np.concatenate(([idx[0]], idx[breaks + 1])), np.concatenate((idx[breaks], [idx[-1]])) + 1
        return [(int(s), int(e)) for s, e in zip(starts[:limit], ends[:limit])]

    rng = random.Random(5)
    for size in (64, 1024, 4100):
        for _ in range(60):
            a = np.frombuffer(rng.randbytes(size), dtype=np.uint8).copy()
            b = a.copy()
            for _ in range(rng.choice([0, 1, 3, 40])):
                at = rng.choice([0, size - 1, rng.randrange(size)])
                n = rng.choice([1, 2, 7, 8, 9, 33])
                b[at:at + n] ^= np.uint8(rng.randrange(1, 256))
            exclude = [(x, x + rng.randrange(1, 64)) for x in (rng.randrange(size) for _ in range(rng.randrange(3)))]
            limit = rng.choice([1, 4, 16, 1 << 20])
            assert mem_diff(a, b, exclude, limit) == by_bytes(a, b, exclude, limit)
            assert mem_diff(a[::2], b[::2], exclude, limit) == by_bytes(a[::2], b[::2], exclude, limit)


def test_sparse_memory_digest_is_exact():
    """snapshot()'s memory digest (sparse_digest: the nonzero qwords only) is equal exactly
    when the memories are, outside the excluded byte ranges, as a full hash would be."""
    from testbench.refmodel.snapshot import _masked, sparse_digest

    rng = np.random.default_rng(7)
    size = 64 << 10
    outcomes = set()
    for _ in range(400):
        a = np.zeros(size, np.uint8)
        for _ in range(int(rng.integers(0, 5))):
            at, n = int(rng.integers(0, size - 64)), int(rng.integers(1, 64))
            a[at:at + n] = rng.integers(0, 256, n, dtype=np.uint8)
        b = a.copy()
        if rng.random() < 0.6:  # one bit flipped somewhere, perhaps inside an excluded range
            k = int(rng.integers(0, size))
            b[k] ^= np.uint8(1 << int(rng.integers(0, 8)))
        ex = [(int(x), int(x) + int(rng.integers(1, 20))) for x in rng.integers(0, size - 20, int(rng.integers(0, 3)))]
        same = np.array_equal(_masked(a, ex), _masked(b, ex))
        assert (sparse_digest(a, ex) == sparse_digest(b, ex)) == same, (ex, np.flatnonzero(a != b))
        outcomes.add(same)
    assert outcomes == {True, False}
    # a value only inside an excluded range reads as zero memory; a byte beside it does not
    z, m = np.zeros(size, np.uint8), np.zeros(size, np.uint8)
    m[0x1005:0x1009] = 0xAB
    assert sparse_digest(m, [(0x1005, 0x1009)]) == sparse_digest(z) != sparse_digest(m, [(0x1006, 0x1009)])
    assert sparse_digest(z) != sparse_digest(np.zeros(2 * size, np.uint8))  # the size counts
    odd = np.zeros(size + 3, np.uint8)  # not whole 4 KiB blocks: the full hash
    assert sparse_digest(odd).startswith("full:")


def test_sparse_memory_digest_is_its_definition_under_many_ranges():
    """sparse_digest excludes all its ranges at once: it is still sha256 of the size and of
    every nonzero qword's index and value in the memory with those ranges zeroed, for
    dense and sparse memories and up to 80 ranges, overlapping, unsorted, across qwords
    and blocks, or over zero memory (as the SDMA difftest's IH timestamps)."""
    import hashlib

    from testbench.refmodel.snapshot import _masked, sparse_digest

    def by_definition(mem, exclude):
        q = _masked(mem, exclude).view(np.uint64)
        idx = np.flatnonzero(q)
        h = hashlib.sha256(np.int64(mem.size).tobytes())
        h.update(idx.astype(np.int64).tobytes())
        h.update(q[idx].astype("<u8").tobytes())
        return h.hexdigest()

    rng = np.random.default_rng(11)
    size = 64 << 10
    for _ in range(300):
        a = np.zeros(size, np.uint8)
        for _ in range(int(rng.integers(0, 6))):
            at, n = int(rng.integers(0, size - 9000)), int(rng.integers(1, 9000))
            a[at:at + n] = rng.integers(0, 256, n, dtype=np.uint8) * (rng.random(n) < rng.random())
        ex = [(int(x), int(x) + int(rng.integers(1, 40))) for x in rng.integers(0, size - 40, int(rng.integers(0, 80)))]
        assert sparse_digest(a, ex) == by_definition(a, ex), ex
        assert sparse_digest(a, iter(ex)) == sparse_digest(a, ex)
