"""RELEASE_MEM: once all earlier work is done, write the fence value (none / 32 / 64 bits /
the GPU clock), wait for its response, then for INT_SEL append an EOP IH entry.

`c` is the CP's context (rtl/cp/processor.py): its signals and helpers by name."""

from amaranth.hdl import Cat, Const, Mux

from spec import ih as ih_spec
from spec import packets as pk

from .. import ih
from ..packets import field, value
from ..writer import WriteSource

RM = pk.RELEASE_MEM


def prepare(c, p):
    """In every payload cycle (the last one counts): the writer's request for the fence (its
    value, address and dwords), or without one for the EOP entry, and the EOP entry itself,
    the GPU clock as it is when the packet starts; so once the checks pass only the request
    and the next state wait for them."""
    m = c.m
    sel = field(p, RM, "DATA_SEL")
    sels = RM.field("DATA_SEL").values
    addr = value(p, RM, "addr", c.aw)
    ts = Cat(c.cp.timestamp, Const(0, 64 - c.cp.ts_width))
    lo = field(p, RM, "DATA_LO")
    hi = field(p, RM, "DATA_HI")
    is_ts = sel == sels["TIMESTAMP"]
    two = is_ts | (sel == sels["DATA_64"])
    fence = writes(p)
    m.d.sync += [
        c.wval[0].eq(Mux(is_ts, ts[:32], lo)),
        c.wval[1].eq(Mux(is_ts, ts[32:], Mux(two, hi, lo))),
        c.blk_addr.eq(Mux(fence, addr, c.ih_entry_addr)),
        c.blk_mask.eq(Mux(fence, Mux(two, 3, 1) << addr[2:5], ih.FULL)),
        c.wr_src.eq(Mux(fence, WriteSource.VALUE, WriteSource.IH)),
        # (the fence with the packet's VMID, the EOP entry with the kernel's)
        c.blk_user.eq(c.write_user(Mux(fence, c.cur_vmid, 0))),
    ]
    eop_load(c, p)


def writes(p):
    """DATA_SEL asks for a fence write."""
    sel = field(p, RM, "DATA_SEL")
    sels = RM.field("DATA_SEL").values
    return (sel == sels["DATA_32"]) | (sel == sels["DATA_64"]) | (sel == sels["TIMESTAMP"])


def interrupts(p):
    """INT_SEL asks for an interrupt: SEND_INT or SEND_INT_ON_CONFIRM (SEND_DATA_ON_CONFIRM
    writes with confirm and no interrupt; this CP confirms every write)."""
    sel = field(p, RM, "INT_SEL")
    v = RM.field("INT_SEL").values
    return (sel == v["SEND_INT"]) | (sel == v["SEND_INT_ON_CONFIRM"])


def start(c, p, ok):
    """The first step, beside the checks (p: the payload this cycle): the fence write is
    requested at once, or with DATA_SEL NONE the EOP entry's (prepare() loaded either). The
    request is the one thing that is not speculative: `ok` says the checks pass (RELEASE_MEM's
    all come from registers, so this costs no depth), so a failing packet never asks."""
    m = c.m
    # the address beyond the bus (RM_WRITE answers DECERR): prepare() loaded `oob` from
    # ADDR_HI, an earlier dword than the last, so the 16-bit compare is off this cycle's path
    assert RM.field(RM.value("addr").fields[1]).dword < RM.fixed - 1
    beyond = c.oob
    with m.If(writes(p)):
        with m.If(beyond):
            m.next = "RM_WRITE"
        with m.Else():
            m.d.comb += c.wr_set.eq(ok)
            m.next = "RM_WAIT"
    with m.Elif(interrupts(p)):
        ih.request(c, prepared=ok)
    with m.Else():
        m.next = "DONE"


def eop_data(p):
    """The EOP entry's source data: INT_CTXID (src_data[0], where amdkfd reads it), the data
    and the ADDR_LO dword as the packet gave them."""
    lo = RM.field(RM.value("addr").fields[0])
    return [field(p, RM, "INT_CTXID"), field(p, RM, "DATA_LO"), field(p, RM, "DATA_HI"), p[lo.dword]]


def eop_load(c, p):
    # (the entry's VMID is the packet's: a user fence in an IB names its job's VMID)
    ih.load(c, ih_spec.Source.EOP, eop_data(p))


def states(c):
    """The data write (confirmed), then the EOP interrupt."""
    m, state = c.m, c.state
    with state("RM_WRITE"):
        c.request_write("RM_WAIT", check_oob=True)
    with state("RM_WAIT"):
        # The EOP entry is loaded already (prepare(): the packet's fields do not change
        # meanwhile) but for its GPU clock, which is the clock when the fence is answered:
        # it follows the clock while the fence is awaited. The entry's block request is
        # loaded once the fence is sent (the writer reads no more of it): nothing reads
        # either before the answer, and without an interrupt nothing reads them after.
        m.d.sync += c.ih_ts.eq(c.cp.timestamp)
        with m.If(c.writer.sent):
            ih.load_request(c)
        # (the entry's write is asked for with the answer, if it goes through: ih.request)
        m.d.comb += c.wr_again.eq(interrupts(c.p) & ih.will_request(c))
        with c.write_answered():
            with m.If(interrupts(c.p)):
                ih.request(c, asked=True)
            with m.Else():
                m.next = "DONE"
