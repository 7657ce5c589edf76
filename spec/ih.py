"""The interrupt-handler (IH) ring entry: the single source of its layout and source ids.

The hardware appends one 32-byte entry (8 dwords) per interrupt to the IH ring; the KMD's
interrupt handler walks the ring from IH_RPTR to IH_WPTR (both in dwords). amdgpu's IH
entries carry the same kinds of information (client/source id, ring id, VMID, context,
timestamp, source data) in a similar 32-byte layout.

The RTL (rtl/ih.py), the KMD's handler (kmd_model/ih.py) and the reference model all
read this table; docs/hardware.md shows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

ENTRY_DWORDS = 8
ENTRY_BYTES = ENTRY_DWORDS * 4


class Source(IntEnum):
    """What raised the interrupt (entry dword 0, SOURCE_ID)."""

    EOP = 1  # a RELEASE_MEM with INT_SEL != 0: end of pipe, a fence was written
    CP_ERROR = 2  # the CP stopped with an error (CP_ERROR_* registers hold the details)


@dataclass(frozen=True)
class IhField:
    name: str
    dword: int
    lsb: int
    width: int
    desc: str

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lsb

    def get(self, dwords) -> int:
        return (int(dwords[self.dword]) >> self.lsb) & ((1 << self.width) - 1)


FIELDS: tuple[IhField, ...] = (
    IhField("SOURCE_ID", 0, 0, 8, "What raised the interrupt (the sources are listed below)."),
    IhField("RING_ID", 0, 8, 8, "Ring the source belongs to (0: the gfx ring)."),
    IhField("VMID", 0, 16, 4, "VMID of the work (0 until there is an MMU)."),
    IhField("CONTEXT_ID", 1, 0, 32, "RELEASE_MEM's int_ctxid; 0 for errors."),
    IhField("TIMESTAMP_LO", 2, 0, 32, "GPU clock when the entry was written, low 32 bits."),
    IhField("TIMESTAMP_HI", 3, 0, 16, "GPU clock, bits 47:32."),
    IhField("DATA0", 4, 0, 32, "Source data 0."),
    IhField("DATA1", 5, 0, 32, "Source data 1."),
    IhField("DATA2", 6, 0, 32, "Source data 2."),
    IhField("DATA3", 7, 0, 32, "Source data 3."),
)

BY_NAME = {f.name: f for f in FIELDS}

DATA_FIELDS = ("DATA0", "DATA1", "DATA2", "DATA3")
SOURCE_DOC = {
    Source.EOP: "a RELEASE_MEM with INT_SEL SEND_INT or SEND_INT_ON_CONFIRM, after its data write",
    Source.CP_ERROR: "the CP stopped with an error (written once, when the error latches)",
}
SOURCE_DATA = {
    Source.EOP: ("the packet's DATA_LO", "its DATA_HI", "its ADDR_LO dword, all 32 bits",
                 "its ADDR_HI dword, all 32 bits"),
    Source.CP_ERROR: ("the CP_ERROR register (CODE, LEVEL, OPCODE)", "CP_ERROR_ADDR_LO",
                      "CP_ERROR_ADDR_HI", "CP_ERROR_OFFSET"),
}
"""What each source puts in DATA0..DATA3 (docs/hardware.md shows this table)."""


def encode(**values: int) -> list[int]:
    """An entry's 8 dwords from field values (missing fields are 0)."""
    dw = [0] * ENTRY_DWORDS
    for name, v in values.items():
        f = BY_NAME[name]
        if not 0 <= v < 1 << f.width:
            raise ValueError(f"IH {name}: {v:#x} does not fit in {f.width} bits")
        dw[f.dword] |= v << f.lsb
    return dw


def decode(dwords) -> dict[str, int]:
    """Field values of one entry (8 dwords)."""
    if len(dwords) != ENTRY_DWORDS:
        raise ValueError(f"an IH entry is {ENTRY_DWORDS} dwords, not {len(dwords)}")
    return {f.name: f.get(dwords) for f in FIELDS}
