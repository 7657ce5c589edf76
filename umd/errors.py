"""What the UMD raises. Argument mistakes are ValueError / TypeError with a message naming
the call and the argument (checked before anything reaches the KMD); failures of the
device are the classes below. Every one pickles with its attributes (multiprocessing and
concurrent.futures carry a worker's exception back by pickle): UmdError.__reduce__."""

from __future__ import annotations

import errno as _errno

from kmd_model.uapi import HwErrorInfo


# what an error the Device's file's ban explains ends with, after the kernel's words why
OPEN_NEW_DEVICE = "nothing of this Device runs any more: open a new Device (umd.open())"


class UmdError(RuntimeError):
    """Base of the UMD's runtime errors."""

    def __reduce__(self):
        # Python rebuilds an exception as cls(*self.args), but a subclass's __init__ may take
        # other arguments than the message args holds (SubmitError(errno, message),
        # GpuError(info, ...)): each says which (_init_args); the attributes (and add_note's
        # __notes__) come back from __dict__.
        return type(self), self._init_args(), self.__dict__

    def _init_args(self) -> tuple:
        return self.args


class GpuError(UmdError):
    """The GPU stopped on this queue's work (a CP error or a hang the KMD reset), or on a
    job of another queue that this queue's waited for (`waited_for`: its job was cancelled).

    The message names what the hardware reported: "illegal opcode 0x7b at IB+0x40
    (0x201040), context 3", plus the API call that recorded the packet when the UMD still
    knows it. Attributes: `code` (e.g. "ILLEGAL_OPCODE", "VM_FAULT", "TIMEOUT"), `opcode`
    and `opcode_name` (the packet's), `ib_offset` (the packet's offset in its IB), `addr`
    (the address the GPU latched, CP_ERROR_ADDR: a fault's is the access's, e.g. the
    unmapped address a write reached; any other error's the packet's own), `context` (the
    KMD context), `info` (the KMD's decoded error all told: code, level, opcode,
    opcode_name, offset, addr, ctx_id, seq), `command` (e.g. "Queue.emit_raw() #3") or None,
    `hint` what that call adds, or None (emit_raw's dwords of the other engine: "its first
    dword 0xc0053700 is a PM4 WRITE_DATA header, and a copy queue runs SDMA packets ...").
    A fault (VM_FAULT, a bus error) latches the access's address, not the packet's: the
    UMD finds the packet at IB+offset in the failed submission's IBs; when it cannot, the
    message says why (`unnamed`: the kernel's ring, an IB2 of the app's own, chained IBs
    with packets at that offset from more than one call).

    A queue whose error took a reset of the whole GPU (a ring's reset of its queue alone that
    failed, or a gfx error on a CP without CP_QUEUE_RESET) stays
    failed (the kernel's guilty context, as amdgpu's): its later flushes raise the same
    error again, with `refused` True and the message saying so; a new queue
    (Device.queue()) of the same device runs as before, unless the Device's whole file is
    banned (`file_banned`: the kernel's words why; see DeviceLost), which the message then
    says instead. A queue whose ring was reset alone (every ring's first step: the gfx
    ring's CP queue 0, the high-priority gfx ring's CP queue 1, the copy engine's)
    loses only the failed work. Either way the error is raised once, at the queue's first
    flush, finish, Event.wait (of an event after the failed job) or close after the failure
    (umd/failures/failed_jobs.py); a job of this queue cancelled because one it waited for failed
    likewise (`waited_for`). Several failed jobs that call finds are raised together: the
    oldest as the exception, each other as a note of it ("and: GpuError: ...", in
    `__notes__`), as close() raises several errors; so are an async queue's refused
    flushes pending with them (SubmitError, QueueBanned ...), in the order of their
    flushes. A write or Device.alloc that waits for room and meets a failed job raises it
    with the rest its queue has pending. Not carried: a GpuTimeout or OutOfMemory of a
    recording call's own wait (the app retries on those: the pending errors come at the
    next call), and a DeviceLost, raised alone (docs/architecture.md, "A failed job is
    raised once").
    """

    def __init__(self, info: HwErrorInfo, command: str | None = None, waited_for: bool = False,
                 refused: bool = False, unnamed: str | None = None, file_banned: str | None = None,
                 hint: str | None = None):
        self.info = info
        self.command = command
        self.code = info.code
        self.opcode = info.opcode
        self.opcode_name = info.opcode_name
        self.ib_offset = info.offset
        self.addr = info.addr  # (it was only in info.addr, which no page told an app to read)
        self.context = info.ctx_id
        self.waited_for = waited_for  # it was another context's job, which this queue's waited for
        # a later flush of the queue the error reset: the kernel takes no more of its work
        self.refused = refused
        self.file_banned = file_banned  # (refused only) why no context of the Device's file runs
        msg = f"GPU error{' in a job this queue waited for (wait_event)' if waited_for else ''}: {info.message}"
        self.hint = hint  # (the recording call's word on its packets: emit_raw's of the other engine)
        if command:
            msg += f" (recorded by {command}{': ' + hint if hint else ''})"
        elif unnamed:  # (a fault names the access's address: why no packet's call could be found)
            msg += f" (no API call named: {unnamed})"
        self.unnamed = unnamed
        if refused and file_banned:  # (a new queue would be refused too: CTX ALLOC's EIO)
            msg += f"; the queue's context was reset for it, and {file_banned}: {OPEN_NEW_DEVICE}"
        elif refused:
            msg += "; the queue's context was reset for it and takes no more work: make a new queue"
        super().__init__(msg)

    def _init_args(self) -> tuple:
        return self.info, self.command, self.waited_for, self.refused, self.unnamed, self.file_banned, self.hint


