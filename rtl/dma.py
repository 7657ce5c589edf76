"""DMA engine: copies and fills of any length and alignment over an AXI4 master.

Commands go into a small queue (`cmd_depth`) and run as a pipeline, each stage walking
the queue in order, so the next command's reads start while the last one is still
writing (back-to-back copies keep the bus busy):

    cmd queue ──► AR issuer ─► memory ─► R realigner ─► data FIFO ─► W stream
                  (credits)                              │             ▲
                               AW issuer ◄── beats ready ┘             │ (W follows AW)
                                   └──► B queue ──► done, in command order

- AR issuer: INCR bursts of up to `max_burst_beats` at bus-aligned addresses, split at
  min(max_burst_beats · bus bytes, 4 KiB)-aligned boundaries (so they never cross
  4 KiB), at most `max_reads` in flight. A burst is issued only when the data FIFO has
  room reserved for every beat it will produce, so R is always accepted at full rate.
- R realigner: shifts source bytes into destination lanes (any src/dst alignment) as R
  beats arrive, keeping the previous beat; an output beat is bytes [sh, sh + B) of
  {this beat, previous beat}. When the destination needs one beat more than the
  source gives, a final "flush" beat takes a cycle with RREADY low.
- AW issuer: a write burst (same boundaries on the destination) is issued only when all
  its beats are in the FIFO (fills: at once), so the W channel, which a bus mux locks
  to one master per burst, is never held waiting for read data.
- W stream: FIFO beats (or the fill pattern) with byte strobes for the partial first
  and last beats; WLAST from the same boundary rule as the AW issuer.
- B queue: one entry per write burst (and one per zero-length command, which needs no
  B); `done` pulses when a command's last burst is answered.

Reads and writes use one ID each (`read_id`, `write_id`), so both come back in order.

Fill: `cmd_src[31:0]` is the pattern; the byte at address a is its byte (a mod 4).

`cmd_raw_wait` holds the command's reads until every earlier command is done (its
writes answered): a copy that reads what an earlier command writes needs it
(DMA_DATA's RAW_WAIT).

Errors: the first SLVERR/DECERR (R or B) ends the failing command and every command
queued after it: nothing new is issued for them (commands queued before it still
finish normally), everything in flight is drained (R beats are dropped, bursts whose AW
went out are completed — their data is always good, as W data is only ever taken from
beats that arrived OK), then `done` pulses once for each of those commands, in order,
with `resp` and `err_addr` of the first error. `err_addr` is the address of the first
byte the engine moves in the beat that answered the error (for a write, in the burst:
B has no beat detail): the beat's bus-aligned address, or the command's src/dst if
that lies inside the beat. While draining `cmd_ready` is low; afterwards the engine is
idle and the next command runs normally. An error in an earlier command that is still
finishing takes over (its error is the one reported).

`abort` (for the CP's soft reset): the same stop-and-drain for every queued command,
but they end without `done`; `busy` stays high until the bus is quiet, then the
engine is empty and idle.

Completion: `done` (one cycle, with `resp` 0 OK / 2 SLVERR / 3 DECERR and `err_addr`)
exactly once per accepted command (unless aborted), in order, after the command's last
write response. A command's writes never overtake an earlier command's reads (its
first AW waits for the earlier commands' bursts, which wait for their data), so only
read-after-write needs `cmd_raw_wait`.
`busy` = some accepted command is not done yet; `idle` = ~busy: every write of every
accepted command has been answered (what a RELEASE_MEM after DMA work waits for).

Counters (pulses, for the CSR block to accumulate): `perf_rd_bytes` bus bytes of each
R beat taken, `perf_wr_bytes` bytes written (strobes set) by each W beat, `perf_busy`.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from .bus import AXI4Signature, BURST_INCR, RESP_OKAY

BYTES_WIDTH = 21  # DMA_DATA BYTE_COUNT


def _pow2(v: int) -> bool:
    return isinstance(v, int) and v >= 1 and v & (v - 1) == 0


class DMAEngine(wiring.Component):
    """See the module docstring. All counts are in bus beats unless named otherwise.

    data_width: AXI data width (32, 64, 128, 256).
    max_burst_beats: longest INCR burst (power of two, 1..256).
    max_reads: read bursts in flight. max_writes: write bursts awaiting B.
    fifo_depth: data FIFO in beats (power of two, ≥ 2·max_burst_beats + 2).
    cmd_depth: commands queued (power of two, ≥ 2).
    """

    def _invalid(self, message: str) -> ValueError:
        self._MustUse__used = True  # not built, so not "created but never used" either
        return ValueError(message)

    def __init__(self, data_width: int = 64, addr_width: int = 48, id_width: int = 4,
                 read_id: int = 0, write_id: int = 0, max_burst_beats: int = 16,
                 max_reads: int = 8, max_writes: int = 8, fifo_depth: int = 128,
                 cmd_depth: int = 4, bytes_width: int = BYTES_WIDTH):
        if data_width not in (32, 64, 128, 256):
            raise self._invalid(f"DMA data width must be 32, 64, 128 or 256, not {data_width!r}")
        if not _pow2(max_burst_beats) or max_burst_beats > 256:
            raise self._invalid(f"max_burst_beats must be a power of two from 1 to 256, not {max_burst_beats!r}")
        if not _pow2(fifo_depth) or fifo_depth < 2 * max_burst_beats + 2:
            raise self._invalid(f"fifo_depth must be a power of two of at least 2 * max_burst_beats + 2 "
                             f"= {2 * max_burst_beats + 2}, not {fifo_depth!r}")
        if not _pow2(cmd_depth) or cmd_depth < 2:
            raise self._invalid(f"cmd_depth must be a power of two of at least 2, not {cmd_depth!r}")
        if not _pow2(max_writes):
            raise self._invalid(f"max_writes must be a power of two, not {max_writes!r}")
        if not isinstance(max_reads, int) or max_reads < 1:
            raise self._invalid(f"max_reads must be a positive integer, not {max_reads!r}")
        for name, v in (("read_id", read_id), ("write_id", write_id)):
            if not 0 <= v < (1 << id_width):
                raise self._invalid(f"{name} {v!r} does not fit in {id_width} ID bits")
        self.data_width = data_width
        self.addr_width = addr_width
        self.id_width = id_width
        self.read_id = read_id
        self.write_id = write_id
        self.max_burst_beats = max_burst_beats
        self.max_reads = max_reads
        self.max_writes = max_writes
        self.fifo_depth = fifo_depth
        self.cmd_depth = cmd_depth
        self.bytes_width = bytes_width
        nb = data_width // 8
        super().__init__({
            "cmd_valid": In(1), "cmd_ready": Out(1),
            "cmd_src": In(addr_width), "cmd_dst": In(addr_width), "cmd_bytes": In(bytes_width),
            "cmd_fill": In(1), "cmd_raw_wait": In(1),
            "abort": In(1),
            "done": Out(1), "resp": Out(2), "err_addr": Out(addr_width),
            "busy": Out(1), "idle": Out(1),
            "perf_rd_bytes": Out(range(nb + 1)), "perf_wr_bytes": Out(range(nb + 1)),
            "perf_busy": Out(1),
            "bus": Out(AXI4Signature(addr_width, data_width, id_width)),
        })

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        AW = self.addr_width
        DW = self.data_width
        B = DW // 8                      # bus bytes
        lb = exact_log2(B)               # lane bits
        bnd_beats = min(self.max_burst_beats, 4096 // B)  # bursts end at bnd_beats·B boundaries
        bnd_bits = exact_log2(bnd_beats)
        cw = self.bytes_width - lb + 1   # beat counts of one command
        D = self.cmd_depth
        cib = exact_log2(D)
        cpw = cib + 1                    # queue pointers carry a wrap bit
        FD = self.fifo_depth
        fw = exact_log2(FD)
        MB = self.max_burst_beats
        Q = self.max_writes
        qib = exact_log2(Q)

        # ------------------------------------------------------------ command queue
        # What every stage needs, worked out once when the command is taken.
        entry_layout = data.StructLayout({
            "src": AW, "dst": AW,
            "fill": 1, "zero": 1, "raw": 1,
            "rwords": cw,       # source beats to read
            "wbeats": cw,       # destination beats to write
            "e": 1,             # the first source beat only primes the realigner
            "sh": lb + 1,       # realigner shift in bytes, 1..B
            "flush": 1,         # one output beat more than the source beats give
            "adj_up": 1,        # wbeats == rwords + 1
            "adj_dn": 1,        # wbeats == rwords - 1
            "end_lane": lb,     # lane of the last byte in the last beat
        })
        entries = Array(Signal(entry_layout.size, name=f"cmd{i}") for i in range(D))

        def entry(ptr):
            return data.View(entry_layout, entries[ptr[:cib]])

        wr_ptr = Signal(cpw)
        rd_ptr = Signal(cpw)    # AR issuer
        rx_ptr = Signal(cpw)    # R realigner
        aw_ptr = Signal(cpw)    # AW issuer
        wd_ptr = Signal(cpw)    # W stream
        done_ptr = Signal(cpw)  # completion

        aborting = Signal()
        abort_ptr = Signal(cpw)
        err_resp = Signal(2)
        err_addr = Signal(AW)

        def dist(p):
            return (p - done_ptr)[:cpw]

        def in_scope(p):
            """The command at p is the failing one or queued after it."""
            return aborting & (dist(p) >= dist(abort_ptr))

        full = Signal()
        m.d.comb += full.eq(dist(wr_ptr) == D)
        m.d.comb += self.cmd_ready.eq(~full & ~aborting)

        new = Signal(entry_layout)
        s_off = self.cmd_src[:lb]
        d_off = self.cmd_dst[:lb]
        n = self.cmd_bytes
        rwords = Signal(cw)
        wbeats = Signal(cw)
        m.d.comb += [
            rwords.eq(Mux(n == 0, 0, (s_off + n + (B - 1)) >> lb)),
            wbeats.eq(Mux(n == 0, 0, (d_off + n + (B - 1)) >> lb)),
            new.src.eq(self.cmd_src), new.dst.eq(self.cmd_dst),
            new.fill.eq(self.cmd_fill), new.zero.eq(n == 0), new.raw.eq(self.cmd_raw_wait),
            new.rwords.eq(rwords), new.wbeats.eq(wbeats),
            new.e.eq(s_off > d_off),
            new.sh.eq(Mux(s_off == d_off, B, (s_off - d_off)[:lb])),
            new.adj_up.eq(wbeats == rwords + 1),
            new.adj_dn.eq(wbeats + 1 == rwords),
            new.flush.eq(Mux(s_off > d_off, wbeats == rwords, wbeats == rwords + 1)),
            new.end_lane.eq((d_off + n - 1)[:lb]),
        ]
        with m.If(self.cmd_valid & self.cmd_ready):
            m.d.sync += [entries[wr_ptr[:cib]].eq(new.as_value()), wr_ptr.eq(wr_ptr + 1)]

        # ------------------------------------------------------------ data FIFO
        # Memory with a transparent read port whose address looks one pop ahead: the
        # head is valid the cycle after a push, as a register FIFO would be.
        m.submodules.fifo = fifo = Memory(shape=unsigned(DW), depth=FD, init=[])
        f_wp = fifo.write_port()
        f_rp = fifo.read_port(transparent_for=(f_wp,))
        f_wr = Signal(fw)
        f_rd = Signal(fw)
        level = Signal(fw + 1)     # beats in the FIFO
        res = Signal(fw + 1)       # beats reserved by issued reads, not yet popped
        avail = Signal(fw + 1)     # beats in the FIFO no AW has claimed yet
        push = Signal()
        push_data = Signal(DW)
        pop = Signal()
        m.d.comb += [
            f_wp.addr.eq(f_wr), f_wp.data.eq(push_data), f_wp.en.eq(push),
            f_rp.addr.eq(Mux(pop, f_rd + 1, f_rd)),
        ]
        m.d.sync += [f_wr.eq(f_wr + push), f_rd.eq(f_rd + pop), level.eq(level + push - pop)]

        def burst_len(addr_beats, left):
            """Beats of the next burst: to the boundary, at most what is left."""
            to_bnd = Signal(range(bnd_beats + 1))
            if bnd_bits:
                m.d.comb += to_bnd.eq(bnd_beats - addr_beats[:bnd_bits])
            else:
                m.d.comb += to_bnd.eq(1)
            nbeats = Signal(range(MB + 1))
            m.d.comb += nbeats.eq(Mux(left < to_bnd, left, to_bnd))
            return nbeats

        class BurstWalk:
            """A command cut into bursts (AR or AW): the first burst starts from the
            command's own address and beat count (`fresh`), later ones from registers."""

            def __init__(self, prefix, start_addr, start_left):
                self.fresh = Signal(init=1, name=f"{prefix}_fresh")
                addr_q = Signal(AW - lb, name=f"{prefix}_addr_q")
                left_q = Signal(cw, name=f"{prefix}_left_q")
                self.addr = Signal(AW - lb, name=f"{prefix}_addr")
                self.left = Signal(cw, name=f"{prefix}_left")
                m.d.comb += [
                    self.addr.eq(Mux(self.fresh, start_addr, addr_q)),
                    self.left.eq(Mux(self.fresh, start_left, left_q)),
                ]
                self.n = burst_len(self.addr, self.left)
                self.last = Signal(name=f"{prefix}_last")
                m.d.comb += self.last.eq(self.n == self.left)
                # on the burst's handshake: where the next one starts
                self.step = [addr_q.eq(self.addr + self.n), left_q.eq(self.left - self.n), self.fresh.eq(0)]

        # ------------------------------------------------------------ AR issuer
        re = entry(rd_ptr)
        r_has = Signal()
        m.d.comb += r_has.eq(rd_ptr != wr_ptr)
        rw = BurstWalk("r", re.src[lb:], re.rwords)
        r_fresh, r_addr, r_n, r_last = rw.fresh, rw.addr, rw.n, rw.last
        r_res = Signal(range(MB + 2))  # FIFO beats this burst will produce, at most
        m.d.comb += r_res.eq(r_n + (r_last & re.adj_up) - (r_last & re.adj_dn))
        r_skip = Signal()
        m.d.comb += r_skip.eq(r_has & (re.fill | re.zero))
        ar_out = Signal(range(self.max_reads + 1))
        ar_hold = Signal()
        r_can = Signal()
        m.d.comb += r_can.eq(r_has & ~r_skip & ~aborting
                             & ~(re.raw & (done_ptr != rd_ptr))
                             & (r_res <= FD - res) & (ar_out < self.max_reads))
        ar_fire = Signal()
        m.d.comb += [
            bus.arvalid.eq(ar_hold | r_can),
            bus.araddr.eq(Cat(Const(0, lb), r_addr)),
            bus.arlen.eq(r_n - 1),
            bus.arsize.eq(lb),
            bus.arburst.eq(BURST_INCR),
            bus.arid.eq(self.read_id),
            ar_fire.eq(bus.arvalid & bus.arready),
        ]
        m.d.sync += ar_hold.eq(bus.arvalid & ~bus.arready)  # VALID stays up until taken
        with m.If(ar_fire):
            m.d.sync += rw.step
            with m.If(r_last):
                m.d.sync += [rd_ptr.eq(rd_ptr + 1), r_fresh.eq(1)]
        with m.Elif(r_skip):
            m.d.sync += rd_ptr.eq(rd_ptr + 1)

        # ------------------------------------------------------------ R realigner
        xe = entry(rx_ptr)
        x_has = Signal()
        m.d.comb += x_has.eq(rx_ptr != wr_ptr)
        x_skip = Signal()
        m.d.comb += x_skip.eq(x_has & (xe.fill | xe.zero))
        x_fresh = Signal(init=1)
        x_left_q = Signal(cw)
        x_addr_q = Signal(AW - lb)
        x_left = Signal(cw)
        x_addr = Signal(AW - lb)
        m.d.comb += [
            x_left.eq(Mux(x_fresh, xe.rwords, x_left_q)),
            x_addr.eq(Mux(x_fresh, xe.src[lb:], x_addr_q)),
        ]
        prev = Signal(DW)
        flush_pending = Signal()
        m.d.comb += bus.rready.eq(aborting | (x_has & ~x_skip & ~flush_pending))
        r_fire = Signal()
        m.d.comb += r_fire.eq(bus.rvalid & bus.rready)
        with m.If(r_fire & bus.rlast):
            m.d.sync += ar_out.eq(ar_out + ar_fire - 1)
        with m.Else():
            m.d.sync += ar_out.eq(ar_out + ar_fire)

        cur = Signal(DW)
        m.d.comb += [
            cur.eq(Mux(flush_pending, 0, bus.rdata)),
            push_data.eq(Cat(prev, cur).bit_select(Cat(Const(0, 3), xe.sh), DW)),
        ]
        r_err = Signal()
        m.d.comb += r_err.eq(r_fire & ~aborting & (bus.rresp != RESP_OKAY))
        with m.If(~aborting):
            with m.If(flush_pending):
                m.d.comb += push.eq(1)
                m.d.sync += [flush_pending.eq(0), rx_ptr.eq(rx_ptr + 1), x_fresh.eq(1)]
            with m.Elif(r_fire):
                m.d.comb += push.eq((bus.rresp == RESP_OKAY) & ~(x_fresh & xe.e))
                m.d.sync += [
                    prev.eq(bus.rdata),
                    x_left_q.eq(x_left - 1), x_addr_q.eq(x_addr + 1), x_fresh.eq(0),
                ]
                with m.If(x_left == 1):
                    with m.If(xe.flush):
                        m.d.sync += flush_pending.eq(1)
                    with m.Else():
                        m.d.sync += [rx_ptr.eq(rx_ptr + 1), x_fresh.eq(1)]
            with m.Elif(x_skip):
                m.d.sync += rx_ptr.eq(rx_ptr + 1)

        # ------------------------------------------------------------ B queue
        bq_last = Array(Signal(name=f"bq_last{i}") for i in range(Q))
        bq_nob = Array(Signal(name=f"bq_nob{i}") for i in range(Q))
        bq_addr = Array(Signal(AW, name=f"bq_addr{i}") for i in range(Q))
        bq_wp = Signal(qib + 1)
        bq_rp = Signal(qib + 1)
        bq_room = Signal()
        bq_ne = Signal()
        m.d.comb += [bq_room.eq((bq_wp - bq_rp)[:qib + 1] != Q), bq_ne.eq(bq_wp != bq_rp)]

        def bq_index(p):
            return p[:qib] if qib else Const(0, 1)

        bq_push = Signal()
        bq_push_last = Signal()
        bq_push_nob = Signal()
        bq_push_addr = Signal(AW)
        with m.If(bq_push):
            m.d.sync += [
                bq_last[bq_index(bq_wp)].eq(bq_push_last),
                bq_nob[bq_index(bq_wp)].eq(bq_push_nob),
                bq_addr[bq_index(bq_wp)].eq(bq_push_addr),
                bq_wp.eq(bq_wp + 1),
            ]

        # ------------------------------------------------------------ AW issuer
        ae = entry(aw_ptr)
        a_has = Signal()
        m.d.comb += a_has.eq(aw_ptr != wr_ptr)
        aw = BurstWalk("a", ae.dst[lb:], ae.wbeats)
        a_fresh, a_addr, a_n, a_last = aw.fresh, aw.addr, aw.n, aw.last
        a_scope = Signal()
        m.d.comb += a_scope.eq(in_scope(aw_ptr))
        aw_hold = Signal()
        a_can = Signal()
        a_zero = Signal()
        m.d.comb += [
            # (a beat being pushed now counts: the burst's data is complete at this edge)
            a_can.eq(a_has & ~ae.zero & (ae.fill | (avail + push >= a_n)) & bq_room & ~a_scope),
            a_zero.eq(a_has & ae.zero & bq_room & ~a_scope),
        ]
        aw_fire = Signal()
        m.d.comb += [
            bus.awvalid.eq(aw_hold | a_can),
            bus.awaddr.eq(Cat(Const(0, lb), a_addr)),
            bus.awlen.eq(a_n - 1),
            bus.awsize.eq(lb),
            bus.awburst.eq(BURST_INCR),
            bus.awid.eq(self.write_id),
            aw_fire.eq(bus.awvalid & bus.awready),
        ]
        m.d.sync += aw_hold.eq(bus.awvalid & ~bus.awready)
        with m.If(aw_fire):
            m.d.comb += [
                bq_push.eq(1), bq_push_last.eq(a_last), bq_push_nob.eq(0),
                bq_push_addr.eq(Mux(a_fresh, ae.dst, Cat(Const(0, lb), a_addr))),
            ]
            m.d.sync += aw.step
            with m.If(a_last):
                m.d.sync += [aw_ptr.eq(aw_ptr + 1), a_fresh.eq(1)]
        with m.Elif(a_zero):
            m.d.comb += [bq_push.eq(1), bq_push_last.eq(1), bq_push_nob.eq(1)]
            m.d.sync += aw_ptr.eq(aw_ptr + 1)

        # ------------------------------------------------------------ W stream
        we = entry(wd_ptr)
        w_has = Signal()
        m.d.comb += w_has.eq(wd_ptr != wr_ptr)
        w_fresh = Signal(init=1)
        w_left_q = Signal(cw)
        w_idx_q = Signal(max(bnd_bits, 1))
        w_left = Signal(cw)
        w_idx = Signal(max(bnd_bits, 1))
        m.d.comb += w_left.eq(Mux(w_fresh, we.wbeats, w_left_q))
        if bnd_bits:
            m.d.comb += w_idx.eq(Mux(w_fresh, we.dst[lb:lb + bnd_bits], w_idx_q))
        owed = Signal(range(Q * MB + 1))  # W beats whose AW has gone out
        all_lanes = Const((1 << B) - 1, B)
        first_mask = Signal(B)
        last_mask = Signal(B)
        last_shift = Signal(lb)
        m.d.comb += [
            last_shift.eq(B - 1 - we.end_lane),
            first_mask.eq((all_lanes << we.dst[:lb])[:B]),
            last_mask.eq(all_lanes >> last_shift),
        ]
        w_lastbeat = Signal()
        m.d.comb += w_lastbeat.eq(w_left == 1)
        w_fire = Signal()
        m.d.comb += [
            bus.wvalid.eq(w_has & ~we.zero & (owed != 0) & (we.fill | (level != 0))),
            bus.wdata.eq(Mux(we.fill, we.src[:32].replicate(B // 4), f_rp.data)),
            bus.wstrb.eq(Mux(w_fresh, first_mask, all_lanes) & Mux(w_lastbeat, last_mask, all_lanes)),
            bus.wlast.eq(w_lastbeat | ((w_idx == bnd_beats - 1) if bnd_bits else 1)),
            w_fire.eq(bus.wvalid & bus.wready),
            pop.eq(w_fire & ~we.fill),
        ]
        with m.If(w_fire):
            m.d.sync += [w_left_q.eq(w_left - 1), w_idx_q.eq(w_idx + 1), w_fresh.eq(0)]
            with m.If(w_lastbeat):
                m.d.sync += [wd_ptr.eq(wd_ptr + 1), w_fresh.eq(1)]
        with m.Elif(w_has & we.zero):
            m.d.sync += wd_ptr.eq(wd_ptr + 1)

        m.d.sync += [
            owed.eq(owed + Mux(aw_fire, a_n, 0) - w_fire),
            avail.eq(avail + push - Mux(aw_fire & ~ae.fill, a_n, 0)),
            res.eq(res + Mux(ar_fire, r_res, 0) - pop),
        ]

        # ------------------------------------------------------------ completion
        bh = bq_index(bq_rp)
        bh_nob = Signal()
        bh_last = Signal()
        m.d.comb += [bh_nob.eq(bq_nob[bh]), bh_last.eq(bq_last[bh])]
        m.d.comb += bus.bready.eq(bq_ne & ~bh_nob)
        b_fire = Signal()
        m.d.comb += b_fire.eq(bus.bvalid & bus.bready)
        head_scoped = Signal()  # the oldest command is the failing one: its end is reported below
        m.d.comb += head_scoped.eq(aborting & (done_ptr == abort_ptr))
        b_err = Signal()
        m.d.comb += b_err.eq(b_fire & (bus.bresp != RESP_OKAY) & ~head_scoped)
        nob_pop = Signal()
        m.d.comb += nob_pop.eq(bq_ne & bh_nob)
        with m.If(b_fire | nob_pop):
            m.d.sync += bq_rp.eq(bq_rp + 1)
        done_ok = Signal()
        m.d.comb += done_ok.eq(((b_fire & bh_last & ~b_err) | nob_pop) & ~head_scoped)
        with m.If(done_ok):
            m.d.comb += self.done.eq(1)
            m.d.sync += done_ptr.eq(done_ptr + 1)

        # First error: a write error belongs to the oldest command, so it wins over a
        # read error of the same cycle and over an earlier-latched read error.
        with m.If(b_err):
            m.d.sync += [aborting.eq(1), abort_ptr.eq(done_ptr), err_resp.eq(bus.bresp),
                         err_addr.eq(bq_addr[bh])]
        with m.Elif(r_err):
            m.d.sync += [aborting.eq(1), abort_ptr.eq(rx_ptr), err_resp.eq(bus.rresp),
                         err_addr.eq(Mux(x_fresh, xe.src, Cat(Const(0, lb), x_addr)))]

        # abort (soft reset): everything queued is in scope and goes without a `done`.
        silent = Signal()
        with m.If(self.abort):
            m.d.sync += [aborting.eq(1), abort_ptr.eq(done_ptr), silent.eq(1)]

        drained = Signal()
        m.d.comb += drained.eq((ar_out == 0) & ~bus.arvalid & ~bus.awvalid & (owed == 0) & ~bq_ne)
        reporting = Signal()
        m.d.comb += reporting.eq(head_scoped & drained)
        with m.If(reporting & ~self.abort):
            with m.If(~silent):
                m.d.comb += [self.done.eq(1), self.resp.eq(err_resp), self.err_addr.eq(err_addr)]
            m.d.sync += [done_ptr.eq(done_ptr + 1), abort_ptr.eq(abort_ptr + 1)]
            # (done_ptr + 1 is one bit wider than the pointers: compare it at their width,
            # or a queue whose write pointer has wrapped to 0 would never finish reporting)
            with m.If(silent | ((done_ptr + 1)[:cpw] == wr_ptr)):
                # Everything reported: back to a clean, empty pipeline.
                m.d.sync += [
                    aborting.eq(0), silent.eq(0), done_ptr.eq(wr_ptr),
                    rd_ptr.eq(wr_ptr), rx_ptr.eq(wr_ptr), aw_ptr.eq(wr_ptr), wd_ptr.eq(wr_ptr),
                    r_fresh.eq(1), x_fresh.eq(1), a_fresh.eq(1), w_fresh.eq(1),
                    flush_pending.eq(0),
                    level.eq(0), res.eq(0), avail.eq(0), f_rd.eq(f_wr),
                ]

        m.d.comb += [
            self.busy.eq((wr_ptr != done_ptr) | aborting),
            self.idle.eq(~self.busy),
            self.perf_busy.eq(self.busy),
            self.perf_rd_bytes.eq(Mux(r_fire, B, 0)),
            self.perf_wr_bytes.eq(Mux(w_fire, sum(bus.wstrb[i] for i in range(B)), 0)),
        ]
        return m
