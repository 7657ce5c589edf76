"""What the many-ring tests share (test_kmd_queues_*.py, test_kmd_rings_*.py, and the KMD,
UMD and security tests that import them): SDMA IBs padded as amdgpu pads them, a context's
query and allocation, igt's SDMA hang, ring 0's recovery by the full reset, models whose CP
ignores queue 0's reset, runs a packet a cycle or parks its polls as the RTL does, and an
observer of the driver's announcements."""

from __future__ import annotations

from kmd_model import regs, uapi
from kmd_model.uapi import CsChunkIb, CtxOp, HwIp, Request
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client

DMA, GFX = HwIp.DMA, HwIp.GFX


def sdma_ib(bo, words, offset=0) -> CsChunkIb:
    """SDMA packets padded to 8 dwords (sdma_v4_0_ring_pad_ib) in `bo` at `offset`, on the DMA ring."""
    w = list(words) + sdma.pad(-len(words) % 8)
    bo.u32[offset // 4: offset // 4 + len(w)] = w
    return CsChunkIb(len(w), handle=bo.handle, offset=offset, ip_type=DMA)


def held_by_a_hung_gfx_job(h: Client):
    """h's gfx job holding the CP in a WAIT_REG_MEM until `flag`'s first dword is 1, and an SDMA
    job to queue behind it (writing 7 at `copy`'s dword 0x200): (flag, the gfx job's seq, the
    SDMA job's IB chunk, copy). For the tests of thousands of jobs depending on one."""
    ib, flag, copy = h.bo(0x1000), h.bo(0x1000), h.bo(0x1000)
    root = h.submit(h.ib(ib, pm4.wait_reg_mem(flag.addr, 1, 1, "EQ")))
    return flag, root, sdma_ib(copy, sdma.write_linear(copy.addr + 0x800, [7])), copy


def query(c: Client, ctx: int | None = None) -> uapi.CtxOut:
    return c.io(Request.CTX, uapi.CtxArgs(CtxOp.QUERY_STATE, c.ctx if ctx is None else ctx))


def new_ctx(c: Client, priority: int = 0) -> int:
    return c.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC, priority=priority)).ctx_id


HANG = lambda addr: sdma.poll_regmem(addr, 0, 0xFFFFFFFF, "NE", interval=4)  # noqa: E731 - igt's SDMA hang


def full_reset_for_ring_0(kmd) -> None:
    """Ring 0's recovery as on a device whose CP has no CP_QUEUE_RESET (one queue): the full
    reset, whose guilty context stays guilty (its CS: ECANCELED), on any backend."""
    kmd.ring.has_queue_reset = False


class NoQueue0Reset(RefModel):
    """A model whose CP ignores CP_QUEUE_RESET.Q0: queue 0's reset never comes back (STATUS
    keeps its ERROR, or its busy poll), so ring 0's recovery falls to the full reset."""

    def _poke(self, offset, value, bytemask):
        if offset == regs.CP_QUEUE_RESET.ADDR:
            value &= ~regs.CP_QUEUE_RESET.Q0.mask
        super()._poke(offset, value, bytemask)


class OnePacketACycle(RefModel):
    """The reference model whose CP runs one packet a cycle while it has work (cp_burst 1; the
    RTL's CP is no faster; RefModel runs a finite stream at once), so a long stream on one CP
    queue holds the CP for as many cycles as it has packets, as on the RTL. 4 KiB DMA_DATAs
    (CAPS), so the longest wait the KMD allows behind the other queue is short. (It replaced
    RefModel's budget, which gave a CP out of packets one burst per call, with one that ran
    everything a call's cycles had earned at its end.)"""

    def __init__(self):
        super().__init__(cp_burst=1, dma_max_bytes=4096)


class ParkedPolls(OnePacketACycle):
    """OnePacketACycle whose queue 0 polls as the RTL's (docs/hardware.md, "CP hardware
    queues"): a WAIT_REG_MEM that failed parks the queue (STATUS.WAITING), and it polls again
    only once the CP is its own, not while queue 1, of higher priority, can run. (The
    reference model polls on its grid whatever the other queue does.)"""

    def _cp_wait_due(self, token) -> bool:
        if self._ring_id == 0 and self._hq1 is not None and self._hq1.runnable1():
            self._wait.next_poll += self._wait.interval  # (queue 1 holds the CP: no poll now)
            return False
        return super()._cp_wait_due(token)


class Recorder:
    """An observer: every (event, fields) the driver announced."""

    def __init__(self):
        self.events: list[tuple[str, dict]] = []

    def __call__(self, event, fields):
        self.events.append((event, dict(fields)))

    def of(self, event: str) -> list[dict]:
        return [f for e, f in self.events if e == event]
