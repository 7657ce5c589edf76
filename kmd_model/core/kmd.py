"""The driver instance for one device (amdgpu_device): bring-up, interrupts, waits, reset.

`bind(dev)` probes the device, carves its memory into heaps, allocates the kernel's
own buffers (write-back page, ring, IH ring), brings the hardware up (soft reset, ring,
IH, interrupts) and runs amdgpu's self-tests: the ring test (a WRITE_DATA from the ring)
and the IB test (an IB and a fence, signalled through the interrupt path).

Errors: a CP_ERROR entry (or STATUS.ERROR found by polling) is decoded into a message,
the job at the CP's read pointer is guilty, and `gpu_recover` runs drm_sched's
stop -> reset -> resubmit -> start. A VM fault (its UTCL2 entry) goes the same way, after
the fault is recorded in the faulting VM (INFO VM_FAULT). A job with no progress for
`job_timeout` cycles goes the same way through `timedout_job`.

Virtual memory (kmd_model/mm/vm.py): every file has a VM; jobs run with the VMID the
VmidManager grants their VM. With the CS checker on, the shadow pool is mapped in every
VM at the top of the address space, executable only, so the CP can fetch the checked
copies with the job's VMID while the client can neither read nor write them.
"""

from __future__ import annotations

import errno
import threading
from dataclasses import dataclass, replace
from enum import IntEnum

from spec import ih as ih_spec
from spec import packets, pm4, rules
from spec import vm as vm_spec

from .. import regs
from ..cp_error import CpError, CpErrorState
from ..cs.checker import CsChecker, find_unsatisfied_wait
from ..cs.shadow import ShadowPool
from ..device import BusError, Device
from ..irq.handler import INT_EVENTS, IrqMixin
from ..irq.ih import IhRing
from ..log import get_logger
from ..mm.bo import PAGE, Bo, BoManager
from ..mm.vm import HUGE
from ..mm.vmid import VmidManager
from ..mmio import Mmio
from ..sched.fence import Fence, FenceDriver
from ..sched.ring import HqdRing, Ring, as_u32
from ..sched.scheduler import Job, Scheduler
from ..sched.sdma_ring import SdmaRing
from ..uapi import Domain, HwErrorInfo, HwIp, KmdError, ResetStatus, VmFaultInfo
from .clients import ClientsMixin
from .ctx import Context
from .file import File

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
    max_job_dw: int = 1 << 21  # dwords one job may run (every IB counted each time it runs)
    max_job_ibs: int = 4096  # distinct IBs one job may reach (each is copied and checked)
    shadow_pool_kib: int = 16 << 10  # kernel memory for checked copies of IBs (at most half of GTT)
    sdma_ring_log2_dw: int = 10  # the SDMA ring: 1024 dwords (when the device has the engine)
    hw_submission_limit: int = 64  # jobs in flight per ring (amdgpu_sched_hw_submission, 2 on amdgpu)
    ban_after_hangs: int = 3  # a context that caused this many resets is banned (its CS: EIO)

    def __post_init__(self) -> None:
        for name, lo, hi in (("ring_log2_dw", 6, 20), ("ih_log2_entries", 2, 16),
                             ("ib_align_dw", 1, 256), ("initial_seq", 0, 0xFFFF_FFFF),
                             ("job_timeout", 1, 1 << 62), ("fallback_poll", 1, 1 << 62),
                             ("hw_timeout", 1, 1 << 62), ("max_ib_chunks", 1, 64),
                             ("max_job_dw", 1, 1 << 30), ("max_job_ibs", 1, 1 << 20),
                             ("shadow_pool_kib", 4, 1 << 30), ("sdma_ring_log2_dw", 6, 20),
                             ("hw_submission_limit", 1, 1 << 20), ("ban_after_hangs", 1, 1 << 20)):
            v = getattr(self, name)
            if not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"KMD parameter {name} must be an int in [{lo}, {hi}], not {v!r}")
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


