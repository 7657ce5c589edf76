"""The CS checker and the driver's lock (round 16 of the hostile program, helper 105).

A check runs under the driver's lock, and its cost is the client's choice up to
`max_job_dw`: a job of one-dword packets (type-2 fillers), a Python step each to find them,
took half a second to a second a CS here, and a CS refused at its last dword costs the
client nothing but that: no room in the shadow pool, no GPU time. A client calling it in a
loop kept every other client's ioctls, INFO and GEM_CREATE too, out for that long each
time. The check now lets the threads waiting for the lock in between its steps (each IB,
every `PAUSE_DW` dwords of one: cs/checker.py), as the driver's waits for the GPU do
(core/lock.py); it goes on only if the file's mappings are the ones it began with, else the
CS starts again: every dword it copies is read under the lock from a mapping the check knows.
"""

from __future__ import annotations

import errno
import threading

import numpy as np
import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.core.lock import DriverLock
from kmd_model.cs import checker as cs_checker
from kmd_model.uapi import CsChunkIb, InfoQuery, KmdError, Request, VaOp
from spec import pm4
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client

FILLER = 0x8000_0000  # a type-2 header: a one-dword packet the CP skips
IB_DW = (1 << 20) - 8  # one long IB: some 16 of the checker's pauses


@pytest.fixture
def in_check(monkeypatch):
    """An event set when a thread named "check" enters the checker's look at its first IB
    (and the count of IBs it looked at, by address); another when it first follows an
    INDIRECT_BUFFER to an IB2 (`in_check.calls`)."""
    entered, looked, calls = _Entered(), {}, threading.Event()
    entered.calls = calls
    real, real_chain = cs_checker.CsChecker._check_ib, cs_checker.CsChecker._chain

    def check_ib(self, w, seg):
        if threading.current_thread().name == "check":
            looked[seg.client] = looked.get(seg.client, 0) + 1
            entered.set()
        return real(self, w, seg)

    def chain(self, w, addr, size_dw, level, via):
        if threading.current_thread().name == "check" and level == 2:
            calls.set()
        return real_chain(self, w, addr, size_dw, level, via)
    monkeypatch.setattr(cs_checker.CsChecker, "_check_ib", check_ib)
    monkeypatch.setattr(cs_checker.CsChecker, "_chain", chain)
    return entered, looked


class _Entered(threading.Event):
    calls: threading.Event


class _Cs(threading.Thread):
    """A CS in a thread of its own (named "check"): its result or KmdError in `out`."""

    def __init__(self, c: Client, *chunks):
        super().__init__(name="check", daemon=True)
        self.c, self.chunks, self.out, self.done = c, chunks, [], threading.Event()

    def run(self) -> None:
        try:
            self.out.append(self.c.submit(*self.chunks))
        except KmdError as e:
            self.out.append(e)
        self.done.set()


def _long_ib(c: Client, last: list[int]) -> tuple:
    """A BO holding an IB of IB_DW dwords: fillers, then `last` (padded) at its end."""
    bo = c.bo(4 * IB_DW + 0x1000)
    tail = list(last) + pm4.pad(-len(last) % 8)
    bo.u32[:IB_DW - len(tail)] = FILLER
    bo.u32[IB_DW - len(tail):IB_DW] = tail
    return bo, CsChunkIb(IB_DW, handle=bo.handle)


