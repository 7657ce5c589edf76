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
field); `encode_fields` builds any bit pattern for malformed-stream tests.
`decode(dwords, offset)` -> Packet | Malformed never raises on 32-bit input;
`decode_stream`, `describe`, `disassemble` and `listing` as spec/pm4.py's.
"""

from __future__ import annotations

import enum as _enum
import inspect as _inspect
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from spec.builder_args import _dwords, _enum_arg, _int, _misaligned, _out_of_range, _seq, _tail_len, _too_wide
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


def _make_builder(p: SdmaPacketDef):
    P = f"SDMA {p.name}"
    plain = _plain_fields(p)
    params = [_inspect.Parameter(a, _inspect.Parameter.POSITIONAL_OR_KEYWORD) for a in p.args]
    params += [_inspect.Parameter(f.arg_name, _inspect.Parameter.KEYWORD_ONLY, default=_default(f))
               for f in plain if f.arg_name not in p.args]
    sig = _inspect.Signature(params)
    supported = {f.name: frozenset(e.value for e in f.enum if e.supported) for f in plain if f.enum}

    def build(*args, **kwargs) -> list[int]:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{P}: {e}") from None
        bound.apply_defaults()
        a = bound.arguments
        words = [p.header] + [0] * p.fixed
        for v in p.values:
            x = _int(P, v.name, a[v.name])
            width, align = p.value_width(v), p.value_align(v)
            if x < 0 or x >> width:
                raise _too_wide(P, v.name, None, width, x)
            if x & (align - 1):
                raise _misaligned(P, v.name, align, x)
            for i, n in enumerate(v.fields):
                f = p.field(n)
                words[f.dword + 1] |= ((x >> (32 * i)) & f.mask)
        for f in plain:
            x = a[f.arg_name]
            if f.enum:
                x = x if x.__class__ is int and x in supported[f.name] else _enum_arg(P, f.arg_name, f, x)
            else:
                x = _int(P, f.arg_name, x)
            if f.name in p.minus_one:
                if not 1 <= x <= f.max + 1:
                    raise _out_of_range(P, f.arg_name, 1, f.max + 1, x)
                x -= 1
            elif x < 0 or x >> f.width:
                raise _too_wide(P, f.arg_name, f, f.width, x)
            words[f.dword + 1] |= x << f.lsb
        if p.tail is not None:
            t = p.tail
            lf = p.field(p.length_field)  # type: ignore[arg-type]
            lo, hi = t.min, p.max_tail
            if t.ignored:
                n = _int(P, t.arg_name, a[t.arg_name])
                if not lo <= n <= hi:
                    raise _out_of_range(P, t.arg_name, lo, hi, n)
                tail = [0] * n
            else:
                tail = _seq(P, t.arg_name, a[t.arg_name])
                n = len(tail)
                if not lo <= n <= hi:
                    raise _tail_len(P, t.arg_name, lo, hi, n)
                tail = _dwords(P, t.arg_name, tail)
            words[lf.dword + 1] |= (n - p.length_bias) << lf.lsb
            words += tail
        return words

    build.__name__ = build.__qualname__ = p.name.lower()
    build.__signature__ = sig  # type: ignore[attr-defined]
    build.__doc__ = f"Build SDMA {p.name} (op {p.op}, sub_op {p.sub_op}): {p.doc}"
    return build


BUILDERS: dict[str, object] = {}
for _p in SDMA_PACKETS:
    BUILDERS[_p.name] = globals()[_p.name.lower()] = _make_builder(_p)
    __all__.append(_p.name.lower())
    for _f in _p.fields:
        if _f.enum:
            _cls = _enum.IntEnum(f"{_p.name}_{_f.name}", [(e.name, e.value) for e in _f.enum], module=__name__)
            _cls.__doc__ = f"SDMA {_p.name}.{_f.name}{_f.span}: {_f.doc}"
            globals()[_cls.__name__] = _cls
            __all__.append(_cls.__name__)


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

