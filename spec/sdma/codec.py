"""SDMA builders, decoder and disassembler, all derived from spec/sdma/packets.py.

Pure stdlib, as spec/pm4.py, whose argument checks and error messages it shares. One
builder per packet, positional arguments as in the table's `args`, the other fields
keyword-only with their defaults; 64-bit values split into lo/hi; byte counts are given
as bytes (the builder writes AMD's bytes − 1)::

    sdma.copy_linear(dst, src, byte_count)           # 7 dwords
    sdma.write_linear(dst, data)                     # 4 + len(data)
    sdma.constant_fill(dst, value, byte_count, *, fillsize=BYTES)
    sdma.fence(addr, data)  sdma.trap(int_context=0)
    sdma.poll_regmem(addr, value, mask, func, *, interval=10, retry_count=0xFFF)
    sdma.indirect_buffer(base, size_dw, *, vmid=0)
    sdma.nop(n_payload)  sdma.pad(n_dwords)          # NOP_PAD (0) is the one-dword NOP

Builders refuse what the engine would reject (a ValueError naming packet, argument and
field); `encode_fields` builds any bit pattern for malformed-stream tests. They are plain
Python generated from the table at import (`GENERATED_SOURCE`), as spec/pm4.py's; a call
they do not take themselves (a positional argument by keyword, a wrong call) is bound by
inspect.Signature.bind, whose TypeError, with the packet's name, is the wrong call's.
`decode(dwords, offset)` -> Packet | Malformed never raises on 32-bit input;
`decode_stream`, `describe`, `disassemble` and `listing` as spec/pm4.py's.
"""

from __future__ import annotations

import enum as _enum
import inspect as _inspect
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from spec.builder_args import _dwords, _enum_arg, _int, _misaligned, _out_of_range, _seq, _tail_len, _too_wide
from spec.generated import field_enums, run_generated
from spec.layout import Field
from spec.pm4 import _show_dwords, _show_field, _usual
from spec.sdma import packets as _sp
from spec.sdma.packets import MAX_COPY_BYTES, MAX_WRITE_DW, SDMA_OP, SDMA_PACKETS, SDMA_SUB_OP, SdmaPacketDef

__all__ = ["BUILDERS", "NOP_PAD", "MAX_COPY_BYTES", "MAX_WRITE_DW", "Packet", "Malformed", "Problem", "pad", "encode_fields",
           "decode", "decode_stream", "describe", "disassemble", "listing", "header"]

NOP_PAD = _sp.NOP_PAD


def header(op: int, sub_op: int = 0, upper: int = 0) -> int:
    """A header dword: any 8-bit op and sub_op, and the packet-specific bits [31:16]."""
    for name, v, w in (("op", op, 8), ("sub_op", sub_op, 8), ("upper", upper, 16)):
        v = _int("header", name, v)
        if v >> w:
            raise _too_wide("header", name, None, w, v)
    return op | sub_op << 8 | upper << 16


# ---------------------------------------------------------------------------- builders

def _plain_fields(p: SdmaPacketDef) -> list[Field]:
    parts = {n for v in p.values for n in v.fields}
    return [f for f in p.fields if f.name not in parts and f.name != p.length_field]


def _default(f: Field) -> int:
    return f.values[f.default] if isinstance(f.default, str) else int(f.default)  # type: ignore[arg-type]


def _bind(sig: _inspect.Signature, P: str, names: tuple[str, ...], args: tuple, kwargs: dict) -> tuple:
    """The builder's arguments in `names` order, any way they were given: the generated
    builders take their common calls (every positional argument by position, keyword-only
    ones by keyword) themselves and leave the rest, and every wrong call, to this, so a
    wrong call's TypeError is Signature.bind's, with the packet's name."""
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{P}: {e}") from None
    bound.apply_defaults()
    a = bound.arguments
    return tuple(a[n] for n in names)