@pytest.mark.parametrize("stream", ["fillers", "calls"])
def test_another_clients_ioctl_runs_while_a_long_check_is_under_way(in_check, stream):
    """fillers: 1 M one-dword packets, the last dword bad (a Python step each to find them);
    calls: 262,144 INDIRECT_BUFFERs of one small IB2, over the job's dword budget (a Python
    step each to follow, the IB2 checked once: 1.8 s before the budget's refusal)."""
    entered, _ = in_check
    kmd = kmd_model.bind(RefModel())
    h, v = Client(), Client()
    if stream == "fillers":
        bo, chunk = _long_ib(h, [0xDEAD_BEEF])  # refused at its last dword, once all is checked
        bad = (f"CS: malformed packet at IB+{4 * (IB_DW - 8):#x} ({bo.addr + 4 * (IB_DW - 8):#x}): "
               "UNKNOWN op=0xbe count=7853")
    else:
        ib2 = h.bo(0x1000)
        inner = h.ib(ib2, pm4.pad(8))
        call = pm4.indirect_buffer(ib2.addr, inner.size_dw)
        bo = h.bo(4 * IB_DW + 0x1000)
        bo.u32[:IB_DW] = np.array(call * (IB_DW // len(call)), dtype=np.uint32)
        chunk = CsChunkIb(IB_DW, handle=bo.handle)
        bad = (f"CS: the job of context {h.ctx} runs more than {kmd.max_job_dw} dwords (the per-job limit; "
               "every IB counts each time it runs)")
    t = _Cs(h, chunk)
    t.start()
    # (calls: once the check follows them, the IB's packets found)
    assert (entered if stream == "fillers" else entered.calls).wait(30)
    # the other client's INFO waits for the lock while the check goes on: it gets it at the
    # check's next pause, not once the whole IB is checked
    info = v.io(Request.INFO, uapi.InfoArgs(InfoQuery.MEMORY))
    check_was_done = t.done.is_set()
    t.join(60)
    assert not t.is_alive()
    assert info.gtt.total > 0
    assert not check_was_done, "the other client's INFO waited for the whole check"
    e = t.out[0]
    assert isinstance(e, KmdError) and e.errno == errno.EINVAL, e
    assert e.message == bad, e.message


def test_a_check_that_let_others_in_keeps_its_copies_for_the_cs_when_nothing_changed(in_check):
    entered, looked = in_check
    kmd_model.bind(RefModel())
    h, v = Client(), Client()
    out = h.bo(0x1000)
    bo, chunk = _long_ib(h, pm4.write_data(out.addr + 0x40, [0x600D]))
    t = _Cs(h, chunk)
    t.start()
    assert entered.wait(30)
    v.io(Request.INFO, uapi.InfoArgs(InfoQuery.MEMORY))  # (let in at a pause)
    t.join(60)
    seq = t.out[0]
    assert isinstance(seq, int), seq
    assert h.wait(seq, 2_000_000) and out.u32[0x10] == 0x600D
    # the CS started again after the pause (what it looked up may have changed), and took
    # the check it had made: the IB was looked at once
    assert looked == {bo.addr: 1}, looked


def test_a_check_whose_files_mappings_change_while_it_let_others_in_starts_again(in_check, monkeypatch):
    entered, looked = in_check
    kmd_model.bind(RefModel())
    h, v = Client(), Client()
    out = h.bo(0x1000)
    ib2 = h.bo(0x1000)
    inner = h.ib(ib2, pm4.write_data(out.addr + 0x40, [0x5EC2]))
    bo, chunk = _long_ib(h, pm4.indirect_buffer(ib2.addr, inner.size_dw))
    # the check's first pause lets the others in until they are done (a yield that waits
    # for them, so what they do all happens while the check is paused)
    done = threading.Event()
    real_yield = DriverLock.yield_to_waiters

    def yield_to_waiters(self):
        if threading.current_thread().name != "check" or done.is_set():
            return real_yield(self)
        self.depth = 0
        self._lock.release()
        done.wait(30)
        self.__enter__()
    monkeypatch.setattr(DriverLock, "yield_to_waiters", yield_to_waiters)
    t = _Cs(h, chunk)
    t.start()
    assert entered.wait(30)
    v.io(Request.INFO, uapi.InfoArgs(InfoQuery.MEMORY))  # (waits for the pause)
    # another thread of the client unmaps and closes the IB the long one calls, which the
    # check has not read yet; its page goes to another client, who writes a secret there
    where = h.phys(ib2)
    h.io(Request.GEM_VA, uapi.GemVaArgs(ib2.handle, VaOp.UNMAP, ib2.addr, 0, ib2.size))
    h.io(Request.GEM_CLOSE, uapi.GemCloseArgs(ib2.handle))
    secret = v.bo(0x1000)
    assert v.phys(secret) == where
    secret.u32[:] = 0xDEAD_BEEF
    done.set()
    t.join(60)
    # the check saw the mappings change: the CS started again, and refused the IB the
    # long one calls as unmapped, never reading the other client's page (read as the IB,
    # the message named the secret's bits: "UNKNOWN op=0xbe count=7853")
    e = t.out[0]
    assert isinstance(e, KmdError) and e.errno == errno.EINVAL, e
    assert e.message == (f"CS: INDIRECT_BUFFER at IB+{4 * (IB_DW - 8):#x} ({bo.addr + 4 * (IB_DW - 8):#x}) "
                         f"runs [{ib2.addr:#x}, {ib2.addr + 4 * inner.size_dw:#x}), outside every mapping "
                         f"of context {h.ctx}"), e.message
    assert looked == {bo.addr: 2}, looked  # (the long IB looked at again from its start)


def test_a_jobs_copies_are_re_pointed_at_once_per_ib(monkeypatch):
    """place() points each copied INDIRECT_BUFFER at its target's copy after the check's last
    pause, under the lock: a step a packet was 0.65 s for an accepted job of 131,072 calls
    of one IB2. Now two writes an IB, however many calls it makes."""
    kmd_model.bind(RefModel())
    h = Client()
    out = h.bo(0x1000)
    ib2 = h.bo(0x1000)
    inner = h.ib(ib2, pm4.write_data(out.addr + 0x40, [0xCA11]))
    call = pm4.indirect_buffer(ib2.addr, inner.size_dw)
    bo = h.bo(0x1000)
    outer = h.ib(bo, call * 64)
    writes = []

    class Counted(np.ndarray):
        def __setitem__(self, key, value):
            writes.append(key)
            super().__setitem__(key, value)
    real = cs_checker.CsChecker.place

    def place(self, job, addr, va):
        for s in job.segments:
            s.words = s.words.view(Counted)
        return real(self, job, addr, va)
    monkeypatch.setattr(cs_checker.CsChecker, "place", place)
    assert h.wait(h.submit(outer)) and out.u32[0x10] == 0xCA11
    assert len(writes) == 2, len(writes)  # (the calling IB's low and high address dwords, once each)


def test_a_check_lets_others_in_only_after_a_pause_dw_worth_of_work(monkeypatch):
    """A small job's check never pauses (it runs whole, as before, and its CS does not start
    again under contention); a long one pauses about once each PAUSE_DW dwords."""
    kmd = kmd_model.bind(RefModel())
    h = Client()
    yields = []
    monkeypatch.setattr(DriverLock, "yield_to_waiters", lambda self: yields.append(1))
    kmd.lock.waiters = 1  # (as if another thread always waited: each pause hands the lock over)
    small = h.bo(0x1000)
    seq = h.submit(h.ib(small, pm4.write_data(small.addr + 0x100, [7])))
    assert yields == []
    kmd.lock.waiters = 0  # (the waits below hand the lock over at each step too)
    assert h.wait(seq) and small.u32[0x40] == 7
    bo, chunk = _long_ib(h, pm4.write_data(small.addr + 0x100, [8]))
    kmd.lock.waiters = 1
    seq = h.submit(chunk)
    kmd.lock.waiters = 0
    assert IB_DW // cs_checker.PAUSE_DW - 1 <= len(yields) <= IB_DW // cs_checker.PAUSE_DW + 1, len(yields)
    assert h.wait(seq, 2_000_000) and small.u32[0x40] == 8
