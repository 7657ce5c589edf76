"""PM4 builders, decoder and disassembler, all derived from spec/packets.py.

Pure stdlib, so both the UMD and the KMD (which must not depend on amaranth, cocotb
or numpy) can import it. Like cocotbext-axi's channels, the per-packet code is
generated from the declaration at import time, so no bit position is written twice
and the builders are plain int shifts with no per-call table lookups
(`print(pm4.GENERATED_SOURCE)` shows what runs).

Building (one function per packet; positional arguments as in the table's `args`,
the other fields keyword-only with their defaults; 64-bit values split into lo/hi)::

    pm4.write_data(addr, data, *, dst_sel=MEMORY, wr_confirm=0, engine_sel=ME)
    pm4.indirect_buffer(base, size_dw, *, chain=0, valid=0, vmid=0, ...)
    pm4.wait_reg_mem(addr, ref, mask, function, *, mem_space=MEMORY, ..., poll_interval=16)
    pm4.release_mem(addr, data, *, event_type=..., int_sel=NONE, data_sel=DATA_32, int_ctxid=0)
    pm4.dma_data(dst, src, byte_count, *, src_sel=ADDRESS, cp_sync=0, raw_wait=0, ...)
    pm4.nop(n_payload)                         # n_payload + 1 dwords
    pm4.pad(n_dwords)                          # exactly n dwords of padding (Mesa's way)
    pm4.header(opcode, count), pm4.NOP_PAD, pm4.TYPE2_FILLER  # one-dword pads

Enum arguments take an int, a `pm4.<PACKET>_<FIELD>` IntEnum member or its name
("EQ"). Builders refuse what the device would reject (out-of-range, misaligned,
values the table marks unsupported) with a ValueError naming packet, argument and
field (the checks and their wording: spec/builder_args.py); `encode_fields` builds any
bit pattern, for malformed-stream tests.

Reading: `decode(dwords, offset)` -> Packet | Filler | Malformed, never raising on
32-bit input; `decode_stream` walks a buffer; `disassemble` / `listing` print it.
"""

from __future__ import annotations

import enum as _enum
from array import array as _array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from spec import packets as _packets
from spec.builder_args import (_choices, _dwords, _enum_arg, _int, _misaligned, _out_of_range, _rule_error,
                               _seq, _tail_len, _too_wide)
from spec.generated import field_enums, run_generated
from spec.packets import HEADER, MAX_PAYLOAD, PACKETS, TYPE2_FILLER, Field, PacketDef

__all__ = [
    "TYPE2_FILLER", "NOP_PAD", "MAX_PAYLOAD", "BUILDERS", "GENERATED_SOURCE",
    "header", "nop", "pad", "encode_fields",
    "Packet", "Filler", "Malformed", "Problem", "decode", "decode_stream",
    "describe", "disassemble", "listing",
    # plus one builder per packet (write_data, ...) and one IntEnum per enum field
    # (WRITE_DATA_DST_SEL, ...), added below from the table.
]

if _array("I").itemsize != 4:  # pragma: no cover - every platform CPython runs on today
    raise ImportError("spec.pm4 needs a 4-byte array('I')")

_TYPE = HEADER.field("TYPE")
_COUNT = HEADER.field("COUNT")
_OPCODE = HEADER.field("OPCODE")
_PREDICATE = HEADER.field("PREDICATE")
_SHADER_TYPE = HEADER.field("SHADER_TYPE")
_HDR_MASK = sum(f.mask for f in HEADER.fields)  # declared header bits; the rest are reserved
_TYPE3_BITS = _packets.PACKET_TYPE3 << _TYPE.lsb

# The generated builders call these by name in this module's namespace (_generate execs
# them here); naming them keeps the imports visibly used.
_CALLED_BY_GENERATED = (_enum_arg, _misaligned, _out_of_range, _rule_error, _seq, _tail_len)


# ---------------------------------------------------------------------------- code generation

def _plain_fields(p: PacketDef) -> list[Field]:
    """Fields that are builder arguments on their own (not parts of a Value)."""
    parts = {n for v in p.values for n in v.fields}
    return [f for f in p.fields if f.name not in parts]