def _gen_builder(p: SdmaPacketDef, out: list[str], ns: dict) -> None:
    """The source of one builder: plain Python, its checks in the order the table lists its
    values, fields and tail, each check's cold path a call of spec/builder_args.py's. It
    was one generic function binding every call through inspect.Signature.bind and walking
    the table: some 15 µs a packet, several objects made each, and the KMD's SDMA ring
    builds three for every job it runs (under the driver's lock; a garbage collection in a
    pass that ran thousands of jobs took up to 0.9 s of it)."""
    P, fn = f"SDMA {p.name}", p.name.lower()
    plain = _plain_fields(p)
    kwonly = [f for f in plain if f.arg_name not in p.args]
    params = [_inspect.Parameter(a, _inspect.Parameter.POSITIONAL_OR_KEYWORD) for a in p.args]
    params += [_inspect.Parameter(f.arg_name, _inspect.Parameter.KEYWORD_ONLY, default=_default(f)) for f in kwonly]
    names = tuple(p.args) + tuple(f.arg_name for f in kwonly)
    ns[f"_SIG_{p.name}"] = _inspect.Signature(params)
    ns[f"_NAMES_{p.name}"] = names
    ns[f"_KW_{p.name}"] = frozenset(f.arg_name for f in kwonly)
    body: list[str] = []
    emit = body.append
    # the arguments: every positional one by position and keyword-only ones by keyword here,
    # anything else (and every wrong call) by _bind
    npos = len(p.args)
    lhs = ", ".join(names) + ("," if len(names) == 1 else "")
    if kwonly:
        emit(f"if len(_a) == {npos} and (not _k or _k.keys() <= _KW_{p.name}):")
        if npos:
            emit(f"    {', '.join(p.args)}{',' if npos == 1 else ''} = _a")
        emit("    if _k:")
        for f in kwonly:
            emit(f"        {f.arg_name} = _k.get({f.arg_name!r}, {_default(f)})")
        emit("    else:")
        emit(f"        {', '.join(f.arg_name for f in kwonly)} = {', '.join(str(_default(f)) for f in kwonly)}")
    else:
        emit(f"if len(_a) == {npos} and not _k:")
        emit(f"    {', '.join(p.args)}{',' if npos == 1 else ''} = _a" if npos else "    pass")
    emit("else:")
    emit(f"    {lhs} = _bind(_SIG_{p.name}, {P!r}, _NAMES_{p.name}, _a, _k)")
    terms: dict[int, list[str]] = {}  # dword (-1: the header) -> the expressions ORed into it
    for v in p.values:
        a, width, align = v.name, p.value_width(v), p.value_align(v)
        emit(f"if {a}.__class__ is not int: {a} = _int({P!r}, {a!r}, {a})")
        emit(f"if {a} < 0 or {a} >> {width}: raise _too_wide({P!r}, {a!r}, None, {width}, {a})")
        if align > 1:
            emit(f"if {a} & {align - 1}: raise _misaligned({P!r}, {a!r}, {align}, {a})")
        for i, n in enumerate(v.fields):
            f = p.field(n)
            part = f"({a} >> {32 * i})" if i else a
            terms.setdefault(f.dword, []).append(f"{part} & {f.mask:#x}")
    for f in plain:
        a, fref = f.arg_name, f"_F_{p.name}_{f.name}"
        ns[fref] = f
        if f.enum:
            sref = f"_S_{p.name}_{f.name}"
            ns[sref] = frozenset(e.value for e in f.enum if e.supported)
            emit(f"if {a}.__class__ is not int or {a} not in {sref}: {a} = _enum_arg({P!r}, {a!r}, {fref}, {a})")
        else:
            emit(f"if {a}.__class__ is not int: {a} = _int({P!r}, {a!r}, {a})")
        if f.name in p.minus_one:
            emit(f"if not 1 <= {a} <= {f.max + 1}: raise _out_of_range({P!r}, {a!r}, 1, {f.max + 1}, {a})")
            val = f"({a} - 1)"
        else:
            emit(f"if {a} < 0 or {a} >> {f.width}: raise _too_wide({P!r}, {a!r}, {fref}, {f.width}, {a})")
            val = a
        terms.setdefault(f.dword, []).append(f"{val} << {f.lsb}" if f.lsb else val)
    tail = ""
    if p.tail is not None:
        t, lo, hi = p.tail.arg_name, p.tail.min, p.max_tail
        lf = p.field(p.length_field)  # type: ignore[arg-type]
        if p.tail.ignored:
            emit(f"if {t}.__class__ is not int: {t} = _int({P!r}, {t!r}, {t})")
            emit(f"if not {lo} <= {t} <= {hi}: raise _out_of_range({P!r}, {t!r}, {lo}, {hi}, {t})")
            emit(f"_n = {t}")
            tail = " + [0] * _n"
        else:
            emit(f"if {t}.__class__ is not list: {t} = _seq({P!r}, {t!r}, {t})")
            emit(f"_n = len({t})")
            emit(f"if not {lo} <= _n <= {hi}: raise _tail_len({P!r}, {t!r}, {lo}, {hi}, _n)")
            emit(f"{t} = _dwords({P!r}, {t!r}, {t})")
            tail = f" + {t}"
        n = f"(_n - {p.length_bias})" if p.length_bias else "_n"
        terms.setdefault(lf.dword, []).append(f"{n} << {lf.lsb}" if lf.lsb else n)
    words = []
    for d in range(-1, p.fixed):
        const = p.header if d == -1 else 0
        ts = terms.get(d, [])
        words.append(" | ".join(([f"{const:#x}"] if const or not ts else []) + ts))
    emit(f"return [{', '.join(words)}]{tail}")
    out.append(f"def {fn}(*_a, **_k):")
    out.extend("    " + line for line in body)
    out.append("")


