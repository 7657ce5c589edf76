"""The heaps' allocator against a client that fragments them (hostile-20).

A heap (VRAM, GTT, the shadow pool: kmd_model/mm/bo.py `Heap`) kept its holes in a Python
list and walked it, a step a hole, for each allocation's first fit and for `largest_free`.
A client that freed every other one of its 4 KiB BOs made a hole a page, and every
client's GEM_CREATE that fit none of them walked them all under the driver's lock: 4,095
holes in the default model's 32 MiB VRAM, 3.4 ms a GEM_CREATE of 8 KiB, INFO MEMORY 0.6 ms
(on a device of 1 GiB some 30 times as long); the shadow pool, allocated at every CS, is
such a heap too. The holes are kept in blocks now, each with its largest hole (`Heap.BLOCK`):
a first fit passes over a block that has no hole large enough in one step. The tests count
the Python lines the driver runs for another client's call, not its time.
"""

from __future__ import annotations

import random
import sys

import kmd_model
from kmd_model import uapi
from kmd_model.mm.bo import Heap
from kmd_model.uapi import Domain, InfoQuery, Request
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client


def _lines(fn) -> tuple[int, object]:
    """Python lines run (every frame) while fn() runs in this thread, and its result."""
    n = [0]

    def trace(frame, event, arg):
        if event == "line":
            n[0] += 1
        return trace
    sys.settrace(trace)
    try:
        out = fn()
    finally:
        sys.settrace(None)
    return n[0], out


def _fragment(c: Client, n: int) -> None:
    """c makes n 4 KiB VRAM BOs and closes every other one: n / 2 holes of a page."""
    hs = [c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, Domain.VRAM, 0)).handle for _ in range(n)]
    for h in hs[::2]:
        c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(h))


def _victim_calls(v: Client) -> dict[str, int]:
    """Lines run for another client's GEM_CREATE of 8 KiB (no hole of a page fits it) and
    its INFO MEMORY."""
    create = uapi.GemCreateArgs(0x2000, 0, Domain.VRAM, 0)
    n_create, out = _lines(lambda: v.io(Request.GEM_CREATE, create))
    n_info, _ = _lines(lambda: v.io(Request.INFO, uapi.InfoArgs(InfoQuery.MEMORY)))
    v.io(Request.GEM_CLOSE, uapi.GemCloseArgs(out.handle))
    return {"GEM_CREATE": n_create, "INFO MEMORY": n_info}


def test_another_clients_gem_create_and_info_cost_the_same_whatever_holes_a_client_made():
    """2,000 holes of a page made by a hostile client: the victim's GEM_CREATE (which fits
    none of them) runs fewer than 1,000 lines more than with none: a step a block of holes
    (Heap.BLOCK to twice that), the holes of one block (some 550 here; it walked every hole
    before, some 5 lines a hole: 10,000 more); its INFO MEMORY as many as with none."""
    kmd = kmd_model.bind(RefModel())
    h, v = Client(), Client()
    few = _victim_calls(v)
    _fragment(h, 4000)
    assert len(kmd.bo.heaps[Domain.VRAM].holes) > 2000
    many = _victim_calls(v)
    assert many["GEM_CREATE"] <= few["GEM_CREATE"] + 1000, (few, many)
    assert many["INFO MEMORY"] <= few["INFO MEMORY"] + 20, (few, many)


class _ListHeap:
    """The heap as it was (a list of holes walked in Python): the reference for what each
    allocation answers."""

    def __init__(self, base: int, size: int):
        self.holes = [[base, base + size]] if size > 0 else []
        self.used = 0

    def alloc(self, size: int, align: int, top_down: bool = False) -> int | None:
        order = range(len(self.holes) - 1, -1, -1) if top_down else range(len(self.holes))
        for i in order:
            start, end = self.holes[i]
            addr = (end - size) & ~(align - 1) if top_down else (start + align - 1) & ~(align - 1)
            if addr < start or addr + size > end:
                continue
            self.holes[i:i + 1] = [p for p in ([start, addr], [addr + size, end]) if p[1] > p[0]]
            self.used += size
            return addr
        return None

    def free(self, addr: int, size: int) -> None:
        i = next((k for k, hole in enumerate(self.holes) if hole[0] > addr), len(self.holes))
        self.holes.insert(i, [addr, addr + size])
        if i + 1 < len(self.holes) and self.holes[i][1] == self.holes[i + 1][0]:
            self.holes[i][1] = self.holes.pop(i + 1)[1]
        if i > 0 and self.holes[i - 1][1] == self.holes[i][0]:
            self.holes[i - 1][1] = self.holes.pop(i)[1]
        self.used -= size

    @property
    def largest_free(self) -> int:
        return max((e - s for s, e in self.holes), default=0)


def test_the_heap_answers_every_allocation_as_the_list_it_was():
    """Random allocations (sizes of pages and of 32 bytes, alignments up to past the heap,
    from the bottom and from the top) and frees, on heaps based at 0 and above it: every
    address, hole, count used and largest hole as the Python list's."""
    rng = random.Random(20)
    for base, size, unit in ((0x1000, 0x40000, 0x1000), (0, 0x20000, 0x1000), (0x3_0000_0000, 0x8000, 32)):
        h, ref = Heap("t", base, size), _ListHeap(base, size)
        live: list[tuple[int, int]] = []
        for _ in range(3000):
            if live and rng.random() < 0.45:
                a, n = live.pop(rng.randrange(len(live)))
                h.free(a, n)
                ref.free(a, n)
            else:
                n = unit * rng.choice((1, 1, 2, 3, 8, 64, size // unit, size // unit + 1))
                align = rng.choice((unit, unit, 2 * unit, 16 * unit, 1 << 40, base + size))
                align = 1 << (align - 1).bit_length()  # (a power of two)
                top = rng.random() < 0.3
                a = h.alloc(n, align, top)
                assert a == ref.alloc(n, align, top), (base, n, align, top)
                if a is not None:
                    live.append((a, n))
            assert h.holes == ref.holes and h.used == ref.used and h.largest_free == ref.largest_free
        assert h.alloc(1 << 70, 0x1000) is None and h.alloc(0x1000, 1 << 70) == ref.alloc(0x1000, 1 << 70)
