"""CS: a submission (amdgpu_cs_ioctl): its chunks checked, the job checked and copied (cs/), queued
on its ring's scheduler."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from .. import uapi
from ..core.file import _is_int
from ..core.kmd import MAX_IB_DW
from ..cs.checker import CheckAgain
from ..cs.shadow import ShadowWait
from ..sched.fence import SEQ_MASK
from ..sched.scheduler import FailedDep, Job, ring_dw
from ..uapi import HW_IP_NUM, CsChunkDep, CsChunkFence, CsChunkIb, HwIp, KmdError, Request, VmFlags
from .copyin import LongList
from .ctx import _guilty
from .dispatch import _int, ioctl_def

if TYPE_CHECKING:
    from ..core.file import File
    from ..core.kmd import Kmd


def _ring(kmd: "Kmd", who: str, ip_type, ip_instance, ring):
    """The scheduler a (HW IP type, instance, ring) names (amdgpu_ctx_get_entity); EINVAL
    for anything this device does not have."""
    ip = _int(who, "ip_type", ip_type)
    if ip >= HW_IP_NUM:
        raise KmdError(errno.EINVAL, f"{who}: ip_type {ip} is not a HW IP type (0..{HW_IP_NUM - 1})")
    inst = _int(who, "ip_instance", ip_instance)
    if inst:  # amdgpu: "Right now all IPs have only one instance"
        raise KmdError(errno.EINVAL, f"{who}: ip_instance must be 0 (every HW IP has one instance), not {inst}")
    r = _int(who, "ring", ring)
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


class CsPrep:
    """What a CS's dependency chunks say, worked out of the kernel's copy of its arguments
    before the driver's lock is taken (IoctlDesc.prepare): for each chunk of plain, valid
    integers its ring, context and seqno as plain ints (`deps[i]`: ((ip_type, ring, ctx_id),
    seq)), DUP for one naming what a chunk before it named (the same lookup, the same
    answer), None for every other chunk (looked at under the lock, as any chunk was: its
    error, if it has one, is the one it always had). The copy is the kernel's, which no one
    changes: nothing here is read from the client again. Under the lock a chunk of plain
    ints then costs a dictionary lookup or two (_cs): each chunk's checks and
    keys were made there, 1,024 of them 34 to 56 ms of the lock a CS on a loaded machine."""

    __slots__ = ("deps", "n_deps")

    DUP = ()

    def __init__(self, deps: list, n_deps: int):
        self.deps = deps
        self.n_deps = n_deps


def prepare_cs(a: uapi.CsArgs) -> CsPrep | None:
    """The CsPrep of a copied-in CS (None: its chunk list is not one, the CS refuses it)."""
    chunks = a.chunks
    if type(chunks) is not list:
        return None
    deps: list = [None] * len(chunks)
    seen: set = set()
    n_deps = 0
    for i, ch in enumerate(chunks):
        if type(ch) is not CsChunkDep:
            continue
        n_deps += 1
        ip, inst, ring, ctx_id, seq = ch.ip_type, ch.ip_instance, ch.ring, ch.ctx_id, ch.handle
        # plain ints as the checks under the lock would take them (an enum ip_type is its
        # int; a bool, None or Opaque is left to them, as is any value they refuse)
        if not ((type(ip) is int or type(ip) is HwIp) and 0 <= ip < HW_IP_NUM and type(inst) is int and inst == 0
                and type(ring) is int and 0 <= ring and not ring >> 64 and type(ctx_id) is int
                and type(seq) is int and 0 <= seq <= SEQ_MASK):
            continue
        key = ((int(ip), ring, ctx_id), seq)
        if key in seen:
            deps[i] = CsPrep.DUP
        else:
            seen.add(key)
            deps[i] = key
    return CsPrep(deps, n_deps)


def _target(kmd: "Kmd", file: "File", who: str, ip_type, ip_instance, ring, ctx_id):
    """The (scheduler, context) a dependency chunk's ring and context name."""
    sched = _ring(kmd, who, ip_type, ip_instance, ring)
    dctx = file.ctx(ctx_id, who)  # amdgpu: an unknown context is EINVAL
    return kmd.sched_for(sched, dctx), dctx  # (its gfx jobs may run on the high-priority queue)


def _plain_target(kmd: "Kmd", file: "File", i: int, tkey: tuple) -> tuple:
    """What chunk `i` of plain ints (CsPrep) needs of the ring and context it names, `tkey`
    (ip_type, ring, ctx_id), looked up once a CS (nothing changes under the lock meanwhile):
    (scheduler, context, the context's jobs, their ring, its last seqno, and the span of
    seqnos before it that Context.submitted_seq takes)."""
    ip, ring, ctx_id = tkey
    sched, dctx = _target(kmd, file, f"CS: chunk {i}", ip, 0, ring, ctx_id)
    return sched, dctx, dctx.jobs, sched.ring, dctx.last_seq, min(dctx.submitted, 0x8000_0001)