def _generate() -> str:
    ns = globals()
    src: list[str] = ["# Generated by spec/sdma/codec.py from spec/sdma/packets.py at import time.", ""]
    for p in SDMA_PACKETS:
        _gen_builder(p, src, ns)
    text = run_generated(src, "spec.sdma", ns)
    for p in SDMA_PACKETS:
        build = ns[p.name.lower()]
        build.__qualname__ = build.__name__
        build.__signature__ = ns[f"_SIG_{p.name}"]
        build.__doc__ = f"Build SDMA {p.name} (op {p.op}, sub_op {p.sub_op}): {p.doc}"
    return text


GENERATED_SOURCE = _generate()
"""The builders this module generated from the table (`print(sdma.codec.GENERATED_SOURCE)`)."""

BUILDERS: dict[str, object] = {}
for _p in SDMA_PACKETS:
    BUILDERS[_p.name] = globals()[_p.name.lower()]
    __all__.append(_p.name.lower())
field_enums(SDMA_PACKETS, globals(), __all__, doc_prefix="SDMA ")


def pad(n_dwords: int) -> list[int]:
    """Exactly `n_dwords` of padding as amdgpu's sdma_v4_0_ring_insert_nop with burst NOPs:
    one NOP whose COUNT covers the rest (NOP_PAD alone for one dword)."""
    n_dwords = _int("pad", "n_dwords", n_dwords)
    if n_dwords < 0:
        raise ValueError(f"pad: n_dwords must be >= 0, not {n_dwords}")
    out: list[int] = []
    most = _sp.NOP.max_tail + 1
    while n_dwords:
        k = min(n_dwords, most)
        out += nop(k - 1)  # noqa: F821 - generated above
        n_dwords -= k
    return out


def encode_fields(name: str, fields: Mapping[str, int] | None = None, data: Sequence[int] = (),
                  *, length: int | None = None) -> list[int]:
    """Build a packet from raw field values (AMD names; missing fields are 0) and tail dwords,
    checking widths only, so tests can build what the engine must reject. The length field is
    set from `data` unless given in `fields`."""
    if name not in _sp.by_name:
        raise ValueError(f"encode_fields: unknown SDMA packet {name!r}")
    p = _sp.by_name[name]
    fields = dict(fields or {})
    known = {f.name for f in p.fields}
    for k in fields:
        if k not in known:
            raise ValueError(f"encode_fields: SDMA {name} has no field {k!r}")
    tail = _dwords(name, "data", list(data))
    if p.tail is None and tail:
        raise ValueError(f"encode_fields: SDMA {name} has no variable tail")
    if p.tail is not None and p.length_field not in fields:
        fields[p.length_field] = max(0, len(tail) - p.length_bias)  # type: ignore[index]
    words = [p.header] + [0] * p.fixed
    for f in p.fields:
        v = _int(name, f.name, fields.get(f.name, 0))
        if v >> f.width:
            raise _too_wide(name, f.name, f, f.width, v)
        words[f.dword + 1] |= v << f.lsb
    return words + tail


# ---------------------------------------------------------------------------- decoding

class Problem(str, _enum.Enum):
    """Why a dword does not start a packet the engine can run."""

    UNKNOWN_OPCODE = "UNKNOWN_OPCODE"  # (op, sub_op) not in the table
    TRUNCATED = "TRUNCATED"  # the packet runs past the end of the given dwords


@dataclass(slots=True)
class Packet:
    offset: int
    header: int
    name: str
    fields: dict[str, int]
    data: tuple[int, ...]
    length: int
    payload: tuple[int, ...]

    ok = True

    @property
    def defn(self) -> SdmaPacketDef:
        return _sp.by_name[self.name]

    @property
    def args(self) -> dict:
        """Keyword arguments that rebuild this packet: `BUILDERS[p.name](**p.args)`."""
        p, f = self.defn, self.fields
        out: dict = {}
        for v in p.values:
            out[v.name] = sum(f[n] << (32 * i + p.field(n).lsb) for i, n in enumerate(v.fields))
        for fl in _plain_fields(p):
            out[fl.arg_name] = f[fl.name] + (1 if fl.name in p.minus_one else 0)
        if p.tail is not None:
            out[p.tail.arg_name] = len(self.data) if p.tail.ignored else list(self.data)
        return out

    @property
    def reserved(self) -> dict[int, int]:
        """Set bits no field declares, by dword (-1: the header). Empty when clean."""
        d, out = self.defn, {}
        for i, w in enumerate((self.header, *self.payload)):
            bits = w & ~d.defined_mask(i - 1) & 0xFFFF_FFFF
            if bits:
                out[i - 1] = bits
        return out

    @property
    def dwords(self) -> list[int]:
        return [self.header, *self.payload]


