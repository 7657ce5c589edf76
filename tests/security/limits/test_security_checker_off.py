"""A hostile program against the KMD with the CS checker off, where isolation rests on the
MMU alone (split by concept from test_security_time_and_state.py): an IB rewritten while it
runs reaches only the client's VM; a user-fence BO unmapped and closed while a job will
still signal it keeps its pages until then (no one else gets them) and is freed after; a
job that moves for ever is reset after its limit.
"""

from __future__ import annotations

import errno

import numpy as np
import pytest

import kmd_model
from kmd_model.uapi import (CsChunkFence, Domain, GemCloseArgs, GemCreateArgs, GemMmapArgs, GemVaArgs, KmdError,
                            Request, VaOp)
from spec import pm4
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import RWX, Client

from ..security_helpers import EVIL, LoopingCpModel, _start_state, assert_as_at_bring_up


def test_with_the_checker_off_an_ib_rewritten_while_it_runs_reaches_only_the_clients_vm():
    kmd = kmd_model.bind(RefModel(), job_timeout=8_000, fallback_poll=1_000, cs_check=False)
    victim = Client()
    vbo = victim.bo(0x4000)
    h = Client()
    hbo = h.bo(0x4000)
    flag = hbo.addr + 0x3000
    seq = h.submit(h.ib(hbo, pm4.wait_reg_mem(flag, 1, 1, "EQ") + pm4.pad(32)))  # NOPs after the wait
    later = pm4.write_data(victim.phys(vbo) + 0x100, [EVIL])  # the victim's page by its physical address
    hbo.u32[7:7 + len(later)] = later  # rewritten while the CP waits, then let go
    hbo.u32[flag - hbo.addr >> 2] = 1
    with pytest.raises(KmdError) as ei:
        h.wait(seq)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "VM_FAULT"
    assert ei.value.info.offset == 4 * 7  # the rewritten packet ran: the MMU stopped it
    assert not vbo.u32.any() and kmd.stats["vm_faults"] == 1
    assert victim.run(vbo, pm4.write_data(vbo.addr + 0x100, [5])) and vbo.u32[0x40] == 5


def test_with_the_checker_off_a_user_fence_bo_closed_before_its_job_signals_keeps_its_pages_until_then():
    kmd = kmd_model.bind(RefModel(), job_timeout=50_000, fallback_poll=1_000, cs_check=False)
    heaps = _start_state(kmd)
    h = Client()
    hbo = h.bo(0x1000)
    fence = h.io(Request.GEM_CREATE, GemCreateArgs(0x1000, 0, Domain.GTT, 0)).handle
    h.io(Request.GEM_VA, GemVaArgs(fence, VaOp.MAP, 0x2000_0000, 0, 0x1000, RWX))
    phys = h.f.handles[fence].gpu_addr
    seq = h.submit(h.ib(hbo, pm4.wait_reg_mem(hbo.addr + 0x800, 1, 1, "EQ")), CsChunkFence(fence, 0x10))
    h.io(Request.GEM_VA, GemVaArgs(fence, VaOp.UNMAP, 0x2000_0000))
    h.io(Request.GEM_CLOSE, GemCloseArgs(fence))
    victim = Client()
    got = [victim.io(Request.GEM_CREATE, GemCreateArgs(0x1000, 0, Domain.GTT, 0)).handle for _ in range(64)]
    assert phys not in [victim.f.handles[g].gpu_addr for g in got]  # not handed out while the job may write it
    hbo.u32[0x200] = 1
    assert h.wait(seq)
    mem32 = np.asarray(kmd.dev.mem).view("<u4")
    assert mem32[(phys + 0x10) // 4] == seq  # the fence landed in the closed BO's own page
    assert [b for b in kmd.live_bos(h.f) if b.gpu_addr == phys] == []  # freed once signalled
    for g in got:
        assert not victim.io(Request.GEM_MMAP, GemMmapArgs(g)).view.any()
    for c in (h, victim):
        c.f.close()
    assert_as_at_bring_up(kmd, heaps)


def test_with_the_checker_off_a_job_that_moves_for_ever_is_reset_after_its_limit():
    """Unchecked, a CHAIN loop keeps the fetch counter moving, which restarted the job timer
    at every look: the ring was the hostile job's for ever and every other client's WAIT_CS
    ran out (ETIME). Now it runs unchecked_job_timeouts job timeouts at most: the time rule,
    the backstop (its 4,096 dwords a look stay far under the dword rule's 2 * max_job_dw)."""
    dev = LoopingCpModel()
    kmd = kmd_model.bind(dev, job_timeout=10_000, fallback_poll=1_000, cs_check=False, unchecked_job_timeouts=8)
    h = Client()
    hbo = h.bo(0x1000)
    seq = h.submit(h.ib(hbo, pm4.wait_reg_mem(hbo.addr + 0x800, 1, 1, "EQ")))
    dev.looping = True
    victim = Client()
    vbo = victim.bo(0x1000)
    t0 = dev.now()
    vseq = victim.submit(victim.ib(vbo, pm4.write_data(vbo.addr + 0x100, [5])))
    assert victim.wait(vseq, 1_000_000) and vbo.u32[0x40] == 5
    assert 8 * 10_000 <= dev.now() - t0 < 10 * 10_000  # the limit, and a timer period more at most
    with pytest.raises(KmdError) as ei:
        h.wait(seq)
    e = ei.value
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT"
    assert e.message.startswith("WAIT_CS: job 0x1 timed out on gfx: ran ")
    assert "cycles unchecked (cs_check off), more than 8 job timeouts" in e.message
    assert kmd.stats["job_timeouts"] == 1
