"""A new user's mistakes, and what each answers: a wait_mem() no dword can end refused at
the call (it waited for the KMD's job timer), a view kept past Buffer.free() named by the
UMD (it was kmd_model's MappingRevoked), what a Buffer's domain prints, and a GpuError's
address where api.md says it is."""

from __future__ import annotations

import re

import pytest

import kmd_model
import umd
from spec import pm4
from testbench.refmodel import RefModel

from ..handles import named as _named


def _gpu(**kw):
    kmd_model.bind(RefModel(), **kw)
    return umd.open()


def _raises(exc, message, fn, *args, **kwargs):
    with pytest.raises(exc, match="^" + re.escape(message) + "$"):
        fn(*args, **kwargs)


NEVER = ("can never hold ({}): the queue would stop there until the KMD's job timer ends the job: fix ref, mask or "
         "compare")


@pytest.mark.parametrize("engine", ["gfx", "copy"])
@pytest.mark.parametrize("ref, mask, compare, said", [
    (1, 0, "==", "(dword & 0x0) == 0x1 " + NEVER.format("the masked dword never has ref's bits 0x1, outside mask")),
    (0x1F0, 0xF0, "==", "(dword & 0xf0) == 0x1f0 "
     + NEVER.format("the masked dword never has ref's bits 0x100, outside mask")),
    (0, 0, "!=", "(dword & 0x0) != 0x0 " + NEVER.format("the masked dword is always 0")),
    (0, 0, "NE", "(dword & 0x0) != 0x0 " + NEVER.format("the masked dword is always 0")),  # (the packet's name)
    (0, 0xFFFF_FFFF, "<", "(dword & 0xffffffff) < 0x0 " + NEVER.format("no unsigned dword is below 0")),
    (0x10, 0xF, ">=", "(dword & 0xf) >= 0x10 " + NEVER.format("the masked dword is at most mask, 0xf")),
    (0xF, 0xF, ">", "(dword & 0xf) > 0xf " + NEVER.format("the masked dword is at most mask, 0xf")),
    (0xFFFF_FFFF, 0xFFFF_FFFF, ">", "(dword & 0xffffffff) > 0xffffffff "
     + NEVER.format("the masked dword is at most mask, 0xffffffff")),
])
def test_a_wait_mem_no_dword_can_end_is_refused(engine, ref, mask, compare, said):
    """`q.wait_mem(buf, 0, 1, mask=0)` can never hold: it was submitted, and the queue stopped
    until the KMD's job timer (500,000 cycles, some 10 s on Verilator) ended the job with a
    GpuError. Now the call refuses it, recording nothing, on a gfx queue and a copy queue."""
    gpu = _gpu()
    q, buf = gpu.queue(engine=engine), gpu.alloc(64)
    _raises(ValueError, "wait_mem: " + said, q.wait_mem, buf, 0, ref, mask=mask, compare=compare)
    assert q.calls == 0 and q.cmdbuf.dwords == 0
    q.finish()  # nothing was submitted: nothing waits


@pytest.mark.parametrize("engine", ["gfx", "copy"])
@pytest.mark.parametrize("ref, mask, compare, value", [
    (0, 0, "==", 0),            # mask 0: holds at once
    (0x10, 0xF0, "==", 0x1F),   # ref within mask
    (0, 0, "<=", 0),            # holds at once
    (1, 0xFFFF_FFFF, "<", 0),
    (0xF, 0xF, ">=", 0xF),      # the most mask lets through
    (0xE, 0xF, ">", 0xF),
    (0, 1, "!=", 1),
    (5, 0, "always", 0),
])
def test_a_wait_mem_some_dword_ends_is_taken_and_ends(engine, ref, mask, compare, value):
    """The edge of each rule: a wait the right dword ends is recorded, and ends once the dword
    is there (on the copy engine's POLL_REGMEM too)."""
    gpu = _gpu(job_timeout=200_000)
    q, buf = gpu.queue(engine=engine), gpu.alloc(64)
    buf.u32[0] = value
    q.wait_mem(buf, 0, ref, mask=mask, compare=compare)
    q.write(buf, 4, 0xD0E)
    q.finish()
    assert buf.u32[1] == 0xD0E


