"""The register map for people: a table of every register, one register's fields, and a
value decoded field by field (`gpucosim regs`, crash reports).

Offsets, fields and access types come from the generated `kmd_model.regs`; which fields
hold an enumeration (CP_ERROR.CODE is a CpError ...) from spec/regs.rdl itself, and
VM_FAULT_STATUS's ACCESS and CAUSE from spec/vm.py, whose Access and Cause the MMU, the
model and the C header use.
"""

from __future__ import annotations

import difflib
import functools
from enum import IntEnum

from kmd_model import regs
from kmd_model.regfield import Register
from testbench.argtypes import parse_int


class RegisterLookupError(LookupError):
    pass


@functools.lru_cache(maxsize=1)
def field_enums() -> dict[tuple[str, str], type[IntEnum]]:
    """(register, field) -> the IntEnum of kmd_model.regs its values name (SystemRDL `encode`)."""
    try:
        from spec.gen.generate import _camel, collect, compile_rdl

        infos, _ = collect(compile_rdl())
    except Exception:  # no compiler: values print as numbers
        return {}
    from spec import vm

    out = {("VM_FAULT_STATUS", "ACCESS"): vm.Access, ("VM_FAULT_STATUS", "CAUSE"): vm.Cause}
    for r in infos:
        for f in r.fields:
            if f.encode:
                e = getattr(regs, _camel(f.encode), None)
                if isinstance(e, type) and issubclass(e, IntEnum):
                    out[(r.name, f.name)] = e
    return out


