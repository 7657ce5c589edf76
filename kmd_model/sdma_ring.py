"""The SDMA ring: amdgpu's sdma_v4_0 ring functions over the copy engine's own ring.

The same shape as the gfx ring (kmd_model/ring.py: alloc, emit_*, commit, set_wptr), with
the copy engine's packets (spec/sdma.py) and units: the hardware's rptr and wptr count
bytes, the driver's dwords (`wptr << 2` on the doorbell, `>> 2` on the write-back), as
sdma_v4_0_ring_get_rptr / set_wptr do. Commits are padded to 16 dwords (amdgpu's
align_mask 0xf) with burst NOPs; `emit_ib` first pads so the 6-dword INDIRECT_BUFFER ends on
an 8-dword boundary ("IB packet must end on a 8 DW boundary"); `emit_fence` is FENCE then
TRAP (sdma_v4_0_ring_emit_fence); the ring test writes 0xDEADBEEF with WRITE_LINEAR.
"""

from __future__ import annotations

import errno
import logging
from typing import TYPE_CHECKING

from spec import sdma

from . import regs
from .log import get_logger
from .ring import MASK32, RING_TEST_MAGIC, Ring
from .uapi import KmdError

if TYPE_CHECKING:
    from .kmd import Kmd

log = get_logger("ring")


class SdmaRing(Ring):
    """SDMA0's queue (amdgpu's sdma.instance[0].ring)."""

    name = "sdma0"
    # no soft recovery (sdma_v4_0 has none); a queue reset through SDMA_CNTL.QUEUE_RESET
    soft_recovery = None
    has_queue_reset = True

    def __init__(self, kmd: "Kmd", gpu_addr: int, log2_dw: int, rptr_wb_index: int, scratch_index: int):
        super().__init__(kmd, gpu_addr, log2_dw, 16, rptr_wb_index, scratch_index)

    # ------------------------------------------------------------------ pointers

    def get_rptr(self) -> int:
        return int(self.kmd.wb32[self.rptr_wb_index]) >> 2

    def get_wptr(self) -> int:
        return self.kmd.mmio.read(regs.SDMA_RB_WPTR) >> 2

    def set_wptr(self) -> None:
        self.doorbells += 1
        v = (self.committed << 2) & MASK32
        if log.isEnabledFor(logging.INFO):
            log.info("doorbell SDMA_DOORBELL <- %#x bytes (rptr %#x, %d dwords queued)", v, self.get_rptr(),
                     (self.committed - self.get_rptr()) & MASK32)
        if self.kmd.observers:
            self.kmd.notify("doorbell", ring=self, start=self.commit_start, wptr=self.committed)
        self.kmd.mmio.write(regs.SDMA_DOORBELL, v)

    # ------------------------------------------------------------------ writing

    def insert_nop(self, count: int) -> None:
        """sdma_v4_0_ring_insert_nop with burst NOPs: one NOP whose COUNT covers the rest."""
        if count:
            self.write(sdma.pad(count))

    def pad_ib(self, ib: list[int]) -> list[int]:
        """sdma_v4_0_ring_pad_ib: to a multiple of 8 dwords."""
        return ib + sdma.pad(-len(ib) % 8)

    def _log_listing(self, start: int, end: int) -> None:
        n = (end - start) & MASK32
        dwords = self.ring32[[(start + k) & self.mask for k in range(n)]].tolist()
        log.debug("sdma ring writes [%#x, %#x):\n%s", start, end,
                  "\n".join("  " + line for line in sdma.disassemble(dwords, self.gpu_addr + 4 * (start & self.mask))))

    def emit_ib(self, gpu_addr: int, size_dw: int, vmid: int = 0) -> None:
        self.insert_nop((2 - self.wptr) & 7)
        self.write(sdma.indirect_buffer(gpu_addr, size_dw, vmid=vmid))

    def emit_fence(self, addr: int, seq: int, *, interrupt: bool = True, ctx_id: int = 0) -> None:
        self.write(sdma.fence(addr, seq))
        if interrupt:
            self.write(sdma.trap(int_context=ctx_id))

    def emit_mem_write(self, addr: int, data: list[int]) -> None:
        self.write(sdma.write_linear(addr, data))

    FENCE_DW = len(sdma.fence(0, 0)) + len(sdma.trap())
    IB_DW = 7 + len(sdma.indirect_buffer(0, 1))  # emit_ib_size: up to 7 NOPs, then the packet

    # ------------------------------------------------------------------ hardware

    def init_hw(self) -> None:
        """sdma_v4_0_gfx_resume: size, pointers, write-back address, base, then enable."""
        m = self.kmd.mmio
        m.write(regs.SDMA_RB_CNTL, 0)
        m.write64(regs.SDMA_RB_BASE_LO, regs.SDMA_RB_BASE_HI, self.gpu_addr >> 8)
        m.write64(regs.SDMA_RB_RPTR_ADDR_LO, regs.SDMA_RB_RPTR_ADDR_HI, self.kmd.wb_addr(self.rptr_wb_index))
        self.kmd.wb32[self.rptr_wb_index] = 0
        self.ring32[:] = 0
        self.wptr = self.committed = self.commit_start = 0
        m.write_fields(regs.SDMA_CNTL, TRAP_ENABLE=1)
        m.write_fields(regs.SDMA_RB_CNTL, RB_ENABLE=1, RB_SIZE=self.log2_dw, RPTR_WRITEBACK_ENABLE=1)
        self.ready = True

    def queue_reset(self, timeout: int) -> None:
        """Reset this queue alone (SDMA_CNTL.QUEUE_RESET) and wait for it to be idle and clean;
        raises KmdError when it does not come back (the caller then resets the device)."""
        m, dev = self.kmd.mmio, self.dev
        self.ready = False
        m.write_fields(regs.SDMA_CNTL, TRAP_ENABLE=1, QUEUE_RESET=1)
        deadline = dev.now() + timeout
        while True:
            st = regs.SDMA_STATUS.decode(m.read(regs.SDMA_STATUS))
            if st["IDLE"] and not st["ERROR"]:
                return
            if dev.now() >= deadline:
                raise KmdError(errno.EIO, f"{self.name} queue reset: not idle after {timeout} cycles "
                               f"(SDMA_STATUS {m.read(regs.SDMA_STATUS):#x})")
            dev.delay(8)

    def test_ring(self, timeout: int) -> None:
        """sdma_v4_0_ring_test_ring: WRITE_LINEAR 0xDEADBEEF to a scratch dword, poll for it."""
        wb = self.kmd.wb32
        wb[self.scratch_index] = 0xCAFEDEAD
        if not self.alloc(5):
            raise KmdError(errno.EBUSY, f"{self.name} ring test: ring is not empty")
        self.emit_mem_write(self.kmd.wb_addr(self.scratch_index), [RING_TEST_MAGIC])
        self.commit()
        deadline = self.dev.now() + timeout
        while int(wb[self.scratch_index]) != RING_TEST_MAGIC:
            if self.dev.now() >= deadline:
                self.ready = False
                raise KmdError(errno.ETIMEDOUT, f"{self.name} ring test failed: scratch "
                               f"{int(wb[self.scratch_index]):#010x} after {timeout} cycles")
            self.dev.delay(16)
        log.info("%s ring test passed", self.name)


