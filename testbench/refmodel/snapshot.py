"""Snapshots of a device's state that two backends must agree on (issue 5), and memory
diffs: for the difftest campaign and the RTL-vs-model tests."""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Iterable

import numpy as np

from kmd_model import regs
from kmd_model.device import Device
from spec import ih as ih_spec

from .regmap import _slots


# Registers that count cycles or time differ between backends by nature.
SNAPSHOT_SKIP = {"TIMESTAMP_LO", "TIMESTAMP_HI", "PERF_BUSY_CYCLES", "PERF_STALL_CYCLES", "PERF_SDMA_BUSY_CYCLES",
                 "PERF_DMA_BUSY_CYCLES", "PERF_TLB_HITS", "PERF_TLB_MISSES", "PERF_WALK_CYCLES",
                 # (how many reads a poll makes before it holds is a matter of time; the model's
                 # queue 0 polls on its grid while queue 1 runs, where the RTL's is parked)
                 "PERF_Q0_POLLS", "PERF_Q1_POLLS"}


def snapshot(dev: Device, *, memory: bool = True, exclude: Iterable[tuple[int, int]] = (),
             read: Callable[[int], int] | None = None,
             read_many: Callable[[list[int]], list[int]] | None = None) -> dict:
    """State two backends must agree on after the same command stream, via the Device API:

    regs: every readable register (label -> value) except time and cycle counters;
    ih: the IH entries still in the IH ring (oldest first, at most the ring's size, the
        ones before IH_WPTR), decoded by spec/ih.py, timestamps set to 0;
    mem: digest of memory with the `exclude` byte ranges [start, end) zeroed (e.g. a
        RELEASE_MEM TIMESTAMP destination) and the timestamps of those IH entries too,
        when `memory` (`sparse_digest`: equal exactly when the memories are).

    `read_many` reads a list of registers in order (a co-simulated device's one trip to the
    simulator for all of them, at the cycles of the reads one by one).
    """
    read = read or dev.mmio_read32
    out: dict[str, Any] = {"regs": {}}
    queues = regs.QUEUE_CAPS.CP_QUEUES.get(read(regs.QUEUE_CAPS.addr())) >= 2  # (CP_HQD1_* exist)
    wanted = [(off, s.label) for off, s in sorted(_slots(queues=queues).items())
              if s.readable and s.reg.NAME not in SNAPSHOT_SKIP]
    offsets = [off for off, _ in wanted]
    values = read_many(offsets) if read_many else [read(off) for off in offsets]
    out["regs"] = {label: v for (_, label), v in zip(wanted, values)}
    r = out["regs"]
    base = (r["IH_BASE_HI"] << 32 | r["IH_BASE_LO"]) << 8
    size = ih_spec.ring_bytes(regs.IH_SIZE.LOG2_DWORDS.get(r["IH_SIZE"]))
    wptr = r["IH_WPTR"]
    n = min(wptr, size) // ih_spec.ENTRY_BYTES
    mem32 = dev.mem.view("<u4")
    entries = []
    exclude = list(exclude)
    ts = ih_spec.BY_NAME["TIMESTAMP_LO"].dword, ih_spec.BY_NAME["TIMESTAMP_HI"].dword
    for k in range(n, 0, -1):
        a = base + ((wptr - ih_spec.ENTRY_BYTES * k) & (size - 1))
        if a + ih_spec.ENTRY_BYTES > dev.mem.size:
            break
        e = ih_spec.decode(mem32[a >> 2:(a >> 2) + ih_spec.ENTRY_DWORDS].tolist())
        e["TIMESTAMP_LO"] = e["TIMESTAMP_HI"] = 0
        entries.append(e)
        exclude += [(a + 4 * d, a + 4 * d + 4) for d in ts]
    out["ih"] = entries
    if memory:
        out["mem"] = sparse_digest(dev.mem, exclude)
    return out


def _masked(mem: np.ndarray, exclude: Iterable[tuple[int, int]]) -> np.ndarray:
    exclude = list(exclude)
    if not exclude:
        return mem
    m = np.array(mem, copy=True)
    for a, b in exclude:
        m[a:b] = 0
    return m


def mem_digest(mem: np.ndarray, exclude: Iterable[tuple[int, int]] = ()) -> str:
    """sha256 of memory, with the byte ranges [start, end) in `exclude` read as 0."""
    return hashlib.sha256(memoryview(np.ascontiguousarray(_masked(mem, exclude)))).hexdigest()


_CHUNK = 512  # qwords (4 KiB) per block that sparse_digest skips when all zero