def test_a_raw_wait_reg_mem_that_never_holds_is_the_hardwares_to_run():
    """The KMD's CS checker takes a raw WAIT_REG_MEM whatever its mask and reference (legal
    hardware-wise: amdgpu's parser does not judge a wait either): it runs, and the job
    timer ends it. Only the UMD's friendly wait_mem() refuses it."""
    gpu = _gpu(job_timeout=5_000)
    q, buf = gpu.queue(), gpu.alloc(64)
    q.emit_raw(pm4.wait_reg_mem(buf.gpu_addr, 1, 0, "EQ"))
    with pytest.raises(umd.GpuError, match=r"job 0x1 timed out on gfx: .* stuck in WAIT_REG_MEM at IB\+0x0 .*"
                       r"\*0x[0-9a-f]+ & 0x0 = 0x0, waits for == 0x1, .*recorded by Queue.emit_raw\(\) #1"):
        q.finish()


@pytest.mark.parametrize("pools", [True, False])
def test_a_view_used_after_free_names_the_free(pools):
    """`v = buf.map(); buf.free(); v[0]` raised kmd_model's MappingRevoked, a class no UMD
    document names: now a ValueError naming Buffer.free (as every call given a freed buffer
    raises), for a read, a write, numpy's calls, a slice and u32, in a slab or a BO of its
    own; a copy made before the free is the app's; a device closed says Device.close."""
    kmd_model.bind(RefModel())
    gpu = umd.open(pools=pools)
    buf = gpu.alloc(4096, "vram")
    v, u, part = buf.map(), buf.u32, buf.map()[8:16]
    v[0] = 7
    kept = v.copy()
    buf.free()
    said = (f"a view of {_named(buf)} (Buffer.map, Buffer.u32) used after the buffer was freed (Buffer.free): its memory "
            "may be another buffer's now: copy what you need (view.copy()) before freeing it")
    for use in (lambda: v[0], lambda: v.__setitem__(0, 1), lambda: v.sum(), lambda: u[0], lambda: part[0],
                lambda: int(u[1:2].max())):
        _raises(ValueError, said, use)
    assert kept[0] == 7
    other = gpu.alloc(4096, "vram")
    w = other.map()
    gpu.close()
    _raises(ValueError, f"a view of {_named(other)} (Buffer.map, Buffer.u32) used after the buffer was freed (its device "
            "was closed: Device.close): its memory may be another buffer's now: copy what you need (view.copy()) "
            "before freeing it", lambda: w[0])


def test_a_buffers_domain_prints_as_alloc_names_it():
    """`print(buf.domain)` printed 4 (the uAPI's IntFlag on Python 3.11): it prints "vram" or
    "gtt", the words alloc() takes, and still equals the uAPI's value (as an int, a key)."""
    from kmd_model.uapi import Domain as KmdDomain

    gpu = _gpu()
    for name, kmd in (("gtt", KmdDomain.GTT), ("vram", KmdDomain.VRAM)):
        buf = gpu.alloc(64, name)
        d = buf.domain
        assert (str(d), f"{d}", f"{d:>5}", repr(d)) == (name, name, f"{name:>5}",
                                                        f"<Domain.{name.upper()}: {int(kmd)}>")
        assert d == kmd and int(d) == int(kmd) and {kmd: 1}[d] == 1 and d is umd.memory.Domain[name.upper()]
        assert gpu.alloc(64, d).domain is d and gpu.alloc(64, str(d)).domain is d  # (what it prints, alloc takes)
        assert repr(buf).startswith(f"<umd.Buffer {name.upper()} ")
        # (and equals what it prints, in alloc()'s any case: `buf.domain == "vram"` was False)
        other = "vram" if name == "gtt" else "gtt"
        assert d == name and d == name.upper() and not d != name and d != other and not d == other, d
        assert d in ("gtt", "vram") and d != "vramm" and d != 0


def test_a_buffers_view_is_written_through_not_set_and_map_takes_no_argument():
    """`buf.u32 = [1, 2]` was Python's "property 'u32' of 'Buffer' object has no setter" (the
    other read-only attributes name themselves); `buf.map(100)` (an offset, as vkMapMemory
    takes one) was taken as map's private caller name and returned the whole buffer."""
    gpu = _gpu()
    buf = gpu.alloc(64)
    _raises(AttributeError, "Buffer.u32 is a view of the buffer's memory, not set itself: write through it "
                            "(buf.u32[0] = 1, buf.u32[:2] = [1, 2])", setattr, buf, "u32", [1, 2])
    _raises(TypeError, "Buffer.map() takes 1 positional argument but 2 were given", buf.map, 100)
    buf.u32[:2] = [1, 2]  # (what the error says works)
    assert buf.u32[:3].tolist() == [1, 2, 0] and len(buf.map()) == 64
    buf.free()
    _raises(ValueError, f"u32: {_named(buf)} was freed (Buffer.free)", lambda: buf.u32)  # (its error: the call's name)
    gpu.close()


