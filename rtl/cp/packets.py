"""The parser's checks, derived from the packet table (spec/packets.py): a packet's
fields and address values as the payload registers hold them, and the UNSUPPORTED,
beyond-the-bus and alignment rules of docs/hardware.md. `p` is the payload as a list of
32-bit Values (dword i of the packet's payload at p[i])."""

from amaranth.hdl import Cat, Const, Signal, Value
from amaranth.lib import data
from amaranth.utils import ceil_log2

from spec import packets as pk

MAX_FIXED = max(p.fixed for p in pk.PACKETS)  # the longest fixed payload: the parser's registers


def field(p, pkt, name):
    f = pkt.field(name)
    return p[f.dword][f.bits]


def value(p, pkt, name, addr_width):
    """A lo/hi Value as the bus sees it: the raw dwords, cut to the address width."""
    v = pkt.value(name)
    lo, hi = (pkt.field(n) for n in v.fields)
    return Cat(p[lo.dword], p[hi.dword])[:addr_width]


def _in(dword, dwords):
    return dwords is None or dword in dwords


def unsupported(p, pkt, dwords=None):
    """Any closed-enum field holding a value the device does not implement (of the fields
    in `dwords`, if given)."""
    bad = Const(0)
    for f in pkt.fields:
        if f.enum and not f.open_enum and _in(f.dword, dwords):
            v = p[f.dword][f.bits]
            ok = Const(0)
            for e in f.enum:
                if e.supported:
                    ok = ok | (v == e.value)
            bad = bad | ~ok
    return bad


def beyond_bus(p, pkt, addr_width, tag=None):
    """Address bits above the bus width set in the packet's first address value
    (the ADDR_HI fields are 32 bits wide, the bus has 48 address bits). With `tag` (the last
    fixed dword's DwordTag value), a high dword that is the last one is read from its tag."""
    if not pkt.values or pkt is pk.INDIRECT_BUFFER or pkt is pk.DMA_DATA:
        return Const(0)
    v = pkt.value(pkt.values[0].name)
    hi = pkt.field(v.fields[1])
    if tag is not None and hi.dword == pkt.fixed - 1:
        return tag.beyond
    return p[hi.dword][addr_width - 32:] != 0


def checks_at(p, pkt, k, addr_width):
    """The checks (unsupported, misaligned, IB beyond the bus) that can be made once payload
    dword k is in, and not before: those whose latest dword is k. The parser ORs them up
    dword by dword (rtl/cp/parser.py), so the cycle of the last fixed dword only combines
    flags."""
    unsup = unsupported(p, pkt, {k})
    misal = Const(0)
    for used, term in _misaligned_terms(pkt):
        if max(used) == k:
            misal = misal | term(p)
    beyond = Const(0)
    if pkt is pk.INDIRECT_BUFFER and pk.INDIRECT_BUFFER.field("IB_BASE_HI").dword == k:
        beyond = ib_beyond_bus(p, addr_width)
    return unsup, misal, beyond


def ib_beyond_bus(p, addr_width):
    """IB_BASE_HI (32 bits, as gfx9 emits it) has bits above the bus's address width: the
    IB cannot be fetched (BUS_DECERR, checked after the IB's own checks)."""
    hi = pk.INDIRECT_BUFFER.field("IB_BASE_HI")
    return p[hi.dword][addr_width - 32:] != 0


def _misaligned_terms(pkt):
    """The alignment checks as (dwords they read, function(p) -> Value)."""
    terms = []
    for v in pkt.values:
        lo = pkt.field(v.fields[0])
        if lo.lsb:
            terms.append(({lo.dword}, lambda p, lo=lo: p[lo.dword][:lo.lsb] != 0))
    for r in pkt.rules:
        if r.align > 1:
            w = pkt.field(r.when)
            lo = pkt.field(pkt.value(r.value).fields[0])

            def term(p, r=r, w=w, lo=lo):
                when = Const(0)
                for name in r.among:
                    when = when | (p[w.dword][w.bits] == w.values[name])
                return when & (p[lo.dword][:ceil_log2(r.align)] != 0)
            terms.append(({w.dword, lo.dword}, term))
    return terms


def misaligned(p, pkt, dwords=None):
    """Bits below an *_LO address field, and alignment rules (e.g. 64-bit fences): the
    checks that read only dwords in `dwords`, if given."""
    bad = Const(0)
    for used, term in _misaligned_terms(pkt):
        if dwords is None or used <= set(dwords):
            bad = bad | term(p)
    return bad


