"""Time of check, time of use: a client rewrites its IB after CS returned, from the CPU or
by its own job on the GPU, fakes an innocent job's fence, or aims an illegal packet at
an innocent job's slot in the kernel ring. The CP runs the checked copies; nothing
happens to anyone else. The CP is held (security_helpers.Holder) so the rewrite lands
before the CP fetches; the plain race with a running CP is in tests/security/cs/test_security_long.py.
"""

from __future__ import annotations

import errno

import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.core.kmd import Wb
from kmd_model.uapi import CsChunkIb, Request
from spec import pm4
from testbench.refmodel import RefModel

from ..security_helpers import EVIL, Holder, quiet
from tests.kmd.test_kmd_ioctl import Client, expect


# ------------------------------------------------------------------------------ time of check, time of use

def _targets(kmd, victim) -> dict[str, int]:
    """Memory that is not the attacker's, by name: dword addresses."""
    t = {"another client's BO": victim.addr + 0x100,
         "the kernel ring": kmd.ring.gpu_addr + 4 * ((kmd.ring.wptr + 64) & kmd.ring.mask),
         "the ring's rptr write-back": kmd.wb_addr(Wb.RING_RPTR),
         "the ring's fence dword": kmd.fence_addr,
         "the shadow pool": kmd.shadow.bo.gpu_addr + kmd.shadow.bo.size - 64}
    if kmd.ih is not None:
        t["the IH ring"] = kmd.ih.gpu_addr + 4 * ((kmd.ih.rptr + 16) & (kmd.ih.size_dw - 1))
    return t


