"""The driver instance for one device (amdgpu_device): bring-up, interrupts, waits, reset.

`bind(dev)` probes the device, carves its memory into heaps, allocates the kernel's
own buffers (write-back page, ring, IH ring), brings the hardware up (soft reset, ring,
IH, interrupts) and runs amdgpu's self-tests: the ring test (a WRITE_DATA from the ring)
and the IB test (an IB and a fence, signalled through the interrupt path).

Virtual memory (kmd_model/mm/): every file has a VM; jobs run with the VMID the
VmidManager grants their VM. With the CS checker on, the shadow pool is mapped in every
VM at the top of the address space, executable only, so the CP can fetch the checked
copies with the job's VMID while the client can neither read nor write them.

`Kmd` is one object, as amdgpu_device is; its methods are written by concept, each set
in its own module and mixed in here: files, contexts and BO lifetimes (core/clients.py),
interrupts and waits (irq/handler.py), recovery (reset/recovery.py) and the job timer
(reset/job_timer.py). This module keeps its state, bring-up, self-tests and statistics.
"""

from __future__ import annotations

import errno
from collections import deque
from dataclasses import dataclass
from enum import IntEnum

from spec import ih as ih_spec
from spec import packets, pm4, rules
from spec import vm as vm_spec

from .. import regs
from ..cs.checker import CsChecker
from ..cs.shadow import ShadowPool
from ..device import BusError, Device
from ..irq.handler import INT_EVENTS, IrqMixin
from ..irq.ih import IhRing
from ..log import get_logger
from ..mm.bo import PAGE, Bo, BoManager
from ..mm.vm import HUGE
from ..mm.vmid import VmidManager
from ..mmio import Mmio
from ..reset.cp_error import CpErrorState
from ..reset.job_timer import JobTimerMixin
from ..reset.recovery import RecoveryMixin
from ..sched.fence import Fence, FenceDriver
from ..sched.ring import HqdRing, Ring, as_u32
from ..sched.scheduler import Scheduler
from ..sched.sdma_ring import SdmaRing
from ..uapi import Domain, HwIp, KmdError, VmFaultInfo
from .clients import ClientsMixin
from .copies import CopiesMixin
from .ctx import Context
from .file import File
from .lock import DriverLock

log = get_logger("kmd")

IB_TEST_MAGIC = 0xC0FFEE01
MAX_IB_DW = (1 << packets.INDIRECT_BUFFER.field("IB_SIZE").width) - 1


