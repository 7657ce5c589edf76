"""The winsys's ioctls: thin wrappers over the KMD's (Mesa's amdgpu winsys + libdrm_amdgpu).

Everything the UMD asks of the kernel goes through here, as one `File.ioctl` call each;
the UMD never touches MMIO or the Device. `ioctls` counts the calls, so batching can be
measured from the UMD side too.
"""

from __future__ import annotations

import errno
import threading
from typing import Any

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import Request

from ..errors import OPEN_NEW_DEVICE, DeviceLost, UmdError

# what the UMD says of a Device whose file the driver closed under it (Winsys.lost)
DRIVER_CLOSED = ("this Device's file was closed by the driver: it was unloaded or reloaded (kmd_model.unbind, "
                 "kmd_model.rebind, or a bind of its device again or of another closes every open file)")

# The KMD model is one per process. It serialises its own ioctls (Kmd.lock, as a kernel
# driver does for any client); the UMD's ioctls also run under this lock, which keeps its
# count of them and lets a test hold the KMD from the UMD's side (tests/umd/submission/test_umd_async.py).
KMD_LOCK = threading.RLock()  # (re-entrant: a hook inside an ioctl may make another)


class Winsys:
    def __init__(self, file: Any = None):
        self.file = file if file is not None else kmd_model.open_render_node()
        self.ioctls = 0
        self.submitter = None  # the device's submission thread, once it has an async queue
        # why the kernel banned this file (file_ban_after_hangs), once the UMD has learnt it
        # (umd/failures/kmd_errors.py file_banned): a ban is for good, so it is asked once
        self.banned: str | None = None
        # on a backend only one thread may drive (the RTL under cocotb), the thread that
        # opened the device: an ioctl from another thread of the app is refused here, in the
        # app's words, before the simulator's bridge refuses it in the testbench's
        self.owner = threading.get_ident() if self.thread_bound() else None
        self.closed = False  # closed by the UMD (Device.close); the driver may close the file itself: lost()

    def lost(self) -> bool:
        """Did the driver close this file under the UMD (its unload or reload: kmd_model.rebind,
        unbind)? Then every ioctl is EBADF and every CPU mapping of its BOs is revoked."""
        return not self.closed and bool(getattr(self.file, "closed", False))

    def ioctl(self, request: Request, args: Any) -> Any:
        s = self.submitter
        if self.owner is not None and threading.get_ident() != self.owner and (
                s is None or threading.get_ident() != s.thread.ident):
            raise UmdError(f"{self.backend()}: the UMD runs on the thread that opened the device (the simulator is "
                           f"driven from there) and this call came from thread "
                           f"{threading.current_thread().name!r}: call it from the opening thread; "
                           "Device.queue(async_submit=True) submits in the background (API v3)")
        if s is not None:  # it decides which thread runs the ioctl (umd/submit.py)
            return s.ioctl(self._ioctl, request, args)
        return self._ioctl(request, args)

    def elapse(self, cycles: int) -> bool:
        """Let the device run `cycles` while the app polls memory (kmd_model's File.elapse):
        no ioctl, none counted. False when this thread may not drive the device (a simulator
        opened by another thread) or the file has no such entry. With a submission thread
        that hands its ioctls to the opening thread, that thread runs the queued flushes
        first (Submitter.ioctl), as it does before any ioctl of its own."""
        fn = getattr(self.file, "elapse", None)
        if fn is None or (self.owner is not None and threading.get_ident() != self.owner):
            return False

        def run(c: int) -> None:
            with KMD_LOCK:
                fn(c)

        s = self.submitter
        if s is not None:
            s.ioctl(run, cycles)
        else:
            run(cycles)
        return True

    def backend(self) -> str:
        kmd = getattr(self.file, "kmd", None)
        return str(getattr(getattr(kmd, "dev", None), "name", "this backend"))

    def _ioctl(self, request: Request, args: Any) -> Any:
        with KMD_LOCK:
            while True:
                self.ioctls += 1
                try:
                    return self.file.ioctl(request, args)
                except uapi.KmdError as e:
                    if e.errno == errno.EBADF and self.lost():  # (was the KMD's EBADF, "the file is closed")
                        raise DeviceLost(f"{request.name}: {DRIVER_CLOSED}: {OPEN_NEW_DEVICE}") from e
                    # a wait the KMD ended for a signal whose handler did not raise: made
                    # again, as libdrm's drmIoctl does on EINTR (kmd_model/core/signals.py)
                    if e.errno != errno.EINTR:
                        raise

    def thread_bound(self) -> bool:
        """Must the KMD run on the thread that opened the device? True on a backend that
        only one thread may drive (the RTL under cocotb: `Device.thread_bound`)."""
        kmd = getattr(self.file, "kmd", None)
        return bool(getattr(getattr(kmd, "dev", None), "thread_bound", False))

    # -- GEM
    def gem_create(self, size: int, domain: int, alignment: int) -> uapi.GemCreateOut:
        return self.ioctl(Request.GEM_CREATE, uapi.GemCreateArgs(size, alignment, domain))

    def gem_close(self, handle: int) -> None:
        self.ioctl(Request.GEM_CLOSE, uapi.GemCloseArgs(handle))

    def gem_mmap(self, handle: int) -> uapi.GemMmapOut:
        return self.ioctl(Request.GEM_MMAP, uapi.GemMmapArgs(handle))

    def gem_va(self, handle: int, op: int, va: int, size: int, flags: int, offset: int = 0) -> None:
        self.ioctl(Request.GEM_VA, uapi.GemVaArgs(handle, op, va, offset, size, flags))

    # -- contexts
    def ctx_alloc(self, priority: int = 0) -> int:
        return self.ioctl(Request.CTX, uapi.CtxArgs(uapi.CtxOp.ALLOC, priority=priority)).ctx_id

    def ctx_free(self, ctx_id: int) -> None:
        self.ioctl(Request.CTX, uapi.CtxArgs(uapi.CtxOp.FREE, ctx_id))

    def ctx_query(self, ctx_id: int) -> uapi.CtxOut:
        """CTX QUERY_STATE (amdgpu's QUERY_STATE2): what resets did to the context, its flags."""
        return self.ioctl(Request.CTX, uapi.CtxArgs(uapi.CtxOp.QUERY_STATE, ctx_id))

    # -- submission
    def cs_submit(self, ctx_id: int, chunks: list) -> int:
        return self.ioctl(Request.CS, uapi.CsArgs(ctx_id, chunks)).seq

    def wait_cs(self, ctx_id: int, seq: int, timeout: int) -> bool:
        """True when signalled; raises KmdError ETIME when a wait with timeout > 0 expires."""
        return not self.ioctl(Request.WAIT_CS, uapi.WaitCsArgs(ctx_id, seq, timeout)).busy

    # -- INFO
    def query(self, query: uapi.InfoQuery) -> Any:
        return self.ioctl(Request.INFO, uapi.InfoArgs(query))

    def close(self) -> None:
        self.closed = True
        self.file.close()