def _default(f: Field) -> int:
    return f.values[f.default] if isinstance(f.default, str) else int(f.default)  # type: ignore[arg-type]


def _gen_builder(p: PacketDef, out: list[str], ns: dict) -> None:
    P = p.name
    fn = P.lower()
    plain = _plain_fields(p)
    kwonly = [f for f in plain if f.arg_name not in p.args]
    params = list(p.args)
    if kwonly:
        params += ["*"] + [f"{f.arg_name}={_default(f)}" for f in kwonly]
    body: list[str] = []
    emit = body.append
    var = {f.name: f.arg_name for f in plain}  # field name -> local holding its value

    for v in p.values:
        a, width, align = v.name, p.value_width(v), p.value_align(v)
        emit(f"if {a}.__class__ is not int: {a} = _int({P!r}, {a!r}, {a})")
        emit(f"if {a} >> {width}: raise _too_wide({P!r}, {a!r}, None, {width}, {a})")
        if align > 1:
            emit(f"if {a} & {align - 1}: raise _misaligned({P!r}, {a!r}, {align}, {a})")
    for f in plain:
        a, fref = f.arg_name, f"_F_{P}_{f.name}"
        ns[fref] = f
        if f.enum and not f.open_enum:
            sref = f"_S_{P}_{f.name}"
            ns[sref] = frozenset(e.value for e in f.enum if e.supported)
            emit(f"if {a}.__class__ is not int or {a} not in {sref}: {a} = _enum_arg({P!r}, {a!r}, {fref}, {a})")
            continue
        if f.enum:
            emit(f"if {a}.__class__ is not int: {a} = _enum_arg({P!r}, {a!r}, {fref}, {a})")
        else:
            emit(f"if {a}.__class__ is not int: {a} = _int({P!r}, {a!r}, {a})")
        emit(f"if {a} >> {f.width}: raise _too_wide({P!r}, {a!r}, {fref}, {f.width}, {a})")
    tail_expr = ""
    if p.tail:
        t, lo, hi = p.tail.arg_name, p.tail.min, p.max_payload - p.fixed
        if p.tail.ignored:
            emit(f"if {t}.__class__ is not int: {t} = _int({P!r}, {t!r}, {t})")
            emit(f"if not {lo} <= {t} <= {hi}: raise _out_of_range({P!r}, {t!r}, {lo}, {hi}, {t})")
            emit(f"n = {t}")
            tail_expr = f" + [0] * {t}"
        else:
            emit(f"if {t}.__class__ is not list: {t} = _seq({P!r}, {t!r}, {t})")
            emit(f"n = len({t})")
            emit(f"if not {lo} <= n <= {hi}: raise _tail_len({P!r}, {t!r}, {lo}, {hi}, n)")
            emit(f"{t} = _dwords({P!r}, {t!r}, {t})")
            tail_expr = f" + {t}"
    for i, r in enumerate(p.rules):
        sel_field = p.field(r.when)
        sel = var[r.when]
        nums = tuple(sel_field.values[n] for n in r.among)
        cond = f"{sel} == {nums[0]}" if len(nums) == 1 else f"{sel} in {nums!r}"
        bad = []
        if r.align > 1:
            bad.append(f"{r.value} & {r.align - 1}")
        if r.width is not None:
            bad.append(f"{r.value} >> {r.width}")
        rref = f"_R_{P}_{i}"
        ns[rref] = r
        emit(f"if {cond} and ({' or '.join(bad)}): "
             f"raise _rule_error({P!r}, {r.value!r}, {rref}, {sel}, _F_{P}_{r.when}, {r.value})")

    # The dwords: header, then each fixed payload dword as an OR of shifted arguments.
    hdr = _TYPE3_BITS | p.opcode << _OPCODE.lsb
    if p.tail:
        k = p.fixed - 1
        count = f"n + {k}" if k > 0 else f"n - {-k}" if k else "n"
        if p.count_wraps:  # no payload: COUNT all ones (AMD's header-only NOP)
            count = f"({count}) & {_COUNT.max:#x}"
        words = [f"{hdr:#010x} | ({count}) << {_COUNT.lsb}"]
    else:
        words = [f"{hdr | (p.fixed - 1) << _COUNT.lsb:#010x}"]
    for d in range(p.fixed):
        terms = []
        for f in p.fields_in(d):
            value = p.value_of(f.name)
            if value is None:
                terms.append(f"{var[f.name]} << {f.lsb}" if f.lsb else var[f.name])
                continue
            part = value.fields.index(f.name)
            shifted = f"{value.name} >> {32 * part}" if part else value.name
            if part == len(value.fields) - 1:
                terms.append(shifted)  # the width check already bounded the top part
            else:
                terms.append(f"({shifted}) & {f.mask:#010x}" if part else f"{shifted} & {f.mask:#010x}")
        words.append(" | ".join(terms))
    emit(f"return [{', '.join(words)}]{tail_expr}")

    out.append(f"def {fn}({', '.join(params)}):")
    doc = _builder_doc(p)
    if '"""' in doc or "\\" in doc:
        out.append(f"    {doc!r}")
    else:
        out.append('    """' + doc.replace("\n", "\n    ") + '\n    """')
    out.extend("    " + line for line in body)
    out.append("")


