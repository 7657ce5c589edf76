"""The CP's packet checks as data: the one rule set the hardware, the model and the KMD share.

docs/hardware.md ("Packets") lists the checks the CP makes on every packet, in order. This
module derives each of them from the packet table (spec/packets.py), so every consumer
applies the same rules and none can drift from the others:

- the reference model (testbench/refmodel/) executes them as the CP does;
- the KMD's command-stream checker (kmd_model/cs/checker.py) makes every one of them
  first, on its shadow copy of the job, so a stream it accepts never stops the CP with a
  packet error;
- the RTL (rtl/cp/packets.py) builds its decode logic from the same table, and the RTL-vs-model
  campaign holds it to the model.

The checks of one type-3 packet, in the CP's order (the first that fails is the error):

 1. ILLEGAL_OPCODE   type-0/1 header, unknown opcode (any type-2 dword is a one-dword filler)
 2. BAD_COUNT        COUNT outside the opcode's range
 3. BAD_COUNT        the packet runs past the end of its ring space or IB
 4. UNSUPPORTED      a closed-enum field holds a value the device does not implement
                     (`EnumValue.supported`); INDIRECT_BUFFER with CHAIN in the ring;
                     DMA_DATA on a device without a DMA engine
 5. *_MISALIGNED     bits below an `*_LO` address field, or an alignment `Rule` broken
                     (IB_MISALIGNED for INDIRECT_BUFFER, FENCE_MISALIGNED otherwise)
 6. IB_SIZE_ZERO, IB_NESTING   (INDIRECT_BUFFER)
 7. DMA_BYTE_COUNT   BYTE_COUNT above the engine's limit (DMA_DATA)

Then, while the packet executes, an access the bus refuses is BUS_DECERR / BUS_SLVERR
(an address with bits above the bus width, memory that answers an error).

Checks 1-3 are `spec.pm4.decode`'s `Problem`s; `packet_error` makes 4-7. The KMD's checker
adds rules of its own, stricter than the CP and never looser: reserved bits are zero
(`PacketRules.reserved`, `HEADER_RESERVED`), and every address a packet uses lies in a
buffer of the submitting client.

Pure stdlib, like spec/pm4.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spec import packets as _packets
from spec.packets import HEADER, PACKETS, Field, PacketDef

__all__ = ["Caps", "EnumCheck", "AlignCheck", "PacketRules", "RULES", "BY_OPCODE",
           "HEADER_RESERVED", "packet_error", "addr_of"]


@dataclass(frozen=True)
class Caps:
    """What the checks depend on in the device (its CAPS register)."""

    ib_levels: int = 2
    has_dma: bool = True
    dma_max_bytes: int = 1 << 20
    addr_bits: int = 48


@dataclass(frozen=True)
class EnumCheck:
    """Check 4: `field` must hold one of `supported` (its enum's values the device implements)."""

    field: Field
    supported: frozenset[int]

    @property
    def where(self) -> tuple[int, int, int]:
        """(payload dword, lsb, max): plain ints for the per-packet paths."""
        return self.field.dword, self.field.lsb, self.field.max


@dataclass(frozen=True)
class AlignCheck:
    """Check 5: bits `low` of payload dword `dword` (the low part of value `value`) must be 0,
    always (`when` None) or while field `when[0]` holds one of the values `when[1]`."""

    value: str
    dword: int
    low: int
    align: int  # bytes
    when: tuple[Field, frozenset[int]] | None = None

    @property
    def when_where(self) -> tuple[int, int, int, frozenset[int]] | None:
        """(dword, lsb, max, values) of the condition, or None."""
        if self.when is None:
            return None
        f, vals = self.when
        return f.dword, f.lsb, f.max, vals


@dataclass(frozen=True)
class PacketRules:
    """Everything checked on one packet kind, derived from its PacketDef."""

    packet: PacketDef
    enums: tuple[EnumCheck, ...]
    aligns: tuple[AlignCheck, ...]
    misaligned: str  # the CpError name for check 5
    reserved: tuple[int, ...]  # per fixed payload dword: the bits no field declares

    @property
    def name(self) -> str:
        return self.packet.name


def _rules(p: PacketDef) -> PacketRules:
    enums = tuple(EnumCheck(f, frozenset(e.value for e in f.enum if e.supported))
                  for f in p.fields if f.enum and not f.open_enum)
    aligns = []
    for v in p.values:
        lo = p.field(v.fields[0])
        if lo.lsb:  # ADDR_LO[31:2]: the address is dword aligned
            aligns.append(AlignCheck(v.name, lo.dword, (1 << lo.lsb) - 1, 1 << lo.lsb))
    for r in p.rules:
        if r.align > 1:
            w = p.field(r.when)
            lo = p.field(p.value(r.value).fields[0])
            aligns.append(AlignCheck(r.value, lo.dword, r.align - 1, r.align,
                                     (w, frozenset(w.values[n] for n in r.among))))
    reserved = tuple(~p.defined_mask(d) & 0xFFFF_FFFF for d in range(p.fixed))
    mis = "IB_MISALIGNED" if p is _packets.INDIRECT_BUFFER else "FENCE_MISALIGNED"
    return PacketRules(p, enums, tuple(aligns), mis, reserved)


RULES: dict[str, PacketRules] = {p.name: _rules(p) for p in PACKETS}
"""Packet name -> its rules."""
BY_OPCODE: dict[int, PacketRules] = {r.packet.opcode: r for r in RULES.values()}

HEADER_RESERVED = ~sum(f.mask for f in HEADER.fields) & 0xFFFF_FFFF
"""Header bits no field declares (the CP ignores them; the KMD's checker refuses them)."""

_IB = _packets.INDIRECT_BUFFER
_IB_CHAIN, _IB_SIZE = (_IB.field(n) for n in ("CHAIN", "IB_SIZE"))
_DMA = _packets.DMA_DATA
_DMA_COUNT = _DMA.field("BYTE_COUNT")


def addr_of(p: PacketDef, value: str, payload: Sequence[int]) -> int:
    """The address a packet's value names, as the CP reads it: the low dword whole (its
    reserved low bits included, which check 5 refuses) and the high field."""
    lo, hi = (p.field(n) for n in p.value(value).fields)
    return (payload[hi.dword] >> hi.lsb & hi.max) << 32 | payload[lo.dword]


def _enum_text(f: Field, v: int) -> str:
    name = f.names.get(v)
    if name is None:
        return f"{f.name}={v} is not a defined value"
    return f"{f.name}={name} is not supported by this device"


def packet_error(rules: PacketRules, payload: Sequence[int], level: int, caps: Caps) -> tuple[str, str] | None:
    """Checks 4-7 of one packet whose fixed payload dwords are `payload`, fetched at IB
    level `level` (0 = the ring): (CpError name, what is wrong) of the first that fails,
    or None when the CP would execute it."""
    p = rules.packet
    if p is _DMA and not caps.has_dma:
        return "UNSUPPORTED", "this device has no DMA engine (CAPS.DMA = 0)"
    if p is _IB:
        if _IB_CHAIN.get(payload[_IB_CHAIN.dword]) and level == 0:
            return "UNSUPPORTED", "CHAIN in the ring (only an IB may chain)"
    for e in rules.enums:
        v = e.field.get(payload[e.field.dword])
        if v not in e.supported:
            return "UNSUPPORTED", _enum_text(e.field, v)
    for a in rules.aligns:
        if payload[a.dword] & a.low:
            if a.when is None:
                return rules.misaligned, f"{a.value} {addr_of(p, a.value, payload):#x} is not " \
                                         f"{_packets.aligned_text(a.align)}"
            f, vals = a.when
            sel = f.get(payload[f.dword])
            if sel in vals:
                return rules.misaligned, f"{a.value} {addr_of(p, a.value, payload):#x} is not " \
                                         f"{_packets.aligned_text(a.align)} (needed with {f.name}={f.names[sel]})"
    if p is _IB:
        if not _IB_SIZE.get(payload[_IB_SIZE.dword]):
            return "IB_SIZE_ZERO", "IB_SIZE is 0"
        if not _IB_CHAIN.get(payload[_IB_CHAIN.dword]) and level + 1 > caps.ib_levels:
            return "IB_NESTING", f"nests deeper than the device's {caps.ib_levels} IB levels"
    if p is _DMA:
        n = _DMA_COUNT.get(payload[_DMA_COUNT.dword])
        if n > caps.dma_max_bytes:
            return "DMA_BYTE_COUNT", f"BYTE_COUNT {n} is over the DMA engine's limit of " \
                                     f"{caps.dma_max_bytes} bytes (CAPS.DMA_MAX_LOG2)"
    return None
