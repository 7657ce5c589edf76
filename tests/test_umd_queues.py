"""The UMD's queues on more than one engine: `Device.queue(engine="copy")` runs write,
fill, copy, upload, download and events as SDMA packets on the copy engine's ring;
`Queue.wait_event` makes one queue wait for another's event on the GPU's side (a CS
dependency the KMD's scheduler holds the job for), so a producer/consumer pipeline across
the copy and gfx queues needs no CPU round trip. Reference-model backend (`engine="copy"`
is refused on a model built without a copy engine); the RTL's copy engine runs the KMD's
SDMA ring in tests/test_rtl_drivers.py and its packets in tests/test_rtl_sdma.py."""

from __future__ import annotations

import numpy as np
import pytest

import kmd_model
import umd
from kmd_model import regs
from spec import sdma_packets
from testbench.refmodel import RefModel


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
    with pytest.raises(ValueError, match=r"^timestamp: the copy engine has no timestamp packet here"):
        q.timestamp()


def check_pipeline_across_queues_waits_gpu_side(dev):
    """gfx produces (after a gate the CPU opens), the copy queue moves the result once the
    gfx event is signalled, gfx consumes once the copy's event is: all three submitted before
    the gate opens; the scheduler holds the later two back."""
    kmd = kmd_model.bind(dev)
    gpu = umd.open()
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
    kmd.service()
    assert kmd.sdma_sched.queue and kmd.sched.queue  # held for their dependencies
    assert not dst.u32[:5].any() and not moved.signalled()
    gate.u32[0] = 1  # the only CPU action
    assert consumed.wait()
    assert dst.u32[:5].tolist() == [0xA, 0xB, 0xC, 0xD, 0xE] and moved.signalled()


# (on the RTL too: tests/test_rtl_drivers.py runs every check here on each simulator)
CHECKS = [check_copy_queue_runs_on_the_copy_engine, check_pipeline_across_queues_waits_gpu_side]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_queue_arguments_and_backends_without_a_copy_engine():
    kmd_model.bind(RefModel())
    gpu = umd.open()
    with pytest.raises(ValueError, match=r"^queue: engine must be one of 'gfx', 'copy', not 'compute'$"):
        gpu.queue(engine="compute")
    with pytest.raises(ValueError, match=r"^queue: priority must be one of 'low', 'normal', 'high', not 9$"):
        gpu.queue(priority=9)
    with pytest.raises(TypeError, match=r"^wait_event: event must be a umd Event, not 3$"):
        gpu.queue().wait_event(3)
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
    assert any(n.startswith("run_job sdma0 ctx") for n in names)
    assert any(n.startswith("doorbell sdma0 wptr=") for n in names)
    sdma_track = [e["name"] for e in ev if e.get("cat") == "sdma"]
    assert "CONSTANT_FILL" in sdma_track and "COPY_LINEAR" in sdma_track and "INDIRECT_BUFFER" in sdma_track
