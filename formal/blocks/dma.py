"""The DMA engine's AXI4 master port (rtl/dma/): the rules a master owes, the 4 KiB rule,
burst shapes, WLAST, W after AW, and the outstanding limits.

Free commands (any source, destination, length, fill or copy, RAW_WAIT) and a free abort
(the CP's soft reset); a free slave that keeps AXI's rules: it answers reads in order (the
engine uses one read ID) with RLAST on each burst's last beat and holds R until RREADY,
and answers a write burst with B once its AW and last W beat are in, held until BREADY.
Ghost FIFOs of the accepted AW lengths follow the W channel.
"""

from amaranth.hdl import Array, Cat, Mux, Signal

from rtl.bus import BURST_INCR, RESP_OKAY
from rtl.dma import DMAEngine

from ..harness import Harness, WhiteBox


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
        box = WhiteBox(dut, "DMAEngine")
        m.submodules.dut = box.module
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
        # `done` against the commands accepted: `owed` counts accepted commands without
        # their `done`. Checked until the first error or abort (`aborted`): after it the engine
        # reports the drained commands from its error pointer, whose validity needs the
        # realigner's progress tied to the write side (not stated; only tested and, to the
        # BMC depth of the old harness, checked)
        owed = Signal(range(2 * 2 + 2))
        aborted = Signal()
        aborting = box("aborting")
        m.d.sync += owed.eq(owed + (dut.cmd_valid & dut.cmd_ready) - dut.done)
        with m.If(dut.abort | aborting):  # (an error starts `aborting`, an abort `silent` too)
            m.d.sync += aborted.eq(1)
        self.prove("done_per_command", aborted | aborting | ~dut.done | (owed != 0))
        # `busy_r` is `busy` from a register, worked out a cycle ahead (the SDMA's decisions read it)
        self.invariant(dut.busy_r == dut.busy)

        self.strengthen(m, box, dict(rcount=rcount, wq=wq, wwp=wwp, wrp=wrp, wbeat=wbeat, wcount=wcount,
                                     b_owed=b_owed, owed=owed, aborted=aborted))

        self.cover("split_at_4k", ar_hs & (bus.araddr[:12] + (bus.arlen + 1) * B == 4096))
        self.cover("copy_done", dut.done & (dut.resp == RESP_OKAY) & ~dut.cmd_fill)
        self.cover("error_done", dut.done & (dut.resp != RESP_OKAY))
        self.cover("abort_in_flight", dut.abort & (rcount != 0))

    def strengthen(self, m, box, g):
        """The invariants k-induction needs: the engine's own state tied to the ghost state
        (each follows from the RTL's update rules in one step; see each comment)."""
        g = type("G", (), g)
        B = self.dw // 8
        bnd = min(self.mb, 4096 // B)       # bursts end at bnd-beat boundaries (rtl/dma/burst.py)
        bnd_bits = bnd.bit_length() - 1
        Q = self.max_writes
        qpw = Q.bit_length()                # the B/W queues' pointers carry a wrap bit
        cpw = 2                             # command pointers: cmd_depth 2 and a wrap bit

        def count(wp, rp, bits):
            return (wp - rp)[:bits]

        # the read walker: a valid AR belongs to an active command; a burst lies inside one
        # bnd-beat block and, unless it is the command's last, runs to the block's end (so the
        # next one starts on a boundary); the read count is the ghost's and has room
        for p, valid in (("r", "ar_valid"), ("a", "aw_valid")):
            act, n, last, addr = box(f"{p}_act"), box(f"{p}_n"), box(f"{p}_last"), box(f"{p}_addr")
            lo = addr[:bnd_bits] if bnd_bits else 0
            self.invariant(~box(valid) | act)
            self.invariant(~act | ((n >= 1) & (n <= bnd) & (lo + n <= bnd) & (last | (lo + n == bnd))))
        self.invariant(box("ar_out") == g.rcount)
        self.invariant(~box("ar_valid") | (box("ar_out") < self.max_reads))

        # the W queue is the ghost FIFO of AW lengths: the same pointers (the ghost's are a
        # bit wider), the same lengths, the same beat
        wq_wp, wq_rp = box("wq_wp"), box("wq_rp")
        self.invariant((wq_wp == g.wwp[:qpw]) & (wq_rp == g.wrp[:qpw]) & (box("w_beat") == g.wbeat))
        self.invariant(g.wcount <= Q)
        wq_rows = box.rows("wq")
        qbits = max(1, Q.bit_length() - 1)
        self.invariant(Mux(g.wcount == 0, g.wbeat == 0, g.wbeat <= g.wq[g.wrp[:len(g.wrp) - 1]]))
        for k in range(Q):
            row = self.pick(wq_rows, (wq_rp + k)[:qbits])
            self.invariant((k >= g.wcount) | (row.len == g.wq[(g.wrp + k)[:len(g.wrp) - 1]]))

        # the B queue: an entry per AW sent (and per zero-length command, `nob`, which is a
        # command's last): its non-`nob` entries are the bursts whose W is to come or whose B
        # is owed, so the W queue never holds more than it; a valid AW has a free entry
        bq_wp, bq_rp = box("bq_wp"), box("bq_rp")
        bq_count = count(bq_wp, bq_rp, qpw)
        self.invariant(bq_count <= Q)
        bq_rows = box.rows("bq")
        live = [Signal(name=f"bq_live{k}") for k in range(Q)]
        rows_k = [self.pick(bq_rows, (bq_rp + k)[:qbits]) for k in range(Q)]
        for k in range(Q):
            m.d.comb += live[k].eq(k < bq_count)
            self.invariant(~live[k] | ~rows_k[k].nob | rows_k[k].last)
        nonnob = sum(live[k] & ~rows_k[k].nob for k in range(Q))
        lasts = sum(live[k] & rows_k[k].last for k in range(Q))
        self.invariant(nonnob == g.wcount + g.b_owed)
        self.invariant(~box("aw_valid") | (bq_count < Q))

        # commands (until the first error or abort): done <= aw <= wr in queue order, and
        # every command with a `last` entry in the B queue lies in [done, aw)
        wr, aw, done = box("wr_ptr"), box("aw_ptr"), box("done_ptr")
        d_wr, d_aw = count(wr, done, cpw), count(aw, done, cpw)
        gone = g.aborted | box("aborting")
        self.invariant(gone | ~box("silent"))
        self.invariant(gone | ((d_wr <= 2) & (g.owed == d_wr) & (d_aw <= d_wr) & (~box("a_act") | (d_aw < d_wr)) &
                                    (lasts <= d_aw)))

        # the command queues qa and qw (rtl/dma/queue.py, burst.py): each entry holds its walk's
        # first burst, worked out when it was queued, so what the walk invariant above says
        # of a loaded walk holds of every row, and of the RAM's registered read, which is
        # always one of the rows (queue.py reads at the pointer or ahead of it: which row it
        # is matters only as a stage loads it, and the walk's checks need only that it is
        # one); `wpn` is the write pointer's inverted copy
        from amaranth.lib import data
        for q in ("qa", "qw"):
            rows = box.rows(q)
            rd = data.View(rows[0].shape(), box(f"{q}_rd"))
            self.invariant(box(f"{q}_wpn") == ~wr[:cpw - 1])
            # (rd from the first edge on: before it the read register holds its initial value)
            for row, when in [(r, None) for r in rows] + [(rd, self.started)]:
                lo = row.addr[:bnd_bits] if bnd_bits else 0
                valid = (row.n >= 1) & (row.n <= bnd) & (lo + row.n <= bnd) & (row.short | (lo + row.n == bnd))
                self.invariant(valid if when is None else ~when | valid)

    @staticmethod
    def pick(rows, index):
        """rows[index] for a signal index (the rows are Views of one layout)."""
        from amaranth.lib import data
        return data.View(rows[0].shape(), Array(r.as_value() for r in rows)[index])
