"""How the packet builders (spec/pm4.py, spec/sdma/codec.py) take their arguments: a
bool, numpy integer, IntEnum or enum name becomes a plain int, and every refusal is a
ValueError (TypeError for a non-int) worded one way, naming packet, argument and field.

Cold paths only: the generated builders call these after a cheap test failed.
"""

from __future__ import annotations

import operator as _operator
from array import array as _array

from spec import packets as _packets
from spec.packets import Field


def _hex(v: int) -> str:
    return f"{v:#x}"


def _bits(n: int) -> str:
    return f"{n} bit" if n == 1 else f"{n} bits"


def _int(pkt: str, arg: str, v: object) -> int:
    """Turn a bool / numpy integer / IntEnum into a plain int; refuse anything else."""
    try:
        return _operator.index(v)
    except TypeError:
        raise TypeError(f"{pkt}: {arg} must be an int, not {v!r}") from None


def _too_wide(pkt: str, arg: str, f: Field | None, width: int, v: int) -> ValueError:
    where = f"{f.name}{f.span} ({_bits(width)})" if f is not None else _bits(width)
    return ValueError(f"{pkt}: {arg} must fit in {where}, not {_hex(v)}")


def _misaligned(pkt: str, arg: str, align: int, v: int) -> ValueError:
    return ValueError(f"{pkt}: {arg} must be {_packets.aligned_text(align)}, not {_hex(v)}")


def _choices(f: Field) -> str:
    return ", ".join(f"{e.name}({e.value})" for e in f.enum if e.supported)


def _enum_arg(pkt: str, arg: str, f: Field, v: object) -> int:
    """Resolve an enum argument given as a name, IntEnum, bool or numpy int, and refuse
    values outside the field, outside a closed enum, or marked unsupported."""
    if isinstance(v, str):
        if v not in f.values:
            raise ValueError(f"{pkt}: {arg} must be one of {_choices(f)}, not {v!r}")
        v = f.values[v]
    v = _int(pkt, arg, v)
    if f.open_enum:
        if v >> f.width:
            raise _too_wide(pkt, arg, f, f.width, v)
        return v
    name = f.names.get(v)
    if name is None:
        raise ValueError(f"{pkt}: {arg} must be one of {_choices(f)}, not {v}")
    if not next(e for e in f.enum if e.value == v).supported:
        raise ValueError(f"{pkt}: {arg}={name} is not supported by this device")
    return v


def _seq(pkt: str, arg: str, v: object) -> list:
    """Any iterable of dwords (tuple, array, numpy array, generator) as a list."""
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise TypeError(f"{pkt}: {arg} must be a sequence of dwords, not {v!r}")
    return list(v)


def _tail_len(pkt: str, arg: str, lo: int, hi: int, n: int) -> ValueError:
    return ValueError(f"{pkt}: {arg} must have {lo} to {hi} dwords, not {n}")


def _out_of_range(pkt: str, arg: str, lo: int, hi: int, n: int) -> ValueError:
    return ValueError(f"{pkt}: {arg} must be {lo} to {hi}, not {n}")


def _dwords(pkt: str, arg: str, data: list) -> list[int]:
    """Check every element is a 32-bit unsigned int; return them as plain ints."""
    try:
        return _array("I", data).tolist()  # checks type and range in C
    except (TypeError, OverflowError):
        pass
    for i, d in enumerate(data):
        try:
            d = _operator.index(d)
        except TypeError:
            raise TypeError(f"{pkt}: {arg}[{i}] must be an int, not {d!r}") from None
        if d >> 32:
            raise ValueError(f"{pkt}: {arg}[{i}] must fit in 32 bits, not {_hex(d)}")
    raise AssertionError("unreachable")  # pragma: no cover


def _rule_error(pkt: str, arg: str, rule: _packets.Rule, sel: int, f: Field, v: int) -> ValueError:
    if v & (rule.align - 1):  # (align 1: a width rule)
        need = "be " + _packets.aligned_text(rule.align)
    else:
        need = f"fit in {_bits(rule.width or 0)}"
    return ValueError(f"{pkt}: {arg} must {need} when {f.name}={f.names[sel]}, not {_hex(v)}")
