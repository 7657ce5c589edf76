"""The ioctl table: request -> handler, argument checking, and an strace-like trace.

Each handler validates its arguments completely before it changes anything, so a
failed ioctl has no effect, and fails with `KmdError(errno, "<IOCTL>: what was wrong")`.
With `GPUCOSIM_LOG=ioctl=info` every call is printed as strace prints syscalls:

    ioctl(fd 3, GEM_CREATE, {size=0x1000, domain=GTT}) = {handle=1, gpu_addr=0x2000000, size=0x1000} <16 cycles, 41 us>
    ioctl(fd 3, CS, {ctx_id=1, chunks=[Ib(0x2000000, 8 dw)]}) = -1 EFAULT (CS: IB at ...) <0 cycles, 90 us>
"""

from __future__ import annotations

import errno
import logging
import time
from dataclasses import dataclass, fields, is_dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from . import uapi
from .core.ctx import MAX_CONTEXTS
from .core.kmd import MAX_IB_DW
from .log import get_logger
from .mm.vm import PAGE
from .sched.fence import SEQ_MASK
from .sched.scheduler import FailedDep, Job, ring_dw
from .sched.scheduler import Priority
from .uapi import (HW_IP_NUM, CsChunkDep, CsChunkFence, CsChunkIb, CtxOp, CtxPriority, Domain, GemFlags, HwIp,
                   InfoQuery, KmdError, Request, VaOp, VmFlags)

if TYPE_CHECKING:
    from .core.file import File
    from .core.kmd import Kmd

log = get_logger("ioctl")

Handler = Callable[["Kmd", "File", Any], Any]


@dataclass(frozen=True)
class IoctlDesc:
    """What IOCTLS holds per request (its key): the argument type and the handler."""

    args: type
    handler: Handler


@dataclass(frozen=True)
class IoctlRecord:
    """One traced call, handed to `Kmd.trace_hooks` (the demo prints these)."""

    fd: int
    request: str
    args: Any
    result: Any  # the out-structure, or None on error
    error: KmdError | None
    cycles: int
    wall_us: float

    def __str__(self) -> str:
        # as strace does (-s), long structures are cut, so a line fits a terminal; the
        # record keeps them whole (`args`, `result`)
        res = f"-1 {self.error.name} ({self.error.message})" if self.error else _clip(fmt(self.result))
        return (f"ioctl(fd {self.fd}, {self.request}, {_clip(fmt(self.args))}) = {res} "
                f"<{self.cycles} cycles, {self.wall_us:.0f} us>")


CLIP = 64  # characters of an ioctl's arguments or result shown in a trace line


def _clip(text: str) -> str:
    return text if len(text) <= CLIP else text[:CLIP - 4] + "...}"


IOCTLS: dict[Request, IoctlDesc] = {}


def ioctl_def(request: Request) -> Callable[[Handler], Handler]:
    def reg(fn: Handler) -> Handler:
        IOCTLS[request] = IoctlDesc(uapi.ARGS[request], fn)
        return fn
    return reg


def dispatch(file: "File", request: int, args: Any) -> Any:
    kmd = file.kmd
    dev = kmd.dev
    kmd.stats["ioctls"] += 1
    t0, c0 = time.perf_counter_ns(), dev.now()
    # an ioctl number is an integer (a numpy one too, as for every integer argument); a
    # float or bool equal to one is not, and is named as given, not as the ioctl it equals
    is_int = isinstance(request, (int, np.integer)) and not isinstance(request, bool)
    if is_int:
        request = int(request)
        name = Request(request).name if request in Request._value2member_map_ else f"{request:#x}"
    else:
        name = repr(request)
    out, err = None, None
    try:
        if file.closed:
            raise KmdError(errno.EBADF, f"{name}: the file is closed")
        desc = IOCTLS.get(request) if is_int else None
        if desc is None:
            raise KmdError(errno.EINVAL, f"unknown ioctl request {name}")
        if not isinstance(args, desc.args):
            raise KmdError(errno.EINVAL, f"{name}: arguments must be a {desc.args.__name__}, "
                           f"not {type(args).__name__}")
        try:
            out = desc.handler(kmd, file, args)
        except KmdError as e:
            raise e.within(name)
        return out
    except KmdError as e:
        err = e
        kmd.stats["ioctl_errors"] += 1
        raise
    finally:
        if kmd.trace_hooks or log.isEnabledFor(logging.INFO):
            rec = IoctlRecord(file.fd, name, args, out, err, dev.now() - c0,
                              (time.perf_counter_ns() - t0) / 1000)
            if log.isEnabledFor(logging.INFO):
                log.info("%s", rec)
            for hook in kmd.trace_hooks:
                hook(rec)