def check_toctou_cpu_rewrite(dev):
    """The client rewrites its IB from the CPU after CS returned, before the CP fetched it:
    the CP runs what was checked, for every target the rewrite aims at."""
    kmd = kmd_model.bind(dev)
    a, v = Client(), Client()
    abo, vbo = a.bo(), v.bo()
    vbo.u32[:] = 0x5A5A5A5A
    for name, target in _targets(kmd, vbo).items():
        hold = Holder()
        seq = a.submit(a.ib(abo, pm4.write_data(abo.addr + 0x2000, [len(name)], wr_confirm=1)))
        before = int(kmd.mem32[target // 4])
        abo.u32[:8] = pm4.write_data(target, [EVIL], wr_confirm=1) + pm4.pad(3)  # after the check
        hold.release()
        assert a.wait(seq)
        assert abo.u32[0x800] == len(name), f"{name}: the checked IB did not run"
        assert int(kmd.mem32[target // 4]) != EVIL, f"the rewritten IB wrote {name}"
        if name == "another client's BO":
            assert int(kmd.mem32[target // 4]) == before
    assert (vbo.u32 == 0x5A5A5A5A).all()
    quiet(kmd)


def check_toctou_gpu_rewrite(dev):
    """The job rewrites its own IBs on the GPU (WRITE_DATA into a later IB2, DMA_DATA over a
    CHAIN target, WRITE_DATA over the rest of its own IB): the CP runs the checked copies."""
    kmd = kmd_model.bind(dev)
    a, v = Client(), Client()
    abo, vbo = a.bo(0x8000), v.bo()
    vbo.u32[:] = 0x5A5A5A5A
    m, t = abo.addr, vbo.addr
    evil = pm4.write_data(t, [EVIL], wr_confirm=1) + pm4.pad(3)  # 8 dwords
    benign = [pm4.write_data(m + 0x6000 + 4 * i, [0x600D + i], wr_confirm=1) + pm4.pad(3) for i in range(3)]
    abo.u32[0x400:0x408] = benign[0]  # an IB2 at +0x1000
    abo.u32[0x500:0x508] = benign[1]  # a CHAIN target at +0x1400
    abo.u32[0x600:0x608] = evil  # the DMA's source, at +0x1800
    ib1 = (pm4.write_data(m + 0x1000, evil, wr_confirm=1)  # overwrites the IB2, then calls it
           + pm4.indirect_buffer(m + 0x1000, 8)
           + (pm4.dma_data(m + 0x1400, m + 0x1800, 32, cp_sync=1) if kmd.info.has_dma else
              pm4.write_data(m + 0x1400, evil, wr_confirm=1)))  # overwrites the CHAIN target
    own = len(ib1) + 9  # where the packet after the next one starts: overwritten by the next one
    ib1 += pm4.write_data(m + 4 * own, evil[:5], wr_confirm=1)
    assert len(ib1) == own
    ib1 += benign[2][:5] + pm4.indirect_buffer(m + 0x1400, 8, chain=1)
    ib1 += pm4.pad(-len(ib1) % 8)
    abo.u32[: len(ib1)] = ib1
    seq = a.submit(CsChunkIb(len(ib1), abo.handle))
    assert a.wait(seq)
    assert abo.u32[0x1800:0x1803].tolist() == [0x600D, 0x600E, 0x600F], "the checked copies did not all run"
    assert (vbo.u32 == 0x5A5A5A5A).all(), "a rewritten IB ran"
    quiet(kmd)


def check_fake_fence(dev):
    """A rewritten job writes the ring's fence dword with an innocent job's seqno, raises an
    interrupt so the KMD reads it, and stalls before the real fence: the innocent client's
    WAIT_CS does not return before its job ran."""
    kmd = kmd_model.bind(dev)
    a, v = Client(), Client()
    abo, vbo = a.bo(), v.bo()
    hold = Holder()
    aseq = a.submit(a.ib(abo, pm4.write_data(abo.addr + 0x2000, [1], wr_confirm=1) + pm4.pad(19)))
    vseq = v.submit(v.ib(vbo, pm4.wait_reg_mem(vbo.addr, 1, 1, "EQ") + pm4.write_data(vbo.addr + 0x100, [0x600D])))
    hw_seq = kmd.fence_drv.sync_seq  # the innocent job's hardware fence
    fake = (pm4.write_data(kmd.fence_addr, [hw_seq], wr_confirm=1)
            + pm4.release_mem(abo.addr + 0x3000, 0, data_sel="NONE", int_sel="SEND_INT")  # the KMD looks
            + pm4.wait_reg_mem(abo.addr + 0x3004, 1, 1, "EQ"))  # and the real fence never comes
    assert len(fake) == 20
    abo.u32[:24] = fake + pm4.pad(4)
    hold.release()
    assert a.wait(aseq, 20_000)
    expect(errno.ETIME, f"WAIT_CS: seqno {vseq:#x} of context {v.ctx} not signalled after 20000 cycles",
           v.wait, vseq, 20_000)
    assert vbo.u32[0x40] == 0
    vbo.u32[0] = 1
    assert v.wait(vseq) and vbo.u32[0x40] == 0x600D
    quiet(kmd)


def check_innocent_not_blamed(dev):
    """A rewritten job puts an illegal packet where an innocent job's packets sit in the
    kernel ring: nothing happens to the innocent client (no reset, not guilty)."""
    kmd = kmd_model.bind(dev)
    a, v = Client(), Client()
    abo, vbo = a.bo(), v.bo()
    hold = Holder()
    aseq = a.submit(a.ib(abo, pm4.write_data(abo.addr + 0x2000, [1], wr_confirm=1)))
    vseq = v.submit(v.ib(vbo, pm4.write_data(vbo.addr + 0x100, [0x600D])))
    vjob = v.f.contexts[v.ctx].jobs[vseq]
    slot = kmd.ring.gpu_addr + 4 * (vjob.ring_start & kmd.ring.mask)
    abo.u32[:8] = pm4.write_data(slot, [pm4.header(0x7B, 0), 0], wr_confirm=1) + pm4.pad(2)
    hold.release()
    assert a.wait(aseq) and v.wait(vseq) and vbo.u32[0x40] == 0x600D
    for c in (a, v):
        st = c.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.QUERY_STATE, c.ctx))
        assert st.reset_status == uapi.ResetStatus.NO_RESET and st.error is None
    quiet(kmd)


CHECKS = [check_toctou_cpu_rewrite, check_toctou_gpu_rewrite, check_fake_fence, check_innocent_not_blamed]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())
