"""The DMA engine's small queues: a FIFO in LUTRAM whose head is read asynchronously.

The command queues (qa, qx, qw: commands.py) and the per-burst queues of the write side
(wq, bq: write.py) are all of this kind."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib.memory import Memory
from amaranth.utils import exact_log2


class LutramQueue:
    """A FIFO in a small memory (LUTRAM): a write port and an asynchronous read of the head.

    `wp`/`rp` are pointers with a wrap bit, owned by the caller (the pipeline's command
    pointers double as queue pointers)."""

    def __init__(self, m: Module, name: str, layout, depth: int, wp: Signal, rp: Signal):
        # (a queue of one entry still gets two: a zero-bit address is not valid Verilog; the
        # pointer's wrap bit then picks the entry, which works as well)
        bits = max(1, exact_log2(depth))
        self.mem = Memory(shape=layout, depth=1 << bits, init=[])
        m.submodules[name] = self.mem
        self.w = self.mem.write_port()
        r = self.mem.read_port(domain="comb")
        m.d.comb += [self.w.addr.eq(wp[:bits]), r.addr.eq(rp[:bits])]
        self.head = r.data
