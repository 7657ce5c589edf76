"""A bank of event counters in a small memory (LUTRAM on an FPGA), for counters of which at
most one counts in a cycle: the packets executed, by kind (PERF_PACKETS, PERF_SDMA_PACKETS).

Eight 32-bit counters in flip-flops cost eight carry chains (128 CCU2C, 256 logic cells)
and 256 inputs of the CSR read multiplexer; here one incrementer serves the bank. The CSR
block reads the entry at `rd_idx` (its MMIO read's index, spec/gen/generate.py `read_through`)
on a second read port. A memory has no reset: a valid bit per entry, cleared by `clear`
(and reset), tells the entries counted since; one that was not reads 0. An increment in the
cycle of `clear` is dropped, as a register's would be.

The increment takes two cycles, so that no path has the memory's read, the 32-bit carry and
the memory's write in one cycle (that was the CP's critical path, 11.4-13 ns): in the cycle
`inc` is high the entry at `idx` is read into a register (`cur`), and in the next one
`cur + 1` is written back. Observably it is a register per counter that counts in the cycle
of `inc`: while an increment waits for its write, a read of its entry (a second `inc` of the
same entry in the next cycle, or `rd_idx`) gets `cur + 1`, and its valid bit is set at once.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out


class CounterBank(wiring.Component):
    def __init__(self, count: int, width: int = 32):
        if count < 2 or count & (count - 1):
            raise ValueError(f"CounterBank: count must be a power of two of at least 2, not {count!r}")
        self.count = count
        self.width = width
        k = (count - 1).bit_length()
        super().__init__({
            "inc": In(1), "idx": In(k), "clear": In(1),
            "rd_idx": In(k), "rd_data": Out(width),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=self.width, depth=self.count, init=[])
        w = mem.write_port()
        r = mem.read_port(domain="comb")  # the incrementer's
        rd = mem.read_port(domain="comb")  # MMIO reads
        valid = Signal(self.count)
        # the increment waiting for its write: its entry and the value before it
        pend = Signal()
        pend_idx = Signal.like(self.idx)
        cur = Signal(self.width)
        nxt = Signal(self.width)
        m.d.comb += [
            nxt.eq(cur + 1),
            w.addr.eq(pend_idx), w.data.eq(nxt), w.en.eq(pend),
            r.addr.eq(self.idx), rd.addr.eq(self.rd_idx),
            # (a write in the cycle of `clear` lands in an entry whose valid bit clears)
            self.rd_data.eq(Mux(pend & (pend_idx == self.rd_idx), nxt,
                                Mux(valid.bit_select(self.rd_idx, 1), rd.data, 0))),
        ]
        m.d.sync += [pend.eq(self.inc & ~self.clear), pend_idx.eq(self.idx)]
        with m.If(self.inc):
            m.d.sync += cur.eq(Mux(pend & (pend_idx == self.idx), nxt,
                                   Mux(valid.bit_select(self.idx, 1), r.data, 0)))
        with m.If(self.clear):
            m.d.sync += valid.eq(0)
        with m.Elif(self.inc):
            m.d.sync += valid.bit_select(self.idx, 1).eq(1)
        return m