def sparse_digest(mem: np.ndarray, exclude: Iterable[tuple[int, int]] = ()) -> str:
    """A digest of memory, with the byte ranges [start, end) in `exclude` read as 0, that two
    memories share exactly when they hold the same bytes (up to sha256's collisions, as
    mem_digest): sha256 of the size and of every nonzero qword's index and value.

    A difftest memory is zeroed before each stream and a stream writes a few KiB of it:
    finding the nonzero 4 KiB blocks reads memory once (0.1 ms for 4 MiB), where hashing
    all of it took 2.4 ms and a masked copy 1 ms more. The SDMA difftest takes about 3.4
    snapshots a stream: on Verilator 7.5 of its 19.8 s were spent in mem_digest."""
    exclude = list(exclude)
    if mem.size % (8 * _CHUNK) or not mem.flags.c_contiguous:
        return "full:" + mem_digest(mem, exclude)  # (not a difftest memory)
    rows = mem.view(np.uint64).reshape(-1, _CHUNK)
    live = np.flatnonzero(rows.max(axis=1))
    # the live blocks' qwords as one run, and each one's index in memory (a 2-D nonzero and
    # two fancy indexings cost twice as much: the difftest's 256 KiB of random sources are
    # live in every snapshot)
    block = rows[live].ravel()
    nz = np.flatnonzero(block)
    idx = (live[:, None] * _CHUNK + np.arange(_CHUNK)).ravel()[nz]
    vals = block[nz]
    if exclude and idx.size:
        # every range at once (the SDMA difftest excludes some 70, each IH entry's timestamp:
        # a search and a mask per range cost more than the rest of the digest): the nonzero
        # qwords each range touches, `at` (positions in idx), and in them the bytes it covers
        ranges = np.array(exclude, dtype=np.int64).reshape(-1, 2)
        los = np.searchsorted(idx, ranges[:, 0] // 8)
        n = np.searchsorted(idx, (ranges[:, 1] + 7) // 8) - los
        hit = n > 0
        if hit.any():
            los, n, ranges = los[hit], n[hit], ranges[hit]
            first = np.repeat(np.cumsum(n) - n, n)
            at = np.repeat(los, n) + np.arange(first.size) - first
            byte = 8 * idx[at, None] + np.arange(8)
            lo, hi = (np.repeat(ranges[:, k], n)[:, None] for k in (0, 1))
            r, c = np.nonzero((byte >= lo) & (byte < hi))
            vals.view(np.uint8).reshape(-1, 8)[at[r], c] = 0
            keep = vals != 0
            idx, vals = idx[keep], vals[keep]
    h = hashlib.sha256(np.int64(mem.size).tobytes())
    h.update(idx.astype(np.int64).tobytes())
    h.update(vals.astype("<u8").tobytes())
    return h.hexdigest()


def mem_diff(a: np.ndarray, b: np.ndarray, exclude: Iterable[tuple[int, int]] = (),
             limit: int = 16) -> list[tuple[int, int]]:
    """The byte ranges [start, end) where two memories differ outside `exclude` (the
    first `limit`). Only the differing bytes are filtered: no copy of either memory."""
    if a.size != b.size:
        raise ValueError(f"memories differ in size: {a.size:#x} and {b.size:#x} bytes")
    if a.size % 8 == 0 and a.flags.c_contiguous and b.flags.c_contiguous:
        # Compared 8 bytes at a time, then byte by byte inside the differing qwords only:
        # a 4 MiB memory in about half the time of a byte compare (the difftest compares
        # two or three per stream).
        q = np.flatnonzero(a.view(np.uint64) != b.view(np.uint64))
        idx = (8 * q[:, None] + np.arange(8)).ravel()
        idx = idx[a[idx] != b[idx]]
    else:
        idx = np.flatnonzero(a != b)
    if idx.size and exclude:
        keep = np.ones(idx.size, dtype=bool)
        for x, y in exclude:
            keep &= (idx < x) | (idx >= y)
        idx = idx[keep]
    if not idx.size:
        return []
    breaks = np.flatnonzero(np.diff(idx) > 1)
    starts = np.concatenate(([idx[0]], idx[breaks + 1]))
    ends = np.concatenate((idx[breaks], [idx[-1]])) + 1
    return [(int(s), int(e)) for s, e in zip(starts[:limit], ends[:limit])]


def diff_snapshots(a: dict, b: dict, names: tuple[str, str] = ("a", "b")) -> list[str]:
    """Readable differences between two snapshots; empty when they agree."""
    na, nb = names
    out = []
    for k in sorted(set(a["regs"]) | set(b["regs"])):
        va, vb = a["regs"].get(k), b["regs"].get(k)
        if va != vb:
            out.append(f"{k}: {na} {va if va is None else hex(va)}, {nb} {vb if vb is None else hex(vb)}")
    ea, eb = a.get("ih", []), b.get("ih", [])
    if len(ea) != len(eb):
        out.append(f"IH entries: {na} has {len(ea)}, {nb} has {len(eb)}")
    for i, (x, y) in enumerate(zip(ea, eb)):
        if x != y:
            fields = ", ".join(f"{f} {x[f]:#x}/{y[f]:#x}" for f in x if x[f] != y.get(f))
            out.append(f"IH entry {i}: {fields}")
    if "mem" in a and "mem" in b and a["mem"] != b["mem"]:
        out.append(f"memory digests differ ({na} {a['mem'][:12]}, {nb} {b['mem'][:12]}); use mem_diff")
    return out
