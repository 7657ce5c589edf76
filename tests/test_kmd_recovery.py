"""The recovery path beyond the cases of test_kmd_reset.py: an error nobody's job caused
(a stray doorbell: the kernel is named, no context is blamed), and a reset that fails (the
CP never goes idle): the device is wedged, every job in flight is cancelled with EIO, and
every later CS says why. Observers see each step (gpucosim's timeline and crash reports
are built on them)."""

from __future__ import annotations

import errno

import kmd_model
from kmd_model import regs
from kmd_model.uapi import CtxArgs, CtxOp, Request, ResetStatus
from spec import pm4
from testbench.refmodel import RefModel

from .test_kmd_ioctl import Client, expect


class StuckResetModel(RefModel):
    """A model whose CP never reports idle once `stuck` is set (a reset that does not take)."""

    stuck = False

    def mmio_read32(self, offset: int) -> int:
        v = super().mmio_read32(offset)
        if self.stuck and offset == regs.STATUS.ADDR:
            v &= ~regs.STATUS.IDLE.mask
        return v


def test_stray_doorbell_blames_the_kernel():
    dev = RefModel()
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo()
    c.run(bo, pm4.write_data(bo.addr + 0x800, [1]))
    seen = []
    kmd.observers.append(lambda event, fields: seen.append((event, fields)))
    wptr = kmd.ring.committed + 5000
    kmd.mmio.write(regs.RB_DOORBELL, wptr)  # a driver bug: more than the ring ahead
    c.run(bo, pm4.write_data(bo.addr + 0x804, [2]), offset=0x100)  # the next ioctl finds and recovers it
    errors = [f for e, f in seen if e == "gpu_error"]
    assert len(errors) == 1 and errors[0]["job"] is None and errors[0]["state"].code == regs.CpError.DOORBELL_OVERFLOW
    info = errors[0]["info"]
    assert (info.code, info.level, info.ctx_id, info.seq, info.addr) == ("DOORBELL_OVERFLOW", "RING", 0, 0, wptr)
    assert info.message == f"doorbell wptr {wptr:#x} more than the ring size ahead of rptr at ring+{info.offset:#x}, kernel"
    assert [e for e, _ in seen].index("gpu_error") < [e for e, _ in seen].index("reset")
    assert [f["resubmitted"] for e, f in seen if e == "reset"] == [0]
    st = c.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, c.ctx))
    assert st.reset_status == ResetStatus.NO_RESET and st.resets == 1  # seen, not blamed
    assert bo.u32[0x200:0x202].tolist() == [1, 2]
    assert kmd.stats["cp_errors"] == kmd.stats["resets"] == 1


def test_a_reset_that_fails_wedges_the_device():
    dev = StuckResetModel()
    kmd = kmd_model.bind(dev, cs_check=False, hw_timeout=2000)
    a, b = Client(), Client()
    abo, bbo = a.bo(), b.bo()
    hold = b.submit(b.ib(bbo, pm4.wait_reg_mem(bbo.addr + 0x800, 1, 1, "EQ")))
    bad = a.submit(a.ib(abo, [pm4.header(0x7B, 0), 0]))
    queued = b.submit(b.ib(bbo, pm4.write_data(bbo.addr + 0x900, [1]), offset=0x100))
    dev.stuck = True
    bbo.u32[0x200] = 1  # let the CP run into A's bad packet
    why = "soft reset: CP not idle after 2000 cycles"
    e = None
    try:
        a.wait(bad)
    except kmd_model.uapi.KmdError as x:
        e = x
    assert e is not None and e.errno == errno.EIO and e.message.startswith(why), e
    assert kmd.wedged.startswith(f"GPU reset failed: {why}")
    # the job that had finished stays finished; every one still in flight was cancelled,
    # whoever it belonged to
    assert b.wait(hold, 0)
    expect(errno.EIO, f"WAIT_CS: {kmd.wedged}", b.wait, queued)
    assert bbo.u32[0x240] == 0  # it never ran
    assert not kmd.sched.pending and not kmd.sched.queue
    expect(errno.EIO, f"CS: {kmd.wedged}", b.submit, b.ib(bbo, pm4.nop(2), offset=0x200))
    assert kmd.stats["resets"] == 1 and kmd.stats["jobs_cancelled"] >= 2
