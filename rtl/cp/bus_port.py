"""The CP's read side of the memory bus: the ring/IB fetchers and WAIT_REG_MEM's poll
share the AR channel through a register slice (the AXI payload stays stable until it is
accepted; fixed priority: the poll, then the deepest IB first; a new request is taken once
the slot is empty), and R beats are routed back by ID (one per read client). Each client's
AxUSER (VMID and access kind, for the MMU) goes through the slice with its request, and
RUSER comes back with R."""

from amaranth.hdl import Cat, Const, Signal
from amaranth.utils import ceil_log2

from ..bus import BURST_INCR

# AXI IDs on the CP's memory port: one per read client, so R beats route back by ID.
ID_RING, ID_IB1, ID_IB2, ID_POLL = 0, 1, 2, 3
ID_WRITE = 0


def reads(m, bus, fetchers, data_width, aw, fetch_users=None, poll_user=None):
    """Returns (ar_valid, poll_req, poll_addr, poll_pending, poll_taken, poll_rvalid).
    `fetch_users` (one per fetcher) and `poll_user`: AxUSER of each client's reads."""
    dpb = data_width // 32
    ar_valid = Signal()
    ar_addr = Signal(aw)
    ar_len = Signal(8)
    ar_id = Signal(4)
    poll_req = Signal()
    poll_addr = Signal(aw)
    poll_pending = Signal()
    poll_taken = Signal()
    users = fetch_users or [Const(0)] * len(fetchers)
    clients = [(f.arvalid, f.araddr, f.arlen, i, users[i]) for i, f in enumerate(fetchers)]
    clients = [(poll_req, Cat(Const(0, 2 + ceil_log2(dpb)), poll_addr[2 + ceil_log2(dpb):]),
                Const(0, 8), ID_POLL, poll_user if poll_user is not None else Const(0))] + clients[::-1]
    # (fixed priority: poll, deepest IB first)
    has_user = hasattr(bus, "aruser")
    ar_user = Signal(len(bus.aruser) if has_user else 1)
    # (the slot takes a request only when it is empty, not in the cycle the bus takes the one
    # it holds: the clients' handshake then starts from registers alone, at the cost of a
    # cycle between two reads offered back to back)
    slot_free = Signal()
    m.d.comb += slot_free.eq(~ar_valid)
    with m.If(bus.arready):
        m.d.sync += ar_valid.eq(0)
    for k, (valid, addr, length, cid, user) in enumerate(clients):
        cond = valid & slot_free
        for other in clients[:k]:
            cond = cond & ~other[0]
        with m.If(cond):
            m.d.sync += [ar_valid.eq(1), ar_addr.eq(addr), ar_len.eq(length), ar_id.eq(cid),
                         ar_user.eq(user)]
        if cid == ID_POLL:
            m.d.comb += poll_taken.eq(cond)
        else:
            m.d.comb += fetchers[cid].arready.eq(cond)
    m.d.comb += [
        bus.arvalid.eq(ar_valid), bus.araddr.eq(ar_addr), bus.arlen.eq(ar_len),
        bus.arid.eq(ar_id), bus.arsize.eq(ceil_log2(data_width // 8)),
        bus.arburst.eq(BURST_INCR), bus.rready.eq(1),
    ]
    if has_user:
        m.d.comb += bus.aruser.eq(ar_user)
    for i, f in enumerate(fetchers):
        m.d.comb += [
            f.rvalid.eq(bus.rvalid & (bus.rid == i)),
            f.rdata.eq(bus.rdata), f.rresp.eq(bus.rresp), f.rlast.eq(bus.rlast),
        ]
        if has_user:
            m.d.comb += f.ruser.eq(bus.ruser)
    poll_rvalid = Signal()
    m.d.comb += poll_rvalid.eq(bus.rvalid & (bus.rid == ID_POLL))
    with m.If(poll_taken):
        m.d.sync += poll_pending.eq(1)
    with m.If(poll_rvalid):
        m.d.sync += poll_pending.eq(0)
    return ar_valid, poll_req, poll_addr, poll_pending, poll_taken, poll_rvalid
