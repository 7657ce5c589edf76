"""The parser's checks, derived from the packet table (spec/packets.py): a packet's
fields and address values as the payload registers hold them, and the UNSUPPORTED,
beyond-the-bus and alignment rules of docs/hardware.md. `p` is the payload as a list of
32-bit Values (dword i of the packet's payload at p[i])."""

from amaranth.hdl import Cat, Const, Signal
from amaranth.lib import data
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


# ---------------------------------------------------------------------------- header decode
# What the parser needs to know of a dword if it is a header, worked out as the dword enters
# a fetcher's output register (rtl/cp/fetch.py `tag`), so the parser's header cycle starts
# from registers.
_TYPE = pk.HEADER.field("TYPE")
_OPCODE = pk.HEADER.field("OPCODE")
_COUNT = pk.HEADER.field("COUNT")

HEADER_TAG = data.StructLayout({
    "filler": 1,    # a one-dword packet: a type-2 dword, or the header-only NOP
    "illegal": 1,   # not a type-3 header of an implemented packet: ILLEGAL_OPCODE
    "kind": range(len(pk.PACKETS)),  # the packet's index in spec/packets.py
    "count_ok": 1,  # COUNT is legal for that packet
    "count0": 1,    # COUNT is 0 (one payload dword)
    "need": _COUNT.width + 1,  # dwords the packet spans: COUNT + 2
    "is_dma": 1,    # a DMA_DATA header (it may start while transfers run)
})


def header_tag(m, dword):
    """HEADER_TAG of `dword` (a 32-bit Value), as comb logic in `m`."""
    tag = Signal(HEADER_TAG)
    opcode = dword[_OPCODE.bits]
    count = dword[_COUNT.bits]
    type3 = dword[_TYPE.bits] == pk.PACKET_TYPE3
    known = Signal()
    for pkt in pk.PACKETS:
        with m.If(opcode == pkt.opcode):
            ok = Const(1)
            if pkt.min_count > 0:
                ok = ok & (count >= pkt.min_count)
            if pkt.max_count < _COUNT.max:
                ok = ok & (count <= pkt.max_count)
            m.d.comb += [known.eq(1), tag.kind.eq(pkt.index), tag.count_ok.eq(ok)]
    m.d.comb += [
        # one-dword packets: any type-2 dword, and AMD's header-only NOP (COUNT all ones)
        tag.filler.eq((dword[_TYPE.bits] == pk.PACKET_TYPE2) |
                      (type3 & (opcode == pk.NOP.opcode) & (count == _COUNT.max))),
        tag.illegal.eq(~type3 | ~known),
        tag.count0.eq(count == 0),
        tag.need.eq(count + 2),
        tag.is_dma.eq(type3 & (opcode == pk.DMA_DATA.opcode)),
    ]
    return tag
