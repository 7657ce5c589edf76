"""The KMD's user API: ioctl request numbers and argument structures.

This file plays amdgpu_drm.h's part: it is all a UMD needs to include. Request numbers
follow DRM: core ioctls (GEM_CLOSE) are below DRM_COMMAND_BASE, driver ioctls are
DRM_COMMAND_BASE + amdgpu's own number. Arguments are dataclasses instead of C structs;
`ioctl()` returns the "out" half (amdgpu's unions have an `in` and an `out` side).

Addresses: every address a client's packets name is a GPU virtual address in the file's
own VM (amdgpu_vm): the UMD chooses where each BO goes and maps it with GEM_VA, with
READABLE / WRITEABLE / EXECUTABLE permissions; DEV_INFO gives the range it may use.
GEM_CREATE returns no address: physical memory is the kernel's business.

What amdgpu has and this uAPI leaves out: BO lists (BO_LIST, the BO_HANDLES chunk): a job
holds every BO mapped in its VM when it was submitted, and any fence chunk's BO; syncobjs
and their chunks: a job waits for another with a CsChunkDep (of the same file), the CPU
with WAIT_CS or by polling a user fence (CsChunkFence); AMDGPU_INFO's other queries,
GEM_USERPTR, GEM_METADATA, GEM_OP, FENCE_TO_HANDLE, WAIT_FENCES and SCHED: EINVAL, as any
unknown request or query.

The file: `kmd_model.open_render_node(cap_sys_nice=None, cap_perfmon=None)` opens the
bound device as opening /dev/dri/renderD128 does (ENODEV with none bound; ENOMEM, naming
open, when VRAM has no page for its VM's page directory): its own BO handles, contexts and
VM. `cap_sys_nice`, `cap_perfmon`: whether the process has CAP_SYS_NICE (CTX ALLOC above
NORMAL) and CAP_PERFMON (INFO COUNTERS' device-wide counters); None: the driver's own
(KmdParams), False unless it was bound otherwise; anything else is TypeError.
`file.ioctl(request, args)` may be called from any thread. `file.close()` waits until
none of the file's jobs is queued any more (each in a ring or run, as amdgpu_flush; a
signal ends the wait, the jobs left queued still run), then releases every BO, context and
the VM; closing twice is no error, an ioctl after it is EBADF. An ioctl of another thread
waiting for the GPU as the file closes: a CS, CTX FREE or a GEM_VA MAP or REPLACE ends
with EBADF when its wait does, having done nothing; a WAIT_CS or GEM_WAIT_IDLE answers as
its jobs end (they still run). amdgpu differs: the release comes after the ioctls that
hold the file, which go ahead.

Errors: every ioctl raises `KmdError(errno, message)` instead of returning -1 and
setting errno; `str(e)` is "EINVAL: GEM_CREATE: size must be > 0, not 0". The message is
one line and names the ioctl first (open_render_node's "open: ...", an unknown request's
"unknown ioctl request 0x99"). A refused ioctl changes nothing (a refused CS takes no
seqno); only an EIO from below, a TLB flush or a reset that failed, comes after the change
(a GEM_CLOSE still closes, as close(2) reports EIO). The errnos are amdgpu's for the same
mistake unless said otherwise (tests/kmd/uapi/test_kmd_uapi_contract.py holds each):

- EINVAL: a bad argument: a field of the wrong type (a float, a str, None, a bool where an
  integer goes; numpy integers are integers; a handle or context id of the wrong type, or
  outside its u32 field, is an unknown one, with its errno), out of range or wider than
  its C field (in a field the
  operation ignores too: CTX ALLOC's ctx_id, CLEAR's handle, UNMAP's and CLEAR's
  offset_in_bo; any value of the field's width is taken there), an unknown request,
  query, operation, flag or domain, a reserved field (flags nobody defined) non-zero, a
  misaligned address, offset or size; an unknown context id (CTX, CS, a dependency,
  WAIT_CS: ids are the file's own), a seqno the context has not handed out;
  an unknown handle in GEM_CLOSE (drm_gem_handle_delete) and in a CS fence chunk
  (amdgpu_cs_p1_user_fence); a GEM_VA range that overlaps a mapping (a closed BO's too, once
  a MAP has waited 2 * job_timeout for its jobs: GemCloseArgs) or leaves the VM's; a
  CTX ALLOC priority not amdgpu's six, which amdgpu_ctx_ioctl reads as NORMAL (CtxPriority);
  a CS on a PM4 ring (GFX) whose IB or any packet's memory range is not inside one mapping
  of the file's VM with the permission it needs (an IB: EXECUTABLE), and an IB of any ring
  in the kernel's range above DEV_INFO.va_end. That is amdgpu's answer where the kernel
  parses a ring's IBs, as the CS checker does the GFX ring's: amdgpu_cs_patch_ibs's
  amdgpu_cs_find_mapping, for an IB that starts outside every mapping or runs past its
  mapping's end, and its parsers for a packet's operand (amdgpu_vce_cs_reloc). amdgpu
  does not parse its GFX IBs, nor look at their address at CS: there the MMU stops such a
  job, as it does here on the DMA ring, which has no checker (a VM fault, its WAIT_CS
  ECANCELED). A bad address inside the chunks is never EFAULT, the errno of a CPU
  pointer copy_from_user cannot read (this KMD's chunks are Python objects: it has none).
- ENOENT: a handle the file does not hold (unknown, or another file's: handles are the
  file's own) in GEM_MMAP, GEM_VA, GEM_WAIT_IDLE and a CS IB chunk (drm_gem_object_lookup);
  a GEM_VA UNMAP that names no mapping of that BO starting at that address.
- EPERM: GEM_MMAP of a NO_CPU_ACCESS BO. EACCES: CTX ALLOC above NORMAL without
  CAP_SYS_NICE. ENOSPC: a file's 4,096th context. ENOMEM: no room in a heap (GEM_CREATE,
  a page table for GEM_VA, a page directory at open), or in the shadow pool for a CS's
  checked copies: a CS waits for room while the pool drains, ENOMEM once nothing in it was
  freed for 2 * job_timeout (its message counts the caller's own jobs in the pool); or
  when the checked copies the file's CSs hold inside the driver, not yet in the pool (a
  CS waiting for its context's oldest job or for room, each with its check), would pass
  the pool's size (one CS alone never does: its copies take at most half of it; a CS
  that waits keeps its check through the wait while every file's kept checks take at most
  two pools, else checks again after it: no error; a check long enough to let other
  ioctls in on its way holds its copies through that only in one of four turns, every
  file's, else it drops them and waits for a turn, holding none: no error either). A
  CPU mapping the OS refuses is GEM_MMAP's error with the OS's errno (ENOMEM past the
  process's count of mappings, vm.max_map_count: one a BO, however often it is mapped).
- ETIME: a WAIT_CS whose timeout (> 0) ran out (amdgpu answers status busy instead;
  GEM_WAIT_IDLE does so here too). ECANCELED: the context was reset as guilty by a full
  reset (CS; a queue reset's guilty context submits on: ResetStatus.GUILTY), or the
  job waited for was cancelled (a reset, a failed dependency), or, on a guilty context, the
  context's latest job on the ring the job waited for ran on failed (WAIT_CS: amdgpu's wait
  takes the ring's entity first, and amdgpu_ctx_get_entity fails with its last job's error,
  drm_sched_entity_error; it never reads the context's guilt, so a job that ended well on a
  ring whose latest job of the context did too still succeeds. amdgpu's guilty job itself
  fails with ETIME, which is a timed-out wait's here: ECANCELED). EIO: the context or
  its file is banned (CS, CTX ALLOC), or the device is wedged (its reset failed): CS,
  GEM_CREATE, GEM_VA MAP and REPLACE (they may make page tables) and every job in flight. EBADF: the file is closed.
- EINTR: a signal came while the ioctl waited for the GPU (WAIT_CS, GEM_WAIT_IDLE, a CS
  waiting for its context's oldest job or for shadow-pool room, or for a turn to check its
  IBs, CTX FREE for its context's
  queued jobs, a GEM_VA MAP or REPLACE for a closed BO's jobs): nothing was changed, its
  handler runs as the ioctl returns; make the call again (libdrm's drmIoctl does: a
  wait's timeout then counts from the new call, being relative, unlike amdgpu's).
  EDEADLK: an ioctl or an open made by client code run inside another ioctl of the same
  thread (a garbage-collector callback: signals are held during an ioctl). E2BIG: a CS
  whose checked copies would take more than the whole shadow pool (a job of many small IBs
  on a driver bound with a small pool, KmdParams.shadow_pool_kib: DEV_INFO.max_job_dw is
  sized to half the pool).

Limits: a file holds at most 4,095 contexts at once (ENOSPC); BOs, handles and mappings
have no count of their own, the heaps (ENOMEM) and the VM's pages bound them; a CS carries
at most DEV_INFO.max_ib_chunks IB chunks of DEV_INFO.max_ib_dw dwords each, one fence
chunk and DEV_INFO.max_dep_chunks dependency chunks (EINVAL past any); a GFX job runs at
most DEV_INFO.max_job_dw dwords and reaches DEV_INFO.max_job_ibs IBs (EINVAL, the CS
checker's); a context has at most 32 unfinished jobs on one ring (amdgpu_sched_jobs's
default): a CS past them waits for the context's oldest job there (CsArgs), once it has
been found good, with its checked copies: a file's CSs hold at most the shadow pool's
size of them inside the driver (ENOMEM past it). Time (KmdParams, the
module parameters, at their defaults): the job timer resets a job that makes no progress
for job_timeout (500,000) cycles, or a GFX job that has run checked_job_timeouts (256) of
them (a DMA job unchecked_job_timeouts, 64: no checker bounds it); a context whose jobs
caused ban_after_hangs (3) resets is banned, a file whose jobs timed out
file_ban_after_hangs (8) times too (EIO).

Ids: a BO handle (GemCreateOut.handle) and a context id (CtxOut.ctx_id) are the file's
own, 1 .. 0x7FFFFFFF (idr's ids, positive ints: they fit the u32 fields and a C int). A
new one is the first id after the last one the file handed out (of that kind) that the
file does not hold now, going on from 1 after 0x7FFFFFFF (idr_alloc_cyclic): one closed or
freed comes back only once the ids have wrapped round to it (a stale one is unknown until
then, not a new object), and a live one never does. amdgpu's idr_alloc hands out the lowest free one (so a closed handle
at once), its context ids below 4,096. A refusal names a handle or context id its call gave
as given; a BO or context that messages name on their own (the mapping in a GEM_VA's way,
a revoked CPU mapping's or an mmap the OS refused's BO; the context of a job that failed,
timed out or was cancelled, in errors and in the log) is "fd3:2" (the file's fd, the BO's
handle) or "context 3", and "fd3:2#n" or "context 3#n" when it was handed out after the
file's ids of its kind had wrapped n - 1 times: a closed BO that jobs still hold, or a
freed context whose jobs still run, is never taken for a new one holding its id.
"""

