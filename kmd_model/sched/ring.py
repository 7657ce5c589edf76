"""The kernel ring: amdgpu_ring's functions over a power-of-two ring in memory.

Writers follow amdgpu's pattern: `alloc(ndw)` (is there room?), `emit_*` / `write`,
then `commit()`, which pads the write pointer to the ring alignment with NOPs and
rings the doorbell (`set_wptr`). Pointers are dwords, free running 32-bit, masked when
used as an index, as the hardware keeps them (docs/hardware.md, "Ring and doorbell").

Space is counted from the read pointer the CP writes back to memory: the CP moves it
past a packet only once the packet has finished (an IB included), so dwords between
rptr and wptr are never overwritten while the CP may still need them.
"""

from __future__ import annotations

import errno
import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from spec import packets, pm4

from .. import regs
from ..log import get_logger
from ..reset.cp_error import CpErrorState
from ..uapi import KmdError

if TYPE_CHECKING:
    from ..core.kmd import Kmd

log = get_logger("ring")

MASK32 = 0xFFFF_FFFF
RING_TEST_MAGIC = 0xDEADBEEF


class Ring:
    """The one gfx ring (amdgpu's ring 0): memory, pointers and the emit functions."""

    name = "gfx"
    # the hardware that runs it, as a timeout's message names it: the CP has two queues
    ENGINE = "CP queue 0"
    # amdgpu's ring funcs ->reset: queue 0's own reset, CP_QUEUE_RESET.Q0 (the other CP queue,
    # the SDMA and the IH ring run on); the full reset only if it fails (no ring here has
    # ->soft_recovery: the CP kills no waves, it has none)
    has_queue_reset = True
    # what the KMD reads of this queue: its status, its rptr (RPTR_SHIFT: bytes to dwords),
    # the packet a polling queue is in, and its progress (Kmd._progressed): PROGRESS is the
    # queue's own (its rptr, and FETCHED, the dwords the CP fetched for it, which also bounds
    # an unchecked job); SHARED_PROGRESS is moved by both CP queues (the CP's total of fetched
    # dwords, its DMA counters: no per-queue copy), so it says the queue moved only when it
    # is its own or the CP is busy with the other queue, which this one waits behind
    STATUS, RPTR, RPTR_SHIFT, POLL_PACKET = regs.STATUS, regs.RB_RPTR, 0, "WAIT_REG_MEM"
    FETCHED = regs.PERF_Q0_DWORDS_FETCHED
    PROGRESS: tuple = (regs.RB_RPTR, regs.PERF_Q0_DWORDS_FETCHED)
    # the reads its WAIT_REG_MEMs made (PERF_Q0_POLLS): still between two looks, the queue had
    # no turn to poll (Kmd._may_be_parked); None for an engine that does not share a parser
    POLLS: Any = regs.PERF_Q0_POLLS
    SHARED_PROGRESS: tuple = (regs.PERF_DWORDS_FETCHED, regs.PERF_DMA_BYTES_READ, regs.PERF_DMA_BYTES_WRITTEN)
    CP_QUEUE = True  # one of the CP's queues, which share its parser (JobTimerMixin._cp_others)
    # where the driver's dword pointers wrap: where the hardware's do, so that the rptr it reads
    # (>> RPTR_SHIFT) and its own wptr count alike. The CP's are 32-bit dword counts (2^32
    # dwords); the SDMA's 32-bit byte counts wrap at 2^30 dwords (SdmaRing)
    PTR_MASK = MASK32

    def __init__(self, kmd: "Kmd", gpu_addr: int, log2_dw: int, align_dw: int,
                 rptr_wb_index: int, scratch_index: int):
        if align_dw < 1 or align_dw & (align_dw - 1):
            raise ValueError(f"ring alignment must be a power of two, not {align_dw}")
        self.kmd = kmd
        self.dev = kmd.dev
        self.gpu_addr = gpu_addr
        self.log2_dw = log2_dw
        self.size_dw = 1 << log2_dw
        self.mask = self.size_dw - 1
        self.align_dw = align_dw
        self.ring32 = kmd.mem32[gpu_addr // 4: gpu_addr // 4 + self.size_dw]
        self.rptr_wb_index = rptr_wb_index
        self.scratch_index = scratch_index
        self.wptr = 0  # where the next dword goes
        self.committed = 0  # the last wptr given to the doorbell
        self.commit_start = 0  # where the last commit's dwords start (for observers)
        self.doorbells = 0
        self.dwords_written = 0

    # ------------------------------------------------------------------ pointers

    def get_rptr(self) -> int:
        """The CP's read pointer, from the write-back slot (no MMIO)."""
        return int(self.kmd.wb32[self.rptr_wb_index])

    def get_wptr(self) -> int:
        """The write pointer the CP accepted (RB_WPTR)."""
        return self.kmd.mmio.read(regs.RB_WPTR)

    def set_wptr(self) -> None:
        """Ring the doorbell with the committed write pointer."""
        self.doorbells += 1
        if log.isEnabledFor(logging.INFO):
            log.info("doorbell RB_DOORBELL <- %#x (rptr %#x, %d dwords queued)",
                     self.committed, self.get_rptr(), (self.committed - self.get_rptr()) & self.PTR_MASK)
        if self.kmd.observers:
            self.kmd.notify("doorbell", ring=self, start=self.commit_start, wptr=self.committed)
        self.kmd.mmio.write(regs.RB_DOORBELL, self.committed)

    def space(self) -> int:
        """Dwords free for writing: the ring minus what the CP has not consumed yet."""
        return self.size_dw - ((self.wptr - self.get_rptr()) & self.PTR_MASK)

    # ------------------------------------------------------------------ writing

    def alloc(self, ndw: int) -> bool:
        """Is there room for `ndw` dwords plus the padding the commit will add after them?
        Exactly that padding, from where they start (a batch's jobs are written back to back
        and padded once): a reserve of the worst case (align_dw - 1) would keep a job that
        fits exactly waiting. (`ndw` may be an upper bound, as the SDMA ring's IB_DW is:
        rounding a larger end up never needs less.)"""
        assert self.ever_fits(ndw), ndw  # (CS refuses a job that never fits)
        return self.space() >= ndw + (-(self.wptr + ndw) % self.align_dw)

    def ever_fits(self, ndw: int) -> bool:
        """Do `ndw` dwords and their padding fit the ring when it is empty (wptr aligned)?"""
        return ndw + (-ndw % self.align_dw) <= self.size_dw

    def write(self, dwords: list[int]) -> None:
        n = len(dwords)
        i = self.wptr & self.mask
        first = min(n, self.size_dw - i)
        self.ring32[i:i + first] = dwords[:first]
        if first < n:  # wrap around the end of the ring
            self.ring32[:n - first] = dwords[first:]
        self.wptr = (self.wptr + n) & self.PTR_MASK
        self.dwords_written += n

    def insert_nop(self, count: int) -> None:
        """`count` dwords of padding, as gfx_v9_ring_insert_nop: the ring's nop (NOP_PAD,
        the header-only NOP) for one; else a counted NOP whose body is NOP_PADs, so the CP
        skips them in one packet (up to 0x3FFF body dwords; NOP_PADs after that)."""
        if count == 1:
            self.write([pm4.NOP_PAD])
        elif count:
            self.write([pm4.header(packets.NOP.opcode, min(count - 2, 0x3FFE))] + [pm4.NOP_PAD] * (count - 1))

    def pad_ib(self, ib: list[int]) -> list[int]:
        """An IB padded to the ring's alignment with the ring's nop, NOP_PAD (amdgpu's
        amdgpu_ring_generic_pad_ib)."""
        return ib + [pm4.NOP_PAD] * (-len(ib) % self.align_dw)

    def pad_to_align(self) -> None:
        self.insert_nop(-self.wptr & (self.align_dw - 1))

    def commit(self) -> None:
        """Pad to the alignment and ring the doorbell."""
        self.pad_to_align()
        if log.isEnabledFor(logging.DEBUG):
            self._log_listing(self.committed, self.wptr)
        self.commit_start = self.committed
        self.committed = self.wptr
        self.set_wptr()

    def _log_listing(self, start: int, end: int) -> None:
        n = (end - start) & self.PTR_MASK
        idx = [(start + k) & self.mask for k in range(n)]
        dwords = self.ring32[idx].tolist()
        base = self.gpu_addr + 4 * (start & self.mask)
        log.debug("ring writes [%#x, %#x):\n%s", start, end,
                  "\n".join("  " + line for line in pm4.disassemble(dwords, base)))

    # ------------------------------------------------------------------ emit functions

    def emit_ib(self, gpu_addr: int, size_dw: int, vmid: int = 0) -> None:
        """As gfx_v9_0_ring_emit_ib_gfx: control is the size and VMID (VALID left at 0)."""
        self.write(pm4.indirect_buffer(gpu_addr, size_dw, vmid=vmid))

    def emit_fence(self, addr: int, seq: int, *, interrupt: bool) -> None:
        """RELEASE_MEM writing the 32-bit `seq` to `addr`, then (optionally) an EOP interrupt,
        dword for dword as gfx_v9_0_ring_emit_fence (its cache actions are no-ops here)."""
        self.write(pm4.release_mem(
            addr, seq, data_sel="DATA_32",
            int_sel="SEND_INT_ON_CONFIRM" if interrupt else "NONE",  # (INT_CTXID 0, as amdgpu's)
            tcl1_action_en=1, tc_action_en=1, tc_wb_action_en=1, tc_md_action_en=1))

    def emit_mem_write(self, addr: int, data: list[int]) -> None:
        """WRITE_DATA to memory with write confirm (amdgpu's emit_wreg, for memory)."""
        self.write(pm4.write_data(addr, data, wr_confirm=1))

    FENCE_DW = len(pm4.release_mem(0, 0))
    IB_DW = len(pm4.indirect_buffer(0, 1))
    # an IB's base alignment in bytes: the bits below INDIRECT_BUFFER's IB_BASE_LO field
    IB_ALIGN = 1 << packets.INDIRECT_BUFFER.field("IB_BASE_LO").lsb

    # ------------------------------------------------------------------ hardware

    def read_error(self) -> CpErrorState:
        """What stopped queue 0: CP_ERROR* and VM_FAULT_STATUS."""
        return self.kmd.read_cp_error()

    def request_reset(self) -> None:
        self.kmd.mmio.write_fields(regs.CP_QUEUE_RESET, Q0=1)

    def queue_reset(self, timeout: int) -> None:
        """CP_QUEUE_RESET.Q0. Nothing it waits for takes long (docs/hardware.md, "Per-queue
        reset"): the RTL does it at once when queue 1 holds the CP; when queue 0 does, it
        finishes an IH entry in hand, aborts the CP's DMA transfers and waits for the bus to
        go quiet (a few bursts), so a flat hw_timeout, unlike the SDMA queue's reset, which
        waits for the CP's IH writer behind the CP's longest packet (sdma_ring.py)."""
        queue_reset(self, timeout)

    def init_hw(self) -> None:
        """Program RB_* for this ring; both pointers start at 0 (as after SOFT_RESET)."""
        m = self.kmd.mmio
        m.write(regs.RB_CNTL, 0)
        # as gfx_v9_0_cp_gfx_resume: the base >> 8, the size as log2 qwords
        m.write64(regs.RB_BASE_LO, regs.RB_BASE_HI, self.gpu_addr >> 8)
        m.write_fields(regs.RB_SIZE, LOG2_QWORDS=self.log2_dw - 1)
        m.write64(regs.RB_RPTR_ADDR_LO, regs.RB_RPTR_ADDR_HI, self.kmd.wb_addr(self.rptr_wb_index))
        self.kmd.wb32[self.rptr_wb_index] = 0
        self.ring32[:] = 0
        self.wptr = self.committed = self.commit_start = 0
        m.write_fields(regs.RB_CNTL, ENABLE=1, RPTR_WB=1)
        log.debug("ring at %#x, %d dwords, rptr write-back at %#x", self.gpu_addr, self.size_dw,
                  self.kmd.wb_addr(self.rptr_wb_index))

    def test_ring(self, timeout: int, progress=None, most: int = 0) -> None:
        """amdgpu's ring test: have the CP write a magic to a scratch dword, poll for it.
        `progress` and `most` as queue_reset's: the wait starts again while what it is
        legitimately behind moves on, up to `most` cycles in all."""
        wb = self.kmd.wb32
        wb[self.scratch_index] = 0xCAFEDEAD
        if not self.alloc(5):
            raise KmdError(errno.EBUSY, "ring test: ring is not empty")
        self.emit_mem_write(self.kmd.wb_addr(self.scratch_index), [RING_TEST_MAGIC])
        self.commit()
        window = Window(self.dev, timeout, progress, most)
        while int(wb[self.scratch_index]) != RING_TEST_MAGIC:
            if window.over():
                raise KmdError(errno.ETIMEDOUT,
                               f"ring test failed: scratch {int(wb[self.scratch_index]):#010x} "
                               f"after {window.waited()} (rptr {self.get_rptr():#x}, wptr {self.committed:#x})")
            self.dev.delay(16)
        log.info("ring test passed (%d cycles)", self.dev.now() - window.start)

    # How long the ring test after this queue's own reset may legitimately wait: the CP
    # serves its two queues with one parser, and switches to the queue just reset only at a
    # packet boundary once the DMA engine has answered every transfer of the other queue's
    # packet in hand (a DMA_DATA with CP_SYNC of up to 2^CAPS.DMA_MAX_LOG2 bytes), and, for
    # queue 0, only while queue 1 (higher CP_QUEUE_PRIORITY) has nothing to run
    # (docs/hardware.md, "CP hardware queues"). A flat hw_timeout gave up behind a 128 KiB
    # fill on the RTL and fell to the full reset, which stopped and ran the other queue's
    # innocent job again (the model's CP runs a packet at once: it never waited). So the
    # test waits hw_timeout, and again each time the other queue has moved on (its rptr,
    # its fetched dwords, the CP's DMA bytes, which only its packets move now), up to
    # RESET_PACKETS times the longest CP packet at one bus beat a cycle, plus hw_timeout.
    RESET_PACKETS = 16
    # (the CP's other queue outranks this one, CP_QUEUE_PRIORITY as init_hw programs it: it
    # may keep this queue off the CP for as long as it runs; queue 1 waits one packet of queue
    # 0's, and its transfers: either may be parked, JobTimerMixin._may_be_parked)
    # the other CP queue's progress marks (its rptr, its own fetched dwords) and the CP's DMA
    # byte counters
    OTHER_PROGRESS: tuple = (regs.CP_HQD1_RB_RPTR, regs.PERF_Q1_DWORDS_FETCHED, regs.PERF_DMA_BYTES_READ,
                             regs.PERF_DMA_BYTES_WRITTEN)

    def longest_cp_packet(self) -> int:
        """Cycles of the CP's longest packet at one bus beat a cycle: a CP_SYNC copy of
        2^CAPS.DMA_MAX_LOG2 bytes, each beat read and written."""
        i = self.kmd.info
        return 2 * (i.dma_max_bytes // i.bus_bytes)

    # CP_QUEUE_PRIORITY for the ring test after this queue's reset: this queue above the
    # other. Queue 0 runs only while queue 1 (high, as init_hw programs them) has nothing to
    # run, so a client of HIGH priority (cap_sys_nice: then any client by default) whose queue 1
    # job ran a long stream of fills as queue 0 was reset (its own queue 0 job faulting, its
    # queue 1 job released then: by a flag it polls, which the faulting job may write just
    # before its fault) held the test past its bound:
    # queue 0's reset failed on purpose and fell to the full reset, which stopped every ring
    # and ran every other client's innocent jobs again (one full reset and two innocent jobs
    # run twice in tests/kmd_sched/queues/test_kmd_queues_full_reset.py's
    # check_a_flood_on_queue_1_does_not_turn_queue_0_s_reset_into_the_full_reset). Bounding
    # the wait by what the other ring holds instead is no bound: a checked job may run
    # max_job_dw dwords of 1 MiB fills, each restarting the job timer, and 64 of them may be
    # in the ring. Raised, the queue just reset takes the CP at the other queue's next packet
    # boundary (docs/hardware.md, "CP hardware queues"): the test waits for the packet in
    # hand (and the DMA transfers queued before it), what RESET_PACKETS bounds, whatever the
    # other ring holds. Its ring holds nothing else (its scheduler is stopped until the test
    # passes), so the raise costs the other queue one WRITE_DATA; the priorities are set back
    # as the test ends, passed or not (amdgpu sets a queue's CP_HQD_PIPE_PRIORITY and
    # CP_HQD_QUEUE_PRIORITY at run time the same way: gfx_v8_0_hqd_set_priority). No new job
    # reaches the other queue meanwhile: the recovery runs inside the driver's lock, its
    # scheduler is not kicked until the recovery returns.
    TEST_PRIORITY = {"Q0": 2, "Q1": 1}

    def test_after_reset(self, timeout: int) -> None:
        """The ring test after this queue's own reset: this queue raised above the other CP
        queue for it (TEST_PRIORITY), behind the other queue's packet in hand as long as that
        moves on (RESET_PACKETS)."""
        if not self.OTHER_PROGRESS or self.kmd.hqd_ring is None:
            self.test_ring(timeout)
            return
        m = self.kmd.mmio
        kept = m.read(regs.CP_QUEUE_PRIORITY)
        m.write_fields(regs.CP_QUEUE_PRIORITY, **self.TEST_PRIORITY)
        try:
            self.test_ring(timeout, lambda: tuple(m.read(r) for r in self.OTHER_PROGRESS),
                           timeout + self.RESET_PACKETS * self.longest_cp_packet())
        finally:
            m.write(regs.CP_QUEUE_PRIORITY, kept)


def queue_reset(ring, timeout: int, progress=None, most: int = 0) -> None:
    """Reset one queue alone (its `request_reset`: a register bit) and wait until its STATUS
    reads idle without error; raises KmdError when it does not come back (the caller then
    resets the device). `progress` (SdmaRing's): a function whose value changes while
    something the reset legitimately waits for moves on; each change starts the `timeout`
    again, up to `most` cycles in all."""
    m, dev = ring.kmd.mmio, ring.dev
    ring.request_reset()
    window = Window(dev, timeout, progress, most)
    while True:
        st = ring.STATUS.decode(m.read(ring.STATUS))
        if st["IDLE"] and not st["ERROR"]:
            return
        if window.over():
            raise KmdError(errno.EIO, f"{ring.name} queue reset: not idle after {window.waited()} "
                           f"({ring.STATUS.NAME} {m.read(ring.STATUS):#x})")
        dev.delay(8)


class Window:
    """A bounded wait for something that may legitimately wait behind other work: `timeout`
    cycles, started again each time `progress()` (a function whose value changes while that
    work moves on) has moved, never past `most` cycles in all; without `progress`, a flat
    `timeout`. A stuck engine does not extend it."""

    def __init__(self, dev, timeout: int, progress=None, most: int = 0):
        self.dev, self.timeout, self.progress, self.most = dev, timeout, progress, most
        self.start = dev.now()
        self.deadline = self.start + timeout
        self.mark = progress() if progress is not None else None

    def over(self) -> bool:
        now = self.dev.now()
        if now >= self.deadline and self.progress is not None and now - self.start < self.most:
            seen = self.progress()
            if seen != self.mark:  # it moved on: another window, never past `most`
                self.mark = seen
                self.deadline = min(now + self.timeout, self.start + self.most)
        return now >= self.deadline

    def waited(self) -> str:
        """How long it waited, for the message that says it gave up."""
        if self.deadline == self.start + self.timeout:
            return f"{self.timeout} cycles"
        return f"{self.dev.now() - self.start} cycles ({self.timeout} since the last progress, {self.most} at most)"


class HqdRing(Ring):
    """The CP's second hardware queue (CP_HQD1_*): a gfx ring like ring 0 (PM4, dword
    pointers) whose registers are its own, served first by the CP's arbiter
    (CP_QUEUE_PRIORITY): amdgpu's high-priority gfx pipe, where contexts of HIGH priority go.
    Its reset of its own is CP_QUEUE_RESET.Q1."""

    name = "gfx_high"
    ENGINE = "CP queue 1"
    has_queue_reset = True
    STATUS, RPTR = regs.CP_HQD1_STATUS, regs.CP_HQD1_RB_RPTR
    FETCHED = regs.PERF_Q1_DWORDS_FETCHED
    PROGRESS = (regs.CP_HQD1_RB_RPTR, regs.PERF_Q1_DWORDS_FETCHED)
    POLLS = regs.PERF_Q1_POLLS
    # (its ring test after its reset waits behind queue 0's packet in hand: Ring.RESET_PACKETS;
    # it is the higher already, TEST_PRIORITY keeps it so)
    TEST_PRIORITY = {"Q0": 1, "Q1": 2}
    OTHER_PROGRESS = (regs.RB_RPTR, regs.PERF_Q0_DWORDS_FETCHED, regs.PERF_DMA_BYTES_READ,
                      regs.PERF_DMA_BYTES_WRITTEN)

    def read_error(self) -> CpErrorState:
        m = self.kmd.mmio
        return CpErrorState.from_regs(m.read(regs.CP_HQD1_ERROR), m.read64(regs.CP_HQD1_ERROR_ADDR_LO,
                                      regs.CP_HQD1_ERROR_ADDR_HI), m.read(regs.CP_HQD1_ERROR_OFFSET),
                                      m.read(regs.VM_FAULT_STATUS))

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

    def request_reset(self) -> None:
        self.kmd.mmio.write_fields(regs.CP_QUEUE_RESET, Q1=1)


def as_u32(mem: np.ndarray) -> np.ndarray:
    """A uint32 (little-endian) view of a uint8 memory."""
    return mem[: len(mem) & ~3].view("<u4")
