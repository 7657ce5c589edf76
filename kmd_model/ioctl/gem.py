"""GEM: buffer objects (amdgpu_gem.c): GEM_CREATE, GEM_CLOSE, GEM_MMAP, GEM_WAIT_IDLE."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

import numpy as np

from .. import uapi
from ..uapi import Domain, GemFlags, KmdError, Request
from .copyin import hexed
from .dispatch import _int, ioctl_def

if TYPE_CHECKING:
    from ..core.file import File
    from ..core.kmd import Kmd


@ioctl_def(Request.GEM_CREATE)
def gem_create(kmd: "Kmd", file: "File", a: uapi.GemCreateArgs) -> uapi.GemCreateOut:
    if kmd.wedged:  # the device is lost: no new memory (reset/recovery.py wedge), as CS
        raise KmdError(errno.EIO, f"GEM_CREATE: {kmd.wedged}")
    size = _int("GEM_CREATE", "size", a.size, 1)
    align = _int("GEM_CREATE", "alignment", a.alignment)
    if align & (align - 1):
        raise KmdError(errno.EINVAL, f"GEM_CREATE: alignment must be 0 or a power of two, not {align:#x}")
    d = a.domain
    is_int = isinstance(d, (int, np.integer)) and not isinstance(d, bool)
    if not is_int or int(d) not in (Domain.VRAM, Domain.GTT):
        raise KmdError(errno.EINVAL, f"GEM_CREATE: domain must be VRAM ({Domain.VRAM:#x}) or GTT "
                       f"({Domain.GTT:#x}), not {hexed(int(d)) if is_int else repr(d)}")
    flags = _int("GEM_CREATE", "flags", a.flags)
    unknown = flags & ~sum(GemFlags)
    if unknown:
        raise KmdError(errno.EINVAL, f"GEM_CREATE: unknown flags {unknown:#x}")
    bo = kmd.bo.create(size, align, Domain(int(d)), flags, file, who="GEM_CREATE")
    # Every BO a client gets is zero-filled, whatever the flags: memory comes back from
    # other clients (and from the kernel), and what they left there is not the new owner's.
    kmd.dev.mem[bo.gpu_addr:bo.end] = 0
    handle = file.add_bo(bo)  # (names it: "fd3:2")
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
    return uapi.GemMmapOut(kmd.map_bo(bo), bo.size)


@ioctl_def(Request.GEM_WAIT_IDLE)
def gem_wait_idle(kmd: "Kmd", file: "File", a: uapi.GemWaitIdleArgs) -> uapi.GemWaitIdleOut:
    bo = file.bo(a.handle, "GEM_WAIT_IDLE")
    timeout = _int("GEM_WAIT_IDLE", "timeout", a.timeout)
    kmd.wait_unlocked(lambda: not bo.busy, timeout)  # other clients' ioctls run meanwhile
    return uapi.GemWaitIdleOut(bo.busy)
