"""How a packet table describes its packets, for the PM4 table (spec/packets.py) and the
SDMA table (spec/sdma/packets.py) alike: fields (a bit range of one dword, with their
enums), values spread over fields, rules, the variable tail, and the lookups a table
entry offers (Layout). The numbers themselves are in the tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

__all__ = ["EnumValue", "Field", "Value", "Rule", "Tail", "Layout", "aligned_text"]


def aligned_text(n: int) -> str:
    """How messages name an alignment of `n` bytes: "dword aligned", "qword aligned"."""
    return {4: "dword", 8: "qword"}.get(n, f"{n}-byte") + " aligned"


@dataclass(frozen=True)
class EnumValue:
    """A named value of a field. `supported=False`: AMD defines it, this device
    does not implement it (the CP stops with CP_ERROR UNSUPPORTED; builders refuse it)."""

    name: str
    value: int
    doc: str
    supported: bool = True


@dataclass(frozen=True, repr=False)
class Field:
    """A bit range of one dword: payload dword `dword` (-1 = header), bits
    [lsb + width - 1 : lsb].

    `default` is the builder's default (an int or an enum value name; None = the
    caller must give it). `arg` renames the builder argument (default: the field name
    in lower case). `open_enum`: values outside `enum` are legal too (e.g. AMD event
    numbers); otherwise only the enum's values are. `fmt` is how listings print the
    value: "d" decimal, "x" hex, "" auto (decimal up to 4 bits).
    """

    name: str
    dword: int
    lsb: int
    width: int
    doc: str
    enum: tuple[EnumValue, ...] = ()
    default: int | str | None = None
    arg: str | None = None
    open_enum: bool = False
    fmt: str = ""

    def __repr__(self) -> str:
        return f"Field({self.name!r}, dword={self.dword}, lsb={self.lsb}, width={self.width})"

    @property
    def msb(self) -> int:
        return self.lsb + self.width - 1

    @property
    def max(self) -> int:
        """Largest value the field holds."""
        return (1 << self.width) - 1

    @property
    def mask(self) -> int:
        """The field's bits in place within its dword."""
        return self.max << self.lsb

    @property
    def bits(self) -> slice:
        """Python slice of the field within its dword: `sig[f.bits]` in Amaranth."""
        return slice(self.lsb, self.lsb + self.width)

    @property
    def span(self) -> str:
        """AMD-style bit span: "[11:8]", or "[20]" for one bit."""
        return f"[{self.lsb}]" if self.width == 1 else f"[{self.msb}:{self.lsb}]"

    @property
    def arg_name(self) -> str:
        return self.arg or self.name.lower()

    @property
    def decimal(self) -> bool:
        """Listings and docs show the value in decimal (else hex): as `fmt` says, or, left
        to the width, decimal up to 4 bits."""
        return self.fmt == "d" if self.fmt else self.width <= 4

    def get(self, dword: int) -> int:
        """Extract this field from a dword."""
        return (dword >> self.lsb) & self.max

    def put(self, value: int) -> int:
        """Place `value` (unchecked) at this field's position."""
        return (value & self.max) << self.lsb

    @cached_property
    def values(self) -> dict[str, int]:
        """Enum value name -> number."""
        return {e.name: e.value for e in self.enum}

    @cached_property
    def names(self) -> dict[int, str]:
        """Enum number -> value name."""
        return {e.value: e.name for e in self.enum}

    def legal(self, value: int) -> bool:
        """Whether `value` is one the field may hold (in range; in the enum unless open)."""
        if not 0 <= value <= self.max:
            return False
        return self.open_enum or not self.enum or value in self.names


@dataclass(frozen=True)
class Value:
    """A builder argument spread over fields in consecutive dwords, low part first.

    The fields sit in place: a 64-bit address is (ADDR_HI dword << 32) | ADDR_LO
    dword. So ADDR_LO[31:2] makes the value dword aligned, and the value's width is
    32 * (parts - 1) + the top field's msb + 1 (ADDR_HI[15:0] -> 48 bits).
    """

    name: str
    fields: tuple[str, ...]
    doc: str


@dataclass(frozen=True)
class Rule:
    """A constraint on a Value that holds while field `when` has one of the enum
    values `among`: an alignment in bytes and/or a width in bits."""

    when: str
    among: tuple[str, ...]
    value: str
    align: int = 1
    width: int | None = None
    doc: str = ""


@dataclass(frozen=True)
class Tail:
    """The variable part after the fixed payload dwords: at least `min` dwords.

    `ignored=True`: the dwords carry nothing (NOP); builders take their number,
    `n_<name>`, instead of their values.
    """

    name: str
    doc: str
    min: int = 1
    ignored: bool = False

    @property
    def arg_name(self) -> str:
        return f"n_{self.name}" if self.ignored else self.name



class Layout:
    """What a packet table entry (PacketDef in spec/packets.py, SdmaPacketDef in
    spec/sdma/packets.py) offers over its `name`, `fields` and `values`: lookups by name and
    value widths."""

    name: str
    fields: tuple[Field, ...]
    values: tuple[Value, ...]

    def field(self, name: str) -> Field:
        """The field called `name` (AMD's name, e.g. "WR_CONFIRM")."""
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no field {name!r}")

    def value(self, name: str) -> Value:
        for v in self.values:
            if v.name == name:
                return v
        raise KeyError(f"{self.name} has no value {name!r}")

    def fields_in(self, dword: int) -> tuple[Field, ...]:
        """Fields of payload dword `dword`, lowest bit first."""
        return tuple(sorted((f for f in self.fields if f.dword == dword), key=lambda f: f.lsb))

    def value_of(self, field_name: str) -> Value | None:
        """The Value a field is part of, if any."""
        for v in self.values:
            if field_name in v.fields:
                return v
        return None

    def value_width(self, value: Value) -> int:
        top = self.field(value.fields[-1])
        return 32 * (len(value.fields) - 1) + top.msb + 1

    def value_align(self, value: Value) -> int:
        """Byte alignment the value's lowest field implies (ADDR_LO[31:2] -> 4)."""
        return 1 << self.field(value.fields[0]).lsb

    @property
    def fixed(self) -> int:
        """Number of fixed payload dwords (before the tail)."""
        return 1 + max((f.dword for f in self.fields), default=-1)

    HEADER_BITS = 0  # header bits every packet of the table declares (SDMA: OP and SUB_OP)

    def defined_mask(self, dword: int) -> int:
        """Bits of payload dword `dword` (-1: the header) that are not reserved: those some
        field declares, and all of a tail dword (data, or ignored padding)."""
        if self.tail is not None and dword >= self.fixed:  # type: ignore[attr-defined]
            return 0xFFFF_FFFF
        mask = self.HEADER_BITS if dword == -1 else 0
        for f in self.fields:
            if f.dword == dword:
                mask |= f.mask
        return mask

