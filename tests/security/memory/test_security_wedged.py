"""A device whose reset failed (wedged): the engine that never went idle may still be
running the hung job, reaching its pages and page tables through its VMID. A client must
never be given that memory: the wedged device refuses what would allocate device memory
(GEM_CREATE, GEM_VA MAP and REPLACE, which make page tables) with the CS's EIO and words,
and what is freed from the wedge on stays out of the heaps (quarantined: freed for its
owner, never handed out again; a rebind starts afresh, what DRM_WEDGE_RECOVERY_REBIND asks).
"""

from __future__ import annotations

import errno

import pytest

import kmd_model
from kmd_model.uapi import (CsArgs, CsChunkIb, CtxArgs, CtxOp, GemCreateArgs, GemMmapArgs, GemVaArgs, KmdError,
                            Request, ResetStatus, VaOp, VmFlags)
from spec import pm4

from tests.kmd.test_kmd_ioctl import GTT, RWX, Client, expect
from tests.kmd_sched.reset.test_kmd_recovery import StuckResetModel

from ..security_helpers import EVIL


def _wedged_by_a_hung_job():
    """A hostile client's job polls for ever, then would write EVIL into its BO; its reset
    fails (the CP never reports idle). A victim opened, and made a BO (not mapped yet),
    before it. Returns (kmd, hostile, victim, victim's unmapped handle, the ranges the hung
    job could still reach: its BOs and its VM's page tables)."""
    dev = StuckResetModel()
    kmd = kmd_model.bind(dev, cs_check=False, hw_timeout=2000, job_timeout=20_000)
    victim = Client()
    handle = victim.io(Request.GEM_CREATE, GemCreateArgs(0x4000, 0, GTT, 0)).handle
    h = Client()
    hbo = h.bo(0x4000)
    seq = h.submit(h.ib(hbo, pm4.wait_reg_mem(hbo.addr + 0x800, 1, 1, "EQ") + pm4.write_data(hbo.addr + 0x900, [EVIL])))
    reach = [(b.gpu_addr, b.end) for b in (*h.f.handles.values(), *h.f.vm.tables.values())]
    dev.stuck = True
    with pytest.raises(KmdError) as ei:
        h.wait(seq, 1_000_000)
    assert ei.value.errno == errno.EIO and kmd.wedged.startswith("GPU reset failed: ")
    return kmd, h, victim, handle, reach


def _overlaps(ranges, start: int, end: int) -> bool:
    return any(s < end and start < e for s, e in ranges)


def test_a_wedged_device_never_hands_the_hung_jobs_memory_to_another_client():
    """The hostile client closes everything once the wedge cancelled its job: its BO, its
    page tables would go back to the heaps (the job that held them is cancelled, but the
    engine may still run it). Before, they did: the next page directory made (a new
    client's open) was the hung VM's freed one, and GEM_CREATE could hand out the BO's pages."""
    kmd, h, victim, handle, reach = _wedged_by_a_hung_job()
    used = {d: heap.used for d, heap in kmd.bo.heaps.items()}
    h.f.close()
    assert not kmd.live_bos(h.f)  # gone for its owner ...
    for heap in kmd.bo.heaps.values():  # ... but none of it back in a heap
        assert not any(_overlaps(reach, s, e) for s, e in heap.holes), heap.name
    assert {d: heap.used for d, heap in kmd.bo.heaps.items()} == used
    assert kmd.bo.quarantined == sum(e - s for s, e in reach)
    late = Client()  # an open still works: its page directory is memory the engine never had
    assert not _overlaps(reach, late.f.vm.root.gpu_addr, late.f.vm.root.end)


