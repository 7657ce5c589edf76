"""The ioctls against hostile arguments: CS's IB-size, nesting and per-job limits refuse
exactly what they say, by name; every field of every ioctl given a value of the wrong
kind or range is a one-line KmdError with no effect; an SDMA IB reaching into the
kernel's range (the shadow pool) is EINVAL at CS.
"""

from __future__ import annotations

import errno

import numpy as np
import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import CsChunkIb, Domain, KmdError, Request
from spec import pm4
from testbench.refmodel import RefModel

from ..security_helpers import Holder, _nops, quiet
from tests.kmd.test_kmd_ioctl import Client, expect, hw_state


# ------------------------------------------------------------------------------ limits

def check_limits_exact(dev):
    """The IB-size, nesting and per-job limits refuse exactly what they say, by name."""
    kmd = kmd_model.bind(dev)
    c = Client()
    info = c.io(Request.INFO, uapi.InfoArgs(uapi.InfoQuery.DEV_INFO))
    assert info.max_ib_dw == (1 << 20) - 1 and info.max_job_dw == kmd.max_job_dw == 1 << 21
    bo = c.bo(0x1000)
    m = bo.addr
    expect(errno.EINVAL, "CS: chunk 0: size_dw must be 0x1 to 0xfffff, not 0x100000", c.submit,
           CsChunkIb(1 << 20, bo.handle))
    # nesting: IB1 -> IB2 runs, IB1 -> IB2 -> IB3 is refused
    bo.u32[0x200:0x208] = pm4.pad(8)
    bo.u32[0x100:0x108] = pm4.indirect_buffer(m + 0x800, 8) + pm4.pad(4)
    c.run(bo, pm4.indirect_buffer(m + 0x800, 8))
    expect(errno.EINVAL, f"CS: INDIRECT_BUFFER at IB2+0x0 ({m + 0x400:#x}): nests deeper than the device's "
           f"{info.ib_levels} IB levels", c.submit, c.ib(bo, pm4.indirect_buffer(m + 0x400, 8)))
    # the per-job total: IB1 calls the same IB2 three times, then a second IB2 fills up to
    # exactly the limit: that runs; one dword more (a filler at IB1's end) does not
    limit = kmd.max_job_dw
    ib2_dw = 1 << 19
    ib1 = pm4.indirect_buffer(0, 1) * 4 + pm4.pad(4)
    rest = limit - 3 * ib2_dw - len(ib1)
    big = c.bo(4 * (ib2_dw + rest))
    big.u32[:ib2_dw] = _nops(ib2_dw)
    big.u32[ib2_dw:ib2_dw + rest] = _nops(rest)
    ib1 = pm4.indirect_buffer(big.addr, ib2_dw) * 3 + pm4.indirect_buffer(big.addr + 4 * ib2_dw, rest) + pm4.pad(4)
    ib1_bo = c.bo(0x1000)
    ib1_bo.u32[:len(ib1) + 1] = ib1 + [pm4.TYPE2_FILLER]
    assert 3 * ib2_dw + rest + len(ib1) == limit
    seq = c.submit(CsChunkIb(len(ib1), ib1_bo.handle))
    if dev.name == "model":  # on the RTL two million dwords take minutes: accepted is what counts here
        assert c.wait(seq, 50_000_000)
    expect(errno.EINVAL, f"CS: the job of context {c.ctx} runs more than {limit} dwords (the per-job limit; "
           "every IB counts each time it runs)", c.submit, CsChunkIb(len(ib1) + 1, ib1_bo.handle))
    # distinct IBs: an IB1 calling max_job_ibs - 1 different IB2s runs; one more is refused
    k = info.max_job_ibs
    assert k == kmd.params.max_job_ibs == 4096
    ib2s = c.bo(32 * k)
    ib2s.u32[:8 * k] = pm4.pad(8) * k
    calls = c.bo(16 * k + 0x1000)
    calls.u32[:4 * k] = sum((pm4.indirect_buffer(ib2s.addr + 32 * i, 8) for i in range(k)), [])
    calls.u32[4 * k:4 * k + 8] = pm4.pad(8)
    seq = c.submit(CsChunkIb(4 * (k - 1), calls.handle))
    if dev.name == "model":
        assert c.wait(seq)
    expect(errno.EINVAL, f"CS: the job of context {c.ctx} reaches more than {k} distinct IBs (the per-job "
           "limit; an IB called again is counted once)", c.submit, CsChunkIb(4 * k, calls.handle))
    calls.u32[:4 * k] = pm4.indirect_buffer(ib2s.addr, 8) * k  # the same IB2 k times: one copy
    seq = c.submit(CsChunkIb(4 * k, calls.handle))
    if dev.name == "model":
        assert c.wait(seq)
    quiet(kmd)