def lookup(name: str) -> tuple[type[Register], int]:
    """A register by name (any case, `PERF_PACKETS[2]` for an array element) or by byte
    offset (`0x14`); returns (register, index): index 0 for an array named alone
    (names_element says whether `name` named one element)."""
    text = name.strip()
    try:
        off = parse_int(text)
    except ValueError:
        off = None
    if off is not None:
        for r in regs.REGISTERS:
            for i in range(r.ARRAY_LEN):
                if r.addr(i) == off:
                    return r, i
        last = max(regs.REGISTERS, key=lambda r: r.addr(r.ARRAY_LEN - 1))
        end = last.addr(last.ARRAY_LEN - 1)
        if off > end:  # (`gpucosim regs 0x7b0101`: a value to decode, given without its register)
            raise RegisterLookupError(f"no register at offset {off:#x}: the map ends at {end:#x} ({last.NAME}); "
                                      f"a VALUE to decode follows its REGISTER (gpucosim regs CP_ERROR {text})")
        if off % 4:  # (registers are dwords: say where the nearest one is)
            near = [r.NAME if r.ARRAY_LEN == 1 else f"{r.NAME}[{i}]" for r in regs.REGISTERS
                    for i in range(r.ARRAY_LEN) if r.addr(i) == off & ~3]
            where = f" ({off & ~3:#x} is {near[0]})" if near else ""
            raise RegisterLookupError(f"no register at offset {off:#x}: registers are dwords at offsets "
                                      f"that are multiples of 4{where}")
        raise RegisterLookupError(f"no register at offset {off:#x}")
    base, bracket, idx = text.upper().partition("[")
    if bracket and (not idx.endswith("]") or "]" in idx[:-1] or "[" in idx):
        # (PERF_PACKETS[1 and PERF_PACKETS[1]] were read as PERF_PACKETS[1])
        raise RegisterLookupError(f"bad index in {name!r}: an array's element is NAME[INDEX]")
    by_name = {r.NAME: r for r in regs.REGISTERS}
    reg = by_name.get(base)
    if reg is None:
        close = difflib.get_close_matches(base, by_name, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise RegisterLookupError(f"no register named {name!r}{hint}")
    index = 0
    if idx and reg.ARRAY_LEN == 1:  # (CP_ERROR[0] was CP_ERROR, CP_ERROR[5] "out of range of 1 registers")
        raise RegisterLookupError(f"{reg.NAME} is one register, not an array: give it without [{idx.rstrip(']')}]")
    if idx:
        try:
            index = parse_int(idx.rstrip("]"))
        except ValueError:
            raise RegisterLookupError(f"bad index in {name!r}") from None
        if not 0 <= index < reg.ARRAY_LEN:
            raise RegisterLookupError(f"{reg.NAME}[{index}] is out of range: the array has "
                                      f"{reg.ARRAY_LEN} registers")
    return reg, index


def names_element(name: str) -> bool:
    """Whether `name`, as lookup takes it, names one register of an array (`PERF_PACKETS[2]`,
    an offset) rather than the array (`PERF_PACKETS`)."""
    text = name.strip()
    try:
        parse_int(text)
    except ValueError:
        return "[" in text
    return True


def field_value(reg: type[Register], field, value: int) -> str:
    v = field.get(value)
    enum = field_enums().get((reg.NAME, field.name))
    if enum is not None:
        try:
            return f"{enum(v).name} ({v})"
        except ValueError:
            return f"{v} (no {enum.__name__} value)"
    return str(v) if field.width <= 4 else f"{v:#x}"


def access(field) -> str:
    """A field's access as a reader needs it: RO, RW, RW1C, WO, and for a field locked by
    another (SystemRDL swwel: a ring's base, size and rptr write-back address) when a
    write is ignored, "RW, ignored while RB_CNTL.ENABLE=1"."""
    return f"{field.access}, ignored while {field.swwel}=1" if field.swwel else field.access


def _columns(reg: type[Register]) -> tuple[int, int]:
    """The name and access columns' widths for reg's fields: 16 and 11, wider for a long
    name or a lock (then two spaces after the longest, which holds a comma and spaces)."""
    return (max([16] + [len(f.name) for f in reg.FIELDS]), max([11] + [len(access(f)) + 1 for f in reg.FIELDS]))


def decode_line(reg: type[Register], value: int) -> str:
    """`CP_ERROR = 0x00017b01: CODE=ILLEGAL_OPCODE (1) LEVEL=IB1 (1) OPCODE=0x7b`."""
    parts = [f"{f.name}={field_value(reg, f, value)}" for f in reg.FIELDS
             if f.get(value) or f.width > 1 or len(reg.FIELDS) == 1]
    return f"{reg.NAME} = {value:#010x}: " + (" ".join(parts) or "(all fields 0)")


def decode(reg: type[Register], value: int, index: int | None = 0) -> str:
    """A value, field by field, with each field's bits and access. Of an array named alone
    (`index` None), the value is any element's: the header names them all (it said
    `PERF_PACKETS[0] @ 0x120`, an element the user had not asked for)."""
    if reg.ARRAY_LEN > 1 and index is None:
        last = reg.ARRAY_LEN - 1
        head = (f"{reg.NAME}[0..{last}] @ {reg.addr(0):#05x}..{reg.addr(last):#05x} = {value:#010x} (any element: "
                f"their fields are the same; {reg.NAME}[i] names one)")
    else:
        label = f"{reg.NAME}[{index or 0}]" if reg.ARRAY_LEN > 1 else reg.NAME
        head = f"{label} @ {reg.addr(index or 0):#05x} = {value:#010x}"
    lines = [head]
    covered = 0
    nw, aw = _columns(reg)
    for f in reg.FIELDS:
        bits = f"[{f.msb}:{f.lsb}]" if f.width > 1 else f"[{f.lsb}]"
        lines.append(f"  {f.name:<{nw}} {bits:<8} {access(f):<{aw}} {field_value(reg, f, value)}")
        covered |= f.mask
    rest = value & ~covered & 0xFFFF_FFFF
    if rest:
        lines.append(f"  (bits {rest:#010x} are set but belong to no field)")
    return "\n".join(lines)


def _reset_text(reg: type[Register]) -> str:
    """The reset value as docs/registers.md gives it: fields the hardware drives (no reset
    of their own) read the device's state, not RESET's bits."""
    driven = reg.hw_driven()
    if len(driven) == len(reg.FIELDS):
        return "reset: the device's state (driven by the hardware)"
    if driven:
        return f"reset {reg.RESET:#010x} but for {', '.join(driven)} (the device's state)"
    return f"reset {reg.RESET:#010x}"


def describe(reg: type[Register], index: int | None = None) -> str:
    """One register: offset, reset value, description and fields; of an array, the whole
    array from its base, or with `index` that element at its own offset."""
    title = (reg.__doc__ or "").strip()
    label, addr, arr = reg.NAME, reg.ADDR, ""
    if reg.ARRAY_LEN > 1:
        arr = f"array of {reg.ARRAY_LEN} ({reg.ARRAY_STRIDE}-byte stride)"
        if index is None:
            arr = f", {arr}"
        else:
            label, addr, arr = f"{reg.NAME}[{index}]", reg.addr(index), f", element {index} of an {arr}"
    lines = [f"{label} @ {addr:#05x}, {_reset_text(reg)}{arr}"]
    if title:
        lines.append(f"  {title}")
    nw, aw = _columns(reg)
    for f in reg.FIELDS:
        bits = f"[{f.msb}:{f.lsb}]" if f.width > 1 else f"[{f.lsb}]"
        enum = field_enums().get((reg.NAME, f.name))
        extra = f"  values: {', '.join(f'{e.name}={e.value}' for e in enum)}" if enum else ""
        lines.append(f"  {f.name:<{nw}} {bits:<8} {access(f):<{aw}} {f.desc}{extra}".rstrip())
    return "\n".join(lines)


def table() -> str:
    """Every register: offset, name, access summary and fields. The name column is as wide
    as the longest name (at least 20: a longer one pushed its row's columns out of line)."""
    names = [r.NAME + (f"[{r.ARRAY_LEN}]" if r.ARRAY_LEN > 1 else "") for r in regs.REGISTERS]
    nw = max([20] + [len(n) for n in names])
    lines = [f"{'offset':<8} {'register':<{nw}} {'reset':<11} fields"]
    for r, name in zip(regs.REGISTERS, names):
        fields = " ".join(f.name if f.width == 1 else f"{f.name}[{f.msb}:{f.lsb}]" for f in r.FIELDS)
        reset = "—" if len(r.hw_driven()) == len(r.FIELDS) else f"{r.RESET:#010x}"  # —: the device's state
        lines.append(f"{r.ADDR:#06x}   {name:<{nw}} {reset:<10}  {fields}")
    return "\n".join(lines)