def test_a_wedged_device_refuses_to_allocate_memory():
    """GEM_CREATE, and GEM_VA MAP and REPLACE (they may make page tables), fail as the CS
    does on a wedged device: EIO with the reason. UNMAP, CLEAR, GEM_CLOSE and close still
    work: they give memory back (to the quarantine). Before, GEM_CREATE succeeded."""
    kmd, h, victim, handle, reach = _wedged_by_a_hung_job()
    expect(errno.EIO, f"GEM_CREATE: {kmd.wedged}", victim.io, Request.GEM_CREATE, GemCreateArgs(0x4000, 0, GTT, 0))
    va = victim.next_va
    for op in (VaOp.MAP, VaOp.REPLACE):
        expect(errno.EIO, f"GEM_VA: {kmd.wedged}", victim.io, Request.GEM_VA, GemVaArgs(handle, op, va, 0, 0x4000, RWX))
    victim.io(Request.GEM_VA, GemVaArgs(0, VaOp.CLEAR, va, 0, 0x4000, VmFlags(0)))
    victim.io(Request.GEM_CLOSE, kmd_model.uapi.GemCloseArgs(handle))
    h.f.close()
    victim.f.close()
    assert not kmd.live_bos() and not kmd.files


def test_a_wedged_device_still_opens_makes_contexts_and_maps_a_files_own_bo():
    """As amdgpu after a failed reset (amdgpu_device_gpu_recover marks nothing unusable;
    amdgpu_driver_open_kms, amdgpu_ctx_ioctl and the GEM mmap path ask nothing of the reset,
    only drm_dev_enter's unplug): an open works (its page directory from memory the hung
    engine never had), CTX ALLOC works (a context is no device memory) and its QUERY_STATE
    says what the reset did, GEM_MMAP of a BO the file holds works (the file's own data);
    the CS on the new context is EIO, the wedge's words (amdgpu would queue its job on a
    scheduler never started again: docs/architecture.md, "Recovery ladder")."""
    kmd, h, victim, handle, reach = _wedged_by_a_hung_job()
    late = Client()
    ctx = victim.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
    assert victim.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, ctx)).reset_status == ResetStatus.NO_RESET
    assert h.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, h.ctx)).reset_status == ResetStatus.GUILTY
    view = victim.io(Request.GEM_MMAP, GemMmapArgs(handle)).view
    view[:4] = [1, 2, 3, 4]
    assert bytes(victim.io(Request.GEM_MMAP, GemMmapArgs(handle)).view[:4]) == bytes([1, 2, 3, 4])
    expect(errno.EIO, f"CS: {kmd.wedged}", late.io, Request.CS, CsArgs(late.ctx, [CsChunkIb(8, gpu_addr=late.next_va)]))


def test_a_context_banned_by_the_reset_that_wedged_the_device_is_not_said_banned():
    """QUERY_STATE2's BANNED means the context's CS fails while the device runs on: the UMD
    tells a banned queue (open another queue) from a lost device (open a new Device) by it.
    The reset that failed made the hung job's context guilty and, at ban_after_hangs 1,
    banned: the device is wedged, so its flags say RESET and GUILTY, not BANNED, and its CS
    is the wedge's EIO. (BANNED set on a wedged device passed every test: mutants-11.)"""
    from kmd_model.uapi import CtxQueryFlags
    from tests.kmd_sched.reset.test_kmd_recovery import StuckResetModel as Stuck

    dev = Stuck()
    kmd = kmd_model.bind(dev, cs_check=False, hw_timeout=2000, job_timeout=20_000, ban_after_hangs=1)
    h = Client()
    bo = h.bo(0x4000)
    seq = h.submit(h.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")))
    dev.stuck = True
    with pytest.raises(KmdError) as ei:
        h.wait(seq, 1_000_000)
    assert ei.value.errno == errno.EIO and kmd.wedged and h.f.ctx(h.ctx, "test").banned  # (banned, and wedged)
    st = h.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE2, h.ctx))
    assert st.flags == CtxQueryFlags.RESET | CtxQueryFlags.GUILTY, st.flags
    expect(errno.EIO, f"CS: {kmd.wedged}", h.io, Request.CS, CsArgs(h.ctx, [CsChunkIb(8, gpu_addr=h.next_va)]))
