"""The UMD's queues on more than one engine: `Device.queue(engine="copy")` runs write,
fill, copy, upload, download and events as SDMA packets on the copy engine's ring;
`Queue.wait_event` makes one queue wait for another's event on the GPU's side (a CS
dependency the KMD's scheduler holds the job for), so a producer/consumer pipeline across
the copy and gfx queues needs no CPU round trip. Reference-model backend (`engine="copy"`
is refused on a model built without a copy engine); the RTL's copy engine runs the KMD's
SDMA ring in tests/cosim/test_rtl_drivers.py and its packets in tests/cosim/test_rtl_sdma.py."""

from __future__ import annotations

import errno
import re

import numpy as np
import pytest

import kmd_model
import umd
from kmd_model import regs
from spec.sdma import packets as sdma_packets
from testbench.refmodel import RefModel
from tests.umd.drive import run_device


def check_copy_queue_runs_on_the_copy_engine(dev):
    kmd = kmd_model.bind(dev)
    gpu = umd.open()
    q = gpu.queue(engine="copy")
    assert repr(q).startswith("<umd.Queue copy ctx")
    gfx_doorbells, sdma_doorbells = kmd.ring.doorbells, kmd.sdma_ring.doorbells
    a, b = gpu.alloc(1 << 16), gpu.alloc(1 << 16)
    data = np.arange(3000, dtype=np.uint8)
    q.upload(a, 5, data)
    q.fill(a, 0x4001, 37, 0x11223344)
    q.copy(b, 3, a, 5, 3000)
    q.write(b, 0x8000, [1, 2, 3])
    ev = q.signal()
    got = q.download(b, 3, 3000)
    assert ev.wait() and np.array_equal(got, data)
    assert bytes(a.map()[0x4001:0x4001 + 37]) == bytes((0x11223344 >> 8 * (x & 3)) & 0xFF
                                                       for x in range(0x4001, 0x4001 + 37))
    assert b.u32[0x2000:0x2003].tolist() == [1, 2, 3]
    # it all ran on the SDMA engine: its packet counters moved, the CP's DMA did nothing
    m = kmd.mmio
    copies = m.read(regs.PERF_SDMA_PACKETS, sdma_packets.COPY_LINEAR.index)
    assert copies == 3 and m.read(regs.PERF_SDMA_PACKETS, sdma_packets.CONSTANT_FILL.index) == 1
    assert m.read(regs.PERF_DMA_BYTES_WRITTEN) == 0
    assert kmd.ring.doorbells == gfx_doorbells and kmd.sdma_ring.doorbells > sdma_doorbells
    # PERF_CLEAR zeroes both engines' packet counters (kept in a memory on the RTL: a valid
    # bit per entry) and they count again from 0
    m.write_fields(regs.CONTROL, PERF_CLEAR=1)
    assert [m.read(regs.PERF_SDMA_PACKETS, i) for i in range(8)] == [0] * 8
    assert [m.read(regs.PERF_PACKETS, i) for i in range(8)] == [0] * 8
    q.copy(b, 3, a, 5, 8)
    assert q.signal().wait() and m.read(regs.PERF_SDMA_PACKETS, sdma_packets.COPY_LINEAR.index) == 1
    with pytest.raises(ValueError, match=r"^timestamp: the copy engine has no timestamp packet here"):
        q.timestamp()


def submit_gated_pipeline(gpu):
    """gfx produces (after a gate the CPU opens), the copy queue moves the result once the
    gfx event is signalled, gfx consumes once the copy's event is: all three submitted and
    flushed, the gate still closed. Returns (gate, dst, moved, consumed)."""
    gfx, copy = gpu.queue(), gpu.queue(engine="copy", priority="high")
    gate, src, dst = gpu.alloc(4096), gpu.alloc(4096), gpu.alloc(4096)
    gfx.wait_mem(gate, 0, 1)
    gfx.write(src, 0, [0xA, 0xB, 0xC, 0xD])
    produced = gfx.signal()
    copy.wait_event(produced)
    copy.copy(dst, 0, src, 0, 16)
    moved = copy.signal()
    copy.flush()
    gfx.wait_event(moved)
    gfx.write(dst, 16, [0xE])
    consumed = gfx.signal()
    gfx.flush()
    return gate, dst, moved, consumed


