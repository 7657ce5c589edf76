"""The PM4 packet table, precomputed for the reference model's per-packet path: field
positions, the checks spec/rules.py states, and the CP's error and wait records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


from kmd_model.regs import CpError
from spec import packets as pk
from spec import rules


# ---------------------------------------------------------------------------- packet table, precomputed

class _Fault(Exception):
    """A CP error found while executing; the CP knows the level and packet offset.
    opcode None: the opcode of the packet in hand (RefModel._cur_opcode). `vm`: a VM fault's
    (access, cause, level, vmid)."""

    def __init__(self, code: int, addr: int, opcode: int | None = None, done: int = 0, vm: tuple | None = None):
        self.code, self.addr, self.opcode, self.done, self.vm = code, addr, opcode, done, vm


def _vm_fault(va: int, access: int, vmid: int, why: tuple, opcode: int | None = None) -> _Fault:
    return _Fault(CpError.VM_FAULT, va, opcode, vm=(int(access), int(why[0]), why[1], vmid))


@dataclass(frozen=True)
class _Kind:
    defn: pk.PacketDef
    opcode: int
    index: int  # PERF_PACKETS index
    fixed: int  # fixed payload dwords
    min_count: int
    max_count: int
    # (payload dword, lsb, max, supported values) of every closed-enum field: a value
    # outside the supported ones is UNSUPPORTED (spec/packets.py EnumValue.supported)
    supported: tuple[tuple[int, int, int, frozenset], ...]
    # (payload dword, low-bit mask, condition or None): an address whose low bits are set
    # is misaligned. From the table: the bits below each *_LO address field (ADDR_LO[31:2]
    # -> dword aligned) and each alignment Rule (64-bit fences), whose condition is
    # (dword, lsb, max, values) of the selecting field.
    aligns: tuple[tuple[int, int, tuple | None], ...]


def _kind(p: pk.PacketDef) -> _Kind:
    # the checks come from spec/rules.py, the rule set the KMD's checker applies too
    r = rules.RULES[p.name]
    supported = tuple((*e.where, e.supported) for e in r.enums)
    aligns = tuple((a.dword, a.low, a.when_where) for a in r.aligns)
    return _Kind(p, p.opcode, p.index, p.fixed, p.min_count, p.max_count, supported, aligns)


def _fld(p: pk.PacketDef, name: str) -> tuple[int, int, int]:
    f = p.field(name)
    return f.dword, f.lsb, f.max


def _addr(p: pk.PacketDef, value: str) -> tuple[int, int, int]:
    """(low dword, high dword, high mask) of a 64-bit value: the CP uses the whole low
    dword, reserved bits 1:0 included, so a misaligned address can be reported."""
    lo, hi = (p.field(n) for n in p.value(value).fields)
    return lo.dword, hi.dword, hi.max


_HDR_TYPE = pk.HEADER.field("TYPE")
_HDR_OPCODE = pk.HEADER.field("OPCODE")
_HDR_COUNT = pk.HEADER.field("COUNT")
# plain ints for the per-packet path
_TYPE_LSB, _TYPE_MAX = _HDR_TYPE.lsb, _HDR_TYPE.max
_OPCODE_LSB, _OPCODE_MAX = _HDR_OPCODE.lsb, _HDR_OPCODE.max
_COUNT_LSB, _COUNT_MAX = _HDR_COUNT.lsb, _HDR_COUNT.max
_TYPE3 = pk.PACKET_TYPE3
_TYPE2 = pk.PACKET_TYPE2
_NOP_PAD_MASK = _HDR_TYPE.mask | _HDR_OPCODE.mask | _HDR_COUNT.mask  # what makes a header NOP_PAD
_HEADER_CACHE = 4096  # distinct headers RefModel._header remembers

_WD = pk.WRITE_DATA
_WD_ADDR = _addr(_WD, "addr")
_WD_INCR = _fld(_WD, "ADDR_INCR")
_WD_NO_INCREMENT = _WD.field("ADDR_INCR").values["NO_INCREMENT"]
_IB = pk.INDIRECT_BUFFER
_IB_BASE = _addr(_IB, "base")
_IB_SIZE, _IB_CHAIN, _IB_VMID = (_fld(_IB, n) for n in ("IB_SIZE", "CHAIN", "VMID"))
_WRM = pk.WAIT_REG_MEM
_WRM_ADDR = _addr(_WRM, "addr")
_WRM_FUNC, _WRM_REF, _WRM_MASK, _WRM_POLL = (_fld(_WRM, n) for n in ("FUNCTION", "REFERENCE", "MASK", "POLL_INTERVAL"))
_RM = pk.RELEASE_MEM
_RM_ADDR = _addr(_RM, "addr")
_RM_INT, _RM_DATA_SEL, _RM_LO, _RM_HI, _RM_CTX = (
    _fld(_RM, n) for n in ("INT_SEL", "DATA_SEL", "DATA_LO", "DATA_HI", "INT_CTXID"))
_RM_SEL = _RM.field("DATA_SEL").values
_RM_INTERRUPTS = frozenset(_RM.field("INT_SEL").values[n] for n in ("SEND_INT", "SEND_INT_ON_CONFIRM"))
_DMA = pk.DMA_DATA
_DMA_SRC = _addr(_DMA, "src")
_DMA_DST = _addr(_DMA, "dst")
_DMA_SRC_SEL, _DMA_COUNT = _fld(_DMA, "SRC_SEL"), _fld(_DMA, "BYTE_COUNT")
_DMA_FILL = _DMA.field("SRC_SEL").values["DATA"]
_WRM_COMPARE: dict[int, Callable[[int, int], bool]] = {
    v: {"ALWAYS": lambda a, b: True, "LT": int.__lt__, "LE": int.__le__, "EQ": int.__eq__,
        "NE": int.__ne__, "GE": int.__ge__, "GT": int.__gt__}[name]
    for name, v in _WRM.field("FUNCTION").values.items()
}


def _get(p: list[int], f: tuple[int, int, int]) -> int:
    return (p[f[0]] >> f[1]) & f[2]


def _addr_of(p: list[int], a: tuple[int, int, int]) -> int:
    return (p[a[1]] & a[2]) << 32 | p[a[0]]


# ---------------------------------------------------------------------------- the model

@dataclass
class _Wait:
    """A WAIT_REG_MEM in progress."""

    addr: int
    ref: int
    mask: int
    compare: Callable[[int, int], bool]
    interval: int
    next_poll: int
    level: int
    offset: int
    length: int
    vmid: int
    failed_in: object = None  # the _advance call in which a poll failed