def _dependency(kmd: "Kmd", file: "File", who: str, ch: CsChunkDep):
    """The unfinished job a dependency chunk names, or None when it has finished already."""
    sched, dctx = _target(kmd, file, who, ch.ip_type, ch.ip_instance, ch.ring, ch.ctx_id)
    return _job_of(who, sched, dctx, _int(who, "handle", ch.handle, 0, SEQ_MASK))


def _job_of(who: str, sched, dctx, seq: int):
    """The unfinished job `seq` of `dctx` on `sched`'s ring, None when it finished already (a
    FailedDep when it failed)."""
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
        return None if e is None else FailedDep(dctx.name, seq, e)  # (finished well: nothing to wait for)
    return job


def _may_submit(kmd: "Kmd", ctx) -> None:
    """A guilty context's CS is ECANCELED; a banned one's, or any on a wedged device, EIO."""
    if ctx.guilty:
        raise _guilty("CS", ctx)
    if kmd.wedged:
        raise KmdError(errno.EIO, f"CS: {kmd.wedged}")
    if ctx.banned:
        raise KmdError(errno.EIO, f"CS: {ctx.banned}")


def _wait_prev_job(kmd: "Kmd", ctx, sched, wait: ShadowWait, park) -> bool:
    """amdgpu_ctx_wait_prev_fence: a context has at most `sched_jobs` unfinished jobs on a
    ring; a CS past them waits for the oldest (a context queued without bound: about 1.4 KB
    a job, and with the checker off nothing else bounded it). The wait ends: a job that
    never finishes is reset by the job timer: its queue's reset cancels the context's jobs
    there (the CS then goes on), a full reset makes the context guilty (ECANCELED).
    It lets other clients' ioctls in (Kmd.wait_unlocked: it held the driver's lock, and one
    client holding the CP stopped every other's ioctls until its reset). True when it
    waited: the CS then looks at everything again. Called once every check has passed (cs);
    `park()` before the wait (the CS's check kept through it, or dropped: Kmd.park_check)."""
    limit = kmd.params.sched_jobs
    if len(ctx.jobs) < limit:
        return False
    mine = [j for j in ctx.jobs.values() if j.ring is sched.ring]
    if len(mine) < limit:
        return False
    oldest = mine[0]  # (ctx.jobs is in submission order)
    kmd.shadow.leave(wait.ticket)  # (first in the pool's queue, it would hold every CS behind it meanwhile)
    wait.ticket = None
    park()
    kmd.wait_unlocked(lambda: oldest.finished, kmd.params.job_timeout)
    return True


def _check(kmd: "Kmd", file: "File", ctx, ibs: list, arrays: tuple, wait: ShadowWait):
    """The checker's copies of the job's IBs, or None when the check handed the driver's lock
    to other threads on the way: then kept in `wait` (if the file's mappings did not change
    meanwhile) for the CS's next attempt, which looks up everything else again. A check
    takes up to a second (`max_job_dw` dwords of one-dword packets, refused at the last),
    which the client may ask for again and again: held all along, the lock kept every other
    client's ioctls out for that long each time (core/lock.py, cs/checker.py). `arrays`: the
    file's mappings (Vm.lookup_arrays()) as the check begins."""
    lock, vm = kmd.lock, file.vm
    yielded = False

    def pause() -> bool:
        nonlocal yielded
        if lock.depth != 1 or not lock.waiters:
            return False
        if not kmd.check_slot(wait):  # (the device's checks holding copies over a hand-over: full)
            raise CheckAgain()
        lock.yield_to_waiters()
        yielded = True
        if file.closed:
            raise CheckAgain()
        return True
    try:
        checked = kmd.checker.check(ctx, ibs, vm, pause, lambda n: kmd.charge_copies(file, wait, n))
    except CheckAgain:
        if wait.wants_slot:
            wait.release()  # (no slot: it waits for one holding nothing, _cs)
        return None  # (its copies so far stay charged until the next attempt's check: _cs)
    finally:
        kmd.check_slot_release(wait)
    if yielded:  # (the mappings are still `arrays`: each pause that let others in made sure)
        wait.keep_check(ctx, ibs, arrays, checked)
        return None
    return checked