def test_a_gpu_errors_address_is_an_attribute():
    """api.md lists a GpuError's attributes: the address the GPU latched was only in
    `e.info.addr`. `e.addr` is it: a fault's is the access's (the unmapped address a write
    reached), any other error's the packet's own (IB+offset at the IB's address)."""
    import pickle

    gpu = _gpu()
    q = gpu.queue()
    kmd_model.bound().params.cs_check = False  # (the checker refuses both packets at submission)
    q.emit_raw(pm4.write_data(0x7000_0000, [1]))
    with pytest.raises(umd.GpuError) as ei:
        q.finish()
    e = ei.value
    assert (e.code, e.addr, e.ib_offset, e.command) == ("VM_FAULT", 0x7000_0000, 0, "Queue.emit_raw() #1")
    assert pickle.loads(pickle.dumps(e)).addr == 0x7000_0000
    q.write(q.device.alloc(64), 0, 1)
    q.emit_raw([pm4.header(0x7B, 0), 0])
    with pytest.raises(umd.GpuError) as ei:
        q.finish()
    e = ei.value
    assert e.code == "ILLEGAL_OPCODE" and e.ib_offset > 0
    assert e.addr == e.info.addr and re.search(rf"at IB\+{e.ib_offset:#x} \({e.addr:#x}\)", str(e)), str(e)


@pytest.mark.parametrize("async_submit", [False, True])
def test_polling_an_event_never_flushed_is_told_once(capsys, async_submit):
    """`while not ev.signalled(): pass` with no flush before looped for ever without a word
    (signalled() is a look at memory: it flushes nothing). After UNFLUSHED_LOOKS looks the
    UMD says once, on stderr, that the event was never flushed; a flushed event's looks
    say nothing, and it ends."""
    from umd.events import UNFLUSHED_LOOKS

    gpu = _gpu()
    q, buf = gpu.queue(async_submit=async_submit), gpu.alloc(64)
    q.write(buf, 0, 1)
    ev = q.signal()
    for _ in range(UNFLUSHED_LOOKS - 1):
        assert not ev.signalled()
    assert capsys.readouterr().err == ""
    for _ in range(3):
        assert not ev.signalled()
    assert capsys.readouterr().err == (
        f"umd: Event.signalled(): <umd.Event 1 pending> of {q!r} looked at {UNFLUSHED_LOOKS} times, never flushed: "
        "the GPU has not got it and will never signal it: flush() the queue first (Event.wait() flushes)\n")
    q.flush()
    looks = 0
    while not ev.signalled():
        looks += 1
    assert looks < UNFLUSHED_LOOKS and buf.u32[0] == 1
    later = q.signal()
    q.flush()
    while not later.signalled():
        pass
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("async_submit", [False, True])
def test_polling_an_event_whose_job_failed_raises_its_error(async_submit):
    """`while not ev.signalled(): pass` on an event whose job the KMD's job timer ended (a
    wait_mem nobody satisfies) looped for ever: the failed job never writes it, and only
    wait() or finish() asked the kernel. Every ASK_KERNEL_LOOKS-th look asks it too (WAIT_CS,
    no wait): the job's GpuError is raised there, once (finish() then raises nothing)."""
    from umd.events import ASK_KERNEL_LOOKS, POLL_CYCLES

    gpu = _gpu(job_timeout=100_000)
    q, buf = gpu.queue(async_submit=async_submit), gpu.alloc(64)
    q.wait_mem(buf, 0, 1)
    ev = q.signal()
    q.flush()
    looks = 0
    with pytest.raises(umd.GpuError, match=r"^GPU error: job 0x1 timed out on gfx: .* \(recorded by Queue.wait_mem\(\) "
                                           r"#1\)$"):
        while not ev.signalled():
            looks += 1
            assert looks < 10 * ASK_KERNEL_LOOKS
    assert looks >= 100_000 // POLL_CYCLES  # (not before the job timer ended it)
    assert looks % ASK_KERNEL_LOOKS == ASK_KERNEL_LOOKS - 1  # (the look that asked the kernel raised)
    q.finish()  # raised once
    # a job that runs long is polled past those looks, and ends well
    later = q.signal()
    q.wait_mem(buf, 4, 1)
    last = q.signal()
    q.flush()
    looks = 0
    while not last.signalled():
        looks += 1
        if looks == ASK_KERNEL_LOOKS + 5:  # (within the job timer's 100,000 cycles)
            buf.u32[1] = 1
    assert later.signalled() and looks > ASK_KERNEL_LOOKS


