"""The KMD's GPU virtual memory (kmd_model/mm/vm.py): GEM_VA with every bad argument's errno
and message, page tables in memory as spec/vm.py defines them, mappings at their edges
(CLEAR inside one, find and translate, an offset in the BO, an IB by handle), maps over a
closed BO still in use, INFO VM_FAULT and the reset path a VM fault takes. `check_*(dev)`
bodies run on the model here and on the RTL (tests/cosim/test_rtl_drivers.py). The VMID
manager and the TLB flushes: test_kmd_vmids_and_tlb.py.
"""

from __future__ import annotations

import errno

import pytest

import kmd_model
from kmd_model import regs, uapi
from kmd_model.uapi import CsChunkIb, InfoQuery, Request, VaOp, VmFlags
from spec import pm4
from spec import vm as vm_spec
from testbench.refmodel import RefModel

from ..test_kmd_ioctl import RWX, Client, expect

R, W = VmFlags.READABLE, VmFlags.WRITEABLE


def _va(c: Client, handle: int, op: int, va: int, size: int = 0x1000, offset: int = 0, flags: int = RWX):
    return c.io(Request.GEM_VA, uapi.GemVaArgs(handle, op, va, offset, size, flags))


def check_gem_va_errors(dev):
    """Hostile arguments: each refused with its errno and message, nothing changed."""
    kmd = kmd_model.bind(dev)
    a, b = Client(), Client()
    bo = a.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x4000)).handle
    theirs = b.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000)).handle
    vm = a.f.vm
    lo, hi = vm.va_start, vm.va_end
    va = lo + 0x100000
    V = "GEM_VA"
    expect(errno.EINVAL, f"{V}: operation must be MAP (1), UNMAP (2), CLEAR (3) or REPLACE (4), not 9",
           _va, a, bo, 9, va)
    expect(errno.EINVAL, f"{V}: unknown flags 0x11", _va, a, bo, VaOp.MAP, va, 0x1000, 0, 0x11)
    expect(errno.ENOENT, f"{V}: no BO with handle 99", _va, a, 99, VaOp.MAP, va)
    # handles are per file: another file's BO is not there to map
    expect(errno.ENOENT, f"{V}: no BO with handle {theirs + 1}", _va, a, theirs + 1, VaOp.MAP, va)
    expect(errno.ENOENT, f"{V}: no BO with handle 2", _va, a, 2, VaOp.MAP, va)
    # each off by a page's lowest byte too (a mask that left out bit 0 would let them through)
    for bad_va, size, off in ((va + 4, 0x1000, 0), (va, 0x1800, 0), (va, 0x1000, 0x10),
                              (va + 1, 0x1000, 0), (va, 0x1001, 0), (va, 0x1000, 1)):
        expect(errno.EINVAL, f"{V}: va_address {bad_va:#x}, offset_in_bo {off:#x} and map_size {size:#x} must be "
               "multiples of the page size (0x1000)", _va, a, bo, VaOp.MAP, bad_va, size, off)
    expect(errno.EINVAL, f"{V}: map_size must be > 0, not 0", _va, a, bo, VaOp.MAP, va, 0)
    # amdgpu_gem_va_ioctl's order: the range first (before the handle), then the handle
    # (ENOENT) before the operation's own checks (alignment, a size of 0: amdgpu_vm_bo_map's).
    # An unknown handle with a size of 0 or a misaligned address was EINVAL, with a range
    # outside the VM ENOENT (tests/security/memory/test_security_mm_state.py found it)
    for op in (VaOp.MAP, VaOp.REPLACE):
        expect(errno.ENOENT, f"{V}: no BO with handle 99", _va, a, 99, op, va, 0)
        expect(errno.ENOENT, f"{V}: no BO with handle 99", _va, a, 99, op, va + 4)
        expect(errno.ENOENT, f"{V}: no BO with handle 99", _va, a, 99, op, va, 0x1000, 0x10)
        expect(errno.EINVAL, f"{V}: [{hi:#x}, {hi + 0x1000:#x}) is outside the VM's range [{lo:#x}, {hi:#x})",
               _va, a, 99, op, hi)
        expect(errno.EINVAL, f"{V}: [0x0, 0x1000) is outside the VM's range [{lo:#x}, {hi:#x})", _va, a, 99, op, 0)
    expect(errno.EINVAL, f"{V}: va_address must be >= 0, not -0x1000", _va, a, bo, VaOp.MAP, -0x1000)
    expect(errno.EINVAL, f"{V}: offset_in_bo must be >= 0, not -0x1000", _va, a, bo, VaOp.MAP, va, 0x1000, -0x1000)
    for bad in (0, lo - 0x1000, hi, hi - 0x1000):  # the null range, below, above, running over the top
        expect(errno.EINVAL, f"{V}: [{bad:#x}, {bad + 0x2000:#x}) is outside the VM's range [{lo:#x}, {hi:#x})",
               _va, a, bo, VaOp.MAP, bad, 0x2000)
    expect(errno.EINVAL, f"{V}: offset_in_bo 0x3000 + map_size 0x2000 runs past the end of BO {bo} (0x4000 bytes)",
           _va, a, bo, VaOp.MAP, va, 0x2000, 0x3000)
    _va(a, bo, VaOp.MAP, va, 0x2000)
    for over in (va, va + 0x1000, va - 0x1000):
        expect(errno.EINVAL, f"{V}: [{over:#x}, {over + 0x2000:#x}) overlaps the mapping [{va:#x}, {va + 0x2000:#x}) "
               f"of fd{a.f.fd}:{bo}", _va, a, bo, VaOp.MAP, over, 0x2000)
    expect(errno.ENOENT, f"{V}: no mapping of BO {bo} starts at {va + 0x1000:#x}", _va, a, bo, VaOp.UNMAP,
           va + 0x1000)
    other = a.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000)).handle
    expect(errno.ENOENT, f"{V}: no mapping of BO {other} starts at {va:#x}", _va, a, other, VaOp.UNMAP, va)
    # the other file's VM is its own: the same address is free there
    _va(b, theirs, VaOp.MAP, va)
    assert [m.va for m in vm.maps] == [va] and kmd.stats["ioctl_errors"] >= 19
    for value in (True, 1.5, "1"):
        with pytest.raises(uapi.KmdError) as ei:
            _va(a, bo, VaOp.MAP, value)
        assert ei.value.errno == errno.EINVAL