class HqdRing(Ring):
    """The CP's second hardware queue (CP_HQD1_*): a gfx ring like ring 0 (PM4, dword
    pointers) whose registers are its own, served first by the CP's arbiter
    (CP_QUEUE_PRIORITY): amdgpu's high-priority gfx pipe, where contexts of HIGH priority go.
    Unlike ring 0 it has a reset of its own (CP_QUEUE_RESET.Q1)."""

    name = "gfx_high"
    soft_recovery = None
    has_queue_reset = True

    def get_wptr(self) -> int:
        return self.kmd.mmio.read(regs.CP_HQD1_RB_WPTR)

    def set_wptr(self) -> None:
        self.doorbells += 1
        if self.kmd.observers:
            self.kmd.notify("doorbell", ring=self, start=self.commit_start, wptr=self.committed)
        self.kmd.mmio.write(regs.CP_HQD1_RB_DOORBELL, self.committed)

    def init_hw(self) -> None:
        m = self.kmd.mmio
        m.write(regs.CP_HQD1_RB_CNTL, 0)
        m.write64(regs.CP_HQD1_RB_BASE_LO, regs.CP_HQD1_RB_BASE_HI, self.gpu_addr >> 8)
        m.write_fields(regs.CP_HQD1_RB_SIZE, LOG2_QWORDS=self.log2_dw - 1)
        m.write64(regs.CP_HQD1_RB_RPTR_ADDR_LO, regs.CP_HQD1_RB_RPTR_ADDR_HI, self.kmd.wb_addr(self.rptr_wb_index))
        self.kmd.wb32[self.rptr_wb_index] = 0
        self.ring32[:] = 0
        self.wptr = self.committed = self.commit_start = 0
        m.write_fields(regs.CP_QUEUE_PRIORITY, Q0=1, Q1=2)
        m.write_fields(regs.CP_HQD1_RB_CNTL, ENABLE=1, RPTR_WB=1)
        self.ready = True

    def queue_reset(self, timeout: int) -> None:
        """CP_QUEUE_RESET.Q1 and wait for the queue to be idle and clean."""
        m, dev = self.kmd.mmio, self.dev
        self.ready = False
        m.write_fields(regs.CP_QUEUE_RESET, Q1=1)
        deadline = dev.now() + timeout
        while True:
            st = regs.CP_HQD1_STATUS.decode(m.read(regs.CP_HQD1_STATUS))
            if st["IDLE"] and not st["ERROR"]:
                return
            if dev.now() >= deadline:
                raise KmdError(errno.EIO, f"{self.name} queue reset: not idle after {timeout} cycles")
            dev.delay(8)
