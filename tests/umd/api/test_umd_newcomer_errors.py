"""A newcomer's mistakes, each answered in one line that says what to do: PM4 dwords given
to a copy queue's emit_raw (or SDMA dwords to a gfx queue's) said only "illegal opcode 0x0
SUB_OP 0x37", with no word of the queue's engine; a high-priority queue
without the right read "[Errno 13] queue: ..."; open(api_version="2") said version '2' "is
not supported", not that it must be an int; the reprs of a freed Buffer, a closed Queue and a
closed Device looked as when they were open; queue(engine="sdma") and priority="HIGH" named the
choices alone, and a buffer's address given for the buffer was "not 1118216"; a missing
argument did not show the call's arguments, and umd.Device() named the UMD's own."""

from __future__ import annotations

import errno
import pickle
import traceback
import re

import numpy as np
import pytest

import kmd_model
import umd
from spec import pm4, sdma
from testbench.refmodel import RefModel


def _gpu(**kw):
    kmd_model.bind(RefModel(), **kw)
    return umd.open()


PM4_ON_COPY = ("(recorded by Queue.emit_raw() #1: its first dword {:#010x} is a PM4 WRITE_DATA header, and a copy "
               "queue runs SDMA packets (spec.sdma's builders): emit PM4 on a gfx queue (gpu.queue()))")
SDMA_ON_GFX = ("(recorded by Queue.emit_raw() #1: its first dword 0x00000002 is an SDMA WRITE_LINEAR header, and a "
               "gfx queue runs PM4 packets (spec.pm4's builders): emit SDMA packets on a copy queue "
               "(gpu.queue(engine='copy')))")


@pytest.mark.parametrize("async_submit", [False, True], ids=["sync", "async"])
def test_pm4_on_a_copy_queue_says_the_queue_runs_sdma_packets(async_submit):
    gpu = _gpu()
    buf = gpu.alloc(64)
    q = gpu.queue(engine="copy", async_submit=async_submit)
    words = pm4.write_data(buf.gpu_addr, [1, 2, 3])
    q.emit_raw(words)
    with pytest.raises(umd.GpuError) as got:
        q.finish()
    e = got.value
    assert str(e).startswith("GPU error: illegal opcode 0x0 SUB_OP 0x37 at IB+0x0 ")
    assert str(e).endswith(PM4_ON_COPY.format(words[0])), str(e)
    assert e.command == "Queue.emit_raw() #1" and e.hint.startswith("its first dword")
    assert str(pickle.loads(pickle.dumps(e))) == str(e)  # (the hint goes with it to another process)
    q.write(buf, 0, 5)  # the queue runs on (its ring was reset alone)
    q.finish()
    assert buf.u32[0] == 5


def test_sdma_on_a_gfx_queue_says_the_queue_runs_pm4_packets():
    gpu = _gpu()
    buf = gpu.alloc(64)
    q = gpu.queue()
    q.emit_raw(sdma.write_linear(buf.gpu_addr, [1, 2, 3]))
    with pytest.raises(umd.SubmitError) as got:
        q.finish()
    assert str(got.value).endswith(SDMA_ON_GFX), str(got.value)
    assert str(got.value).startswith("finish: EINVAL: CS: malformed packet at IB+0x0 ")


def test_sdma_on_a_gfx_queue_run_unchecked_names_the_engine_too():
    """Without the KMD's checker the CP itself stops at the SDMA header: its GpuError says it."""
    gpu = _gpu(cs_check=False)
    buf = gpu.alloc(64)
    q = gpu.queue()
    q.emit_raw(sdma.write_linear(buf.gpu_addr, [1, 2, 3]))
    with pytest.raises(umd.UmdError) as got:
        q.finish()
    assert str(got.value).endswith(SDMA_ON_GFX), str(got.value)


@pytest.mark.parametrize("engine, words", [
    ("copy", [0xDEAD_BEEF]),             # neither engine's packet: nothing to add
    ("gfx", [0xC0FF_EE00]),              # an unknown PM4 opcode
])
def test_raw_dwords_of_no_engine_get_no_hint(engine, words):
    gpu = _gpu()
    q = gpu.queue(engine=engine)
    q.emit_raw(words)
    with pytest.raises(umd.UmdError) as got:
        q.finish()
    assert str(got.value).endswith("(recorded by Queue.emit_raw() #1)"), str(got.value)


def test_a_high_priority_queue_without_the_right_is_one_readable_line():
    """It read "[Errno 13] queue: ...": Python's way of printing an OSError made of (errno,
    message). Now the UMD's line alone, errno EACCES all the same, and a pickled copy too."""
    gpu = _gpu()
    with pytest.raises(PermissionError) as got:
        gpu.queue(priority="high")
    e = got.value
    said = ("queue: priority='high' needs CAP_SYS_NICE, which this client lacks (CTX ALLOC: EACCES): use "
            "priority='normal', or give the client the right: gpucosim run APP --kmd cap_sys_nice=1 (in Python: "
            "umd.open(winsys=umd.winsys.Winsys(kmd_model.open_render_node(cap_sys_nice=True))))")
    assert str(e) == said and e.errno == errno.EACCES and isinstance(e, umd.NotPermitted)
    back = pickle.loads(pickle.dumps(e))
    assert (type(back), str(back), back.errno) == (umd.NotPermitted, said, errno.EACCES)
    assert "".join(traceback.format_exception_only(e)) == f"umd.NotPermitted: {said}\n"
    gpu.queue(priority="normal").finish()  # the device runs on