def test_print_of_memory_reads_in_mib():
    """`print(gpu.memory())` (the tutorial's "How much memory an app has") printed the
    dataclasses' repr, some 700 characters of byte counts; str() is one line in MiB of what
    the app asks (each heap's size, use and largest buffer, the VA range); repr() is whole."""
    gpu = _gpu()
    gpu.alloc(4 << 20, "vram")
    m = gpu.memory()
    said = str(m)
    assert "\n" not in said and len(said) < 400, said
    assert re.fullmatch(r"VRAM 32 MiB: 4 MiB used, the largest buffer that fits 28 MiB; GTT 32 MiB: "
                        r"[\d.]+ MiB used, the largest buffer that fits [\d.]+ MiB; GPU VA 1007 MiB: 4 MiB used by "
                        r"1 allocation, the largest free range [\d.]+ MiB \(used counts the kernel's own buffers "
                        r"too; repr\(\) has every field\)", said), said
    assert repr(m).startswith("MemoryReport(vram=HeapInfo(total=")


def test_a_wait_for_a_new_ib_names_the_apps_call():
    """A write that waits for room (max_inflight) and times out said "new IB: queue ...", a
    call the app never made: it names the app's call."""
    gpu = _gpu(job_timeout=1 << 40)
    q, buf = gpu.queue(flush_threshold=1, max_inflight=1), gpu.alloc(64)
    q.timeout = 1000
    q.wait_mem(buf, 0, 1)
    with pytest.raises(umd.GpuTimeout, match=r"^fill \(a new IB\): queue \(context 1\) has 1 submission in flight, "
                                             r"its limit \(max_inflight=1\), and the oldest \(seqno 0x1\) has not "
                                             r"finished after 1000 cycles$"):
        q.fill(buf, 4, 4, 7)
    buf.u32[0] = 1
    q.fill(buf, 4, 4, 7)
    q.finish()
    assert buf.u32[1] == 7


def test_a_queues_ip_type_prints_by_name():
    """`print(q.ip_type)` printed 0 or 2 (the uAPI's IntEnum on Python 3.11): it prints GFX or
    DMA, and still equals the uAPI's HwIp (an int, a key); the CS ioctls name the uAPI's own."""
    from kmd_model.uapi import HwIp

    gpu = _gpu()
    for engine, name in (("gfx", "GFX"), ("copy", "DMA")):
        q = gpu.queue(engine=engine)
        t = q.ip_type
        assert (str(t), f"{t}", repr(t)) == (name, name, f"<IpType.{name}: {int(HwIp[name])}>")
        assert t == HwIp[name] and {HwIp[name]: 1}[t] == 1
        buf = gpu.alloc(64)
        q.write(buf, 0, 5)
        q.finish()
        assert buf.u32[0] == 5


def test_an_event_whose_job_failed_prints_failed():
    """An event whose wait raised its job's GpuError printed "<umd.Event 1 pending>" for ever,
    as if the GPU might still get there: it prints "failed" (a Timestamp too)."""
    gpu = _gpu(job_timeout=5_000)
    q, buf = gpu.queue(), gpu.alloc(64)
    q.wait_mem(buf, 0, 1)
    ev, ts = q.signal(), q.timestamp()
    assert (repr(ev), repr(ts)) == ("<umd.Event 1 pending>", "<umd.Timestamp pending>")
    for e in (ev, ts):
        with pytest.raises(umd.GpuError, match=r"^GPU error: job 0x1 timed out on gfx: "):
            e.wait()
    assert (repr(ev), repr(ts)) == ("<umd.Event 1 failed>", "<umd.Timestamp failed>")
    ok = q.signal()
    assert ok.wait() and repr(ok) == "<umd.Event 2 signalled>"