# ---------------------------------------------------------------------------- header decode
# What the parser needs to know of a dword if it is a header, worked out as the dword enters
# a fetcher's output register (rtl/cp/fetch.py `tag`), so the parser's header cycle starts
# from registers.
_TYPE = pk.HEADER.field("TYPE")
_OPCODE = pk.HEADER.field("OPCODE")
_COUNT = pk.HEADER.field("COUNT")

_HEADER_FIELDS = {
    "filler": 1,    # a one-dword packet: a type-2 dword, or the header-only NOP
    "illegal": 1,   # not a type-3 header of an implemented packet: ILLEGAL_OPCODE
    "kind": range(len(pk.PACKETS)),  # the packet's index in spec/packets.py
    "count_ok": 1,  # COUNT is legal for that packet
    "count0": 1,    # COUNT is 0 (one payload dword)
    "need": _COUNT.width + 1,  # dwords the packet spans: COUNT + 2
    "is_dma": 1,    # a DMA_DATA header (it may start while transfers run)
}


def _last(pkt):
    return pkt.fixed - 1


def _field_in_last(pkt, name):
    f = pkt.field(name)
    if f.dword != _last(pkt):
        raise NotImplementedError(f"{pkt.name}.{name} is checked from the last fixed dword's tag")
    return f


class DwordTag:
    """What the parser needs to know of a dword, worked out as the dword arrives (rtl/cp/fetch.py
    `tag`), so the parser decides from registers: the dword's decode as a header, and the
    checks a packet makes on its last fixed payload dword, for each packet, as if the dword
    were that one (the checks on earlier dwords read the payload registers). Every check
    reads one dword: a rule that combined the last dword with an earlier one would need
    both, and is refused here (NotImplementedError) rather than checked late."""

    def __init__(self, dma_max_log2: int, addr_width: int):
        self.dma_max_log2 = dma_max_log2
        self.checks = {}  # name → function(dword) -> 1-bit Value
        # an address's high dword with bits above the bus (beyond_bus, when it is the last)
        self.checks["beyond"] = lambda d: d[addr_width - 32:] != 0
        for pkt in pk.PACKETS:
            if not pkt.fixed:
                continue
            last = _last(pkt)
            for used, _ in _misaligned_terms(pkt):
                if last in used and used != {last}:
                    raise NotImplementedError(f"{pkt.name}: an alignment rule reads the last fixed dword "
                                              "and an earlier one")
            probe = [Const(0, 32)] * last + [Signal(32)]
            if not isinstance(unsupported(probe, pkt, {last}), Const):
                self.checks[f"unsupported{pkt.index}"] = \
                    lambda d, pkt=pkt, last=last: unsupported([None] * last + [d], pkt, {last})
            if not isinstance(misaligned(probe, pkt, {last}), Const):
                self.checks[f"misaligned{pkt.index}"] = \
                    lambda d, pkt=pkt, last=last: misaligned([None] * last + [d], pkt, {last})
        size = _field_in_last(pk.INDIRECT_BUFFER, "IB_SIZE")
        self.checks["ib_size_zero"] = lambda d: d[size.bits] == 0
        count = _field_in_last(pk.DMA_DATA, "BYTE_COUNT")
        self.checks["dma_too_big"] = lambda d: d[count.bits] > (1 << dma_max_log2)
        self.layout = data.StructLayout({**_HEADER_FIELDS, **{n: 1 for n in self.checks}})

    def check(self, tag, name: str, pkt=None):
        """The tag's bit `name` (with `pkt`: that packet's), or 0 when no such check exists."""
        key = name if pkt is None else f"{name}{pkt.index}"
        return getattr(tag, key) if key in self.checks else Const(0)

    def __call__(self, m, dword):
        """The tag of `dword` (a 32-bit Value), as comb logic in `m`."""
        tag = Signal(self.layout)
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
        m.d.comb += [getattr(tag, n).eq(fn(dword)) for n, fn in self.checks.items()]
        return tag


def pack_fields(layout, **values):
    """A 32-bit register word from field values at the positions `layout` gives
    ({name: (lsb, width)}, csr.REG_FIELDS): CP_ERROR, VM_FAULT_STATUS, SDMA_ERROR in IH entries."""
    word = Const(0, 32)
    for name, v in values.items():
        lsb, width = layout[name]
        word = word | (Value.cast(v)[:width] << lsb)
    return word[:32]
