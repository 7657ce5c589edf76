"""The KMD's GPU virtual memory (kmd_model/vm.py): GEM_VA with every bad argument's errno
and message, page tables in memory as spec/vm.py defines them, the VMID manager (grab,
reuse, steal with a TLB flush, waiting when every VMID is busy), INFO VM_FAULT and the
reset path a VM fault takes. `check_*(dev)` bodies run on the model here and on the RTL
(tests/test_rtl_drivers.py).
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

from .test_kmd_ioctl import RWX, Client, expect

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
    for bad_va, size, off in ((va + 4, 0x1000, 0), (va, 0x1800, 0), (va, 0x1000, 0x10)):
        expect(errno.EINVAL, f"{V}: va_address {bad_va:#x}, offset_in_bo {off:#x} and map_size {size:#x} must be "
               "multiples of the page size (0x1000)", _va, a, bo, VaOp.MAP, bad_va, size, off)
    expect(errno.EINVAL, f"{V}: map_size must be > 0, not 0", _va, a, bo, VaOp.MAP, va, 0)
    expect(errno.EINVAL, f"{V}: va_address must be >= 0, not -0x1000", _va, a, bo, VaOp.MAP, -0x1000)
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
    guilty and the device carries on for everyone."""
    kmd = kmd_model.bind(dev, cs_check=False)
    a, b = Client(), Client()
    abo, bbo = a.bo(0x2000), b.bo(0x1000)
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
    assert s["vm_faults"] == 1 and s["resets"] == 1
    if kmd.ih:
        assert s["ih_by_source"].get("VM_FAULT") == 1 and "CP_ERROR" not in s["ih_by_source"]
    expect(errno.ECANCELED, f"CS: context {a.ctx} was reset: {e.info.message}", a.submit, CsChunkIb(8, abo.handle))


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


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_a_device_without_mmu_is_refused():
    with pytest.raises(uapi.KmdError, match=r"^ENODEV: this KMD needs a device with an MMU \(CAPS.VM reads 0\)$"):
        kmd_model.bind(RefModel(vm=False))


def test_jobs_wait_for_a_free_vmid():
    """With every VMID held by a running job, a 16th VM's job waits in the queue until one
    of them ends, then runs with that VMID."""
    dev = RefModel()
    kmd = kmd_model.bind(dev, cs_check=False)
    clients = [Client() for _ in range(16)]
    bos = [c.bo(0x1000) for c in clients]
    seqs = [c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ"))) for c, bo in zip(clients[:15], bos)]
    last = clients[15].submit(clients[15].ib(bos[15], pm4.write_data(bos[15].addr + 0x900, [5])))
    assert len(kmd.sched.queue) == 1 and clients[15].f.vm.vmid is None  # no VMID is idle
    first = clients[0].f.vm.vmid
    bos[0].u32[0x200] = 1  # the first job ends: its VMID is idle
    assert clients[0].wait(seqs[0])
    kmd.service()
    assert not kmd.sched.queue and clients[15].f.vm.vmid == first and clients[0].f.vm.vmid is None
    for bo in bos[1:15]:
        bo.u32[0x200] = 1
    assert all(c.wait(s) for c, s in zip(clients, seqs))
    assert clients[15].wait(last) and bos[15].u32[0x240] == 5