def check_page_tables_in_memory(dev):
    """MAP writes spec/vm.py's entries (a directory entry, then the PTEs with the flags),
    UNMAP clears them and invalidates the VMID's TLB entries; the CPU sees the BO's bytes
    where the GPU writes them by virtual address."""
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo(0x3000, vm_flags=R | W)
    vm = c.f.vm
    r64 = lambda a: int(dev.mem[a:a + 8].view("<u8")[0])  # noqa: E731
    for k in range(3):
        w = vm_spec.walk(r64, vm.root.gpu_addr, bo.addr + 0x1000 * k, vm_spec.Access.WRITE)
        assert (w.phys, w.level, w.cause) == (c.phys(bo) + 0x1000 * k, 1, None)
        assert w.flags & (vm_spec.READABLE | vm_spec.WRITEABLE) and not w.flags & vm_spec.EXECUTABLE
    assert vm_spec.walk(r64, vm.root.gpu_addr, bo.addr, vm_spec.Access.FETCH).cause == vm_spec.Cause.PERMISSION
    ib = c.bo(0x1000)
    c.run(ib, pm4.write_data(bo.addr + 0x1ffc, [0x11, 0x22]))  # across a page boundary
    assert bo.u32[0x7FF:0x801].tolist() == [0x11, 0x22]
    flushes = kmd.vmids.flushes
    c.io(Request.GEM_VA, uapi.GemVaArgs(bo.handle, VaOp.UNMAP, bo.addr))
    assert kmd.vmids.flushes == flushes + 1
    assert vm_spec.walk(r64, vm.root.gpu_addr, bo.addr, None).cause == vm_spec.Cause.INVALID