@dataclass
class KmdParams:
    """Driver parameters, like amdgpu's module parameters (`bind(dev, job_timeout=...)`)."""

    ring_log2_dw: int = 12  # 4096-dword ring
    ih_log2_entries: int = 8  # 256 IH entries
    ib_align_dw: int = 8  # ring commits are padded to this; UMDs pad IBs to it too
    initial_seq: int = 1  # first fence seqno (ring and contexts): 2**32 - 500 tests the wrap
    job_timeout: int = 500_000  # cycles without progress before timedout_job
    fallback_poll: int = 20_000  # cycles between fence/STATUS polls while waiting
    hw_timeout: int = 20_000  # ring test, IB test, soft reset
    cs_check: bool = True  # the CS checker and shadow IBs; off only to let bad streams reach the CP
    ib_test: bool = True
    vram_fraction: float = 0.5
    max_ib_chunks: int = 4  # IB chunks per CS
    max_dep_chunks: int = 1024  # dependency chunks per CS: each is looked up under the KMD's lock
    max_job_dw: int = 1 << 21  # dwords one job may run (every IB counted each time it runs)
    max_job_ibs: int = 4096  # distinct IBs one job may reach (each is copied and checked)
    shadow_pool_kib: int = 16 << 10  # kernel memory for checked copies of IBs (at most half of GTT)
    sdma_ring_log2_dw: int = 10  # the SDMA ring: 1024 dwords (when the device has the engine)
    hw_submission_limit: int = 64  # jobs in flight per ring (amdgpu_sched_hw_submission, 2 on amdgpu)
    ban_after_hangs: int = 3  # a context that caused this many resets is banned (its CS: EIO)
    # a file whose contexts' jobs timed out this many times in all is banned, every context
    # (CS and CTX ALLOC: EIO): each timeout costs the jobs behind it a job_timeout, and a
    # context of its own for each hang made the context's ban no bound (i915 bans a client)
    file_ban_after_hangs: int = 8
    # unfinished jobs of one context on one ring (amdgpu_sched_jobs): the CS past them waits
    # for the oldest (amdgpu_ctx_wait_prev_fence), so a context's queue has a bound
    sched_jobs: int = 32
    # as a process with CAP_SYS_NICE (File.cap_sys_nice; open_render_node overrides it per
    # file): ask CTX ALLOC for HIGH and VERY_HIGH, the CP's HIGH queue ahead of everyone's
    # NORMAL work; False (the default, as amdgpu_ctx_priority_permit refuses a process without
    # it): those are EACCES. A tool, example or test that asks for HIGH opts in:
    # open_render_node(cap_sys_nice=True)
    cap_sys_nice: bool = False
    # as a process with CAP_PERFMON (File.cap_perfmon; open_render_node overrides it per file):
    # INFO COUNTERS answers the device's performance counters and the driver's statistics, every
    # client's activity in them; False (the default, as Linux gives a system-wide perf event only
    # to CAP_PERFMON): a file gets the timestamp and its own counts only. A tool, example or
    # test that reads device-wide counters opts in: open_render_node(cap_perfmon=True)
    cap_perfmon: bool = False
    # With cs_check off nothing bounds what a PM4 job runs (a CHAIN to itself loops, moving the
    # fetch counters for ever): it is reset once the CP fetched 2 * max_job_dw dwords for it
    # (its queue's own counter: JobTimerMixin._overrun), and, as a backstop for what that
    # count cannot see, once it has run more than this many job_timeouts from when it reached the head
    # of its ring (not counting the time the CP's other queue kept its queue off the CP:
    # JobTimerMixin._progressed). The SDMA ring is never checked: its jobs have the time rule alone (a job of
    # POLL_REGMEMs each giving up inside a job timeout moved for ever). Checked jobs are bounded
    # by max_job_dw in dwords, and in time by checked_job_timeouts (a maximum-size IB runs to its end).
    unchecked_job_timeouts: int = 64
    # The checker bounds a job's dwords (max_job_dw), not its time: a DMA_DATA of 7 dwords moves
    # up to 1 MiB, so a checked job of CP_SYNC fills held its queue for ~4e10 cycles on the RTL,
    # every other client of the queue behind it, its timer restarted by the bytes moving. A checked
    # job is reset once it has run more than this many job timeouts (the time its queue served it, counted
    # as for unchecked jobs): far enough that a max_job_dw job of NOPs (about 1.3 M cycles on the
    # RTL) runs to its end at the default job_timeout
    checked_job_timeouts: int = 256

    def __post_init__(self) -> None:
        for name, lo, hi in (("ring_log2_dw", 6, 20), ("ih_log2_entries", 2, 16),
                             ("ib_align_dw", 1, 256), ("initial_seq", 0, 0xFFFF_FFFF),
                             ("job_timeout", 1, 1 << 62), ("fallback_poll", 1, 1 << 62),
                             ("hw_timeout", 1, 1 << 62), ("max_ib_chunks", 1, 64), ("max_dep_chunks", 0, 1 << 16),
                             ("max_job_dw", 1, 1 << 30), ("max_job_ibs", 1, 1 << 20),
                             ("shadow_pool_kib", 4, 1 << 30), ("sdma_ring_log2_dw", 6, 20),
                             ("hw_submission_limit", 1, 1 << 20), ("ban_after_hangs", 1, 1 << 20), ("sched_jobs", 1, 1 << 16),
                             ("file_ban_after_hangs", 1, 1 << 20),
                             ("unchecked_job_timeouts", 1, 1 << 20), ("checked_job_timeouts", 1, 1 << 20)):
            v = getattr(self, name)
            if not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"KMD parameter {name} must be an int in [{lo}, {hi}], not {v!r}")
        for name in ("cap_sys_nice", "cap_perfmon"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"KMD parameter {name} must be True or False, not {getattr(self, name)!r}")
        if self.ib_align_dw & (self.ib_align_dw - 1):
            raise ValueError(f"KMD parameter ib_align_dw must be a power of two, not {self.ib_align_dw}")
        if not 0.0 < self.vram_fraction < 1.0:
            raise ValueError(f"KMD parameter vram_fraction must be in (0, 1), not {self.vram_fraction!r}")


