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
    # The burst on offer (AWVALID) is held in registers loaded at its issue, with its queue
    # entries' fields, and the walk steps to the next burst at the issue, not at AWREADY: so
    # AWREADY, which comes from the memory mux's arbitration, drives only AWVALID's clear,
    # the queues' write enables and the command's end, not the walk's 40-odd enables (the
    # top's short endpoints `sdma_dma.a_left`, `a_off`, `a_n`, 10.2-10.6 ns). AWADDR and
    # AWLEN are registers, as the issue's next burst waits for the fire (`~aw_valid`).
    aw_addr_r = Signal.like(aw.addr, name="aw_addr_r")
    aw_len_r = Signal(mbw, name="aw_len_r")
    aw_last_r = Signal(name="aw_last_r")
    aw_first_r = Signal(name="aw_first_r")
    aw_bytes_r = Signal(range(bnd_beats * B + 1), name="aw_bytes_r")
    aw_blane_r = Signal(lb, name="aw_blane_r")  # the first byte's lane, for B's address
    # a copy's burst waits for its data; a fill's goes at once
    # (avail >= n as the borrow of avail − n, the chain the count's next value takes too)
    avail_ge = Signal()
    m.d.comb += avail_ge.eq(~(avail - aw.n)[-1])
    m.d.comb += a_issue.eq(a_act & ~aw_valid & (a_fill | avail_ge) & bq_room & ~a_scope)
    aw_fire = Signal()
    m.d.comb += [
        bus.awvalid.eq(aw_valid),
        bus.awaddr.eq(Cat(Const(0, lb), aw_addr_r)),
        bus.awlen.eq(aw_len_r),
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
        m.d.sync += [aw_valid.eq(1), aw_addr_r.eq(aw.addr), aw_len_r.eq(aw.n - 1), aw_last_r.eq(aw.last),
                     aw_first_r.eq(a_first), aw_blane_r.eq(Mux(a_first, a_lane, 0)),
                     aw_bytes_r.eq(Cat(Const(0, lb), aw.n) - Mux(a_first, a_lane, 0) -
                                   Mux(aw.last, B - 1 - a_end_lane, 0)),
                     a_first.eq(0)]
        with m.If(~aw.last):  # (the command's last burst stays in the walk until its fire ends a_act)
            aw.step()
    with m.If(aw_fire):
        m.d.comb += [
            bq.w.en.eq(1), bq.w.data.last.eq(aw_last_r), bq.w.data.nob.eq(0),
            bq.w.data.addr.eq(Cat(aw_blane_r, aw_addr_r)),
            bq.w.data.bytes.eq(aw_bytes_r),
            wq.w.en.eq(1), wq.w.data.len.eq(aw_len_r), wq.w.data.first.eq(aw_first_r),
            wq.w.data.last.eq(aw_last_r), wq.w.data.lane.eq(a_lane), wq.w.data.end_lane.eq(a_end_lane),
            wq.w.data.fill.eq(a_fill), wq.w.data.pattern.eq(a_pattern),
        ]
        m.d.sync += aw_valid.eq(0)
        with m.If(aw_last_r):
            m.d.sync += [a_act.eq(0), aw_ptr.eq(aw_ptr + 1)]
    # The counts' next values are worked out from registers both ways, and the handshakes
    # only pick: `push` (an R beat into the FIFO) and `pop` (a W beat out of it) come from the
    # memory's R and W channels and `ar_fire` from ARREADY, which in the top run through the
    # memory mux (through the adders they were the top's short endpoints `dma.res` and
    # `dma.avail`, 10.3-11.1 ns)
    # (avail's with the issue's claim too: the issue, one of whose terms is the sign of
    # avail − n, picks last)
    avail_n, avail_n1, avail_1 = (Signal.like(avail, name=n) for n in ("avail_n", "avail_n1", "avail_1"))
    m.d.comb += [avail_n.eq(avail - aw.n), avail_n1.eq((avail + 1) - aw.n), avail_1.eq(avail + 1)]
    res_r, res_r1, res_1 = (Signal.like(res, name=n) for n in ("res_r", "res_r1", "res_1"))
    m.d.comb += [res_r.eq(res + r_res), res_r1.eq((res - 1) + r_res), res_1.eq(res - 1)]
    m.d.sync += [
        avail.eq(Mux(a_issue & ~a_fill, Mux(push, avail_n1, avail_n), Mux(push, avail_1, avail))),
        res.eq(Mux(ar_fire, Mux(pop, res_r1, res_r), Mux(pop, res_1, res))),
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
