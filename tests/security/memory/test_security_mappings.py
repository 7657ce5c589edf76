"""Memory a client gave back or gets: a mapping kept past GEM_CLOSE (or the file's close)
is revoked, and nothing written through any alias of it reaches the next owner; every
new BO reads as zeros, whatever its domain and flags, with or without the UMD's pools.
"""

from __future__ import annotations

import errno

import numpy as np
import pytest

import kmd_model
import umd
from kmd_model import uapi
from kmd_model.uapi import Domain, MappingRevoked, Request
from testbench.refmodel import RefModel

from ..security_helpers import EVIL, quiet
from tests.kmd.test_kmd_ioctl import Client


# ------------------------------------------------------------------------------ mappings and stale data

def check_stale_mapping(dev):
    """A mapping kept past GEM_CLOSE is revoked: using it says so, and nothing written
    through any alias of it reaches the BO the next client gets at that address."""
    kmd = kmd_model.bind(dev)
    a, b = Client(), Client()
    old = a.bo(0x2000)
    view8 = a.io(Request.GEM_MMAP, uapi.GemMmapArgs(old.handle)).view
    alias = np.frombuffer(memoryview(view8), dtype=np.uint8)  # past every Python-level check
    phys = a.phys(old)
    a.io(Request.GEM_CLOSE, uapi.GemCloseArgs(old.handle))
    new = b.bo(0x2000)
    assert b.phys(new) == phys  # first fit: the same memory
    for use in (lambda: old.u32.__setitem__(0, EVIL), lambda: old.u32[0], lambda: old.u32.tolist(),
                lambda: view8[:4], lambda: np.copyto(view8, 1), lambda: view8 + 1, lambda: bytes(view8.tobytes()),
                lambda: old.u32.view("<u2"), lambda: old.u32.sum()):
        # (by file and handle: the physical range it named is not the client's to learn)
        with pytest.raises(MappingRevoked, match=rf"^BO fd{a.f.fd}:{old.handle} \(0x2000 bytes\) was closed "
                           r"\(GEM_CLOSE\): its CPU mapping is gone, as after munmap$"):
            use()
    alias[:] = 0xEE  # an alias made before the close writes nowhere
    assert not new.u32.any()
    assert not dev.mem[phys:phys + 0x2000].any()
    # a copy made before the close is the client's own
    a2 = a.bo(0x1000)
    a2.u32[:4] = [1, 2, 3, 4]
    mine = a2.u32[:4].copy()
    a.io(Request.GEM_CLOSE, uapi.GemCloseArgs(a2.handle))
    assert mine.tolist() == [1, 2, 3, 4]
    # closing the file revokes too; the UMD's Buffer refuses its own use after free (without
    # pools, whose freed memory stays the device's own, mapped, to be reused)
    gpu = umd.open(api_version=2, pools=False)
    buf = gpu.alloc(4096)
    u = buf.u32
    buf.free()
    with pytest.raises(ValueError, match=r"^a view of <umd.Buffer GTT .*> \(Buffer.map, Buffer.u32\) used after the "
                                         r"buffer was freed \(Buffer.free\)"):  # (the UMD's words: it was MappingRevoked)
        u[0] = 1
    with pytest.raises(ValueError, match="map: <umd.Buffer GTT .*> was freed"):
        buf.map()
    u2 = gpu.alloc(4096).u32
    gpu.close()
    with pytest.raises(ValueError, match=r"used after the buffer was freed \(its device was closed: Device.close\)"):
        u2[0]
    quiet(kmd)


