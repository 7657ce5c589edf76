"""The parser's checks, derived from the packet table (spec/packets.py): a packet's
fields and address values as the payload registers hold them, and the UNSUPPORTED,
beyond-the-bus and alignment rules of docs/hardware.md. `p` is the payload as a list of
32-bit Values (dword i of the packet's payload at p[i])."""

from amaranth.hdl import Cat, Const
from amaranth.utils import ceil_log2

from spec import packets as pk


def field(p, pkt, name):
    f = pkt.field(name)
    return p[f.dword][f.bits]


def value(p, pkt, name, addr_width):
    """A lo/hi Value as the bus sees it: the raw dwords, cut to the address width."""
    v = pkt.value(name)
    lo, hi = (pkt.field(n) for n in v.fields)
    return Cat(p[lo.dword], p[hi.dword])[:addr_width]


def unsupported(p, pkt):
    """Any closed-enum field holding a value the device does not implement."""
    bad = Const(0)
    for f in pkt.fields:
        if f.enum and not f.open_enum:
            v = p[f.dword][f.bits]
            ok = Const(0)
            for e in f.enum:
                if e.supported:
                    ok = ok | (v == e.value)
            bad = bad | ~ok
    return bad


def beyond_bus(p, pkt, addr_width):
    """Address bits above the bus width set in the packet's first address value
    (the ADDR_HI fields are 32 bits wide, the bus has 48 address bits)."""
    if not pkt.values or pkt is pk.INDIRECT_BUFFER or pkt is pk.DMA_DATA:
        return Const(0)
    v = pkt.value(pkt.values[0].name)
    hi = pkt.field(v.fields[1])
    return p[hi.dword][addr_width - 32:] != 0


def ib_beyond_bus(p, addr_width):
    """IB_BASE_HI (32 bits, as gfx9 emits it) has bits above the bus's address width: the
    IB cannot be fetched (BUS_DECERR, checked after the IB's own checks)."""
    hi = pk.INDIRECT_BUFFER.field("IB_BASE_HI")
    return p[hi.dword][addr_width - 32:] != 0


def misaligned(p, pkt):
    """Bits below an *_LO address field, and alignment rules (e.g. 64-bit fences)."""
    bad = Const(0)
    for v in pkt.values:
        lo = pkt.field(v.fields[0])
        if lo.lsb:
            bad = bad | (p[lo.dword][:lo.lsb] != 0)
    for r in pkt.rules:
        if r.align > 1:
            w = pkt.field(r.when)
            when = Const(0)
            for name in r.among:
                when = when | (p[w.dword][w.bits] == w.values[name])
            lo = pkt.field(pkt.value(r.value).fields[0])
            bad = bad | (when & (p[lo.dword][:ceil_log2(r.align)] != 0))
    return bad
