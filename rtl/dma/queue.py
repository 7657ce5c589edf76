"""The DMA engine's small queues: a FIFO in block RAM whose head reads like a register's.

The command queues (qa, qx, qw: commands.py) and the per-burst queues of the write side
(wq, bq: write.py) are all of this kind.

They were LUTRAM read asynchronously at the read pointer; the same FIFO in block RAM
costs no logic cells (a 16x4 LUTRAM costs 6, ~1,000 cells for the five queues of each
DMA engine, while most of the part's block RAMs were unused). The head keeps its timing:
the RAM's synchronous read is addressed by the read pointer's *next* value (the D input
of its register, `Pointer.next`) and is transparent for the write port, so the data out
in cycle t is mem[rp] as seen after the writes up to the edge before t: what the
asynchronous read of cycle t gave."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib.memory import Memory
from amaranth.utils import exact_log2


class Pointer:
    """A queue pointer register whose next value is a signal of its own.

    Drive `next` with comb assignments where the register would have been assigned in
    the sync domain (the last one wins, as it would have); `q` follows it a cycle later.
    The queue reads its RAM at `next`."""

    def __init__(self, m: Module, width: int, name: str):
        self.q = Signal(width, name=name)
        self.next = Signal(width, name=f"{name}_next")
        m.d.comb += self.next.eq(self.q)  # (first, so any later assignment overrides it)
        m.d.sync += self.q.eq(self.next)


class BramQueue:
    """A FIFO in block RAM: a write port and a read of the head at the read pointer.

    `wp` is a pointer with a wrap bit and `rp_next` the next value of the read pointer
    (a `Pointer`'s `next`), both owned by the caller (the pipeline's command pointers
    double as queue pointers)."""

    def __init__(self, m: Module, name: str, layout, depth: int, wp: Signal, rp_next: Signal):
        # (a queue of one entry still gets two: a zero-bit address is not valid Verilog; the
        # pointer's wrap bit then picks the entry, which works as well)
        bits = max(1, exact_log2(depth))
        # (yosys would put a memory this shallow in LUTRAM: ram_style asks for block RAM)
        self.mem = Memory(shape=layout, depth=1 << bits, init=[], attrs={"ram_style": "block"})
        m.submodules[name] = self.mem
        self.w = self.mem.write_port()
        r = self.mem.read_port(transparent_for=(self.w,))
        m.d.comb += [self.w.addr.eq(wp[:bits]), r.addr.eq(rp_next[:bits])]
        self.head = r.data
