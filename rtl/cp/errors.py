"""The CP's error latch: CP_ERROR and its registers take the first error, from the parser,
the DMA engine or a doorbell, and keep it until SOFT_RESET.

In two steps, so that no path runs from an error's cause to the latch through the
priority between the three sources (issue 14): each source's error is first held in a
capture register of its own (which follows its source until something is captured or
latched, so only the capture's valid bit waits for the error condition), and the next cycle the first of those captures by priority (parser, then DMA,
then doorbell: the order of one cycle's errors before) becomes CP_ERROR. Whatever looks
at "an error happened" uses `err_any`, which includes the captures, so nothing sees the
step: an error after the first is ignored, a doorbell after it too, and the parser stops
at its next packet boundary from the cycle after a DMA or doorbell error, as it did.

`c` is the CP's context (rtl/cp/processor.py): its signals and helpers by name."""

from amaranth.hdl import Mux, Signal

from spec import packets as pk

from ..csr import IbLevel
from .packets import value


class Capture:
    """One source's error as it happened: code, level, opcode, address, offset."""

    def __init__(self, name: str, aw: int):
        self.valid = Signal(name=f"{name}_valid")
        self.at_ib_base = Signal(name=f"{name}_at_ib_base")
        self.code = Signal(8, name=f"{name}_code")
        self.level = Signal(2, name=f"{name}_level")
        self.opcode = Signal(8, name=f"{name}_opcode")
        self.addr = Signal(aw, name=f"{name}_addr")
        self.off = Signal(32, name=f"{name}_off")

    def follow(self, m, fired, code, level, opcode, addr, off, at_ib_base=0):
        """Follow the source every cycle (so no register waits for `fired`, the late signal);
        `valid` says it fired."""
        m.d.sync += [self.valid.eq(fired), self.code.eq(code), self.level.eq(level), self.opcode.eq(opcode),
                     self.addr.eq(addr), self.off.eq(off), self.at_ib_base.eq(at_ib_base)]


def latch(c):
    """The captures and the latch; drives `err_any` and `err_pending_any` (a DMA or doorbell
    error stops the parser at its next packet boundary). Returns the captures."""
    m = c.m
    fe, de, be = (Capture(n, c.aw) for n in ("fsm_err", "dma_err", "db_err"))
    err_any = c.err_any
    m.d.comb += [err_any.eq(c.err | fe.valid | de.valid | be.valid),
                 c.err_pending_any.eq(c.err_pending)]
    # (a DMA or doorbell error stops the parser from the cycle its capture holds it, in one
    # register: the parser's dword-taking logic reads it)
    with m.If(~err_any & (c.dma_err | c.db_err)):
        m.d.sync += c.err_pending.eq(1)

    # until an error is captured or latched, each capture follows its source
    with m.If(~err_any):
        fe.follow(m, c.fsm_err, c.fsm_err_code, c.level, c.fsm_err_opcode, c.fsm_err_addr, c.fsm_err_off,
                  c.fsm_err_at_ib_base)
        de.follow(m, c.dma_err, c.dma_err_code, c.dma_err_level, pk.DMA_DATA.opcode,
                  c.dma.err_addr if c.cp.has_dma else 0, c.dma_err_off)
        be.follow(m, c.db_err, c.db_code, IbLevel.RING, 0, c.db_value, c.rptr & c.ring_mask)
    with m.Else():
        m.d.sync += [fe.valid.eq(0), de.valid.eq(0), be.valid.eq(0)]

    def take(cap):
        m.d.sync += [c.err.eq(1), c.err_code.eq(cap.code), c.err_level.eq(cap.level),
                     c.err_opcode.eq(cap.opcode), c.err_offset.eq(cap.off),
                     c.err_addr.eq(Mux(cap.at_ib_base, value(c.p, pk.INDIRECT_BUFFER, "base", c.aw), cap.addr))]

    with m.If(fe.valid):
        take(fe)
    with m.Elif(de.valid):
        take(de)
    with m.Elif(be.valid):
        take(be)
    return fe, de, be