def check_vmids(dev):
    """Jobs of one VM reuse its VMID without a flush; 16 VMs take the 15 VMIDs, the 16th
    steals the least recently used idle one (a flush); each job's IB names its VMID."""
    kmd = kmd_model.bind(dev)
    clients = [Client() for _ in range(16)]
    bos = [c.bo(0x1000) for c in clients]
    vmids = []
    for c, bo in zip(clients, bos):
        c.run(bo, pm4.write_data(bo.addr + 0x800, [c.f.fd]))
        vmids.append(c.f.vm.vmid)
    assert sorted(vmids[:15]) == list(range(1, 16)) and vmids[15] == vmids[0] and clients[0].f.vm.vmid is None
    assert (kmd.vmids.grabs, kmd.vmids.steals) == (16, 1)
    flushes = kmd.vmids.flushes
    clients[15].run(bos[15], pm4.write_data(bos[15].addr + 0x804, [7]), offset=0x100)
    assert kmd.vmids.flushes == flushes and kmd.vmids.grabs == 16  # reused: no flush
    assert all(bo.u32[0x200] == c.f.fd for c, bo in zip(clients, bos))
    clients[0].run(bos[0], pm4.write_data(bos[0].addr + 0x804, [8]), offset=0x100)  # steals back
    assert clients[0].f.vm.vmid is not None and kmd.vmids.steals == 2
    m = kmd.mmio
    n = clients[0].f.vm.vmid
    assert m.read(regs.VM_CONTEXT_CNTL, n) == 1 and \
        m.read(regs.VM_CONTEXT_PT_BASE_LO, n) == clients[0].f.vm.root.gpu_addr & 0xFFFF_F000
    assert m.read(regs.VM_CONTEXT_CNTL, 0) == 0  # the kernel's VMID stays physical


def check_vm_fault_reported(dev):
    """A job touching an unmapped page: WAIT_CS names the fault, INFO VM_FAULT of the file
    gives address, VMID and kind, the UTCL2 entry went through the IH ring, the context is
    guilty on gfx, queue 0 alone is reset (CP_QUEUE_RESET.Q0) and the device carries on for
    everyone, the guilty context too."""
    kmd = kmd_model.bind(dev, cs_check=False)
    a, b = Client(), Client()
    abo, bbo = a.bo(0x2000), b.bo(0x1000)
    seen = []
    kmd.observers.append(lambda event, fields: seen.append((event, fields)))
    hole = abo.addr + 0x2000 + 0x40  # the guard page after the BO
    seq = a.submit(a.ib(abo, pm4.nop(2) + pm4.release_mem(hole, 1)))
    e = expect(errno.ECANCELED, f"WAIT_CS: VM fault: WRITE at {hole:#x} in RELEASE_MEM (VMID {a.f.vm.vmid}, "
               f"no valid entry at page-table level 1) at IB+0xc, context {a.ctx}", a.wait, seq)
    assert (e.info.code, e.info.addr, e.info.offset) == ("VM_FAULT", hole, 0xC)
    f = a.io(Request.INFO, uapi.InfoArgs(InfoQuery.VM_FAULT))
    st = regs.VM_FAULT_STATUS
    assert f == uapi.VmFaultInfo(hole, st.VMID.put(a.f.vm.vmid) | st.LEVEL.put(1) | st.ACCESS.put(vm_spec.Access.WRITE),
                                 a.f.vm.vmid, "WRITE", "INVALID", 1), f
    assert b.io(Request.INFO, uapi.InfoArgs(InfoQuery.VM_FAULT)) == uapi.VmFaultInfo()  # b's VM had none
    b.run(bbo, pm4.write_data(bbo.addr + 0x100, [0xB]))  # the device carries on
    assert bbo.u32[0x40] == 0xB
    s = kmd.kmd_stats()
    assert s["vm_faults"] == 1 and s["resets"] == 0
    # the gfx ring's fault, recovered once by queue 0's reset: not an error of the CP's second queue
    assert s["cp_errors"] == 1 and s["queue_resets"] == 1
    assert kmd.recovery_log == [("gfx", "error"), ("gfx", "queue_reset")]
    errors = [f for ev, f in seen if ev == "gpu_error"]  # observers are told the guilty job
    assert [(f["job"].seq, f["job"].ctx.id, f["info"].code) for f in errors] == [(seq, a.ctx, "VM_FAULT")]
    if kmd.ih:
        assert s["ih_by_source"].get("VM_FAULT") == 1 and "CP_ERROR" not in s["ih_by_source"]
    assert query_state(a).ring_status == {"gfx": uapi.ResetStatus.GUILTY}
    assert a.wait(a.run(abo, pm4.write_data(abo.addr + 0x100, [0xA]), 0x400)) and abo.u32[0x40] == 0xA


def query_state(c: Client) -> uapi.CtxOut:
    return c.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.QUERY_STATE, c.ctx))