from __future__ import annotations

import errno as _errno
from dataclasses import dataclass, field
from enum import IntEnum, IntFlag
from typing import Any

KMD_NAME = "gpucosim"
KMD_VERSION = (2, 1, 0)
"""Driver API version (major, minor, patchlevel), as DRM_IOCTL_VERSION reports it.
Minor goes up when ioctls or flags are added; a UMD checks it to use new features."""

DRM_COMMAND_BASE = 0x40


class KmdError(Exception):
    """An ioctl failed: `errno` (an `errno` module constant) and a readable message."""

    def __init__(self, err: int, message: str, info: Any = None):
        self.errno = err
        self.message = message
        self.info = info  # e.g. the HwError behind an ECANCELED
        super().__init__(err, message)  # (args: what copy and pickle rebuild it from)

    def __str__(self) -> str:
        return f"{errno_name(self.errno)}: {self.message}"

    def within(self, ioctl: str) -> "KmdError":
        """Name `ioctl` first in the message of an error raised below it that does not (a TLB
        flush in GEM_VA, a failed reset in WAIT_CS), as every other ioctl error does."""
        if not self.message.startswith((f"{ioctl}:", f"{ioctl} ")):
            self.message = f"{ioctl}: {self.message}"
            self.args = (self.errno, self.message)
        return self

    @property
    def name(self) -> str:
        return errno_name(self.errno)