def check_no_stale_data(dev):
    """Every new BO reads as zeros, whatever its domain and flags: nothing a previous owner
    (another client, or the kernel) wrote is left in it."""
    kmd = kmd_model.bind(dev)
    for domain in (Domain.GTT, Domain.VRAM):
        a = Client()
        secret = a.bo(0x3000, domain)
        secret.u32[:] = 0x5EC2E7
        phys = a.phys(secret)
        b = Client()  # (its page directory is made before the memory comes free)
        a.io(Request.GEM_CLOSE, uapi.GemCloseArgs(secret.handle))
        for flags in (0, uapi.GemFlags.CPU_ACCESS_REQUIRED):
            out = b.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x3000, 0, domain, flags))
            assert b.f.handles[out.handle].gpu_addr == phys  # the same memory
            view = b.io(Request.GEM_MMAP, uapi.GemMmapArgs(out.handle)).view
            assert not view.any(), f"{domain.name} BO with flags {flags} holds old data"
            view[:] = 0x77
            b.io(Request.GEM_CLOSE, uapi.GemCloseArgs(out.handle))
    # what a UMD asks for without clearing (IBs, staging) is zeroed all the same when it
    # comes from the kernel (without pools: every buffer is a new BO, here at the same address)
    gpu = umd.open(api_version=2, pools=False)
    x = gpu.alloc(0x1000, zero=False)
    x.u32[:] = 0x5EC2E7
    addr = x.gpu_addr
    x.free()
    y = gpu.alloc(0x1000, zero=False)
    assert y.gpu_addr == addr and not y.u32.any()
    gpu.close()
    # with pools, reused memory is only ever the same device's own (its cache and slabs),
    # and alloc() without zero=False clears it
    gpu = umd.open(api_version=2)
    x = gpu.alloc(0x1000, zero=False)
    x.u32[:] = 0x5EC2E7
    x.free()
    y = gpu.alloc(0x1000)
    assert y.backing is x.backing and not y.u32.any()
    gpu.close()
    quiet(kmd)



def check_a_write_under_way_at_an_unmap_lands_before_the_page_is_handed_out(dev):
    """A client's SDMA fill is under way into a BO mapped after the job's CS (so the job
    holds nothing of it) when the client closes the BO: the KMD unmaps it and invalidates the
    TLB (VM_INVALIDATE_ACK). The MMU's ACK drops the entries, not the write bursts it has
    translated already, whose W beats may still be on their way (hardware.md,
    "Invalidation"): the page must not go to anyone else before the job has ended. It went
    to the next GEM_CREATE at once, another client's, zero-filled by the CPU, and the fill's
    late beats landed in it (test_memory_a_job_in_a_ring_may_write_is_not_handed_out_until_the_job_ends
    on the model, whose writes land at once)."""
    from spec import sdma
    from tests.kmd_sched.sched_helpers import sdma_ib
    kmd = kmd_model.bind(dev)
    a, b = Client(), Client()
    ib = a.bo(0x2000)
    size = 0x10000
    va = a.next_va
    job = a.submit(sdma_ib(ib, sdma.poll_regmem(ib.addr + 0x1000, 1, 0xFFFF_FFFF, "EQ", interval=1)
                           + sdma.constant_fill(va, EVIL, size)))
    data = a.bo(size)  # mapped after the job's CS
    assert data.addr == va
    kdata = a.f.handles[data.handle]
    lo = kdata.gpu_addr
    mem32 = kmd.mem32
    ib.u32[0x1000 // 4] = 1  # the fill starts
    deadline = dev.now() + 200_000
    while int(mem32[lo // 4]) != EVIL:  # under way
        assert dev.now() < deadline, "the fill never started"
        a.f.elapse(8)
    pending = any(j.seq == job and j.ctx.file is a.f for j in kmd.sdma_sched.pending)
    a.io(Request.GEM_CLOSE, uapi.GemCloseArgs(data.handle))
    if pending:  # (on the RTL; the model's fill, and its fence, are done at once)
        assert not kdata.freed, "the page was handed out while the fill into it was under way"
    new = b.bo(size)  # the next client's BO
    b.f.elapse(20_000)
    hit = np.flatnonzero(new.u32 == EVIL)
    assert not len(hit), f"{len(hit)} dwords of the closed BO's fill landed in another client's new BO"
    try:
        a.wait(job, 1_000_000)  # (the fill done before the unmap)
    except uapi.KmdError as e:  # (the rest of the fill faulted: its page was unmapped)
        assert e.errno == errno.ECANCELED and e.info.code == "VM_FAULT", e
    assert kdata.freed and not new.u32.any()
    a.f.close()
    assert not kmd.live_bos(a.f)


CHECKS = [check_stale_mapping, check_no_stale_data,
          check_a_write_under_way_at_an_unmap_lands_before_the_page_is_handed_out]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


@pytest.mark.parametrize("tamper", ["token None", "token deleted", "token replaced", "token marked revoked"])
def test_a_mapping_whose_kernel_array_the_client_changed_is_still_revoked(tamper):
    """GEM_MMAP's view is a view of the kernel's own array for the BO (`view.base`), which
    held the mapping's revocation token as an attribute: a client that set it to None (or
    deleted it, or put another token there) before GEM_CLOSE had the revocation skipped,
    OS mapping included, and read and wrote through its view the BO the next client was
    given at those pages; so did one that marked the token the views share revoked before
    the close (and cleared it after). The kernel keeps the token, whether it revoked the OS
    mapping, and its address itself."""
    kmd = kmd_model.bind(RefModel())
    a, b = Client(), Client()
    h = a.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000)).handle
    view = a.io(Request.GEM_MMAP, uapi.GemMmapArgs(h)).view.view("<u4")
    alias = np.frombuffer(memoryview(view), dtype="<u4")  # past every Python-level check
    phys = a.f.handles[h].gpu_addr
    kernels = view.base
    if tamper == "token None":
        kernels._token = None
    elif tamper == "token deleted":
        del kernels._token
    elif tamper == "token replaced":
        kernels._token = type(view._token)()
    else:  # the token the view shares, marked revoked before the close (and cleared after)
        view._token.revoked = "the client's own"
    a.io(Request.GEM_CLOSE, uapi.GemCloseArgs(h))
    if tamper == "token marked revoked":
        view._token.revoked = None
    new = b.bo(0x1000)
    assert b.phys(new) == phys  # first fit: the same memory
    new.u32[0] = 0x5EC2_E7ED
    if tamper == "token marked revoked":
        reach = [alias, view]  # (the client cleared the mark: the view passes its own checks)
    else:
        with pytest.raises(MappingRevoked):
            view[0]
        reach = [alias, np.frombuffer(memoryview(kernels), dtype="<u4")]
    for v in reach:
        assert int(v[0]) != 0x5EC2_E7ED, "the closed mapping reads the next owner's BO"
        v[1] = EVIL
    assert int(new.u32[1]) == 0 and not kmd.dev.mem[phys + 4:phys + 0x1000].any()
    # a later GEM_MMAP of another BO is revoked as well
    h2 = a.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000)).handle
    v2 = a.io(Request.GEM_MMAP, uapi.GemMmapArgs(h2)).view
    a.io(Request.GEM_CLOSE, uapi.GemCloseArgs(h2))
    with pytest.raises(MappingRevoked):
        v2[0]
    quiet(kmd)


