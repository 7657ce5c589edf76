"""RefModel: the whole front end as a `kmd_model.device.Device`, without cycles (the
package's docstring says how time, errors and counters behave)."""

from __future__ import annotations

import functools
import mmap
import os
import sys
import weakref
from typing import Callable, Iterable, Mapping

import numpy as np

from kmd_model import regs
from kmd_model.device import BusError, Device
from kmd_model.regs import CpError
from spec import ih as ih_spec
from spec import packets as pk
from spec import vm as vm_spec

from .clock import ModelTime
from .cp import CommandProcessor
from .cp.packets import _Fault, _Wait, _kind
from .cp.queues import CONFIG as _HQD1_CONFIG
from .cp.queues import CpQueue1
from .dma import DmaDatapath
from .memory import MemoryAccess
from .mmu import ModelMmu
from .regmap import (
    ADDR_BITS, CP_BURST_PACKETS, DECERR, DEFAULT_MEM_SIZE, DEFAULT_MMIO_CYCLES, DMA_MAX_BYTES, M32, OKAY, SLVERR,
    _CONFIG_REGS, _RESP_CODES, _STALL_CHANNELS, _TS_MASK, _slots,
)
from .sdma import _CONFIG as _SDMA_CONFIG
from .sdma import SdmaEngine
from .snapshot import snapshot


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


def _arguments_said(init: Callable) -> Callable:
    """The model's constructor, its argument mistakes said as the UMD's calls say theirs
    (umd/calls.py): `RefModel(foo=1)` was Python's "RefModel.__init__() got an unexpected
    keyword argument 'foo'", which named none of the parameters there are."""
    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        try:
            init(self, *args, **kwargs)
        except TypeError as e:
            from umd.calls import _keyword_mistake  # (only then: the model needs no UMD)

            better = _keyword_mistake(type(self).__name__, init, (self, *args), kwargs, e)
            if better is None:  # (a TypeError of the arguments' values: its own words)
                raise
            raise better from None
    return __init__


