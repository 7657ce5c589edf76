"""The DMA engine's read side: the AR issuer and the R realigner.

- AR issuer: INCR bursts of up to `max_burst_beats` at bus-aligned addresses, split at
  the boundaries of burst.py, at most `max_reads` in flight. A burst is issued only when
  the data FIFO has room reserved for every beat it will produce, so R is always
  accepted at full rate. `cmd_raw_wait` holds a command's reads until every earlier
  command is done.
- R realigner: shifts source bytes into destination lanes (any src/dst alignment) as R
  beats arrive, keeping the previous beat; an output beat is bytes [sh, sh + B) of
  {this beat, previous beat}. When the destination needs one beat more than the
  source gives, a final "flush" beat takes a cycle with RREADY low.

Reads use one ID (`read_id`), so they come back in order. With `vm`, each read carries
the command's VMID in ARUSER (access DMA_READ)."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal

from spec.vm import Access

from ..bus import BURST_INCR, RESP_OKAY
from ..mmu import req_user
from .burst import BurstWalk


def ar_issuer(m: Module, dma, s) -> None:
    """Read bursts for each command of qa, offered from a register."""
    bus, MB, lb = s.take("bus MB lb")
    aborting, done_ptr, rd_ptr, wr_ptr, qa, space_ok = s.take("aborting done_ptr rd_ptr wr_ptr qa space_ok")
    qah = qa.head
    r_act = Signal()
    qa.follow(r_act)
    r_vmid = Signal(4)
    r_raw = Signal()
    r_up = Signal()
    r_dn = Signal()
    rw = BurstWalk(m, s, "r")
    ar_valid = Signal()
    ar_out = Signal(range(dma.max_reads + 1))  # bursts issued, not yet fully received
    r_fire = Signal()
    rlast_fire = Signal()
    m.d.comb += rlast_fire.eq(r_fire & bus.rlast)
    r_res = Signal(range(MB + 2))  # FIFO beats this burst will produce, at most
    m.d.comb += r_res.eq(rw.n + (rw.last & r_up) - (rw.last & r_dn))
    # (the FIFO space and the read count are taken when the burst is accepted: with
    # one burst offered at a time, space_ok's margin covers it until then)
    r_room = Signal()
    m.d.comb += r_room.eq(space_ok & (ar_out < dma.max_reads))
    r_issue = Signal()
    m.d.comb += r_issue.eq(r_act & ~ar_valid & r_room & ~aborting & ~(r_raw & (done_ptr != rd_ptr)))
    ar_fire = Signal()
    m.d.comb += [
        bus.arvalid.eq(ar_valid),
        bus.araddr.eq(Cat(Const(0, lb), rw.addr)),
        bus.arlen.eq(rw.n - 1),
        bus.arsize.eq(lb),
        bus.arburst.eq(BURST_INCR),
        bus.arid.eq(dma.read_id),
        ar_fire.eq(bus.arvalid & bus.arready),
    ]
    if dma.vm:
        m.d.comb += bus.aruser.eq(req_user(r_vmid, Access.DMA_READ))
    with m.If(~r_act & (rd_ptr != wr_ptr) & ~aborting):
        with m.If(qah.skip):
            m.d.sync += rd_ptr.eq(rd_ptr + 1)
        with m.Else():
            m.d.sync += [r_act.eq(1), r_raw.eq(qah.raw), r_up.eq(qah.up), r_dn.eq(qah.dn)]
            if dma.vm:
                m.d.sync += r_vmid.eq(qah.vmid)
            rw.load(qah.addr, qah)
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
    s.give(ar_fire=ar_fire, ar_out=ar_out, ar_valid=ar_valid, r_act=r_act, r_fire=r_fire,
           r_res=r_res)


def r_realigner(m: Module, dma, s) -> None:
    """R beats into the data FIFO, shifted to the destination's lanes."""
    bus, DW, cw, aborting = s.take("bus DW cw aborting")
    rx_ptr, wr_ptr, qx, qx_layout = s.take("rx_ptr wr_ptr qx qx_layout")
    push, push_data, r_fire = s.take("push push_data r_fire")
    qxh = qx.head
    x_act = Signal()
    qx.follow(x_act)
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
    s.give(flush_pending=flush_pending, r_err=r_err, x=x, x_act=x_act, x_first=x_first, x_k=x_k)
