"""The DMA engine's data FIFO: the realigned read beats on their way to the W stream.

Block RAM with a registered head (`f_hv`), so WDATA comes from a register. `res` counts
the beats reserved by issued reads (the AR issuer offers a burst only when the FIFO has
room for every beat it will produce, so R is always accepted at full rate), `avail` the
beats no AW has claimed yet (a write burst is issued only when all its beats are here)."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib.memory import Memory


def data_fifo(m: Module, dma, s) -> None:
    """The FIFO, its pointers and the reservation counts; `push`/`pop` are driven by the
    R realigner and the W stream."""
    DW, FD, MB, fw = s.take("DW FD MB fw")
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
    s.give(f_wr=f_wr, f_rd=f_rd, f_hv=f_hv, f_rp=f_rp, res=res, avail=avail, push=push,
           push_data=push_data, pop=pop, space_ok=space_ok)