class RefModel(CommandProcessor, DmaDatapath, ModelTime, MemoryAccess, Device):
    """The whole device without cycles: see the module docstring.

    mem_size: bytes of memory (a positive multiple of 32), or give `mem`, a uint8 array
    to use as memory (e.g. a SharedMemory view for lockstep runs).
    data_width: memory bus width in bits, only shown in CAPS.BUS_BYTES_LOG2 (32..256).
    dma: a DMA engine executes DMA_DATA (CAPS.DMA); without one DMA_DATA is UNSUPPORTED.
    ih: an IH ring writer is present (CAPS.IH); without one no IH entries are written.
    vm: an MMU translates (CAPS.VM); tlb_entries: what VM_CAPS.TLB_LOG2 reports, a power of
    two from 2 to 64 as the RTL's MMU takes (the model has no TLB size: it keeps every translation until an invalidation names it); vm_levels:
    VM_CAPS.LEVELS, page-table levels (2 to 4, spec/vm.py's BUILD_LEVELS, as the RTL's MMU:
    virtual addresses of 30 to 48 bits).
    queues: the CP's second hardware queue (QUEUE_CAPS.CP_QUEUES), CP_HQD1_*, with priorities
    and per-queue reset (testbench/refmodel/cp/queues.py), as the RTL has (rtl/cp/queues.py);
    without it its registers answer DECERR (a device with one CP queue, for the drivers).
    sdma: the SDMA copy engine (testbench/refmodel/sdma.py), as the RTL has
    one; without it QUEUE_CAPS.SDMA reads 0 and its registers answer DECERR (a device
    without a copy engine, for the drivers' refusals).
    ib_levels: CAPS.IB_LEVELS. dma_max_bytes: BYTE_COUNT limit (DMA_BYTE_COUNT above it), a
    power of two (CAPS.DMA_MAX_LOG2 says its log2).
    mmio_cycles: model cycles one MMIO access costs, 0 or more.
    cp_burst: packets the CP runs at one instant at most (refilled at one a cycle, however
    long a call): work longer than that (a CHAIN to itself) goes on as time passes, one
    packet a cycle (see the package docstring); 1 is a CP of one packet a cycle.
    trace: called with one line per packet the CP starts (see the package docstring).
    """

    name = "model"
    skip_polls = True  # False: a failing wait polls at every point of its grid (slow; what
    # the skipping is tested against: tests/model/refmodel/test_model_sdma.py)

    @_arguments_said
    def __init__(self, mem_size: int = DEFAULT_MEM_SIZE, *, mem: np.ndarray | None = None,
                 data_width: int = 64, dma: bool = True, ih: bool = True, ib_levels: int = 2,
                 vm: bool = True, tlb_entries: int = 16, vm_levels: int = vm_spec.LEVELS,
                 queues: bool = True, sdma: bool = True,
                 dma_max_bytes: int = DMA_MAX_BYTES, mmio_cycles: int = DEFAULT_MMIO_CYCLES,
                 cp_burst: int = CP_BURST_PACKETS, trace: Callable[[str], None] | None = None):
        if mem is None:
            if not isinstance(mem_size, int) or mem_size <= 0 or mem_size % 32:
                raise ValueError(f"memory size must be a positive multiple of 32 bytes, not {mem_size!r}")
            mem, self._memfd = _anon_memory(mem_size)
        elif mem.dtype != np.uint8 or mem.ndim != 1 or mem.size % 32 or not mem.flags.c_contiguous:
            raise ValueError("mem must be a contiguous 1-D uint8 array whose size is a multiple of 32")
        if data_width not in (32, 64, 128, 256):
            raise ValueError(f"data_width must be 32, 64, 128 or 256, not {data_width!r}")
        def whole(v):  # an int, and not a bool: True would be a TLB of one entry
            return isinstance(v, int) and not isinstance(v, bool)

        if not whole(ib_levels) or not 1 <= ib_levels <= regs.CAPS.IB_LEVELS.get(M32):
            raise ValueError(f"ib_levels must be 1..{regs.CAPS.IB_LEVELS.get(M32)}, not {ib_levels!r}")
        if not whole(tlb_entries) or tlb_entries < 2 or tlb_entries > 64 or tlb_entries & (tlb_entries - 1):
            raise ValueError(f"tlb_entries must be a power of two from 2 to 64 (as the RTL's MMU), not {tlb_entries!r}")
        if not whole(dma_max_bytes) or dma_max_bytes < 1 or dma_max_bytes > 1 << 31 or dma_max_bytes & (dma_max_bytes - 1):
            raise ValueError(f"dma_max_bytes must be a power of two from 1 to 2^31 (CAPS.DMA_MAX_LOG2 says its log2), "
                             f"not {dma_max_bytes!r}")
        if not whole(mmio_cycles) or mmio_cycles < 0:
            raise ValueError(f"mmio_cycles must be a number of cycles, 0 or more, not {mmio_cycles!r}")
        if not isinstance(vm_levels, int) or isinstance(vm_levels, bool) or vm_levels not in vm_spec.BUILD_LEVELS:
            raise ValueError(f"vm_levels must be 2, 3 or 4 (as the RTL's MMU), not {vm_levels!r}")
        for flag, v in (("dma", dma), ("ih", ih), ("vm", vm), ("queues", queues), ("sdma", sdma)):
            if not isinstance(v, bool):
                raise TypeError(f"{flag} must be True or False, not {v!r}")
        if not whole(cp_burst) or cp_burst < 1:
            raise ValueError(f"cp_burst must be a positive number of packets, not {cp_burst!r}")
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
        self.cp_burst = cp_burst
        self._cp_left, self._cp_fill_t, self._cp_starved = cp_burst, 0, False
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
            "PERF_Q0_DWORDS_FETCHED": lambda i: (self._fetched - self._fetched_q1()) & M32,
            "PERF_Q1_DWORDS_FETCHED": lambda i: self._fetched_q1() & M32,
            "PERF_Q0_POLLS": lambda i: (self._polls - self._polls_q1()) & M32,
            "PERF_Q1_POLLS": lambda i: self._polls_q1() & M32,
            "PERF_DMA_BYTES_READ": lambda i: self._dma_read & M32,
            "PERF_DMA_BYTES_WRITTEN": lambda i: self._dma_written & M32,
            "PERF_DMA_BUSY_CYCLES": lambda i: self._dma_busy & M32,
            "PERF_PACKETS": lambda i: self._packets[i] & M32,
            "VM_CAPS": self._vm_caps, "VM_INVALIDATE_ACK": lambda i: self._inv_ack,
            "VM_FAULT_STATUS": self._vm_fault_status,
            "VM_FAULT_ADDR_LO": lambda i: self._vm_fault()[2] & M32,
            "VM_FAULT_ADDR_HI": lambda i: self._vm_fault()[2] >> 32,
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
        for lock_off, lock_bit, bits in s.locks:  # (the lock as it is before this write)
            if self._store[lock_off] & lock_bit:
                keep &= ~bits
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

    def _vm_fault(self) -> tuple[int, tuple | None, int]:
        """(code, details, address) of the VM fault VM_FAULT_STATUS/ADDR show: queue 0's, else
        queue 1's (docs/hardware.md, CP hardware queues; queue 1's error state is its own, in
        _hq1.s, while queue 0's is in place), else none (0). The status and the address
        come from the same queue."""
        code, vm, addr = self._err_code, self._err_vm, self._err_addr
        if code != CpError.VM_FAULT and self._hq1 is not None:
            code, vm, addr = self._hq1.s["_err_code"], self._hq1.s["_err_vm"], self._hq1.s["_err_addr"]
        return (code, vm, addr) if code == CpError.VM_FAULT else (CpError.NONE, None, 0)

    def _vm_fault_status(self, i: int) -> int:
        code, vm, _ = self._vm_fault()
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
        # a packet in hand on either queue (queue 1's wait too) keeps the halt from showing
        q1_in_packet = self._hq1 is not None and self._hq1.s["_wait"] is not None
        halted = self._halt and not in_packet and not q1_in_packet and not self._err_code
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
        self._fetched = self._polls = 0
        if self._hq1 is not None:
            self._hq1.fetched = self._hq1.polls = 0
        self._dma_read = self._dma_written = self._dma_busy = 0
        self._packets = [0] * regs.PERF_PACKETS.ARRAY_LEN

    def _polls_q1(self) -> int:
        """The part of `_polls` queue 1's WAIT_REG_MEMs made (cp/queues.py counts it)."""
        return self._hq1.polls if self._hq1 is not None else 0

    def _fetched_q1(self) -> int:
        """The part of `_fetched` queue 1 fetched (cp/queues.py counts it), 0 without it."""
        return self._hq1.fetched if self._hq1 is not None else 0
