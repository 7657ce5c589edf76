"""The reference model's second CP hardware queue (CP_HQD1_*), its priority and per-queue
reset (docs/hardware.md, "CP hardware queues").

The CP (processor.py) keeps queue 0's state in its own attributes, as it always
has; queue 1's lives here. To run a packet of queue 1, the CP swaps the two sets of
attributes (`active`), so one parser serves both queues exactly alike, and swaps back at
the packet boundary: between Device calls the CP's attributes are always queue 0's. The
arbiter (`RefModel._run_cp`) picks, at every packet boundary, the highest-priority queue
that can run (CP_QUEUE_PRIORITY), taking turns at equal priority.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kmd_model import regs

if TYPE_CHECKING:
    from ..device import RefModel

M32 = 0xFFFF_FFFF

# the CP's attributes that belong to one queue (ring configuration, pointers, IB stack, the
# WAIT_REG_MEM in progress, the error latch, the VMID of the running IB, its IH RING_ID)
STATE = ("_rptr", "_wptr", "_frames", "_ring_ib_len", "_wait", "_err_code", "_err_level", "_err_opcode",
         "_err_addr", "_err_offset", "_err_vm", "_err_vmid", "_vmid", "_rb_enable", "_rptr_wb", "_rb_base",
         "_rb_size", "_rb_mask", "_rptr_addr", "_ring_id")
CONFIG = frozenset({"CP_HQD1_RB_BASE_LO", "CP_HQD1_RB_BASE_HI", "CP_HQD1_RB_SIZE", "CP_HQD1_RB_RPTR_ADDR_LO",
                    "CP_HQD1_RB_RPTR_ADDR_HI", "CP_HQD1_RB_CNTL", "CP_QUEUE_PRIORITY", "CP_QUEUE_RESET"})


def clean_state(ring_id: int) -> dict:
    """A queue's state after a reset (its configuration is filled in by `sync`)."""
    return {"_rptr": 0, "_wptr": 0, "_frames": [], "_ring_ib_len": 0, "_wait": None, "_err_code": 0,
            "_err_level": 0, "_err_opcode": 0, "_err_addr": 0, "_err_offset": 0, "_err_vm": (0, 0, 0, 0),
            "_err_vmid": 0, "_vmid": 0, "_ring_id": ring_id}


class _Active:
    """The swap `CpQueue1.active` makes: the attributes of STATE exchanged with queue 1's
    saved ones on entry and back on exit (an exception too), and the dwords fetched between
    counted as queue 1's. A class and the instance's own __dict__ rather than a generator
    and getattr/setattr: the model runs it at every packet of queue 1 and every poll it
    makes, and the generator's swap was a quarter of the time of a test of the two queues."""

    __slots__ = ("q", "before", "before_polls")

    def __init__(self, q: "CpQueue1"):
        self.q = q

    def _swap(self) -> None:
        d, s = self.q.m.__dict__, self.q.s
        for a in STATE:
            d[a], s[a] = s[a], d[a]

    def __enter__(self) -> None:
        self._swap()
        self.before, self.before_polls = self.q.m._fetched, self.q.m._polls

    def __exit__(self, *exc: object) -> None:
        self.q.fetched += self.q.m._fetched - self.before
        self.q.polls += self.q.m._polls - self.before_polls
        self._swap()


