"""A new user's first programs against the UMD API (README.md, docs/tutorial.md, the umd
docstrings), and what each of their mistakes answers: the entry point the app called named
in Python's own argument errors, every argument by the name its docstring gives, a transfer
of any size (larger than GTT too), `with` for queues and buffers, a uint8 array refused as
write() data rather than widened, a gfx queue after its error running on (its queue reset
alone) or, after a full reset, saying it takes no more work, and umd.open() before any
device is bound."""

from __future__ import annotations

import re

import numpy as np
import pytest

import kmd_model
import umd
from testbench.refmodel import RefModel

from ..handles import named as _named


def _gpu(**kw):
    kmd_model.bind(RefModel(**kw))
    return umd.open()


def _raises(exc, message, fn, *args, **kwargs):
    with pytest.raises(exc, match="^" + re.escape(message) + "$"):
        fn(*args, **kwargs)


def test_argument_mistakes_name_the_entry_point():
    """Python's own errors for a wrong keyword, a missing or an extra argument name the call
    the app made (q.write), not the function the dispatch table points at
    (queue_write_batched), which the app never saw; help() names it too."""
    gpu = _gpu()
    q, buf = gpu.queue(), gpu.alloc(64)
    _raises(TypeError, "Queue.write() got an unexpected keyword argument 'value' (Queue.write() takes buf, offset, "
            "data)", q.write, buf, offset=0, value=1)
    _raises(TypeError, "Queue.write() missing 1 required positional argument: 'data': Queue.write(buf, offset, data)",
            q.write, buf, 0)
    _raises(TypeError, "Queue.finish() got an unexpected keyword argument 'timeout_cycles': did you mean timeout=? "
            "(Queue.finish() takes timeout)", q.finish, timeout_cycles=10)
    _raises(TypeError, "Queue.download() got an unexpected keyword argument 'out' (Queue.download() takes src, "
            "src_offset, size, timeout)", q.download, buf, 0, 4, out=np.zeros(4, np.uint8))
    # (counted as the app wrote them: Python counted the object too, "Device.queue() takes 1
    # positional argument but 2 were given" for the one the app gave)
    _raises(TypeError, "Device.queue() takes no positional arguments but 1 was given: Device.queue(*, "
            "flush_threshold=None, flush_dwords=None, ib_size_dw=1024, max_inflight=32, engine='gfx', "
            "priority='normal', async_submit=None)", gpu.queue, "copy")
    _raises(TypeError, "Queue.write() takes 3 positional arguments but 4 were given: Queue.write(buf, offset, data)",
            q.write, buf, 0, 1, 2)
    _raises(TypeError, "Buffer.free() takes no positional arguments but 1 was given: Buffer.free()", buf.free, True)
    # an Event's and a Timestamp's methods too (signalled() was Python's "takes 1 positional
    # argument but 2 were given"; it is no entry point of api_hook: a polling loop is no span a
    # look), each named by the app's own object (a Timestamp's were "Event.wait()", inherited)
    ev, ts = q.signal(), q.timestamp()
    for e, cls in ((ev, "Event"), (ts, "Timestamp")):
        _raises(TypeError, f"{cls}.signalled() takes no positional arguments but 1 was given: {cls}.signalled()",
                e.signalled, 1)
        _raises(TypeError, f"{cls}.signalled() got an unexpected keyword argument 'timeout' ({cls}.signalled() "
                "takes no arguments)", e.signalled, timeout=5)
        _raises(TypeError, f"{cls}.wait() takes from 0 to 1 positional arguments but 2 were given: "
                f"{cls}.wait(timeout=2000000, *, timeout_cycles=<not given>)", e.wait, 5, 6)
    assert ev.signalled.__name__ == "signalled" and ev.signalled.__qualname__ == "Event.signalled"
    _raises(TypeError, "umd.open() takes from 0 to 1 positional arguments but 2 were given: umd.open(api_version=3, "
            "*, winsys=None, pools=True)", umd.open, 2, None)
    _raises(TypeError, "Device.alloc() got an unexpected keyword argument 'dom': did you mean domain=? (Device.alloc() "
            "takes size, domain, alignment, zero)", gpu.alloc, 64, dom="vram")
    assert q.write.__name__ == "write" and q.write.__qualname__ == "Queue.write"
    v1 = umd.open(api_version=1).queue()  # version 1's write is another function, named the same
    _raises(TypeError, "Queue.write() missing 1 required positional argument: 'data': Queue.write(buf, offset, data)",
            v1.write, buf, 0)
    # the keywords a docstring names work as keywords
    q.write(buf=buf, offset=0, data=[1, 2])
    q.fill(buf=buf, offset=8, size=8, value=3)
    assert q.download(src=buf, src_offset=0, size=16, timeout=1_000_000).view("<u4").tolist() == [1, 2, 3, 3]
    gpu.close()


def test_transfer_arguments_are_named_as_documented():
    """copy(dst, dst_offset, src, src_offset, size), upload(dst, dst_offset, data),
    download(src, src_offset, size), emit_raw(dwords): each message names the argument by
    that name, and copy says which of its two buffers a range falls outside."""
    gpu = _gpu()
    q, a, b = gpu.queue(), gpu.alloc(0x100), gpu.alloc(0x100)
    # arguments swapped (the buffer where dst_offset goes): named as the signature does
    _raises(TypeError, f"copy: dst_offset must be an int, not {b!r}", q.copy, a, b, 0, 0, 16)
    _raises(TypeError, "copy: src_offset must be an int, not '0'", q.copy, a, 0, b, "0", 16)
    _raises(ValueError, "copy: src_offset must be >= 0, not -4", q.copy, a, 0, b, -4, 16)
    _raises(ValueError, "copy: dst [0xf8, 0x108) is outside the 0x100-byte buffer", q.copy, a, 0xF8, b, 0, 16)
    _raises(ValueError, "copy: src [0xf8, 0x108) is outside the 0x100-byte buffer", q.copy, a, 0, b, 0xF8, 16)
    _raises(TypeError, "upload: dst_offset must be an int, not 1.5", q.upload, a, 1.5, b"ab")
    _raises(ValueError, "download: src_offset must be >= 0, not -1", q.download, a, -1, 4)
    _raises(ValueError, "download: size must be >= 0, not -1", q.download, a, 0, -1)
    _raises(ValueError, "fill: offset must be >= 0, not -4", q.fill, a, -4, 4, 0)
    _raises(TypeError, "emit_raw: dwords[0] must be an int, not 1.0", q.emit_raw, [1.0])
    _raises(ValueError, "emit_raw: dwords is empty", q.emit_raw, [])
    gpu.close()


