"""Fences, waits and ring space: wrap-safe seqnos across 2^32, a WAIT_REG_MEM released by
a later CPU write, the fallback poll when interrupts are lost, a ring that fills up,
BOs kept alive by running jobs. Bodies are `check_*(dev)`, as in test_kmd_ioctl.py."""

from __future__ import annotations

import errno

import pytest

import kmd_model
from kmd_model import regs, uapi
from kmd_model.fence import seq_after, seq_diff, seq_passed
from kmd_model.uapi import CsChunkFence, Request
from spec import pm4
from testbench.refmodel import RefModel

from .test_kmd_ioctl import Client, expect

WRAP_START = 2**32 - 500


def test_seq_compare():
    assert seq_after(1, 0) and not seq_after(0, 1) and not seq_after(5, 5)
    assert seq_after(0, 0xFFFF_FFFF) and seq_after(3, 0xFFFF_FFF0)  # across the wrap
    assert not seq_after(0xFFFF_FFF0, 3)
    assert seq_diff(0x8000_0000, 0) == -(2**31)  # exactly half the space apart: "earlier"
    assert seq_passed(0xFFFF_FFFF, 0) and seq_passed(7, 7) and not seq_passed(8, 7)


def check_fence_wrap(dev):
    """1100 jobs whose ring and context seqnos start 500 below 2^32."""
    kmd = kmd_model.bind(dev, initial_seq=WRAP_START)
    c = Client()
    bo = c.bo(0x10000)
    uf = 0xF000
    n = 1100
    seqs = []
    # a ring of 4096 dwords holds ~170 jobs: submit in bursts, waiting on the last of each
    for i in range(n):
        ib = c.ib(bo, pm4.write_data(bo.addr + 0x8000 + 4 * (i % 0x1000), [i]), offset=0x40 * (i % 0x200))
        seqs.append(c.submit(ib, CsChunkFence(bo.handle, uf)))
        if i % 100 == 99:
            assert c.wait(seqs[-1])
            assert bo.u32[uf // 4] == seqs[-1]
    assert c.wait(seqs[-1])
    assert seqs[0] == WRAP_START and seqs[499] == 0xFFFF_FFFF and seqs[500] == 0 and seqs[-1] == 599
    assert bo.u32[0x2000:0x2000 + n].tolist() == list(range(n))
    assert bo.u32[uf // 4] == 599
    assert c.wait(seqs[0], 0) and c.wait(seqs[499], 0)  # from before the wrap: long signalled
    expect(errno.EINVAL, "WAIT_CS: context 1 never submitted seqno 0x258 (last is 0x257)", c.io,
           Request.WAIT_CS, uapi.WaitCsArgs(c.ctx, 600, 10))
    s = kmd.kmd_stats()
    # the hardware fences wrapped too (the IB test used WRAP_START)
    assert s["fences_emitted"] == n + 1 and s["last_fence"] == (WRAP_START + n) & 0xFFFF_FFFF
    assert s["fences_signalled"] == n + 1 and s["jobs_retired"] == n and s["resets"] == 0


def check_wait_reg_mem_released_later(dev):
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo()
    flag, out = bo.addr + 0x3000, bo.addr + 0x3100
    seq = c.submit(c.ib(bo, pm4.write_data(out, [1]) + pm4.wait_reg_mem(flag, 0xAB, 0xFF, "EQ", poll_interval=8)
                        + pm4.write_data(out + 4, [2]) + pm4.release_mem(out + 8, 3)))
    expect(errno.ETIME, f"WAIT_CS: seqno {seq:#x} of context 1 not signalled after 3000 cycles", c.wait, seq, 3000)
    assert bo.u32[0xC40:0xC43].tolist() == [1, 0, 0]  # stopped in the wait
    assert regs.STATUS.WAITING.get(kmd.mmio.read(regs.STATUS))
    assert not c.wait(seq, 0)  # a poll is not an error
    bo.u32[0xC00] = 0x1AA  # wrong value under the mask: still waiting
    with pytest.raises(uapi.KmdError):
        c.wait(seq, 1000)
    bo.u32[0xC00] = 0x2AB  # (0x2AB & 0xFF) == 0xAB
    assert c.wait(seq, 10_000)
    assert bo.u32[0xC40:0xC43].tolist() == [1, 2, 3]
    assert kmd.stats["resets"] == 0


def check_fallback_poll(dev):
    """With the interrupt masked, fences still signal through the fallback poll."""
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo()
    kmd.mmio.write(regs.INT_ENABLE, 0)  # lose every interrupt from here on
    irqs = kmd.stats["interrupts"]
    # (the flag is not in the IB: on the RTL the CP may not have fetched the IB yet)
    seq = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ") + pm4.write_data(bo.addr + 0x100, [5])))
    bo.u32[0x200] = 1  # the job finishes some time after the CS, with nobody told
    assert c.wait(seq, 10 * kmd.params.fallback_poll)
    assert bo.u32[0x40] == 5
    assert kmd.stats["interrupts"] == irqs and kmd.stats["fallback_polls"] >= 1


def check_ring_full(dev):
    """A 64-dword ring: jobs wait in the scheduler's queue, nothing unconsumed is overwritten."""
    kmd = kmd_model.bind(dev, ring_log2_dw=6)
    c = Client()
    bo = c.bo(0x8000)
    flag = bo.addr + 0x7000
    first = c.submit(c.ib(bo, pm4.wait_reg_mem(flag, 1, 1, "EQ")))
    seqs = [c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x4000 + 4 * i, [i + 1]), offset=0x100 * (i + 1)),
                     CsChunkFence(bo.handle, 0x7100)) for i in range(12)]
    assert len(kmd.sched.queue) >= 10  # most never reached the ring
    ring = kmd.ring
    assert (ring.committed - ring.get_rptr()) & 0xFFFF_FFFF <= ring.size_dw
    assert not bo.u32[0x1000:0x100C].any()
    bo.u32[0x7000 // 4] = 1
    assert c.wait(seqs[-1])
    assert c.wait(first, 0)
    assert bo.u32[0x1000:0x100C].tolist() == list(range(1, 13))
    assert kmd.stats["resets"] == 0 and not regs.STATUS.ERROR.get(kmd.mmio.read(regs.STATUS))
    assert ring.doorbells > 4  # refilled as space came back


def check_bo_kept_alive(dev):
    """A BO closed while a job uses it stays allocated until the job is done."""
    kmd = kmd_model.bind(dev)
    c = Client()
    ib_bo, data = c.bo(0x1000), c.bo(0x1000)
    seq = c.submit(c.ib(ib_bo, pm4.wait_reg_mem(data.addr, 1, 1, "EQ") + pm4.write_data(data.addr + 4, [7])))
    busy = c.io(Request.GEM_WAIT_IDLE, uapi.GemWaitIdleArgs(data.handle, 100))
    assert busy.busy
    addr = c.phys(data)
    c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(data.handle))
    assert any(b.gpu_addr == addr for b in kmd.live_bos())  # still allocated (and mapped), without a handle
    assert c.phys(c.bo(0x1000)) != addr
    with pytest.raises(uapi.MappingRevoked, match=r"was closed \(GEM_CLOSE\): its CPU mapping is gone"):
        data.u32[0] = 1  # our old mapping went with the handle
    mem32 = dev.mem[addr:addr + 8].view("<u4")  # the memory itself is still there
    mem32[0] = 1
    assert c.wait(seq)
    assert mem32[1] == 7
    assert not any(b.gpu_addr == addr for b in kmd.live_bos())
    assert not c.io(Request.GEM_WAIT_IDLE, uapi.GemWaitIdleArgs(ib_bo.handle, 0)).busy


CHECKS = [check_fence_wrap, check_wait_reg_mem_released_later, check_fallback_poll, check_ring_full,
          check_bo_kept_alive]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_without_ih_ring():
    """No IH ring (CAPS.IH = 0): the KMD takes EOP / CP_ERROR from INT_STATUS."""
    from .test_kmd_ioctl import check_cs_and_wait
    check_cs_and_wait(RefModel(ih=False))
    kmd = kmd_model.bound()
    assert kmd.ih is None and kmd.stats["interrupts"] >= 2