def _builder_doc(p: PacketDef) -> str:
    """The builder's docstring: the packet, then each argument in signature order."""
    entries: dict[str, str] = {}
    for v in p.values:
        entries[v.name] = f"{v.doc} ({p.value_width(v)} bits)"
    for f in _plain_fields(p):
        what = f"{f.name}{f.span}: {f.doc}"
        if f.enum:
            what += f" One of {_choices(f)}" + (" or any number" if f.open_enum else "") + "."
        if f.default is not None:
            what += f" Default {f.default}."
        entries[f.arg_name] = what
    if p.tail:
        entries[p.tail.arg_name] = p.tail.doc
    order = list(p.args) + [a for a in entries if a not in p.args]
    lines = [f"Build {p.name} (opcode {p.opcode:#04x}): {p.doc}", ""]
    lines += [f"{a}: {entries[a]}" for a in order]
    for r in p.rules:
        lines.append(f"When {r.when} is {'/'.join(r.among)}: {r.doc}")
    return "\n".join(lines)


def _gen_decoder(p: PacketDef, out: list[str]) -> None:
    """`_dec_<P>(payload) -> fields` and `_args_<P>(fields, data) -> builder kwargs`."""
    P = p.name
    out.append(f"def _dec_{P}(p):")
    items = []
    for f in p.fields:
        src = f"p[{f.dword}]"
        items.append(f"{f.name!r}: {src} >> {f.lsb} & {f.max:#x}" if f.lsb else f"{f.name!r}: {src} & {f.max:#x}")
    out.append(f"    return {{{', '.join(items)}}}")
    out.append("")
    out.append(f"def _args_{P}(f, data):")
    items = []
    for v in p.values:
        parts = []
        for i, n in enumerate(v.fields):
            fld = p.field(n)
            sh = 32 * i + fld.lsb
            parts.append(f"f[{n!r}] << {sh}" if sh else f"f[{n!r}]")
        items.append(f"{v.name!r}: {' | '.join(parts)}")
    for f in _plain_fields(p):
        items.append(f"{f.arg_name!r}: f[{f.name!r}]")
    if p.tail:
        t = p.tail
        items.append(f"{t.arg_name!r}: len(data)" if t.ignored else f"{t.arg_name!r}: list(data)")
    out.append(f"    return {{{', '.join(items)}}}")
    out.append("")


def _generate() -> str:
    ns = globals()
    src: list[str] = ["# Generated by spec/pm4.py from spec/packets.py at import time.", ""]
    for p in PACKETS:
        _gen_builder(p, src, ns)
        _gen_decoder(p, src)
    return run_generated(src, "spec.pm4", ns)


field_enums(PACKETS, globals(), __all__)

GENERATED_SOURCE = _generate()
"""The builders and decoders this module generated from the table."""

BUILDERS: dict[str, object] = {p.name: globals()[p.name.lower()] for p in PACKETS}
"""Packet name -> builder, e.g. BUILDERS["WRITE_DATA"] is write_data."""
__all__ += [p.name.lower() for p in PACKETS]