def test_write_refuses_a_byte_array():
    """A uint8 array is bytes to the app (download() returns one): written element by element
    it became 4x as many dwords, silently past what the app meant. It is refused, saying what
    to pass; its bytes (.tobytes()) write as documented, and wider arrays a dword each."""
    gpu = _gpu()
    q, src, dst = gpu.queue(), gpu.alloc(64), gpu.alloc(64)
    q.write(src, 0, [0x04030201, 0x08070605])
    got = q.download(src, 0, 8)
    assert got.dtype == np.uint8 and got.tolist() == [1, 2, 3, 4, 5, 6, 7, 8]
    _raises(TypeError, "write: data is a uint8 array, whose elements would each be a dword: pass data.tobytes() "
            "for its bytes, or data.astype(np.uint32) for a dword each", q.write, dst, 0, got)
    _raises(TypeError, "write: data is a int8 array, whose elements would each be a dword: pass data.tobytes() "
            "for its bytes, or data.astype(np.uint32) for a dword each", q.write, dst, 0, got.view(np.int8))
    _raises(TypeError, "emit_raw: dwords is a uint8 array, whose elements would each be a dword: pass "
            "dwords.tobytes() for its bytes, or dwords.astype(np.uint32) for a dword each", q.emit_raw, got)
    q.write(dst, 0, got.tobytes())
    q.write(dst, 8, got[:2].astype(np.uint32))
    q.write(dst, 16, np.array([[9, 10]], np.int64))  # any wider integer array: a dword an element
    q.finish()
    assert dst.u32[:6].tolist() == [0x04030201, 0x08070605, 1, 2, 9, 10]
    assert not dst.u32[6:].any()
    gpu.close()


