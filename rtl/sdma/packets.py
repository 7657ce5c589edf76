"""The SDMA parser's checks, derived from spec/sdma/packets.py: no opcode or bit position
is written here. The parser holds the header (`h`) and the fixed payload dwords (`p`) in
registers; these functions turn them into the packet's kind and its check results."""

from amaranth.hdl import Cat, Const, Mux, Signal, Value
from amaranth.lib import data

from spec.sdma import packets as sp

PACKETS = sp.SDMA_PACKETS
MAX_FIXED = max(p.fixed for p in PACKETS)
KIND = {p.name: p.index for p in PACKETS}


def word(h, p, dword: int) -> Value:
    return h if dword == -1 else p[dword]


def field(h, p, pkt: sp.SdmaPacketDef, name: str) -> Value:
    f = pkt.field(name)
    return word(h, p, f.dword)[f.lsb:f.lsb + f.width]


def address(h, p, pkt: sp.SdmaPacketDef, value: str, aw: int) -> Value:
    """A 64-bit address value (lo, hi dwords as they are) cut to the bus's `aw` bits, as the
    engine drops the bits above (testbench/refmodel/sdma.py masks them)."""
    v = pkt.values[[x.name for x in pkt.values].index(value)]
    lo, hi = (pkt.field(n) for n in v.fields)
    return Cat(word(h, p, lo.dword), word(h, p, hi.dword))[:aw]


def lookup(hdr) -> tuple[Value, Value]:
    """(known, kind index) of a header dword: (OP, SUB_OP) in the table."""
    op = hdr[sp.SDMA_OP.lsb:sp.SDMA_OP.lsb + 8]
    sub = hdr[sp.SDMA_SUB_OP.lsb:sp.SDMA_SUB_OP.lsb + 8]
    known = Const(0)
    kind = Const(0, range(len(PACKETS)))
    for pkt in PACKETS:
        hit = (op == pkt.op) & (sub == pkt.sub_op)
        known = known | hit
        kind = kind | (hit.replicate(kind.shape().width) & pkt.index)
    return known, kind


_NOP_COUNT = sp.NOP.field("COUNT")
# What the parser needs to know of a dword if it is a header, worked out as the dword enters
# a fetcher's output register (rtl/cp/fetch.py `tag`), so the header's cycle in the parser
# starts from registers (as the CP's header decode, rtl/cp/packets.py DwordTag).
TAG = data.StructLayout({
    "known": 1,  # (OP, SUB_OP) is in the table
    "kind": range(len(PACKETS)),  # its index there
    "need": _NOP_COUNT.width,  # dwords the packet needs after its header (NOP: its COUNT)
    "xfer": 1,  # a COPY_LINEAR or CONSTANT_FILL header (it may start while transfers run)
})
assert all(p.fixed < 1 << _NOP_COUNT.width for p in PACKETS)


def header_tag(m, dword) -> Value:
    """The TAG of a 32-bit dword, as comb logic in `m`."""
    # Each field is an OR of the table's (OP, SUB_OP) hits, not worked out from `kind` (a
    # lookup of the kind and a compare of it after the hits' OR): the tag loads from the
    # fetcher's beat memory and the R channel, behind the MMU's answer in the top (the top's
    # short endpoints `sdma.dw_tag`, 16 bits, 10.9-11.5 ns)
    tag = Signal(TAG)
    op = dword[sp.SDMA_OP.lsb:sp.SDMA_OP.lsb + 8]
    sub = dword[sp.SDMA_SUB_OP.lsb:sp.SDMA_SUB_OP.lsb + 8]
    hits = {pkt.name: (op == pkt.op) & (sub == pkt.sub_op) for pkt in PACKETS}
    kw = tag.kind.shape().width
    known = Cat(*hits.values()).any()
    kind = Const(0, kw)
    need = Const(0, _NOP_COUNT.width)
    for pkt in PACKETS:
        kind = kind | (hits[pkt.name].replicate(kw) & pkt.index)
        if pkt is not sp.NOP:
            need = need | (hits[pkt.name].replicate(_NOP_COUNT.width) & pkt.fixed)
    # (a NOP's need is its COUNT, and so is a dword's that is no header: kind 0, as `lookup`)
    assert sp.NOP.index == 0
    other = Cat(*(h for name, h in hits.items() if name != sp.NOP.name)).any()
    m.d.comb += [tag.known.eq(known), tag.kind.eq(kind),
                 tag.need.eq(Mux(other, need, dword[_NOP_COUNT.lsb:_NOP_COUNT.lsb + _NOP_COUNT.width])),
                 tag.xfer.eq(hits["COPY_LINEAR"] | hits["CONSTANT_FILL"])]
    return tag


def unsupported_in(pkt: sp.SdmaPacketDef, dword: int, w) -> Value:
    """A closed-enum field of dword `dword` (-1: the header) in `w` holds a value the
    table marks unsupported (check 3)."""
    bad = Const(0)
    for f in pkt.fields:
        if f.dword == dword and f.enum and not f.open_enum:
            ok = [e.value for e in f.enum if e.supported]
            v = w[f.lsb:f.lsb + f.width]
            bad = bad | ~Cat(*(v == x for x in ok)).any()
    return bad


def misaligned_in(pkt: sp.SdmaPacketDef, dword: int, w) -> Value:
    """Bits below an address's low field, in dword `dword` in `w`, are set (check 4)."""
    bad = Const(0)
    for v in pkt.values:
        lo = pkt.field(v.fields[0])
        if lo.lsb and lo.dword == dword:
            bad = bad | w[:lo.lsb].any()
    return bad


def has_alignment(pkt: sp.SdmaPacketDef) -> bool:
    return any(pkt.field(v.fields[0]).lsb for v in pkt.values)
