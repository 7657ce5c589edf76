"""Asynchronous submission (API v3 `Device.queue(async_submit=True)`, or every queue with
GPUCOSIM_ASYNC_SUBMIT=1; umd/submit.py): the same apps give the same observable results
sync and async (memory, fence values, the order of fence interrupts per queue, the API's
answers; tests/umd/submission/async_compare.py), and the error paths: a refused CS reaches the app at the
next flush/finish/wait/close, a wait on a never-flushed event, close with pending work, use
after close. The `CHECKS` run on the model here and on the RTL (Verilator, and one on
Icarus) in tests/cosim/test_rtl_async.py, where the thread hands its ioctls to the cocotb-bridged
thread."""

from __future__ import annotations

import errno
import re
import threading

import pytest

import kmd_model
import umd
from spec import pm4
from testbench.refmodel import RefModel
from tests.umd.submission.async_compare import assert_same
from tests.umd.submission.test_umd_queues import submit_gated_pipeline
from umd.submit import ENV


# ---------------------------------------------------------------------------- same results

def _copy_pipeline(dev):
    from examples import copy_pipeline

    kmd_model.bind(dev)
    rc = copy_pipeline.main(["--chunks", "6", "--slots", "2", "--chunk-bytes", "260"])
    assert rc == 0, f"copy_pipeline exited {rc}"  # (1, FAILED, in both runs was the same result)
    return rc


def _batching(dev):
    from examples import batching

    kmd_model.bind(dev)
    rc = batching.main(["--commands", "24", "--thresholds", "1,8", "--aligns", "1,8"])
    assert rc == 0, f"batching exited {rc}"
    return rc


def _queue_checks(dev):
    """Driver checks of queues that look only after a wait (the KMD's counters, doorbells)."""
    from tests.umd.submission import test_umd_batching, test_umd_queues

    test_umd_queues.check_copy_queue_runs_on_the_copy_engine(dev)
    test_umd_batching.check_batching(dev)
    test_umd_batching.check_flush_by_dwords(dev)