# ------------------------------------------------------------------------------ formatting

def _fmt_value(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, Enum):
        return v.name or str(v.value)
    if isinstance(v, int):
        return str(v) if -10 < v < 10 else f"{v:#x}"
    if isinstance(v, np.ndarray):
        return f"<{v.dtype}[{v.size}] view>"
    if isinstance(v, CsChunkIb):
        where = f"bo {v.handle}+{v.offset:#x}" if v.handle else f"{v.gpu_addr:#x}" if v.gpu_addr is not None else "?"
        ring = "" if (v.ip_type, v.ring) == (HwIp.GFX, 0) else f", {_ip_name(v.ip_type)} {v.ring}"
        return f"Ib({where}, {v.size_dw} dw{ring})"
    if isinstance(v, CsChunkDep):
        return f"Dep({_ip_name(v.ip_type)} {v.ring}, ctx {v.ctx_id}, seq {_fmt_value(v.handle)})"
    if isinstance(v, CsChunkFence):
        return f"Fence(bo {v.handle}+{v.offset:#x})"
    if is_dataclass(v):
        return fmt(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}={_fmt_value(x)}" for k, x in v.items()) + "}"
    return repr(v)


def _ip_name(ip: Any) -> str:
    return HwIp(ip).name if isinstance(ip, int) and ip in HwIp._value2member_map_ else repr(ip)


def fmt(obj: Any) -> str:
    """`{a=1, b=0x1000}`: a dataclass's fields, leaving out zero/None defaults."""
    if not is_dataclass(obj):
        return _fmt_value(obj)
    parts = []
    for f in fields(obj):
        v = getattr(obj, f.name)
        if v is None or (f.default is not None and not isinstance(v, np.ndarray) and v == f.default) \
                or (isinstance(v, (dict, list)) and not v):
            continue
        parts.append(f"{f.name}={_fmt_value(v)}")
    return "{" + ", ".join(parts) + "}"


# ------------------------------------------------------------------------------ argument checks