@dataclass(slots=True)
class Malformed:
    offset: int
    header: int
    problem: Problem
    length: int
    name: str | None = None
    needed: int | None = None
    available: int | None = None

    ok = False

    @property
    def op(self) -> int:
        return SDMA_OP.get(self.header)

    @property
    def sub_op(self) -> int:
        return SDMA_SUB_OP.get(self.header)

    @property
    def message(self) -> str:
        return describe(self)


def packet_length(p: SdmaPacketDef, h: int, dw: Sequence[int], at: int) -> int | None:
    """Dwords of the packet `p` whose header `h` is at dwords[at]: None when the dword that
    holds its length is past the end."""
    if p.tail is None:
        return 1 + p.fixed
    lf = p.field(p.length_field)  # type: ignore[arg-type]
    if lf.dword == -1:
        w = h
    elif at + 1 + lf.dword < len(dw):
        w = int(dw[at + 1 + lf.dword])
    else:
        return None
    return 1 + p.fixed + lf.get(w) + p.length_bias


def decode(dwords: Sequence[int], offset: int = 0) -> Packet | Malformed:
    n = len(dwords)
    if not 0 <= offset < n:
        raise IndexError(f"decode: offset {offset} is outside a stream of {n} dwords")
    h = int(dwords[offset])
    p = _sp.by_op.get((SDMA_OP.get(h), SDMA_SUB_OP.get(h)))
    if p is None:
        return Malformed(offset, h, Problem.UNKNOWN_OPCODE, 1)
    left = n - offset
    length = packet_length(p, h, dwords, offset)
    if length is None or length > left:
        return Malformed(offset, h, Problem.TRUNCATED, left, p.name, length or 1 + p.fixed + p.length_bias, left)
    payload = tuple(int(x) for x in dwords[offset + 1:offset + length])
    words = (h, *payload)
    fields = {f.name: f.get(words[f.dword + 1]) for f in p.fields}
    return Packet(offset, h, p.name, fields, payload[p.fixed:], length, payload)


def decode_stream(dwords: Sequence[int], offset: int = 0, end: int | None = None) -> Iterator[Packet | Malformed]:
    end = len(dwords) if end is None else min(end, len(dwords))
    window = [int(x) for x in dwords[offset:end]]
    pos = 0
    while pos < len(window):
        item = decode(window, pos)
        item.offset += offset
        yield item
        pos += item.length


# ---------------------------------------------------------------------------- listing

_DEFAULTS = {p.name: {f.name: _default(f) for f in _plain_fields(p) if f.default is not None} for p in SDMA_PACKETS}


def describe(item: Packet | Malformed, *, verbose: bool = False, max_data: int = 8) -> str:
    """One line: `COPY_LINEAR  dst=0x00200000 src=0x00100000 byte_count=4096`."""
    if isinstance(item, Malformed):
        if item.problem is Problem.UNKNOWN_OPCODE:
            # (hex, as the PM4 listing's op= and SDMA_ERROR's OP and SUB_OP beside it in a crash
            # report, and the KMD's "illegal opcode 0xff": the listing said op=255)
            return f"UNKNOWN op={item.op:#04x} sub_op={item.sub_op:#04x}"
        return f"TRUNCATED {item.name}: needs {item.needed} dwords, {item.available} left"
    p, args, words, done = item.defn, item.args, [], set()
    for f in p.fields:
        if f.name in done or f.name == p.length_field:
            continue
        v = p.value_of(f.name)
        if v is not None:
            done.update(v.fields)
            words.append(f"{v.name}={args[v.name]:#010x}")
            continue
        raw = item.fields[f.name]
        if f.name in p.minus_one:
            words.append(f"{f.arg_name}={raw + 1}")
        elif verbose or f.arg_name in p.args or not _usual(f, raw) or raw != _DEFAULTS[p.name].get(f.name, 0):
            words.append(f"{f.arg_name}={_show_field(f, raw)}")
    if p.tail:
        t = p.tail
        words.append(f"{t.arg_name}={len(item.data)}" if t.ignored else f"{t.arg_name}={_show_dwords(item.data, max_data)}")
    for i, bits in item.reserved.items():
        words.append(f"RESERVED[{'hdr' if i == -1 else f'dw{i}'}]={bits:#010x}")
    return f"{p.name}  {' '.join(words)}" if words else p.name


def disassemble(dwords: Sequence[int], base: int = 0, *, verbose: bool = False, max_data: int = 8) -> list[str]:
    """One line per packet: `0x0010: 00000001  COPY_LINEAR  dst=... src=... byte_count=4096`."""
    return [f"0x{base + 4 * item.offset:04x}: {item.header:08x}  {describe(item, verbose=verbose, max_data=max_data)}"
            for item in decode_stream(dwords)]


def listing(dwords: Sequence[int], base: int = 0, **kw) -> str:
    return "\n".join(disassemble(dwords, base, **kw))

