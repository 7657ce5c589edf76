"""The DMA engine's completion: B responses, errors, abort, and the counters.

- B queue: one entry per write burst (and one per zero-length command, which needs no
  B); `done` pulses when a command's last burst is answered.
- Errors: the first SLVERR/DECERR (R or B) ends the failing command and every command
  queued after it (the engine's docstring has the contract): everything in flight is
  drained, then `done` pulses once for each of those commands, in order, with `resp`
  and `err_addr` of the first error, and the pipeline is reset to empty.
- `abort` (the CP's soft reset): the same stop-and-drain for every queued command,
  without `done`.
- Counters (pulses, for the CSR block to accumulate): `perf_rd_bytes` (each R beat),
  `perf_wr_bytes` (each write burst's bytes, when its B answers OKAY), `perf_busy`."""

from __future__ import annotations

from amaranth.hdl import Cat, Mux, Module, Signal

from ..bus import RESP_OKAY
from ..mmu import RESP_USER


def completion(m: Module, dma, s) -> None:
    """`done`, `resp`, `err_addr` (and with `vm`, `err_user`, `err_write`), `busy`, `busy_r`, the
    error and abort drain, and the counters."""
    bus, B, cpw, lb = s.take("bus B cpw lb")
    # the command pointers and the error latch (commands.py)
    wr_ptr, rd_ptr, rx_ptr, aw_ptr, done_ptr, push_cmd = s.take("wr_ptr rd_ptr rx_ptr aw_ptr done_ptr push_cmd")
    aborting, abort_ptr, err_resp, err_addr = s.take("aborting abort_ptr err_resp err_addr")
    # the data FIFO (fifo.py), the read side (read.py), the write side (write.py)
    f_wr, f_rd, f_hv, res, avail = s.take("f_wr f_rd f_hv res avail")
    ar_out, ar_valid, r_act, r_fire, r_err = s.take("ar_out ar_valid r_act r_fire r_err")
    x, x_act, x_first, x_k, flush_pending = s.take("x x_act x_first x_k flush_pending")
    a_act, aw_valid, bq, bq_ne, bq_rp, wq_ne, w_beat = s.take("a_act aw_valid bq bq_ne bq_rp wq_ne w_beat")
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
        m.d.comb += dma.done.eq(1)
        m.d.sync += done_ptr.eq(done_ptr + 1)

    # First error: a write error belongs to the oldest command, so it wins over a
    # read error of the same cycle and over an earlier-latched read error.
    err_user = Signal(RESP_USER)
    err_write = Signal()
    with m.If(b_err):
        m.d.sync += [aborting.eq(1), abort_ptr.eq(done_ptr), err_resp.eq(bus.bresp), err_addr.eq(bqh.addr)]
        if dma.vm:
            m.d.sync += [err_user.eq(bus.buser), err_write.eq(1)]
    with m.Elif(r_err):
        m.d.sync += [aborting.eq(1), abort_ptr.eq(rx_ptr), err_resp.eq(bus.rresp),
                     # (the first beat: x_k is 0 and the copy starts at src's own lane)
                     err_addr.eq(Cat(Mux(x_first, x.src[:lb], 0), x.src[lb:] + x_k))]
        if dma.vm:
            m.d.sync += [err_user.eq(bus.ruser), err_write.eq(0)]

    # abort (soft reset): everything queued is in scope and goes without a `done`.
    silent = Signal()
    with m.If(dma.abort):
        m.d.sync += [aborting.eq(1), abort_ptr.eq(done_ptr), silent.eq(1)]

    drained = Signal()
    m.d.comb += drained.eq((ar_out == 0) & ~ar_valid & ~aw_valid & ~wq_ne & ~bq_ne)
    reporting = Signal()
    m.d.comb += reporting.eq(head_scoped & drained)
    with m.If(reporting & ~dma.abort):
        with m.If(~silent):
            m.d.comb += [dma.done.eq(1), dma.resp.eq(err_resp), dma.err_addr.eq(err_addr)]
            if dma.vm:
                m.d.comb += [dma.err_user.eq(err_user), dma.err_write.eq(err_write)]
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

    # `busy_r`: `busy` from a register, worked out a cycle ahead from the next values of
    # the pointers and `aborting` (the assignments above), so a client's decision reads one
    # flip-flop, not the pointers' compare (the SDMA's quiet conditions and its CHECK's
    # wait for transfers: sdma_32's path, dma.done_ptr -> the compare -> the RESET's clear of
    # SDMA_ERROR*, 10.43 ns). formal/blocks/dma.py proves it equal to `busy`.
    step = Signal()  # done_ptr advances
    m.d.comb += step.eq(done_ok | (reporting & ~dma.abort))
    final = Signal()  # everything reported: the pointers meet and `aborting` ends
    m.d.comb += final.eq(reporting & ~dma.abort & (silent | ((done_ptr + 1)[:cpw] == wr_ptr)))
    wr_next, done_next = Signal(cpw), Signal(cpw)
    m.d.comb += [wr_next.eq(wr_ptr + push_cmd), done_next.eq(done_ptr + step)]
    aborting_next = Signal()
    m.d.comb += aborting_next.eq(~final & (aborting | b_err | r_err | dma.abort))
    m.d.sync += dma.busy_r.eq(aborting_next | (~final & (wr_next != done_next)))

    m.d.comb += [
        dma.busy.eq((wr_ptr != done_ptr) | aborting),
        dma.idle.eq(~dma.busy),
        dma.perf_busy.eq(dma.busy),
        dma.perf_rd_bytes.eq(Mux(r_fire, B, 0)),
        # a burst's bytes once its B answers OKAY: a burst the bus or the MMU refuses wrote
        # nothing (the strobes of each W beat, counted before, included those)
        dma.perf_wr_bytes.eq(Mux(b_fire & (bus.bresp == RESP_OKAY), bqh.bytes, 0)),
    ]
    return m