class Kmd(ClientsMixin, IrqMixin):
    def __init__(self, dev: Device, params: KmdParams | None = None, observers=()):
        self.dev = dev
        # The driver's own lock, as a kernel driver serialises what its state needs: every
        # ioctl and every close of a file holds it (File.ioctl), whichever thread makes it.
        # The CS checker, for one, keeps the walk's lookup tables on itself; two threads
        # checking at once read each other's. Re-entrant: a hook inside an ioctl may make
        # another (the UMD's KMD_LOCK is taken outside it, never inside).
        self.lock = threading.RLock()
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
        sbo = kbo(4 << p.sdma_ring_log2_dw, "sdma ring") if qc["SDMA"] else None
        hbo = kbo(4 << p.ring_log2_dw, "gfx_high ring") if qc["CP_QUEUES"] >= 2 else None
        gtt = self.bo.heaps[Domain.GTT]
        pool = min(p.shadow_pool_kib << 10, (gtt.size - gtt.used) * 3 // 4) & ~(PAGE - 1)
        pool = max(pool, PAGE)
        # 2 MiB aligned when it is that large, so each VM maps it with huge pages
        self.shadow = ShadowPool(kbo(pool, "shadow IBs", HUGE if pool >= HUGE else PAGE))
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
        self.contexts: dict[int, Context] = {}
        self.next_ctx_id = 1
        self.reset_pending: tuple[str, CpErrorState | None] | None = None
        self.last_vm_fault: VmFaultInfo | None = None
        self.wedged: str | None = None
        self.recovery_log: list[tuple[str, str]] = []  # (ring, step) of every recovery, in order
        self.trace_hooks: list = []  # callables taking an ioctl.IoctlRecord
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
        job; before recovery touches the hardware), "reset" (resubmitted), "bind" (kmd,
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

    # ------------------------------------------------------------------ errors and recovery

    def _recover_pending(self) -> None:
        kind, state = self.reset_pending  # type: ignore[misc]
        assert state is not None
        rptr = self.mmio.read(regs.RB_RPTR)
        guilty = self.sched.job_at_ring(rptr) or self.sched.head_job()
        info = self.describe_error(state, guilty)
        log.error("CP error: %s", info.message)
        if self.observers:
            self.notify("gpu_error", info=info, state=state, job=guilty)
        self.gpu_recover(guilty, info)

    def describe_error(self, state: CpErrorState, guilty: Job | None, ring: str = "gfx") -> HwErrorInfo:
        owner = f"context {guilty.ctx.id}" if guilty else "kernel"
        if ring != "gfx":
            owner = f"{ring}, {owner}"
        if guilty is not None and state.code not in (CpError.DOORBELL_BACKWARDS, CpError.DOORBELL_OVERFLOW):
            # the CP ran the checked copy; the client knows its packets by its own addresses
            state = replace(state, addr=guilty.client_addr(state.addr))
        msg = f"{state.what(self.info.ib_levels)} at {state.where()}, {owner}"
        return HwErrorInfo(code=state.code_name, level=state.level_name, opcode=state.opcode,
                           opcode_name=state.opcode_name, offset=4 * state.offset_dw, addr=state.addr,
                           seq=guilty.seq if guilty else 0, ctx_id=guilty.ctx.id if guilty else 0,
                           message=msg)

    def _progressed(self, sched: Scheduler) -> bool:
        """The job timer of `sched`'s ring ran out: has its queue moved since it last looked?
        When it has, the timer starts again: a long legal job runs to its end, and a stuck
        one is caught between job_timeout and 2 * job_timeout cycles after its last step (the
        registers are read when the timer runs out, not at every job start, which would cost
        MMIO reads per job).

        Progress is the queue's own registers moving (ring.PROGRESS: its rptr; the SDMA
        engine's counters too), or the counters it shares with the CP's other queue
        (ring.SHARED_PROGRESS: dwords fetched, DMA bytes) moving while they can only be its
        own: the queue is not polling (STATUS.WAITING) nor stopped (STATUS.ERROR), or the
        other queue had no job in the ring since the last look. A queue stuck in a
        WAIT_REG_MEM moves nothing of its own (a poll fetches nothing): the other queue's
        traffic no longer hides it. A queue that is neither is running or waiting for the
        CP, which the other queue holds only by running (the arbiter skips a polling queue).
        The price: a legal job that is polling at two looks job_timeout apart, with the same
        rptr, while the other queue works, is taken for stuck (amdgpu's job timer does not
        restart for progress at all)."""
        m, ring, now = self.mmio, sched.ring, self.dev.now()
        own = tuple(m.read(r) for r in ring.PROGRESS)
        shared = tuple(m.read(r) for r in ring.SHARED_PROGRESS)
        before, since = sched.progress_mark, sched.marked_at
        sched.progress_mark, sched.marked_at = (own, shared), now
        if not before or own != before[0]:
            moved = True
        elif shared == before[1]:
            moved = False
        else:
            st = m.read(ring.STATUS)
            moved = not (ring.STATUS.WAITING.get(st) or ring.STATUS.ERROR.get(st)) or not any(
                s.pending or s.busy_at >= since for s in self.scheds
                if s is not sched and s.ring.SHARED_PROGRESS == ring.SHARED_PROGRESS)
        if moved:
            sched.progress_at = now
        return moved

    def timedout_job(self) -> None:
        """drm_sched's timedout_job: the head job made no progress for job_timeout cycles."""
        job = self.sched.head_job()
        if job is None:
            return
        st = self.mmio.read(regs.STATUS)
        if regs.STATUS.ERROR.get(st):  # stopped by an error whose interrupt we never saw
            self._cp_error(self.read_cp_error())
            self._recover_pending()
            return
        self.stats["job_timeouts"] += 1
        waited = self.dev.now() - self.sched.progress_at
        stuck = find_unsatisfied_wait(self.mem32, job.ibs, self.info.ib_levels, client_addr=job.client_addr,
                                      translate=self.job_translate(job))
        if stuck:
            doing = f"stuck in {stuck}"
        elif regs.STATUS.WAITING.get(st):
            doing = "CP polling in a WAIT_REG_MEM"
        else:
            doing = f"CP busy at {regs.IbLevel(regs.STATUS.LEVEL.get(st)).name} (STATUS {st:#x})"
        msg = f"job {job.seq:#x} timed out: no progress for {waited} cycles, {doing}, context {job.ctx.id}"
        info = HwErrorInfo(code="TIMEOUT", level=regs.IbLevel(regs.STATUS.LEVEL.get(st)).name,
                           opcode=packets.WAIT_REG_MEM.opcode if stuck or regs.STATUS.WAITING.get(st) else 0,
                           opcode_name="WAIT_REG_MEM" if stuck or regs.STATUS.WAITING.get(st) else None,
                           offset=0, addr=0, seq=job.seq, ctx_id=job.ctx.id, message=msg)
        log.error("timeout: %s", msg)
        if self.observers:
            self.notify("gpu_error", info=info, state=None, job=job)
        self.gpu_recover(job, info)

    def _mark_guilty(self, guilty: Job | None, info: HwErrorInfo, scheds: tuple[Scheduler, ...],
                     full: bool = True, cancel: bool = True) -> None:
        """The guilty context's unfinished jobs fail with ECANCELED. After a full reset the
        context stays guilty (amdgpu's ctx->guilty: its CS and WAIT_CS fail with ECANCELED from
        then on) and its jobs go from every ring; after a queue reset only its jobs of that
        ring go, as amdgpu's per-queue reset cancels the guilty context's other fences there,
        and the context carries on until it has caused `ban_after_hangs` resets: then it is
        banned (its CS fails with EIO, as i915 bans). Contexts with work on the reset rings
        are innocent there. Without `cancel` (a reset that failed: the wedge fails every job
        with EIO) only what the contexts read is marked."""
        # (not innocent anywhere after a full reset: its jobs are gone, or fail with EIO)
        gctx = guilty.ctx if guilty is not None and not guilty.finished and full else None
        if guilty is not None and not guilty.finished:
            ctx = guilty.ctx
            ctx.hangs += 1
            if full and cancel:
                ctx.guilty = info
            ctx.reset_status = ResetStatus.GUILTY
            ctx.ring_status[guilty.ring.name if guilty.ring is not None else "gfx"] = ResetStatus.GUILTY
            if cancel:
                err = KmdError(errno.ECANCELED, info.message, info)
                dropped = [j for s in (self.scheds if full else scheds) for j in s.drop_context(ctx, err)]
                log.warning("context %d is guilty: %d job(s) cancelled", ctx.id, len(dropped))
            if ctx.hangs >= self.params.ban_after_hangs and not ctx.banned:
                ctx.banned = (f"context {ctx.id} is banned: it caused {ctx.hangs} resets "
                              f"(ban_after_hangs {self.params.ban_after_hangs})")
                log.error(ctx.banned)
        for s in scheds:
            for job in (*s.pending, *s.queue):
                if job.ctx is gctx:
                    continue
                if job.ctx.ring_status.get(s.name, ResetStatus.NO_RESET) == ResetStatus.NO_RESET:
                    job.ctx.ring_status[s.name] = ResetStatus.INNOCENT
                if job.ctx.reset_status == ResetStatus.NO_RESET:
                    job.ctx.reset_status = ResetStatus.INNOCENT
        for ctx in self.contexts.values():
            ctx.resets += 1

    def gpu_recover(self, guilty: Job | None, info: HwErrorInfo) -> None:
        """The full reset, the last step of the ladder: stop every ring -> reset the device ->
        drop the guilty context's jobs -> resubmit the rest -> start."""
        self.stats["resets"] += 1
        self.reset_pending = None
        scheds = self.scheds
        for s in scheds:
            s.error = None
        marked = False
        try:
            for s in scheds:
                s.stop()
            self._soft_reset()
            for s in scheds:
                s.fence_drv.process()  # work that finished before the error stays finished
            self._mark_guilty(guilty, info, scheds)
            marked = True
            redo = []
            for s in scheds:
                # nothing will ever write the hardware fences of the lost ring contents
                s.fence_drv.pending.clear()
                s.fence_drv.force_completion()
            self._hw_reinit()
            for s in scheds:
                redo += s.resubmit_and_start()
            log.warning("GPU reset done: %d job(s) resubmitted", len(redo))
            if self.observers:
                self.notify("reset", resubmitted=len(redo))
        except KmdError as e:
            if not marked:  # the contexts still learn of the reset, and who caused it
                self._mark_guilty(guilty, info, scheds, cancel=False)
            self.wedge(f"GPU reset failed: {e.message}")
            raise

    def wedge(self, why: str) -> None:
        """Recovery failed: the device is wedged; every job fails with EIO, and so does every CS."""
        self.wedged = why
        log.critical(self.wedged)
        for s in self.scheds:
            s.stopped = True
            s.cancel_all(KmdError(errno.EIO, self.wedged))

    # ------------------------------------------------------------------ the SDMA ring's recovery

    def _ring_recover_pending(self, sched: Scheduler) -> None:
        state, ring = sched.error, sched.ring
        assert state is not None
        guilty = sched.job_at_ring(self.mmio.read(ring.RPTR) >> ring.RPTR_SHIFT) or sched.head_job()
        info = self.describe_error(state, guilty, ring.name)
        log.error("%s error: %s", ring.name, info.message)
        if self.observers:
            self.notify("gpu_error", info=info, state=state, job=guilty)
        self.ring_recover(sched, guilty, info)

    def ring_timedout_job(self, sched: Scheduler) -> None:
        """drm_sched's timedout_job for an extra ring."""
        job, ring = sched.head_job(), sched.ring
        if job is None:
            return
        st = ring.STATUS.decode(self.mmio.read(ring.STATUS))
        if st["ERROR"]:
            self._ring_error(sched, ring.read_error())
            self._ring_recover_pending(sched)
            return
        self.stats["job_timeouts"] += 1
        doing = f"polling in a {ring.POLL_PACKET}" if st["WAITING"] else f"busy at {regs.IbLevel(st['LEVEL']).name}"
        msg = (f"job {job.seq:#x} timed out on {ring.name}: no progress for {self.dev.now() - sched.progress_at} "
               f"cycles, {doing}, context {job.ctx.id}")
        info = HwErrorInfo(code="TIMEOUT", level=regs.IbLevel(st["LEVEL"]).name, opcode=0, opcode_name=None,
                           offset=0, addr=0, seq=job.seq, ctx_id=job.ctx.id, message=msg)
        log.error("timeout: %s", msg)
        if self.observers:
            self.notify("gpu_error", info=info, state=None, job=job)
        self.ring_recover(sched, job, info)

    def ring_recover(self, sched: Scheduler, guilty: Job | None, info: HwErrorInfo) -> None:
        """amdgpu_job_timedout's ladder for one ring: reset of the queue alone (if it has one)
        -> the full reset only if that fails. The other rings keep running through a queue
        reset. (amdgpu's first step, soft recovery, kills the guilty job's waves: no engine
        here has waves to kill, and sdma_v4_0 has none either, so the ladder starts below it.)"""
        ring = sched.ring
        sched.error = None
        self.recovery_log.append((ring.name, "timeout" if info.code == "TIMEOUT" else "error"))
        if ring.has_queue_reset:
            self.recovery_log.append((ring.name, "queue_reset"))
            try:
                sched.stop()
                ring.queue_reset(self.params.hw_timeout)  # type: ignore[attr-defined]
                sched.fence_drv.process()  # what finished before the error stays finished
                self._mark_guilty(guilty, info, (sched,), full=False)
                sched.fence_drv.pending.clear()
                sched.fence_drv.force_completion()
                ring.init_hw()
                ring.test_ring(self.params.hw_timeout)
                redo = sched.resubmit_and_start()
                self.stats["queue_resets"] += 1
                log.warning("%s queue reset done: %d job(s) resubmitted, the other rings ran on", ring.name, len(redo))
                if self.observers:
                    self.notify("reset", resubmitted=len(redo), ring=ring.name)
                return
            except KmdError as e:
                log.error("%s queue reset failed (%s): resetting the device", ring.name, e.message)
        self.recovery_log.append((ring.name, "full_reset"))
        self.gpu_recover(guilty if guilty is None or not guilty.finished else None, info)

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
            "timestamp": m.read64(regs.TIMESTAMP_LO, regs.TIMESTAMP_HI),
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