# opcode -> (name, fixed payload dwords, min COUNT, max COUNT, decoder, COUNT wraps): plain
# values, so decode() does no table walking.
_DECODERS = {p.opcode: (p.name, p.fixed, p.min_count, p.max_count, globals()[f"_dec_{p.name}"], p.count_wraps)
             for p in PACKETS}
NOP_PAD = _packets.NOP_PAD
"""0xFFFF1000: the one-dword NOP (COUNT 0x3FFF: the header alone), AMD's pad dword."""
_ARGS = {p.name: globals()[f"_args_{p.name}"] for p in PACKETS}


# ---------------------------------------------------------------------------- raw building

def header(opcode: int, count: int) -> int:
    """A type-3 header: any 8-bit opcode (known or not) and a 14-bit COUNT."""
    opcode, count = _int("header", "opcode", opcode), _int("header", "count", count)
    if opcode >> _OPCODE.width:
        raise _too_wide("header", "opcode", _OPCODE, _OPCODE.width, opcode)
    if count >> _COUNT.width:
        raise _too_wide("header", "count", _COUNT, _COUNT.width, count)
    return _TYPE3_BITS | opcode << _OPCODE.lsb | count << _COUNT.lsb


def pad(n_dwords: int) -> list[int]:
    """Exactly `n_dwords` of padding, as Mesa's winsys pads: one NOP whose payload covers
    the rest, or the one-dword NOP (NOP_PAD, 0xFFFF1000) for one dword."""
    n_dwords = _int("pad", "n_dwords", n_dwords)
    if n_dwords < 0:
        raise ValueError(f"pad: n_dwords must be >= 0, not {n_dwords}")
    most = _packets.NOP.max_payload + 1  # the longest NOP, header included
    out: list[int] = []
    while n_dwords > most:
        out += nop(most - 1)
        n_dwords -= most
    if n_dwords:
        out += nop(n_dwords - 1)
    return out


def encode_fields(name: str, fields: Mapping[str, int] | None = None, data: Sequence[int] = (),
                  *, count: int | None = None) -> list[int]:
    """Build a packet from raw field values (AMD names; missing fields are 0) and tail
    dwords, checking widths only: enum, alignment and support rules are not applied,
    so tests can build what the CP must reject. `count` overrides the header COUNT
    (a bad COUNT is the point of some tests)."""
    if name not in _packets.by_name:
        raise ValueError(f"encode_fields: unknown packet {name!r}")
    p = _packets.by_name[name]
    fields = fields or {}
    known = {f.name for f in p.fields}
    for k in fields:
        if k not in known:
            raise ValueError(f"encode_fields: {name} has no field {k!r}")
    payload = [0] * p.fixed
    for f in p.fields:
        v = _int(name, f.name, fields.get(f.name, 0))
        if v >> f.width:
            raise _too_wide(name, f.name, f, f.width, v)
        payload[f.dword] |= v << f.lsb
    tail = _dwords(name, "data", list(data))
    if p.tail is None and tail:
        raise ValueError(f"encode_fields: {name} has no variable tail")
    payload += tail
    if count is None:
        count = len(payload) - 1
        if p.count_wraps:
            count &= _COUNT.max  # no payload: the all-ones COUNT (AMD's NOP_PAD)
    return [header(p.opcode, count)] + payload


# ---------------------------------------------------------------------------- decoding

class Problem(str, _enum.Enum):
    """Why a dword does not start a packet this device can run."""

    UNKNOWN_OPCODE = "UNKNOWN_OPCODE"  # type-3 header, opcode not in the table
    BAD_TYPE = "BAD_TYPE"  # type 0 or 1
    BAD_COUNT = "BAD_COUNT"  # known opcode, COUNT outside its legal range
    TRUNCATED = "TRUNCATED"  # COUNT runs past the end of the given dwords