def _gated_pipeline(dev):
    """test_umd_queues' gfx -> copy -> gfx pipeline behind a gate the CPU opens, through the
    API only (that check also looks into the KMD's run queues right after the flushes,
    which with async submission the thread may not have reached yet)."""
    kmd_model.bind(dev, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open()
    gate, dst, moved, consumed = submit_gated_pipeline(gpu)
    assert not dst.u32[:5].any() and not moved.signalled()
    gate.u32[0] = 1  # the only CPU action
    assert consumed.wait()
    assert dst.u32[:5].tolist() == [0xA, 0xB, 0xC, 0xD, 0xE] and moved.signalled()
    gpu.close()


def _mixed(dev):
    """A copy queue feeding a sync gfx queue and back (v3's per-queue choice), a timestamp,
    a download, events waited in a different order than signalled. The copy queue takes
    the run's default, so assert_same compares the async copy queue beside the sync gfx
    queue with both sync (an explicit async_submit=True ran the same queues in both runs:
    the comparison could not fail); the results are checked too, not only compared."""
    kmd_model.bind(dev)
    gpu = umd.open(api_version=3)
    cp = gpu.queue(engine="copy")
    gfx = gpu.queue(async_submit=False)
    a, b, c = gpu.alloc(4096), gpu.alloc(4096), gpu.alloc(4096)
    evs = []
    for i in range(5):
        cp.fill(a, 64 * i, 64, 0x01010101 * (i + 1))
        e = cp.signal()
        cp.flush()
        gfx.wait_event(e)
        gfx.copy(b, 64 * i, a, 64 * i, 64)
        evs.append(gfx.signal())
        gfx.flush()
        cp.wait_event(evs[-1])
        cp.write(c, 4 * i, i + 100)
    ts = gfx.timestamp()
    got = gfx.download(b, 0, 320)
    waits = [evs[k].wait() for k in (4, 0, 2)]
    cp.finish()
    assert ts.cycles > 0
    out = (waits, got.tolist(), c.u32[:5].tolist())
    assert out == ([True] * 3, [1 + k // 64 for k in range(320)], [100, 101, 102, 103, 104]), out
    gpu.close()
    return out


APPS = {"copy_pipeline": _copy_pipeline, "batching": _batching, "queue_checks": _queue_checks,
        "gated_pipeline": _gated_pipeline, "mixed": _mixed}


def check_same_results(dev, apps=tuple(APPS)):
    for name in apps:
        summary = assert_same(lambda: APPS[name](dev), name)
        assert summary["result"] is not None or name in ("queue_checks", "gated_pipeline")


# ---------------------------------------------------------------------------- error paths

def _refusing_queue(gpu, **kw):
    """An async queue whose next flush the KMD's checker refuses (EINVAL): it writes the
    kernel's fence page, outside every mapping of the context."""
    kmd = kmd_model.bound()
    q = gpu.queue(async_submit=True, flush_threshold=1000, **kw)
    q.emit_raw(pm4.write_data(kmd.fence_addr, [0]))
    return q


REFUSED = r"flush \(asynchronous submission #1 of queue context \d+\): EINVAL: CS: WRITE_DATA at IB\+0x0"


def test_a_refused_packet_names_the_call_that_recorded_it_in_sync_mode_too():
    """A GPU error named the API call behind its packet; the checker's refusal did not (a
    new user's `emit_raw([0xdeadbeef])` was "CS: malformed packet at IB+0x14" and no more)."""
    from testbench.refmodel import RefModel

    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    q = gpu.queue()
    q.write(gpu.alloc(64), 0, 1)
    q.emit_raw([0xDEADBEEF])
    with pytest.raises(umd.SubmitError) as ei:
        q.finish()
    assert re.match(r"finish: EINVAL: CS: malformed packet at IB\+0x14 \(0x[0-9a-f]+\): UNKNOWN op=0xbe "
                    r"count=7853 \(recorded by Queue.emit_raw\(\) #2\)$", str(ei.value)), str(ei.value)
    gpu.close()


def check_refused_cs_reaches_the_app(dev):
    """The flush returns; the refusal is raised by the next finish (or wait), with the
    errno and the KMD's message a synchronous flush gives; the queue keeps working; the
    refused job's event is lost (ECANCELED), as in sync mode."""
    kmd_model.bind(dev)
    gpu = umd.open(api_version=3)
    q = _refusing_queue(gpu)
    ev = q.signal()
    assert q.flush() is None  # queued: the thread submits it
    with pytest.raises(umd.SubmitError) as ei:
        q.finish()
    assert ei.value.errno == errno.EINVAL and re.match(REFUSED, str(ei.value)), str(ei.value)
    assert str(ei.value).endswith("(recorded by Queue.emit_raw() #1)"), str(ei.value)  # (as a GPU error names it)
    with pytest.raises(umd.SubmitError, match="^wait: the submission carrying this event was refused$") as ei:
        ev.wait()
    assert ei.value.errno == errno.ECANCELED
    other = gpu.queue()
    with pytest.raises(umd.SubmitError, match="^wait_event: the submission carrying this event was refused$") as ei:
        other.wait_event(ev)  # a GPU-side wait on it is refused the same way
    assert ei.value.errno == errno.ECANCELED
    other.close()
    buf = gpu.alloc(4096)
    q.write(buf, 0, 7)
    ev2 = q.signal()
    assert ev2.wait() and buf.u32[0] == 7  # the queue still works
    q.finish()  # reported once: nothing more
    # the same refusal reported by an Event.wait of the refused flush's queue
    q2 = _refusing_queue(gpu)
    ev3 = q2.signal()
    q2.flush()
    with pytest.raises(umd.SubmitError, match=REFUSED):
        ev3.wait()
    gpu.close()


def check_refusals_of_a_guilty_context_and_of_a_dependency(dev):
    """After a GPU error that took the full reset (ring 0's recovery as on a CP without
    CP_QUEUE_RESET) the context is guilty: its next async flush is refused by the KMD
    (ECANCELED with the decoded error), raised as the same GpuError a sync flush raises. A
    queue waiting on an event of a refused async flush has its own flush refused
    (ECANCELED), which it raises itself; the innocent queue's work runs."""
    from tests.kmd_sched.sched_helpers import full_reset_for_ring_0
    full_reset_for_ring_0(kmd_model.bind(dev, cs_check=False))
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(4096)
    bad, other = gpu.queue(async_submit=True), gpu.queue(async_submit=True)
    bad.write(buf, 0, 1)
    bad.emit_raw([pm4.header(0x7B, 0), 0])
    with pytest.raises(umd.GpuError, match="illegal opcode 0x7b"):
        bad.finish()  # the GPU's error, through WAIT_CS, as in sync mode
    bad.write(buf, 64, 5)
    ev = bad.signal()
    assert bad.flush() is None  # queued; the KMD will refuse it: the context is guilty
    other.wait_event(ev)
    other.write(buf, 128, 6)
    other.flush()
    with pytest.raises(umd.GpuError, match="illegal opcode 0x7b") as ei:
        bad.finish()
    assert ei.value.code == "ILLEGAL_OPCODE"
    with pytest.raises(umd.SubmitError, match=r"^flush \(asynchronous submission #1 of queue context \d+\): "
                                              r"ECANCELED: CS: wait_event: the submission carrying the event "
                                              r"was refused$") as ei:
        other.finish()
    assert ei.value.errno == errno.ECANCELED
    other.write(buf, 192, 7)
    other.finish()
    assert buf.u32[[16, 32, 48]].tolist() == [0, 0, 7]
    gpu.close()


def check_a_sync_wait_event_on_a_queued_refused_flush(dev):
    """A sync queue's wait_event on an event whose async flush is still queued waits for the
    submission thread to submit it; the KMD refused it, so the wait_event is refused
    (ECANCELED), and the refusal itself stays its own queue's to raise (its next finish)."""
    kmd_model.bind(dev)
    gpu = umd.open(api_version=3)
    q = _refusing_queue(gpu)
    ev = q.signal()
    q.flush()  # queued for the thread
    assert ev.pending is not None and not ev.lost
    other = gpu.queue(async_submit=False)
    with pytest.raises(umd.SubmitError, match="^wait_event: the submission carrying this event was refused$") as ei:
        other.wait_event(ev)
    assert ei.value.errno == errno.ECANCELED and ev.lost
    with pytest.raises(umd.SubmitError, match=REFUSED):
        q.finish()
    gpu.close()


def check_wait_event_flushes_the_events_queue_only_while_recording(dev):
    """wait_event flushes the event's queue only while the event is still being recorded
    (check_wait_on_never_flushed_event): once the event's flush is made, queued for the
    thread or submitted, what its queue recorded since stays recorded for the queue's own
    flush, for a sync and an async waiter alike."""
    kmd_model.bind(dev)
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(4096)
    for events_async in (True, False):
        for waiter_async in (True, False):
            q = gpu.queue(async_submit=events_async, flush_threshold=1000)
            waiter = gpu.queue(async_submit=waiter_async, flush_threshold=1000)
            q.write(buf, 0, 1)
            ev = q.signal()
            q.flush()
            q.write(buf, 4, 2)  # recorded after the event's flush
            waiter.wait_event(ev)
            assert q.cmdbuf.ibs, (events_async, waiter_async)  # not flushed by the wait_event
            waiter.finish()
            q.finish()
            assert buf.u32[:2].tolist() == [1, 2]
            buf.u32[:2] = 0
            q.close()
            waiter.close()
    gpu.close()


def check_wait_on_never_flushed_event(dev):
    """Event.wait on an event still being recorded flushes it, waits for the thread to
    submit it, then for the GPU; a dependent queue's wait_event on such an event too."""
    kmd_model.bind(dev)
    gpu = umd.open(api_version=3)
    q = gpu.queue(async_submit=True, flush_threshold=1000)
    other = gpu.queue(async_submit=True, flush_threshold=1000)
    buf = gpu.alloc(4096)
    q.write(buf, 0, [1, 2, 3])
    ev = q.signal()
    other.wait_event(ev)  # flushes q (queued): resolved by the thread
    other.write(buf, 16, 4)
    ev2 = other.signal()
    assert ev.seq is None  # nothing told the app thread its seqno yet
    assert ev2.wait() and ev.signalled()  # ev2 was never flushed either
    assert buf.u32[:5].tolist() == [1, 2, 3, 0, 4]
    assert ev.seq == q.last_seq and ev2.seq == other.last_seq
    gpu.close()


def check_a_wait_submits_every_queued_flush_first(dev):
    """A sync queue's job waits (WAIT_REG_MEM) for a flag an async queue's job writes, that
    flush still queued: waiting on the sync queue's event submits it first (no deadlock)."""
    kmd_model.bind(dev)
    gpu = umd.open(api_version=3)
    waiter, setter = gpu.queue(async_submit=False), gpu.queue(engine="copy", async_submit=True)  # (another ring)
    flag, out = gpu.alloc(4096), gpu.alloc(4096)
    waiter.wait_mem(flag, 0, 1)
    waiter.write(out, 0, 0x5A)
    ev = waiter.signal()
    waiter.flush()  # submitted now: the GPU waits for the flag
    setter.write(flag, 0, 1)
    setter.flush()  # queued for the thread
    assert ev.wait(200_000) and out.u32[0] == 0x5A
    gpu.close()


def check_max_inflight_counts_queued_flushes(dev):
    """Flushes queued for the thread count against max_inflight as submitted ones do: a
    queue of 2 never holds more than 3 IBs, however many commands it records."""
    kmd_model.bind(dev)
    gpu = umd.open(api_version=3)
    q = gpu.queue(async_submit=True, flush_threshold=1, max_inflight=2, ib_size_dw=64)
    buf = gpu.alloc(4096)
    for i in range(24):
        q.write(buf, 4 * i, i + 1)
        assert len(q.inflight) + len(q.pending) <= 2
    q.finish()
    assert q.pool.created <= 3 and q.submitted == 24
    assert buf.u32[:24].tolist() == list(range(1, 25))
    gpu.close()


def check_close_with_pending_work(dev):
    """Device.close submits what is queued and recorded, waits for it, stops the thread;
    a refusal nobody was told of is raised by close, after everything is closed."""
    kmd = kmd_model.bind(dev)
    gpu = umd.open(api_version=3)
    q = gpu.queue(async_submit=True, flush_threshold=1)  # a flush per command
    buf = gpu.alloc(4096)
    cs0 = kmd.stats["cs"]
    for i in range(20):
        q.write(buf, 4 * i, i + 1)
    q.write(buf, 80, 99)  # (flushed by its own command)
    thread = gpu.submitter.thread
    gpu.close()
    assert kmd.stats["cs"] - cs0 == 21 and not thread.is_alive()
    assert kmd.stats["jobs_retired"] >= 21 and not kmd.live_bos()
    # a refused flush nobody asked about: close raises it, and everything is closed
    gpu = umd.open(api_version=3)
    q = _refusing_queue(gpu)
    q.flush()
    with pytest.raises(umd.SubmitError, match=REFUSED):
        gpu.close()
    assert gpu.closed and q.closed and not kmd.live_bos()
    gpu.close()  # closed: nothing more to say


def check_use_after_close(dev):
    kmd_model.bind(dev)
    gpu = umd.open(api_version=3)
    q = gpu.queue(async_submit=True)
    buf = gpu.alloc(4096)
    q.write(buf, 0, 5)
    ev = q.signal()
    q.close()  # submits and finishes first
    assert ev.signalled() and buf.u32[0] == 5
    with pytest.raises(ValueError, match="^write: the queue is closed$"):
        q.write(buf, 0, 6)
    with pytest.raises(ValueError, match="^flush: the queue is closed$"):
        q.flush()
    gpu.close()
    with pytest.raises(ValueError, match="^queue: the device is closed$"):
        gpu.queue(async_submit=True)


def check_ioctls_run_on_the_right_thread(dev):
    """On the model the submission thread makes the CS ioctls itself; on the RTL (a
    thread-bound backend) it hands them to the thread that opened the device."""
    kmd = kmd_model.bind(dev)
    seen = []
    kmd.trace_hooks.append(lambda rec: seen.append((rec.request, threading.current_thread().name)))
    gpu = umd.open(api_version=3)
    q = gpu.queue(async_submit=True)
    buf = gpu.alloc(4096)
    q.write(buf, 0, 1)
    q.finish()
    cs = {name for req, name in seen if req == "CS"}
    me = threading.current_thread().name
    assert cs == ({me} if dev.thread_bound else {"umd-submit"}), (cs, me)
    gpu.close()


CHECKS = [check_same_results, check_refused_cs_reaches_the_app,
          check_refusals_of_a_guilty_context_and_of_a_dependency, check_a_sync_wait_event_on_a_queued_refused_flush,
          check_wait_event_flushes_the_events_queue_only_while_recording, check_wait_on_never_flushed_event,
          check_a_wait_submits_every_queued_flush_first, check_max_inflight_counts_queued_flushes,
          check_close_with_pending_work, check_use_after_close, check_ioctls_run_on_the_right_thread]


class ThreadBoundModel(RefModel):
    """The model as a thread-bound backend (as the RTL under cocotb is): the UMD must hand
    every ioctl of its submission thread to the thread that opened the device, and this
    device counts any access from another thread."""

    thread_bound = True

    def __init__(self):
        super().__init__()
        self.owner, self.strays = threading.get_ident(), 0

    def mmio_read32(self, offset):
        self.strays += threading.get_ident() != self.owner
        return super().mmio_read32(offset)

    def mmio_write32(self, offset, value):
        self.strays += threading.get_ident() != self.owner
        super().mmio_write32(offset, value)


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_a_thread_bound_model(check):
    """The RTL's marshalled path, on the model: the same checks, and no device access from
    the submission thread."""
    dev = ThreadBoundModel()
    check(dev)
    assert dev.strays == 0


def test_a_closed_submitter_takes_no_more_flushes():
    from umd.submit import Submitter

    s = Submitter(threading.get_ident(), marshal=False)
    s.stop()  # (refused from here on: checked before the join, which a thread not told to stop would hang)
    with pytest.raises(ValueError, match=r"^flush: the device's submission thread has stopped \(the device is "
                       r"closed\)$"):
        s.push(object())
    s.thread.join()


# ---------------------------------------------------------------------------- model only

def test_flush_returns_without_waiting_for_the_ioctl():
    """While another thread holds the KMD, an async flush still returns (a sync one would
    block in its CS ioctl); the submission lands once the KMD is free."""
    from umd.winsys import KMD_LOCK

    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    q = gpu.queue(async_submit=True, flush_threshold=1000)
    buf = gpu.alloc(4096)
    q.write(buf, 0, 1)  # (the IB exists now: recording makes no ioctl)
    held, release = threading.Event(), threading.Event()

    def hold():
        with KMD_LOCK:
            held.set()
            release.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(30)
    returned = q.flush()  # would hang until `release` if it made the ioctl
    assert returned is None and q.pending and not q.pending[0].done
    release.set()
    t.join()
    q.finish()
    assert buf.u32[0] == 1 and not q.pending and q.submitted == 1
    gpu.close()


def test_async_submit_argument_and_setting():
    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    with pytest.raises(TypeError, match=r"^queue: async_submit must be True, False or None, not 1$"):
        gpu.queue(async_submit=1)
    assert not gpu.queue().async_submit and gpu.submitter is None  # no thread until an async queue
    assert gpu.queue(async_submit=True).async_submit and gpu.submitter.thread.is_alive()
    gpu.close()
    with pytest.raises(TypeError, match=r"^queue: async_submit= is not in API version 2 \(it is in version 3\)$"):
        umd.open(api_version=2).queue(async_submit=True)  # a v3 argument
    with pytest.raises(TypeError, match=r"^Device.queue\(\) got an unexpected keyword argument 'frobnicate' "
                       r"\(Device.queue\(\) takes flush_threshold, flush_dwords, ib_size_dw, max_inflight\)$"):
        umd.open(api_version=1).queue(frobnicate=True)


@pytest.mark.parametrize("value, expect", [("1", True), ("0", False)])
def test_the_setting_makes_every_queue_async(monkeypatch, value, expect):
    monkeypatch.setenv(ENV, value)
    kmd_model.bind(RefModel())
    for version in (1, 2, 3):
        gpu = umd.open(api_version=version)
        assert gpu.queue().async_submit is expect
        gpu.close()
    gpu = umd.open()
    assert gpu.queue(async_submit=not expect).async_submit is (not expect)  # the argument wins
    gpu.close()


def test_out_of_memory_leaves_a_queued_refusal_to_its_queue():
    """The pools, out of memory, let the async queues' queued flushes through before they
    wait for the queues (test_umd_memory's out-of-memory test, with an async queue whose
    flush the KMD refuses still queued): the refusal is not the allocation's error (the
    allocation succeeds) and stays its queue's to raise, at its next finish."""
    from tests.umd.memory.test_umd_memory import fill_gtt_behind_a_held_submission

    kmd = kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    q = gpu.queue(flush_threshold=1 << 20)
    refused = _refusing_queue(gpu)
    refused.flush()  # queued; the thread's CS is refused, which nobody has looked at yet
    hold = fill_gtt_behind_a_held_submission(kmd, gpu, q)
    hold.bo.u32[0x200] = 1
    assert refused.pending
    released = gpu.mm.n["released"]
    again = gpu.alloc(0x20_0000, "gtt")  # ENOMEM, the drain (the refused flush taken in), a retry
    assert gpu.mm.n["released"] > released and not refused.pending and refused.async_errors
    again.u32[0] = 5
    with pytest.raises(umd.SubmitError, match=REFUSED):
        refused.finish()
    gpu.close()


def test_the_thread_of_a_device_never_closed_ends_with_it():
    import gc

    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    q = gpu.queue(async_submit=True)
    buf = gpu.alloc(4096)
    q.write(buf, 0, 1)
    q.finish()  # (a flush still queued keeps its Device alive until the thread has submitted it)
    thread = gpu.submitter.thread
    del gpu, q, buf
    gc.collect()
    thread.join(30)
    assert not thread.is_alive()


def test_a_bad_setting_is_refused_at_open(monkeypatch):
    monkeypatch.setenv(ENV, "yes")
    kmd_model.bind(RefModel())
    with pytest.raises(ValueError, match=rf"^open: {ENV} must be 0 or 1, not 'yes'$"):
        umd.open()


def _async_too():
    from tests.umd.memory import test_umd_memory, test_umd_transfer

    for mod in (test_umd_transfer, test_umd_memory):
        for check in mod.CHECKS:
            yield pytest.param(lambda c=check: c(RefModel()), id=f"{mod.__name__.rpartition('.')[2][5:]}-{check.__name__[6:]}")
    # the pools, out of memory, wait for the queues' last submissions: queued ones first
    yield pytest.param(test_umd_memory.test_out_of_memory_gives_the_cache_back_and_waits_for_the_queues,
                       id="memory-out_of_memory_waits_for_queued_flushes")


@pytest.mark.parametrize("run", list(_async_too()))
def test_umd_checks_pass_with_every_queue_async(monkeypatch, run):
    """The transfer and memory checks (their asserts look only after waits) with
    GPUCOSIM_ASYNC_SUBMIT=1."""
    monkeypatch.setenv(ENV, "1")
    run()


def test_the_async_submit_example(capsys):
    from examples import async_submit

    kmd_model.bind(RefModel())
    assert async_submit.main(["--submits", "12", "--writes", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "async_submit on model: 12 flushes of 3 writes, then one wait"
    assert re.fullmatch(r"  async_submit=False  app thread per flush: +[\d.]+ us wall, +[\d.]+ us CPU;  "
                        r"to the end of the wait: +[\d.]+ ms", out[1]), out[1]
    assert out[2].startswith("  async_submit=True   app thread per flush:")
    assert out[3] == "async_submit: OK — the same memory and seqnos in both modes"
    # (each bad count named alone: the message named both, whichever was wrong)
    for argv, says in ((["--submits", "0"], "argument --submits: must be at least 1, not 0"),
                       (["--writes", "65"], "argument --writes: must be at most 64, not 65")):
        with pytest.raises(SystemExit):
            async_submit.main(argv)
        assert capsys.readouterr().err.splitlines()[-1] == f"async_submit: error: {says}"


def test_an_app_that_never_closes_its_device_still_exits():
    """The submission thread is a daemon: a process whose Device is still open at its end
    (the thread waiting for work) exits; a thread Python waits for would hang it there."""
    import subprocess
    import sys
    from pathlib import Path

    app = ("import kmd_model, umd\nfrom testbench.refmodel import RefModel\nkmd_model.bind(RefModel())\n"
           "gpu = umd.open(api_version=3)\nq = gpu.queue(async_submit=True)\nbuf = gpu.alloc(64)\n"
           "q.write(buf, 0, 1)\nq.finish()\n")
    done = subprocess.run([sys.executable, "-c", app], cwd=Path(__file__).parents[3], timeout=60,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_closed_async_queue_gives_back_its_ibs():
    """An async queue's flushes reclaim finished submissions only at max_inflight, and close()
    left the ended jobs listed in flight: each queue made and closed kept its IBs (4 KiB each)
    until the device closed, so an app making a queue per frame grew GTT without bound, and
    the exit report counted the ended jobs as "submissions in flight"."""
    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(64)
    used = []
    for i in range(6):
        with gpu.queue(async_submit=True) as q:
            for k in range(3):
                q.write(buf, 0, 10 * i + k)
                q.flush()
        # (3 IBs, or 2 when the submission thread's reclaim after a CS gave the first back
        # before the app recorded its third write: the threads' order, not the queue's)
        assert not q.inflight and q.pool.created in (2, 3), q.pool.created
        used.append(gpu.memory().gtt.used)
    assert used == used[:1] * 6, used
    assert int(buf.u32[0]) == 52
    gpu.close()
