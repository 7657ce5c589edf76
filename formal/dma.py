"""The DMA engine's AXI4 master port (rtl/dma.py): the rules a master owes, the 4 KiB rule,
burst shapes, WLAST, W after AW, and the outstanding limits.

Free commands (any source, destination, length, fill or copy, RAW_WAIT) and a free abort
(the CP's soft reset); a free slave that keeps AXI's rules: it answers reads in order (the
engine uses one read ID) with RLAST on each burst's last beat and holds R until RREADY,
and answers a write burst with B once its AW and last W beat are in, held until BREADY.
Ghost FIFOs of the accepted AW lengths follow the W channel.
"""

from amaranth.hdl import Array, Cat, Signal

from rtl.bus import BURST_INCR, RESP_OKAY
from rtl.dma import DMAEngine

from .harness import Harness


class DMAHarness(Harness):
    group = "dma"

    def __init__(self, data_width=64, max_burst=4, max_reads=2, max_writes=2, bytes_width=13):
        super().__init__()
        self.dw, self.mb, self.max_reads, self.max_writes, self.bw = \
            data_width, max_burst, max_reads, max_writes, bytes_width

    def fifo(self, m, name, depth, width):
        """A ghost FIFO: (push(value), pop(), head, count)."""
        q = Array(Signal(width, name=f"{name}{i}") for i in range(depth))
        wp = Signal(range(2 * depth), name=f"{name}_wp")
        rp = Signal(range(2 * depth), name=f"{name}_rp")
        qb = len(wp) - 1
        count = Signal(range(2 * depth + 1), name=f"{name}_count")
        m.d.comb += count.eq((wp - rp)[:len(wp)])
        return q, wp, rp, qb, count

    def build(self, m):
        B = self.dw // 8
        fifo_depth = 1 << (2 * self.mb + 2 - 1).bit_length()
        dut = DMAEngine(self.dw, 48, 4, read_id=0, write_id=0, max_burst_beats=self.mb,
                        max_reads=self.max_reads, max_writes=self.max_writes, fifo_depth=fifo_depth,
                        cmd_depth=2, bytes_width=self.bw)
        m.submodules.dut = dut
        self.no_reset()
        bus = dut.bus
        for f in ("cmd_valid", "cmd_src", "cmd_dst", "cmd_bytes", "cmd_fill", "cmd_raw_wait", "abort"):
            sig = getattr(dut, f)
            m.d.comb += sig.eq(self.free(len(sig), f))
        self.assume(dut.cmd_bytes <= (1 << (self.bw - 1)))  # as the CP checks (DMA_BYTE_COUNT)

        # ---- the slave: reads in order
        D = 4
        rq, rwp, rrp, rqb, rcount = self.fifo(m, "ghost_ar", D, 8)
        rbeat = Signal(8)
        m.d.comb += bus.arready.eq(self.free(1, "arready") & (rcount < D))
        ar_hs = bus.arvalid & bus.arready
        with m.If(ar_hs):
            m.d.sync += [rq[rwp[:rqb]].eq(bus.arlen), rwp.eq(rwp + 1)]
        rvalid = self.free(1, "rvalid")
        m.d.comb += [bus.rvalid.eq(rvalid & (rcount != 0)), bus.rlast.eq(rbeat == rq[rrp[:rqb]]),
                     bus.rid.eq(0), bus.rresp.eq(self.free(2, "rresp")),
                     # (no property reads the data: one free bit on every lane keeps WDATA's
                     # stability meaningful and the realigner's shifter small for the solver)
                     bus.rdata.eq(self.free(1, "rdata").replicate(self.dw))]
        r_hs = bus.rvalid & bus.rready
        with m.If(r_hs):
            m.d.sync += rbeat.eq(rbeat + 1)
            with m.If(bus.rlast):
                m.d.sync += [rbeat.eq(0), rrp.eq(rrp + 1)]
        # ---- the slave: writes; W bursts follow AW order (ghost FIFO of AW lengths)
        wq, wwp, wrp, wqb, wcount = self.fifo(m, "ghost_aw", D, 8)
        wbeat = Signal(8)
        b_owed = Signal(range(2 * D + 1))  # bursts whose last W beat is in and B not yet given
        m.d.comb += [bus.awready.eq(self.free(1, "awready") & (wcount < D)),
                     bus.wready.eq(self.free(1, "wready"))]
        aw_hs = bus.awvalid & bus.awready
        w_hs = bus.wvalid & bus.wready
        with m.If(aw_hs):
            m.d.sync += [wq[wwp[:wqb]].eq(bus.awlen), wwp.eq(wwp + 1)]
        w_last_hs = w_hs & (wbeat == wq[wrp[:wqb]])
        with m.If(w_hs):
            m.d.sync += wbeat.eq(wbeat + 1)
            with m.If(w_last_hs):
                m.d.sync += [wbeat.eq(0), wrp.eq(wrp + 1)]
        m.d.comb += [bus.bvalid.eq(self.free(1, "bvalid") & (b_owed != 0)), bus.bid.eq(0),
                     bus.bresp.eq(self.free(2, "bresp"))]
        b_hs = bus.bvalid & bus.bready
        m.d.sync += b_owed.eq(b_owed + w_last_hs - b_hs)
        for valid, ready, payload in ((bus.rvalid, bus.rready, Cat(bus.rdata, bus.rresp)),
                                      (bus.bvalid, bus.bready, bus.bresp)):
            waited = self.started & self.past(valid & ~ready)
            with m.If(waited):
                self.assume(valid & (payload == self.past(payload)))

        # ---- the master's rules
        for ch, valid, ready, payload in (
                ("ar", bus.arvalid, bus.arready, Cat(bus.araddr, bus.arlen, bus.arsize, bus.arburst, bus.arid)),
                ("aw", bus.awvalid, bus.awready, Cat(bus.awaddr, bus.awlen, bus.awsize, bus.awburst, bus.awid)),
                ("w", bus.wvalid, bus.wready, Cat(bus.wdata, bus.wstrb, bus.wlast))):
            waited = self.started & self.past(valid & ~ready)
            self.prove(f"{ch}_held", ~waited | valid)
            self.prove(f"{ch}_stable", ~waited | (payload == self.past(payload)))
        lb = B.bit_length() - 1
        for ch in ("ar", "aw"):
            addr, len_ = getattr(bus, f"{ch}addr"), getattr(bus, f"{ch}len")
            valid = getattr(bus, f"{ch}valid")
            self.prove(f"{ch}_4k", ~valid | (addr[:12] + (len_ + 1) * B <= 4096))
            self.prove(f"{ch}_legal", ~valid | ((getattr(bus, f"{ch}size") == lb) &
                                                 (getattr(bus, f"{ch}burst") == BURST_INCR) &
                                                 (len_ < self.mb) & (addr[:lb] == 0)))
        self.prove("wlast_beat", ~bus.wvalid | (wcount == 0) | (bus.wlast == (wbeat == wq[wrp[:wqb]])))
        self.prove("w_after_aw", ~bus.wvalid | (wcount != 0))
        self.prove("reads_limit", rcount <= self.max_reads)
        self.prove("writes_limit", (wcount + b_owed) <= self.max_writes)
        cmds = Signal(8)
        dones = Signal(8)
        aborted = Signal()
        with m.If(dut.cmd_valid & dut.cmd_ready):
            m.d.sync += cmds.eq(cmds + 1)
        with m.If(dut.done):
            m.d.sync += dones.eq(dones + 1)
        with m.If(dut.abort):
            m.d.sync += aborted.eq(1)
        self.prove("done_per_command", aborted | (dones <= cmds))

        self.cover("split_at_4k", ar_hs & (bus.araddr[:12] + (bus.arlen + 1) * B == 4096))
        self.cover("copy_done", dut.done & (dut.resp == RESP_OKAY) & ~dut.cmd_fill)
        self.cover("error_done", dut.done & (dut.resp != RESP_OKAY))
        self.cover("abort_in_flight", dut.abort & (rcount != 0))