SERVED = "1, 2 or 3 (leave it out for the newest, 3)"


@pytest.mark.parametrize("given, exc, said", [
    ("2", TypeError, f"open: api_version must be an int: {SERVED}, not '2'"),
    ("latest", TypeError, f"open: api_version must be an int: {SERVED}, not 'latest'"),
    (2.0, TypeError, f"open: api_version must be an int: {SERVED}, not 2.0"),
    (None, TypeError, f"open: api_version must be an int: {SERVED}, not None"),
    (0, ValueError, f"open: api_version 0 is not a version this UMD serves: {SERVED}"),
    (4, ValueError, f"open: api_version 4 is not a version this UMD serves: {SERVED}"),
    (10**50, ValueError, f"open: api_version <an int of 167 bits> is not a version this UMD serves: {SERVED}"),
])
def test_an_api_version_that_is_none_says_which_there_are(given, exc, said):
    """open(api_version="2") said "API version '2' is not supported (this UMD serves 1, 2,
    3)": as if version 2 were not, where the string was the mistake (a TypeError, as every
    other integer argument's), and without the newest's default."""
    kmd_model.bind(RefModel())
    with pytest.raises(exc) as got:
        umd.open(api_version=given)
    assert str(got.value) == said and type(got.value) is exc
    assert umd.open(np.int64(2)).api_version == 2  # (numpy's integers are integers)


def test_a_freed_buffer_a_closed_queue_and_a_closed_device_say_so():
    """Their reprs looked as when open (`<umd.Queue ctx 1 api v3>` after close()): an app's
    log line or a debugger's view of them told nothing. Now they end with their state, and a
    use of each says it in one line, naming the buffer by its repr without the state."""
    gpu = _gpu()
    buf, q, copy = gpu.alloc(64), gpu.queue(), gpu.queue(engine="copy")
    at = f"GTT {buf.gpu_addr:#x}+0x40"
    assert (repr(buf), repr(q), repr(gpu)) == (f"<umd.Buffer {at}>", "<umd.Queue ctx 1 api v3>", "<umd.Device model api v3>")
    buf.free()
    q.close()
    assert (repr(buf), repr(q)) == (f"<umd.Buffer {at} freed>", "<umd.Queue ctx 1 api v3 closed>")
    for call, said in ((buf.map, f"map: <umd.Buffer {at}> was freed (Buffer.free)"),
                       (lambda: copy.write(buf, 0, 1), f"write: buf <umd.Buffer {at}> was freed (Buffer.free)"),
                       (lambda: q.write(gpu.alloc(64), 0, 1), "write: the queue is closed")):
        with pytest.raises(ValueError) as got:
            call()
        assert str(got.value) == said
    gpu.close()
    assert (repr(gpu), repr(copy)) == ("<umd.Device model api v3 closed>", "<umd.Queue copy ctx 2 api v3 closed>")
    with pytest.raises(ValueError) as got:
        gpu.alloc(64)
    assert str(got.value) == "alloc: the device is closed"


@pytest.mark.parametrize("kw, said", [
    ({"engine": "sdma"}, "engine must be one of 'gfx', 'copy', not 'sdma': did you mean 'copy'? (the SDMA copy "
                         "engine's queue)"),
    ({"engine": "DMA"}, "engine must be one of 'gfx', 'copy', not 'DMA': did you mean 'copy'? (the SDMA copy "
                        "engine's queue)"),
    ({"engine": "graphics"}, "engine must be one of 'gfx', 'copy', not 'graphics': did you mean 'gfx'? (the CP's "
                             "ring, PM4 packets)"),
    ({"engine": "Copy"}, "engine must be one of 'gfx', 'copy', not 'Copy': did you mean 'copy'?"),
    ({"engine": "compute"}, "engine must be one of 'gfx', 'copy', not 'compute'"),  # (no compute ring to name)
    ({"priority": "HIGH"}, "priority must be one of 'low', 'normal', 'high', not 'HIGH': did you mean 'high'?"),
    ({"priority": "norml"}, "priority must be one of 'low', 'normal', 'high', not 'norml': did you mean 'normal'?"),
    ({"priority": "urgent"}, "priority must be one of 'low', 'normal', 'high', not 'urgent'"),
    ({"priority": 2}, "priority must be one of 'low', 'normal', 'high', not 2"),
])
def test_an_engine_or_priority_by_another_name_says_the_one_meant(kw, said):
    """queue(engine="sdma") (the copy engine is the SDMA, as amdgpu names it) and
    queue(priority="HIGH") named the choices only; nothing was created."""
    gpu = _gpu()
    with pytest.raises(ValueError) as got:
        gpu.queue(**kw)
    assert str(got.value) == "queue: " + said
    assert gpu.queues == []


