"""RELEASE_MEM: once all earlier work is done, write the fence value (none / 32 / 64 bits /
the GPU clock), wait for its response, then for INT_SEL append an EOP IH entry.

`c` is the CP's context (rtl/cp/processor.py): its signals and helpers by name."""

from amaranth.hdl import Cat, Const

from spec import ih as ih_spec
from spec import packets as pk

from . import ih
from .packets import beyond_bus, field, value

RM = pk.RELEASE_MEM


def start(c, p):
    """Once the checks pass (p: the payload this cycle): the fence write goes to the
    writer at once, or with DATA_SEL NONE straight to the interrupt."""
    m = c.m
    sel = field(p, RM, "DATA_SEL")
    sels = RM.field("DATA_SEL").values
    addr = value(p, RM, "addr", c.aw)
    ts = Cat(c.cp.timestamp, Const(0, 64 - c.cp.ts_width))
    lo = field(p, RM, "DATA_LO")
    hi = field(p, RM, "DATA_HI")
    beyond = beyond_bus(p, RM, c.aw)  # RM_WRITE answers DECERR
    with m.If(sel == sels["DATA_32"]):
        c.write_dwords(addr, lo, None, "RM_WRITE", "RM_WAIT", defer=beyond)
    with m.Elif(sel == sels["DATA_64"]):
        c.write_dwords(addr, lo, hi, "RM_WRITE", "RM_WAIT", defer=beyond)
    with m.Elif(sel == sels["TIMESTAMP"]):
        c.write_dwords(addr, ts[:32], ts[32:], "RM_WRITE", "RM_WAIT", defer=beyond)
    with m.Elif(interrupts(p)):
        eop(c, p)
    with m.Else():
        m.next = "DONE"


def interrupts(p):
    """INT_SEL asks for an interrupt: SEND_INT or SEND_INT_ON_CONFIRM (SEND_DATA_ON_CONFIRM
    writes with confirm and no interrupt; this CP confirms every write)."""
    sel = field(p, RM, "INT_SEL")
    v = RM.field("INT_SEL").values
    return (sel == v["SEND_INT"]) | (sel == v["SEND_INT_ON_CONFIRM"])


def eop(c, p):
    """The EOP interrupt: INT_CTXID (src_data[0], where amdkfd reads it), the data and the
    ADDR_LO dword as the packet gave them."""
    lo = RM.field(RM.value("addr").fields[0])
    ih.start(c, ih_spec.Source.EOP,
             [field(p, RM, "INT_CTXID"), field(p, RM, "DATA_LO"), field(p, RM, "DATA_HI"), p[lo.dword]])
    # (the entry's VMID is the packet's: a user fence in an IB names its job's VMID)


def states(c):
    """The data write (confirmed), then the EOP interrupt."""
    m, state = c.m, c.state
    with state("RM_WRITE"):
        c.request_write("RM_WAIT", check_oob=True)
    with state("RM_WAIT"), c.write_answered():
        with m.If(interrupts(c.p)):
            eop(c, c.p)
        with m.Else():
            m.next = "DONE"