@dataclass(slots=True)
class Packet:
    """A decoded type-3 packet. `fields` maps AMD field names to values; `data` is the
    variable tail; `length` counts header + payload dwords; `offset` is in dwords."""

    offset: int
    header: int
    name: str
    opcode: int
    count: int
    fields: dict[str, int]
    data: tuple[int, ...]
    length: int
    payload: tuple[int, ...]

    ok = True

    @property
    def defn(self) -> PacketDef:
        return _packets.by_name[self.name]

    @property
    def args(self) -> dict:
        """Keyword arguments that rebuild this packet: `BUILDERS[p.name](**p.args)`."""
        return _ARGS[self.name](self.fields, self.data)

    @property
    def predicate(self) -> int:
        return _PREDICATE.get(self.header)

    @property
    def shader_type(self) -> int:
        return _SHADER_TYPE.get(self.header)

    @property
    def reserved(self) -> dict[int, int]:
        """Set bits no field declares, by payload dword (-1: the header). Empty when clean."""
        out = {}
        if self.header & ~_HDR_MASK & 0xFFFF_FFFF:
            out[-1] = self.header & ~_HDR_MASK & 0xFFFF_FFFF
        d = self.defn
        for i, w in enumerate(self.payload):
            bits = w & ~d.defined_mask(i) & 0xFFFF_FFFF
            if bits:
                out[i] = bits
        return out

    @property
    def dwords(self) -> list[int]:
        return [self.header, *self.payload]


@dataclass(slots=True)
class Filler:
    """A one-dword type-2 packet (its PAD bits are ignored)."""

    offset: int
    header: int = TYPE2_FILLER
    length: int = 1
    name: str = "TYPE2_FILLER"

    ok = True


@dataclass(slots=True)
class Malformed:
    """Something the CP must refuse. `length` is how far to skip to resynchronise: the
    declared length for a type-3 header (clipped to what is there), else one dword."""

    offset: int
    header: int
    problem: Problem
    length: int
    opcode: int | None = None
    count: int | None = None
    name: str | None = None  # the packet name when the opcode is known
    needed: int | None = None  # dwords the header declares (TRUNCATED)
    available: int | None = None  # dwords from the header to the end (TRUNCATED)

    ok = False

    @property
    def message(self) -> str:
        return describe(self)


def _ints(seq: Sequence[int], a: int, b: int) -> tuple[int, ...]:
    s = seq[a:b]
    if isinstance(s, (list, tuple)):
        return tuple(s)
    return tuple(s.tolist()) if hasattr(s, "tolist") else tuple(map(int, s))


def decode(dwords: Sequence[int], offset: int = 0) -> Packet | Filler | Malformed:
    """Decode the packet whose header is `dwords[offset]`. Never raises on 32-bit
    dwords; IndexError only when `offset` is not inside `dwords`."""
    n = len(dwords)
    if not 0 <= offset < n:
        raise IndexError(f"decode: offset {offset} is outside a stream of {n} dwords")
    h = int(dwords[offset])
    t = h >> _TYPE.lsb & _TYPE.max
    if t != _packets.PACKET_TYPE3:
        if t == _packets.PACKET_TYPE2:
            return Filler(offset, h)
        return Malformed(offset, h, Problem.BAD_TYPE, 1)
    op = h >> _OPCODE.lsb & _OPCODE.max
    count = h >> _COUNT.lsb & _COUNT.max
    length = count + 2
    left = n - offset
    entry = _DECODERS.get(op)
    if entry is None:
        return Malformed(offset, h, Problem.UNKNOWN_OPCODE, min(length, left), op, count)
    name, fixed, lo, hi, dec, wraps = entry
    if wraps:
        length = ((count + 1) & _COUNT.max) + 1
    if not lo <= count <= hi:
        return Malformed(offset, h, Problem.BAD_COUNT, min(length, left), op, count, name)
    if length > left:
        return Malformed(offset, h, Problem.TRUNCATED, left, op, count, name, length, left)
    payload = _ints(dwords, offset + 1, offset + length)
    return Packet(offset, h, name, op, count, dec(payload), payload[fixed:], length, payload)


def decode_stream(dwords: Sequence[int], offset: int = 0,
                  end: int | None = None) -> Iterator[Packet | Filler | Malformed]:
    """Decode `dwords[offset:end]` packet by packet, resynchronising after errors.
    Offsets in the results stay relative to `dwords`."""
    end = len(dwords) if end is None else min(end, len(dwords))
    window = _ints(dwords, offset, end)
    pos = 0
    while pos < len(window):
        item = decode(window, pos)
        item.offset += offset
        yield item
        pos += item.length


# ---------------------------------------------------------------------------- listing

