"""The SDMA engine's read side: the ring and IB fetchers and POLL_REGMEM's read share the AR
channel through a register slice (the payload holds until it is accepted; fixed priority:
the poll, the IB, the ring), and R beats are routed back by ID. Each client's AxUSER (VMID
and access kind, for the MMU) goes with its request."""

from amaranth.hdl import Cat, Const, Signal
from amaranth.utils import ceil_log2

from ..bus import BURST_INCR

# IDs on the engine's port (the top's mux adds the master's index above them; ID 3 would
# be the MMU's walk ID 7 there, so it is not used)
ID_RING, ID_IB, ID_POLL = 0, 1, 2


def reads(m, bus, ring, ib, data_width, ring_user, ib_user, poll_user):
    """Returns (poll_req, poll_addr, poll_taken, poll_pending, poll_rvalid, ar_valid):
    the poll asks with `poll_req` (a register the caller sets and clears on `poll_taken`)."""
    lb = ceil_log2(data_width // 8)
    aw = len(bus.araddr)
    poll_req = Signal()
    poll_addr = Signal(aw)
    poll_taken = Signal()
    poll_pending = Signal()
    ar_valid = Signal()
    ar_addr = Signal(aw)
    ar_len = Signal(8)
    ar_id = Signal(4)
    ar_user = Signal(len(bus.aruser))
    clients = [(poll_req, Cat(Const(0, lb), poll_addr[lb:]), Const(0, 8), ID_POLL, poll_user),
               (ib.arvalid, ib.araddr, ib.arlen, ID_IB, ib_user),
               (ring.arvalid, ring.araddr, ring.arlen, ID_RING, ring_user)]
    with m.If(bus.arready):
        m.d.sync += ar_valid.eq(0)
    for k, (valid, addr, length, cid, user) in enumerate(clients):
        # a fetcher's ARREADY leaves out its own ARVALID (it ANDs the two itself): its
        # burst's issue is then one LUT from these registers (rtl/cp/fetch.py `n_ok`)
        free = ~ar_valid
        for other in clients[:k]:
            free = free & ~other[0]
        cond = valid & free
        with m.If(cond):
            m.d.sync += [ar_valid.eq(1), ar_addr.eq(addr), ar_len.eq(length), ar_id.eq(cid), ar_user.eq(user)]
        if cid == ID_POLL:
            m.d.comb += poll_taken.eq(cond)
        else:
            m.d.comb += (ib if cid == ID_IB else ring).arready.eq(free)
    m.d.comb += [
        bus.arvalid.eq(ar_valid), bus.araddr.eq(ar_addr), bus.arlen.eq(ar_len), bus.arid.eq(ar_id),
        bus.arsize.eq(lb), bus.arburst.eq(BURST_INCR), bus.rready.eq(1), bus.aruser.eq(ar_user),
    ]
    for f, cid in ((ring, ID_RING), (ib, ID_IB)):
        m.d.comb += [f.rvalid.eq(bus.rvalid & (bus.rid == cid)), f.rdata.eq(bus.rdata),
                     f.rresp.eq(bus.rresp), f.rlast.eq(bus.rlast), f.ruser.eq(bus.ruser)]
    poll_rvalid = Signal()
    m.d.comb += poll_rvalid.eq(bus.rvalid & (bus.rid == ID_POLL))
    with m.If(poll_taken):
        m.d.sync += poll_pending.eq(1)
    with m.If(poll_rvalid):
        m.d.sync += poll_pending.eq(0)
    return poll_req, poll_addr, poll_taken, poll_pending, poll_rvalid, ar_valid