@dataclass(frozen=True)
class PacketAt:
    """A CS refusal's `KmdError.info` when the checker refused a packet: its GPU address as
    the client's IB holds it (the message names it too), for a UMD that knows which of its
    calls recorded the packet there. `via`: the INDIRECT_BUFFER packets that called the IB
    it is in, outermost first, by their addresses as the client's IBs hold them (empty for
    a packet of an IB chunk, or of the IBs it chains to), since a UMD recorded none of the
    packets of an IB2 the app built itself, only the call that runs it."""

    addr: int
    via: tuple[int, ...] = ()


class MappingRevoked(RuntimeError):
    """A CPU mapping (GEM_MMAP) was used after its BO's handle was closed (GEM_CLOSE, or the
    file closing): the kernel has unmapped it, as a use after munmap would fault. It names
    the BO as the client knows it: "BO fd3:1 (0x3000 bytes) was closed (GEM_CLOSE): its CPU
    mapping is gone, as after munmap" ("(its file was closed)" for the other)."""


def errno_name(err: int) -> str:
    return _errno.errorcode.get(err, str(err))


class Request(IntEnum):
    GEM_CLOSE = 0x09  # DRM core
    GEM_CREATE = DRM_COMMAND_BASE + 0x00
    GEM_MMAP = DRM_COMMAND_BASE + 0x01
    CTX = DRM_COMMAND_BASE + 0x02
    CS = DRM_COMMAND_BASE + 0x04
    INFO = DRM_COMMAND_BASE + 0x05
    GEM_WAIT_IDLE = DRM_COMMAND_BASE + 0x07
    GEM_VA = DRM_COMMAND_BASE + 0x08
    WAIT_CS = DRM_COMMAND_BASE + 0x09


# ----------------------------------------------------------------------------- GEM

class Domain(IntFlag):
    """Where a BO lives (amdgpu's AMDGPU_GEM_DOMAIN_* values). Both are CPU-visible here:
    the backends share one memory with the CPU, so the split is bookkeeping (a separate
    address range and accounting), as on an APU. GEM_CREATE takes exactly one of them:
    amdgpu's masks (VRAM | GTT: "either") and its other domains (CPU, GDS ...) are EINVAL."""

    GTT = 0x2  # system memory the GPU reaches (here: the GTT heap of the device's memory)
    VRAM = 0x4  # the GPU's own memory (here: the VRAM heap)


class GemFlags(IntFlag):
    """GEM_CREATE flags (amdgpu's AMDGPU_GEM_CREATE_* bits); any other bit is EINVAL. Every
    new BO is zero-filled, whatever its flags (memory comes back from other clients)."""

    CPU_ACCESS_REQUIRED = 1 << 0  # the CPU will map it (every BO is CPU-visible here: taken, no effect)
    NO_CPU_ACCESS = 1 << 1  # GEM_MMAP refuses the BO
    VRAM_CLEARED = 1 << 3  # zero-filled at creation (in either domain here)


@dataclass
class GemCreateArgs:
    size: int  # bytes, > 0; rounded up to whole pages
    alignment: int = 0  # bytes, a power of two; 0 = page alignment
    domain: int = Domain.GTT  # exactly one Domain
    flags: int = 0  # GemFlags bits