def test_a_buffers_address_given_for_the_buffer_says_to_give_the_buffer():
    """q.write(buf.gpu_addr + 8, ...) (an address, as packets take): "buf must be a umd Buffer,
    not 1118216", the address in decimal, nothing of which buffer it is in."""
    gpu = _gpu()
    gpu.alloc(64)
    buf = gpu.alloc(256)
    q = gpu.queue()
    with pytest.raises(TypeError) as got:
        q.write(buf.gpu_addr + 8, 0, 1)
    assert str(got.value) == (f"write: buf must be a umd Buffer, not {buf.gpu_addr + 8} ({buf.gpu_addr + 8:#x}, an "
                              f"address in <umd.Buffer GTT {buf.gpu_addr:#x}+0x100>: give the Buffer itself and the "
                              "offset in it, 0x8)")
    with pytest.raises(TypeError) as got:  # an address in no buffer of the app's (the queue's own page): no guess
        q.copy(buf, 0, q.qbo.gpu_addr, 0, 4)
    assert str(got.value) == f"copy: src must be a umd Buffer, not {q.qbo.gpu_addr}"


def test_a_call_missing_an_argument_shows_the_calls_arguments():
    """q.download(buf) was Python's "missing 2 required positional arguments: 'src_offset' and
    'size'" alone: which goes where, the app had to look up (too many were shown so already)."""
    gpu = _gpu()
    q, buf = gpu.queue(), gpu.alloc(64)
    for call, said in (
            (lambda: q.download(buf), "Queue.download() missing 2 required positional arguments: 'src_offset' and "
                                      "'size': Queue.download(src, src_offset, size, *, timeout=2000000)"),
            (lambda: q.fill(buf, 0xFF), "Queue.fill() missing 2 required positional arguments: 'size' and 'value': "
                                        "Queue.fill(buf, offset, size, value)"),
            (lambda: gpu.alloc(), "Device.alloc() missing 1 required positional argument: 'size': "
                                  "Device.alloc(size, domain='gtt', *, alignment=0, zero=True)")):
        with pytest.raises(TypeError) as got:
            call()
        assert str(got.value) == said
    assert q.calls == 0


@pytest.mark.parametrize("make, said", [
    (lambda gpu: umd.Device(), "umd.Device() is made by the UMD, not called by an app: gpu = umd.open()"),
    (lambda gpu: umd.Queue(gpu), "umd.Queue() is made by the UMD, not called by an app: q = gpu.queue()"),
    (lambda gpu: umd.Buffer(4096), "umd.Buffer() is made by the UMD, not called by an app: buf = gpu.alloc(size)"),
    (lambda gpu: umd.Event(), "umd.Event() is made by the UMD, not called by an app: ev = q.signal()"),
    (lambda gpu: umd.Timestamp(), "umd.Timestamp() is made by the UMD, not called by an app: ts = q.timestamp()"),
])
def test_a_handle_class_called_says_which_call_makes_one(make, said):
    """umd.Device() was "Device.__init__() missing 1 required positional argument: 'table'",
    umd.Buffer(4096) four arguments no page names."""
    gpu = _gpu()
    with pytest.raises(TypeError) as got:
        make(gpu)
    assert str(got.value) == said
    q = gpu.queue()  # the classes the UMD makes itself are made as ever
    assert isinstance(q.timestamp(), umd.Timestamp) and isinstance(gpu.alloc(64), umd.Buffer)


def test_a_device_and_queue_whose_driver_went_say_lost():
    """After a rebind every call of the Device is DeviceLost until its close(); its repr and its
    queues' looked as when running."""
    gpu = _gpu()
    q = gpu.queue()
    q.write(gpu.alloc(64), 0, 1)
    kmd_model.bind(RefModel())
    assert (repr(gpu), repr(q)) == ("<umd.Device model api v3 lost>", "<umd.Queue ctx 1 api v3 lost>")
    with pytest.raises(umd.DeviceLost) as got:
        gpu.close()
    assert str(got.value).startswith("close: <umd.Queue ctx 1 api v3>: 1 command recorded and never submitted did "
                                      "not run: this Device's file was closed by the driver")
    assert (repr(gpu), repr(q)) == ("<umd.Device model api v3 closed>", "<umd.Queue ctx 1 api v3 closed>")


@pytest.mark.parametrize("name", ["UmdError", "GpuError", "GpuTimeout", "SubmitError", "OutOfMemory", "DeviceLost",
                                  "QueueBanned", "NotPermitted"])
def test_a_traceback_names_each_error_as_an_app_imports_it(name):
    """A traceback's last line said `umd.errors.GpuError: ...`, a module no app imports; it is
    `umd.GpuError`, and pickle (a worker's error handed back) finds the class there."""
    cls = getattr(umd, name)
    assert f"{cls.__module__}.{cls.__qualname__}" == f"umd.{name}"
    assert pickle.loads(pickle.dumps(cls)) is cls