class Wb(IntEnum):
    """Dwords of the kernel's write-back page (amdgpu's adev->wb)."""

    RING_RPTR = 0  # the CP writes RB_RPTR here
    IH_WPTR = 1  # the IH writer writes IH_WPTR here
    FENCE = 2  # the ring's fence memory
    SCRATCH = 3  # ring test
    IB_TEST = 4  # IB test
    SDMA_RPTR = 5  # the SDMA engine writes its rptr (bytes) here
    SDMA_FENCE = 6  # the SDMA ring's fence memory
    SDMA_SCRATCH = 7  # SDMA ring test
    HQD1_RPTR = 8  # the CP's second queue writes its rptr here
    HQD1_FENCE = 9  # its fence memory
    HQD1_SCRATCH = 10  # its ring test


class Kmd(ClientsMixin, CopiesMixin, IrqMixin, RecoveryMixin, JobTimerMixin):
    def __repr__(self) -> str:
        """What `kmd_model.bind(RefModel())` shows at the interpreter's prompt (the tutorial's
        first line): the device, whether it is still the bound driver, its files."""
        from . import bind  # (bind imports this module)

        n, c = len(self.files), len(self.contexts)
        gone = "" if bind._bound is self else " (no longer bound)"
        return (f"<kmd_model.Kmd on {self.dev.name}{gone}: {n} open file{'s' * (n != 1)}, "
                f"{c} context{'s' * (c != 1)}>")

    def __init__(self, dev: Device, params: KmdParams | None = None, observers=()):
        self.dev = dev
        # The driver's own lock, as a kernel driver serialises what its state needs: every
        # ioctl and every close of a file holds it (File.ioctl), whichever thread makes it.
        # The CS checker, for one, keeps the walk's lookup tables on itself; two threads
        # checking at once read each other's. Re-entrant, for the driver's own nesting; an
        # ioctl made by client code run inside another (a signal handler, a garbage collector
        # callback) is refused, and a close from there deferred (core/signals.py). A wait for
        # the GPU inside an ioctl lets other threads in between its steps (core/lock.py,
        # wait_unlocked).
        self.lock = DriverLock()
        self.deferred_release: list = []  # files closed from inside an ioctl: released after it (File.close)
        # ended jobs whose dependents are still to be told (Job.ended), as (job, dependents,
        # how many told), and how many a pass may still tell (IrqMixin.wake_dependents)
        self.waking: deque = deque()
        self.wakes_left = self.WAKES_PER_PASS
        # Observers see the driver's events as they happen (gpucosim's timeline and crash
        # reports): `observer(event, fields)`, see `notify`. Set before bring-up, so the
        # ring test's doorbell is seen too.
        self.observers: list = list(observers)
        self.params = p = params or KmdParams()
        self.mmio = Mmio(dev)
        self.info = self.mmio.probe()
        if not self.info.vm_levels:
            raise KmdError(errno.ENODEV, "this KMD needs a device with an MMU (CAPS.VM reads 0)")
        self.stats = dict.fromkeys((
            "ioctls", "ioctl_errors", "cs", "cs_rejected", "jobs_retired", "jobs_cancelled",
            "interrupts", "spurious_interrupts", "fallback_polls", "resets", "job_timeouts",
            "cp_errors", "vm_faults", "cs_shadow_bytes", "sdma_errors", "queue_resets"), 0)
        self.fallback_at = dev.now()  # the fence fallback timer's last run (IrqMixin.fallback_poll)
        self._poll_timeouts: list | None = None  # [since, logged, not logged]: IrqMixin.on_sdma_poll_timeout
        self._error_logs: dict[str, list] = {}  # kind -> [since, logged, not logged] of the lines of no client's job
        # (a client's: File.error_logs): RecoveryMixin._log_limited
        mem = dev.mem
        size = min(len(mem), 1 << self.info.addr_bits) if self.info.addr_bits else len(mem)
        self.mem32 = as_u32(mem)
        self.bo = BoManager(size, p.vram_fraction)

        def kbo(size: int, name: str, align: int = PAGE) -> Bo:
            """A kernel BO (GTT, no owner); the crash report lists them by name."""
            return self.bo.create(size, align, Domain.GTT, 0, None, name, who=f"bind: {name}")

        self.wb_bo = kbo(PAGE, "wb")
        self.wb32 = self.mem32[self.wb_bo.gpu_addr // 4: self.wb_bo.end // 4]
        ring_bo = kbo(4 << p.ring_log2_dw, "ring")
        self.ring = Ring(self, ring_bo.gpu_addr, p.ring_log2_dw, p.ib_align_dw, Wb.RING_RPTR, Wb.SCRATCH)
        self.ih: IhRing | None = None
        if self.info.has_ih:
            ih_bo = kbo(ih_spec.ENTRY_BYTES << p.ih_log2_entries, "ih")
            self.ih = IhRing(self, ih_bo.gpu_addr, p.ih_log2_entries, Wb.IH_WPTR)
        self.ib_test_bo = kbo(PAGE, "ib test")
        # The engines the RTL does not have yet (QUEUE_CAPS; DECERR on the RTL backends): their
        # rings' BOs are taken before the shadow pool, which sizes itself by what is left.
        try:
            qc = regs.QUEUE_CAPS.decode(self.mmio.read(regs.QUEUE_CAPS))
        except BusError:
            qc = {"SDMA": 0, "CP_QUEUES": 1}
        # CP_QUEUE_RESET came with the CP's second queue: a device of one queue has no reset of
        # queue 0, its errors and hangs go to the full reset
        self.ring.has_queue_reset = qc["CP_QUEUES"] >= 2
        sbo = kbo(4 << p.sdma_ring_log2_dw, "sdma ring") if qc["SDMA"] else None
        hbo = kbo(4 << p.ring_log2_dw, "gfx_high ring") if qc["CP_QUEUES"] >= 2 else None
        gtt = self.bo.heaps[Domain.GTT]
        pool = min(p.shadow_pool_kib << 10, (gtt.size - gtt.used) * 3 // 4) & ~(PAGE - 1)
        pool = max(pool, PAGE)
        # 2 MiB aligned when it is that large, so each VM maps it with huge pages
        self.shadow = ShadowPool(kbo(pool, "shadow IBs", HUGE if pool >= HUGE else PAGE))
        self.copies_parked = 0  # bytes of checks kept through CSs' waits (park_check)
        self.checks_paused = 0  # checks that may hand the lock over, their copies held (check_slot)
        self.check_waiters: list = []  # CSs waiting for one of those turns, in order (wait_check_slot)
        self.vm_levels = self.info.vm_levels
        self.kernel_va_size = -(-self.shadow.size // HUGE) * HUGE if p.cs_check else 0
        self.kernel_va = (1 << vm_spec.va_bits(self.vm_levels)) - self.kernel_va_size
        self.vmids = VmidManager(self, self.info.vmids)
        # A job's copies take half the pool at most, so the jobs around it still fit; on a small
        # device the limit shrinks to a power of two that does (DEV_INFO.max_job_dw says which).
        self.max_job_dw = min(p.max_job_dw, 1 << ((self.shadow.size // 8).bit_length() - 1))
        self.fence_drv = FenceDriver(self.wb32, Wb.FENCE, self.wb_addr(Wb.FENCE), p.initial_seq,
                                     self._fence_signalled)
        self.sched = Scheduler(self, p.job_timeout, hw_submission_limit=p.hw_submission_limit)
        # The copy engine, when the device has one: its ring, fence driver and scheduler.
        self.sdma_ring: SdmaRing | None = None
        self.sdma_fence_drv: FenceDriver | None = None
        self.sdma_sched: Scheduler | None = None
        self.sdma_engines = qc["SDMA"]
        if self.sdma_engines:
            self.sdma_ring = SdmaRing(self, sbo.gpu_addr, p.sdma_ring_log2_dw, Wb.SDMA_RPTR, Wb.SDMA_SCRATCH)
            self.sdma_fence_drv = FenceDriver(self.wb32, Wb.SDMA_FENCE, self.wb_addr(Wb.SDMA_FENCE), p.initial_seq,
                                              self._fence_signalled)
            self.sdma_sched = Scheduler(self, p.job_timeout, self.sdma_ring, self.sdma_fence_drv,
                                        p.hw_submission_limit)
        # The CP's second hardware queue, when there is one: where HIGH-priority contexts' gfx
        # jobs go (amdgpu_ctx_get_hw_prio: AMDGPU_GFX_PIPE_PRIO_HIGH).
        self.hqd_ring: HqdRing | None = None
        self.hqd_sched: Scheduler | None = None
        if hbo is not None:
            self.hqd_ring = HqdRing(self, hbo.gpu_addr, p.ring_log2_dw, p.ib_align_dw, Wb.HQD1_RPTR, Wb.HQD1_SCRATCH)
            hfd = FenceDriver(self.wb32, Wb.HQD1_FENCE, self.wb_addr(Wb.HQD1_FENCE), p.initial_seq,
                              self._fence_signalled)
            self.hqd_sched = Scheduler(self, p.job_timeout, self.hqd_ring, hfd, p.hw_submission_limit)
        # (HW IP type, ring index) -> scheduler, as amdgpu_ctx_get_entity resolves a CS chunk
        self.rings: dict[tuple[int, int], Scheduler] = {(HwIp.GFX, 0): self.sched}
        if self.sdma_sched is not None:
            self.rings[(HwIp.DMA, 0)] = self.sdma_sched
        i = self.info
        self.checker = CsChecker(self.mem32, rules.Caps(i.ib_levels, i.has_dma, i.dma_max_bytes, i.addr_bits),
                                 self.max_job_dw, p.max_job_ibs)
        self._mem_file = dev.mem_file()
        self.files: dict[int, File] = {}
        self.next_fd = 3
        self.reset_count = 0  # resets done (RecoveryMixin._count_reset): Context.resets counts from it
        self.contexts: dict[tuple[int, int], Context] = {}  # (fd, the file's context id): every file's
        self.reset_pending: tuple[str, CpErrorState | None] | None = None
        self.last_vm_fault: VmFaultInfo | None = None
        self.wedged: str | None = None
        self.recovery_log: list[tuple[str, str]] = []  # (ring, step) of the latest recoveries, in order (RECOVERY_KEPT)
        self.trace_hooks: list = []  # callables taking an ioctl.trace.IoctlRecord
        self.hw_init()

    # ------------------------------------------------------------------ helpers

    def wb_addr(self, slot: int) -> int:
        return self.wb_bo.gpu_addr + 4 * slot

    @property
    def fence_addr(self) -> int:
        return self.wb_addr(Wb.FENCE)

    @property
    def name(self) -> str:
        return self.dev.name

    def notify(self, event: str, **fields) -> None:
        """Tell the observers: "doorbell" (ring, start, wptr), "run_job" (job, fence),
        "irq", "ih_entry" (source, entry, raw), "fence" (fence), "gpu_error" (info, state,
        job, ring: the failing ring's name; before recovery touches the hardware), "reset" (resubmitted; ring: the
        ring whose queue alone was reset, absent for the full reset), "bind" (kmd,
        after `rebind`). Call sites check
        `if self.observers:` first, so an unobserved driver pays one truth test."""
        for o in self.observers:
            o(event, fields)

    # ------------------------------------------------------------------ bring-up

    def hw_init(self) -> None:
        """Soft reset, program ring and IH, enable interrupts, self-test."""
        i = self.info
        log.info("probe: %s, register interface %d.%d.%d, %d-bit bus, %d address bits, %d IB levels%s%s",
                 self.dev.name, *i.version, 8 * i.bus_bytes, i.addr_bits, i.ib_levels,
                 ", DMA" if i.has_dma else "", ", IH" if i.has_ih else ", no IH ring (polling INT_STATUS)")
        self._soft_reset()
        self.mmio.write_fields(regs.CONTROL, PERF_CLEAR=1)
        self._hw_reinit()
        if self.params.ib_test:
            self.test_ib()
        v, g = self.bo.heaps[Domain.VRAM], self.bo.heaps[Domain.GTT]
        log.info("ready: VRAM [%#x, %#x), GTT [%#x, %#x), ring %d dwords, first seqno %#010x",
                 v.base, v.base + v.size, g.base, g.base + g.size, self.ring.size_dw,
                 self.params.initial_seq)

    def _soft_reset(self) -> None:
        m = self.mmio
        m.write(regs.INT_ENABLE, 0)
        m.write_fields(regs.CONTROL, SOFT_RESET=1)
        # Each engine's part of the reset ends when its own bus traffic has, and until then
        # it ignores its doorbells: wait for every queue's IDLE, as amdgpu waits for each IP
        # block to go idle (docs/hardware.md, Errors), before the ring tests ring them.
        deadline = self.dev.now() + self.params.hw_timeout
        for status in [regs.STATUS] + [r.STATUS for r in (self.hqd_ring, self.sdma_ring) if r is not None]:
            while not status.IDLE.get(m.read(status)):
                if self.dev.now() >= deadline:
                    what = "CP" if status is regs.STATUS else status.NAME[:-len("_STATUS")]
                    raise KmdError(errno.EIO, f"soft reset: {what} not idle after {self.params.hw_timeout} cycles "
                                   f"({status.NAME} {m.read(status):#x})")
                self.dev.delay(8)

    @property
    def scheds(self) -> tuple[Scheduler, ...]:
        """Every ring's scheduler: gfx first."""
        return tuple(s for s in (self.sched, self.hqd_sched, self.sdma_sched) if s is not None)

    def sched_for(self, sched: Scheduler, ctx: Context) -> Scheduler:
        """Where a job for `sched`'s ring goes: a HIGH-priority context's gfx jobs go to the
        CP's high-priority hardware queue when the device has one (amdgpu's hw_prio)."""
        if sched is self.sched and self.hqd_sched is not None and ctx.priority <= 1:  # KERNEL, HIGH
            return self.hqd_sched
        return sched

    def _hw_reinit(self) -> None:
        """Rings, IH and interrupts from a clean (just reset) device; then the ring tests."""
        m = self.mmio
        self.ring.init_hw()
        if self.sdma_ring is not None:
            self.sdma_ring.init_hw()
        if self.hqd_ring is not None:
            self.hqd_ring.init_hw()
        if self.ih:
            self.ih.init_hw()
        m.write(regs.INT_STATUS, INT_EVENTS)  # W1C: forget events from before the reset
        if self.ih:
            m.write_fields(regs.INT_ENABLE, IH_PENDING=1, IH_OVERFLOW=1)
        else:
            m.write_fields(regs.INT_ENABLE, EOP=1, CP_ERROR=1)
        self.ring.test_ring(self.params.hw_timeout)
        if self.sdma_ring is not None:
            self.sdma_ring.test_ring(self.params.hw_timeout)
        if self.hqd_ring is not None:
            self.hqd_ring.test_ring(self.params.hw_timeout)

    def test_ib(self) -> None:
        """amdgpu's IB test: an IB writes a magic, a fence follows, the interrupt signals it."""
        ib_addr = self.ib_test_bo.gpu_addr
        dst = self.wb_addr(Wb.IB_TEST)
        self.wb32[Wb.IB_TEST] = 0
        ib = self.ring.pad_ib(pm4.write_data(dst, [IB_TEST_MAGIC], wr_confirm=1))
        self.mem32[ib_addr // 4: ib_addr // 4 + len(ib)] = ib
        fence = Fence(self.fence_drv.next_seq())
        self.ring.emit_ib(ib_addr, len(ib))
        self.ring.emit_fence(self.fence_addr, fence.seq, interrupt=True)
        self.fence_drv.track(fence)
        self.ring.commit()
        irqs = self.stats["interrupts"]
        if not self.wait_for(lambda: fence.signalled, self.params.hw_timeout):
            raise KmdError(errno.ETIMEDOUT, f"IB test failed: fence {fence.seq:#010x} not signalled after "
                           f"{self.params.hw_timeout} cycles (fence memory {self.fence_drv.read():#010x})")
        if int(self.wb32[Wb.IB_TEST]) != IB_TEST_MAGIC:
            raise KmdError(errno.EIO, f"IB test failed: read {int(self.wb32[Wb.IB_TEST]):#010x}, "
                           f"expected {IB_TEST_MAGIC:#010x}")
        log.info("IB test passed, fence %#010x signalled by %s", fence.seq,
                 "interrupt" if self.stats["interrupts"] > irqs else "polling (no interrupt seen)")

    # ------------------------------------------------------------------ INFO

    def counters(self) -> dict:
        """The hardware's performance counters, read over MMIO."""
        m = self.mmio
        hw = {
            "busy_cycles": m.read(regs.PERF_BUSY_CYCLES),
            "stall_cycles": m.read(regs.PERF_STALL_CYCLES),
            "dwords_fetched": m.read(regs.PERF_DWORDS_FETCHED),
            "dma_bytes_read": m.read(regs.PERF_DMA_BYTES_READ),
            "dma_bytes_written": m.read(regs.PERF_DMA_BYTES_WRITTEN),
            "dma_busy_cycles": m.read(regs.PERF_DMA_BUSY_CYCLES),
            "timestamp": m.timestamp(),
        }
        pk = {p.name: m.read(regs.PERF_PACKETS, p.index)
              for p in packets.PACKETS if p.index < regs.PERF_PACKETS.ARRAY_LEN}
        return {"hw": hw, "packets": pk}

    def kmd_stats(self) -> dict:
        s = dict(self.stats)
        s.update(
            doorbells=self.ring.doorbells, ring_dwords=self.ring.dwords_written,
            ih_entries=self.ih.entries if self.ih else 0,
            ih_by_source=dict(self.ih.by_source) if self.ih else {},
            fences_emitted=self.fence_drv.emitted, fences_signalled=self.fence_drv.signalled,
            last_fence=self.fence_drv.last_seq, live_bos=len(self.live_bos()),
            vmid_grabs=self.vmids.grabs, vmid_steals=self.vmids.steals, tlb_flushes=self.vmids.flushes,
            tlb_flush_failures=self.vmids.flush_failures,
            kernel_bos=len(self.bo.live_bos(None)), files=len(self.files), contexts=len(self.contexts),
        )
        return s
