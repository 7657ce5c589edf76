"""The SDMA ring: amdgpu's sdma_v4_0 ring functions over the copy engine's own ring.

The same shape as the gfx ring (kmd_model/sched/ring.py: alloc, emit_*, commit, set_wptr), with
the copy engine's packets (spec/sdma/codec.py) and units: the hardware's rptr and wptr count
bytes, the driver's dwords (`wptr << 2` on the doorbell, `>> 2` on the write-back), as
sdma_v4_0_ring_get_rptr / set_wptr do. Commits are padded to 16 dwords (amdgpu's
align_mask 0xf) with burst NOPs; `emit_ib` first pads so the 6-dword INDIRECT_BUFFER ends on
an 8-dword boundary ("IB packet must end on a 8 DW boundary"); `emit_fence` is FENCE then
TRAP (sdma_v4_0_ring_emit_fence); the ring test (Ring.test_ring) writes 0xDEADBEEF with WRITE_LINEAR, as sdma_v4_0_ring_test_ring.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from spec import sdma
from spec.sdma import packets as sdma_packets

from .. import regs
from ..log import get_logger
from ..reset.cp_error import CpErrorState
from .ring import MASK32, Ring, queue_reset

if TYPE_CHECKING:
    from ..core.kmd import Kmd

log = get_logger("ring")


class SdmaRing(Ring):
    """SDMA0's queue (amdgpu's sdma.instance[0].ring)."""

    name = "sdma0"
    ENGINE = "the SDMA engine"
    # no soft recovery (sdma_v4_0 has none); a queue reset through SDMA_CNTL.QUEUE_RESET
    has_queue_reset = True
    # what the KMD reads to recover it: status, rptr (bytes), progress marks, the poll packet
    STATUS, RPTR, RPTR_SHIFT, POLL_PACKET = regs.SDMA_STATUS, regs.SDMA_RB_RPTR, 2, "POLL_REGMEM"
    FETCHED = regs.PERF_SDMA_DWORDS_FETCHED
    PROGRESS = (regs.SDMA_RB_RPTR, regs.PERF_SDMA_DWORDS_FETCHED, regs.PERF_SDMA_BYTES_READ,
                regs.PERF_SDMA_BYTES_WRITTEN)
    # The engine's counters are its own, but its IH entries go through the CP's IH writer,
    # which takes one only between two CP packets: a TRAP waits for the CP's packet in hand
    # (docs/hardware.md, "Timing on the RTL"), the SDMA still meanwhile. The CP's fetched
    # dwords and DMA bytes moving while the SDMA neither polls nor is stopped by an error is
    # that packet moving (JobTimerMixin._progressed): a hostile client's long CP_SYNC fill
    # (DMA bytes), and its longest NOPs (16,383 dwords each, fetched: no DMA byte), had an
    # innocent SDMA job behind the TRAP reset for a timeout.
    SHARED_PROGRESS = (regs.PERF_DWORDS_FETCHED, regs.PERF_DMA_BYTES_READ, regs.PERF_DMA_BYTES_WRITTEN)
    CP_QUEUE = False  # (an engine of its own: the CP's counters above are not its queue's)
    POLLS = None  # (never parked: it has the engine to itself)
    OTHER_PROGRESS = ()  # (its ring test after its reset waits for no other queue: a flat hw_timeout)
    # its pointers are 32-bit byte counts (docs/hardware.md): the driver's dword pointers wrap
    # at 2^30 with them. They went on to 2^32, so once 4 GiB of packets had gone through the
    # ring its wptr (0x40000000) was 2^30 dwords ahead of the rptr read back (0): the ring
    # looked more than full and no job reached the engine again
    PTR_MASK = MASK32 >> 2

    def read_error(self) -> CpErrorState:
        """SDMA_ERROR* as the CP's error state (the codes are the CP's; OP in OPCODE, with
        SUB_OP: packets named from the SDMA's table)."""
        m = self.kmd.mmio
        e = regs.SDMA_ERROR.decode(m.read(regs.SDMA_ERROR))
        state = CpErrorState.from_regs(regs.CP_ERROR.CODE.put(e["CODE"]) | regs.CP_ERROR.LEVEL.put(e["LEVEL"])
                                       | regs.CP_ERROR.OPCODE.put(e["OP"]),
                                       m.read64(regs.SDMA_ERROR_ADDR_LO, regs.SDMA_ERROR_ADDR_HI),
                                       m.read(regs.SDMA_ERROR_OFFSET), None)  # (VM_FAULT_STATUS is the CP's)
        return replace(state, sdma=True, sub_op=e["SUB_OP"])

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
                     (self.committed - self.get_rptr()) & self.PTR_MASK)
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
        n = (end - start) & self.PTR_MASK
        dwords = self.ring32[[(start + k) & self.mask for k in range(n)]].tolist()
        log.debug("sdma ring writes [%#x, %#x):\n%s", start, end,
                  "\n".join("  " + line for line in sdma.disassemble(dwords, self.gpu_addr + 4 * (start & self.mask))))

    def emit_ib(self, gpu_addr: int, size_dw: int, vmid: int = 0) -> None:
        self.insert_nop((2 - self.wptr) & 7)
        self.write(sdma.indirect_buffer(gpu_addr, size_dw, vmid=vmid))

    def emit_fence(self, addr: int, seq: int, *, interrupt: bool) -> None:
        self.write(sdma.fence(addr, seq))
        if interrupt:
            self.write(sdma.trap())  # INT_CONTEXT 0, as amdgpu's

    def emit_mem_write(self, addr: int, data: list[int]) -> None:
        self.write(sdma.write_linear(addr, data))

    FENCE_DW = len(sdma.fence(0, 0)) + len(sdma.trap())
    IB_DW = 7 + len(sdma.indirect_buffer(0, 1))  # emit_ib_size: up to 7 NOPs, then the packet
    IB_ALIGN = 1 << sdma_packets.INDIRECT_BUFFER.field("IB_BASE_LO").lsb  # 32 (amdgpu: "base must be 32 byte aligned")

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

    def request_reset(self) -> None:
        self.kmd.mmio.write_fields(regs.SDMA_CNTL, TRAP_ENABLE=1, QUEUE_RESET=1)

    # How long an SDMA queue reset may legitimately take. On the RTL the reset is done only once
    # an IH entry of the queue's that waits for the CP's IH writer is written (docs/hardware.md,
    # SDMA "Queue reset"), and the writer takes it only between the CP's packets: behind
    # another client's DMA_DATA with CP_SYNC of up to 2^CAPS.DMA_MAX_LOG2 bytes (1 MiB: 131,072
    # cycles on a 64-bit bus for a fill, twice that for a copy, more on slow memory). A flat
    # hw_timeout (20,000) gave up while such a fill had longer to run (the job timer had
    # found the error in SDMA_STATUS, its entry still waiting) and fell to the full reset,
    # which stopped and re-ran the innocent client's gfx job. A flat timeout sized for the longest
    # packet would have to guess the memory's speed, and would wait that long for a reset that
    # is really stuck; so the reset waits hw_timeout, and again each time the CP's DMA engine
    # has moved bytes since (the packet in hand progresses: a stuck engine does not extend
    # it), up to RESET_PACKETS times the longest CP packet at one bus beat a cycle, plus
    # hw_timeout, at most (what ends a wait that some hardware fault keeps extending).
    RESET_PACKETS = 16

    def cp_progress(self) -> tuple[int, ...]:
        """The CP's fetched dwords and its DMA engine's byte counters (SHARED_PROGRESS): they
        move while its packet in hand runs (a DMA_DATA's bytes, a long NOP's or WRITE_DATA's
        dwords), the one an SDMA IH entry waits behind. (The DMA bytes alone left a reset
        behind another client's longest NOPs to give up after hw_timeout and fall to the
        full reset: tests/kmd_sched/reset/test_kmd_reset.py
        check_sdma_queue_reset_behind_the_cps_long_nop_stays_a_queue_reset, on the RTL.)"""
        m = self.kmd.mmio
        return tuple(m.read(r) for r in self.SHARED_PROGRESS)

    def queue_reset(self, timeout: int) -> None:
        queue_reset(self, timeout, self.cp_progress, timeout + self.RESET_PACKETS * self.longest_cp_packet())