@dataclass(frozen=True)
class GemCreateOut:
    """A new BO: its handle (the file's own, 1 .. 0x7FFFFFFF: Ids, above) and
    size. Its pages are the kernel's to place: map it with GEM_VA to reach it from the GPU,
    GEM_MMAP from the CPU."""

    handle: int  # the BO's handle in this file: what GEM_MMAP, GEM_VA, GEM_CLOSE and a CS name
    size: int  # rounded up to whole pages (size 1: one page); more than a heap holds: ENOMEM


@dataclass
class GemCloseArgs:
    # the BO to close: its handle and CPU mappings go at once; its GPU mappings and memory once
    # no job uses it (INFO MEMORY counts it until then). A job submitted before still reaches
    # it, and so does a later job no checker reads (the DMA ring's); a later GFX CS naming
    # its range is EINVAL; a GEM_VA MAP or REPLACE over the range waits for those jobs, for
    # 2 * job_timeout cycles at most (KmdParams: 1,000,000 at the defaults), counted from the
    # call (one made again after an EINTR waits afresh), then goes ahead as over a live BO's
    # mapping: a MAP is EINVAL (the range overlaps the closed BO's mapping: the message says
    # closed), a REPLACE takes the range (a job still reaching it reaches the new BO: VaOp); a
    # MAP whose range a live BO's mapping overlaps too is EINVAL at once, with no wait; a
    # CLEAR takes the range at once (a job reaching it then faults). amdgpu differs: its
    # GEM_CLOSE frees the range at once (amdgpu_vm_bo_del, the page-table update ordered
    # behind the VM's jobs), so a MAP there neither waits nor fails
    handle: int


@dataclass
class GemMmapArgs:
    handle: int  # the BO to map for the CPU (not a NO_CPU_ACCESS one: EPERM)


@dataclass(frozen=True)
class GemMmapOut:
    """amdgpu returns an offset to pass to mmap(); here the mapping itself: a numpy
    uint8 view of the BO's bytes in device memory (writes go straight to the GPU's memory)."""

    view: Any  # numpy uint8 array over the BO's bytes
    size: int  # the BO's (whole pages); GEM_CLOSE revokes every view (MappingRevoked)


class VaOp(IntEnum):
    """GEM_VA operations (amdgpu's AMDGPU_VA_OP_*). Each takes effect at once, for jobs
    already submitted too (the page tables are updated before the ioctl returns): a job that
    reaches a range UNMAP or CLEAR took away, after the call, faults (its WAIT_CS
    ECANCELED, a VM fault, a queue reset of its ring: GUILTY there), and after a REPLACE it
    reaches the new BO; the BO taken away stays allocated while such a job may run
    (GEM_WAIT_IDLE: busy). amdgpu differs: it orders an unmap behind the VM's submitted jobs
    (amdgpu_vm_update_range's implicit sync, AMDGPU_SYNC_EQ_OWNER), so they see the old
    mapping: wait for them first (WAIT_CS, GEM_WAIT_IDLE)."""

    MAP = 1  # map [va, va + size) to the BO from offset; the range must be free
    UNMAP = 2  # remove the BO's mapping that starts at va
    CLEAR = 3  # remove whatever is mapped in [va, va + size) (no BO)
    REPLACE = 4  # CLEAR the range, then MAP it


class VmFlags(IntFlag):
    """GEM_VA permissions (amdgpu's AMDGPU_VM_PAGE_*); none: every access faults (a legal
    MAP). Any other bit, amdgpu's DELAY_UPDATE (bit 0), PRT (bit 4) and MTYPE among them, is
    EINVAL: page tables are updated at once, and there are no partially resident maps."""

    READABLE = 1 << 1  # the GPU may read it (packets' sources, DMA reads, WAIT_REG_MEM's polls)
    WRITEABLE = 1 << 2  # the GPU may write it (WRITE_DATA, fences, DMA writes)
    EXECUTABLE = 1 << 3  # commands (IBs) may be fetched from it


@dataclass
class GemVaArgs:
    """drm_amdgpu_gem_va: every address, offset and size a multiple of DEV_INFO.va_alignment,
    map_size > 0, [va_address, va_address + map_size) inside [DEV_INFO.va_start, va_end) and
    [offset_in_bo, offset_in_bo + map_size) inside the BO. One BO may be mapped at several
    addresses. UNMAP names a mapping by its BO and start (offset_in_bo any u64, unused; map_size,
    0 or more, only bounds the range check, which comes first, as amdgpu's); CLEAR and REPLACE split the mappings they cut, and what is left of each is a
    mapping of its own (UNMAP it at its new start); CLEAR looks no handle up. GEM_CLOSE
    unmaps the BO everywhere, once no job uses it (GemCloseArgs). Errors: see the module's
    docstring."""

    handle: int  # the BO (MAP, UNMAP, REPLACE); CLEAR ignores its value (any u32)
    operation: int  # a VaOp
    va_address: int  # where in the file's VM: page aligned
    offset_in_bo: int = 0  # where in the BO the mapping starts (MAP, REPLACE): page aligned
    map_size: int = 0  # bytes: page aligned, > 0 (UNMAP: 0 or more, only for the range check)
    flags: int = VmFlags.READABLE | VmFlags.WRITEABLE  # VmFlags bits (MAP, REPLACE)


@dataclass
class GemWaitIdleArgs:
    handle: int  # the BO whose jobs to wait for
    # simulated cycles from the call (amdgpu's timeout is an absolute time); 0 = just ask;
    # 2**64 - 1: no bound but the job timer
    timeout: int