# ------------------------------------------------------------------------------ ioctl arguments

_HOSTILE = [None, 1.5, 2.0, "2", b"\x02", True, -1, 1 << 64, [], object(), np.float64(2.0), float("nan")]


def check_hostile_ioctl_arguments(dev):
    """Every field of every ioctl's arguments, given a value of the wrong kind or range, is
    a KmdError with a one-line message (EINVAL, or ENOENT for an unknown handle) and no
    effect; never a Python exception from inside the KMD."""
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo(0x1000)
    ib = c.ib(bo, pm4.nop(6))
    good = {
        Request.GEM_CREATE: uapi.GemCreateArgs(0x1000, 0, Domain.GTT, 0),
        Request.GEM_CLOSE: uapi.GemCloseArgs(bo.handle),
        Request.GEM_MMAP: uapi.GemMmapArgs(bo.handle),
        Request.GEM_WAIT_IDLE: uapi.GemWaitIdleArgs(bo.handle, 0),
        Request.CTX: uapi.CtxArgs(uapi.CtxOp.QUERY_STATE, c.ctx),
        Request.CS: uapi.CsArgs(c.ctx, [ib]),
        Request.WAIT_CS: uapi.WaitCsArgs(c.ctx, 1, 0),
        Request.INFO: uapi.InfoArgs(uapi.InfoQuery.DEV_INFO),
    }
    from dataclasses import fields, replace
    n = 0
    for req, args in good.items():
        for f in fields(args):
            for v in _HOSTILE:
                if f.name == "chunks":
                    bad = replace(args, chunks=[replace(ib, size_dw=v)])
                else:
                    bad = replace(args, **{f.name: v})
                before = (len(kmd.live_bos()), kmd.stats["cs"])
                if req is Request.CTX and f.name == "priority" and type(v) is int and v == -1:
                    c.io(req, bad)  # an int32, which QUERY_STATE ignores (as amdgpu_ctx_ioctl)
                    continue
                with pytest.raises(KmdError) as ei:
                    c.io(req, bad)
                e = ei.value
                if isinstance(v, int) and not isinstance(v, bool):  # an int out of range: its own errno
                    assert e.errno in (errno.EINVAL, errno.ENOENT, errno.ENOMEM), (req.name, f.name, v, e)
                else:  # not an int at all
                    assert e.errno in (errno.EINVAL, errno.ENOENT), (req.name, f.name, v, e)
                assert "\n" not in e.message and e.message.startswith(req.name.split("_")[0]), e.message
                assert (len(kmd.live_bos()), kmd.stats["cs"]) == before
                n += 1
    for field_name in ("handle", "offset", "gpu_addr", "flags"):
        for v in _HOSTILE:
            if field_name == "gpu_addr" and v is None:
                continue
            with pytest.raises(KmdError) as ei:
                c.submit(replace(ib, **{field_name: v}))
            assert ei.value.errno in (errno.EINVAL, errno.ENOENT), (field_name, v, ei.value)
            n += 1
    assert n > 100
    # the valid calls still work
    c.run(bo, pm4.nop(6))
    assert c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, np.int64(Domain.VRAM))).size == 0x1000
    quiet(kmd)


CHECKS = [check_limits_exact, check_hostile_ioctl_arguments]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_an_sdma_ib_in_the_kernels_range_is_refused():
    """The shadow pool is mapped executable in every VM, at the top (the CP fetches the
    checked copies from there with the job's VMID). The SDMA ring has no checker, so an
    SDMA IB chunk naming that range had its engine run another client's checked copies as
    SDMA packets under the hostile client's VMID, the error report giving back bits of
    them. A chunk that reaches into the kernel's range is EINVAL at CS, as a CP chunk
    outside the client's mappings is."""
    from kmd_model.uapi import HwIp

    kmd = kmd_model.bind(RefModel())
    held = Holder()  # its job, and its checked copies, stay in the pool
    b = Client()
    copy, n = held.c.f.contexts[held.c.ctx].jobs[held.seq].ibs[0]
    assert copy == kmd.kernel_va  # the first copy in the pool
    before = hw_state(kmd)
    for addr, size in ((copy, n), (copy + 32, 8), (copy - 32, 16)):  # inside it, or running into it
        expect(errno.EINVAL, f"CS: chunk 0: an IB at {addr:#x}+{4 * size:#x} reaches into the kernel's range "
               f"[{kmd.kernel_va:#x}, {kmd.kernel_va + kmd.kernel_va_size:#x}) of context {b.ctx}'s VM",
               b.submit, CsChunkIb(size, gpu_addr=addr, ip_type=HwIp.DMA))
    assert hw_state(kmd) == before and kmd.stats["sdma_errors"] == 0
    held.release()


