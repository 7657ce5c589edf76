"""An open render node (drm_file + amdgpu_fpriv): the BO handles, contexts and GPU address
space (VM) of one client. Everything a client owns is reachable from its File, so closing
it releases everything, and the CS checker's question "may this job touch that address?"
is "is the address mapped in the submitting context's File's VM?".
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING, Any

import numpy as np

from ..uapi import KmdError
from .ctx import Kept

if TYPE_CHECKING:
    from ..mm.bo import Bo
    from ..mm.vm import Vm
    from .ctx import Context
    from .kmd import Kmd


# the largest BO handle and context id: idr's (an int > 0: drm_gem_handle_create_tail's
# idr_alloc(.., 1, 0), amdgpu_ctx_alloc's), which fits the uAPI's u32 fields and a C int
ID_MAX = 0x7FFF_FFFF


def next_id(used: dict, start: int) -> int:
    """The id to hand out, as idr_alloc_cyclic: `start` or the first after it not in `used`,
    from 1 again after ID_MAX. Ids only grow until they wrap (a stale one is unknown, not a
    new object), and never name a live object: a file that creates and frees in a loop past
    ID_MAX went on to ID_MAX + 1, wider than the uAPI's u32 field (a C UMD's truncated copy
    named handle 0 or a live BO). `used` holds fewer than ID_MAX ids (the heaps bound BOs,
    MAX_CONTEXTS contexts), so the search ends; it steps over a run of live ids once a
    wrap (the next search starts after them), so a loop of creates costs O(1) each."""
    i = start
    while i in used:
        i = i % ID_MAX + 1
    return i


def lap_name(ident: str, lap: int) -> str:
    """How messages name an object given id `ident` in the ids' round `lap` (1: before any
    wrap): the id alone in the first round, `ident#lap` after. Ids wrap (next_id), so a
    closed BO jobs still hold and a new one can share a handle (a freed context's running
    jobs and a new context their id): (round, id) is one object, as ids only grow in a round."""
    return ident if lap == 1 else f"{ident}#{lap}"


def _is_int(v: Any) -> bool:
    """What the ioctls take as an integer argument (ioctl.dispatch._int's rule): a Python or numpy
    integer, not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


class File:
    def __init__(self, kmd: "Kmd", fd: int):
        self.kmd = kmd
        self.fd = fd
        self.handles: dict[int, "Bo"] = {}
        self.next_handle = 1
        # the ids' round (lap_name) and the id handed out last, of each kind
        self.handle_lap, self.last_handle = 1, 0
        self.contexts: dict[int, "Context"] = {}  # by id: the file's own ids, from 1 (Kmd.ctx_alloc)
        self.next_ctx_id = 1
        self.ctx_lap, self.last_ctx_id = 1, 0
        self.vm: "Vm" = None  # type: ignore[assignment]  # its GPU address space (Kmd.open)
        self.closed = False
        # may ask CTX ALLOC for above-NORMAL priorities, as a process with CAP_SYS_NICE (or the
        # DRM master) may on amdgpu; set from KmdParams.cap_sys_nice or open_render_node's
        # argument when the file is opened
        self.cap_sys_nice = False
        # may read the device-wide performance counters and driver statistics (INFO COUNTERS),
        # as a process with CAP_PERFMON may open a system-wide perf event; from
        # KmdParams.cap_perfmon or open_render_node's argument
        self.cap_perfmon = False
        self.ioctls = 0  # its own ioctls and their errors (INFO COUNTERS without cap_perfmon)
        self.ioctl_errors = 0
        self.hangs = 0  # resets its contexts' jobs caused, all of them
        # bytes of checked copies its CSs hold inside the ioctl, not yet in the shadow pool:
        # a check in progress, or one kept while its CS waits (Kmd.charge_copies)
        self.copies_held = 0
        self.banned: str | None = None  # why its contexts' CS and CTX ALLOC fail with EIO (RecoveryMixin._ban_file)
        self.error_logs: dict[str, list] = {}  # kind -> [since, logged, not logged]: RecoveryMixin._log_limited
        # what its contexts remember of their past jobs, bounded per file (ctx.Kept)
        self.kept_failed, self.kept_ring_of = Kept(), Kept()

    def ioctl(self, request: int, args: Any = None) -> Any:
        """Run one ioctl; returns its out-structure, raises KmdError on failure. Under the
        driver's lock (Kmd.lock): a client may call from any number of threads."""
        from ..ioctl.dispatch import copy_in_call, dispatch
        from .lock import kernel_stack
        from .signals import hold
        kmd = self.kmd
        p = kmd.params  # (fixed once bound: read outside the lock)
        with kernel_stack():  # (however deep the client called from: core/lock.py)
            # the client's code it may run runs outside the lock
            call = copy_in_call(request, args, p.max_ib_chunks + 1 + p.max_dep_chunks)
            if kmd.lock.owned():
                # client code run inside an ioctl or a close of this thread (a signal handler, a
                # garbage collector callback; core/signals.py): the outer call is halfway through
                # its change, and a kernel runs no client code there
                raise KmdError(errno.EDEADLK, f"{call.name}: made from inside another ioctl of this thread (a "
                                              "signal handler or a garbage-collector callback): the kernel runs no "
                                              "client code during an ioctl")
            with hold(), kmd.lock:
                try:
                    return dispatch(self, call)
                finally:
                    kmd.release_deferred()

    def elapse(self, cycles: int) -> None:
        """Not an ioctl: `cycles` of device time pass while the client runs outside the
        kernel, polling memory the GPU writes (umd's Event.signalled). On real hardware the
        GPU and the kernel's interrupt handler run beside a spinning CPU; here the device's
        time passes only inside the driver (a simulator's clock, the reference model's), so
        without this a loop reading a fence or a flag never saw the GPU move. Under the
        driver's lock, signals held, as an ioctl (the kernel's work must not be cut halfway);
        nothing on a closed file, or from inside an ioctl of this thread."""
        from ..ioctl.copyin import kernel_int
        from .lock import kernel_stack
        from .signals import hold
        # read once, as the ioctls' copy-in reads an argument (an int subclass's __int__ is the
        # client's: answering 5 to the check and 2**40 to the use, it ran the device 2**40
        # cycles, the client's signals held)
        n = kernel_int(cycles) if _is_int(cycles) else None
        if not isinstance(n, int) or not 0 <= n <= 1 << 32:  # (not an Opaque: its int() raised)
            raise ValueError(f"elapse: cycles must be an integer in [0, 2**32], not {cycles!r}")
        kmd = self.kmd
        with kernel_stack():
            if self.closed or kmd.lock.owned():
                return
            with hold(), kmd.lock:
                try:
                    kmd.elapse(n)
                finally:
                    kmd.release_deferred()

    # --------------------------------------------------------------- handles

    def add_bo(self, bo: "Bo") -> int:
        """A handle for `bo`, which it is named by in messages (lap_name): "fd3:2"."""
        h = next_id(self.handles, self.next_handle)
        if h <= self.last_handle:  # (wrapped: in a round the ids only grow)
            self.handle_lap += 1
        self.last_handle = h
        self.next_handle = h % ID_MAX + 1
        self.handles[h] = bo
        bo.name = lap_name(f"fd{self.fd}:{h}", self.handle_lap)
        return h

    def new_ctx_id(self) -> tuple[int, str]:
        """A context id and the name messages give that context (lap_name): "3", "3#2"."""
        i = next_id(self.contexts, self.next_ctx_id)
        if i <= self.last_ctx_id:
            self.ctx_lap += 1
        self.last_ctx_id = i
        self.next_ctx_id = i % ID_MAX + 1
        return i, lap_name(str(i), self.ctx_lap)

    def bo(self, handle: Any, who: str, err: int = errno.ENOENT) -> "Bo":
        """The BO behind `handle`; an unknown handle is `err` (ENOENT, as drm_gem_object_lookup
        callers answer; GEM_CLOSE and amdgpu's CS fence chunk answer EINVAL)."""
        bo = self.handles.get(int(handle)) if _is_int(handle) else None
        if bo is None:
            from ..ioctl.copyin import shown  # (a handle may be any value: shown safely)
            raise KmdError(err, f"{who}: no BO with handle {shown(handle)}")
        return bo

    def ctx(self, ctx_id: Any, who: str) -> "Context":
        ctx = self.contexts.get(int(ctx_id)) if _is_int(ctx_id) else None
        if ctx is None:
            from ..ioctl.copyin import shown
            raise KmdError(errno.EINVAL, f"{who}: no context {shown(ctx_id)} on this file")
        return ctx

    # --------------------------------------------------------------- lifetime

    def close(self) -> None:
        """Release every handle and context (the kernel does this when the fd closes)."""
        from .lock import kernel_stack
        with kernel_stack():  # (however deep the client called from: core/lock.py)
            self._close()

    def _close(self) -> None:
        kmd = self.kmd
        if kmd.lock.owned():
            # from client code run inside an ioctl or a close of this thread (core/signals.py):
            # the fd goes now, the release when that call returns, as the kernel's fput after
            # the ioctl that holds the file (a release here freed the page tables of a CS
            # halfway through queueing its job)
            with kmd.lock:
                if not self.closed:
                    self.closed = True
                    kmd.deferred_release.append(self)
            return
        from .signals import hold
        with hold(), kmd.lock:
            if self.closed:
                return
            # closed first, as close(2) takes the fd out of the table before the release: a
            # thread that finds one of its BO mappings revoked by this release (or any ioctl
            # made meanwhile) sees the file closed, never a live file without its memory
            self.closed = True
            try:
                try:
                    kmd.flush_file(self)  # (amdgpu_flush: its queued jobs go to the rings first)
                finally:
                    kmd.file_closed(self)
            finally:
                kmd.release_deferred()

    def __enter__(self) -> "File":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"File(fd {self.fd}, {len(self.handles)} BOs, {len(self.contexts)} contexts)"