def test_a_closed_bo_an_earlier_job_holds_stays_mapped_for_the_files_later_jobs_too():
    """docs/architecture.md ("Ordering"): a BO closed while an earlier job holds it keeps its
    GPU mapping until that job ends, so a job of the same file submitted after the GEM_CLOSE
    that no checker reads (the SDMA ring) still writes it meanwhile; only the file's own
    memory, which is unmapped and its TLB entries invalidated before it is freed (and held,
    from then, by the VM's jobs still in a ring: the test below). Once the
    holder ends, the same write faults and the BO's pages are free."""
    from spec import pm4, sdma
    from tests.kmd_sched.sched_helpers import sdma_ib
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 30)
    a = Client()
    ib, data, ibs2 = a.bo(), a.bo(), a.bo()
    kdata = a.f.handles[data.handle]
    phys = kdata.gpu_addr
    held = a.submit(a.ib(ib, pm4.wait_reg_mem(ib.addr + 0x3000, 1, 1, "EQ")))
    a.io(Request.GEM_CLOSE, uapi.GemCloseArgs(data.handle))
    assert kdata.closed and not kdata.freed and a.f.vm.find(data.addr) is not None
    later = a.submit(sdma_ib(ibs2, sdma.write_linear(data.addr, [0xC105ED])))
    assert a.wait(later)  # not ordered behind the holder (amdgpu's would be: its page-table clear)
    assert int(kmd.mem32[phys // 4]) == 0xC105ED  # the closed BO's own page, nobody else's
    ib.u32[0x3000 // 4] = 1
    assert a.wait(held)
    assert kdata.freed and a.f.vm.find(data.addr) is None
    bad = a.submit(sdma_ib(ibs2, sdma.write_linear(data.addr, [0xBAD]), 0x400))
    with pytest.raises(uapi.KmdError) as ei:
        a.wait(bad)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "VM_FAULT"
    quiet(kmd)


@pytest.mark.parametrize("how", ["mapped_after_its_cs", "unmapped_then_closed", "closed_while_an_earlier_job_holds_it"])
def test_memory_a_job_in_a_ring_may_write_is_not_handed_out_until_the_job_ends(how):
    """The MMU's invalidation drops the TLB's entries, not the writes already translated: a
    write burst whose address was translated before VM_INVALIDATE_ACK may still land after it
    (the RTL's MMU queues up to 8 write bursts' W beats behind their translated AW:
    hardware.md, "Invalidation"; tests/cosim/driver_checks.py's
    security__check_a_write_under_way_at_an_unmap_lands_before_the_page_is_handed_out). So a
    job in a ring that can reach a BO through its VM must end before the BO's pages go to
    anyone else, whether it holds the BO or not. It did not: a job holds the BOs mapped at
    its CS, and a BO mapped after it (or closed while an earlier job held it, then released
    when that job ended) was freed at once once unmapped and invalidated, while the job (an
    SDMA job, which no checker reads) could have a fill under way into it; the pages went
    to the next GEM_CREATE, another client's, where the late bursts landed. Now every BO
    whose mapping goes while a job of its VM is in a ring is held by those jobs."""
    from spec import pm4, sdma
    from tests.kmd_sched.sched_helpers import sdma_ib
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 30)
    a, b = Client(), Client()
    ib = a.bo(0x4000)
    if how == "closed_while_an_earlier_job_holds_it":
        data = a.bo(0x1000)
        kdata = a.f.handles[data.handle]
        holder = a.submit(a.ib(ib, pm4.wait_reg_mem(ib.addr + 0x3000, 1, 1, "EQ")))
        a.io(Request.GEM_CLOSE, uapi.GemCloseArgs(data.handle))  # (still mapped: the holder holds it)
    # an SDMA job in the ring, waiting on a flag; then it fills `data` (a page of its VM)
    va = data.addr if how == "closed_while_an_earlier_job_holds_it" else a.next_va
    job = a.submit(sdma_ib(ib, sdma.poll_regmem(ib.addr + 0x3100, 1, 0xFFFF_FFFF, "EQ", interval=4)
                           + sdma.constant_fill(va, EVIL, 0x1000), 0x100))
    assert any(j.seq == job for j in kmd.sdma_sched.pending)
    if how != "closed_while_an_earlier_job_holds_it":
        data = a.bo(0x1000)  # mapped after the job's CS: the job reaches it, it held nothing of it
        assert data.addr == va
        kdata = a.f.handles[data.handle]
        if how == "unmapped_then_closed":
            a.io(Request.GEM_VA, uapi.GemVaArgs(data.handle, uapi.VaOp.UNMAP, data.addr, 0, 0x1000, 0))
        a.io(Request.GEM_CLOSE, uapi.GemCloseArgs(data.handle))
    else:  # (the job, submitted after the close, does not hold it: vm.bos, Job.holds)
        assert not kdata.freed and not next(j for j in kmd.sdma_sched.pending if j.seq == job).holds(kdata)
        ib.u32[0x3000 // 4] = 1
        assert a.wait(holder)
    assert a.f.vm.find(va) is None  # unmapped, the TLB invalidated
    assert not kdata.freed, "freed while a job in a ring of its VM may still be writing it"
    new = b.bo(0x1000)
    assert not (b.phys(new) < kdata.end and kdata.gpu_addr < b.phys(new) + 0x1000)
    ib.u32[0x3100 // 4] = 1  # the fill now faults: the page is unmapped
    with pytest.raises(uapi.KmdError) as ei:
        a.wait(job)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "VM_FAULT"
    assert kdata.freed and not new.u32.any()
    a.f.close()
    assert not kmd.live_bos(a.f)
