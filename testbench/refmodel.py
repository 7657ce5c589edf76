"""The cycle-free reference model of the whole front end, as a `kmd_model.device.Device`.

Same observable behaviour as the RTL (docs/hardware.md is the contract): the register file
with SystemRDL access semantics (read from `kmd_model.regs`), ring + doorbell, the PM4
command processor (packet layouts and limits from `spec.packets`), the IH ring
(`spec.ih`), interrupts, errors, soft reset, HALT and the performance counters::

    dev = RefModel()                      # 64 MiB of memory, no DMA engine, like the RTL today
    dev.configure(error_window=(0x10000, 0x11000, "SLVERR"))
    ...drive it like any Device (mmio_write32 / mmio_read32 / mem / wait_irq)...
    snap = dev.snapshot()                 # registers, IH entries, memory digest (issue 5)

Time. There are no cycles: work runs to completion the moment it becomes possible, at the
current `now()`. Time moves only when the driver spends it: each MMIO access costs
`mmio_cycles` (the access takes effect at the end of that time), `delay(n)` costs n, and
`wait_irq` moves to the moment irq rises or to its timeout. A WAIT_REG_MEM that does not
hold when executed is re-polled on its POLL_INTERVAL grid as time passes (the first poll
is at once, then every max(1, POLL_INTERVAL) cycles). Memory changes only between Device
calls (the CPU) or by the CP itself, so a poll that fails stays failed until the driver
next returns: time can jump over the remaining polls of one call.

Virtual memory (testbench/model_mmu.py): every CP and DMA access is translated as the
MMU does (ring fetches, the rptr write-back and IH entries with VMID 0, an IB's packets
with the VMID its ring INDIRECT_BUFFER named), faults stop the CP with VM_FAULT exactly
where the RTL does: a fetched dword when the parser consumes it, a written block, a poll,
a DMA transfer's first failing byte (its page's first). PERF_TLB_* and PERF_WALK_CYCLES
depend on timing and read 0 here.

Bus errors. `configure(error_window=(base, limit, resp))`: every CP or DMA access whose
bytes touch [base, limit) answers resp; bytes at or beyond the memory size answer DECERR
(window first, as in testbench/hdl/axi_mem.v). The RTL's memory model decides per bus
beat, so both agree exactly when the window is aligned to the bus width.

Counters. Exact (they count events, not cycles):
- PERF_DWORDS_FETCHED: the ring and IB dwords the parser consumed, headers and payloads
  (the model fetches nothing ahead, so this is what the RTL counts as popped dwords,
  prefetched-but-unused dwords excluded). A dword whose read faulted counts (it was
  consumed); after a write error in WRITE_DATA, the data dwords up to the end of the
  faulting 32-byte block count.
- PERF_PACKETS[i]: packets of spec.packets.PACKETS[i] whose checks passed, counted when
  they start executing (a WAIT_REG_MEM counts while it still waits, a WRITE_DATA whose
  write faults counts); a TYPE2 filler counts as a NOP.
- PERF_DMA_BYTES_READ/WRITTEN.
Approximations (the model has no cycles): PERF_BUSY_CYCLES = model cycles with
STATUS.IDLE = 0 (only WAIT_REG_MEM waits and a HALT with work pending take time here);
PERF_STALL_CYCLES = 0 (memory answers at once); PERF_DMA_BUSY_CYCLES = ceil(bytes / bus
bytes) per DMA_DATA, although no time passes during it.

`RefModel(trace=print)` reports every packet the CP starts, disassembled by spec.pm4
("IB1+0x0000: WRITE_DATA  dst_sel=MEMORY addr=0x00040000 data=[0x00000001]").
"""

from __future__ import annotations

import hashlib
import mmap
import os
import sys
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from kmd_model import regs
from kmd_model.device import BusError, Device
from kmd_model.regfield import Register
from kmd_model.regs import CpError, IbLevel
from spec import ih as ih_spec
from spec import packets as pk
from spec import pm4
from spec import rules
from spec import vm as vm_spec

from .model_cp_queues import CONFIG as _HQD1_CONFIG
from .model_cp_queues import CpQueue1
from .model_mmu import ModelMmu, pages
from .model_sdma import SdmaEngine
from .model_sdma import _CONFIG as _SDMA_CONFIG

__all__ = ["RefModel", "snapshot", "mem_digest", "mem_diff", "diff_snapshots",
           "DEFAULT_MEM_SIZE", "DEFAULT_MMIO_CYCLES", "DMA_MAX_BYTES"]

DEFAULT_MEM_SIZE = 64 << 20
DEFAULT_MMIO_CYCLES = 8  # what one 32-bit register access costs in model time
DMA_MAX_BYTES = 1 << 20  # DMA_DATA BYTE_COUNT above this is DMA_BYTE_COUNT (CAPS.DMA_MAX_LOG2, rtl.top)
ADDR_BITS = 48
TIMESTAMP_BITS = 48

M32 = 0xFFFF_FFFF
_ADDR_MASK = (1 << ADDR_BITS) - 1
_TS_MASK = (1 << TIMESTAMP_BITS) - 1
OKAY, SLVERR, DECERR = 0, 2, 3
_RESP_CODES = {"OKAY": OKAY, "SLVERR": SLVERR, "DECERR": DECERR}
_BUS_ERROR = {SLVERR: CpError.BUS_SLVERR, DECERR: CpError.BUS_DECERR}
_STALL_CHANNELS = ("aw", "w", "b", "ar", "r")


# ---------------------------------------------------------------------------- the register map

@dataclass(frozen=True)
class _RegSlot:
    """One 32-bit register of the map, with its fields sorted by access type."""

    reg: type[Register]
    index: int
    label: str  # "SCRATCH", "PERF_PACKETS[3]"
    rw: int  # sw=rw storage
    w1c: int  # sw=rw, onwrite=woclr, hwset: sticky events
    wo: int  # sw=w: read 0 (singlepulse pulses, swmod held values)
    pulse: int  # singlepulse bits
    swmod: int  # fields whose write is an event (the doorbell)
    const: int  # sw=r, hw=na: the reset value, always
    hw: int  # sw=r, hw=w: driven by the hardware
    reset: int  # initial storage

    @property
    def readable(self) -> bool:
        return bool(self.rw | self.w1c | self.const | self.hw)


def _slots(queues: bool = True, sdma: bool = True) -> dict[int, _RegSlot]:
    """The register map: every backend's registers (and those of engines only the model has
    so far: spec/regs.rdl's model_only registers, none today); without `queues`, none of the
    CP's second queue's (a device with one CP queue); without `sdma`, none of the SDMA
    engine's (a device without one)."""
    out = {}
    for reg in (*regs.REGISTERS, *regs.MODEL_ONLY_REGISTERS):
        if not sdma and reg.NAME.startswith(("SDMA_", "PERF_SDMA_")):
            continue
        if not queues and reg.NAME.startswith(("CP_HQD1_", "CP_QUEUE_")):
            continue
        masks = dict(rw=0, w1c=0, wo=0, pulse=0, swmod=0, const=0, hw=0)
        reset = 0
        for f in reg.FIELDS:
            if f.sw == "rw" and f.onwrite == "woclr":
                masks["w1c"] |= f.mask
            elif f.sw == "rw":
                masks["rw"] |= f.mask
            elif f.sw == "w":
                masks["wo"] |= f.mask
                if f.singlepulse:
                    masks["pulse"] |= f.mask
                if f.swmod:
                    masks["swmod"] |= f.mask
            elif f.hw == "na":
                masks["const"] |= f.put(f.reset or 0)
            else:
                masks["hw"] |= f.mask
            if f.sw != "r" and f.reset:
                reset |= f.put(f.reset)
        for i in range(reg.ARRAY_LEN):
            label = f"{reg.NAME}[{i}]" if reg.ARRAY_LEN > 1 else reg.NAME
            out[reg.addr(i)] = _RegSlot(reg, i, label, reset=reset, **masks)
    return out


# Registers whose value RefModel._sync caches for the CP.
_CONFIG_REGS = frozenset({"CONTROL", "RB_CNTL", "RB_BASE_LO", "RB_BASE_HI", "RB_SIZE", "RB_RPTR_ADDR_LO",
                          "RB_RPTR_ADDR_HI", "IH_CNTL", "IH_BASE_LO", "IH_BASE_HI", "IH_SIZE",
                          "IH_WPTR_ADDR_LO", "IH_WPTR_ADDR_HI", "VM_CONTEXT_CNTL", "VM_CONTEXT_PT_BASE_LO",
                          "VM_CONTEXT_PT_BASE_HI"})
_FETCH, _READ, _WRITE = vm_spec.Access.FETCH, vm_spec.Access.READ, vm_spec.Access.WRITE
_PAGE_MASK = vm_spec.PAGE_SIZE - 1


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