def test_transfers_larger_than_gtt():
    """Uploads and downloads go through GTT staging buffers: a transfer larger than the GTT
    the kernel leaves free (about 14 MiB of its 32 on the model), and a loop of 4 MiB uploads
    recorded without a flush, run; before, each needed one staging buffer of its whole size,
    all held until the next flush, and raised OutOfMemory ("alloc: no device memory")."""
    gpu = _gpu()
    free = gpu.memory().gtt.largest_free
    n = free + (6 << 20)
    big = gpu.alloc(n, "vram")
    q = gpu.queue()
    data = np.random.default_rng(70).integers(0, 256, n, dtype=np.uint8)
    q.upload(big, 0, data)
    assert np.array_equal(q.download(big, 0, n), data)
    chunk = 4 << 20
    for i in range(n // chunk):  # each upload recorded, none flushed by the app
        q.upload(big, i * chunk + 1, np.full(chunk - 1, i + 1, np.uint8))
    q.finish()
    got = big.map()
    for i in range(n // chunk):
        assert got[i * chunk] == data[i * chunk] and (got[i * chunk + 1:(i + 1) * chunk] == i + 1).all()
    # the copy engine's queue stages the same way
    cq = gpu.queue(engine="copy")
    cq.upload(big, 3, data[:n - 3])
    assert np.array_equal(cq.download(big, 3, n - 3), data[:n - 3])
    gpu.close()


def test_queue_and_buffer_in_a_with():
    """`with` closes a queue (submitting and finishing what it recorded) and frees a buffer,
    as it closes a device, also when the body raises (an exception, ^C)."""
    gpu = _gpu()
    out = gpu.alloc(64)
    with gpu.queue() as q, gpu.alloc(64) as tmp:
        q.write(tmp, 0, 5)
        q.copy(out, 0, tmp, 0, 4)
    assert q.closed and tmp.freed and out.u32[0] == 5
    with pytest.raises(KeyboardInterrupt):
        with gpu.queue() as q:
            q.write(out, 4, 6)
            raise KeyboardInterrupt
    assert q.closed and out.u32[1] == 6
    _raises(ValueError, "write: the queue is closed", q.write, out, 0, 1)
    gpu.close()


def test_a_queues_settings_set_after_queue_are_checked():
    """`q.flush_threshold = 8` after queue() (the batching docs' knob, a plain attribute):
    the settings the app may change are checked as queue() checks them, and what the queue
    is (its engine, priority, context, async_submit) is read-only. Before, `q.max_inflight
    = 0` ended the next flush in an IndexError, `q.dma_chunk = 0` a fill in a
    ZeroDivisionError, `q.async_submit = True` the next flush in an AttributeError on None,
    and `q.engine = "copy"` was taken by a queue that went on recording PM4."""
    gpu = _gpu()
    buf = gpu.alloc(4096)
    q = gpu.queue()
    for name, value, exc, message in (
            ("flush_threshold", 0, ValueError, "Queue.flush_threshold must be >= 1, not 0"),
            ("flush_threshold", "8", TypeError, "Queue.flush_threshold must be an int, not '8'"),
            ("flush_dwords", 0, ValueError, "Queue.flush_dwords must be >= 1 or None, not 0"),
            ("max_inflight", 0, ValueError, "Queue.max_inflight must be >= 1, not 0"),
            ("timeout", -1, ValueError, "Queue.timeout must be in [0, 2**64) or None, not -1"),
            ("timeout", 1.5, TypeError, "Queue.timeout must be an int (GPU cycles) or None, not 1.5"),
            ("dma_chunk", "8", TypeError, "Queue.dma_chunk must be an int, not '8'"),
            ("dma_chunk", 0, ValueError,
             "Queue.dma_chunk must be in [1, 0x100000] (one packet's most on this engine), not 0"),
            ("engine", "copy", AttributeError,
             "Queue.engine is fixed when the queue is made: give it to queue() (engine=...), it makes a new queue"),
            ("async_submit", True, AttributeError, "Queue.async_submit is fixed when the queue is made: give it to "
                                                   "queue() (async_submit=...), it makes a new queue"),
            ("priority", "high", AttributeError, "Queue.priority is fixed when the queue is made: give it to "
                                                 "queue() (priority=...), it makes a new queue"),
            ("ctx_id", 9, AttributeError, "Queue.ctx_id is fixed when the queue is made")):
        before = getattr(q, name)
        _raises(exc, message, setattr, q, name, value)
        assert getattr(q, name) == before, name
    q.max_inflight, q.dma_chunk, q.flush_dwords, q.timeout = 2, 0x100, None, None
    q.flush_threshold = 2  # (a valid one is taken: every second command flushes)
    for i in range(5):
        q.write(buf, 4 * i, i + 1)
    assert q.flushes == 2
    q.fill(buf, 64, 0x300, 7)  # three DMA_DATA packets of at most 0x100 bytes
    q.finish()
    assert buf.u32[:5].tolist() == [1, 2, 3, 4, 5] and set(buf.u32[16:16 + 0xc0].tolist()) == {7}
    gpu.close()


def test_what_a_device_and_an_event_are_is_read_only():
    """An Event's queue and value and a Device's name, api_version and dev_info are set when
    it is made: `ev.queue = None` was taken and the next ev.wait() ended in an
    AttributeError on None; `gpu.dev_info = ...` broke the UMD's next IB sizing."""
    gpu = _gpu()
    q = gpu.queue()
    ev = q.signal()
    for obj, name in ((ev, "queue"), (ev, "value"), (gpu, "name"), (gpu, "dev_info")):
        kind = type(obj).__name__
        _raises(AttributeError, f"{kind}.{name} is fixed when the {kind.lower()} is made", setattr, obj, name, None)
    _raises(AttributeError, "Device.api_version is fixed when the device is made: umd.open(api_version=...) opens "
                            "another", setattr, gpu, "api_version", 1)
    assert ev.queue is q and ev.value == 1 and gpu.api_version == umd.LATEST and gpu.name == "model"
    assert ev.wait() and ev.signalled()
    gpu.close()


@pytest.mark.parametrize("async_submit", [False, True])
def test_what_the_umd_records_of_an_event_is_read_only(async_submit):
    """An Event's seq, pending, number, lost and call (and a Timestamp's slot and index) are
    the UMD's own records, set as its queue flushes it: `ev.seq = 0` was taken, and the next
    ev.wait() waited for another submission (or returned True before the GPU got there);
    `ev.pending = None` lost an async flush's event. A write is an AttributeError naming the
    field; the event and the queue work on."""
    gpu = _gpu()
    q = gpu.queue(async_submit=async_submit)
    buf = gpu.alloc(4096)
    q.write(buf, 0, 1)
    ev = q.signal()
    ts = q.timestamp()
    q.flush()
    before = {n: getattr(ev, n) for n in ("seq", "pending", "number", "lost", "call")}
    _raises(AttributeError, "Event.seq is the UMD's own record (the seqno of the submission carrying it, once its "
                            "queue flushed it): read-only", setattr, ev, "seq", 0)
    for obj in (ev, ts):
        for name, value in (("seq", 0), ("pending", None), ("number", 0), ("lost", True), ("call", 0)):
            with pytest.raises(AttributeError, match=rf"^Event\.{name} is the UMD's own record \(.*\): read-only$"):
                setattr(obj, name, value)
    for name in ("slot", "index"):
        with pytest.raises(AttributeError, match=rf"^Timestamp\.{name} is the UMD's own record \(.*\): read-only$"):
            setattr(ts, name, 0)
    assert {n: getattr(ev, n) for n in before} == before
    assert ev.wait() and ev.signalled() and ev.seq is not None and ev.pending is None and not ev.lost
    assert ts.wait() and ts.cycles > 0 and buf.u32[0] == 1
    q.write(buf, 4, 2)  # (the queue goes on: a later event of the same queue)
    assert q.signal().wait() and buf.u32[1] == 2
    gpu.close()


def test_gfx_queue_after_its_gpu_error():
    """A hang on the gfx ring resets its queue alone (CP_QUEUE_RESET.Q0): the hang's GpuError
    is raised once, and the queue runs on, as a copy queue does. Where the hang takes the
    full reset (a CP without CP_QUEUE_RESET), the kernel refuses the queue's context after
    it (amdgpu's guilty context): the next flush raised the very GpuError of the hang, as if
    the new work had failed. It says the queue takes no more work; a new queue runs."""
    from tests.kmd_sched.sched_helpers import full_reset_for_ring_0
    gpu = _gpu()
    kmd = kmd_model.bound()
    q, buf = gpu.queue(), gpu.alloc(64)
    q.wait_mem(buf, 0, 1)  # nobody writes it: the KMD's job timer ends the job
    ev = q.signal()
    with pytest.raises(umd.GpuError) as first:
        ev.wait()
    assert not first.value.refused and "takes no more work" not in str(first.value)
    q.write(buf, 4, 6)
    q.flush()
    q.finish()  # (raised once: the queue runs on)
    assert buf.u32[1] == 6 and (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0)
    full_reset_for_ring_0(kmd)
    q = gpu.queue()
    q.wait_mem(buf, 0x10, 1)
    ev = q.signal()
    with pytest.raises(umd.GpuError) as first:
        ev.wait()
    assert not first.value.refused and "takes no more work" not in str(first.value)
    q.write(buf, 4, 7)
    with pytest.raises(umd.GpuError) as later:
        q.flush()
    assert later.value.refused and later.value.info == first.value.info
    assert str(later.value) == (f"{first.value}; the queue's context was reset for it and takes no more work: "
                                "make a new queue")
    assert kmd.stats["resets"] == 1
    q2 = gpu.queue()
    q2.write(buf, 4, 8)
    assert q2.signal().wait() and buf.u32[1] == 8
    # a copy queue's hang resets its ring alone: a command that waits for it (a new IB,
    # throttled at max_inflight) raises its error, but not as refused, and the queue runs on
    cq = gpu.queue(engine="copy", max_inflight=1)
    cq.wait_mem(buf, 8, 1)
    cq.flush()
    with pytest.raises(umd.GpuError) as throttled:
        cq.write(buf, 12, 5)
    assert not throttled.value.refused and "takes no more work" not in str(throttled.value)
    cq.write(buf, 12, 5)  # (not recorded by the call that raised: again)
    cq.finish()
    assert buf.u32[3] == 5
    gpu.close()


def test_open_before_a_device_is_bound():
    """umd.open() at the top of an app file with a main() runs when `gpucosim run` imports
    it, before the device is up; a script run by python must bind one: one line saying so
    (it was the KMD's KmdError, 'call kmd_model.bind'), whose RefModel it says where to import
    from (a newcomer's `kmd_model.bind(RefModel())` was a NameError)."""
    kmd_model.unbind()
    with pytest.raises(umd.UmdError, match=r"^open: no GPU is bound yet: an app with a main\(\) run by `gpucosim "
                       r"run` opens it in main\(\) .* a script run by python binds one first: import kmd_model; "
                       r"from testbench.refmodel import RefModel; kmd_model.bind\(RefModel\(\)\) "
                       r"\(docs/tutorial.md\)$"):
        umd.open()


def test_a_mistyped_keyword_says_what_the_call_takes():
    """umd.open(pool=False) was Python's "open() got an unexpected keyword argument 'pool'":
    which open, and what it takes, the app had to look up. Every entry point's mistyped
    keyword now names the call, what it takes and the name probably meant; a TypeError from
    inside a call (a wrong value) is the call's own, untouched."""
    kmd_model.bind(RefModel())
    _raises(TypeError, "umd.open() got an unexpected keyword argument 'pool': did you mean pools=? (umd.open() takes "
            "api_version, winsys, pools)", umd.open, pool=False)
    _raises(TypeError, "umd.open() got an unexpected keyword argument 'api' (umd.open() takes api_version, winsys, "
            "pools)", umd.open, api=2)
    gpu = umd.open(api_version=2)
    q, buf = gpu.queue(), gpu.alloc(64)
    _raises(TypeError, "Device.alloc() got an unexpected keyword argument 'domian': did you mean domain=? "
            "(Device.alloc() takes size, domain, alignment, zero)", gpu.alloc, 64, domian="vram")
    _raises(TypeError, "Device.queue() got an unexpected keyword argument 'engin': did you mean engine=? "
            "(Device.queue() takes flush_threshold, flush_dwords, ib_size_dw, max_inflight, engine, priority)",
            gpu.queue, engin="copy")
    _raises(TypeError, "Event.wait() got an unexpected keyword argument 'timout': did you mean timeout=? "
            "(Event.wait() takes timeout, timeout_cycles)", q.signal().wait, timout=5)
    _raises(TypeError, "Buffer.free() got an unexpected keyword argument 'now' (Buffer.free() takes no arguments)",
            buf.free, now=True)
    _raises(TypeError, "Queue.close() got an unexpected keyword argument 'wait' (Queue.close() takes no arguments)",
            q.close, wait=False)
    _raises(TypeError, "alloc: zero must be True or False, not 1", gpu.alloc, 64, zero=1)  # (from inside: as it was)
    assert not q.closed and not buf.freed
    gpu.close()


def test_how_much_memory_an_app_has():
    """On the model a newcomer's alloc(20 << 20) of GTT failed with the kernel's hex alone
    ("no 0x1400000 bytes free in GTT (0xff3000 free, largest hole 0xe00000)"): that the
    kernel's buffers take half of GTT (the CS shadow pool) was written nowhere a newcomer
    reads, and alloc(1 << 30) said "GPU virtual address space exhausted", as if freeing
    buffers would make room. The error says what the heap has and holds, in MiB, and points
    at docs/tutorial.md's paragraph, whose figures are the model's."""
    from pathlib import Path

    text = " ".join((Path(__file__).parents[3] / "docs" / "tutorial.md").read_text().split())
    assert "**How much memory an app has.** The device's 64 MiB (the model's and the RTL's) are two heaps of " \
           "32 MiB" in text and "So an app has about 16 MiB of GTT and nearly 32 MiB of VRAM." in text
    kmd_model.bind(RefModel())
    gpu = umd.open()
    m = gpu.memory()
    assert m.gtt.total == 32 << 20 and 16 << 20 < m.gtt.used < 16.2 * (1 << 20)  # the kernel's half
    assert 32 << 20 > m.vram.total > m.vram.total - m.vram.used > 31.9 * (1 << 20)
    kernel = m.gtt.used
    _raises(umd.OutOfMemory, "alloc: no device memory for 0x1400000 bytes (ENOMEM: GEM_CREATE: no 0x1400000 bytes "
            "free in GTT (0xff3000 free, largest hole 0xe00000)); GTT has 32 MiB: 15.9 MiB free, the largest buffer "
            "that fits 14 MiB; this Device holds 0 MiB of it, the kernel (its rings and the CS checker's shadow pool) "
            "and other clients 16.1 MiB (gpu.memory(); docs/tutorial.md, \"How much memory an app has\")",
            gpu.alloc, 20 << 20)
    assert "0x1400000 bytes (...); GTT has 32 MiB: 15.9 MiB free" in text
    bufs = [gpu.alloc(1 << 20) for _ in range(3)]
    big = gpu.alloc(30 << 20, "vram")
    with pytest.raises(umd.OutOfMemory) as ei:
        gpu.alloc(13 << 20)
    assert str(ei.value).endswith(f"this Device holds 3 MiB of it, the kernel (its rings and the CS checker's shadow "
                                  f"pool) and other clients {(kernel >> 10) / 1024:.1f} MiB (gpu.memory(); "
                                  "docs/tutorial.md, \"How much memory an app has\")"), ei.value
    with pytest.raises(umd.OutOfMemory, match=r"^alloc: no device memory for 0x400000 bytes .*; VRAM has 32 MiB: 1.9 "
                       r"MiB free, the largest buffer that fits 1.9 MiB; this Device holds 30 MiB of it, the kernel "
                       r"\(its VMs' page tables\) and other clients 0.1 MiB "):
        gpu.alloc(4 << 20, "vram")
    _raises(umd.OutOfMemory, "alloc: 0x40000000 bytes is more than the whole of GTT (32 MiB, 12.9 MiB of it free "
            "now: gpu.memory(); docs/tutorial.md, \"How much memory an app has\")", gpu.alloc, 1 << 30)
    assert "0x40000000 bytes is more than the whole of GTT (32 MiB, 15.9 MiB of it free now" in text
    for b in (*bufs, big):
        b.free()
    gpu.close()


def test_every_entry_point_says_what_it_does():
    """help(gpu.memory) and help(q.close) showed a signature and nothing else: the two entry
    points without a docstring, where a newcomer looks first."""
    for table in umd.TABLES.values():
        for key, fn in table.entries.items():
            assert len((fn.__doc__ or "").split()) >= 5, f"API v{table.version} {key}() has no docstring"


@pytest.mark.parametrize("closing", ["queue", "device"])
def test_a_close_that_gives_up_on_a_running_job_says_so(closing):
    """A queue whose job still ran when its close() had waited DEFAULT_TIMEOUT cycles (here a
    wait_mem on a flag the app sets later; the job timer raised for a slow job) was closed
    without a word, as if its work were done: the app's last write had not run, and its
    event's wait() said the work "failed or was cancelled" while it still ran. close() (and
    Device.close(), after closing everything) raises GpuTimeout naming the running job."""
    kmd_model.bind(RefModel(), job_timeout=1 << 40)
    gpu = umd.open()
    flag, out = gpu.alloc(64), gpu.alloc(64)
    q = gpu.queue()
    q.wait_mem(flag, 0, 1)
    q.write(out, 0, 0x55)
    ev = q.signal()
    q.flush()
    with pytest.raises(umd.GpuTimeout) as ei:
        q.close() if closing == "queue" else gpu.close()
    assert str(ei.value) == (
        "close: queue (context 1) not idle after 2000000 cycles: closed all the same, its last job (seqno 0x1) still "
        "running: finish(timeout) before close() waits longer; its events' signalled() turns True if it ends")
    assert q.closed and not ev.signalled()
    if closing == "queue":
        _raises(ValueError, "wait: the queue of this event was closed while the job carrying it still ran (close() "
                "gave up on it after DEFAULT_TIMEOUT cycles): its signalled() turns True if it ends", ev.wait)
        flag.u32[0] = 1
        assert kmd_model.bound().wait_for(ev.signalled, 1_000_000) and int(out.u32[0]) == 0x55
        gpu.close()  # (nothing left running: no error)
    assert gpu.closed


def test_a_misspelt_setting_is_refused_not_ignored():
    """`q.flush_treshold = 1` (or max_in_flight, a Buffer's gpuaddr) made a new attribute nobody
    reads: the queue went on flushing at its own threshold, and the app never knew. A new name
    that close to one the object has is an AttributeError naming it; an app's own notes on its
    objects (`buf.name = ...`) and a replaced entry point are taken as before."""
    gpu = _gpu()
    q, buf = gpu.queue(), gpu.alloc(64)
    _raises(AttributeError, "Queue has no attribute 'flush_treshold': did you mean flush_threshold? (set as "
            "'flush_treshold', nothing would read it)", setattr, q, "flush_treshold", 1)
    _raises(AttributeError, "Queue has no attribute 'max_in_flight': did you mean max_inflight? (set as "
            "'max_in_flight', nothing would read it)", setattr, q, "max_in_flight", 4)
    _raises(AttributeError, "Device has no attribute 'api_versoin': did you mean api_version? (set as "
            "'api_versoin', nothing would read it)", setattr, gpu, "api_versoin", 1)
    assert q.flush_threshold == 64 and q.max_inflight == 32
    buf.name, gpu.note = "weights", 1
    q.flush_threshold = 1  # (the setting itself, as ever)
    q.write(buf, 0, 5)  # (flushed at once: the threshold is 1)
    assert q.last_seq is not None
    gpu.close()


@pytest.mark.parametrize("pools", [True, False])
def test_the_default_alignment_is_what_alloc_says(pools):
    """alloc's docstring said the default alignment, 0, is "a page, 4 KiB": a small buffer,
    carved from a slab, is at a multiple of its entry's size (256 bytes for alloc(64)). The
    docstring says which, and each buffer is where it says (pools=False: every one a page)."""
    import inspect

    kmd_model.bind(RefModel())
    gpu = umd.open(pools=pools)
    doc = " ".join(inspect.getdoc(gpu.alloc).split())
    assert "a small one, 16 KiB or less, carved from a slab, is aligned to its size rounded up to a power of two, " \
           "at least 256 bytes" in doc
    for n in (1, 64, 300, 4096, 5000, 16384, 16385, 70000):
        b = gpu.alloc(n)
        want = max(256, 1 << (n - 1).bit_length()) if pools and n <= 16384 else 4096
        assert b.gpu_addr % want == 0 and (b.slab is not None) == (pools and n <= 16384), (n, hex(b.gpu_addr))
    gpu.close()


def test_the_umd_docstrings_example_runs():
    """help(umd)'s first lines are the example a newcomer copies: it waited on `flag`, a name
    it never made (NameError; made as a buffer of its own, nothing wrote it: the job timer's
    GpuError). It runs as written now, after binding a device."""
    kmd_model.bind(RefModel())
    lines = umd.__doc__.split("\n\n")[1].splitlines()
    code = "\n".join(line[4:].split("  #")[0] for line in lines)
    space: dict = {}
    exec(code, space)
    assert space["ev"].signalled() and space["buf"].freed and space["dev"].closed


def test_help_of_a_queue_and_a_device_lists_their_calls():
    """help(umd.Queue) and help(q), where a newcomer looks for what a queue can do, listed no
    write(), signal() or flush() (the calls are the API version's dispatch entries, not the
    class's methods): only seq_done and seq_of, and Queue had no docstring at all. help(umd.Event)
    showed operator.attrgetter's own docstring under each of its recorded attributes."""
    import pydoc

    def text(obj):
        return " ".join(pydoc.render_doc(obj, renderer=pydoc.plaintext).split())

    q_help, dev_help, ev_help = text(umd.Queue), text(umd.Device), text(umd.Event)
    for call in ("write(buf, offset, data): Record WRITE_DATA packets", "signal(): An event the GPU signals",
                 "flush(): Submit what was recorded (one CS ioctl)", "finish(timeout=2000000): Flush, then wait",
                 "copy(dst, dst_offset, src, src_offset, size): Device → device: copy `size` bytes (any alignment) "
                 "(API v2 on)", "wait_mem(buf, offset, ref, *, mask=4294967295, compare='==', poll_interval=16): "
                 "GPU-side wait: the queue stops until (dword at buf+offset & mask) <compare> ref (WAIT_REG_MEM; "
                 "unsigned compare: always, <, <=, ==, !=, >=, >)", "A command queue: `q = gpu.queue()`"):
        assert call in q_help, call
    for call in ("alloc(size, domain='gtt', *, alignment=0, zero=True): A buffer of `size` bytes", "queue(*, ",
                 "close(): Close every queue"):
        assert call in dev_help, call
    assert "_owner" not in dev_help
    assert "attrgetter" not in ev_help and "attrgetter" not in text(umd.Buffer)
    assert "seq | the seqno of the submission carrying it, once its queue flushed it (read-only" in ev_help


@pytest.mark.parametrize("ending, says", [
    ("", "umd: the program ended with 2 commands of <umd.Queue ctx 1 api v3> recorded and never submitted: the GPU "
         "never ran them (flush(), finish() or close() submits; the first Queue.write() #1)"),
    ("q.flush()", ""), ("gpu.close()", ""), ("kmd_model.unbind()", "")])
def test_a_program_that_ends_without_submitting_is_told(ending, says):
    """`python app.py` whose last q.write() was never flushed lost it without a word: the
    GPU never ran it (`gpucosim run` says so in its exit report, a LEAK line). The UMD says
    it as the interpreter ends, one line per such queue; nothing when the work was
    submitted, the device closed, or the driver gone (what gpucosim's run does at its end)."""
    import subprocess
    import sys
    from pathlib import Path

    app = ("import umd, kmd_model\nfrom testbench.refmodel import RefModel\nkmd_model.bind(RefModel())\n"
           "gpu = umd.open()\nb = gpu.alloc(64)\nq = gpu.queue()\nq.write(b, 0, 1)\nq.write(b, 4, 2)\n" + ending + "\n")
    r = subprocess.run([sys.executable, "-c", app], cwd=Path(__file__).parents[3], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == (says and says + "\n"), r.stderr


def test_an_async_queues_flushes_queued_at_the_programs_end_are_submitted_and_a_refusal_told():
    """An async queue's flush() returns before its ioctl; a program that ended then lost the
    flushes still queued on the submission thread (a daemon: it died with the interpreter)
    and a refusal of one that nobody's next call raised, without a word. At the end they are
    submitted (as `gpucosim run` does), and a refusal is one line. The app holds the KMD's lock
    to the end here, so its three flushes are still queued when the interpreter ends."""
    import subprocess
    import sys
    from pathlib import Path

    app = ("import atexit\n"
           "atexit.register(lambda: print('queued at the end:', len(gpu.submitter.jobs), 'submitted:', q.flushes - "
           "len(q.pending)))\n"  # (registered first: runs last, after the UMD's)
           "import umd, kmd_model\nfrom umd.winsys import KMD_LOCK\nfrom spec import pm4\n"
           "from testbench.refmodel import RefModel\nkmd_model.bind(RefModel())\n"
           "gpu = umd.open()\nb = gpu.alloc(64)\nq = gpu.queue(async_submit=True)\n"
           "bad = gpu.queue(async_submit=True)\nbad.emit_raw(pm4.write_data(kmd_model.bound().fence_addr, [0]))\n"
           "KMD_LOCK.acquire()\natexit.register(KMD_LOCK.release)\n"  # (runs first: the thread goes on then)
           "for i in range(3):\n    q.write(b, 4 * i, i)\n    q.flush()\nbad.flush()\n")
    r = subprocess.run([sys.executable, "-c", app], cwd=Path(__file__).parents[3], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout == "queued at the end: 0 submitted: 3\n", (r.stdout, r.stderr)
    assert re.fullmatch(r"umd: the program ended with a flush of <umd\.Queue ctx \d+ api v3> refused on the "
                        r"submission thread, never raised to it: flush \(asynchronous submission #1 of queue context "
                        r"\d+\): EINVAL: CS: WRITE_DATA at IB\+0x0[^\n]*\n", r.stderr), r.stderr


class _Untouchable(np.ndarray):
    """An array whose values must not be read: the call should refuse it by its size alone."""

    def tolist(self):
        raise AssertionError("the values were converted")


class _UntouchableList(list):
    def __iter__(self):
        raise AssertionError("the values were converted")


def test_a_write_too_large_for_its_buffer_is_refused_by_its_size():
    """q.write(buf, 0, np.zeros(10**8, np.uint32)) to a 64-byte buffer converted and checked
    all 10**8 values (a minute, and gigabytes of Python ints) before it said the write did
    not fit; emit_raw of 10**7 dwords took seconds to say they do not fit in an IB. Each is
    refused by its length first, in the same words."""
    gpu = _gpu()
    q, buf = gpu.queue(), gpu.alloc(64)
    big = np.zeros(10**6, np.uint32).view(_Untouchable)
    _raises(ValueError, "write: [0x0, 0x3d0900) is outside the 0x40-byte buffer", q.write, buf, 0, big)
    _raises(ValueError, "write: [0x8, 0x4c) is outside the 0x40-byte buffer", q.write, buf, 8,
            _UntouchableList([0] * 17))
    _raises(ValueError, "write: [0x0, 0x44) is outside the 0x40-byte buffer", q.write, buf, 0, bytes(68))
    top = q.cmdbuf.max_packet_dw
    _raises(ValueError, f"emit_raw: 1000000 dwords do not fit in one IB of this queue (ib_size_dw=1024 holds at most "
            f"{top} of an app's dwords beside its chaining and padding): record them in several calls, or make the "
            "queue with a larger ib_size_dw", q.emit_raw, _UntouchableList([0] * 10**6))
    _raises(ValueError, "write: offset must be a non-negative multiple of 4, not 2", q.write, buf, 2, big)
    buf.free()
    _raises(ValueError, f"write: buf {_named(buf)} was freed (Buffer.free)", q.write, buf, 0, big)
    q.write(gpu.alloc(64), 0, list(range(16)))  # (what fits is written as before)
    assert q.calls == 1
    gpu.close()


def test_numpy_bools_are_bools():
    """numpy's integers are integers to every call; its bools (what `arr.any()` returns) were
    refused as "must be True or False, not np.True_". 1 and "yes" still are."""
    kmd_model.bind(RefModel())
    flag = np.zeros(4, np.uint8).any()  # np.False_
    gpu = umd.open(pools=flag)
    assert gpu.memory().pools.enabled is False
    buf = gpu.alloc(64, zero=~flag)
    assert not buf.map().any()
    q = gpu.queue(async_submit=flag)
    assert q.async_submit is False
    _raises(TypeError, "alloc: zero must be True or False, not 1", gpu.alloc, 64, zero=1)
    _raises(TypeError, "open: pools must be True or False, not 'yes'", umd.open, pools="yes")
    _raises(TypeError, "queue: async_submit must be True, False or None, not 1", gpu.queue, async_submit=1)
    gpu.close()


def test_version_1_queue_has_no_engine_or_priority():
    """umd/api.py: Device.queue(engine=, priority=) came with version 2. Version 1 took them
    all the same (a copy queue for an app whose version has none), while async_submit=, of
    version 3, was refused by name. Now each later argument is, and the defaults hold."""
    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=1)
    _raises(TypeError, "queue: engine= is not in API version 1 (it is in version 2, 3)", gpu.queue, engine="copy")
    _raises(TypeError, "queue: priority= is not in API version 1 (it is in version 2, 3)", gpu.queue,
            priority="high")
    _raises(TypeError, "queue: async_submit= is not in API version 1 (it is in version 3)", gpu.queue,
            async_submit=True)
    _raises(TypeError, "Device.queue() got an unexpected keyword argument 'frobnicate' (Device.queue() takes "
            "flush_threshold, flush_dwords, ib_size_dw, max_inflight)", gpu.queue, frobnicate=1)
    q = gpu.queue(flush_threshold=4, ib_size_dw=256, max_inflight=2)
    assert (q.engine, q.priority, q.flush_threshold) == ("gfx", "normal", 4)
    assert umd.open(api_version=2).queue(engine="copy", priority="low").engine == "copy"
    gpu.close()


@pytest.mark.parametrize("exc_type", [KeyError, KeyboardInterrupt], ids=["exception", "ctrl_c"])
@pytest.mark.parametrize("kind", ["device", "queue"])
def test_the_bodys_exception_is_what_a_with_raises(kind, exc_type):
    """A with block whose body raised while its queue had a submission the KMD refuses: the
    close's SubmitError replaced the app's own exception (or the ^C), which survived only as
    the context of another traceback. The body's exception propagates, the refusal in its notes;
    without one the close raises the refusal itself."""
    gpu, exc = _gpu(), exc_type("the app's")
    with pytest.raises(exc_type) as ei:
        with (gpu if kind == "device" else gpu.queue()) as obj:
            q = obj.queue() if kind == "device" else obj
            q.emit_raw([0xC0007B00])  # opcode 0x7b: the CS checker refuses the flush at close
            raise exc
    assert ei.value is exc and q.closed
    (note,) = ei.value.__notes__
    assert note.startswith("and when the with block closed it: SubmitError: close: EINVAL: CS: malformed packet "
                           "at IB+0x0 (") and note.endswith(
                               "): UNKNOWN op=0x7b count=0 (recorded by Queue.emit_raw() #1)"), note
    gpu = _gpu()
    with pytest.raises(umd.SubmitError, match=r"^close: EINVAL: CS: malformed packet .* UNKNOWN op=0x7b count=0 "
                                                r"\(recorded by Queue.emit_raw\(\) #1\)$"):
        with gpu.queue() as q:
            q.emit_raw([0xC0007B00])
    gpu.close()


def test_the_same_fill_runs_without_a_dma_engine():
    """fill(buf, off, 0, v) records nothing with a DMA engine and on a copy queue, but was a
    ValueError ("a positive multiple of 4") on a device without one (`--sim model --no-dma`):
    the same app failed by backend. A transfer the device cannot do names the copy queue,
    which can."""
    gpu = _gpu(dma=False)
    q, buf = gpu.queue(), gpu.alloc(64)
    q.fill(buf, 0, 0, 1)
    q.fill(buf, 4, 8, 7)
    q.finish()
    assert buf.u32[:4].tolist() == [0, 7, 7, 0]
    _raises(ValueError, "fill: size must be a non-negative multiple of 4, not 10", q.fill, buf, 0, 10, 1)
    _raises(RuntimeError, "copy: this device has no DMA engine (CAPS.DMA = 0): a copy queue "
            "(Device.queue(engine='copy')) has the SDMA's", q.copy, buf, 0, buf, 32, 4)
    cq = gpu.queue(engine="copy")
    cq.copy(buf, 32, buf, 4, 8)
    cq.fill(buf, 0, 0, 1)
    cq.finish()
    assert buf.u32[8:10].tolist() == [7, 7]
    gpu.close()
    gpu = _gpu(dma=False, sdma=False)
    _raises(RuntimeError, "upload: this device has no DMA engine (CAPS.DMA = 0)", gpu.queue().upload,
            gpu.alloc(64), 0, b"abcd")
    gpu.close()


def test_a_queue_without_memory_says_queue():
    """gpu.queue() when GTT is full: the OutOfMemory began "alloc: no device memory", a call
    the app had not made; it names queue() and what the memory was for, in the kernel's words."""
    gpu = _gpu()
    held = [gpu.alloc(gpu.memory().gtt.largest_free - (1 << 20), "gtt")]
    with pytest.raises(umd.OutOfMemory):
        while True:
            held.append(gpu.alloc(4096, "gtt"))
    with pytest.raises(umd.OutOfMemory, match=r"^queue: no memory for the queue's page \(4096 bytes of GTT: its "
                       r"fences and timestamps\): ENOMEM: GEM_CREATE: no 0x[0-9a-f]+ bytes free in GTT"):
        gpu.queue()
    for b in held[1:]:
        b.free()
    gpu.queue().close()  # memory back: a queue again
    gpu.close()


def test_a_worker_thread_on_a_thread_bound_backend():
    """On the RTL only the thread that opened the device may drive it. An app's worker thread
    calling the UMD got the testbench's RuntimeError ("driven from driver code started with
    testbench.sim.bridge.bridge ... greenlet"), names the app never saw; it is now the UMD's
    one line naming the backend, the thread and what to do. The model (not thread-bound)
    takes any thread, and an async queue's submission thread still runs on a bound one."""
    import threading

    from tests.umd.submission.test_umd_async import ThreadBoundModel

    dev = ThreadBoundModel()
    kmd_model.bind(dev)
    gpu = umd.open()
    buf = gpu.alloc(64)
    q = gpu.queue(async_submit=True)
    got = []

    def worker():
        try:
            gpu.queue()
        except umd.UmdError as e:
            got.append(str(e))

    t = threading.Thread(target=worker, name="worker")
    t.start()
    t.join()
    assert got == ["model: the UMD runs on the thread that opened the device (the simulator is driven from there) "
                   "and this call came from thread 'worker': call it from the opening thread; "
                   "Device.queue(async_submit=True) submits in the background (API v3)"]
    assert dev.strays == 0
    q.write(buf, 0, 7)
    q.finish()
    assert buf.u32[0] == 7
    gpu.close()
    gpu = _gpu()  # the model as it is: any thread
    t = threading.Thread(target=lambda: got.append(gpu.queue()))
    t.start()
    t.join()
    assert isinstance(got[-1], umd.Queue)
    gpu.close()


def test_a_download_that_times_out_says_download():
    """download(timeout=) waits as finish() does: running out of cycles raised GpuTimeout
    "finish: queue ... not idle", a call the app had not made."""
    gpu = _gpu()
    q, buf = gpu.queue(), gpu.alloc(64)
    q.wait_mem(buf, 8, 1)  # the queue waits for the CPU
    _raises(umd.GpuTimeout, f"download: queue (context {q.ctx_id}) not idle after 0 cycles", q.download, buf, 0, 4,
            timeout=0)
    buf.u32[2] = 1
    assert q.download(buf, 8, 4).tolist() == [1, 0, 0, 0]
    gpu.close()


def test_emit_raw_longer_than_an_ib_names_emit_raw():
    """emit_raw of more dwords than one IB holds (they must stay together: they are one
    packet, or a few) was the command buffer's ValueError, "CmdBuf: a 2000-dword packet does
    not fit an IB of 1024 dwords", a name the app never saw, and raised after the call had
    taken its number: a wait_event on the event recorded just before it then said the queue
    "recorded commands after it", when nothing was. It is emit_raw's own one line, saying
    what to do, and the call records nothing, as every refused argument."""
    gpu = _gpu()
    a, b, buf = gpu.queue(), gpu.queue(), gpu.alloc(64)
    a.write(buf, 0, 1)
    ev = a.signal()
    top = a.cmdbuf.max_packet_dw
    _raises(ValueError, f"emit_raw: 2000 dwords do not fit in one IB of this queue (ib_size_dw=1024 holds at most "
            f"{top} of an app's dwords beside its chaining and padding): record them in several calls, or make the "
            "queue with a larger ib_size_dw", a.emit_raw, [0] * 2000)
    b.wait_event(ev)  # ev is still the last thing `a` recorded: this flushes `a` up to it
    b.write(buf, 4, 2)
    b.finish()
    assert ev.signalled() and buf.u32[:2].tolist() == [1, 2]
    from spec import pm4

    a.emit_raw([pm4.header(0x10, top - 2)] + [0] * (top - 1))  # a NOP of the most one IB holds: taken
    a.finish()
    assert a.calls == 3
    gpu.close()


LOST = ("this Device's file was closed by the driver: it was unloaded or reloaded (kmd_model.unbind, "
        "kmd_model.rebind, or a bind of its device again or of another closes every open file)")


@pytest.mark.parametrize("how", ["rebind", "unbind", "bind another device"])
def test_a_device_whose_driver_was_reloaded(how):
    """kmd_model.rebind() (as batching.py reloads the driver) or unbind() with a Device still
    open closes its file: each call then met it its own way, the KMD's KmdError EBADF
    ("GEM_CREATE: the file is closed"), kmd_model's MappingRevoked, or an alloc from a slab
    that handed out dead memory; and gpu.close() raised MappingRevoked every time, so the app
    could never close it (a traceback and a crash report under gpucosim run). Every call is
    now DeviceLost naming it, and close() closes what is left, raising only what never ran."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    q, buf = gpu.queue(), gpu.alloc(64)
    named = repr(q)  # (as the messages name it: its repr once lost ends "lost>")
    q.write(buf, 0, 1)
    ev = q.signal()
    q.finish()
    q.write(buf, 4, 2)  # recorded, never submitted
    view, words = buf.map(), buf.u32  # kept across the reload
    if how == "bind another device":  # (its Device went on, on a driver no longer the bound one)
        kmd_model.bind(RefModel())
    else:
        getattr(kmd_model, how)()
    # a view taken before: kmd_model's own MappingRevoked ("BO fd3:1 ... was closed (its file
    # was closed)"), a class no UMD document names; map() handed the dead view out again
    for use in (lambda: view[0], lambda: words.__setitem__(0, 5), lambda: words[2:].tolist(), view.copy):
        _raises(umd.DeviceLost, f"a view of {_named(buf)} (Buffer.map, Buffer.u32): {LOST}: nothing of this Device runs "
                "any more: open a new Device (umd.open())", use)
    _raises(umd.DeviceLost, f"u32: {LOST}: nothing of this Device runs any more: open a new Device (umd.open())",
            lambda: buf.u32)
    for call, fn in [("alloc", lambda: gpu.alloc(64)), ("queue", gpu.queue), ("memory", gpu.memory),
                     ("write", lambda: q.write(buf, 0, 1)), ("flush", q.flush), ("finish", q.finish),
                     ("wait", ev.wait), ("signalled", ev.signalled), ("map", buf.map)]:
        _raises(umd.DeviceLost, f"{call}: {LOST}: nothing of this Device runs any more: open a new Device (umd.open())",
                fn)
    assert repr(q) == named[:-1] + " lost>"
    _raises(umd.DeviceLost, f"close: {named}: 1 command recorded and never submitted did not run: {LOST}", gpu.close)
    assert gpu.closed and q.closed and buf.freed
    gpu.close()  # (closed: nothing more to say)
    _raises(ValueError, "write: the queue is closed (its device was closed: Device.close closes its queues)",
            q.write, buf, 0, 1)
    if how == "unbind":
        kmd_model.bind(RefModel())
    gpu = umd.open()  # a new Device works
    with gpu.queue() as q2:
        q2.write(b := gpu.alloc(64), 0, 5)
    assert b.u32[0] == 5
    gpu.close()


def test_an_entry_points_signature_shows_only_what_the_app_passes():
    """help(gpu.alloc) and inspect.signature(gpu.alloc) showed `_owner`, the UMD's own
    argument (the buffer pools'): an entry point's signature is the one the app calls, its
    `_x` arguments left out, as the argument errors already showed it."""
    import inspect

    gpu = _gpu()
    q = gpu.queue()
    for call in (gpu.alloc, gpu.queue, q.write, q.flush, q.close, q.signal):
        sig = inspect.signature(call)
        assert not any(p.startswith("_") or p == "self" for p in sig.parameters), (call, sig)
    assert str(inspect.signature(gpu.alloc)).startswith("(size: 'int', domain: 'str | int' = 'gtt', *, alignment: ")
    q.close()