def check_close_releases_everything(dev):
    """Closing a file with mappings and jobs: page tables, BOs and the VMID all go once the
    jobs are done; the kernel's own BOs stay."""
    kmd = kmd_model.bind(dev)
    kernel = len(kmd.bo.live_bos(None))
    c = Client()
    bos = [c.bo(0x1000 * (k + 1)) for k in range(4)]
    seq = c.submit(c.ib(bos[0], pm4.write_data(bos[3].addr, [1])))
    assert len(kmd.bo.live_bos(None)) == kernel + 2  # the root and one page table
    assert c.wait(seq)
    c.f.close()
    assert kmd.live_bos() == [] and len(kmd.bo.live_bos(None)) == kernel
    assert all(v.owner is None for v in kmd.vmids.ids)


CHECKS = [check_gem_va_errors, check_page_tables_in_memory, check_vmids, check_vm_fault_reported,
          check_close_releases_everything]


def _vram(c: Client):
    return c.io(Request.INFO, uapi.InfoArgs(InfoQuery.MEMORY)).vram


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_a_device_without_mmu_is_refused():
    kmd_model.unbind()  # (nothing bound before: the message is the bring-up's alone)
    with pytest.raises(uapi.KmdError, match=r"^ENODEV: this KMD needs a device with an MMU \(CAPS.VM reads 0\)$"):
        kmd_model.bind(RefModel(vm=False))


