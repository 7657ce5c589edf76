"""The CP's error latch: CP_ERROR and its registers take the first error, from the parser,
the DMA engine or a doorbell, and keep it until SOFT_RESET.

In two steps, so that no path runs from an error's cause to the latch through the
priority between the three sources (issue 14): each source's error is first held in a
capture register of its own (which follows its source until something is captured or
latched, so only the capture's valid bit waits for the error condition), and the next
cycle the first of those captures by priority (parser, then DMA, then doorbell: the order
of one cycle's errors before) becomes CP_ERROR. Whatever looks at "an error happened" uses
`err_any`, which includes the captures, so nothing sees the step: an error after the first
is ignored, a doorbell after it too, and the parser stops at its next packet boundary from
the cycle after a DMA or doorbell error, as it did.

A capture holds as little as it can: the parser's says where its error happened (`Where`),
whether its opcode is 0, and the addresses of the packet and of the dword it was parsing
(the buffer's base plus the offsets, which the capture follows every cycle); the offset and the other
addresses come, when the error is latched, from registers that still hold them then (the
packet's offset, the polled or written address, the payload, the doorbell register); the
DMA engine shows its error address with `done` only, so that one is captured. A VM
fault's details (the response's RUSER/BUSER, the access kind, the VMID) are captured
with their error.

`c` is the CP's context (rtl/cp/processor.py): its signals and helpers by name."""

import enum

from amaranth.hdl import Cat, Const, Mux, Signal

from spec import packets as pk
from spec import vm as vm_spec

from ..csr import IbLevel
from ..mmu import RESP_USER
from .packets import value

_TYPE = pk.HEADER.field("TYPE")


# fail(BUS) / flag(BUS) (rtl/cp/processor.py): the error is the bus response's that `where`
# names (the fetched dword's, the poll's, the write's): BUS_SLVERR, BUS_DECERR or VM_FAULT.
# Its code is worked out after the capture, from the captured response and RUSER/BUSER
# (`fsm_err_resp`, `fsm_err_user`), so the response's decoding and the choice between a bus
# code and the FSM's constant ones are not in front of the capture (`cp_32`'s critical path
# was the parser's conditions -> `fsm_err_code_r`, 11.35 ns)
BUS = object()


class Where(enum.IntEnum):
    """Which address a parser error names."""
    PACKET = 0  # the packet being parsed
    DWORD = 1   # the payload dword that answered a bus error
    POLL = 2    # WAIT_REG_MEM's polled address
    WRITE = 3   # the address being written (wr_addr: blk_addr as the write was sent)
    HEADER = 4  # the header in hand (RUN)


