"""GEM_VA: a file's GPU address space (amdgpu_gem_va_ioctl): MAP, UNMAP, CLEAR, REPLACE."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from .. import uapi
from ..mm.vm import PAGE
from ..uapi import KmdError, Request, VaOp, VmFlags
from .dispatch import _int, ioctl_def

if TYPE_CHECKING:
    from ..core.file import File
    from ..core.kmd import Kmd


_AGAIN = object()  # the handler waited, letting other ioctls in: it starts again


@ioctl_def(Request.GEM_VA)
def gem_va(kmd: "Kmd", file: "File", a: uapi.GemVaArgs) -> None:
    """amdgpu_gem_va_ioctl: map a range of a BO into the file's VM, or unmap. Every argument
    is checked before anything changes; a range that loses or changes entries has the TLB
    invalidated before the ioctl returns (the BOs stay allocated while jobs may use them).
    A MAP or REPLACE over closed BOs still in use waits for them without the driver's lock
    (it held it, and a client whose job held the CP stopped every other client's ioctls),
    then looks at everything again."""
    deadline: list[int] = []  # when the wait for closed BOs gives up (2 * job_timeout after it began)
    while True:
        out = _gem_va(kmd, file, a, deadline)
        if out is not _AGAIN:
            return out
        if file.closed:
            raise KmdError(errno.EBADF, "GEM_VA: the file was closed while the GEM_VA waited for its closed BOs' jobs")


def _gem_va(kmd: "Kmd", file: "File", a: uapi.GemVaArgs, deadline: list[int]):
    who = "GEM_VA"
    op = _int(who, "operation", a.operation, 0)
    if op not in set(VaOp):
        raise KmdError(errno.EINVAL, f"{who}: operation must be MAP (1), UNMAP (2), CLEAR (3) or REPLACE (4), "
                       f"not {op}")
    op = VaOp(op)
    if kmd.wedged and op in (VaOp.MAP, VaOp.REPLACE):  # (they may make page tables: reset/recovery.py wedge)
        raise KmdError(errno.EIO, f"{who}: {kmd.wedged}")
    flags = _int(who, "flags", a.flags, 0)
    unknown = flags & ~sum(VmFlags)
    if unknown:
        raise KmdError(errno.EINVAL, f"{who}: unknown flags {unknown:#x}")
    vm = file.vm
    va = _int(who, "va_address", a.va_address, 0)
    # amdgpu_gem_va_ioctl's order: the range (map_size too, whatever the operation) before the
    # handle is looked up, the handle (ENOENT) before the operation's own checks (alignment, a
    # size of 0, the BO's end: amdgpu_vm_bo_map's EINVAL). A MAP with an unknown handle and a
    # map_size of 0 was EINVAL, with a range outside the VM ENOENT: amdgpu answers those
    # ENOENT and EINVAL (tests/security/memory/test_security_mm_state.py)
    size = _int(who, "map_size", a.map_size, 0)
    if va < vm.va_start or va + size > vm.va_end:
        raise KmdError(errno.EINVAL, f"{who}: [{va:#x}, {va + size:#x}) is outside the VM's range "
                       f"[{vm.va_start:#x}, {vm.va_end:#x})")
    if op == VaOp.CLEAR:
        # its value is ignored (amdgpu's CLEAR looks no handle up), but it is the C struct's
        # u32: a value of the wrong type, or wider, is EINVAL, as any field (it was taken)
        _int(who, "handle", a.handle, bits=32)
        bo = None
    else:
        bo = file.bo(a.handle, who)
    if op != VaOp.MAP and op != VaOp.REPLACE:
        _int(who, "offset_in_bo", a.offset_in_bo)  # (unused by UNMAP and CLEAR, but a u64 all the same)
    if op == VaOp.UNMAP:
        # (map_size, 0 or more, only bounds the range check above, as amdgpu's)
        m = vm.find(va)
        if m is None or m.va != va or m.bo is not bo:
            raise KmdError(errno.ENOENT, f"{who}: no mapping of BO {a.handle} starts at {va:#x}")
        vm.unmap(m)
        try:
            kmd.vmids.flush_vm(vm, m.va, m.size, (m.bo,))
        finally:  # (its jobs in a ring may have writes to it under way: they hold it)
            kmd.hold_for_jobs_in_rings(vm, (m.bo,))
        return None
    size = _int(who, "map_size", size, 1)
    offset = _int(who, "offset_in_bo", a.offset_in_bo, 0) if op != VaOp.CLEAR else 0
    if (va | size | offset) & (PAGE - 1):
        raise KmdError(errno.EINVAL, f"{who}: va_address {va:#x}, offset_in_bo {offset:#x} and map_size {size:#x} "
                       f"must be multiples of the page size ({PAGE:#x})")
    if bo is not None and offset + size > bo.size:
        raise KmdError(errno.EINVAL, f"{who}: offset_in_bo {offset:#x} + map_size {size:#x} runs past the end of "
                       f"BO {a.handle} ({bo.size:#x} bytes)")
    if op == VaOp.MAP:
        # a live BO's mapping in the range: refused before any wait for closed BOs' jobs (a MAP
        # over a closed BO's range and a live one's waited up to 2 * job_timeout, then was
        # refused for the live one all the same)
        taken = [m for m in vm.overlapping(va, size) if not m.bo.closed]
        if taken:
            raise _overlaps(kmd, who, va, size, taken[0])
    if op in (VaOp.MAP, VaOp.REPLACE):
        # BOs closed while jobs used them keep their mappings until those jobs are done;
        # a client reusing the range waits for that, as amdgpu's implicit sync would
        gone = [m.bo for m in vm.overlapping(va, size) if m.bo.closed]
        if gone:
            if not deadline:
                deadline.append(kmd.dev.now() + 2 * kmd.params.job_timeout)
            left = deadline[0] - kmd.dev.now()
            if left > 0:  # (run out: the range is taken, as before)
                kmd.wait_unlocked(lambda: all(b.freed for b in gone), left)
                return _AGAIN
    if op == VaOp.MAP:
        taken = vm.overlapping(va, size)
        if taken:  # (a closed BO's, still used when the wait above gave up)
            raise _overlaps(kmd, who, va, size, taken[0])
    if op in (VaOp.MAP, VaOp.REPLACE):
        vm.reserve(va, size)  # the last thing that can fail: nothing has changed yet
    if op in (VaOp.CLEAR, VaOp.REPLACE):
        cut = {m.bo for m in vm.overlapping(va, size)}
        if vm.clear(va, size):
            try:
                kmd.vmids.flush_vm(vm, va, size, cut)
            finally:
                kmd.hold_for_jobs_in_rings(vm, cut)
    if op in (VaOp.MAP, VaOp.REPLACE):
        vm.map(bo, offset, va, size, flags)
    return None


def _overlaps(kmd: "Kmd", who: str, va: int, size: int, t) -> KmdError:
    """A MAP's range overlaps mapping `t`. A closed BO's says so (its jobs still ran when the
    wait for them gave up): the client closed that BO, and a bare "overlaps" read as a bug of
    its own bookkeeping."""
    why = (f" (closed; its jobs still ran {2 * kmd.params.job_timeout} cycles (2 * job_timeout) after "
           "the GEM_VA began waiting for them)" if t.bo.closed else "")
    return KmdError(errno.EINVAL, f"{who}: [{va:#x}, {va + size:#x}) overlaps the mapping "
                    f"[{t.va:#x}, {t.end:#x}) of {t.bo.name}{why}")  # (GEM_CREATE named it)