class CpQueue1:
    def __init__(self, model: "RefModel"):
        self.m = model
        self.s = {**clean_state(1), "_rb_enable": False, "_rptr_wb": False, "_rb_base": 0, "_rb_size": 2,
                  "_rb_mask": 1, "_rptr_addr": 0}
        self.prio = (1, 2)
        self.last = 0  # the queue that ran the last packet (turns at equal priority)
        # the dwords the CP fetched for this queue (PERF_Q1_DWORDS_FETCHED): what the CP's
        # `_fetched` grew by while this queue's state was in place (`active`)
        self.fetched = 0
        self.polls = 0  # its WAIT_REG_MEMs' reads (PERF_Q1_POLLS), counted as `fetched` is
        self.sync()

    def active(self) -> "_Active":
        """Queue 1's state in the CP's attributes for the duration (`with h.active(): ...`)."""
        return _Active(self)

    def sync(self) -> None:
        st, R, s = self.m._store, regs, self.s
        cntl = st[R.CP_HQD1_RB_CNTL.addr()]
        s["_rb_enable"] = bool(R.CP_HQD1_RB_CNTL.ENABLE.get(cntl))
        s["_rptr_wb"] = bool(R.CP_HQD1_RB_CNTL.RPTR_WB.get(cntl))
        s["_rb_base"] = (st[R.CP_HQD1_RB_BASE_HI.addr()] << 32 | st[R.CP_HQD1_RB_BASE_LO.addr()]) << 8
        s["_rb_size"] = 2 << R.CP_HQD1_RB_SIZE.LOG2_QWORDS.get(st[R.CP_HQD1_RB_SIZE.addr()])
        s["_rb_mask"] = s["_rb_size"] - 1
        s["_rptr_addr"] = (st[R.CP_HQD1_RB_RPTR_ADDR_HI.addr()] << 32 | st[R.CP_HQD1_RB_RPTR_ADDR_LO.addr()]) & ~3
        p = st[R.CP_QUEUE_PRIORITY.addr()]
        self.prio = (min(2, R.CP_QUEUE_PRIORITY.Q0.get(p)), min(2, R.CP_QUEUE_PRIORITY.Q1.get(p)))

    def reset(self) -> None:
        """CP_QUEUE_RESET.Q1 (and CONTROL.SOFT_RESET)."""
        self.s.update(clean_state(1))

    # ------------------------------------------------------------------ registers

    def idle(self) -> bool:
        s = self.s
        return bool(s["_err_code"]) or (s["_wait"] is None and not s["_frames"] and s["_rptr"] == s["_wptr"])

    def status(self, i: int = 0) -> int:
        s, r = self.s, regs.CP_HQD1_STATUS
        return (r.IDLE.put(int(self.idle())) | r.ERROR.put(int(bool(s["_err_code"])))
                | r.RB_EMPTY.put(int(s["_rptr"] == s["_wptr"])) | r.WAITING.put(int(s["_wait"] is not None))
                | r.LEVEL.put(len(s["_frames"])))

    def error(self, i: int = 0) -> int:
        s, r = self.s, regs.CP_HQD1_ERROR
        return r.CODE.put(s["_err_code"]) | r.LEVEL.put(s["_err_level"]) | r.OPCODE.put(s["_err_opcode"])

    def hw_read(self) -> dict:
        s = self.s
        return {"CP_HQD1_RB_RPTR": lambda i: s["_rptr"], "CP_HQD1_RB_WPTR": lambda i: s["_wptr"],
                "CP_HQD1_STATUS": self.status, "CP_HQD1_ERROR": self.error,
                "CP_HQD1_ERROR_ADDR_LO": lambda i: s["_err_addr"] & M32,
                "CP_HQD1_ERROR_ADDR_HI": lambda i: s["_err_addr"] >> 32,
                "CP_HQD1_ERROR_OFFSET": lambda i: s["_err_offset"]}

    # ------------------------------------------------------------------ arbitration

    @staticmethod
    def runnable(m: "RefModel") -> bool:
        """Can the queue whose state is in the CP's attributes run a packet now?"""
        return (not m._err_code and m._wait is None and not m._halt
                and bool(m._frames or (m._rb_enable and m._rptr != m._wptr)))

    def runnable1(self) -> bool:
        s = self.s
        return (not s["_err_code"] and s["_wait"] is None and not self.m._halt
                and bool(s["_frames"] or (s["_rb_enable"] and s["_rptr"] != s["_wptr"])))

    def pick(self, r0: bool, r1: bool) -> int:
        """The queue that runs the next packet (both can run: priority, then turns)."""
        if not r1:
            return 0
        if not r0:
            return 1
        p0, p1 = self.prio
        if p0 != p1:
            return 0 if p0 > p1 else 1
        return 1 - self.last
