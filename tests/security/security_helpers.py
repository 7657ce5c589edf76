"""What the security suite's files share. The suite is a malicious client with only the
ioctls and the UMD's API: it cannot reach memory that is not its own, force a GPU reset,
fake another client's fence, get an innocent client blamed, read what an earlier client
left behind, or write through a mapping it gave back. By concept:

- tests/security/cs/test_security_toctou.py: memory rewritten after CS, from the CPU or by the job;
- tests/security/cs/test_security_checker.py: what the CP would stop on is refused at CS;
- tests/security/memory/test_security_mappings.py: mappings after GEM_CLOSE, stale data in new BOs;
- tests/security/limits/test_security_umd.py: the UMD's fences, IBs in flight and memory behind a held CP;
- tests/security/cs/test_security_ioctl.py: the exact limits of CS, every ioctl argument of a wrong
  kind, an SDMA IB in the kernel's range;
- tests/security/limits/test_security_time_and_state.py: client threads racing on one driver,
  exhaustion by one client, hangs on purpose again and again (and what the driver holds
  once every file is closed: assert_as_at_bring_up, here);
- tests/security/limits/test_security_interrupt_storms.py: interrupt storms, the IH ring
  overflowed, the job timer and the fallback poll;
- tests/security/limits/test_security_checker_off.py: the CS checker off, the MMU alone;
- tests/security/limits/test_security_ctx_limits.py: a context's own limits: a CHAIN loop on the model,
  jobs queued per context and ring (sched_jobs), who may ask for HIGH priority;
- tests/security/limits/test_security_contention.py: the KMD under contention: a client waiting in
  the driver (a CS for a slot, WAIT_CS, GEM_WAIT_IDLE) beside other clients' ioctls, hangs
  ahead of an innocent job, a file's ban;
- tests/security/limits/test_security_kmd_resources.py: what the KMD keeps for a client and when it
  lets go: a BO whose unmap's TLB flush was lost;
- tests/security/memory/test_security_wedged.py: a device whose reset failed: the hung job's memory
  is never handed out again, and no new memory is made;
- tests/security/cs/test_security_long.py: the long runs (a maximum-size IB, a race with the running
  CP, a job longer than its timeout), on the RTL in tests/cosim/test_rtl_security.py.

Each `check_*(dev)` of their `CHECKS` runs on the reference model there and on the RTL
under both simulators (tests/cosim/test_rtl_drivers.py, which names them security__check_*).
The time-of-check-to-time-of-use attacks need the CP to be held (a job waiting in
WAIT_REG_MEM: `Holder`) so the rewrite lands before the CP fetches.
"""

from __future__ import annotations

from kmd_model import regs
from spec import pm4
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client

EVIL = 0xBAD0_0BAD


def _start_state(kmd) -> dict:
    """What each heap holds at bring-up, for assert_as_at_bring_up."""
    return {d: h.used for d, h in kmd.bo.heaps.items()}


def assert_as_at_bring_up(kmd, heaps: dict) -> None:
    """Every file is closed and every ring drained: the driver holds only its own."""
    assert kmd.wait_for(lambda: all(not s.pending and not s.queue for s in kmd.scheds), 5_000_000)
    assert not kmd.files and not kmd.contexts
    assert not kmd.live_bos() and kmd.shadow.used == 0
    assert {d: h.used for d, h in kmd.bo.heaps.items()} == heaps
    assert [v.n for v in kmd.vmids.ids if v.owner is not None] == []
    assert not any(rq for s in kmd.scheds for rq in s.rqs) and not any(s.entities for s in kmd.scheds)
    assert not any(s.parked for s in kmd.scheds)
    assert [len(s.fence_drv.pending) for s in kmd.scheds] == [0] * len(kmd.scheds)
    s = kmd.stats
    assert s["jobs_retired"] + s["jobs_cancelled"] == s["cs"], s  # every job ended, and once


class Holder:
    """A client whose job holds the CP in a WAIT_REG_MEM until `release()`."""

    def __init__(self):
        self.c = Client()
        self.bo = self.c.bo(0x1000)
        self.seq = self.c.submit(self.c.ib(self.bo, pm4.wait_reg_mem(self.bo.addr + 0x800, 1, 1, "EQ")))

    def release(self) -> None:
        self.bo.u32[0x200] = 1
        assert self.c.wait(self.seq)


def quiet(kmd) -> None:
    """No GPU error, no reset, no timeout happened."""
    s = kmd.kmd_stats()
    assert (s["resets"], s["cp_errors"], s["job_timeouts"]) == (0, 0, 0), s


def _nops(n: int) -> list[int]:
    return pm4.pad(n)


class LoopingCpModel(RefModel):
    """The registers a CP shows while it runs an IB that CHAINs to itself, without the
    Python cost of running one (the model runs a real loop too, 65,536 packets at an
    instant and one a cycle after: test_security_ctx_limits.py): the rptr still, the fetch counters (queue 0's, the total) moving at every look, the queue neither polling nor
    stopped. Set `looping` while a job holds the CP in a WAIT_REG_MEM: the job timer sees
    a job that moves and never ends (a reset ends it, as it would end the loop)."""

    looping = False
    fetched = 0

    def mmio_read32(self, offset: int) -> int:
        v = super().mmio_read32(offset)
        if self.looping and offset == regs.STATUS.ADDR:
            v &= ~regs.STATUS.WAITING.mask
        if self.looping and offset in (regs.PERF_DWORDS_FETCHED.ADDR, regs.PERF_Q0_DWORDS_FETCHED.ADDR):
            if offset == regs.PERF_Q0_DWORDS_FETCHED.ADDR:  # (queue 0's loop: its count is the total)
                self.fetched += 4096
            v = self.fetched & 0xFFFF_FFFF
        return v