_DEFAULTS = {p.name: {f.name: _default(f) for f in _plain_fields(p) if f.default is not None} for p in PACKETS}


def _usual(f: Field, v: int) -> bool:
    """False for a value the device refuses (reserved or unsupported): always list it."""
    if not f.enum or f.open_enum:
        return True
    e = next((e for e in f.enum if e.value == v), None)
    return e is not None and e.supported


def _show_field(f: Field, v: int) -> str:
    if f.enum:
        name = f.names.get(v)
        if name is None:
            return f"{v:#x}" if f.open_enum else f"{v}(reserved)"
        if not next(e for e in f.enum if e.value == v).supported:
            return f"{name}(unsupported)"
        return name
    return str(v) if f.decimal else f"{v:#x}"


def _show_dwords(data: Sequence[int], max_data: int) -> str:
    shown = [f"{d:#010x}" for d in data[:max_data]]
    if len(data) > max_data:
        shown.append(f"... +{len(data) - max_data}")
    return "[" + ", ".join(shown) + "]"


def describe(item: Packet | Filler | Malformed, *, verbose: bool = False, max_data: int = 8) -> str:
    """One line for a decoded item, without address: `WRITE_DATA  dst_sel=MEMORY ...`.
    Keyword fields at their builder default (0, or e.g. RELEASE_MEM's EVENT_TYPE
    CACHE_FLUSH_AND_INV_TS_EVENT) are left out unless `verbose`, so a line shows what
    the packet chose."""
    if isinstance(item, Filler):
        pad = item.header & _packets.TYPE2_PAD.mask
        return f"TYPE2 FILLER pad={pad:#x}" if pad else "TYPE2 FILLER"
    if isinstance(item, Malformed):
        pr = item.problem
        if pr is Problem.UNKNOWN_OPCODE:
            return f"UNKNOWN op={item.opcode:#04x} count={item.count}"
        if pr is Problem.TRUNCATED:
            return f"TRUNCATED {item.name}: needs {item.needed} dwords, {item.available} left"
        if pr is Problem.BAD_COUNT:
            p = _packets.by_name[item.name]  # type: ignore[index]
            need = f">= {p.min_count}" if p.variable else f"{p.min_count}"
            return f"BAD COUNT {item.name}: count={item.count}, must be {need}"
        t = item.header >> _TYPE.lsb & _TYPE.max
        return f"BAD TYPE {t}: not a type-3 header"
    p = item.defn
    words: list[str] = []
    done: set[str] = set()
    args = item.args
    for f in p.fields:
        if f.name in done:
            continue
        value = p.value_of(f.name)
        if value is not None:
            done.update(value.fields)
            words.append(f"{value.name}={args[value.name]:#010x}")
            continue
        v = item.fields[f.name]
        if verbose or f.arg_name in p.args or not _usual(f, v) or v != _DEFAULTS[p.name][f.name]:
            words.append(f"{f.arg_name}={_show_field(f, v)}")
    if p.tail:
        t = p.tail
        words.append(f"{t.arg_name}={len(item.data)}" if t.ignored
                     else f"{t.arg_name}={_show_dwords(item.data, max_data)}")
    if item.predicate:
        words.append("predicate=1")
    if item.shader_type:
        words.append("shader_type=1")
    for i, bits in item.reserved.items():
        words.append(f"RESERVED[{'hdr' if i == -1 else f'dw{i}'}]={bits:#010x}")
    return f"{p.name}  {' '.join(words)}" if words else p.name


def disassemble(dwords: Sequence[int], base: int = 0, *, verbose: bool = False,
                max_data: int = 8) -> list[str]:
    """One line per packet: `0x0010: c0033700  WRITE_DATA  dst_sel=MEMORY ...`.

    `base` is the byte address of dwords[0]; lines show byte addresses and the header
    dword. Malformed packets are listed as such, never raised."""
    return [f"0x{base + 4 * item.offset:04x}: {item.header:08x}  "
            f"{describe(item, verbose=verbose, max_data=max_data)}"
            for item in decode_stream(dwords)]


def listing(dwords: Sequence[int], base: int = 0, **kw) -> str:
    """`disassemble` joined into one string."""
    return "\n".join(disassemble(dwords, base, **kw))