def check_pipeline_across_queues_waits_gpu_side(dev):
    """The gated pipeline (submit_gated_pipeline) waits on the GPU side: the scheduler holds
    the later two jobs back until the gate opens."""
    kmd = kmd_model.bind(dev, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open()
    gate, dst, moved, consumed = submit_gated_pipeline(gpu)
    run_device(kmd)
    assert kmd.sdma_sched.queue and kmd.sched.queue  # held for their dependencies
    assert not dst.u32[:5].any() and not moved.signalled()
    gate.u32[0] = 1  # the only CPU action
    assert consumed.wait()
    assert dst.u32[:5].tolist() == [0xA, 0xB, 0xC, 0xD, 0xE] and moved.signalled()


# (on the RTL too: tests/cosim/test_rtl_drivers.py runs every check here on each simulator)
def check_copy_pipeline_example(dev):
    """examples/copy_pipeline.py (the tutorial's section 8), small: every chunk arrives
    intact, in order, through one slot reused by both engines."""
    from examples import copy_pipeline

    kmd_model.bind(dev)
    assert copy_pipeline.main(["--chunks", "4", "--slots", "1", "--chunk-bytes", "260"]) == 0


CHECKS = [check_copy_queue_runs_on_the_copy_engine, check_pipeline_across_queues_waits_gpu_side,
          check_copy_pipeline_example]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_copy_pipeline_example_reports_and_refuses(capsys):
    from examples import copy_pipeline

    kmd_model.bind(RefModel())
    assert copy_pipeline.main(["--chunks", "5", "--slots", "2", "--chunk-bytes", "4096"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("copy pipeline on model: 5 chunks of 4096 bytes through 2 staging slots, copy engine -> "
                      "gfx queue, GPU-side waits only")
    assert out[-1] == "copy_pipeline: OK on model — 5 chunks, 2 slots"
    for model, why in ((RefModel(sdma=False), "no copy engine (QUEUE_CAPS.SDMA = 0)"),
                       (RefModel(dma=False), "no DMA engine")):
        kmd_model.bind(model)
        assert copy_pipeline.main([]) == 2  # cannot run here (as memcpy): 1 is a run that failed
        assert capsys.readouterr().out == f"copy_pipeline: the model backend has {why}; this example needs both\n"
    for argv, msg in ((["--chunks", "0"], "argument --chunks: must be at least 1, not 0"),
                      (["--slots", "17"], "argument --slots: must be at most 16, not 17"),
                      (["--chunk-bytes", "6"], "argument --chunk-bytes: must be a multiple of 4, not 6")):
        with pytest.raises(SystemExit) as exc:
            copy_pipeline.main(argv)
        assert exc.value.code == 2 and capsys.readouterr().err.splitlines()[-1] == f"copy_pipeline: error: {msg}"


def test_a_bad_ib_size_is_the_queue_calls_error_and_costs_nothing():
    """ib_size_dw is checked by queue() before it takes a context and its page (a bad one
    raised from inside, naming CmdBuf, after both were taken: each failed call leaked
    them), and it is at most what one IB may hold (DEV_INFO.max_ib_dw): larger IBs were
    accepted and every flush longer than that refused by the KMD."""
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open()
    top = gpu.info().max_ib_dw & ~7
    msg = f"queue: ib_size_dw must be a multiple of 8 from 48 to {top}"
    contexts, buffers = len(kmd.contexts), len(gpu.buffers)
    for bad in (7, 40, 1 << 21, top + 8):
        with pytest.raises(ValueError, match=f"^{msg}, not {bad}$"):
            gpu.queue(ib_size_dw=bad)
    for bad in (True, 64.0, None):
        with pytest.raises(TypeError, match=f"^queue: ib_size_dw must be an int, not {bad}$"):
            gpu.queue(ib_size_dw=bad)
    assert (len(kmd.contexts), len(gpu.buffers)) == (contexts, buffers)
    q = gpu.queue(ib_size_dw=top)
    buf = gpu.alloc(4 << 20)
    q.write(buf, 0, np.arange(top, dtype=np.uint32))  # more than fits in one IB: it chains
    q.finish()
    assert buf.u32[top - 1] == top - 1

def test_queue_arguments_and_backends_without_a_copy_engine():
    kmd_model.bind(RefModel())
    gpu = umd.open()
    with pytest.raises(ValueError, match=r"^queue: engine must be one of 'gfx', 'copy', not 'compute'$"):
        gpu.queue(engine="compute")
    with pytest.raises(ValueError, match=r"^queue: priority must be one of 'low', 'normal', 'high', not 9$"):
        gpu.queue(priority=9)
    with pytest.raises(TypeError, match=r"^wait_event: event must be a umd Event, not 3$"):
        gpu.queue().wait_event(3)
    # an unhashable choice is answered as any other wrong one, not with "unhashable type"
    with pytest.raises(ValueError, match=r"^queue: engine must be one of 'gfx', 'copy', not \['gfx'\]$"):
        gpu.queue(engine=["gfx"])
    with pytest.raises(ValueError, match=r"^queue: priority must be one of 'low', 'normal', 'high', not \{\}$"):
        gpu.queue(priority={})
    with pytest.raises(ValueError, match=r"^wait_mem: compare must be one of always, <, <=, ==, !=, >=, >, not \['<'\]$"):
        gpu.queue().wait_mem(gpu.alloc(64), 0, 0, compare=["<"])
    kmd_model.bind(RefModel(sdma=False))
    gpu = umd.open()
    with pytest.raises(ValueError, match=r"^queue: engine='copy' needs an SDMA engine, and the model backend has "
                       r"none \(QUEUE_CAPS.SDMA is 0\): use engine='gfx'$"):
        gpu.queue(engine="copy")


def test_copy_engine_in_the_trace(tmp_path):
    """The timeline shows the copy queue's jobs on sdma0 (run_job, doorbell) and the SDMA
    packets on a track of their own."""
    import json
    import subprocess
    import sys

    app = tmp_path / "copyapp.py"
    app.write_text("import umd\n\ndef main():\n    gpu = umd.open()\n    q = gpu.queue(engine='copy')\n"
                   "    a, b = gpu.alloc(4096), gpu.alloc(4096)\n    q.fill(a, 0, 64, 7)\n"
                   "    q.copy(b, 0, a, 0, 64)\n    q.finish()\n    assert b.u32[0] == 7\n")
    out = tmp_path / "t.json"
    subprocess.run([sys.executable, "-m", "gpucosim", "run", str(app), "--sim", "model", "--trace", str(out)],
                   check=True, capture_output=True, text=True)
    ev = json.loads(out.read_text())["traceEvents"]
    names = [e["name"] for e in ev if e.get("ph") in ("i", "X")]
    # contexts are per file, so the job is named by its file's fd and its context id
    assert any(re.match(r"run_job sdma0 fd \d+ ctx \d+ ", n) for n in names)
    assert any(n.startswith("doorbell sdma0 wptr=") for n in names)
    sdma_track = [e["name"] for e in ev if e.get("cat") == "sdma"]
    assert "CONSTANT_FILL" in sdma_track and "COPY_LINEAR" in sdma_track and "INDIRECT_BUFFER" in sdma_track


def test_copy_queue_wait_mem_polls_memory_with_every_argument_in_its_packet():
    """wait_mem on the copy engine is one POLL_REGMEM naming the dword, the reference, the
    mask and the compare as given, its interval the poll interval in units of 16 clocks,
    rounded up; and the queue does stop there until memory says so."""
    from spec import sdma

    kmd = kmd_model.bind(RefModel())
    gpu = umd.open()
    q = gpu.queue(engine="copy")
    gate, dst = gpu.alloc(4096), gpu.alloc(4096)
    for interval, units in ((1, 1), (16, 1), (17, 2), (40, 3), (160, 10)):
        q.wait_mem(gate, 8, 0x5, mask=0xF0F, compare=">=", poll_interval=interval)
        item = sdma.decode(q.cmdbuf.cur[-6:])
        assert item.name == "POLL_REGMEM" and item.length == 6, item
        assert item.args == {"addr": gate.gpu_addr + 8, "value": 5, "mask": 0xF0F, "func": 5, "hdp_flush": 0,
                             "mem_poll": 1, "interval": units, "retry_count": 0xFFF}
    q.write(dst, 0, [0xD0D0])
    q.flush()
    run_device(kmd)
    assert dst.u32[0] == 0  # held by the polls: gate & 0xF0F = 0 < 5
    gate.u32[2] = 0x1F4  # & 0xF0F = 0x104 >= 5
    q.finish()
    assert dst.u32[0] == 0xD0D0


def test_queue_repr_names_the_engine_only_off_gfx():
    kmd_model.bind(RefModel())
    gpu = umd.open()
    g, c = gpu.queue(), gpu.queue(engine="copy")
    assert re.fullmatch(rf"<umd\.Queue ctx {g.ctx_id} api v\d+>", repr(g)), repr(g)
    assert re.fullmatch(rf"<umd\.Queue copy ctx {c.ctx_id} api v\d+>", repr(c)), repr(c)


@pytest.mark.parametrize("engine", ["gfx", "copy"])
def test_a_wait_with_nothing_after_it_is_carried_by_a_nop_job_of_the_queues_own_packets(engine):
    """flush() right after wait_event: an 8-dword NOP job of the queue's engine (PM4 NOPs on
    gfx, SDMA NOPs on copy) carries the dependency, and runs once the event is signalled."""
    from spec import pm4, sdma

    kmd = kmd_model.bind(RefModel())
    gpu = umd.open()
    other = gpu.queue(engine="copy" if engine == "gfx" else "gfx")
    q = gpu.queue(engine=engine)
    gate = gpu.alloc(4096)
    other.wait_mem(gate, 0, 1)
    ev = other.signal()
    q.wait_event(ev)
    seq = q.flush()
    assert seq is not None and q.flush() is None
    sub = q.inflight[-1]
    assert [b.u32[:8].tolist() for b in sub.ibs] == [sdma.pad(8) if engine == "copy" else pm4.pad(8)]
    run_device(kmd)
    assert not q.seq_done(seq)  # held for the other queue's event
    gate.u32[0] = 1
    q.finish()
    assert ev.signalled() and q.seq_done(seq)


def test_a_copy_flush_of_many_ibs_submits_them_in_order_max_ib_chunks_per_cs():
    """SDMA IBs do not chain: a flush names every IB as a chunk of its own, in order, in as
    few CS calls as the KMD's max_ib_chunks allows; dependencies go with the first only."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    step = gpu.dev_info.max_ib_chunks
    producer, q = gpu.queue(), gpu.queue(engine="copy", ib_size_dw=64, flush_threshold=1000)
    dst = gpu.alloc(1 << 16)
    ev = producer.signal()
    q.wait_event(ev)
    calls = []
    submit = q.ws.cs_submit

    def spy(ctx, chunks):
        calls.append(chunks)
        return submit(ctx, chunks)

    q.ws.cs_submit = spy
    for i in range(60):
        q.write(dst, 64 * i, [i + 1] * 9)
    ibs = [ib.gpu_addr for ib in q.cmdbuf.ibs]
    assert len(ibs) > 2 * step
    q.finish()
    assert len(calls) == -(-len(ibs) // step)
    named = [c.gpu_addr for cs in calls for c in cs if type(c).__name__ == "CsChunkIb"]
    assert named == ibs and all(sum(type(c).__name__ == "CsChunkIb" for c in cs) <= step for cs in calls)
    assert [sum(type(c).__name__ == "CsChunkDep" for c in cs) for cs in calls] == [1] + [0] * (len(calls) - 1)
    assert all(dst.u32[16 * i:16 * i + 9].tolist() == [i + 1] * 9 for i in range(60))


def test_wait_event_refusals_name_the_reason():
    kmd_model.bind(RefModel())
    gpu, other_gpu = umd.open(), umd.open()
    q = gpu.queue()
    with pytest.raises(ValueError) as e:
        q.wait_event(other_gpu.queue().signal())
    assert str(e.value) == "wait_event: the event belongs to another device"
    bad = gpu.queue()
    lost = bad.signal()
    bad.emit_raw([0xFFFF_FFFF])  # refused by the KMD's checker: the event never runs
    with pytest.raises(umd.SubmitError):
        bad.flush()
    with pytest.raises(umd.SubmitError) as e:
        q.wait_event(lost)
    assert e.value.errno == errno.ECANCELED
    assert str(e.value) == "wait_event: the submission carrying this event was refused"


def _q2_waits_for_q1(gpu, q1_async: bool, q2_async: bool):
    """q1 writes 1 and signals (flushed); q2 waits for that event and writes 2 after it
    (recorded). Returns q1, q2 and the buffer."""
    q1, q2 = gpu.queue(async_submit=q1_async), gpu.queue(async_submit=q2_async)
    buf = gpu.alloc(4096)
    q1.write(buf, 0, [1])
    ev = q1.signal()
    q1.flush()
    q2.wait_event(ev)
    q2.write(buf, 4, [2])
    return q1, q2, buf


@pytest.mark.parametrize("waiter_async, signaller_async", [(False, False), (False, True), (True, False),
                                                          (True, True)])
def test_a_wait_event_on_a_queue_closed_before_the_flush(waiter_async, signaller_async):
    """q2.wait_event(an event of q1), then q1.close() (which finishes the event's work and
    frees q1's context), then q2's flush: the wait is met, so the flush needs no dependency.
    It named q1's freed context: the KMD refused the flush with EINVAL ("no context")."""
    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    q1, q2, buf = _q2_waits_for_q1(gpu, signaller_async, waiter_async)
    q1.close()
    q2.flush()
    q2.finish()
    assert buf.u32[:2].tolist() == [1, 2]
    gpu.close()


def test_device_close_runs_a_later_queues_commands_that_wait_on_an_earlier_queue():
    """Device.close() closes the queues in order, each submitting what it recorded: q1 first
    (its context freed), then q2, whose recorded commands wait on q1's event. q2's last
    flush named q1's freed context and was refused, and close() swallowed it: the app's
    last writes were lost without a word."""
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    _, _, buf = _q2_waits_for_q1(gpu, False, False)
    phys = gpu.ws.file.handles[buf.handle].gpu_addr + buf.bo_offset
    gpu.close()
    assert kmd.dev.mem[phys:phys + 8].view("<u4").tolist() == [1, 2]


def test_a_wait_event_on_a_failed_job_of_a_queue_closed_since():
    """The event's job failed on the GPU (its context reset), then its queue was closed:
    the waiting flush is cancelled (ECANCELED), as the KMD cancels a job whose dependency
    failed, and does not run. It named the freed context (EINVAL). (q1's close raises its
    job's error: nobody had waited for it, tests/umd/failures/test_umd_lost_failures.py.)"""
    kmd_model.bind(RefModel(), cs_check=False)
    gpu = umd.open(api_version=3)
    q1, q2 = gpu.queue(), gpu.queue()
    buf = gpu.alloc(4096)
    q1.emit_raw([0xC0007B00, 0])  # an illegal opcode: the CP stops, the context is reset
    ev = q1.signal()
    q1.flush()
    q2.wait_event(ev)
    q2.write(buf, 0, [7])
    with pytest.raises(umd.GpuError, match="illegal opcode 0x7b"):
        q1.close()
    with pytest.raises(umd.SubmitError) as e:
        q2.flush()
    assert e.value.errno == errno.ECANCELED and "it failed, or still runs" in str(e.value)
    q2.finish()
    assert buf.u32[0] == 0
    gpu.close()


def test_a_queue_whose_wait_event_failed_says_so():
    """q2 waits for q1's event and q1's job fails: q2's job is cancelled, and q2's finish
    raises a GpuError that says the failure was in a job it waited for (another context's).
    It read as if q2's own work had stopped the GPU."""
    from tests.security.security_helpers import Holder

    kmd_model.bind(RefModel(), cs_check=False)
    gpu = umd.open(api_version=3)
    q1, q2 = gpu.queue(), gpu.queue(engine="copy")
    buf = gpu.alloc(4096)
    hold = Holder()  # both flushes are in before q1's job runs
    q1.emit_raw([0xC0007B00, 0])  # an illegal opcode
    ev = q1.signal()
    q1.flush()
    q2.wait_event(ev)
    q2.write(buf, 0, [7])
    q2.flush()
    hold.release()
    with pytest.raises(umd.GpuError) as own:
        q1.finish()
    with pytest.raises(umd.GpuError) as waited:
        q2.finish()
    assert not own.value.waited_for and own.value.context == q1.ctx_id
    assert waited.value.waited_for and waited.value.context == q1.ctx_id and buf.u32[0] == 0
    assert str(waited.value).startswith("GPU error in a job this queue waited for (wait_event): illegal opcode 0x7b")
    gpu.close()


def test_a_wait_event_on_a_queue_abandoned_with_the_event_still_running():
    """The event's queue was closed giving up on its job (it still runs, its context is
    freed): a wait on it can no longer be named, and the waiting flush is refused with
    ECANCELED saying so (its commands dropped), and the queue goes on."""
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 40)  # the held job is slow, not hung
    gpu = umd.open(api_version=3)
    q1, q2 = gpu.queue(), gpu.queue(engine="copy")  # (another ring: the copy runs beside the held job)
    flag, buf = gpu.alloc(4096), gpu.alloc(4096)
    q1.wait_mem(flag, 0, 1)
    ev = q1.signal()
    q1.flush()
    q2.wait_event(ev)
    q2.write(buf, 0, [7])
    with pytest.raises(umd.GpuTimeout, match=r"^close: queue \(context 1\) not idle after 2000000 cycles: "
                       r"closed all the same, its last job \(seqno 0x1\) still running"):
        q1.close()  # gives up after DEFAULT_TIMEOUT cycles (it said nothing): the job still runs
    assert q1.abandoned
    with pytest.raises(umd.SubmitError) as e:
        q2.flush()
    assert e.value.errno == errno.ECANCELED and "the event's queue was closed before the job carrying" in str(e.value)
    flag.u32[0] = 1  # the held job ends (the next ioctl sees it): q2 goes on
    q2.write(buf, 0, [8])
    q2.finish()
    assert buf.u32[0] == 8 and kmd.wait_for(ev.signalled, 1_000_000)  # (the held job's page: still the queue's)
    gpu.close()


@pytest.mark.parametrize("closing", ["queue", "device"])
def test_closing_a_sync_queue_raises_the_refusal_of_what_it_had_recorded(closing):
    """close() submits what the queue recorded; the KMD refusing it is raised once the queue
    is released, as an async queue's refusal is (the same class, errno and message a flush
    raises, named as the call the app made: close). A sync queue's close swallowed it: the
    app's last commands silently did not run."""
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    q = gpu.queue()
    q.emit_raw([0xFFFF_FFFF])  # refused by the KMD's checker
    with pytest.raises(umd.SubmitError) as e:
        q.close() if closing == "queue" else gpu.close()
    assert e.value.errno == errno.EINVAL and str(e.value).startswith("close: EINVAL: CS: ")
    assert q.closed and q.ctx_id not in gpu.ws.file.contexts  # released all the same
    gpu.close()
    assert not kmd.live_bos()


def test_timestamp_on_a_copy_queue_says_why_and_where_to_take_it():
    kmd_model.bind(RefModel())
    q = umd.open().queue(engine="copy")
    with pytest.raises(ValueError) as e:
        q.timestamp()
    assert str(e.value) == ("timestamp: the copy engine has no timestamp packet here (SDMA TIMESTAMP is not "
                            "implemented): take it on a gfx queue")


def test_copy_engine_transfers_past_one_packets_limit_split_into_contiguous_packets():
    """Uploads, copies and downloads longer than one COPY_LINEAR moves (4 MiB) are split into
    packets that each continue where the last ended, in source and destination alike: every
    byte lands where it belongs, at odd offsets too."""
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open()
    q = gpu.queue(engine="copy")
    n = sdma_packets.MAX_COPY_BYTES + 4099
    data = np.random.default_rng(19).integers(0, 256, n, dtype=np.uint8)
    a, b = gpu.alloc(n + 16, "vram"), gpu.alloc(n + 16, "vram")
    q.upload(a, 3, data)
    q.copy(b, 13, a, 3, n)
    q.finish()  # (the upload's staging buffer is free for the download's: GTT holds one)
    got = q.download(b, 13, n)
    assert np.array_equal(got, data)
    assert kmd.mmio.read(regs.PERF_SDMA_PACKETS, sdma_packets.COPY_LINEAR.index) == 3 * 2


@pytest.mark.parametrize("async_submit", [False, True])
def test_a_buffer_freed_after_a_split_copy_flush_waits_for_its_last_cs(async_submit):
    """A copy queue's flush of more IBs than max_ib_chunks takes several CS ioctls (several
    seqnos). A buffer its last CS still writes, freed by the app, is not handed out again
    until that CS is done: the pools look for the flush's last seqno, not the first."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    step = gpu.dev_info.max_ib_chunks
    q = gpu.queue(engine="copy", ib_size_dw=64, flush_threshold=1000, async_submit=async_submit)
    gate, junk, buf = gpu.alloc(4096), gpu.alloc(1 << 16), gpu.alloc(4096)
    q.write(junk, 0, [1])
    q.finish()  # a first flush of one CS: the split one below is the second
    for i in range(60):  # the first CS's IBs
        q.write(junk, 64 * i, [i + 1] * 9)
    assert len(q.cmdbuf.ibs) > step
    q.wait_mem(gate, 0, 1)  # the last CS waits for the CPU...
    q.write(buf, 0, [0xDEAD] * 16)  # ...then writes the buffer
    q.flush()
    q._drain()  # (async: until the submission thread has made the CS ioctls)
    assert not q.seq_done(q.last_seq)  # its last CS waits for the gate
    buf.free()
    again = gpu.alloc(4096)
    again.u32[:16] = 0x5A5A
    gate.u32[0] = 1
    q.finish()
    assert again.u32[:16].tolist() == [0x5A5A] * 16  # the late write went to the freed buffer, not here
    # ...and once that flush has ended, the buffer is idle: the next request reuses it
    # (the third flush's seqno is found past the split one, not beyond it)
    q.write(junk, 0, [2])
    q.finish()
    gone = buf.gpu_addr
    assert gpu.alloc(4096).gpu_addr == gone


@pytest.mark.parametrize("engine", ["gfx", "copy"])
def test_wait_mem_and_upload_arguments_name_the_call(engine):
    """poll_interval is checked by wait_mem itself on both engines (it was the packet
    builder's message on gfx, naming WAIT_REG_MEM, and Python's own TypeError from the
    interval arithmetic on copy); an upload of an object array says what upload takes."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    q = gpu.queue(engine=engine)
    buf = gpu.alloc(64)
    for bad in (-1, 1 << 16):
        with pytest.raises(ValueError, match=f"^wait_mem: poll_interval must be in \\[0, 65535\\], not {bad}$"):
            q.wait_mem(buf, 0, 0, poll_interval=bad)
    with pytest.raises(TypeError, match="^wait_mem: poll_interval must be an int, not None$"):
        q.wait_mem(buf, 0, 0, poll_interval=None)
    with pytest.raises(TypeError, match="^upload: data must be bytes-like or a numpy array of numbers, not an "
                                        "array of object$"):
        q.upload(buf, 0, np.array([object()]))
    q.wait_mem(buf, 0, 0, poll_interval=0xFFFF)
    q.wait_mem(buf, 0, 0, poll_interval=0)  # both ends of the range are the packet's
    q.finish()


def test_a_wait_event_on_a_job_whose_seqno_is_0xffffffff_waits_for_that_job_alone():
    """Seqnos wrap at 32 bits, so a queue's job may have seqno 0xffffffff, which a CS
    dependency also uses for "the context's latest job there". The KMD took it as that:
    a wait_event on a finished event waited for the event's queue's later job, held here
    by the CPU, and the waiting queue's work never ran."""
    kmd_model.bind(RefModel(), initial_seq=2**32 - 1)
    gpu = umd.open()
    copy, gfx = gpu.queue(engine="copy"), gpu.queue()
    gate, buf = gpu.alloc(4096), gpu.alloc(4096)
    copy.write(buf, 0, [1])
    ev = copy.signal()
    copy.flush()
    assert ev.seq == 0xFFFF_FFFF and ev.wait()
    copy.wait_mem(gate, 0, 1)  # its next job: held until the CPU opens the gate
    copy.flush()
    gfx.wait_event(ev)
    gfx.write(buf, 4, [2])
    done = gfx.signal()
    gfx.flush()
    assert done.wait(100_000) and buf.u32[1] == 2
    gate.u32[0] = 1
    gpu.close()


def test_a_queue_the_kernel_has_no_context_or_memory_for_costs_nothing():
    """A file holds at most MAX_CONTEXTS contexts: past that, queue() is the UMD's
    OutOfMemory naming the kernel's answer (it was the KMD's bare ENOSPC). A queue whose page
    could not be had gives its context back: each failed queue() kept one, so retrying
    under memory pressure used up the file's contexts."""
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open(pools=False)
    taken = [gpu.ws.ctx_alloc() for _ in range(kmd_model.core.ctx.MAX_CONTEXTS)]
    with pytest.raises(umd.OutOfMemory, match=r"^queue: no context for it \(ENOSPC: CTX ALLOC: this file has 4095 "
                                              r"contexts, the most one file may have \(free one first\)\)$"):
        gpu.queue()
    for ctx in taken:
        gpu.ws.ctx_free(ctx)
    gtt = kmd.bo.heaps[kmd_model.uapi.Domain.GTT]
    hog = []
    while gtt.largest_free >= 0x1000:
        hog.append(gpu.alloc(gtt.largest_free, "gtt"))
    contexts = len(kmd.contexts)
    for _ in range(3):
        with pytest.raises(umd.OutOfMemory):
            gpu.queue()
    assert len(kmd.contexts) == contexts and not gpu.queues
    for b in hog:
        b.free()
    q, buf = gpu.queue(), gpu.alloc(0x100)
    q.write(buf, 0, [1])
    q.finish()
    assert buf.u32[0] == 1
    gpu.close()


def test_a_closed_queue_leaves_the_device():
    """An app that opens and closes queues in a loop must not grow the device: a queue whose
    work is done leaves `gpu.queues` when it closes (an abandoned one, its job still
    running, stays until the device closes: its page fences buffers)."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    for _ in range(3):
        q = gpu.queue()
        q.write(gpu.alloc(16), 0, [1])
        q.close()
    assert gpu.queues == []
    gpu.close()


def test_a_queues_priority_is_its_contexts_run_queue_in_the_kmd():
    """gpu.queue(priority=...) asks CTX ALLOC for that priority: its jobs go to that drm_sched
    run queue (and a high-priority gfx queue to the CP's second hardware queue), where a
    priority the winsys dropped would leave every queue at NORMAL."""
    from kmd_model.sched.scheduler import Priority

    kmd = kmd_model.bind(RefModel(), cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open()
    fd = gpu.ws.file.fd
    for name, run_queue in (("low", Priority.LOW), ("normal", Priority.NORMAL), ("high", Priority.HIGH)):
        for engine in ("gfx", "copy"):
            q = gpu.queue(priority=name, engine=engine)
            assert kmd.contexts[(fd, q.ctx_id)].priority == run_queue, (name, engine)
    gpu.close()