def latch(c):
    """The captures and the latch; drives `err_any` and `err_pending_any` (a DMA or doorbell
    error stops the parser at its next packet boundary). Returns the capture valid bits."""
    m = c.m
    valid = {n: Signal(name=f"{n}_err_valid") for n in ("fsm", "dma", "db")}
    fe_code, de_code = Signal(8, name="fsm_err_code_r"), Signal(8, name="dma_err_code_r")
    fe_bus, fe_resp = Signal(name="fsm_err_bus_r"), Signal(2, name="fsm_err_resp_r")  # (BUS, above)
    fe_where = Signal(Where, name="fsm_err_where_r")
    fe_opz = Signal(name="fsm_err_opz_r")
    fe_ib_base = Signal(name="fsm_err_at_ib_base_r")
    de_off, de_level = Signal(32, name="dma_err_off_r"), Signal(2, name="dma_err_level_r")
    de_addr = Signal(c.aw, name="dma_err_addr_r")  # (the engine shows it with `done` only)
    fe_cur = Signal(c.aw, name="fsm_err_cur_r")  # the dword's address
    fe_hdr = Signal(c.aw, name="fsm_err_hdr_r")  # the packet's
    be_code, be_rptr = Signal(8, name="db_err_code_r"), Signal(32, name="db_err_rptr_r")
    de_vmid = Signal(4, name="dma_err_vmid_r")
    fe_user, de_user = Signal(RESP_USER, name="fsm_err_user_r"), Signal(RESP_USER, name="dma_err_user_r")
    fe_access, de_access = Signal(3, name="fsm_err_access_r"), Signal(3, name="dma_err_access_r")
    # (the parser error's VMID is chosen after the capture, from the captured `where` and
    # RUSER/BUSER and both candidates: chosen before it, the state and the fetch response ->
    # `where` -> the write's fault -> the choice were a cone in front of the capture,
    # `cp_32`'s `fsm_err_vmid_r`, 10.18 ns)
    fe_vmid_work, fe_vmid_write = Signal(4, name="fsm_err_vmid_work_r"), Signal(4, name="fsm_err_vmid_write_r")
    fe_vmid = Mux((fe_where == Where.WRITE) & RESP_USER(fe_user).fault, fe_vmid_write, fe_vmid_work)

    err_any = c.err_any
    m.d.comb += [err_any.eq(c.err | valid["fsm"] | valid["dma"] | valid["db"]),
                 c.err_pending_any.eq(c.err_pending)]
    # (a DMA or doorbell error stops the parser from the cycle its capture holds it, in one
    # register: the parser's dword-taking logic reads it)
    with m.If(~err_any & (c.dma_err | c.db_err)):
        m.d.sync += c.err_pending.eq(1)

    # until an error is captured or latched, each capture follows its source (so no register
    # but `valid` waits for the error's condition)
    with m.If(~err_any):
        m.d.sync += [valid["fsm"].eq(c.fsm_err), valid["dma"].eq(c.dma_err), valid["db"].eq(c.db_err),
                     fe_code.eq(c.fsm_err_code), fe_bus.eq(c.fsm_err_bus), fe_resp.eq(c.fsm_err_resp), fe_where.eq(c.fsm_err_where), fe_opz.eq(c.fsm_err_opz),
                     fe_ib_base.eq(c.fsm_err_at_ib_base),
                     de_code.eq(c.dma_err_code), de_off.eq(c.dma_err_off), de_level.eq(c.dma_err_level),
                     de_addr.eq(c.dma.err_addr if c.cp.has_dma else 0), fe_cur.eq(c.fsm_err_cur), fe_hdr.eq(c.fsm_err_hdr),
                     be_code.eq(c.db_code), be_rptr.eq(c.rptr),
                     fe_vmid_work.eq(c.cur_vmid), fe_vmid_write.eq(c.wr_vmid), fe_user.eq(c.fsm_err_user), fe_access.eq(c.fsm_err_access),
                     de_vmid.eq(c.dma_err_vmid), de_user.eq(c.dma_err_user), de_access.eq(c.dma_err_access)]
    with m.Else():
        m.d.sync += [v.eq(0) for v in valid.values()]

    fsm_addr = Signal(c.aw, name="err_fsm_addr")
    with m.If(fe_ib_base):
        m.d.comb += fsm_addr.eq(value(c.p, pk.INDIRECT_BUFFER, "base", c.aw))
    with m.Elif(fe_where == Where.POLL):
        m.d.comb += fsm_addr.eq(c.poll_addr)
    with m.Elif(fe_where == Where.WRITE):
        # (the write's own: a *_WAIT state may have loaded the next write's blk_addr already)
        m.d.comb += fsm_addr.eq(c.wr_addr)
    with m.Elif(fe_where == Where.PACKET):
        m.d.comb += fsm_addr.eq(fe_hdr)
    with m.Else():
        m.d.comb += fsm_addr.eq(fe_cur)

    with m.If(valid["fsm"]):
        m.d.sync += [c.err.eq(1), c.err_code.eq(Mux(fe_bus, c.bus_code(fe_resp, fe_user), fe_code)),
                     c.err_level.eq(c.level_d),
                     c.err_opcode.eq(Mux(fe_opz, 0, c.hdr_opcode)), c.err_offset.eq(c.hdr_off),
                     c.err_addr.eq(fsm_addr), c.err_vmid.eq(fe_vmid), c.err_user.eq(fe_user),
                     c.err_access.eq(fe_access)]
    with m.Elif(valid["dma"]):
        m.d.sync += [c.err.eq(1), c.err_code.eq(de_code), c.err_level.eq(de_level),
                     c.err_opcode.eq(pk.DMA_DATA.opcode), c.err_offset.eq(de_off),
                     c.err_addr.eq(de_addr), c.err_vmid.eq(de_vmid), c.err_user.eq(de_user),
                     c.err_access.eq(de_access)]
    with m.Elif(valid["db"]):
        m.d.sync += [c.err.eq(1), c.err_code.eq(be_code), c.err_level.eq(IbLevel.RING),
                     c.err_opcode.eq(0), c.err_offset.eq(be_rptr & c.ring_mask),
                     c.err_addr.eq(c.db_value), c.err_vmid.eq(0), c.err_user.eq(0), c.err_access.eq(0)]
    return list(valid.values())


