"""The reference model's register map, read from kmd_model.regs (the SystemRDL source), and
the constants every part of the model shares."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping


from kmd_model import regs
from kmd_model.regfield import Register
from kmd_model.regs import CpError
from spec import vm as vm_spec


DEFAULT_MEM_SIZE = 64 << 20
DEFAULT_MMIO_CYCLES = 8  # what one 32-bit register access costs in model time
DMA_MAX_BYTES = 1 << 20  # DMA_DATA BYTE_COUNT above this is DMA_BYTE_COUNT (CAPS.DMA_MAX_LOG2, rtl.top)
# packets the CP runs at one instant at most, refilled at one a cycle (cp/processor.py's
# _cp_budget): far above any finite stream's, so only a loop (a CHAIN to itself) meets it
CP_BURST_PACKETS = 1 << 16
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
    # swwel locks: (the locking register's offset, its bit, the bits it locks here): a
    # write leaves those bits alone while that bit is set (a ring's base, size and pointer
    # write-back address while the ring is enabled)
    locks: tuple[tuple[int, int, int], ...] = ()

    @property
    def readable(self) -> bool:
        return bool(self.rw | self.w1c | self.const | self.hw)


@functools.cache
def _slots(queues: bool = True, sdma: bool = True) -> Mapping[int, _RegSlot]:
    """The register map: every backend's registers (and those of engines only the model has
    so far: spec/regs.rdl's model_only registers, none today); without `queues`, none of the
    CP's second queue's (a device with one CP queue); without `sdma`, none of the SDMA
    engine's (a device without one). Built once per argument pair (about 1 ms each time:
    every RefModel and every snapshot asks) and shared, so it is read-only: a model that
    decodes fewer registers takes a copy (a change here reached every later model)."""
    out = {}
    for reg in (*regs.REGISTERS, *regs.MODEL_ONLY_REGISTERS):
        if not sdma and reg.NAME.startswith(("SDMA_", "PERF_SDMA_")):
            continue
        if not queues and reg.NAME.startswith(("CP_HQD1_", "CP_QUEUE_")):
            continue
        masks = dict(rw=0, w1c=0, wo=0, pulse=0, swmod=0, const=0, hw=0)
        reset = 0
        locks: dict[tuple[int, int], int] = {}
        for f in reg.FIELDS:
            if f.swwel:
                lreg, _, lname = f.swwel.partition(".")
                lock = getattr(regs, lreg)
                key = (lock.addr(), getattr(lock, lname).mask)
                locks[key] = locks.get(key, 0) | f.mask
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
            out[reg.addr(i)] = _RegSlot(reg, i, label, reset=reset,
                                        locks=tuple((a, b, m) for (a, b), m in locks.items()), **masks)
    return MappingProxyType(out)


# Registers whose value RefModel._sync caches for the CP.
_CONFIG_REGS = frozenset({"CONTROL", "RB_CNTL", "RB_BASE_LO", "RB_BASE_HI", "RB_SIZE", "RB_RPTR_ADDR_LO",
                          "RB_RPTR_ADDR_HI", "IH_CNTL", "IH_BASE_LO", "IH_BASE_HI", "IH_SIZE",
                          "IH_WPTR_ADDR_LO", "IH_WPTR_ADDR_HI", "VM_CONTEXT_CNTL", "VM_CONTEXT_PT_BASE_LO",
                          "VM_CONTEXT_PT_BASE_HI"})
_FETCH, _READ, _WRITE = vm_spec.Access.FETCH, vm_spec.Access.READ, vm_spec.Access.WRITE
_PAGE_MASK = vm_spec.PAGE_SIZE - 1