def test_info_memory_gives_sizes_not_physical_addresses():
    """amdgpu's AMDGPU_INFO_MEMORY (drm_amdgpu_heap_info) gives each heap's size, usage and
    largest allocation, no address. This KMD's gave each heap's physical base too: where the
    kernel puts every BO, its page tables and its rings, which no other ioctl tells a client
    (GEM_CREATE answers a handle and a size; the GPU reaches a BO at the VA its owner maps
    it at). A physical address is of use to a client only against a path that skips the
    MMU, and then it is the map: the answer now holds the three sizes alone."""
    from dataclasses import fields

    kmd = kmd_model.bind(RefModel())
    c = Client()
    c.bo(0x2000, Domain.VRAM)
    mem = c.io(Request.INFO, uapi.InfoArgs(uapi.InfoQuery.MEMORY))
    for h, heap in ((mem.vram, kmd.bo.heaps[Domain.VRAM]), (mem.gtt, kmd.bo.heaps[Domain.GTT])):
        assert [f.name for f in fields(h)] == ["total", "used", "largest_free"]
        assert (h.total, h.used, h.largest_free) == (heap.size, heap.used, heap.largest_free)


def test_info_counters_tell_an_unprivileged_file_nothing_of_other_clients():
    """INFO COUNTERS gave every file the device's performance counters (busy cycles, DMA
    bytes, the packets run by kind) and the driver's statistics (every client's ioctls and
    their errors, interrupts, fences, CSs, resets, how many files and contexts are open):
    a spy reading it between two of its own calls counted what another client ran, packet
    by packet (the side channel GPU performance counters open: "Rendered Insecure",
    CCS 2018). amdgpu gives every client the clock (AMDGPU_INFO_TIMESTAMP) and device-wide
    memory usage, a client's own counts through its fdinfo, the rest only to CAP_PERFMON
    (a system-wide perf event) or root (debugfs). A file without CAP_PERFMON
    (KmdParams.cap_perfmon, open_render_node(cap_perfmon=False)) now gets the timestamp and
    its own counts: nothing moves in its answer while another client works."""
    kmd = kmd_model.bind(RefModel(), cap_perfmon=False)
    spy = Client()
    victim = Client()
    seen = kmd_model.open_render_node(cap_perfmon=True)  # a privileged reader still sees everything

    def counters(f):
        return f.ioctl(Request.INFO, uapi.InfoArgs(uapi.InfoQuery.COUNTERS))

    before, all_before = counters(spy.f), counters(seen)
    bo = victim.bo(0x1000)
    for i in range(3):
        assert victim.wait(victim.run(bo, pm4.write_data(bo.addr + 0x800 + 4 * i, [i])))
    victim.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.ALLOC))
    with pytest.raises(KmdError):
        victim.io(Request.GEM_CLOSE, uapi.GemCloseArgs(999))
    after, all_after = counters(spy.f), counters(seen)
    assert after.hw.keys() == {"timestamp"} and after.hw["timestamp"] > before.hw["timestamp"]
    assert after.packets == {}
    # its own ioctls (CTX ALLOC, INFO DEV_INFO, each COUNTERS), none of the victim's
    assert before.kmd == {"ioctls": 3, "ioctl_errors": 0, "contexts": 1, "live_bos": 0, "hangs": 0}
    assert after.kmd == dict(before.kmd, ioctls=4)
    # what the spy saw before: the victim's three WRITE_DATAs, its CSs, its error, its context
    assert all_after.packets["WRITE_DATA"] - all_before.packets["WRITE_DATA"] == 3
    assert all_after.kmd["cs"] - all_before.kmd["cs"] == 3
    assert all_after.kmd["ioctl_errors"] - all_before.kmd["ioctl_errors"] == 1
    assert all_after.kmd["contexts"] - all_before.kmd["contexts"] == 1
    with pytest.raises(TypeError, match=r"^open_render_node: cap_perfmon must be True, False or None, not 1$"):
        kmd_model.open_render_node(cap_perfmon=1)
    with pytest.raises(ValueError, match=r"^KMD parameter cap_perfmon must be True or False, not 'no'$"):
        kmd_model.bind(RefModel(), cap_perfmon="no")
