"""The shapes behind the generated register constants (kmd_model/regs.py).

A register is a class with ADDR, RESET and one `Field` attribute per field, so driver
code reads like the hardware manual: `regs.RB_CNTL.ENABLE.put(1)`,
`regs.CP_ERROR.CODE.get(value)`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Field:
    """One register field: bit position, width and SystemRDL access semantics."""

    name: str
    lsb: int
    width: int
    sw: str  # "r", "w", "rw"
    hw: str  # "r", "w", "na"
    reset: int | None = None  # None: the hardware drives the value
    onwrite: str | None = None  # "woclr" for write-1-to-clear
    singlepulse: bool = False
    swmod: bool = False
    hwset: bool = False
    desc: str = ""
    # "REG.FIELD": while that 1-bit field is set, software writes to this one are ignored
    # (SystemRDL swwel; a ring's base, size and pointer write-back address while the ring is enabled)
    swwel: str | None = None

    @property
    def msb(self) -> int:
        return self.lsb + self.width - 1

    @property
    def mask(self) -> int:
        """The field's bits in place within the register."""
        return ((1 << self.width) - 1) << self.lsb

    @property
    def access(self) -> str:
        """A short access name, as register manuals print it: RO, RW, RW1C, WO."""
        if self.onwrite == "woclr":
            return "RW1C"
        if self.singlepulse:
            return "WO (pulse)"
        return {"r": "RO", "w": "WO", "rw": "RW"}[self.sw]

    def get(self, value: int) -> int:
        """Extract this field from a register value."""
        return (value >> self.lsb) & ((1 << self.width) - 1)

    def put(self, v: int) -> int:
        """This field's value placed in a register word; rejects values that do not fit."""
        if not 0 <= v < (1 << self.width):
            raise ValueError(f"{self.name}: {v:#x} does not fit in {self.width} bits")
        return v << self.lsb


class Register:
    """Base of the generated register classes; a class per register, never instantiated."""

    NAME: str = ""
    ADDR: int = 0
    RESET: int = 0
    FIELDS: tuple[Field, ...] = ()
    DESC: str = ""
    # Register arrays (e.g. PERF_PACKETS): ARRAY_LEN copies ARRAY_STRIDE bytes apart.
    ARRAY_LEN: int = 1
    ARRAY_STRIDE: int = 4
    # Only the reference model implements it so far (spec/regs.rdl `model_only`): the RTL
    # backends answer DECERR at its offset.
    MODEL_ONLY: bool = False

    @classmethod
    def addr(cls, index: int = 0) -> int:
        if not 0 <= index < cls.ARRAY_LEN:
            raise IndexError(f"{cls.NAME}[{index}] out of range: the array has {cls.ARRAY_LEN} registers")
        return cls.ADDR + index * cls.ARRAY_STRIDE

    @classmethod
    def hw_driven(cls) -> list[str]:
        """Fields the hardware drives (no reset of their own): after a reset they read the
        device's state, not RESET's bits (docs/registers.md says which)."""
        return [f.name for f in cls.FIELDS if f.reset is None and f.sw != "w"]

    @classmethod
    def decode(cls, value: int) -> dict[str, int]:
        """All fields of a register value, by name."""
        return {f.name: f.get(value) for f in cls.FIELDS}
