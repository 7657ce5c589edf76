"""A bank of event counters in a small memory (LUTRAM on an FPGA), for counters of which at
most one counts in a cycle: the packets executed, by kind (PERF_PACKETS, PERF_SDMA_PACKETS).

Eight 32-bit counters in flip-flops cost eight carry chains (128 CCU2C, 256 logic cells)
and 256 inputs of the CSR read multiplexer; here one incrementer serves the bank: the
entry at `idx` is read (asynchronously), incremented and written back in the cycle `inc`
is high, so a counter reads exactly what its register would. The CSR block reads the
entry at `rd_idx` (its MMIO read's index, spec/generate.py `read_through`) on a second
read port. A memory has no reset: a valid bit per entry, cleared by `clear` (and reset),
tells the entries counted since; one that was not reads 0. An increment in the cycle of
`clear` is dropped, as a register's would be.
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
        cur = Signal(self.width)
        m.d.comb += [
            r.addr.eq(self.idx), rd.addr.eq(self.rd_idx), w.addr.eq(self.idx),
            cur.eq(Mux(valid.bit_select(self.idx, 1), r.data, 0)),
            w.data.eq(cur + 1), w.en.eq(self.inc & ~self.clear),
            self.rd_data.eq(Mux(valid.bit_select(self.rd_idx, 1), rd.data, 0)),
        ]
        with m.If(self.clear):
            m.d.sync += valid.eq(0)
        with m.Elif(self.inc):
            m.d.sync += valid.bit_select(self.idx, 1).eq(1)
        return m
