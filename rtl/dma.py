"""DMA engine: copies and fills of any length and alignment over an AXI4 master.

Each accepted command is written, with what each stage needs worked out once, into
three small queues (LUTRAM), one per stage that walks the commands in order. The
stages run as a pipeline, so the next command's reads start while the last one is
still writing (back-to-back copies keep the bus busy):

    cmd ─┬─► qA ─► AR issuer ─► memory ─► R realigner ─► data FIFO (BRAM) ─► W stream
         ├─► qX ───────────────────────────────┘              │ (W follows AW)  ▲
         └─► qW ─► AW issuer ◄── beats ready ─────────────────┘                 │
                    └──► one entry per burst ─► wq ────────────────────────────┘
                    └──► one entry per burst ─► bq ─► B: done, in command order

- AR issuer: INCR bursts of up to `max_burst_beats` at bus-aligned addresses, split at
  min(max_burst_beats · bus bytes, 4 KiB)-aligned boundaries (so they never cross
  4 KiB), at most `max_reads` in flight. A burst is issued only when the data FIFO has
  room reserved for every beat it will produce, so R is always accepted at full rate.
  The first burst of a command is worked out when the command is loaded; after it every
  burst starts on a boundary, so the next one is a subtraction of the boundary size.
- R realigner: shifts source bytes into destination lanes (any src/dst alignment) as R
  beats arrive, keeping the previous beat; an output beat is bytes [sh, sh + B) of
  {this beat, previous beat}. When the destination needs one beat more than the
  source gives, a final "flush" beat takes a cycle with RREADY low.
- AW issuer: a write burst (same boundaries on the destination) is issued only when all
  its beats are in the FIFO (fills: at once), so the W channel, which a bus mux locks to
  one master per burst, is never held waiting for read data. Each burst leaves an entry
  for the W stream (length, which byte lanes its first and last beats carry, a fill's
  pattern) and one for B.
- W stream: FIFO beats (or the fill pattern) with byte strobes for the partial first
  and last beats; the FIFO (block RAM) has a registered head, so WDATA comes from a
  register.
- B queue: one entry per write burst (and one per zero-length command, which needs no
  B); `done` pulses when a command's last burst is answered.

Every AXI VALID and address comes from a register; no queue is read through a
multiplexer of registers. Reads and writes use one ID each (`read_id`, `write_id`), so
both come back in order.

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

With `vm` (behind the MMU, rtl/mmu.py): each command carries its VMID (`cmd_vmid`),
which goes out with its reads and writes in AxUSER (access DMA_READ / DMA_WRITE); the
first error's RUSER/BUSER (a fault's cause and level) comes with it as `err_user`, and
`err_write` says whether a write (B) or a read (R) answered it.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from spec.vm import Access

from .bus import AXI4Signature, BURST_INCR, RESP_OKAY
from .mmu import REQ_USER, RESP_USER, req_user

BYTES_WIDTH = 21  # DMA_DATA BYTE_COUNT


def _pow2(v: int) -> bool:
    return isinstance(v, int) and v >= 1 and v & (v - 1) == 0


class _Queue:
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
                 cmd_depth: int = 4, bytes_width: int = BYTES_WIDTH, vm: bool = False):
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
        self.vm = vm
        nb = data_width // 8
        vm_ports = {"cmd_vmid": In(4), "err_user": Out(RESP_USER), "err_write": Out(1)} if vm else {}
        super().__init__({
            "cmd_valid": In(1), "cmd_ready": Out(1),
            "cmd_src": In(addr_width), "cmd_dst": In(addr_width), "cmd_bytes": In(bytes_width),
            "cmd_fill": In(1), "cmd_raw_wait": In(1),
            "abort": In(1),
            "done": Out(1), "resp": Out(2), "err_addr": Out(addr_width),
            "busy": Out(1), "idle": Out(1),
            "perf_rd_bytes": Out(range(nb + 1)), "perf_wr_bytes": Out(range(nb + 1)),
            "perf_busy": Out(1),
            "bus": Out(AXI4Signature(addr_width, data_width, id_width,
                                     REQ_USER.size if vm else 0, RESP_USER.size if vm else 0)),
        } | vm_ports)

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
        cpw = exact_log2(D) + 1          # command pointers carry a wrap bit
        FD = self.fifo_depth
        fw = exact_log2(FD)
        MB = self.max_burst_beats
        mbw = max(1, exact_log2(MB))
        Q = self.max_writes
        qpw = exact_log2(Q) + 1

        # ------------------------------------------------------------ command pointers
        wr_ptr = Signal(cpw)    # commands accepted
        rd_ptr = Signal(cpw)    # AR issuer
        rx_ptr = Signal(cpw)    # R realigner / filler
        aw_ptr = Signal(cpw)    # AW issuer
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
        push_cmd = Signal()
        m.d.comb += push_cmd.eq(self.cmd_valid & self.cmd_ready)
        with m.If(push_cmd):
            m.d.sync += wr_ptr.eq(wr_ptr + 1)

        # ------------------------------------------------------------ the command, worked out once
        # With m = bytes − 1, the last source beat is (s_off + m) >> lb, the last destination
        # beat (d_off + m) >> lb: the two counts differ only by the carries out of the lanes.
        s_off = self.cmd_src[:lb]
        d_off = self.cmd_dst[:lb]
        nm1 = Signal(self.bytes_width)
        cs = Signal()
        cd = Signal()
        end_lane = Signal(lb)
        m.d.comb += [
            nm1.eq(self.cmd_bytes - 1),
            cs.eq((s_off + nm1[:lb])[lb]) if lb else cs.eq(0),
            Cat(end_lane, cd).eq(d_off + nm1[:lb]),
        ]
        rlast = Signal(cw)  # source beats − 1
        wlast = Signal(cw)  # destination beats − 1
        m.d.comb += [rlast.eq(nm1[lb:] + cs), wlast.eq(nm1[lb:] + cd)]
        zero = self.cmd_bytes == 0
        e = s_off > d_off   # the first source beat only primes the realigner

        vmid_field = {"vmid": 4} if self.vm else {}
        qa_layout = data.StructLayout({"addr": AW - lb, "last": cw, "skip": 1, "raw": 1, "up": 1, "dn": 1}
                                      | vmid_field)
        qx_layout = data.StructLayout({"src": AW, "last": cw, "sh": lb + 1, "e": 1, "flush": 1, "skip": 1})
        qw_layout = data.StructLayout({"addr": AW - lb, "last": cw, "zero": 1, "lane": lb, "end_lane": lb,
                                       "fill": 1, "pattern": 32} | vmid_field)
        qa = _Queue(m, "qa", qa_layout, D, wr_ptr, rd_ptr)
        qx = _Queue(m, "qx", qx_layout, D, wr_ptr, rx_ptr)
        qw = _Queue(m, "qw", qw_layout, D, wr_ptr, aw_ptr)
        for q in (qa, qx, qw):
            m.d.comb += q.w.en.eq(push_cmd)
        m.d.comb += [
            qa.w.data.addr.eq(self.cmd_src[lb:]), qa.w.data.last.eq(rlast),
            qa.w.data.skip.eq(self.cmd_fill | zero), qa.w.data.raw.eq(self.cmd_raw_wait),
            qa.w.data.up.eq(cd & ~cs), qa.w.data.dn.eq(cs & ~cd),

            qx.w.data.src.eq(self.cmd_src), qx.w.data.last.eq(rlast),
            qx.w.data.sh.eq(Mux(s_off == d_off, B, (s_off - d_off)[:lb])), qx.w.data.e.eq(e),
            qx.w.data.flush.eq(Mux(e, cd == cs, cd & ~cs)), qx.w.data.skip.eq(self.cmd_fill | zero),

            qw.w.data.addr.eq(self.cmd_dst[lb:]), qw.w.data.last.eq(wlast), qw.w.data.zero.eq(zero),
            qw.w.data.lane.eq(d_off), qw.w.data.end_lane.eq(end_lane),
            qw.w.data.fill.eq(self.cmd_fill), qw.w.data.pattern.eq(self.cmd_src[:32]),
        ]
        if self.vm:
            m.d.comb += [qa.w.data.vmid.eq(self.cmd_vmid), qw.w.data.vmid.eq(self.cmd_vmid)]

        # ------------------------------------------------------------ data FIFO
        # Block RAM with a registered head (`f_hv`): WDATA comes straight from the RAM's
        # output register, and an entry is read the cycle after it was written.
        m.submodules.fifo = fifo = Memory(shape=unsigned(DW), depth=FD, init=[])
        f_wp = fifo.write_port()
        f_rp = fifo.read_port(transparent_for=())
        f_wr = Signal(fw + 1)
        f_rd = Signal(fw + 1)
        f_hv = Signal()            # f_rp.data holds the head
        res = Signal(fw + 1)       # beats reserved by issued reads, not yet popped
        avail = Signal(fw + 1)     # beats in the FIFO no AW has claimed yet
        push = Signal()
        push_data = Signal(DW)
        pop = Signal()
        f_load = Signal()
        # (pop, from the W handshake, comes late: it only picks between values worked out
        # before it)
        f_ne = Signal()
        f_rd1 = Signal(fw + 1)
        m.d.comb += [
            f_wp.addr.eq(f_wr[:fw]), f_wp.data.eq(push_data), f_wp.en.eq(push),
            f_ne.eq(f_rd != f_wr), f_rd1.eq(f_rd + 1),
            f_load.eq(Mux(pop, f_ne, f_ne & ~f_hv)),
            f_rp.addr.eq(f_rd[:fw]), f_rp.en.eq(f_load),
        ]
        m.d.sync += [f_wr.eq(f_wr + push), f_rd.eq(Mux(f_load, f_rd1, f_rd))]
        with m.If(f_load):
            m.d.sync += f_hv.eq(1)
        with m.Elif(pop):
            m.d.sync += f_hv.eq(0)
        # Room for one more burst, whatever this cycle adds.
        space_ok = Signal()
        m.d.comb += space_ok.eq(res <= FD - MB - 1)

        class Walk:
            """A command cut into bursts (AR or AW): the current burst's address (the
            command's start plus an offset, so loading a command needs no multiplexer),
            length and whether it is the command's last, and `left`, the beats after it − 1,
            plus bnd_beats (so the first burst needs one addition and no subtraction)."""

            def __init__(self, prefix):
                self.start = Signal(AW - lb, name=f"{prefix}_start")
                self.off = Signal(cw, name=f"{prefix}_off")
                self.addr = Signal(AW - lb, name=f"{prefix}_addr")
                m.d.comb += self.addr.eq(self.start + self.off)
                self.n = Signal(range(MB + 1), name=f"{prefix}_n")
                self.last = Signal(name=f"{prefix}_last")
                self.left = Signal(cw + 1, name=f"{prefix}_left")

            def load(self, addr, last):
                """The first burst: from `addr` to its boundary, at most `last` + 1 beats."""
                lo = addr[:bnd_bits] if bnd_bits else Const(0, 1)
                total = Signal(cw + 1, name=f"{self.addr.name}_total")
                m.d.comb += total.eq(last + lo)  # the last beat, counted from the boundary
                short = total[bnd_bits:] == 0  # it lies before the boundary: one burst does it
                m.d.sync += [self.start.eq(addr), self.off.eq(0), self.last.eq(short), self.left.eq(total),
                             self.n.eq(Mux(short, last[:bnd_bits + 1] + 1, bnd_beats - lo))]

            def step(self):
                """After a burst: the next starts on a boundary, so it is bnd_beats long
                unless fewer are left."""
                hi = self.left[bnd_bits:]
                short = hi == 1
                m.d.sync += [self.off.eq(self.off + self.n), self.last.eq(short),
                             self.n.eq(Mux(short, self.left[:bnd_bits] + 1, bnd_beats)),
                             self.left[bnd_bits:].eq(hi - 1)]

        # ------------------------------------------------------------ AR issuer
        qah = qa.head
        r_act = Signal()
        r_vmid = Signal(4)
        r_raw = Signal()
        r_up = Signal()
        r_dn = Signal()
        rw = Walk("r")
        ar_valid = Signal()
        ar_out = Signal(range(self.max_reads + 1))  # bursts issued, not yet fully received
        r_fire = Signal()
        rlast_fire = Signal()
        m.d.comb += rlast_fire.eq(r_fire & bus.rlast)
        r_res = Signal(range(MB + 2))  # FIFO beats this burst will produce, at most
        m.d.comb += r_res.eq(rw.n + (rw.last & r_up) - (rw.last & r_dn))
        # (the FIFO space and the read count are taken when the burst is accepted: with
        # one burst offered at a time, space_ok's margin covers it until then)
        r_room = Signal()
        m.d.comb += r_room.eq(space_ok & (ar_out < self.max_reads))
        r_issue = Signal()
        m.d.comb += r_issue.eq(r_act & ~ar_valid & r_room & ~aborting & ~(r_raw & (done_ptr != rd_ptr)))
        ar_fire = Signal()
        m.d.comb += [
            bus.arvalid.eq(ar_valid),
            bus.araddr.eq(Cat(Const(0, lb), rw.addr)),
            bus.arlen.eq(rw.n - 1),
            bus.arsize.eq(lb),
            bus.arburst.eq(BURST_INCR),
            bus.arid.eq(self.read_id),
            ar_fire.eq(bus.arvalid & bus.arready),
        ]
        if self.vm:
            m.d.comb += bus.aruser.eq(req_user(r_vmid, Access.DMA_READ))
        with m.If(~r_act & (rd_ptr != wr_ptr) & ~aborting):
            with m.If(qah.skip):
                m.d.sync += rd_ptr.eq(rd_ptr + 1)
            with m.Else():
                m.d.sync += [r_act.eq(1), r_raw.eq(qah.raw), r_up.eq(qah.up), r_dn.eq(qah.dn)]
                if self.vm:
                    m.d.sync += r_vmid.eq(qah.vmid)
                rw.load(qah.addr, qah.last)
                # the first burst is offered at once when nothing holds it back
                with m.If(r_room & ~(qah.raw & (done_ptr != rd_ptr))):
                    m.d.sync += ar_valid.eq(1)
        with m.If(r_issue):
            m.d.sync += ar_valid.eq(1)
        with m.If(ar_fire):
            m.d.sync += ar_valid.eq(0)
            rw.step()
            with m.If(rw.last):
                m.d.sync += [r_act.eq(0), rd_ptr.eq(rd_ptr + 1)]
        m.d.sync += ar_out.eq(ar_out + ar_fire - rlast_fire)

        # ------------------------------------------------------------ R realigner
        qxh = qx.head
        x_act = Signal()
        x = Signal(qx_layout)          # the command being realigned
        x_k = Signal(cw)               # beats taken so far
        x_first = Signal()
        prev = Signal(DW)
        flush_pending = Signal()
        with m.If(~x_act & (rx_ptr != wr_ptr) & ~aborting):
            with m.If(qxh.skip):
                m.d.sync += rx_ptr.eq(rx_ptr + 1)
            with m.Else():
                m.d.sync += [x_act.eq(1), x.eq(qxh), x_k.eq(0), x_first.eq(1)]
        x_copy = Signal()
        m.d.comb += x_copy.eq(x_act & ~flush_pending)
        m.d.comb += [bus.rready.eq(aborting | x_copy), r_fire.eq(bus.rvalid & bus.rready)]
        # (in the flush beat the lanes taken from RDATA lie past the copy's end: the last
        # beat's strobes mask them, so whatever RDATA holds then is never written)
        m.d.comb += push_data.eq(Cat(prev, bus.rdata).bit_select(Cat(Const(0, 3), x.sh), DW))
        x_last = Signal()
        m.d.comb += x_last.eq(x_k == x.last)
        r_err = Signal()
        m.d.comb += r_err.eq(r_fire & ~aborting & (bus.rresp != RESP_OKAY))

        def x_next():
            m.d.sync += [x_act.eq(0), rx_ptr.eq(rx_ptr + 1)]

        with m.If(~aborting):
            with m.If(flush_pending):
                m.d.comb += push.eq(1)
                m.d.sync += flush_pending.eq(0)
                x_next()
            with m.Elif(r_fire & x_copy):
                m.d.comb += push.eq((bus.rresp == RESP_OKAY) & ~(x_first & x.e))
                m.d.sync += [prev.eq(bus.rdata), x_k.eq(x_k + 1), x_first.eq(0)]
                with m.If(x_last):
                    with m.If(x.flush):
                        m.d.sync += flush_pending.eq(1)
                    with m.Else():
                        x_next()

        # ------------------------------------------------------------ AW issuer
        bq_layout = data.StructLayout({"addr": AW, "last": 1, "nob": 1})
        wq_layout = data.StructLayout({"len": mbw, "first": 1, "last": 1, "lane": lb, "end_lane": lb,
                                       "fill": 1, "pattern": 32})
        bq_wp = Signal(qpw)
        bq_rp = Signal(qpw)
        wq_wp = Signal(qpw)
        wq_rp = Signal(qpw)
        bq = _Queue(m, "bq", bq_layout, Q, bq_wp, bq_rp)
        wq = _Queue(m, "wq", wq_layout, Q, wq_wp, wq_rp)
        bq_room = Signal()
        bq_ne = Signal()
        wq_ne = Signal()
        m.d.comb += [bq_room.eq((bq_wp - bq_rp)[:qpw] != Q), bq_ne.eq(bq_wp != bq_rp), wq_ne.eq(wq_wp != wq_rp)]
        m.d.sync += [bq_wp.eq(bq_wp + bq.w.en), wq_wp.eq(wq_wp + wq.w.en)]

        qwh = qw.head
        a_act = Signal()
        a_first = Signal()
        a_lane = Signal(lb)
        a_end_lane = Signal(lb)
        a_fill = Signal()
        a_pattern = Signal(32)
        a_vmid = Signal(4)
        aw = Walk("a")
        aw_valid = Signal()
        a_scope = Signal()
        m.d.comb += a_scope.eq(in_scope(aw_ptr))
        a_issue = Signal()
        # a copy's burst waits for its data; a fill's goes at once
        m.d.comb += a_issue.eq(a_act & ~aw_valid & (a_fill | (avail >= aw.n)) & bq_room & ~a_scope)
        aw_fire = Signal()
        m.d.comb += [
            bus.awvalid.eq(aw_valid),
            bus.awaddr.eq(Cat(Const(0, lb), aw.addr)),
            bus.awlen.eq(aw.n - 1),
            bus.awsize.eq(lb),
            bus.awburst.eq(BURST_INCR),
            bus.awid.eq(self.write_id),
            aw_fire.eq(bus.awvalid & bus.awready),
        ]
        if self.vm:
            m.d.comb += bus.awuser.eq(req_user(a_vmid, Access.DMA_WRITE))
        with m.If(~a_act & (aw_ptr != wr_ptr) & ~a_scope & bq_room):
            with m.If(qwh.zero):
                # a zero-length command: no bursts, but a B queue entry keeps it in order
                m.d.comb += [bq.w.en.eq(1), bq.w.data.last.eq(1), bq.w.data.nob.eq(1)]
                m.d.sync += aw_ptr.eq(aw_ptr + 1)
            with m.Else():
                m.d.sync += [a_act.eq(1), a_first.eq(1), a_lane.eq(qwh.lane), a_end_lane.eq(qwh.end_lane),
                             a_fill.eq(qwh.fill), a_pattern.eq(qwh.pattern)]
                if self.vm:
                    m.d.sync += a_vmid.eq(qwh.vmid)
                aw.load(qwh.addr, qwh.last)
        with m.If(a_issue):
            m.d.sync += aw_valid.eq(1)
        with m.If(aw_fire):
            m.d.comb += [
                bq.w.en.eq(1), bq.w.data.last.eq(aw.last), bq.w.data.nob.eq(0),
                bq.w.data.addr.eq(Cat(Mux(a_first, a_lane, 0), aw.addr)),
                wq.w.en.eq(1), wq.w.data.len.eq(aw.n - 1), wq.w.data.first.eq(a_first),
                wq.w.data.last.eq(aw.last), wq.w.data.lane.eq(a_lane), wq.w.data.end_lane.eq(a_end_lane),
                wq.w.data.fill.eq(a_fill), wq.w.data.pattern.eq(a_pattern),
            ]
            m.d.sync += [aw_valid.eq(0), a_first.eq(0)]
            aw.step()
            with m.If(aw.last):
                m.d.sync += [a_act.eq(0), aw_ptr.eq(aw_ptr + 1)]
        m.d.sync += [
            avail.eq(avail + push - Mux(a_issue & ~a_fill, aw.n, 0)),
            res.eq(res + Mux(ar_fire, r_res, 0) - pop),
        ]

        # ------------------------------------------------------------ W stream
        wqh = wq.head
        w_beat = Signal(mbw)
        all_lanes = Const((1 << B) - 1, B)
        w_lastbeat = Signal()
        m.d.comb += w_lastbeat.eq(w_beat == wqh.len)
        first_mask = Signal(B)
        last_mask = Signal(B)
        last_shift = Signal(lb)
        m.d.comb += [
            last_shift.eq(B - 1 - wqh.end_lane),
            first_mask.eq((all_lanes << wqh.lane)[:B]),
            last_mask.eq(all_lanes >> last_shift),
        ]
        w_fire = Signal()
        m.d.comb += [
            bus.wvalid.eq(wq_ne & (wqh.fill | f_hv)),
            bus.wdata.eq(Mux(wqh.fill, wqh.pattern.replicate(B // 4), f_rp.data)),
            bus.wstrb.eq(Mux(wqh.first & (w_beat == 0), first_mask, all_lanes) &
                         Mux(wqh.last & w_lastbeat, last_mask, all_lanes)),
            bus.wlast.eq(w_lastbeat),
            w_fire.eq(bus.wvalid & bus.wready),
            pop.eq(w_fire & ~wqh.fill),
        ]
        with m.If(w_fire):
            m.d.sync += w_beat.eq(w_beat + 1)
            with m.If(w_lastbeat):
                m.d.sync += [w_beat.eq(0), wq_rp.eq(wq_rp + 1)]

        # ------------------------------------------------------------ completion
        bqh = bq.head
        m.d.comb += bus.bready.eq(bq_ne & ~bqh.nob)
        b_fire = Signal()
        m.d.comb += b_fire.eq(bus.bvalid & bus.bready)
        head_scoped = Signal()  # the oldest command is the failing one: its end is reported below
        m.d.comb += head_scoped.eq(aborting & (done_ptr == abort_ptr))
        b_err = Signal()
        m.d.comb += b_err.eq(b_fire & (bus.bresp != RESP_OKAY) & ~head_scoped)
        nob_pop = Signal()
        m.d.comb += nob_pop.eq(bq_ne & bqh.nob)
        with m.If(b_fire | nob_pop):
            m.d.sync += bq_rp.eq(bq_rp + 1)
        done_ok = Signal()
        m.d.comb += done_ok.eq(((b_fire & bqh.last & ~b_err) | nob_pop) & ~head_scoped)
        with m.If(done_ok):
            m.d.comb += self.done.eq(1)
            m.d.sync += done_ptr.eq(done_ptr + 1)

        # First error: a write error belongs to the oldest command, so it wins over a
        # read error of the same cycle and over an earlier-latched read error.
        err_user = Signal(RESP_USER)
        err_write = Signal()
        with m.If(b_err):
            m.d.sync += [aborting.eq(1), abort_ptr.eq(done_ptr), err_resp.eq(bus.bresp), err_addr.eq(bqh.addr)]
            if self.vm:
                m.d.sync += [err_user.eq(bus.buser), err_write.eq(1)]
        with m.Elif(r_err):
            m.d.sync += [aborting.eq(1), abort_ptr.eq(rx_ptr), err_resp.eq(bus.rresp),
                         # (the first beat: x_k is 0 and the copy starts at src's own lane)
                         err_addr.eq(Cat(Mux(x_first, x.src[:lb], 0), x.src[lb:] + x_k))]
            if self.vm:
                m.d.sync += [err_user.eq(bus.ruser), err_write.eq(0)]

        # abort (soft reset): everything queued is in scope and goes without a `done`.
        silent = Signal()
        with m.If(self.abort):
            m.d.sync += [aborting.eq(1), abort_ptr.eq(done_ptr), silent.eq(1)]

        drained = Signal()
        m.d.comb += drained.eq((ar_out == 0) & ~ar_valid & ~aw_valid & ~wq_ne & ~bq_ne)
        reporting = Signal()
        m.d.comb += reporting.eq(head_scoped & drained)
        with m.If(reporting & ~self.abort):
            with m.If(~silent):
                m.d.comb += [self.done.eq(1), self.resp.eq(err_resp), self.err_addr.eq(err_addr)]
                if self.vm:
                    m.d.comb += [self.err_user.eq(err_user), self.err_write.eq(err_write)]
            m.d.sync += [done_ptr.eq(done_ptr + 1), abort_ptr.eq(abort_ptr + 1)]
            # (done_ptr + 1 is one bit wider than the pointers: compare it at their width,
            # or a queue whose write pointer has wrapped to 0 would never finish reporting)
            with m.If(silent | ((done_ptr + 1)[:cpw] == wr_ptr)):
                # Everything reported: back to a clean, empty pipeline.
                m.d.sync += [
                    aborting.eq(0), silent.eq(0), done_ptr.eq(wr_ptr),
                    rd_ptr.eq(wr_ptr), rx_ptr.eq(wr_ptr), aw_ptr.eq(wr_ptr),
                    r_act.eq(0), x_act.eq(0), a_act.eq(0), flush_pending.eq(0),
                    res.eq(0), avail.eq(0), f_rd.eq(f_wr), f_hv.eq(0), w_beat.eq(0),
                ]

        m.d.comb += [
            self.busy.eq((wr_ptr != done_ptr) | aborting),
            self.idle.eq(~self.busy),
            self.perf_busy.eq(self.busy),
            self.perf_rd_bytes.eq(Mux(r_fire, B, 0)),
            self.perf_wr_bytes.eq(Mux(w_fire, sum(bus.wstrb[i] for i in range(B)), 0)),
        ]
        return m
