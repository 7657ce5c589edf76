"""What closing a file costs the driver's lock (hostile-20).

A file's close releases every BO it still holds, in one hold of the driver's lock. Each BO
still mapped was released as a GEM_CLOSE releases one: its mappings out of the VM, then a
TLB invalidation of the VM's VMID (an MMIO write and its acknowledge) and a walk of the
VM's jobs in the rings, each BO on its own. A client that mapped 2,000 BOs and closed the
file held the lock 305 ms (2,001 invalidations; the model's 8,000 pages of GTT as BOs over
a second), and could open, map and close again at will. The mappings of the BOs a close
releases go together now, with one invalidation for all of them (`Kmd._close_bos`).
"""

from __future__ import annotations

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import Domain, Request
from spec import pm4
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import RWX, Client


def _mapped_bos(c: Client, n: int) -> list[int]:
    out = []
    for _ in range(n):
        h = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, Domain.GTT, 0)).handle
        c.io(Request.GEM_VA, uapi.GemVaArgs(h, uapi.VaOp.MAP, c.next_va, 0, 0x1000, RWX))
        c.next_va += 0x1000
        out.append(h)
    return out


def test_closing_a_file_invalidates_its_tlb_once_for_all_its_mapped_bos():
    """A file with a VMID (a job ran) and 500 BOs mapped, closed: one TLB invalidation (501
    before, one a BO), the device's time moved by one; every BO freed, the heap as before
    the file made them, and a new client's job runs."""
    kmd = kmd_model.bind(RefModel())
    gtt = kmd.bo.heaps[Domain.GTT]
    holes0 = gtt.holes
    c = Client()
    bo = c.bo(0x1000)
    c.run(bo, pm4.write_data(bo.addr + 0x100, [1]))
    _mapped_bos(c, 500)
    vmid = c.f.vm.vmid
    assert vmid is not None and gtt.used >= 500 * 0x1000
    flushes, t0 = kmd.vmids.flushes, kmd.dev.now()
    c.f.close()
    assert kmd.vmids.flushes - flushes == 1, kmd.vmids.flushes - flushes
    assert kmd.dev.now() - t0 < 100  # (one invalidation's handshake: 16 cycles on the model)
    assert not kmd.live_bos() and gtt.holes == holes0
    v = Client()
    vbo = v.bo(0x1000)
    v.run(vbo, pm4.write_data(vbo.addr + 0x100, [7]))
    assert vbo.u32[0x40] == 7


def test_a_closed_files_bos_a_job_in_a_ring_may_write_are_held_until_it_ends():
    """The one invalidation keeps what one a BO did for a job of the VM still in a ring: the
    BOs the close unmapped (mapped after its CS: it held none of them) are held by it (the
    MMU's writes already translated may land after the invalidation), freed only as it ends
    (Kmd.hold_for_jobs_in_rings)."""
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 40, fallback_poll=1_000)
    c = Client()
    bo = c.bo(0x2000)
    flag = c.phys(bo) // 4 + 0x400
    c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x1000, 1, 1, "EQ")))
    kmd.service()
    assert any(j.vm is c.f.vm for s in kmd.scheds for j in s.pending)
    bos = [c.f.handles[h] for h in _mapped_bos(c, 20)]  # (mapped after the CS: the job holds none yet)
    assert not any(b.busy for b in bos)
    c.f.close()
    assert all(not b.freed for b in bos)  # (held by the job in the ring)
    kmd.mem32[flag] = 1
    v = Client()  # (its job runs behind the held one, on the same ring)
    vbo = v.bo(0x1000)
    v.run(vbo, pm4.write_data(vbo.addr + 0x100, [7]))
    kmd.service()
    assert all(b.freed for b in bos) and kmd.live_bos() == [v.f.handles[vbo.handle]]