def _int(who: str, name: str, v: Any, lo: int = 0, hi: int | None = None, bits: int = 64) -> int:
    """An integer argument, as the C structure's field would hold it (`bits` wide)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise KmdError(errno.EINVAL, f"{who}: {name} must be an int, not {v!r}")
    v = int(v)
    if v >> bits and v > 0:
        raise KmdError(errno.EINVAL, f"{who}: {name} must fit in {bits} bits, not {v:#x}")
    if v < lo or (hi is not None and v > hi):
        rng = f">= {lo:#x}" if hi is None else f"{lo:#x} to {hi:#x}" if hi != lo else f"{lo}"
        if hi is None and lo in (0, 1):
            rng = f">= {lo}" if lo == 0 else "> 0"
        raise KmdError(errno.EINVAL, f"{who}: {name} must be {rng}, not {v:#x}" if v > 9 or v < -9
                       else f"{who}: {name} must be {rng}, not {v}")
    return v


# ------------------------------------------------------------------------------ GEM

@ioctl_def(Request.GEM_CREATE)
def gem_create(kmd: "Kmd", file: "File", a: uapi.GemCreateArgs) -> uapi.GemCreateOut:
    size = _int("GEM_CREATE", "size", a.size, 1)
    align = _int("GEM_CREATE", "alignment", a.alignment)
    if align & (align - 1):
        raise KmdError(errno.EINVAL, f"GEM_CREATE: alignment must be 0 or a power of two, not {align:#x}")
    d = a.domain
    is_int = isinstance(d, (int, np.integer)) and not isinstance(d, bool)
    if not is_int or int(d) not in (Domain.VRAM, Domain.GTT):
        raise KmdError(errno.EINVAL, f"GEM_CREATE: domain must be VRAM ({Domain.VRAM:#x}) or GTT "
                       f"({Domain.GTT:#x}), not {f'{d:#x}' if is_int else repr(d)}")
    flags = _int("GEM_CREATE", "flags", a.flags)
    unknown = flags & ~sum(GemFlags)
    if unknown:
        raise KmdError(errno.EINVAL, f"GEM_CREATE: unknown flags {unknown:#x}")
    bo = kmd.bo.create(size, align, Domain(int(d)), flags, file, who="GEM_CREATE")
    # Every BO a client gets is zero-filled, whatever the flags: memory comes back from
    # other clients (and from the kernel), and what they left there is not the new owner's.
    kmd.dev.mem[bo.gpu_addr:bo.end] = 0
    handle = file.add_bo(bo)
    bo.name = f"fd{file.fd}:{handle}"
    return uapi.GemCreateOut(handle, bo.size)


@ioctl_def(Request.GEM_CLOSE)
def gem_close(kmd: "Kmd", file: "File", a: uapi.GemCloseArgs) -> None:
    bo = file.bo(a.handle, "GEM_CLOSE", errno.EINVAL)  # Linux's drm_gem_handle_delete: EINVAL
    del file.handles[int(a.handle)]
    try:
        if bo.busy:
            kmd.service()  # it may have become idle without the KMD hearing of it yet
    finally:  # (a recovery run in there that fails is raised, but the BO is closed, as close(2) does)
        kmd.bo_close(bo)


@ioctl_def(Request.GEM_MMAP)
def gem_mmap(kmd: "Kmd", file: "File", a: uapi.GemMmapArgs) -> uapi.GemMmapOut:
    bo = file.bo(a.handle, "GEM_MMAP")
    if bo.flags & GemFlags.NO_CPU_ACCESS:
        raise KmdError(errno.EPERM, f"GEM_MMAP: BO {a.handle} was created with NO_CPU_ACCESS")
    return uapi.GemMmapOut(kmd.map_bo(bo).array, bo.size)


@ioctl_def(Request.GEM_VA)
def gem_va(kmd: "Kmd", file: "File", a: uapi.GemVaArgs) -> None:
    """amdgpu_gem_va_ioctl: map a range of a BO into the file's VM, or unmap. Every argument
    is checked before anything changes; a range that loses or changes entries has the TLB
    invalidated before the ioctl returns (the BOs stay allocated while jobs may use them)."""
    who = "GEM_VA"
    op = _int(who, "operation", a.operation, 0)
    if op not in set(VaOp):
        raise KmdError(errno.EINVAL, f"{who}: operation must be MAP (1), UNMAP (2), CLEAR (3) or REPLACE (4), "
                       f"not {op}")
    op = VaOp(op)
    flags = _int(who, "flags", a.flags, 0)
    unknown = flags & ~sum(VmFlags)
    if unknown:
        raise KmdError(errno.EINVAL, f"{who}: unknown flags {unknown:#x}")
    vm = file.vm
    va = _int(who, "va_address", a.va_address, 0)
    if op == VaOp.UNMAP:
        bo = file.bo(a.handle, who)
        m = vm.find(va)
        if m is None or m.va != va or m.bo is not bo:
            raise KmdError(errno.ENOENT, f"{who}: no mapping of BO {a.handle} starts at {va:#x}")
        vm.unmap(m)
        kmd.vmids.flush_vm(vm, m.va, m.size)
        return None
    size = _int(who, "map_size", a.map_size, 1)
    offset = _int(who, "offset_in_bo", a.offset_in_bo, 0) if op != VaOp.CLEAR else 0
    bo = file.bo(a.handle, who) if op != VaOp.CLEAR else None
    if (va | size | offset) & (PAGE - 1):
        raise KmdError(errno.EINVAL, f"{who}: va_address {va:#x}, offset_in_bo {offset:#x} and map_size {size:#x} "
                       f"must be multiples of the page size ({PAGE:#x})")
    if va < vm.va_start or va + size > vm.va_end:
        raise KmdError(errno.EINVAL, f"{who}: [{va:#x}, {va + size:#x}) is outside the VM's range "
                       f"[{vm.va_start:#x}, {vm.va_end:#x})")
    if bo is not None and offset + size > bo.size:
        raise KmdError(errno.EINVAL, f"{who}: offset_in_bo {offset:#x} + map_size {size:#x} runs past the end of "
                       f"BO {a.handle} ({bo.size:#x} bytes)")
    if op in (VaOp.MAP, VaOp.REPLACE):
        # BOs closed while jobs used them keep their mappings until those jobs are done;
        # a client reusing the range waits for that, as amdgpu's implicit sync would
        gone = [m.bo for m in vm.overlapping(va, size) if m.bo.closed]
        if gone:
            kmd.wait_for(lambda: all(b.freed for b in gone), 2 * kmd.params.job_timeout)
    if op == VaOp.MAP:
        taken = vm.overlapping(va, size)
        if taken:
            t = taken[0]
            raise KmdError(errno.EINVAL, f"{who}: [{va:#x}, {va + size:#x}) overlaps the mapping "
                           f"[{t.va:#x}, {t.end:#x}) of {t.bo.name or 'a BO'}")
    if op in (VaOp.MAP, VaOp.REPLACE):
        vm.reserve(va, size)  # the last thing that can fail: nothing has changed yet
    if op in (VaOp.CLEAR, VaOp.REPLACE) and vm.clear(va, size):
        kmd.vmids.flush_vm(vm, va, size)
    if op in (VaOp.MAP, VaOp.REPLACE):
        vm.map(bo, offset, va, size, flags)
    return None


@ioctl_def(Request.GEM_WAIT_IDLE)
def gem_wait_idle(kmd: "Kmd", file: "File", a: uapi.GemWaitIdleArgs) -> uapi.GemWaitIdleOut:
    bo = file.bo(a.handle, "GEM_WAIT_IDLE")
    timeout = _int("GEM_WAIT_IDLE", "timeout", a.timeout)
    kmd.wait_for(lambda: not bo.busy, timeout)
    return uapi.GemWaitIdleOut(bo.busy)


# ------------------------------------------------------------------------------ contexts

@ioctl_def(Request.CTX)
def ctx_ioctl(kmd: "Kmd", file: "File", a: uapi.CtxArgs) -> uapi.CtxOut:
    op = _int("CTX", "op", a.op)
    _int("CTX", "flags", a.flags, 0, 0)  # no flags are defined for any op
    prio = _int("CTX", "priority", a.priority, -(1 << 31), (1 << 31) - 1)  # an int32, as in drm_amdgpu_ctx_in
    if op != CtxOp.ALLOC and prio:
        raise KmdError(errno.EINVAL, f"CTX: priority is for ALLOC only, not {prio}")
    if op == CtxOp.ALLOC:
        if prio not in CtxPriority._value2member_map_:
            raise KmdError(errno.EINVAL, f"CTX ALLOC: priority must be one of "
                           f"{', '.join(f'{p.name} ({p.value})' for p in CtxPriority)}, not {prio}")
        if prio > CtxPriority.NORMAL and not file.cap_sys_nice:
            raise KmdError(errno.EACCES, f"CTX ALLOC: priority {CtxPriority(prio).name} needs CAP_SYS_NICE "
                           "(amdgpu_ctx_priority_permit)")
        if len(file.contexts) >= MAX_CONTEXTS:  # amdgpu's idr_alloc answer
            raise KmdError(errno.ENOSPC, f"CTX ALLOC: this file has {MAX_CONTEXTS} contexts, the most one file "
                           "may have (free one first)")
        run_queue = Priority.LOW if prio < 0 else Priority.NORMAL if prio == 0 else Priority.HIGH
        return uapi.CtxOut(kmd.ctx_alloc(file, run_queue).id)
    if op == CtxOp.FREE:
        ctx = file.ctx(a.ctx_id, "CTX FREE")
        kmd.ctx_free(ctx)
        return uapi.CtxOut(ctx.id)
    if op == CtxOp.QUERY_STATE:
        ctx = file.ctx(a.ctx_id, "CTX QUERY_STATE")
        kmd.service()
        return uapi.CtxOut(ctx.id, ctx.reset_status, ctx.resets, ctx.guilty, dict(ctx.ring_status))
    raise KmdError(errno.EINVAL, f"CTX: op must be ALLOC (1), FREE (2) or QUERY_STATE (3), not {op!r}")


# ------------------------------------------------------------------------------ submission

def _ring(kmd: "Kmd", who: str, ip_type, ip_instance, ring):
    """The scheduler a (HW IP type, instance, ring) names (amdgpu_ctx_get_entity); EINVAL
    for anything this device does not have."""
    ip = _int(who, "ip_type", ip_type, 0)
    if ip >= HW_IP_NUM:
        raise KmdError(errno.EINVAL, f"{who}: ip_type {ip} is not a HW IP type (0..{HW_IP_NUM - 1})")
    inst = _int(who, "ip_instance", ip_instance, 0)
    if inst:  # amdgpu: "Right now all IPs have only one instance"
        raise KmdError(errno.EINVAL, f"{who}: ip_instance must be 0 (every HW IP has one instance), not {inst}")
    r = _int(who, "ring", ring, 0)
    sched = kmd.rings.get((ip, r))
    if sched is not None:
        return sched
    name = HwIp(ip).name
    n = sum(1 for (i, _) in kmd.rings if i == ip)
    if ip == HwIp.DMA and not n:
        raise KmdError(errno.EINVAL, f"{who}: HW IP DMA ring {r}: this device has no SDMA engine (QUEUE_CAPS.SDMA "
                       f"is 0 on the {kmd.dev.name} backend)")
    if not n:
        raise KmdError(errno.EINVAL, f"{who}: HW IP {name} has no rings on this device")
    raise KmdError(errno.EINVAL, f"{who}: HW IP {name} has {n} ring(s) (0..{n - 1}), not ring {r}")


def _dependency(kmd: "Kmd", file: "File", who: str, ch: CsChunkDep):
    """The unfinished job a dependency chunk names, or None when it has finished already."""
    sched = _ring(kmd, who, ch.ip_type, ch.ip_instance, ch.ring)
    dctx = file.ctx(ch.ctx_id, who)  # amdgpu: an unknown context is EINVAL
    sched = kmd.sched_for(sched, dctx)  # its gfx jobs may run on the high-priority queue
    seq = _int(who, "handle", ch.handle, 0, SEQ_MASK)
    # amdgpu's ~0 is the context's latest job on that ring; seqnos here are 32 bits and
    # wrap, so once the context has handed out 0xffffffff itself it names that job
    if seq == SEQ_MASK and not dctx.submitted_seq(seq):
        seq = dctx.last_on.get(sched.name)
        if seq is None:
            return None
    if not dctx.submitted_seq(seq):
        last = f"last is {dctx.last_seq:#x}" if dctx.submitted else "nothing submitted yet"
        raise KmdError(errno.EINVAL, f"{who}: context {dctx.id} never submitted seqno {seq:#x} ({last})")
    job = dctx.jobs.get(seq)
    # on another ring it is not that job, running or not (amdgpu numbers jobs per ring)
    ran_on = job.ring.name if job is not None else dctx.ring_of.get(seq)
    if ran_on is not None and ran_on != sched.ring.name:
        raise KmdError(errno.EINVAL, f"{who}: seqno {seq:#x} of context {dctx.id} "
                       f"{'runs' if job is not None else 'ran'} on {ran_on}, not on {sched.name}")
    if job is None:
        e = dctx.failed.get(seq)  # failed and gone already: the job is cancelled as if it were queued
        return None if e is None else FailedDep(dctx.id, seq, e)  # (finished well: nothing to wait for)
    return job


def _guilty(who: str, ctx) -> KmdError:
    return KmdError(errno.ECANCELED, f"{who}: context {ctx.id} was reset: {ctx.guilty.message}", ctx.guilty)


def _may_submit(kmd: "Kmd", ctx) -> None:
    """A guilty context's CS is ECANCELED; a banned one's, or any on a wedged device, EIO."""
    if ctx.guilty:
        raise _guilty("CS", ctx)
    if kmd.wedged:
        raise KmdError(errno.EIO, f"CS: {kmd.wedged}")
    if ctx.banned:
        raise KmdError(errno.EIO, f"CS: {ctx.banned}")


@ioctl_def(Request.CS)
def cs(kmd: "Kmd", file: "File", a: uapi.CsArgs) -> uapi.CsOut:
    ctx = file.ctx(a.ctx_id, "CS")
    kmd.service()
    _may_submit(kmd, ctx)
    if not isinstance(a.chunks, (list, tuple)):
        raise KmdError(errno.EINVAL, f"CS: chunks must be a list, not {type(a.chunks).__name__}")
    ibs: list[tuple[int, int]] = []
    user_fence = None
    uf_bo = None
    sched = None
    deps = []
    for i, ch in enumerate(a.chunks):
        who = f"CS: chunk {i}"
        if isinstance(ch, CsChunkIb):
            if len(ibs) == kmd.params.max_ib_chunks:  # before any more work on a long list
                raise KmdError(errno.EINVAL, f"CS: more than {kmd.params.max_ib_chunks} IB chunks")
            n = _int(who, "size_dw", ch.size_dw, 1, MAX_IB_DW)
            _int(who, "flags", ch.flags, 0, 0)  # none defined yet
            s = kmd.sched_for(_ring(kmd, who, ch.ip_type, ch.ip_instance, ch.ring), ctx)
            if sched is not None and s is not sched:
                raise KmdError(errno.EINVAL, f"{who}: the IB chunks aim at different rings ({sched.name} and "
                               f"{s.name}): one CS runs on one ring")
            sched = s
            if ch.handle and ch.gpu_addr is not None:
                raise KmdError(errno.EINVAL, f"{who}: give a BO handle or a gpu_addr, not both")
            if ch.handle:
                bo = file.bo(ch.handle, who)
                off = _int(who, "offset", ch.offset)
                if off & 3:
                    raise KmdError(errno.EINVAL, f"{who}: offset must be dword aligned, not {off:#x}")
                if off + 4 * n > bo.size:
                    raise KmdError(errno.EINVAL, f"{who}: IB at offset {off:#x}+{4 * n:#x} runs past the "
                                   f"end of BO {ch.handle} ({bo.size:#x} bytes)")
                m = next((m for m in file.vm.maps if m.bo is bo and m.offset <= off < m.offset + m.size), None)
                if m is None:
                    raise KmdError(errno.EINVAL, f"{who}: BO {ch.handle} is not mapped at offset {off:#x} "
                                   "in the file's VM (GEM_VA)")
                addr = m.va + off - m.offset
            elif ch.gpu_addr is not None:
                addr = _int(who, "gpu_addr", ch.gpu_addr, 0, (1 << kmd.info.addr_bits) - 1)  # the bus's
                if addr & 3:
                    raise KmdError(errno.EINVAL, f"{who}: gpu_addr must be dword aligned, not {addr:#x}")
            else:
                raise KmdError(errno.EINVAL, f"{who}: an IB chunk needs a BO handle or a gpu_addr")
            if addr % s.ring.IB_ALIGN:  # (an SDMA IB's base has no bits below 5)
                raise KmdError(errno.EINVAL, f"{who}: an IB on the {s.ring.name} ring must start "
                               f"{s.ring.IB_ALIGN}-byte aligned, not at {addr:#x}")
            kva = kmd.kernel_va
            if kmd.kernel_va_size and addr < kva + kmd.kernel_va_size and addr + 4 * n > kva:
                # the shadow pool, executable in every VM: other clients' checked copies. The
                # checker refuses it as outside the client's mappings; an unchecked ring (SDMA)
                # would run them as its packets under this client's VMID
                raise KmdError(errno.EFAULT, f"{who}: an IB at {addr:#x}+{4 * n:#x} reaches into the kernel's "
                               f"range [{kva:#x}, {kva + kmd.kernel_va_size:#x}) of context {ctx.id}'s VM")
            ibs.append((addr, n))
        elif isinstance(ch, CsChunkFence):
            if user_fence is not None:
                raise KmdError(errno.EINVAL, f"{who}: only one fence chunk per CS")
            uf_bo = file.bo(ch.handle, who, errno.EINVAL)  # as amdgpu_cs's user fence lookup
            off = _int(who, "offset", ch.offset)
            if off & 3 or off + 4 > uf_bo.size:
                raise KmdError(errno.EINVAL, f"{who}: user fence offset {off:#x} must be dword aligned "
                               f"and inside BO {ch.handle} ({uf_bo.size:#x} bytes)")
            user_fence = uf_bo.gpu_addr + off
        elif isinstance(ch, CsChunkDep):
            dep = _dependency(kmd, file, who, ch)
            if dep is not None:
                deps.append(dep)
        else:
            raise KmdError(errno.EINVAL, f"{who} is a {type(ch).__name__}, not a CsChunkIb, CsChunkFence or "
                           "CsChunkDep")
    if not ibs:
        raise KmdError(errno.EINVAL, "CS: no IB chunk")
    # A job that cannot fit even an empty ring is refused here, before it is queued: queued,
    # it would wait for space forever, in front of every job behind it.
    ring = sched.ring
    need = ring_dw(ring, len(ibs), user_fence is not None)
    if not ring.ever_fits(need):
        raise KmdError(errno.EINVAL, f"CS: the job takes {need} dwords of the {ring.name} ring ({len(ibs)} IB "
                       f"chunk(s){' and a user fence' if user_fence is not None else ''}), more than its "
                       f"{ring.size_dw}: use fewer IB chunks or a larger ring")
    checked = None
    ring_ibs = ibs
    vm = file.vm
    if kmd.params.cs_check and sched is not kmd.sdma_sched:  # PM4 rings: the checker and its shadow IBs
        # The checked copies are what the CP runs: nothing the client writes from now on
        # reaches it (kmd_model/cs/checker.py).
        try:
            checked = kmd.checker.check(ctx, ibs, vm)
            addr = kmd.shadow_alloc(checked)
        except KmdError:
            kmd.stats["cs_rejected"] += 1
            raise
        try:  # waiting for room, the driver may have recovered a hang: asked again
            _may_submit(kmd, ctx)
        except KmdError:
            kmd.shadow.free(addr, checked.shadow_bytes)
            raise
        ring_ibs = kmd.checker.place(checked, addr, kmd.shadow_va(addr))
        kmd.stats["cs_shadow_bytes"] += checked.shadow_bytes
    # Every BO mapped in the VM (and its page tables) stays allocated while the job may run:
    # the job can reach all of them (amdgpu's VM reservation holds the job's fence).
    bos = vm.bos()
    if uf_bo is not None:
        bos.add(uf_bo)
    job = Job(ctx, ctx.next_seq(), ring_ibs, user_fence, bos, checked=checked, vm=vm)
    for bo in bos:
        bo.busy_jobs += 1
    job.deps = deps
    kmd.stats["cs"] += 1
    ctx.submitted_on(job.seq, sched.ring.name)
    sched.push_job(job)
    return uapi.CsOut(job.seq)


@ioctl_def(Request.WAIT_CS)
def wait_cs(kmd: "Kmd", file: "File", a: uapi.WaitCsArgs) -> uapi.WaitCsOut:
    ctx = file.ctx(a.ctx_id, "WAIT_CS")
    seq = _int("WAIT_CS", "seq", a.seq, 0, SEQ_MASK)
    timeout = _int("WAIT_CS", "timeout", a.timeout)
    if ctx.guilty:
        raise _guilty("WAIT_CS", ctx)
    if not ctx.submitted_seq(seq):
        last = f"last is {ctx.last_seq:#x}" if ctx.submitted else "nothing submitted yet"
        raise KmdError(errno.EINVAL, f"WAIT_CS: context {ctx.id} never submitted seqno {seq:#x} ({last})")
    job = ctx.jobs.get(seq)
    if job is None:
        e = ctx.failed.get(seq)
        if e is not None:  # it ended with an error (a reset cancelled it, or a dependency failed)
            raise KmdError(e.errno, f"WAIT_CS: {e.message}", e.info)
        return uapi.WaitCsOut(False)
    done = kmd.wait_for(lambda: job.finished, timeout)
    if job.error is not None:
        e = job.error
        raise KmdError(e.errno, f"WAIT_CS: {e.message}", e.info)
    if ctx.guilty:
        raise _guilty("WAIT_CS", ctx)
    if not done:
        if timeout == 0:
            return uapi.WaitCsOut(True)
        raise KmdError(errno.ETIME, f"WAIT_CS: seqno {seq:#x} of context {ctx.id} not signalled "
                       f"after {timeout} cycles")
    return uapi.WaitCsOut(False)


# ------------------------------------------------------------------------------ INFO

@ioctl_def(Request.INFO)
def info(kmd: "Kmd", file: "File", a: uapi.InfoArgs) -> Any:
    q = _int("INFO", "query", a.query, 0, 0xFFFF_FFFF)  # drm_amdgpu_info.query: a u32
    i = kmd.info
    if q == InfoQuery.FW_VERSION:
        return uapi.FwVersionInfo(uapi.KMD_NAME, uapi.KMD_VERSION, i.version)
    if q == InfoQuery.DEV_INFO:
        from spec import packets
        return uapi.DevInfo(
            backend=kmd.dev.name, hw_version=i.version, bus_bytes=i.bus_bytes, addr_bits=i.addr_bits,
            ib_levels=i.ib_levels, has_dma=i.has_dma, has_ih=i.has_ih, dma_max_bytes=i.dma_max_bytes,
            ring_size_dw=kmd.ring.size_dw, sdma_rings=1 if kmd.sdma_sched is not None else 0,
            max_ib_chunks=kmd.params.max_ib_chunks,
            ib_align_dw=kmd.params.ib_align_dw, max_ib_dw=MAX_IB_DW, max_job_dw=kmd.max_job_dw,
            max_job_ibs=kmd.params.max_job_ibs,
            packets=tuple(p.name for p in packets.PACKETS),
            va_start=file.vm.va_start, va_end=file.vm.va_end, va_alignment=PAGE, vm_levels=file.vm.levels)
    if q == InfoQuery.MEMORY:
        def heap(d: Domain) -> uapi.HeapInfo:
            h = kmd.bo.heaps[d]
            return uapi.HeapInfo(h.base, h.size, h.used, h.largest_free)
        return uapi.MemoryInfo(heap(Domain.VRAM), heap(Domain.GTT))
    if q == InfoQuery.VM_FAULT:
        kmd.service()  # a fault the interrupt has not been handled for yet
        return file.vm.fault or uapi.VmFaultInfo()
    if q == InfoQuery.COUNTERS:
        kmd.service()
        c = kmd.counters()
        return uapi.Counters(c["hw"], c["packets"], kmd.kmd_stats())
    raise KmdError(errno.EINVAL, f"INFO: unknown query {q} (known: "
                   f"{', '.join(f'{x.name} ({x.value:#x})' for x in InfoQuery)})")

