"""INDIRECT_BUFFER: after the table's checks, IB_SIZE = 0 is IB_SIZE_ZERO, one inside an IB
IB_NESTING (SDMA IBs do not nest), a base beyond the bus BUS_DECERR at its low 48 bits;
otherwise the IB's fetcher starts at its base with the packet's VMID, and the ring packet
finishes when the IB's last packet has (engine.py, RUN).

`c` is the engine's context (rtl/sdma/engine.py): its signals and helpers by name."""

from amaranth.hdl import Signal

from spec.sdma import packets as sp

from ..csr import CpError
from . import packets as pk

IB = sp.INDIRECT_BUFFER


def setup(c):
    m, fi, h, p = c.m, c.fi, c.hdr, c.p
    m.d.comb += [fi.base.eq(pk.address(h, p, IB, "base", c.aw)), fi.end.eq(c.ib_size)]
    c.ib_size_zero = Signal(name="ib_size_zero")
    c.ib_base_far = Signal(name="ib_base_far")  # the base is beyond the bus


def collect(c, pkt, dword, w):
    """The start's checks of payload dword `dword` (`w`), as it arrives (engine.py
    collect_checks()): the start reads registers, so the IB fetcher's load does not wait
    for the payload's compares (sdma_64's critical path: `sdma.p1` -> `fetch_ib.n_ok`)."""
    size, hi = IB.field("IB_SIZE"), IB.field("IB_BASE_HI")
    if dword == size.dword:
        c.m.d.sync += c.ib_size_zero.eq(w[size.lsb:size.lsb + size.width] == 0)
    if dword == hi.dword:
        c.m.d.sync += c.ib_base_far.eq(w[hi.lsb:hi.lsb + hi.width][c.aw - 32:].any())


def start(c, pkt):
    m, h, p = c.m, c.hdr, c.p
    size = pk.field(h, p, IB, "IB_SIZE")
    with m.If(c.ib_size_zero):
        c.fail(CpError.IB_SIZE_ZERO, c.hdr_addr)
    with m.Elif(c.in_ib):
        c.fail(CpError.IB_NESTING, c.hdr_addr)
    with m.Elif(c.ib_base_far):
        c.fail(CpError.BUS_DECERR, c.ib_base_p)  # (the base's low 48 bits)
    with m.Else():
        c.count_packet(pkt.index)
        m.d.comb += c.ib_start.eq(1)
        m.d.sync += [c.in_ib.eq(1), c.ib_base.eq(pk.address(h, p, IB, "base", c.aw)), c.ib_size.eq(size),
                     c.ib_pos.eq(0), c.ib_vmid.eq(pk.field(h, p, IB, "VMID")), c.ib_hdr_off.eq(c.hdr_off),
                     c.ib_empty.eq(0)]  # (IB_SIZE is not 0; engine.py's register follows from here)
        m.next = "RUN"


def states(c):
    pass