def locate(c, fsm):
    """Where a parser error happens, from the state `fsm` is in, and a VM fault's details."""
    m, writer, level = c.m, c.writer, c.level
    # In the header cycle: the header (whose offset and opcode the header registers take
    # in RUN), with opcode 0 unless it is a readable type-3 header. A bad fetch response in
    # the payload: the dword (dw_off has its offset next cycle); any other error in the
    # payload (BAD_COUNT too): the packet; a poll: the polled address; a write: the written
    # one; an IB beyond the bus: its base (errors.py works the address out).
    resp_err = c.cur_fetch_bad
    W = Where
    with m.If(fsm.ongoing("RUN")):
        m.d.comb += [c.fsm_err_where.eq(W.HEADER),
                     c.fsm_err_opz.eq(resp_err | (c.cur_fetch_data[_TYPE.bits] != pk.PACKET_TYPE3))]
    with m.Elif((fsm.ongoing("PAYLOAD") & ~c.bad_count | fsm.ongoing("WD_COLLECT")) & resp_err):
        m.d.comb += c.fsm_err_where.eq(W.DWORD)
    with m.Elif(fsm.ongoing("PAYLOAD")):
        m.d.comb += c.fsm_err_where.eq(W.PACKET)
    with m.Elif(fsm.ongoing("WRM_READ") | fsm.ongoing("WRM_RESP")):
        m.d.comb += c.fsm_err_where.eq(W.POLL)
    with m.Else():
        m.d.comb += c.fsm_err_where.eq(W.WRITE)
    # the addresses of the dword in hand and of the packet: the buffer's base + 4 · offset,
    # worked out every cycle beside the parser (errors.py picks one)
    loc_base = Signal(c.aw)
    m.d.comb += loc_base.eq(Mux(level == 0, c.ring_base, c.ib_base[level]))
    m.d.comb += [c.fsm_err_cur.eq(loc_base + Cat(Const(0, 2), c.cur_off)),
                 c.fsm_err_hdr.eq(loc_base + Cat(Const(0, 2), c.hdr_off)),
                 c.hdr_addr.eq(loc_base + Cat(Const(0, 2), c.hdr_taken_off))]
    with m.If(fsm.ongoing("RUN") & c.pop):
        m.d.sync += [c.hdr.eq(c.cur_fetch_data), c.hdr_taken_off.eq(c.cur_off)]
        m.d.comb += c.took_next.eq(1)
    # a VM fault's details, by where the error happened (they matter only when the code is
    # VM_FAULT, which only a response the MMU tagged gives): the fetched dword's RUSER, the
    # poll's, the write's BUSER; the VMID is the work's, a faulting write's its own (an IH
    # entry or rptr write-back is the kernel's)
    with m.Switch(c.fsm_err_where):
        with m.Case(W.HEADER, W.DWORD):
            m.d.comb += [c.fsm_err_user.eq(c.cur_fetch_user), c.fsm_err_resp.eq(c.cur_fetch_resp),
                         c.fsm_err_access.eq(vm_spec.Access.FETCH)]
        with m.Case(W.POLL):
            m.d.comb += [c.fsm_err_user.eq(c.bus.ruser), c.fsm_err_resp.eq(c.bus.rresp),
                         c.fsm_err_access.eq(vm_spec.Access.READ)]
        with m.Case(W.WRITE):
            m.d.comb += [c.fsm_err_user.eq(writer.user), c.fsm_err_resp.eq(writer.resp),
                         c.fsm_err_access.eq(vm_spec.Access.WRITE)]