@dataclass(frozen=True)
class GemWaitIdleOut:
    """busy: a job that may use the BO (one submitted while it was mapped in the file's VM,
    or naming it in a fence chunk, or one in a ring when its mapping went: VaOp) has not
    finished. A wait that runs out answers busy, no error (amdgpu's out.status), unlike
    WAIT_CS's ETIME."""

    busy: bool  # True: a job that may use it still runs (or waits to)


# ----------------------------------------------------------------------------- contexts

class CtxOp(IntEnum):
    """CTX operations (amdgpu's AMDGPU_CTX_OP_*)."""

    ALLOC = 1  # a new context (CtxArgs.priority): its id comes back in CtxOut.ctx_id
    # free context ctx_id, once none of its jobs is queued any more (each in a ring or run:
    # drm_sched_entity_flush; FREE waits meanwhile). Its jobs still run, in order, writing
    # their memory and user fences, and another context's job that depends on one still waits
    # for it, as a WAIT_CS another thread made before the FREE answers as its job ends; its id
    # goes with the FREE (EINVAL in CTX, CS, a dependency, WAIT_CS: there are no
    # syncobjs to outlive it, so wait for its jobs after by their user fences, or GEM_WAIT_IDLE
    # on a BO they use) and is not handed out again by the file until its ids wrap (Ids, above)
    FREE = 2
    # was the context hit by a GPU reset? One answer for both of amdgpu's numbers: its
    # reset_status and resets (amdgpu's QUERY_STATE, 3) and its flags (QUERY_STATE2, 4)
    QUERY_STATE = 3
    QUERY_STATE2 = 4  # the same op under amdgpu's QUERY_STATE2 number


class CtxPriority(IntEnum):
    """CTX ALLOC priorities (amdgpu's AMDGPU_CTX_PRIORITY_*). Above NORMAL needs CAP_SYS_NICE
    (EACCES otherwise); each maps to a drm_sched run queue: VERY_LOW and LOW to LOW, NORMAL
    (and UNSET, which is NORMAL, as amdgpu_ctx_ioctl reads it) to NORMAL, HIGH and VERY_HIGH
    to HIGH (user space never reaches KERNEL). Any other value is EINVAL, naming the six; a
    value outside an int32 (drm_amdgpu_ctx_in's field) or not an int is EINVAL naming that.
    amdgpu differs: amdgpu_ctx_ioctl reads any value amdgpu_ctx_priority_is_valid refuses as
    NORMAL, for old clients that left garbage there (this KMD has none), and answers EINVAL
    for an invalid priority only in AMDGPU_SCHED (amdgpu_sched_ioctl). The other CTX ops
    ignore the field, as amdgpu_ctx_ioctl does: any int32 there answers as 0 (one outside an
    int32, or not an int, is EINVAL for every op)."""

    UNSET = -2048  # read as NORMAL
    VERY_LOW = -1023  # the LOW run queue
    LOW = -512  # the LOW run queue
    NORMAL = 0  # the NORMAL run queue
    HIGH = 512  # the HIGH run queue: needs CAP_SYS_NICE
    VERY_HIGH = 1023  # the HIGH run queue: needs CAP_SYS_NICE


class HwIp(IntEnum):
    """CS ring choice: the hardware IP type (amdgpu's AMDGPU_HW_IP_*). This device has GFX
    ring 0 always and DMA ring 0 when it has an SDMA engine (DEV_INFO.sdma_rings)."""

    GFX = 0  # the CP's ring (PM4 packets)
    COMPUTE = 1  # not on this device: a CS naming it is EINVAL, as every type below
    DMA = 2  # the SDMA engine's ring (SDMA packets), when DEV_INFO.sdma_rings is 1
    UVD = 3
    VCE = 4
    UVD_ENC = 5
    VCN_DEC = 6
    VCN_ENC = 7
    VCN_JPEG = 8
    VPE = 9


HW_IP_NUM = 10


class CtxQueryFlags(IntFlag):
    """CTX QUERY_STATE's `flags` (amdgpu's AMDGPU_CTX_QUERY2_FLAGS_*, at amdgpu's bits; BANNED
    is this KMD's own, amdgpu having no ban)."""

    RESET = 1 << 0  # a reset (of the device or of a queue) happened since the context was made
    GUILTY = 1 << 2  # the context's work caused a reset
    BANNED = 1 << 8  # it caused ban_after_hangs resets: its CS fails with EIO (the device runs on;
    # not set when its file is banned, file_ban_after_hangs: then every context's CS and CTX ALLOC are EIO)


class ResetStatus(IntEnum):
    """CTX QUERY_STATE's `reset_status` (amdgpu's AMDGPU_CTX_*_RESET), and each ring's in
    `ring_status`."""

    NO_RESET = 0  # no reset touched this context's work
    GUILTY = 1  # this context's work caused a reset. A queue reset (every ring's first step: gfx,
    # gfx_high, sdma0): its jobs of that ring were cancelled, and it submits on (to every ring)
    # until it has caused ban_after_hangs resets (then EIO). A full reset (a queue reset that
    # failed, or a CP without CP_QUEUE_RESET): its CS is ECANCELED from then on, and so is a
    # WAIT_CS on a ring whose latest job of the context failed
    INNOCENT = 2  # a reset happened while this context had a job in the reset ring; its work was
    # resubmitted. A job only queued (not in the ring yet) is untouched: NO_RESET there; that a
    # reset happened at all is CtxOut.resets and CtxQueryFlags.RESET (amdgpu's counter)


