"""The DMA engine's write side: the AW issuer and the W stream.

- AW issuer: a write burst (the boundaries of burst.py, on the destination) is issued
  only when all its beats are in the data FIFO (fills: at once), so the W channel, which
  a bus mux locks to one master per burst, is never held waiting for read data. Each
  burst leaves an entry for the W stream (wq: length, which byte lanes its first and
  last beats carry, a fill's pattern) and one for B (bq, read by completion.py: the
  burst's first byte, for an error, and its byte count, for the counter). A
  command's first AW waits for the earlier commands' bursts, which wait for their data,
  so its writes never overtake an earlier command's reads.
- W stream: FIFO beats (or the fill pattern) with byte strobes for the partial first
  and last beats; WDATA comes from the FIFO's registered head.

Fill: `cmd_src[31:0]` is the pattern; the byte at address a is its byte (a mod 4).
Writes use one ID (`write_id`), so B comes back in order. With `vm`, each write carries
the command's VMID in AWUSER (access DMA_WRITE)."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data

from spec.vm import Access

from ..bus import BURST_INCR
from ..mmu import req_user
from .burst import BurstWalk
from .queue import LutramQueue


def aw_issuer(m: Module, dma, s) -> None:
    """Write bursts for each command of qw, once their data is in the FIFO."""
    bus, AW, B, Q, lb, mbw, qpw, wr_ptr, aw_ptr = s.take("bus AW B Q lb mbw qpw wr_ptr aw_ptr")
    bnd_beats = s.bnd_beats
    in_scope, qw, ar_fire, r_res = s.take("in_scope qw ar_fire r_res")
    avail, res, push, pop = s.take("avail res push pop")
    # `bytes`: what the burst writes, counted when its B answers OKAY (completion.py)
    bq_layout = data.StructLayout({"addr": AW, "last": 1, "nob": 1, "bytes": range(bnd_beats * B + 1)})
    wq_layout = data.StructLayout({"len": mbw, "first": 1, "last": 1, "lane": lb, "end_lane": lb,
                                   "fill": 1, "pattern": 32})
    bq_wp = Signal(qpw)
    bq_rp = Signal(qpw)
    wq_wp = Signal(qpw)
    wq_rp = Signal(qpw)
    bq = LutramQueue(m, "bq", bq_layout, Q, bq_wp, bq_rp)
    wq = LutramQueue(m, "wq", wq_layout, Q, wq_wp, wq_rp)
    bq_room = Signal()
    bq_ne = Signal()
    wq_ne = Signal()
    m.d.comb += [bq_room.eq((bq_wp - bq_rp)[:qpw] != Q), bq_ne.eq(bq_wp != bq_rp), wq_ne.eq(wq_wp != wq_rp)]
    m.d.sync += [bq_wp.eq(bq_wp + bq.w.en), wq_wp.eq(wq_wp + wq.w.en)]

    qwh = qw.head
    a_act = Signal()
    qw.follow(a_act)
    a_first = Signal()
    a_lane = Signal(lb)
    a_end_lane = Signal(lb)
    a_fill = Signal()
    a_pattern = Signal(32)
    a_vmid = Signal(4)
    aw = BurstWalk(m, s, "a")
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
        bus.awid.eq(dma.write_id),
        aw_fire.eq(bus.awvalid & bus.awready),
    ]
    if dma.vm:
        m.d.comb += bus.awuser.eq(req_user(a_vmid, Access.DMA_WRITE))
    with m.If(~a_act & (aw_ptr != wr_ptr) & ~a_scope & bq_room):
        with m.If(qwh.zero):
            # a zero-length command: no bursts, but a B queue entry keeps it in order
            m.d.comb += [bq.w.en.eq(1), bq.w.data.last.eq(1), bq.w.data.nob.eq(1)]
            m.d.sync += aw_ptr.eq(aw_ptr + 1)
        with m.Else():
            m.d.sync += [a_act.eq(1), a_first.eq(1), a_lane.eq(qwh.lane), a_end_lane.eq(qwh.end_lane),
                         a_fill.eq(qwh.fill), a_pattern.eq(qwh.pattern)]
            if dma.vm:
                m.d.sync += a_vmid.eq(qwh.vmid)
            aw.load(qwh.addr, qwh)
    with m.If(a_issue):
        m.d.sync += aw_valid.eq(1)
    with m.If(aw_fire):
        m.d.comb += [
            bq.w.en.eq(1), bq.w.data.last.eq(aw.last), bq.w.data.nob.eq(0),
            bq.w.data.addr.eq(Cat(Mux(a_first, a_lane, 0), aw.addr)),
            bq.w.data.bytes.eq(Cat(Const(0, lb), aw.n) - Mux(a_first, a_lane, 0) -
                               Mux(aw.last, B - 1 - a_end_lane, 0)),
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
    s.give(a_act=a_act, aw_valid=aw_valid, bq=bq, bq_ne=bq_ne, bq_rp=bq_rp, wq=wq, wq_ne=wq_ne,
           wq_rp=wq_rp)


def w_stream(m: Module, dma, s) -> None:
    """W beats for each burst of wq, with the first and last beats' strobes."""
    bus, B, lb, mbw, f_hv, f_rp, pop, wq = s.take("bus B lb mbw f_hv f_rp pop wq")
    wq_ne, wq_rp = s.take("wq_ne wq_rp")
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
    s.give(w_beat=w_beat)