@pytest.mark.parametrize("lo, hi", [(1, 2), (0, 1), (3, 4), (1, 3)])
def test_clear_inside_a_mapping_keeps_both_ends(lo, hi):
    """GEM_VA CLEAR of pages [lo, hi) of a 4-page mapping: what lies below and above stays
    mapped to the same bytes of the BO (the upper part at its own offset in it), in the
    page tables as in the KMD's list; the cleared pages are refused."""
    kmd_model.bind(RefModel())
    c = Client()
    bo, ib = c.bo(0x4000), c.bo(0x1000)
    v, P = bo.addr, 0x1000
    c.io(Request.GEM_VA, uapi.GemVaArgs(0, VaOp.CLEAR, v + lo * P, 0, (hi - lo) * P, 0))
    kept = [(m.va, m.size, m.offset) for m in c.f.vm.maps if m.bo is c.f.handles[bo.handle]]
    assert kept == [(v, lo * P, 0)] * (lo > 0) + [(v + hi * P, (4 - hi) * P, hi * P)] * (hi < 4)
    for page in range(4):
        words = pm4.write_data(v + page * P + 8, [0x100 + page])
        if lo <= page < hi:
            expect(errno.EINVAL, f"CS: WRITE_DATA at IB+0x0 ({ib.addr:#x}) writes [{v + page * P + 8:#x}, "
                   f"{v + page * P + 12:#x}), outside every mapping of context {c.ctx}", c.submit, c.ib(ib, words))
        else:
            c.run(ib, words)
    assert [int(bo.u32[page * P // 4 + 2]) for page in range(4)] == [
        0 if lo <= page < hi else 0x100 + page for page in range(4)]


def test_reprs_name_the_range_the_bo_and_the_vmid():
    """What the KMD's logs and a debugger show of a VM and its mappings; the VMID counters."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x2000, vm_flags=VmFlags.READABLE | VmFlags.WRITEABLE)
    m = c.f.vm.find(bo.addr)
    assert repr(m) == (f"Mapping([{bo.addr:#x}, {bo.addr + 0x2000:#x}) -> fd{c.f.fd}:{bo.handle}+0x0 "
                       f"{VmFlags.READABLE | VmFlags.WRITEABLE!r})")
    assert repr(c.f.vm) == f"Vm(fd {c.f.fd}, 1 mappings, VMID None)"  # no job yet: no VMID held
    c.run(c.bo(0x1000), pm4.nop(2))
    assert repr(c.f.vm) == f"Vm(fd {c.f.fd}, 2 mappings, VMID {c.f.vm.vmid})" and c.f.vm.vmid >= 1
    c.run(c.bo(0x1000), pm4.nop(2))  # the VMID is still its own: no second grab
    s = kmd.kmd_stats()
    assert (s["vmid_grabs"], s["vmid_steals"]) == (1, 0)
    # the crash report lists the VM's page tables among the kernel's BOs by these names
    assert sorted(b.name for b in kmd.bo.live_bos(None) if "table" in b.name) == ["vm L1 table",
                                                                                  f"vm fd{c.f.fd} L0 table"]


def test_find_and_translate_at_every_edge():
    """Vm.find / translate (how the KMD reads what a job names: the diagnosis, crash
    reports): the first and last byte of a mapping find it; the byte after it, the hole
    between two mappings and the range below the lowest find nothing; a range that runs
    past a mapping's end translates to nothing."""
    kmd_model.bind(RefModel())
    c = Client()
    a, b = c.bo(0x2000), c.bo(0x1000)  # (a guard page apart)
    vm = c.f.vm
    pa = c.phys(a)
    assert vm.find(a.addr).va == a.addr and vm.find(a.addr + 0x1FFF).va == a.addr
    assert vm.translate(a.addr + 0x1FFC, 4) == pa + 0x1FFC and vm.translate(a.addr, 0x2000) == pa
    assert vm.find(a.addr + 0x2000) is None and vm.find(b.addr - 1) is None and vm.find(a.addr - 1) is None
    assert vm.find(b.addr + 0x1000) is None and vm.find(0) is None
    assert vm.translate(a.addr + 0x1FFC, 8) is None and vm.translate(a.addr - 4, 4) is None
    assert vm.translate(b.addr + 0x1000, 4) is None


def test_map_over_a_closed_bo_still_in_use_waits_for_it():
    """A BO closed while a job uses it stays mapped until the job ends (deferred unmap); a
    MAP over its range waits for that, then maps the new BO there: the job's write went to
    the old BO, what comes after reaches the new one."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    ib, flag, old = c.bo(0x1000), c.bo(0x1000), c.bo(0x1000)
    va = old.addr
    seq = c.submit(c.ib(ib, pm4.wait_reg_mem(flag.addr, 1, 1, "EQ") + pm4.write_data(va + 8, [7])))
    c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(old.handle))
    assert c.f.vm.find(va) is not None  # still mapped: the job may reach it
    new = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000))
    flag.u32[0] = 1  # the job can end now; the MAP below waits for it
    c.io(Request.GEM_VA, uapi.GemVaArgs(new.handle, VaOp.MAP, va, 0, 0x1000, RWX))
    assert kmd.fence_drv.sync_seq and c.wait(seq, 10)
    assert c.f.vm.find(va).bo is c.f.handles[new.handle]
    c.run(ib, pm4.write_data(va + 12, [9]), offset=0x100)
    pa = c.f.handles[new.handle].gpu_addr
    assert kmd.dev.mem[pa + 8:pa + 16].view("<u4").tolist() == [0, 9]  # the old BO took the 7


def test_map_over_a_closed_bo_whose_job_hangs_waits_for_the_reset():
    """The same with a job that never ends by itself: the MAP waits (up to 2 * job_timeout)
    while the job timer catches the hang and the reset cancels the job, which frees the old
    BO; then it maps the new BO there, rather than refusing the range as taken."""
    t_out = 5_000
    kmd = kmd_model.bind(RefModel(), job_timeout=t_out)
    c = Client()
    ib, flag, old = c.bo(0x1000), c.bo(0x1000), c.bo(0x1000)
    va = old.addr
    c.submit(c.ib(ib, pm4.wait_reg_mem(flag.addr, 1, 1, "EQ") + pm4.write_data(va + 8, [7])))
    c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(old.handle))
    new = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000))
    kmd.dev.delay(t_out // 2)
    c.io(Request.GEM_VA, uapi.GemVaArgs(new.handle, VaOp.MAP, va, 0, 0x1000, RWX))
    assert kmd.stats["job_timeouts"] == 1 and c.f.vm.find(va).bo is c.f.handles[new.handle]


@pytest.mark.parametrize("first", ["readable only", "ends before the IB"])
def test_an_ib_by_handle_runs_from_the_mapping_it_lies_in_whole_and_executable(first):
    """A BO mapped at two VAs, the lower one a reader's (READABLE only) or covering only the
    IB's first part: a CS naming the IB by handle and offset runs it from the executable
    mapping it lies inside whole (uapi.CsChunkIb: "the BO must be mapped at that offset; the
    IB lies inside one EXECUTABLE mapping"). The CS took the first mapping by address holding
    the offset and was refused ("... without EXECUTABLE", "... runs past the end of its
    mapping") while the BO was mapped whole and executable at the other VA
    (tests/security/memory/test_security_mm_state.py found it)."""
    kmd_model.bind(RefModel())
    c = Client()
    h = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x2000)).handle
    u32 = c.io(Request.GEM_MMAP, uapi.GemMmapArgs(h)).view.view("<u4")
    low, high = 0x20_0000, 0x40_0000
    if first == "readable only":
        c.io(Request.GEM_VA, uapi.GemVaArgs(h, VaOp.MAP, low, 0, 0x2000, VmFlags.READABLE))
    else:
        c.io(Request.GEM_VA, uapi.GemVaArgs(h, VaOp.MAP, low, 0, 0x1000, RWX))
    c.io(Request.GEM_VA, uapi.GemVaArgs(h, VaOp.MAP, high, 0, 0x2000, RWX))
    off = 0xFF0  # (8 dwords: across the first page's end)
    dw = pm4.write_data(high + 0x1800, [0x1234])
    dw += pm4.pad(-len(dw) % 8)
    u32[off // 4:off // 4 + len(dw)] = dw
    assert c.wait(c.submit(uapi.CsChunkIb(len(dw), handle=h, offset=off)))
    assert u32[0x1800 // 4] == 0x1234
    # no mapping holds it whole and executable: the first is refused, as before
    c.io(Request.GEM_VA, uapi.GemVaArgs(h, VaOp.UNMAP, high, 0, 0x2000, 0))
    want = (f"CS: IB at {low + off:#x}+0x20 is in a mapping of context {c.ctx} without EXECUTABLE"
            if first == "readable only" else
            f"CS: IB at {low + off:#x}+0x20 runs past the end of its mapping of context {c.ctx} at {low + 0x1000:#x}")
    expect(errno.EINVAL, want, c.submit, uapi.CsChunkIb(len(dw), handle=h, offset=off))


def test_a_mapping_at_an_offset_in_its_bo():
    """GEM_VA MAP of a BO's second page: the VA reaches that page (in the page tables, in the
    checker's copies and in translate), not the first."""
    kmd_model.bind(RefModel())
    c = Client()
    c.bo(0x1000)
    bo = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x2000))
    view = c.io(Request.GEM_MMAP, uapi.GemMmapArgs(bo.handle)).view.view("<u4")
    va = c.next_va
    c.io(Request.GEM_VA, uapi.GemVaArgs(bo.handle, VaOp.MAP, va, 0x1000, 0x1000, RWX))
    pa = c.f.handles[bo.handle].gpu_addr
    assert c.f.vm.translate(va + 0x10, 4) == pa + 0x1010
    view[0x400:0x408] = pm4.write_data(va + 0x20, [0x5A]) + pm4.pad(3)  # an IB in the mapped page
    assert c.wait(c.submit(CsChunkIb(8, gpu_addr=va)))
    assert int(view[0x408]) == 0x5A and not view[:0x400].any()


def test_page_tables_do_not_strand_vram_between_user_bos():
    """A page table is a 4 KiB kernel BO in VRAM that lives as long as its VM. Placed first
    fit among user BOs, each one a client's map needed stayed between two of them when they
    were freed: 8 BOs of 64 KiB mapped 2 MiB apart, then closed, left 512 KiB of VRAM in
    8 holes of 64 KiB, outside the largest. Tables come from the top of VRAM (as amdgpu places VRAM
    BOs the CPU need not reach, TTM_PL_FLAG_TOPDOWN), so the BOs' memory is whole again."""
    kmd_model.bind(RefModel())
    c = Client()
    v0 = _vram(c)
    handles = []
    for k in range(8):
        h = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(64 << 10, 0, uapi.Domain.VRAM)).handle
        _va(c, h, VaOp.MAP, 0x1000_0000 + k * (2 << 20), 64 << 10)  # a new page table each
        handles.append(h)
    assert _vram(c).used - v0.used == 8 * ((64 << 10) + vm_spec.TABLE_BYTES)
    for h in handles:
        c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(h))
    v1 = _vram(c)
    assert v1.used - v0.used == 8 * vm_spec.TABLE_BYTES  # the tables stay, as amdgpu's do
    assert v0.largest_free - v1.largest_free == 8 * vm_spec.TABLE_BYTES  # and no more is lost
    assert v1.total - v1.used - v1.largest_free == v0.total - v0.used - v0.largest_free