@dataclass
class CtxArgs:
    op: int  # a CtxOp
    ctx_id: int = 0  # the context (FREE, QUERY_STATE); ALLOC ignores it (any u32: 0 by custom)
    flags: int = 0  # none defined: 0 (else EINVAL)
    priority: int = CtxPriority.NORMAL  # read by ALLOC only; above NORMAL needs File.cap_sys_nice (else EACCES)


@dataclass(frozen=True)
class HwErrorInfo:
    """A decoded CP error (or a timeout), as QUERY_STATE reports it for a context a full reset
    left guilty, and as the KmdError.info of a failed job's WAIT_CS."""

    code: str  # CpError name, or "TIMEOUT" for a job that ran past the job timeout
    level: str  # "RING", "IB1", "IB2"
    opcode: int  # the packet's opcode (PM4's IT_OPCODE, or the SDMA packet's)
    opcode_name: str | None  # from spec/packets.py (an SDMA error: spec/sdma/packets.py), None for unknown opcodes
    offset: int  # byte offset of the packet header in its ring / IB
    addr: int  # CP_ERROR_ADDR
    seq: int  # seqno of the guilty job
    ctx_id: int  # the guilty job's context
    message: str  # "illegal opcode 0x7b at IB+0x40 (0x201040), context 3" (ring+, IB+, IB2+ by level)


@dataclass(frozen=True)
class CtxOut:
    ctx_id: int = 0  # ALLOC: the new context's id (1 .. 0x7FFFFFFF: Ids, above); FREE, QUERY_STATE: the one named
    reset_status: ResetStatus = ResetStatus.NO_RESET  # QUERY_STATE: the context's, over every ring
    resets: int = 0  # resets (of the device or of a queue) seen since the context was created
    # what made it guilty (reset_status GUILTY): the error of the latest reset its work caused,
    # a queue reset's too; after a full reset's, which refuses its CS (ECANCELED), that one.
    # None while it has caused none (it was None after a queue reset, GUILTY with no error)
    error: HwErrorInfo | None = None
    # ring name -> ResetStatus, for each ring a reset touched the context's work on ({} until
    # one did): "gfx", "sdma0", and "gfx_high" for a HIGH context's GFX jobs where the device
    # has the CP's second queue (they are named GFX ring 0 all the same)
    ring_status: dict = field(default_factory=dict)
    flags: CtxQueryFlags = CtxQueryFlags(0)  # QUERY2's flags: RESET, GUILTY, BANNED


# ----------------------------------------------------------------------------- submission

@dataclass
class CsChunkIb:
    """An IB to run: by BO handle + byte offset (the BO mapped there with GEM_VA), or by GPU
    virtual address (handle = 0); both or neither: EINVAL. size_dw 1 .. DEV_INFO.max_ib_dw,
    any size on either ring (UMDs pad it to DEV_INFO.ib_align_dw, as amdgpu's do, unasked);
    the offset or address dword aligned (32-byte on the DMA ring). By handle, the BO must be mapped at that offset (else EINVAL: the
    chunk names no address); of a BO mapped at several VAs, the IB runs from a mapping it
    lies inside whole with EXECUTABLE when there is one (else the lowest holding the offset);
    the IB lies inside one EXECUTABLE mapping (two adjacent
    mappings do not make one), else EINVAL, as amdgpu_cs_find_mapping (on the DMA ring: a
    VM fault when it runs). flags: none defined (non-zero: EINVAL). All IB chunks of a CS
    name one ring, and DEV_INFO.max_ib_chunks of them at most."""

    size_dw: int  # the IB's size in dwords
    handle: int = 0  # the BO holding the IB, or 0: by gpu_addr (None is no 0: an unknown handle, ENOENT)
    offset: int = 0  # the IB's byte offset in that BO (by gpu_addr: 0, else EINVAL)
    gpu_addr: int | None = None  # the IB's GPU virtual address (handle 0)
    flags: int = 0  # none defined: 0
    ip_type: int = HwIp.GFX  # the ring: HW IP type, instance and ring index (drm_amdgpu_cs_chunk_ib)
    ip_instance: int = 0  # 0: every HW IP has one instance
    ring: int = 0  # 0: each HW IP type has one ring here


@dataclass
class CsChunkDep:
    """Wait for another job first (AMDGPU_CHUNK_ID_DEPENDENCIES): the job `handle` (its CS
    seqno; 0xFFFFFFFF = the context's latest) that context `ctx_id` (of this file) submitted
    to the ring (ip_type, ip_instance, ring). The jobs may be on different rings; the wait is
    the scheduler's, on the GPU's side of the CS (no CPU round trip for the client). A
    seqno the context ran on another ring is EINVAL (amdgpu numbers jobs per ring) while
    the context remembers its ring, for its latest 1,024 jobs (and the file's latest 16,384);
    an older one that ended well is nothing to wait for, on any ring, as is 0xFFFFFFFF with
    no job of the context on that ring. A job that failed makes the dependent job fail
    (ECANCELED) as WaitCsArgs says."""

    ip_type: int  # the ring the job waited for ran on: HW IP type ...
    ring: int  # ... and ring index
    ctx_id: int  # the context (of this file) that submitted it
    # its seqno (CsOut.seq), or 0xFFFFFFFF: the context's latest on that ring (a context that
    # has handed out 0xFFFFFFFF itself, the seqnos wrapping, names that job by it)
    handle: int
    ip_instance: int = 0  # 0


