"""The SDMA engine's errors: the two-step error latch, its captures, and the queue reset's
request.

SDMA_ERROR* latches the first error once: a transfer's (copy_fill.py), the parser's
(`fail()`, called from the parser's states) or a doorbell's (engine.py). The parser
stops at its next step, the engine drains its bus traffic, and then requests an
SDMA_ERROR IH entry (engine.py's ERR_DRAIN and ERR_IH states). SDMA_CNTL.QUEUE_RESET and
CONTROL.SOFT_RESET set `resetting` until the RESET state has drained the engine.

Built into the engine's own module (not a submodule), so its signals keep their names."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value

from spec.sdma import packets as sp

from ..csr import CpError, IbLevel
from ..mmu import RESP_USER
from . import packets as pk

# the addresses a parser's error names (fail()): the dword's on offer, the packet's,
# the block written, the polled one, the IH writer's (answering a TRAP or timeout entry),
# an INDIRECT_BUFFER's base
_WHERE = ("cur", "hdr", "blk", "poll", "ih", "ib_base")


def error_latch(m: Module, eng, c) -> None:
    """The error sources' signals, `fail()`, the captures and the latch; the reset
    request. Adds its signals and helpers to `c` (the engine's context)."""
    from .engine import MAX_LOG2  # (engine.py imports this module)

    aw, csr, hdr, p, rdw, mask = c.take("aw csr hdr p rdw mask")
    cur_addr, hdr_addr, blk_addr, poll_addr = c.take("cur_addr hdr_addr blk_addr poll_addr")
    in_ib, cur_vmid, cur_op, cur_sub, hdr_off = c.take("in_ib cur_vmid cur_op cur_sub hdr_off")
    err, err_code, err_level, err_op, err_sub = c.take("err err_code err_level err_op err_sub")
    err_addr, err_offset, err_vmid = c.take("err_addr err_offset err_vmid")
    # The latch takes an error in two steps (as the CP's, rtl/cp/errors.py), so that no
    # path runs from an error's cause through the priority between the sources into
    # SDMA_ERROR*: each source's error is captured in registers of its own (which follow
    # their source until an error is captured or latched), and in the next cycle the
    # first capture by priority (a transfer's, the parser's, a doorbell's: the order of
    # one cycle's errors) is latched. Whatever asks "has an error happened" reads
    # `err_any`, which includes the captures, so only SDMA_STATUS.ERROR and SDMA_ERROR*
    # show the step: they are set a cycle later, and the SDMA_ERROR IH entry of a
    # parser's error is requested a cycle later.
    err_any = Signal()
    f_err = Signal()  # the parser's error this cycle (fail())
    f_code = Signal(8)
    f_where = Signal(range(len(_WHERE)))  # which address it names (fail())
    f_opz = Signal()  # ... whose OP is not readable (a bad fetch)
    db_err = Signal()
    db_code = Signal(8)
    # a transfer's error (copy_fill.py): its packet's place comes from the transfer's record
    x_err = Signal()
    x_code = Signal(8)
    x_addr = Signal(aw)
    x_off = Signal(32)
    x_level = Signal()
    x_op = Signal(8)
    x_vmid = Signal(4)
    transfers = Signal()  # COPY_LINEAR / CONSTANT_FILL transfers queued or running
    # ... as a cycle ago (a register for the header's decision, whose pop is late; it covers
    # every transfer RUN can see: one starts in DMA_QUEUE, and holds a cycle longer at the end)
    transfers_d = Signal()
    m.d.sync += transfers_d.eq(transfers)

    def bus_code(resp, user):
        code = Mux(resp == 0b11, CpError.BUS_DECERR, CpError.BUS_SLVERR)
        return Mux(RESP_USER(Value.cast(user)).fault, CpError.VM_FAULT, code)

    ib_base_p = Signal(aw)  # an INDIRECT_BUFFER's base, as its payload registers hold it
    m.d.comb += ib_base_p.eq(pk.address(hdr, p, sp.INDIRECT_BUFFER, "base", aw))

    def fail(code, addr, opz=False):
        """The parser's error: `addr` is one of the registers (or the dword's address) that
        _WHERE names, which the latch reads a cycle later (the dword's, and the IH
        writer's answer, from captures)."""
        where = {id(cur_addr): "cur", id(hdr_addr): "hdr", id(blk_addr): "blk", id(poll_addr): "poll",
                 id(eng.ih_addr): "ih", id(ib_base_p): "ib_base"}[id(addr)]
        m.d.comb += [f_err.eq(1), f_code.eq(code), f_where.eq(_WHERE.index(where)), f_opz.eq(opz)]
        m.next = "ERR_DRAIN"

    # reset: SDMA_CNTL.QUEUE_RESET or CONTROL.SOFT_RESET
    reset_pulse = Signal()
    m.d.comb += reset_pulse.eq(csr.sdma_cntl_queue_reset | csr.control_soft_reset)
    resetting = Signal()
    soft = Signal()  # the reset is the device's (the CP drops IH requests too)
    with m.If(reset_pulse):
        m.d.sync += resetting.eq(1)
    with m.If(csr.control_soft_reset):
        m.d.sync += soft.eq(1)

    # the captures: valid bits, and what the sources show only in their error's cycle
    fv, xv, dv = Signal(name="f_err_valid"), Signal(name="x_err_valid"), Signal(name="db_err_valid")
    m.d.comb += err_any.eq(err | fv | xv | dv)
    fc_code, fc_where, fc_opz = Signal(8, name="f_code_r"), Signal.like(f_where, name="f_where_r"), Signal()
    # the dword's address as its buffer's base and its dword offset there, added up after the
    # capture (below), or the IH writer's answer's, offset 0 (engine.py, after the FSM): as
    # their sum, the capture was the end of the base's and offset's multiplexers and a 48-bit
    # carry chain, whose top bits were the top's short endpoints (`sdma.f_addr_r`, 17-31
    # bits, 10.6-11.1 ns)
    fc_base = Signal(aw, name="f_base_r")
    fc_off = Signal(20, name="f_off_r")
    xc_code, xc_addr, xc_off = Signal(8, name="x_code_r"), Signal(aw, name="x_addr_r"), Signal(32, name="x_off_r")
    xc_level, xc_op, xc_vmid = Signal(name="x_level_r"), Signal(8, name="x_op_r"), Signal(4, name="x_vmid_r")
    dc_code, dc_off = Signal(8, name="db_code_r"), Signal(MAX_LOG2, name="db_off_r")
    dc_addr = Signal(30, name="db_addr_r")
    with m.If(~err_any & ~resetting):
        m.d.sync += [fv.eq(f_err), xv.eq(x_err), dv.eq(db_err)]
    with m.Else():
        m.d.sync += [fv.eq(0), xv.eq(0), dv.eq(0)]
    with m.If(~err_any):
        m.d.sync += [fc_code.eq(f_code), fc_where.eq(f_where), fc_opz.eq(f_opz),
                     xc_code.eq(x_code), xc_addr.eq(x_addr), xc_off.eq(x_off), xc_level.eq(x_level),
                     xc_op.eq(x_op), xc_vmid.eq(x_vmid),
                     dc_code.eq(db_code), dc_off.eq(rdw & mask), dc_addr.eq(csr.sdma_doorbell[2:])]
        # (fc_base, fc_off: after the FSM, which says whose address they follow)
    # the latch: the parser's place (level, VMID, the packet's offset, OP and SUB_OP) is
    # still in its registers a cycle after its error (the header's cycle loads them)
    # (the offset is added after the choice, 0 but for the dword's: one multiplexer as before
    # and one adder, from registers)
    f_addr = Signal(aw)
    m.d.comb += f_addr.eq(Array([fc_base, hdr_addr, blk_addr, poll_addr, fc_base, ib_base_p])[fc_where]
                          + Cat(Const(0, 2), Mux(fc_where == _WHERE.index("cur"), fc_off, 0)))
    assert _WHERE == ("cur", "hdr", "blk", "poll", "ih", "ib_base")
    with m.If(~err & ~resetting):
        # (a transfer's error first: its packet came before the one the parser holds)
        with m.If(xv):
            m.d.sync += [err.eq(1), err_code.eq(xc_code), err_level.eq(xc_level), err_addr.eq(xc_addr),
                         err_vmid.eq(xc_vmid), err_op.eq(xc_op), err_sub.eq(0), err_offset.eq(xc_off)]
        with m.Elif(fv):
            m.d.sync += [err.eq(1), err_code.eq(fc_code), err_level.eq(in_ib), err_addr.eq(f_addr),
                         err_vmid.eq(cur_vmid), err_op.eq(Mux(fc_opz, 0, cur_op)),
                         err_sub.eq(Mux(fc_opz, 0, cur_sub)), err_offset.eq(hdr_off)]
        with m.Elif(dv):
            m.d.sync += [err.eq(1), err_code.eq(dc_code), err_level.eq(IbLevel.RING),
                         err_addr.eq(Cat(Const(0, 2), dc_addr)), err_vmid.eq(0),  # (the ring's, as the CP's)
                         err_op.eq(0), err_sub.eq(0), err_offset.eq(dc_off)]
    c.update(locals())