class GpuTimeout(UmdError, TimeoutError):
    """A wait ran out of (simulated) time before the GPU got there."""


class SubmitError(UmdError):
    """The KMD refused a submission (the CS checker, or bad arguments): `errno` and the
    KMD's message, which names the packet, its offset and the address."""

    def __init__(self, errno_: int, message: str):
        self.errno = errno_
        super().__init__(message)

    def _init_args(self) -> tuple:
        return self.errno, self.args[0]


class OutOfMemory(UmdError, MemoryError):
    """No memory: for a buffer the app allocates (the kernel's VRAM or GTT is full, even after
    the pools gave their cache back, or the GPU virtual address range has no hole), or for
    what a queue needs now (its context, when the file has the most the kernel allows; a
    new IB, a staging buffer, the
    KMD's room for a submission), even after waiting for the queue's own work to finish.
    The message names the queue and its limit on submissions in flight. The queue stays
    usable once memory is free again: a command whose IB could not be had was not recorded
    (call it again); a flush the KMD refused (ENOMEM) was not submitted."""


class DeviceLost(UmdError):
    """The kernel's EIO: the device could not be recovered (a failed reset: nothing runs any
    more), or the Device's whole file is banned, its contexts' jobs having timed out
    `file_ban_after_hangs` (8) times (no new queue can be made either: the message then
    ends "fd N is banned: ...: nothing of this Device runs any more: open a new Device"). A
    queue whose own context is banned raises QueueBanned, a DeviceLost too (code written for
    `except DeviceLost` still catches it), while its device runs on."""


class QueueBanned(DeviceLost):
    """The queue's context is banned: its work caused `ban_after_hangs` (3) GPU resets, and
    the kernel refuses its submissions (EIO, as i915 bans; CTX QUERY_STATE says BANNED, the
    flag this KMD adds to amdgpu's QUERY2 flags). The device and its other queues still
    run: make a new queue (Device.queue()). Attribute: `context` (the context id)."""

    def __init__(self, message: str, context: int):
        self.context = context
        super().__init__(message)

    def _init_args(self) -> tuple:
        return self.args[0], self.context


class NotPermitted(PermissionError):
    """The client lacks a right the call needs (the kernel's EACCES): a high-priority queue
    without CAP_SYS_NICE. A PermissionError, `errno` EACCES, whose message is the UMD's one
    line saying what to do (without Python's "[Errno 13]" before it)."""

    def __init__(self, message: str):
        super().__init__(_errno.EACCES, message)

    def __str__(self) -> str:
        return self.strerror

    def __reduce__(self):
        return type(self), (self.strerror,), self.__dict__


# Named as an app imports them: a traceback's last line said `umd.errors.GpuError: ...`, a
# module no app names (umd/__init__ exports these; pickle finds them there too).
for _cls in (UmdError, GpuError, GpuTimeout, SubmitError, OutOfMemory, DeviceLost, QueueBanned, NotPermitted):
    _cls.__module__ = "umd"
del _cls