@dataclass
class CsChunkFence:
    """User fence: after the job, the KMD has the GPU write the job's 32-bit seqno to this
    dword of the BO (amdgpu's AMDGPU_CHUNK_ID_FENCE), so a UMD can poll memory instead
    of calling WAIT_CS. The BO need not be mapped in the VM (the kernel writes it); the job
    holds it until it ends. One per CS; an unknown handle or an offset not dword aligned
    inside the BO: EINVAL. A job that fails (reset as guilty, cancelled by a reset or a
    failed dependency) never writes it, as amdgpu skips a cancelled job's IBs and fence:
    WAIT_CS says why. The device's time passes only inside the driver (a simulator's clock,
    the model's): reading memory in a loop, or sleeping, lets none pass, so a UMD that polls
    lets the device run between its looks with `file.elapse(cycles)` (not an ioctl: cycles
    an int in [0, 2**32], else ValueError; nothing on a closed file), as umd's
    Event.signalled does 64 cycles a look."""

    handle: int  # the BO the seqno is written to
    offset: int  # the dword's byte offset in it


@dataclass
class CsArgs:
    """One submission (drm_amdgpu_cs): a job of context `ctx_id` running its IB chunks in
    order, after the jobs its dependency chunks name, writing its fence chunk's user fence.
    A context has at most 32 unfinished jobs on one ring: a CS past them waits for the
    context's oldest job there (amdgpu_ctx_wait_prev_fence). It waits last, as
    amdgpu_cs_ioctl does (amdgpu_cs_pass1 and pass2, amdgpu_cs_patch_ibs, then
    amdgpu_cs_sync_rings): a CS refused for its context (guilty, banned), its chunks, its
    dependencies, its ring space or the checker's verdict on its IBs (E2BIG too) is refused
    at once, with no wait; only then does it wait for that slot, and then for room in the
    shadow pool. A wait lets other ioctls run, so the CS then looks at everything again
    (a reset may have made the context guilty, a GEM_VA changed what its IBs reach)."""

    ctx_id: int  # the context submitting (the file's own)
    chunks: list = field(default_factory=list)  # CsChunkIb (at least one), CsChunkDep, CsChunkFence


@dataclass(frozen=True)
class CsOut:
    # the job's 32-bit fence seqno: pass it to WAIT_CS. One sequence per context over all its
    # rings: 1 for its first job (KmdParams.initial_seq), one more for each CS it accepts (a
    # refused one takes none), 0 after 0xFFFFFFFF; WAIT_CS and a dependency take one at most
    # 2**31 before the context's latest (an older one is taken for one not handed out: EINVAL)
    seq: int


@dataclass
class WaitCsArgs:
    """Wait for job `seq` of context `ctx_id`. Unlike amdgpu's, it names no ring: a
    context's seqnos are one sequence over all its rings. 0xFFFFFFFF is no "latest" here
    (it is in a CsChunkDep): a seqno the context has not handed out is EINVAL. A failed job
    answers its error while it is among the context's latest 1,024 failed jobs (and the
    file's latest 16,384); older, its error is forgotten and it answers as ended well, here
    and as a dependency (amdgpu_ctx_get_fence: a seqno older than the fences the context
    keeps is signalled)."""

    ctx_id: int  # the context that submitted the job
    seq: int  # its seqno (CsOut.seq)
    # simulated cycles from the call (amdgpu's timeout is an absolute time); 0 = just ask (no
    # ETIME); 2**64 - 1: no bound but the job timer
    timeout: int


@dataclass(frozen=True)
class WaitCsOut:
    busy: bool  # only ever True for timeout = 0; a timed-out wait raises ETIME


# ----------------------------------------------------------------------------- INFO

class InfoQuery(IntEnum):
    """INFO queries (amdgpu's AMDGPU_INFO_*, and one of this KMD's own); the answer's class
    is INFO_OUT[query]."""

    FW_VERSION = 0x0E  # the driver's name and version, the hardware's register interface version
    DEV_INFO = 0x16  # what the device is and can do, and the file's VM range
    MEMORY = 0x19  # the heaps' sizes and use (every client's: as AMDGPU_INFO_MEMORY)
    VM_FAULT = 0x23  # AMDGPU_INFO_GPUVM_FAULT: the last VM fault of the file's VM
    COUNTERS = 0x80  # gpucosim: hardware performance counters + driver statistics


@dataclass
class InfoArgs:
    query: int  # an InfoQuery


@dataclass(frozen=True)
class FwVersionInfo:
    kmd_name: str  # "gpucosim"
    kmd_version: tuple[int, int, int]  # KMD_VERSION: (major, minor, patchlevel)
    hw_version: tuple[int, int, int]  # register interface (VERSION)