def _anon_memory(size: int) -> tuple[np.ndarray, int | None]:
    """Zeroed memory backed by an anonymous file (memfd), so the KMD can give each CPU
    mapping of a buffer an OS mapping of its own (Device.mem_file); plain memory where
    there is no memfd."""
    try:
        fd = os.memfd_create("gpucosim-model-mem", os.MFD_CLOEXEC)
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return np.zeros(size, dtype=np.uint8), None
    os.ftruncate(fd, size)
    mem = np.frombuffer(mmap.mmap(fd, size), dtype=np.uint8)
    weakref.finalize(mem, os.close, fd)
    return mem, fd


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


class RefModel(Device):
    """The whole device without cycles: see the module docstring.

    mem_size: bytes of memory (a positive multiple of 32), or give `mem`, a uint8 array
    to use as memory (e.g. a SharedMemory view for lockstep runs).
    data_width: memory bus width in bits, only shown in CAPS.BUS_BYTES_LOG2 (32..256).
    dma: a DMA engine executes DMA_DATA (CAPS.DMA); without one DMA_DATA is UNSUPPORTED.
    ih: an IH ring writer is present (CAPS.IH); without one no IH entries are written.
    vm: an MMU translates (CAPS.VM); tlb_entries: what VM_CAPS.TLB_LOG2 reports (the model
    has no TLB size: it keeps every translation until an invalidation names it); vm_levels:
    VM_CAPS.LEVELS, page-table levels (1 to 4: virtual addresses of 21 to 48 bits).
    queues: the CP's second hardware queue (QUEUE_CAPS.CP_QUEUES), CP_HQD1_*, with priorities
    and per-queue reset (testbench/model_cp_queues.py), as the RTL has (rtl/cp/queues.py);
    without it its registers answer DECERR (a device with one CP queue, for the drivers). sdma: the SDMA copy engine (testbench/model_sdma.py), as the RTL has
    one; without it QUEUE_CAPS.SDMA reads 0 and its registers answer DECERR (a device
    without a copy engine, for the drivers' refusals).
    ib_levels: CAPS.IB_LEVELS. dma_max_bytes: BYTE_COUNT limit (DMA_BYTE_COUNT above it).
    mmio_cycles: model cycles one MMIO access costs.
    trace: called with one line per packet the CP starts (see the module docstring).
    """

    name = "model"

    def __init__(self, mem_size: int = DEFAULT_MEM_SIZE, *, mem: np.ndarray | None = None,
                 data_width: int = 64, dma: bool = True, ih: bool = True, ib_levels: int = 2,
                 vm: bool = True, tlb_entries: int = 16, vm_levels: int = vm_spec.LEVELS,
                 queues: bool = True, sdma: bool = True,
                 dma_max_bytes: int = DMA_MAX_BYTES, mmio_cycles: int = DEFAULT_MMIO_CYCLES,
                 trace: Callable[[str], None] | None = None):
        if mem is None:
            if not isinstance(mem_size, int) or mem_size <= 0 or mem_size % 32:
                raise ValueError(f"memory size must be a positive multiple of 32 bytes, not {mem_size!r}")
            mem, self._memfd = _anon_memory(mem_size)
        elif mem.dtype != np.uint8 or mem.ndim != 1 or mem.size % 32 or not mem.flags.c_contiguous:
            raise ValueError("mem must be a contiguous 1-D uint8 array whose size is a multiple of 32")
        if data_width not in (32, 64, 128, 256):
            raise ValueError(f"data_width must be 32, 64, 128 or 256, not {data_width!r}")
        if not 1 <= ib_levels <= regs.CAPS.IB_LEVELS.get(M32):
            raise ValueError(f"ib_levels must be 1..{regs.CAPS.IB_LEVELS.get(M32)}, not {ib_levels!r}")
        if vm_levels not in (1, 2, 3, 4):  # a 48-bit address at most (a PTE's address field)
            raise ValueError(f"vm_levels must be 1..4, not {vm_levels!r}")
        if sys.byteorder != "little":  # pragma: no cover
            raise NotImplementedError("the reference model needs a little-endian host")
        self._mem = mem
        self._m32 = mem.view("<u4")
        self._mv = memoryview(mem).cast("B").cast("I")  # Python ints without numpy scalars
        self._size = mem.size
        self.data_width = data_width
        self.has_dma = bool(dma)
        self.has_ih = bool(ih)
        self.has_vm = bool(vm)
        self.tlb_entries = tlb_entries
        self.ib_levels = ib_levels
        self.dma_max_bytes = dma_max_bytes
        self.mmio_cycles = mmio_cycles
        self.trace = trace
        self._bus_bytes = data_width // 8
        self._wb = self._wl = 0  # error window [wb, wl), empty
        self._wresp = OKAY
        self._slots = _slots(queues=bool(queues), sdma=bool(sdma))
        self._fault_type = _Fault
        self._hw_read: dict[str, Callable[[int], int]] = {
            "CAPS": self._caps, "STATUS": self._status, "INT_STATUS": self._int_pending,
            "IH_WPTR": lambda i: self._ih_wptr, "RB_RPTR": lambda i: self._rptr,
            "RB_WPTR": lambda i: self._wptr, "CP_ERROR": self._cp_error,
            "CP_ERROR_ADDR_LO": lambda i: self._err_addr & M32,
            "CP_ERROR_ADDR_HI": lambda i: self._err_addr >> 32,
            "CP_ERROR_OFFSET": lambda i: self._err_offset,
            "TIMESTAMP_LO": lambda i: self._t & M32,
            "TIMESTAMP_HI": lambda i: (self._t & _TS_MASK) >> 32,
            "PERF_BUSY_CYCLES": lambda i: self._busy & M32,
            "PERF_STALL_CYCLES": lambda i: self._stall & M32,
            "PERF_DWORDS_FETCHED": lambda i: self._fetched & M32,
            "PERF_DMA_BYTES_READ": lambda i: self._dma_read & M32,
            "PERF_DMA_BYTES_WRITTEN": lambda i: self._dma_written & M32,
            "PERF_DMA_BUSY_CYCLES": lambda i: self._dma_busy & M32,
            "PERF_PACKETS": lambda i: self._packets[i] & M32,
            "VM_CAPS": self._vm_caps, "VM_INVALIDATE_ACK": lambda i: self._inv_ack,
            "VM_FAULT_STATUS": self._vm_fault_status,
            "VM_FAULT_ADDR_LO": lambda i: self._err_addr & M32 if self._err_code == CpError.VM_FAULT else 0,
            "VM_FAULT_ADDR_HI": lambda i: self._err_addr >> 32 if self._err_code == CpError.VM_FAULT else 0,
            "PERF_TLB_HITS": lambda i: 0, "PERF_TLB_MISSES": lambda i: 0, "PERF_WALK_CYCLES": lambda i: 0,
        }
        self._store = {off: s.reset for off, s in self._slots.items()}
        self.sdma: SdmaEngine | None = SdmaEngine(self) if sdma else None
        self._hq1: CpQueue1 | None = None
        self._ring_id = 0  # the IH RING_ID of the CP queue whose state is in these attributes
        caps = regs.QUEUE_CAPS.SDMA.put(int(bool(sdma))) | regs.QUEUE_CAPS.CP_QUEUES.put(2 if queues else 1)
        self._hw_read["QUEUE_CAPS"] = lambda i: caps
        if self.sdma is not None:
            self._hw_read.update(self.sdma.hw_read())
        if queues:
            self._hq1 = CpQueue1(self)
            self._hw_read.update(self._hq1.hw_read())
        missing = {s.reg.NAME for s in self._slots.values() if s.hw} - set(self._hw_read)
        if missing:
            raise NotImplementedError(f"the reference model does not drive {sorted(missing)}")
        self._kinds = {p.opcode: _kind(p) for p in pk.PACKETS}
        self._exec = {
            pk.NOP.opcode: self._op_nop, pk.WRITE_DATA.opcode: self._op_write_data,
            pk.INDIRECT_BUFFER.opcode: self._op_indirect_buffer,
            pk.WAIT_REG_MEM.opcode: self._op_wait_reg_mem, pk.RELEASE_MEM.opcode: self._op_release_mem,
            pk.DMA_DATA.opcode: self._op_dma_data,
        }
        if set(self._exec) != set(self._kinds):
            raise NotImplementedError("spec/packets.py has packets the reference model does not execute")
        self._headers: dict[int, tuple] = {}  # header dword -> _header()'s answer
        self._off = {name: getattr(regs, name).addr() for name in (
            "CONTROL", "INT_STATUS", "INT_ENABLE", "INT_FORCE", "IH_BASE_LO", "IH_BASE_HI", "IH_SIZE",
            "IH_RPTR", "IH_WPTR_ADDR_LO", "IH_WPTR_ADDR_HI", "IH_CNTL", "RB_BASE_LO", "RB_BASE_HI",
            "RB_SIZE", "RB_RPTR_ADDR_LO", "RB_RPTR_ADDR_HI", "RB_DOORBELL", "RB_CNTL")}
        self._t = 0
        self._inv_ack = 0
        self._mmu = ModelMmu(self._m32, self._entry_ok, vm_levels)
        self._perf_clear()
        self._soft_reset()
        self._sync()

    # ------------------------------------------------------------------ Device API

    def mmio_read32(self, offset: int) -> int:
        if type(offset) is not int or offset not in self._slots:
            return self._mmio_read32_checked(offset)
        self._spend(self.mmio_cycles)
        return self._peek(offset)

    def mmio_write32(self, offset: int, value: int) -> None:
        if type(offset) is not int or type(value) is not int or offset not in self._slots or not 0 <= value <= M32:
            return self._mmio_write32_checked(offset, value)
        self._spend(self.mmio_cycles)
        self._poke(offset, value, M32)

    # the same with every argument check, for anything off the common path
    def _mmio_read32_checked(self, offset: int) -> int:
        self._check_offset(offset)
        self._check_mmio_range(offset, 4)
        self._spend(self.mmio_cycles)
        if offset not in self._slots:
            raise BusError("read", offset, DECERR)
        return self._peek(offset)

    def _mmio_write32_checked(self, offset: int, value: int) -> None:
        self._check_offset(offset)
        self._check_value(value)
        self._check_mmio_range(offset, 4)
        self._spend(self.mmio_cycles)
        if offset not in self._slots:
            raise BusError("write", offset, DECERR)
        self._poke(offset, value, M32)

    def mmio_write_bytes(self, offset: int, data: bytes) -> None:
        """A narrow MMIO write (byte strobes), one access per 32-bit word touched."""
        data = bytes(data)
        self._check_mmio_range(offset, len(data))
        pos = 0
        while pos < len(data):
            word = (offset + pos) & ~3
            lane = (offset + pos) & 3
            n = min(4 - lane, len(data) - pos)
            value = int.from_bytes(data[pos:pos + n], "little") << (8 * lane)
            bytemask = ((1 << (8 * n)) - 1) << (8 * lane)
            self._spend(self.mmio_cycles)
            if word not in self._slots:
                raise BusError("write", word, DECERR)
            self._poke(word, value, bytemask)
            pos += n

    @property
    def mem(self) -> np.ndarray:
        return self._mem

    def now(self) -> int:
        return self._t

    def delay(self, cycles: int) -> None:
        if cycles > 0:
            self._advance(self._t + cycles)

    def wait_irq(self, timeout_cycles: int) -> bool:
        if self._irq():
            return True
        if timeout_cycles <= 0:
            return False
        return self._advance(self._t + timeout_cycles, until_irq=True)

    def close(self) -> None:
        pass

    def mem_file(self) -> tuple[int, int] | None:
        fd = self.__dict__.get("_memfd")
        return (fd, 0) if fd is not None else super().mem_file()

    # ------------------------------------------------------------------ memory model settings

    def configure(self, *, error_window: tuple[int, int, int | str] | None = None,
                  rd_latency: int = 0, wr_latency: int = 0,
                  stall: Mapping[str, float | int] | None = None, seed: int = 1) -> None:
        """The RTL memory model's settings (testbench.memory.configure). Only
        `error_window` = (base, limit, "SLVERR" | "DECERR" | 2 | 3) means something here
        (None: no window); latencies, stalls and seed are checked and ignored."""
        for name, v in (("rd_latency", rd_latency), ("wr_latency", wr_latency)):
            if not 0 <= v <= 0xFFFF:
                raise ValueError(f"{name} must be 0..65535 cycles, not {v!r}")
        unknown = set(stall or {}) - set(_STALL_CHANNELS)
        if unknown:
            raise ValueError(f"unknown stall channel(s) {sorted(unknown)}: choose from {', '.join(_STALL_CHANNELS)}")
        if error_window is None:
            self._wb = self._wl = 0
            self._wresp = OKAY
            return
        base, limit, resp = error_window
        if isinstance(resp, str):
            if resp.upper() not in _RESP_CODES:
                raise ValueError(f"unknown AXI response {resp!r}: choose SLVERR or DECERR")
            resp = _RESP_CODES[resp.upper()]
        if resp not in (OKAY, SLVERR, DECERR):
            raise ValueError(f"error_window response must be SLVERR (2) or DECERR (3), not {resp!r}")
        if limit <= base or resp == OKAY:
            base = limit = 0  # an empty window, as axi_mem treats limit <= base
        self._wb, self._wl, self._wresp = base, limit, resp

    @property
    def mem_model(self) -> "RefModel":
        """As CocotbDevice.mem_model: `dev.mem_model.configure(...)` works on both backends."""
        return self

    # ------------------------------------------------------------------ snapshot (issue 5)

    def snapshot(self, *, memory: bool = True, exclude: Iterable[tuple[int, int]] = ()) -> dict:
        """`snapshot(self)` read without spending model time."""
        return snapshot(self, memory=memory, exclude=exclude, read=self._peek)

    # ------------------------------------------------------------------ registers

    @staticmethod
    def _check_mmio_range(offset: int, n: int) -> None:
        if offset < 0 or offset + n > 1 << regs.MMIO_ADDR_WIDTH:
            raise ValueError(f"MMIO offset {offset:#x} is outside the {regs.MMIO_ADDR_WIDTH}-bit register space")

    def _peek(self, offset: int) -> int:
        """A register's value now, at no cost in time."""
        s = self._slots[offset]
        v = (self._store[offset] & (s.rw | s.w1c)) | s.const
        if s.hw:
            v |= self._hw_read[s.reg.NAME](s.index) & s.hw
        return v

    def _poke(self, offset: int, value: int, bytemask: int) -> None:
        s = self._slots[offset]
        old = self._store[offset]
        keep = (s.rw | s.wo) & bytemask
        new = (old & ~keep) | (value & keep)
        new &= ~(value & bytemask & s.w1c)
        self._store[offset] = new
        pulses = value & bytemask & s.pulse
        name = s.reg.NAME
        if name == "CONTROL":
            if pulses & regs.CONTROL.SOFT_RESET.mask:
                self._soft_reset()
            if pulses & regs.CONTROL.PERF_CLEAR.mask:
                self._perf_clear()
        elif name in _HQD1_CONFIG:
            self._hq1.sync()  # type: ignore[union-attr]
            if name == "CP_QUEUE_RESET":
                if pulses & regs.CP_QUEUE_RESET.Q0.mask:
                    self._reset_queue0()
                if pulses & regs.CP_QUEUE_RESET.Q1.mask:
                    self._hq1.reset()  # type: ignore[union-attr]
        elif name in _SDMA_CONFIG:
            self.sdma.sync()  # type: ignore[union-attr]
            if name == "SDMA_CNTL" and pulses & regs.SDMA_CNTL.QUEUE_RESET.mask:
                self.sdma.reset()  # type: ignore[union-attr]  # this queue alone
        elif name == "INT_FORCE":
            for f in regs.INT_FORCE.FIELDS:
                if pulses & f.mask:
                    self._store[self._off["INT_STATUS"]] |= getattr(regs.INT_STATUS, f.name).mask
        if name in _CONFIG_REGS:
            self._sync()
        if s.swmod & bytemask:
            if name == "VM_INVALIDATE_REQ":
                self._invalidate(new)
            elif name == "SDMA_DOORBELL":
                self.sdma.doorbell(new & s.swmod)  # type: ignore[union-attr]
            elif name == "CP_HQD1_RB_DOORBELL":
                with self._hq1.active():  # type: ignore[union-attr]
                    self._doorbell(new & s.swmod)
            else:
                self._doorbell(new & s.swmod)
        self._run()

    def _sync(self) -> None:
        """Cache the configuration registers the CP reads (_CONFIG_REGS)."""
        st, o = self._store, self._off
        self._halt = bool(regs.CONTROL.HALT.get(st[o["CONTROL"]]))
        cntl = st[o["RB_CNTL"]]
        self._rb_enable = bool(regs.RB_CNTL.ENABLE.get(cntl))
        self._rptr_wb = bool(regs.RB_CNTL.RPTR_WB.get(cntl))
        # AMD's units: bases hold the address >> 8, RB_SIZE log2 qwords, IH_SIZE log2 dwords
        self._rb_base = (st[o["RB_BASE_HI"]] << 32 | st[o["RB_BASE_LO"]]) << 8
        self._rb_size = 2 << regs.RB_SIZE.LOG2_QWORDS.get(st[o["RB_SIZE"]])
        self._rb_mask = self._rb_size - 1
        self._rptr_addr = (st[o["RB_RPTR_ADDR_HI"]] << 32 | st[o["RB_RPTR_ADDR_LO"]]) & ~3
        ihc = st[o["IH_CNTL"]]
        self._ih_enable = self.has_ih and bool(regs.IH_CNTL.ENABLE.get(ihc))
        self._ih_wptr_wb = bool(regs.IH_CNTL.WPTR_WB.get(ihc))
        self._ih_base = (st[o["IH_BASE_HI"]] << 32 | st[o["IH_BASE_LO"]]) << 8
        self._ih_bytes = ih_spec.ring_bytes(regs.IH_SIZE.LOG2_DWORDS.get(st[o["IH_SIZE"]]))
        self._ih_wptr_addr = (st[o["IH_WPTR_ADDR_HI"]] << 32 | st[o["IH_WPTR_ADDR_LO"]]) & ~3
        if self.has_vm:
            n = vm_spec.VMIDS
            self._mmu.configure(
                [bool(st[regs.VM_CONTEXT_CNTL.addr(i)] & regs.VM_CONTEXT_CNTL.ENABLE.mask) for i in range(n)],
                [(st[regs.VM_CONTEXT_PT_BASE_HI.addr(i)] << 32 | st[regs.VM_CONTEXT_PT_BASE_LO.addr(i)])
                 & vm_spec.ADDR_MASK for i in range(n)])
        self._vm_on = self._mmu.enabled

    def _invalidate(self, req: int) -> None:
        """VM_INVALIDATE_REQ: done at once (the hardware takes a few cycles)."""
        r, st = regs.VM_INVALIDATE_REQ, self._store
        vmids = r.PER_VMID.get(req)
        page = st[regs.VM_INVALIDATE_ADDR_HI.addr()] << 32 | st[regs.VM_INVALIDATE_ADDR_LO.addr()]
        self._mmu.invalidate(vmids, bool(r.ALL_ADDR.get(req)), page)
        self._inv_ack = vmids

    def _entry_ok(self, a: int) -> bool:
        """A page-table read of 8 bytes at `a` answers OKAY (the bus-error window, the memory's end)."""
        return a + 8 <= self._size and not (a + 8 > self._wb and a < self._wl)

    def _vm_caps(self, i: int) -> int:
        if not self.has_vm:
            return 0
        c = regs.VM_CAPS
        return (c.LEVELS.put(self._mmu.levels) | c.VMIDS.put(vm_spec.VMIDS)
                | c.TLB_LOG2.put(self.tlb_entries.bit_length() - 1))

    def _vm_fault_status(self, i: int) -> int:
        """The CP's VM fault, of either queue (docs/hardware.md: it holds the last CP VM
        fault; queue 1's error state is its own, in _hq1.s, while queue 0's is in place)."""
        code, vm = self._err_code, self._err_vm
        if code != CpError.VM_FAULT and self._hq1 is not None:
            code, vm = self._hq1.s["_err_code"], self._hq1.s["_err_vm"]
        if code != CpError.VM_FAULT:
            return 0
        access, cause, level, vmid = vm
        c = regs.VM_FAULT_STATUS
        return c.VMID.put(vmid) | c.ACCESS.put(access) | c.LEVEL.put(level) | c.CAUSE.put(cause)
    def _caps(self, i: int) -> int:
        c = regs.CAPS
        return (c.BUS_BYTES_LOG2.put(self._bus_bytes.bit_length() - 1) | c.ADDR_BITS.put(ADDR_BITS)
                | c.IB_LEVELS.put(self.ib_levels) | c.DMA.put(int(self.has_dma)) | c.IH.put(int(self.has_ih))
                | c.DMA_MAX_LOG2.put(self.dma_max_bytes.bit_length() - 1 if self.has_dma else 0)
                | c.VM.put(int(self.has_vm)))

    def _idle(self) -> bool:
        """STATUS.IDLE: stopped by an error, or nothing in flight and the ring empty."""
        return self._err_code != 0 or (self._wait is None and not self._frames and self._rptr == self._wptr)

    def _status(self, i: int) -> int:
        s = regs.STATUS
        in_packet = self._wait is not None
        halted = self._halt and not in_packet and not self._err_code
        return (s.IDLE.put(int(self._idle())) | s.HALTED.put(int(halted))
                | s.ERROR.put(int(self._err_code != 0)) | s.RB_EMPTY.put(int(self._rptr == self._wptr))
                | s.WAITING.put(int(in_packet)) | s.LEVEL.put(len(self._frames)))

    def _int_pending(self, i: int) -> int:
        return regs.INT_STATUS.IH_PENDING.put(int(self._ih_wptr != self._store[self._off["IH_RPTR"]]))

    def _cp_error(self, i: int) -> int:
        c = regs.CP_ERROR
        return c.CODE.put(self._err_code) | c.LEVEL.put(self._err_level) | c.OPCODE.put(self._err_opcode)

    def _irq(self) -> bool:
        o = self._off
        status = self._store[o["INT_STATUS"]] | self._int_pending(0)
        return bool(status & self._store[o["INT_ENABLE"]])

    def _soft_reset(self) -> None:
        """CONTROL.SOFT_RESET: CP (both queues), IH writer, DMA and SDMA back to a clean idle state."""
        if self.sdma is not None:
            self.sdma.reset()
        if self._hq1 is not None:
            self._hq1.reset()
            self._hq1.last = 0  # (turns start over: queue 1 first at equal priority, as the RTL)
        self._ih_wptr = 0
        self._reset_queue0()

    def _reset_queue0(self) -> None:
        """CP_QUEUE_RESET.Q0: queue 0's pointers, IB stack, wait and error (and CONTROL.SOFT_RESET)."""
        self._rptr = self._wptr = 0
        self._frames: list[list[int]] = []  # IB1, IB2: [base, size, pos]
        self._ring_ib_len = 0  # length of the ring INDIRECT_BUFFER packet while its IB runs
        self._wait: _Wait | None = None
        self._err_code = self._err_level = self._err_opcode = 0
        self._err_addr = self._err_offset = 0
        self._err_vm = (0, 0, 0, 0)
        self._err_vmid = 0
        self._vmid = 0  # the VMID the ring's INDIRECT_BUFFER gave the running IBs

    def _perf_clear(self) -> None:
        if self.sdma is not None:
            self.sdma.perf_clear()
        self._busy = self._stall = 0
        self._fetched = 0
        self._dma_read = self._dma_written = self._dma_busy = 0
        self._packets = [0] * regs.PERF_PACKETS.ARRAY_LEN

    # ------------------------------------------------------------------ time

    def _account(self, t: int) -> None:
        dt = t - self._t
        if dt > 0:
            if not self._idle() or (self._hq1 is not None and not self._hq1.idle()):
                self._busy += dt
            if self.sdma is not None and not self.sdma.idle():
                self.sdma.busy += dt
            self._t = t

    def _waiting(self) -> bool:
        """A WAIT_REG_MEM (either CP queue) or an SDMA POLL_REGMEM is pending: time passing
        can change something."""
        return (self._wait is not None or (self.sdma is not None and self.sdma.wait is not None)
                or (self._hq1 is not None and self._hq1.s["_wait"] is not None))

    def _spend(self, cycles: int) -> None:
        """Let `cycles` pass for an MMIO access (no irq level wanted)."""
        if not self._waiting():
            self._account(self._t + cycles)
        else:
            self._advance(self._t + cycles)

    def _advance(self, to: int, until_irq: bool = False) -> bool:
        """Let time pass up to `to`, polling a pending WAIT_REG_MEM and SDMA POLL_REGMEM on their
        grids, earliest first. With `until_irq`, stop as soon as irq is high; returns the irq level."""
        if not self._waiting():
            self._account(to)
            return self._irq()
        sd, h1 = self.sdma, self._hq1
        token = object()
        while True:
            w = self._wait
            sw = sd.wait if sd is not None else None
            w1 = h1.s["_wait"] if h1 is not None else None
            t_cp = w.next_poll if w is not None else None
            t_h1 = w1.next_poll if w1 is not None else None
            t_sd = sw.next_poll if sw is not None else None
            due = [t for t in (t_cp, t_h1, t_sd) if t is not None and t <= to]
            if not due:
                break
            t = min(due)
            if t == t_cp or t == t_h1:
                if t == t_cp:
                    moved = self._cp_wait_due(token, to, sw)
                else:
                    with h1.active():  # type: ignore[union-attr]
                        moved = self._cp_wait_due(token, to, sw)
                if not moved:
                    continue
            else:
                assert sw is not None and sd is not None
                final = sw.deadline is not None and sw.next_poll >= sw.deadline
                if sw.failed_in is token and not final:
                    nxt = sw.next_poll + ((to - sw.next_poll) // sw.interval + 1) * sw.interval
                    sw.next_poll = nxt if sw.deadline is None else min(nxt, sw.deadline)
                    continue
                self._account(t)
                if not sd.poll():
                    sw.failed_in = token
                    continue
            # an engine moved on: memory may have changed for the others' waits
            for x in (self._wait, sd.wait if sd is not None else None, h1.s["_wait"] if h1 is not None else None):
                if x is not None:
                    x.failed_in = None
            self._run()
            if until_irq and self._irq():
                return True
        self._account(to)
        return self._irq()

    def _cp_wait_due(self, token: object, to: int, sw) -> bool:
        """The WAIT_REG_MEM of the CP queue whose state is in the attributes is due: poll it (or
        skip the polls whose result is known); True when the queue moved on."""
        w = self._wait
        if w.failed_in is token:
            # Nothing but the engines (which wait) can change memory before `to`, or before an
            # SDMA poll gives up: the result of this wait's polls until then is known. Skip them.
            limit = to if sw is None or sw.deadline is None else min(to, sw.deadline)
            w.next_poll += ((limit - w.next_poll) // w.interval + 1) * w.interval
            return False
        self._account(w.next_poll)
        try:
            self._poll()
        except _Fault as e:
            self._fail(e)
        if self._wait is w:
            w.failed_in = token
            return False
        return True

    # ------------------------------------------------------------------ memory access by the CP

    def _first_fault(self, a: int, n: int) -> tuple[int, int]:
        """(index, response) of the first of the n dwords at byte address a (4-aligned)
        that answers an error, or (n, OKAY)."""
        size = self._size
        j_oor = 0 if a >= size else min(n, (size - a) >> 2)
        wb, wl = self._wb, self._wl
        if wl > wb and a + 4 * n > wb and a < wl:
            j_win = max(0, ((wb - a - 4) >> 2) + 1)
            if j_win <= j_oor:
                return j_win, self._wresp
        if j_oor < n:
            return j_oor, DECERR
        return n, OKAY

    def _first_bad_byte(self, a: int, n: int) -> tuple[int, int]:
        """As _first_fault, for n bytes at any address (the DMA engine)."""
        size = self._size
        j_oor = 0 if a >= size else min(n, size - a)
        wb, wl = self._wb, self._wl
        if wl > wb and a + n > wb and a < wl:
            j_win = max(0, wb - a)
            if j_win <= j_oor:
                return j_win, self._wresp
        if j_oor < n:
            return j_oor, DECERR
        return n, OKAY

    def _fetch(self, base: int, mask: int | None, start: int, k: int) -> tuple[np.ndarray, _Fault | None]:
        """Dwords [start, start + k) of the ring (index mask, VMID 0) or an IB (mask None, the
        job's VMID), cut at the first dword whose read faults: (dwords, its fault or None)."""
        if mask is None:
            segs = ((base + 4 * start, k),)
            vmid = self._vmid
        else:
            i0 = start & mask
            first = mask + 1 - i0
            segs = ((base + 4 * i0, k),) if k <= first else ((base + 4 * i0, first), (base, k - first))
            vmid = 0
        parts = []
        for a, n in segs:
            words, f = self._read32(vmid, a, n, _FETCH)
            parts.append(words)
            if f is not None:
                break
        else:
            f = None
        return (parts[0] if len(parts) == 1 else np.concatenate(parts)), f

    def _read32(self, vmid: int, va: int, n: int, access: int) -> tuple[np.ndarray, _Fault | None]:
        """The n dwords at va (4-aligned) the CP reads with `vmid`, up to the first that
        faults: (dwords, its fault or None)."""
        m32 = self._m32
        if not self._vm_on[vmid]:
            e = va + 4 * n
            i = va >> 2
            if e <= self._size and (e <= self._wb or va >= self._wl):
                return m32[i:i + n], None
            j, resp = self._first_fault(va, n)
            return m32[i:i + j], (_Fault(_BUS_ERROR[resp], va + 4 * j) if resp else None)
        parts = []
        for a, nb in pages(va, 4 * n):
            pa, why = self._mmu.translate(vmid, a, access)
            if why is not None:
                f = _vm_fault(a, access, vmid, why)
                break
            j, resp = self._first_fault(pa, nb >> 2)
            parts.append(m32[pa >> 2:(pa >> 2) + j])
            if resp:
                f = _Fault(_BUS_ERROR[resp], a + 4 * j)
                break
        else:
            f = None
        if not parts:
            return m32[0:0], f
        return (parts[0] if len(parts) == 1 else np.concatenate(parts)), f

    def _phys_span(self, vmid: int, va: int, nbytes: int, access: int) -> int:
        """The physical address of [va, va + nbytes) when it is contiguous and answers
        without an error (the fast path: one page, or no translation), else -1."""
        if self._vm_on[vmid]:
            if (va & _PAGE_MASK) + nbytes > vm_spec.PAGE_SIZE:
                return -1
            va, why = self._mmu.translate(vmid, va, access)
            if why is not None:
                return -1
        e = va + nbytes
        return va if e <= self._size and (e <= self._wb or va >= self._wl) else -1

    def _span(self, base: int, mask: int | None, start: int, k: int) -> int:
        """The physical address of dwords [start, start + k) of the ring or an IB when they
        are contiguous in memory and read without an error (the fast path), else -1."""
        if mask is None:
            return self._phys_span(self._vmid, base + 4 * start, 4 * k, _FETCH)
        i0 = start & mask
        if k > mask + 1 - i0:
            return -1
        return self._phys_span(0, base + 4 * i0, 4 * k, _FETCH)

    def _read(self, base: int, mask: int | None, start: int, k: int) -> list[int]:
        """Payload dwords the parser consumes (counted in PERF_DWORDS_FETCHED)."""
        a = self._span(base, mask, start, k)
        if a >= 0:
            self._fetched += k
            i = a >> 2
            return self._mv[i:i + k].tolist()
        words, f = self._fetch(base, mask, start, k)
        self._fetched += len(words) + (f is not None)  # the faulting dword was consumed too
        if f is not None:
            raise f
        return words.tolist()

    def _cp_write(self, a: int, words, vmid: int) -> None:
        """A CP write of dwords at a (4-aligned) with `vmid`: each page's part translated,
        then written as _cp_write_phys does. A VM fault writes nothing of its page (the MMU
        answers every block there); the error names its first address."""
        if not self._vm_on[vmid]:
            return self._cp_write_phys(a, words)
        n = len(words)
        k = 0
        for va, nb in pages(a, 4 * n):
            cnt = nb >> 2
            pa, why = self._mmu.translate(vmid, va, _WRITE)
            if why is not None:
                f = _vm_fault(va, _WRITE, vmid, why)
                f.done = min(n, (((va | 31) + 1) - a) >> 2)
                raise f
            try:
                self._cp_write_phys(pa, words[k:k + cnt])
            except _Fault as e:
                e.addr = va + (e.addr - pa)
                e.done += k
                raise
            k += cnt

    def _cp_write_phys(self, a: int, words) -> None:
        """A CP write of dwords at physical a (4-aligned). Like rtl/cp/writer.py it goes out in aligned
        32-byte blocks, each waiting for its response: on an error the earlier blocks are
        written, the faulting block keeps its good dwords, later blocks are not written;
        the error names the block's first written address and its worst response."""
        n = len(words)
        if not n:
            return
        e = a + 4 * n
        i = a >> 2
        if e <= self._size and (e <= self._wb or a >= self._wl):
            if n <= 8 and isinstance(words, list):
                mv = self._mv
                for k, w in enumerate(words):
                    mv[i + k] = w
            else:
                self._m32[i:i + n] = words
            return
        j, resp = self._first_fault(a, n)
        if not resp:
            self._m32[i:i + n] = words
            return
        fa = a + 4 * j
        js = max(0, ((fa & ~31) - a) >> 2)
        je = min(n, (((fa | 31) + 1) - a) >> 2)
        if js:
            self._m32[i:i + js] = words[:js]
        worst = OKAY
        for k in range(js, je):
            _, r = self._first_fault(a + 4 * k, 1)
            if r:
                worst = max(worst, r)
            else:
                self._m32[i + k] = words[k]
        raise _Fault(_BUS_ERROR[worst], a + 4 * js, done=je)

    # ------------------------------------------------------------------ doorbell, errors, IH

    def _doorbell(self, v: int) -> None:
        if not self._rb_enable or self._err_code:
            return
        if (v - self._wptr) & 0x8000_0000:
            self._latch(CpError.DOORBELL_BACKWARDS, IbLevel.RING, 0, v, self._rptr & self._rb_mask, None, 0)
        elif ((v - self._rptr) & M32) > self._rb_size:
            self._latch(CpError.DOORBELL_OVERFLOW, IbLevel.RING, 0, v, self._rptr & self._rb_mask, None, 0)
        else:
            self._wptr = v

    def _latch(self, code: int, level: int, opcode: int, addr: int, offset: int, vm: tuple | None,
               vmid: int) -> None:
        """The first error stops the CP: latch it, raise INT_STATUS.CP_ERROR, write an entry
        (a VM fault's: AMD's UTCL2 fault with gmc_v9's source data). `vm`: a VM fault's
        (access, cause, level, vmid); `vmid`: the VMID of the work that failed."""
        if self._err_code:
            return
        self._err_code, self._err_level, self._err_opcode = int(code), int(level), opcode
        self._err_addr, self._err_offset = addr & _ADDR_MASK, offset & M32
        self._err_vm = vm or (0, 0, 0, 0)
        self._err_vmid = vmid
        self._wait = None
        self._store[self._off["INT_STATUS"]] |= regs.INT_STATUS.CP_ERROR.mask
        try:
            if code == CpError.VM_FAULT:
                d0, d1 = vm_spec.fault_src_data(self._err_addr, vm[0])
                self._ih_append(ih_spec.Source.VM_FAULT, d0, d1, self._vm_fault_status(0), self._cp_error(0),
                                client=ih_spec.Client.UTCL2, vmid=vmid)
            else:
                self._ih_append(ih_spec.Source.CP_ERROR, self._cp_error(0), self._err_addr & M32,
                                self._err_addr >> 32, self._err_offset, vmid=vmid)
        except _Fault:
            pass  # the error entry itself could not be written; the CP is stopped already

    def _ih_append(self, source: int, d0: int, d1: int, d2: int, d3: int,
                   client: int = ih_spec.Client.GRBM_CP, vmid: int = 0, event: int = 0) -> None:
        """One interrupt's IH entry; raises _Fault when its write (or the wptr write-back) fails.
        `event`: INT_STATUS bits set once the entry is in the ring, before the wptr write-back
        (as the RTL sets EOP with IH_PENDING: rtl/cp/ih.py)."""
        if not self._ih_enable:
            return
        wptr, size = self._ih_wptr, self._ih_bytes
        if ((wptr - self._store[self._off["IH_RPTR"]]) & M32) >= size:
            self._store[self._off["INT_STATUS"]] |= regs.INT_STATUS.IH_OVERFLOW.mask
            return
        ts = self._t & _TS_MASK
        ring = self._ring_id if client != ih_spec.Client.SDMA0 else 0
        entry = ih_spec.encode(CLIENT_ID=int(client), SOURCE_ID=int(source), RING_ID=ring, VMID=vmid,
                               TIMESTAMP_LO=ts & M32,
                               TIMESTAMP_HI=ts >> 32, DATA0=d0, DATA1=d1, DATA2=d2, DATA3=d3)
        self._cp_write(self._ih_base + (wptr & (size - 1)), entry, 0)
        self._ih_wptr = (wptr + ih_spec.ENTRY_BYTES) & M32
        self._store[self._off["INT_STATUS"]] |= event
        if self._ih_wptr_wb:
            self._cp_write(self._ih_wptr_addr, [self._ih_wptr], 0)

    # ------------------------------------------------------------------ the command processor

    def _run(self) -> None:
        """Run the engines: the CP, then the SDMA queue (each until it is empty, halted,
        stopped by an error or waiting)."""
        self._run_cp()
        if self.sdma is not None:
            self.sdma.run()

    def _run_cp(self) -> None:
        """Execute packets until the ring is empty, or the CP is halted, stopped by an
        error, or waiting in a WAIT_REG_MEM; with queue 1 in use, the arbiter picks the
        queue of each packet (model_cp_queues.py)."""
        h = self._hq1
        if h is not None and (h.s["_rb_enable"] or h.s["_frames"]):
            runnable = h.runnable
            while True:
                q = h.pick(runnable(self), h.runnable1())
                if q is None or not (runnable(self) or h.runnable1()):
                    return
                h.last = q
                if q:
                    with h.active():
                        try:
                            self._step()
                        except _Fault as e:
                            self._fail(e)
                else:
                    try:
                        self._step()
                    except _Fault as e:
                        self._fail(e)
        while not self._err_code and self._wait is None and not self._halt:
            if not self._frames and (not self._rb_enable or self._rptr == self._wptr):
                return
            try:
                self._step()
            except _Fault as e:
                self._fail(e)

    def _fail(self, e: _Fault) -> None:
        """Latch a fault of the packet in hand (self._cur_*)."""
        vmid = e.vm[3] if e.vm is not None else (self._vmid if self._cur_level else 0)
        self._latch(e.code, self._cur_level, self._cur_opcode if e.opcode is None else e.opcode,
                    e.addr, self._cur_offset, e.vm, vmid)

    def _step(self) -> None:
        """Fetch, check and execute the next packet."""
        frames = self._frames
        level = len(frames)
        if level:
            base, size, pos = frames[-1]
            mask = None
            avail = size - pos
            off = pos
        else:
            base, mask, pos = self._rb_base, self._rb_mask, self._rptr
            avail = (self._wptr - pos) & M32
            off = pos & mask
        self._cur_level, self._cur_offset, self._cur_opcode = level, off, 0
        ha = base + 4 * off
        self._fetched += 1  # the header, even when its read faults
        pa = ha
        if self._vm_on[self._vmid if level else 0]:
            vmid = self._vmid if level else 0
            pa, why = self._mmu.translate(vmid, ha, _FETCH)
            if why is not None:
                raise _vm_fault(ha, _FETCH, vmid, why, 0)
        if not (pa + 4 <= self._size and (pa + 4 <= self._wb or pa >= self._wl)):
            _, resp = self._first_fault(pa, 1)
            if resp:
                raise _Fault(_BUS_ERROR[resp], ha, 0)
        h = self._mv[pa >> 2]
        known = self._headers.get(h)
        if known is None:
            known = self._header(h, ha)
        op, n, run, kind = known
        if n > avail:
            self._cur_opcode = op
            raise _Fault(CpError.BAD_COUNT, ha)
        self._cur_opcode = op
        if self.trace is not None:
            self._trace(level, base, mask, pos, off, n)
        run(kind, level, base, mask, pos, ha, n)

    def _header(self, h: int, ha: int) -> tuple:
        """Decode and check a header dword on its own (type, opcode, COUNT range):
        (opcode, packet dwords, executor, kind), remembered for the next packet with
        the same header; raises the fault of a bad one. A type-2 dword and the header-only
        NOP (NOP_PAD) are one-dword NOPs."""
        t = (h >> _TYPE_LSB) & _TYPE_MAX
        if t == _TYPE2 or (t == _TYPE3 and h & _NOP_PAD_MASK == pk.NOP_PAD):  # (header flags ignored)
            known = (0 if t == _TYPE2 else pk.NOP.opcode, 1, self._op_filler, None)
        else:
            op = (h >> _OPCODE_LSB) & _OPCODE_MAX
            kind = self._kinds.get(op)
            if (h >> _TYPE_LSB) & _TYPE_MAX != _TYPE3:
                raise _Fault(CpError.ILLEGAL_OPCODE, ha, 0)  # type 0 or 1
            if kind is None:
                raise _Fault(CpError.ILLEGAL_OPCODE, ha, op)
            count = (h >> _COUNT_LSB) & _COUNT_MAX
            if not kind.min_count <= count <= kind.max_count:
                raise _Fault(CpError.BAD_COUNT, ha, op)
            known = (op, count + 2, self._exec[op], kind)
        if len(self._headers) >= _HEADER_CACHE:
            self._headers.clear()  # random streams: keep the cache bounded
        self._headers[h] = known
        return known

    def _op_filler(self, kind, level, base, mask, pos, ha, n) -> None:
        self._packets[pk.NOP.index] += 1  # a filler counts as a NOP
        self._complete(level, 1)

    def _trace(self, level: int, base: int, mask: int | None, pos: int, off: int, n: int) -> None:
        words, _ = self._fetch(base, mask, pos, n)  # a faulting packet is shown cut short
        where = ("HQD1 " if self._ring_id else "") + IbLevel(level).name  # which CP queue
        self.trace(f"{where}+{4 * off:#06x}: {pm4.describe(pm4.decode(words.tolist(), 0))}")

    def _check(self, kind: _Kind, p: list[int], ha: int) -> None:
        """The field checks of spec/packets.py: UNSUPPORTED values, then alignment."""
        for dw, lsb, mx, ok in kind.supported:
            if (p[dw] >> lsb) & mx not in ok:
                raise _Fault(CpError.UNSUPPORTED, ha)
        self._check_align(kind, p, ha, CpError.FENCE_MISALIGNED)
        self._packets[kind.index] += 1  # the packet starts executing

    @staticmethod
    def _check_align(kind: _Kind, p: list[int], ha: int, code: int) -> None:
        for dw, low, when in kind.aligns:
            if p[dw] & low and (when is None or (p[when[0]] >> when[1]) & when[2] in when[3]):
                raise _Fault(code, ha)

    def _complete(self, level: int, n: int) -> None:
        """The packet of n dwords at the current position has finished executing."""
        if level:
            fr = self._frames[-1]
            fr[2] += n
            if fr[2] >= fr[1]:
                self._retire()
        else:
            self._ring_advance(n)

    def _retire(self) -> None:
        """Pop IBs that have run to their end; the ring packet that started IB1 is done then."""
        frames = self._frames
        while frames and frames[-1][2] >= frames[-1][1]:
            frames.pop()
            if not frames:
                # a write-back fault belongs to the ring's INDIRECT_BUFFER packet
                self._cur_level, self._cur_offset = IbLevel.RING, self._rptr & self._rb_mask
                self._cur_opcode = pk.INDIRECT_BUFFER.opcode
                self._ring_advance(self._ring_ib_len)

    def _ring_advance(self, n: int) -> None:
        self._rptr = (self._rptr + n) & M32
        if self._rptr_wb:
            self._cp_write(self._rptr_addr, [self._rptr], 0)

    # -- packets (kind, level, buffer base, ring mask or None, header index, header address, length)

    def _op_nop(self, kind, level, base, mask, pos, ha, n) -> None:
        if self._span(base, mask, pos + 1, n - 1) >= 0:
            self._fetched += n - 1
        else:
            words, f = self._fetch(base, mask, pos + 1, n - 1)
            self._fetched += len(words) + (f is not None)
            if f is not None:
                raise f
        self._packets[kind.index] += 1
        self._complete(level, n)

    def _op_write_data(self, kind, level, base, mask, pos, ha, n) -> None:
        fixed = kind.fixed
        p = self._read(base, mask, pos + 1, fixed)
        self._check(kind, p, ha)
        addr = _addr_of(p, _WD_ADDR)
        count = n - 1 - fixed
        vmid = self._vmid if level else 0
        if _get(p, _WD_INCR) == _WD_NO_INCREMENT:
            # every dword to addr: the last one stays, and only it is written (rtl/cp/write_data.py)
            data, f = self._fetch(base, mask, pos + 1 + fixed, count)
            self._fetched += len(data) + (f is not None)
            if f is not None:
                raise f
            self._cp_write(addr, [int(data[-1])], vmid)
            self._complete(level, n)
            return
        src = self._span(base, mask, pos + 1 + fixed, count)
        dst = self._phys_span(vmid, addr, 4 * count, _WRITE) if src >= 0 else -1
        if dst >= 0:
            i, j = src >> 2, dst >> 2
            self._mv[j:j + count] = self._mv[i:i + count]
            self._fetched += count
            self._complete(level, n)
            return
        # The data streams through in 32-byte destination blocks: a fetch error stops
        # before the block holding the faulting dword, a write error inside its block.
        data, f = self._fetch(base, mask, pos + 1 + fixed, count)
        if f is not None:
            kf = len(data)
            self._fetched += kf + 1
            self._cp_write(addr, data[:max(0, (((addr + 4 * kf) & ~31) - addr) >> 2)], vmid)
            raise f
        try:
            self._cp_write(addr, data, vmid)
        except _Fault as e:
            self._fetched += e.done
            raise
        self._fetched += count
        self._complete(level, n)

    def _op_indirect_buffer(self, kind, level, base, mask, pos, ha, n) -> None:
        # docs/hardware.md's order: UNSUPPORTED (fields, CHAIN in the ring), IB_MISALIGNED,
        # IB_SIZE_ZERO, IB_NESTING, BUS_DECERR (a base beyond the bus)
        p = self._read(base, mask, pos + 1, n - 1)
        chain = _get(p, _IB_CHAIN)
        if chain and level == IbLevel.RING:
            raise _Fault(CpError.UNSUPPORTED, ha)
        for dw, lsb, mx, ok in kind.supported:
            if (p[dw] >> lsb) & mx not in ok:
                raise _Fault(CpError.UNSUPPORTED, ha)
        self._check_align(kind, p, ha, CpError.IB_MISALIGNED)
        size = _get(p, _IB_SIZE)
        if not size:
            raise _Fault(CpError.IB_SIZE_ZERO, ha)
        if not chain and level + 1 > self.ib_levels:
            raise _Fault(CpError.IB_NESTING, ha)
        ib = _addr_of(p, _IB_BASE)
        if ib >> ADDR_BITS:
            raise _Fault(CpError.BUS_DECERR, ib)  # (reported as its low 48 bits)
        self._packets[kind.index] += 1
        frame = [ib, size, 0]
        if chain:
            self._frames[-1] = frame  # the current IB ends here; the new one runs at its level
        else:
            if level:
                self._frames[-1][2] += n
            else:
                self._ring_ib_len = n  # rptr moves past it when the whole IB has run
                self._vmid = _get(p, _IB_VMID)  # only the kernel ring names the VMID
            self._frames.append(frame)

    def _op_wait_reg_mem(self, kind, level, base, mask, pos, ha, n) -> None:
        p = self._read(base, mask, pos + 1, n - 1)
        self._check(kind, p, ha)
        addr, ref, msk = _addr_of(p, _WRM_ADDR), _get(p, _WRM_REF), _get(p, _WRM_MASK)
        compare = _WRM_COMPARE[_get(p, _WRM_FUNC)]
        vmid = self._vmid if level else 0
        pa = self._phys_span(vmid, addr, 4, _READ)
        if pa >= 0 and compare(self._mv[pa >> 2] & msk, ref):
            self._complete(level, n)  # the first poll, at once, holds
            return
        self._wait = _Wait(addr, ref, msk, compare, max(1, _get(p, _WRM_POLL)), self._t, level,
                           self._cur_offset, n, vmid)
        self._poll()

    def _poll(self) -> None:
        """One read of the pending WAIT_REG_MEM at the current time; it finishes when the
        condition holds, else the next read is due one interval later."""
        w = self._wait
        self._cur_level, self._cur_offset, self._cur_opcode = w.level, w.offset, pk.WAIT_REG_MEM.opcode
        pa, why = self._mmu.translate(w.vmid, w.addr, _READ)  # every poll is translated
        if why is not None:
            self._wait = None
            raise _vm_fault(w.addr, _READ, w.vmid, why)
        _, resp = self._first_fault(pa, 1)
        if resp:
            self._wait = None
            raise _Fault(_BUS_ERROR[resp], w.addr)
        if not w.compare(self._mv[pa >> 2] & w.mask, w.ref):
            w.next_poll = self._t + w.interval
            return
        self._wait = None
        self._complete(w.level, w.length)

    def _op_release_mem(self, kind, level, base, mask, pos, ha, n) -> None:
        p = self._read(base, mask, pos + 1, n - 1)
        self._check(kind, p, ha)
        addr = _addr_of(p, _RM_ADDR)
        sel = _get(p, _RM_DATA_SEL)
        lo, hi = _get(p, _RM_LO), _get(p, _RM_HI)
        vmid = self._vmid if level else 0
        if sel == _RM_SEL["DATA_32"]:
            self._cp_write(addr, [lo], vmid)
        elif sel == _RM_SEL["DATA_64"]:
            self._cp_write(addr, [lo, hi], vmid)
        elif sel == _RM_SEL["TIMESTAMP"]:
            ts = self._t & _TS_MASK
            self._cp_write(addr, [ts & M32, ts >> 32], vmid)
        if _get(p, _RM_INT) in _RM_INTERRUPTS:
            eop = regs.INT_STATUS.EOP.mask
            self._ih_append(ih_spec.Source.EOP, _get(p, _RM_CTX), lo, hi, p[_RM_ADDR[0]], vmid=vmid, event=eop)
            self._store[self._off["INT_STATUS"]] |= eop  # (also with no entry: IH off, or full)
        self._complete(level, n)

    def _op_dma_data(self, kind, level, base, mask, pos, ha, n) -> None:
        p = self._read(base, mask, pos + 1, n - 1)
        if not self.has_dma:
            raise _Fault(CpError.UNSUPPORTED, ha)
        for dw, lsb, mx, ok in kind.supported:
            if (p[dw] >> lsb) & mx not in ok:
                raise _Fault(CpError.UNSUPPORTED, ha)
        count = _get(p, _DMA_COUNT)
        if count > self.dma_max_bytes:
            raise _Fault(CpError.DMA_BYTE_COUNT, ha)
        self._packets[kind.index] += 1
        # the DMA engine drives 48 address bits: higher ADDR_HI bits are dropped (docs/hardware.md)
        dst = _addr_of(p, _DMA_DST) & _ADDR_MASK
        fill = _get(p, _DMA_SRC_SEL) == _DMA_FILL
        src = p[_DMA_SRC[0]] if fill else _addr_of(p, _DMA_SRC) & _ADDR_MASK
        self._dma(dst, src, count, fill, self._vmid if level else 0)  # at once: CP_SYNC holds trivially
        self._complete(level, n)

    def _dma_count(self, acct, read: int = 0, written: int = 0, busy: int = 0) -> None:
        """Count a transfer's bytes: the CP's DMA counters, or (acct) the SDMA engine's."""
        if acct is None:
            self._dma_read += read
            self._dma_written += written
            self._dma_busy += busy
        else:
            acct.bytes_read += read
            acct.bytes_written += written

    def _dma(self, dst: int, src: int, count: int, fill: bool, vmid: int, acct=None) -> None:
        """Copy `count` bytes from src to dst (as memmove), or fill them with the 32-bit
        value src: the byte at address a gets byte (a mod 4) of the value, as the engine
        puts the value on every dword lane. Any alignment; both sides translated with `vmid`.

        Errors, as the RTL engine reports them (docs/hardware.md): a read error at the
        first byte the transfer needed in the faulting beat; a write error at the first
        byte of the faulting burst (bursts split at min(16 beats, 4 KiB)-aligned
        boundaries; B carries no beat detail). A VM fault is a page's error: its first
        byte the transfer needs. What a failing transfer leaves in its destination is
        not defined (bursts already under way complete); here the bytes before the first
        faulting one are moved."""
        kr, rresp, rwhy = (count, OKAY, None) if fill else self._bad_byte(vmid, src, count, vm_spec.Access.DMA_READ)
        kw, wresp, wwhy = self._bad_byte(vmid, dst, count, vm_spec.Access.DMA_WRITE)
        k = min(kr, kw)
        B = self._bus_bytes
        if k:
            if not self._vm_on[vmid]:
                self._dma_move(dst, src, k, fill)
            else:
                data = None if fill else self._gather(vmid, src, k)
                done = 0
                for va, nb in pages(dst, k):
                    pa, _ = self._mmu.translate(vmid, va, vm_spec.Access.DMA_WRITE)
                    if fill:
                        self._dma_move(pa, src, nb, True)
                    else:
                        self._mem[pa:pa + nb] = data[done:done + nb]
                    done += nb
            self._dma_count(acct, written=k, busy=-(-k // B))
        if not fill and count:
            # the engine reads whole bus beats: every beat touching [src, src + bytes read)
            end = src + (kr + (1 if rresp or rwhy else 0) if rresp or rwhy else count)
            self._dma_count(acct, read=((end + B - 1) // B - src // B) * B)
        if (rresp or rwhy) and kr <= kw:
            bad = src + kr
            at = max(src, bad - bad % B)
            if rwhy is not None:
                raise _vm_fault(at, vm_spec.Access.DMA_READ, vmid, rwhy)
            raise _Fault(_BUS_ERROR[rresp], at)
        if wresp or wwhy:
            bad = dst + kw
            burst = min(16 * B, 4096)
            at = max(dst, bad - bad % burst)
            if wwhy is not None:
                raise _vm_fault(at, vm_spec.Access.DMA_WRITE, vmid, wwhy)
            raise _Fault(_BUS_ERROR[wresp], at)

    def _dma_move(self, dst: int, src: int, k: int, fill: bool) -> None:
        """Move (or fill) k physical bytes."""
        mem = self._mem
        if fill:
            end = dst + k
            a0, a1 = min(end, (dst + 3) & ~3), max(dst, end & ~3)
            if a0 < a1:
                self._m32[a0 >> 2:a1 >> 2] = src  # whole dwords: the value as it is
            for a in (*range(dst, a0), *range(max(a0, a1), end)):  # at most 3 + 3 edge bytes
                mem[a] = (src >> 8 * (a & 3)) & 0xFF
        else:
            mem[dst:dst + k] = mem[src:src + k]  # numpy buffers overlapping slices: memmove

    def _gather(self, vmid: int, va: int, n: int) -> np.ndarray:
        """A copy of the n bytes at va (every page known to translate)."""
        out = np.empty(n, dtype=np.uint8)
        done = 0
        for a, nb in pages(va, n):
            pa, _ = self._mmu.translate(vmid, a, vm_spec.Access.DMA_READ)
            out[done:done + nb] = self._mem[pa:pa + nb]
            done += nb
        return out

    def _bad_byte(self, vmid: int, va: int, n: int, access: int) -> tuple[int, int, tuple | None]:
        """(index, bus response, VM fault (cause, level)) of the first of the n bytes at va
        that fails, or (n, OKAY, None)."""
        if not self._vm_on[vmid]:
            k, resp = self._first_bad_byte(va, n)
            return k, resp, None
        k = 0
        for a, nb in pages(va, n):
            pa, why = self._mmu.translate(vmid, a, access)
            if why is not None:
                return k, OKAY, why
            j, resp = self._first_bad_byte(pa, nb)
            if resp:
                return k + j, resp, None
            k += nb
        return n, OKAY, None


# ---------------------------------------------------------------------------- snapshots (issue 5)

# Registers that count cycles or time differ between backends by nature.
SNAPSHOT_SKIP = {"TIMESTAMP_LO", "TIMESTAMP_HI", "PERF_BUSY_CYCLES", "PERF_STALL_CYCLES", "PERF_SDMA_BUSY_CYCLES",
                 "PERF_DMA_BUSY_CYCLES", "PERF_TLB_HITS", "PERF_TLB_MISSES", "PERF_WALK_CYCLES"}


def snapshot(dev: Device, *, memory: bool = True, exclude: Iterable[tuple[int, int]] = (),
             read: Callable[[int], int] | None = None) -> dict:
    """State two backends must agree on after the same command stream, via the Device API:

    regs: every readable register (label -> value) except time and cycle counters;
    ih: the IH entries still in the IH ring (oldest first, at most the ring's size, the
        ones before IH_WPTR), decoded by spec/ih.py, timestamps set to 0;
    mem: digest of memory with the `exclude` byte ranges [start, end) zeroed (e.g. a
        RELEASE_MEM TIMESTAMP destination) and the timestamps of those IH entries too,
        when `memory`.
    """
    read = read or dev.mmio_read32
    out: dict[str, Any] = {"regs": {}}
    queues = regs.QUEUE_CAPS.CP_QUEUES.get(read(regs.QUEUE_CAPS.addr())) >= 2  # (CP_HQD1_* exist)
    for off, s in sorted(_slots(queues=queues).items()):
        if s.readable and s.reg.NAME not in SNAPSHOT_SKIP:
            out["regs"][s.label] = read(off)
    r = out["regs"]
    base = (r["IH_BASE_HI"] << 32 | r["IH_BASE_LO"]) << 8
    size = ih_spec.ring_bytes(regs.IH_SIZE.LOG2_DWORDS.get(r["IH_SIZE"]))
    wptr = r["IH_WPTR"]
    n = min(wptr, size) // ih_spec.ENTRY_BYTES
    mem32 = dev.mem.view("<u4")
    entries = []
    exclude = list(exclude)
    ts = ih_spec.BY_NAME["TIMESTAMP_LO"].dword, ih_spec.BY_NAME["TIMESTAMP_HI"].dword
    for k in range(n, 0, -1):
        a = base + ((wptr - ih_spec.ENTRY_BYTES * k) & (size - 1))
        if a + ih_spec.ENTRY_BYTES > dev.mem.size:
            break
        e = ih_spec.decode(mem32[a >> 2:(a >> 2) + ih_spec.ENTRY_DWORDS].tolist())
        e["TIMESTAMP_LO"] = e["TIMESTAMP_HI"] = 0
        entries.append(e)
        exclude += [(a + 4 * d, a + 4 * d + 4) for d in ts]
    out["ih"] = entries
    if memory:
        out["mem"] = mem_digest(dev.mem, exclude)
    return out


def _masked(mem: np.ndarray, exclude: Iterable[tuple[int, int]]) -> np.ndarray:
    exclude = list(exclude)
    if not exclude:
        return mem
    m = np.array(mem, copy=True)
    for a, b in exclude:
        m[a:b] = 0
    return m


def mem_digest(mem: np.ndarray, exclude: Iterable[tuple[int, int]] = ()) -> str:
    """sha256 of memory, with the byte ranges [start, end) in `exclude` read as 0."""
    return hashlib.sha256(memoryview(np.ascontiguousarray(_masked(mem, exclude)))).hexdigest()


def mem_diff(a: np.ndarray, b: np.ndarray, exclude: Iterable[tuple[int, int]] = (),
             limit: int = 16) -> list[tuple[int, int]]:
    """The byte ranges [start, end) where two memories differ outside `exclude` (the
    first `limit`). Only the differing bytes are filtered: no copy of either memory."""
    if a.size != b.size:
        raise ValueError(f"memories differ in size: {a.size:#x} and {b.size:#x} bytes")
    idx = np.flatnonzero(a != b)
    if idx.size and exclude:
        keep = np.ones(idx.size, dtype=bool)
        for x, y in exclude:
            keep &= (idx < x) | (idx >= y)
        idx = idx[keep]
    if not idx.size:
        return []
    breaks = np.flatnonzero(np.diff(idx) > 1)
    starts = np.concatenate(([idx[0]], idx[breaks + 1]))
    ends = np.concatenate((idx[breaks], [idx[-1]])) + 1
    return [(int(s), int(e)) for s, e in zip(starts[:limit], ends[:limit])]


def diff_snapshots(a: dict, b: dict, names: tuple[str, str] = ("a", "b")) -> list[str]:
    """Readable differences between two snapshots; empty when they agree."""
    na, nb = names
    out = []
    for k in sorted(set(a["regs"]) | set(b["regs"])):
        va, vb = a["regs"].get(k), b["regs"].get(k)
        if va != vb:
            out.append(f"{k}: {na} {va if va is None else hex(va)}, {nb} {vb if vb is None else hex(vb)}")
    ea, eb = a.get("ih", []), b.get("ih", [])
    if len(ea) != len(eb):
        out.append(f"IH entries: {na} has {len(ea)}, {nb} has {len(eb)}")
    for i, (x, y) in enumerate(zip(ea, eb)):
        if x != y:
            fields = ", ".join(f"{f} {x[f]:#x}/{y[f]:#x}" for f in x if x[f] != y.get(f))
            out.append(f"IH entry {i}: {fields}")
    if "mem" in a and "mem" in b and a["mem"] != b["mem"]:
        out.append(f"memory digests differ ({na} {a['mem'][:12]}, {nb} {b['mem'][:12]}); use mem_diff")
    return out