@ioctl_def(Request.CS, prepare=prepare_cs)
def cs(kmd: "Kmd", file: "File", a: uapi.CsArgs, prep: CsPrep | None = None) -> uapi.CsOut:
    # A CS that waited for its context's oldest job, or whose check let other ioctls in, let
    # them run meanwhile (of other threads of this client too): nothing it looked up is
    # trusted after, it starts again from its arguments (the kernel's copy, which no one
    # changes), with its check kept while the file's mappings are as they were.
    wait = ShadowWait()  # its place among the CSs waiting for room in the shadow pool, its check
    try:
        while True:
            kmd.unpark(wait)  # (its check, if kept through a wait, is in use again)
            out = _cs(kmd, file, a, wait, prep)
            if out is not None:
                return out
            if file.closed:
                raise KmdError(errno.EBADF, "CS: the file was closed while the CS waited")
    finally:
        kmd.shadow.leave(wait.ticket)
        kmd.check_slot_release(wait)  # (a slot taken for a check the CS did not reach)
        kmd.unpark(wait)
        wait.release()  # (its copies are in the pool now, or dropped: no longer the file's to count)


def _cs(kmd: "Kmd", file: "File", a: uapi.CsArgs, wait: ShadowWait, prep: CsPrep | None) -> uapi.CsOut | None:
    """One attempt at a CS; None when it waited for a slot of its context or for room in the
    shadow pool, or its check let other ioctls in (see cs). `prep`: its CsPrep."""
    ctx = file.ctx(a.ctx_id, "CS")
    kmd.service()
    _may_submit(kmd, ctx)
    # every dependency is a lookup under the KMD's lock (amdgpu bounds a CS by its chunk
    # array's allocation): counted before any of them is looked up; a list longer than any
    # CS may carry was not even copied in (copyin.LongList)
    p = kmd.params
    most = p.max_ib_chunks + 1 + p.max_dep_chunks
    if isinstance(a.chunks, LongList):
        n = a.chunks.n
    elif isinstance(a.chunks, (list, tuple)):
        n = len(a.chunks)
    else:
        raise KmdError(errno.EINVAL, f"CS: chunks must be a list, not {a.chunks.kind}")
    if n > most:
        raise KmdError(errno.EINVAL, f"CS: {n} chunks, more than the {most} a CS may carry "
                       f"({p.max_ib_chunks} IB, 1 fence, {p.max_dep_chunks} dependency)")
    n_deps = prep.n_deps if prep is not None else sum(1 for ch in a.chunks if isinstance(ch, CsChunkDep))
    if n_deps > p.max_dep_chunks:
        raise KmdError(errno.EINVAL, f"CS: {n_deps} dependency chunk{'s' * (n_deps != 1)}, more than the {p.max_dep_chunks} a CS may "
                       "carry (DEV_INFO.max_dep_chunks)")
    ibs: list[tuple[int, int]] = []
    user_fence = None
    uf_bo = None
    sched = None
    deps = []
    targets: dict[tuple, tuple] = {}  # (scheduler, context) of the rings and contexts they name
    plain = prep.deps if prep is not None else [None] * n
    dup = CsPrep.DUP
    for i, ch in enumerate(a.chunks):
        key = plain[i]
        if key is not None:  # a dependency chunk of plain ints (CsPrep)
            if key is dup:
                continue  # (as a chunk before it, which was looked up)
            tkey, seq = key
            t = targets.get(tkey)
            if t is None:
                t = targets[tkey] = _plain_target(kmd, file, i, tkey)
            job = t[2].get(seq)
            # a job in flight of the context on that ring, one it handed out (Context.submitted_seq:
            # not after its last, and within what it handed out): that job, nothing more to check
            if job is not None and job.ring is t[3] and (t[4] - seq) & SEQ_MASK < t[5]:
                deps.append(job)
                continue
            dep = _job_of(f"CS: chunk {i}", t[0], t[1], seq)
            if dep is not None:
                deps.append(dep)
            continue
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
            # handle 0 is "by gpu_addr"; any other value names a BO: None, False or a str too, an
            # unknown handle (ENOENT), as in every other chunk and ioctl (they ran by gpu_addr)
            by_handle = not (_is_int(ch.handle) and ch.handle == 0)
            if by_handle and ch.gpu_addr is not None and _is_int(ch.handle):
                raise KmdError(errno.EINVAL, f"{who}: give a BO handle or a gpu_addr, not both")
            if by_handle:
                bo = file.bo(ch.handle, who)
                off = _int(who, "offset", ch.offset)
                if off & 3:
                    raise KmdError(errno.EINVAL, f"{who}: offset must be dword aligned, not {off:#x}")
                if off + 4 * n > bo.size:
                    raise KmdError(errno.EINVAL, f"{who}: IB at offset {off:#x}+{4 * n:#x} runs past the "
                                   f"end of BO {ch.handle} ({bo.size:#x} bytes)")
                # the BO's own mappings (Vm.maps_of), not all of the file's: a scan of every
                # mapping for each of 64 IB chunks, under the driver's lock, made a client with
                # thousands of mappings delay every other client's ioctl
                at = [m for m in file.vm.maps_of(bo) if m.offset <= off < m.offset + m.size]
                if not at:
                    raise KmdError(errno.EINVAL, f"{who}: BO {ch.handle} is not mapped at offset {off:#x} "
                                   "in the file's VM (GEM_VA)")
                # a BO may be mapped at several VAs: the IB runs from one it lies inside, EXECUTABLE,
                # when there is one (the first by address was taken, and a reader's mapping of the
                # BO, or one ending before the IB, had the CS refused while the BO was mapped
                # executable, whole, elsewhere); else the first, whose refusal the checker words
                m = next((m for m in at if off + 4 * n <= m.offset + m.size and m.flags & VmFlags.EXECUTABLE), at[0])
                addr = m.va + off - m.offset
            elif ch.gpu_addr is not None:
                addr = _int(who, "gpu_addr", ch.gpu_addr, 0, (1 << kmd.info.addr_bits) - 1)  # the bus's
                if addr & 3:
                    raise KmdError(errno.EINVAL, f"{who}: gpu_addr must be dword aligned, not {addr:#x}")
                # the offset is into the handle's BO: by gpu_addr it was ignored, whatever it held,
                # and the IB ran from gpu_addr, not gpu_addr + offset as a UMD may have meant
                off = _int(who, "offset", ch.offset)
                if off:
                    raise KmdError(errno.EINVAL, f"{who}: offset {off:#x} is into the BO of an IB by handle: "
                                   "an IB by gpu_addr takes none (0)")
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
                raise KmdError(errno.EINVAL, f"{who}: an IB at {addr:#x}+{4 * n:#x} reaches into the kernel's "
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
            # one CsPrep left out (not all plain ints, or one its checks refuse): looked at
            # whole, its ring and context looked up again
            dep = _dependency(kmd, file, who, ch)
            if dep is not None:
                deps.append(dep)
        else:
            raise KmdError(errno.EINVAL, f"{who} is a {ch.kind}, not a CsChunkIb, CsChunkFence or "
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
        arrays = vm.lookup_arrays()  # (the mappings the check reads: a new tuple at each change)
        try:
            checked = wait.kept_check(ctx, ibs, arrays)
            if checked is None:
                wait.release()  # (a check kept for other chunks or mappings, or cut short: its bytes)
                if wait.wants_slot:  # (its last check found no slot: Kmd.check_slot)
                    kmd.wait_check_slot(file, wait)
                    return None  # (others ran: the CS starts again, with its slot)
                checked = _check(kmd, file, ctx, ibs, arrays, wait)
                if checked is None:
                    return None  # (it let other ioctls in: the CS starts again, its check kept)
            kmd.shadow_too_big(checked)
        except KmdError:
            kmd.stats["cs_rejected"] += 1
            raise
    # Every refusal comes before the waits, as amdgpu_cs_sync_rings's amdgpu_ctx_wait_prev_fence
    # follows amdgpu_cs_patch_ibs: a bad CS behind its context's 32 jobs was refused only
    # once the oldest of them had finished, or been reset a job timeout later.
    def park() -> None:
        # before a wait: the check kept through it while the device's parked copies allow,
        # else dropped (made again after it); held by this frame, it was kept in any case
        nonlocal checked
        if checked is not None:
            kmd.park_check(wait, ctx, ibs, arrays, checked)
            checked = None
    if _wait_prev_job(kmd, ctx, sched, wait, park):
        return None
    if checked is not None:
        try:
            addr = kmd.shadow_alloc(checked, wait, file, park)
        except KmdError:
            kmd.stats["cs_rejected"] += 1
            raise
        if addr is None:
            # it waited for room, other ioctls meanwhile (a reset may have made the context
            # guilty): the CS starts again, _may_submit first; an address means no wait since
            return None
        ring_ibs = kmd.checker.place(checked, addr, kmd.shadow_va(addr))
        kmd.stats["cs_shadow_bytes"] += checked.shadow_bytes
    # Every BO mapped in the VM (and its page tables) stays allocated while the job may run:
    # the job can reach all of them (amdgpu's VM reservation holds the job's fence). It holds
    # them by its VM's generation (Vm.job_started), not a copy of the set (Vm.bos()): one a
    # job grew with the file's BOs, and a file may queue a hundred thousand jobs.
    bos = {uf_bo} if uf_bo is not None else set()
    job = Job(ctx, ctx.next_seq(), ring_ibs, user_fence, bos, checked=checked, vm=vm)
    for bo in bos:
        bo.busy_jobs += 1
    job.gen = vm.job_started()
    job.set_deps(deps)
    kmd.stats["cs"] += 1
    ctx.submitted_on(job.seq, sched.ring.name)
    sched.push_job(job)
    return uapi.CsOut(job.seq)