@dataclass(frozen=True)
class DevInfo:
    backend: str  # Device.name: "model", "verilator", "icarus"
    hw_version: tuple[int, int, int]  # the register interface's (VERSION)
    bus_bytes: int  # the memory bus's width in bytes (CAPS.BUS_BYTES_LOG2)
    addr_bits: int  # bus address bits (CAPS.ADDR_BITS)
    ib_levels: int  # IB nesting the CP runs: 2 is IB1s and the IB2s they call (CAPS.IB_LEVELS)
    has_dma: bool  # the CP has a DMA engine: DMA_DATA runs (CAPS.DMA)
    has_ih: bool  # the device writes an IH ring (CAPS.IH)
    dma_max_bytes: int  # largest DMA_DATA BYTE_COUNT (CAPS.DMA_MAX_LOG2); 0 without DMA
    ring_size_dw: int  # the kernel's gfx ring, in dwords
    ib_align_dw: int  # the kernel pads its ring commits to this many dwords; UMDs their IBs (not asked)
    max_ib_dw: int  # largest IB_SIZE
    max_job_dw: int  # dwords one GFX job may run in all, every IB counted each time it runs (the checker's)
    max_job_ibs: int  # distinct IBs one GFX job may reach (chunks, IB2s, CHAIN targets; the checker's)
    packets: tuple[str, ...]  # packet kinds in PERF_PACKETS order
    va_start: int  # the VA range a client maps in (amdgpu's virtual_address_offset ...
    va_end: int  # ... and virtual_address_max)
    va_alignment: int  # the page size: GEM_VA's unit
    vm_levels: int  # page-table levels
    sdma_rings: int = 0  # rings of HW IP DMA (the copy engine, QUEUE_CAPS.SDMA): 1 on the model and the RTL
    max_ib_chunks: int = 4  # IB chunks one CS may carry
    max_dep_chunks: int = 1024  # dependency chunks one CS may carry


@dataclass(frozen=True)
class HeapInfo:
    """A heap's sizes in bytes (amdgpu's drm_amdgpu_heap_info): no address. Where the kernel
    places BOs is its own; a client reaches them at the VAs it maps them at."""

    total: int  # the heap's size
    used: int  # in use, the kernel's own BOs (rings, page tables, shadow IBs) counted
    largest_free: int  # the largest BO that fits now


@dataclass(frozen=True)
class MemoryInfo:
    vram: HeapInfo  # the VRAM heap
    gtt: HeapInfo  # the GTT heap


@dataclass(frozen=True)
class VmFaultInfo:
    """drm_amdgpu_info_gpuvm_fault: the last VM fault of the file's jobs (all 0: none yet)."""

    addr: int = 0  # the faulting virtual address
    status: int = 0  # VM_FAULT_STATUS (VMID, ACCESS, LEVEL, CAUSE); 0 when not latched for it (an SDMA
    # fault, or CP queue 1's while the register held queue 0's)
    vmid: int = 0  # the VMID the job ran with
    access: str = ""  # spec/vm.py Access name ("" when status is 0)
    cause: str = ""  # spec/vm.py Cause name ("" when status is 0)
    level: int = 0  # the page-table level the walk faulted at (0: the root; 0 too when status is 0)


@dataclass(frozen=True)
class Counters:
    """`hw`: the PERF_* registers and TIMESTAMP; `packets`: PERF_PACKETS by packet name;
    `kmd`: what the driver counted (ioctls, doorbells, interrupts, fences, resets ...).
    Every client's work is in them, so only a file with CAP_PERFMON gets them
    (open_render_node(cap_perfmon=True), or KmdParams.cap_perfmon; a system-wide perf event
    needs it on Linux); any other file gets the clock alone (`hw` = {"timestamp": ...}, no
    `packets`) and its own counts in `kmd` (amdgpu's fdinfo): `ioctls` and `ioctl_errors`
    (this call counted), `contexts` and `live_bos` (its contexts and BO handles now), `hangs`
    (its contexts' jobs that timed out: file_ban_after_hangs counts them)."""

    hw: dict  # the device's performance counters by name (busy_cycles, dwords_fetched ...) and its clock (timestamp)
    packets: dict  # packet name -> PERF_PACKETS count
    kmd: dict  # the driver's counts by name


INFO_OUT = {
    InfoQuery.FW_VERSION: FwVersionInfo,
    InfoQuery.DEV_INFO: DevInfo,
    InfoQuery.MEMORY: MemoryInfo,
    InfoQuery.VM_FAULT: VmFaultInfo,
    InfoQuery.COUNTERS: Counters,
}

ARGS = {
    Request.GEM_CLOSE: GemCloseArgs,
    Request.GEM_CREATE: GemCreateArgs,
    Request.GEM_MMAP: GemMmapArgs,
    Request.GEM_WAIT_IDLE: GemWaitIdleArgs,
    Request.GEM_VA: GemVaArgs,
    Request.CTX: CtxArgs,
    Request.CS: CsArgs,
    Request.WAIT_CS: WaitCsArgs,
    Request.INFO: InfoArgs,
}
"""Request -> the argument class it takes."""

OUT = {
    Request.GEM_CLOSE: None,
    Request.GEM_CREATE: GemCreateOut,
    Request.GEM_MMAP: GemMmapOut,
    Request.GEM_WAIT_IDLE: GemWaitIdleOut,
    Request.GEM_VA: None,
    Request.CTX: CtxOut,
    Request.CS: CsOut,
    Request.WAIT_CS: WaitCsOut,
}
"""Request -> the class of what it answers (None: nothing); INFO answers INFO_OUT[query]."""
