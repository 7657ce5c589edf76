"""The UMD's memory: the pools (umd/winsys/pool.py) over the VA allocator (umd/winsys/va.py, its unit
tests in tests/umd/memory/test_umd_va.py).

`check_*(dev)` bodies (the model here, the RTL in tests/cosim/test_rtl_drivers.py): every Buffer is at a GPU virtual address the KMD maps; small
buffers come from slabs and freed ones are reused only once the work that may use them is
done; the BO cache reuses freed BOs by size and gives expired ones back; memory() and the
counters say so; with pools off each buffer costs its ioctls.
"""

from __future__ import annotations

import re

import pytest

import kmd_model
import umd
from kmd_model.uapi import Request
from testbench.refmodel import RefModel
from tests.umd.drive import run_device
from umd.winsys.pool import SLAB_BYTES



def check_buffers_at_virtual_addresses(dev):
    kmd = kmd_model.bind(dev)
    gpu = umd.open()
    i = gpu.info()
    bufs = [gpu.alloc(n, d) for n, d in ((100, "gtt"), (4096, "vram"), (40000, "gtt"), (3 << 20, "vram"))]
    for b in bufs:
        assert i.va_start <= b.gpu_addr < i.va_end
        m = gpu.ws.file.vm.find(b.gpu_addr)
        assert m is not None and m.bo.gpu_addr + b.gpu_addr - m.va + b.size <= m.bo.end
    assert bufs[0].slab is not None and bufs[2].slab is None  # 100 bytes: a slab entry; 40000: a BO
    q = gpu.queue()
    # every byte of the small ones; pages of the 3 MiB one (cheap on Icarus): its ends and
    # both sides of the 2 MiB boundary inside it, where its PTEs move to another table
    edge = (bufs[3].gpu_addr | ((2 << 20) - 1)) + 1 - bufs[3].gpu_addr
    spans = [[(0, b.size)] for b in bufs[:3]] + [[(o, o + 4096) for o in (0, edge - 4096, edge, bufs[3].size - 4096)]]
    for k, (b, ranges) in enumerate(zip(bufs, spans)):
        v = 0x01010101 * (k + 1)
        for lo, hi in ranges:
            q.fill(b, lo, hi - lo, v) if i.has_dma else q.write(b, lo, [v] * ((hi - lo) // 4))
    q.finish()
    assert all((b.map()[lo:hi] == k + 1).all() for k, (b, ranges) in enumerate(zip(bufs, spans)) for lo, hi in ranges)
    gpu.close()
    assert kmd.live_bos() == []


def check_slabs_and_cache_reuse(dev):
    """Small buffers share slabs (a few ioctls for many buffers); a freed one is reused only
    after the work that could name it is done; freed BOs come back from the cache."""
    kmd_model.bind(dev)
    gpu = umd.open()
    q = gpu.queue()
    n0 = gpu.ws.ioctls
    small = [gpu.alloc(200) for _ in range(300)]  # 256-byte entries: 256 per 64 KiB slab
    assert gpu.ws.ioctls - n0 <= 2 * 3  # two slabs: GEM_CREATE + GEM_VA (+ GEM_MMAP) each
    assert len({b.gpu_addr for b in small}) == 300
    flag = small[0]
    q.wait_mem(flag, 0, 1)  # the queue is held: its work is not done
    q.write(small[1], 0, 0x1234)
    q.flush()
    freed = [b.gpu_addr for b in small[1:4]]
    small[1].free()
    again = gpu.alloc(200)
    assert again.gpu_addr not in freed  # not reused while a submission that may use it runs
    small[2].free()  # deferred too: the queue's work may name it
    q.write(small[3], 0, 5)  # recorded, not flushed: the next submission's
    small[3].free()  # so it waits for that one as well
    st = gpu.memory().pools
    assert st.slab_frees_deferred == 3
    flag.u32[0] = 1
    q.finish()
    assert small[1].freed and {gpu.alloc(200).gpu_addr for _ in range(3)} == set(freed)  # reclaimed after their fences
    w0 = gpu.memory().pools.waste_bytes
    assert w0 >= 56 * 300
    big = gpu.alloc(64 << 10)
    addr = big.gpu_addr
    big.free()
    assert gpu.memory().pools.waste_bytes == w0  # (a whole BO, no waste of its own)
    hits = gpu.memory().pools.cache_hits
    assert gpu.memory().pools.cached_bytes == 64 << 10
    again = gpu.alloc(60 << 10)  # a compatible size: the cached BO
    assert again.gpu_addr == addr and gpu.memory().pools.cache_hits == hits + 1
    assert gpu.memory().pools.cached_bytes == 0  # out of the cache again
    gpu.close()


def check_pools_off_costs_ioctls(dev):
    kmd_model.bind(dev)
    on, off = umd.open(), umd.open(pools=False)
    for gpu in (on, off):
        n0 = gpu.ws.ioctls
        bufs = [gpu.alloc(64) for _ in range(100)]
        for b in bufs:
            b.free()
        gpu.cost = gpu.ws.ioctls - n0
    assert off.cost == 100 * 3 and on.cost <= 3  # GEM_CREATE + GEM_VA + GEM_CLOSE per buffer, or one slab
    m = off.memory()
    assert not m.pools.enabled and m.va.allocations == 0  # every range given back
    assert on.memory().pools.enabled is True
    on.close()
    off.close()


def check_zeroed_unless_asked(dev):
    kmd_model.bind(dev)
    gpu = umd.open()
    x = gpu.alloc(512)
    x.u32[:] = 0xFFFF_FFFF
    addr = x.gpu_addr
    x.free()
    y = gpu.alloc(512)
    assert y.gpu_addr == addr and not y.u32.any()
    y.u32[:] = 7
    y.free()
    z = gpu.alloc(512, zero=False)
    assert z.gpu_addr == addr and (z.u32 == 7).all()  # the app's own old bytes, as asked
    # a whole BO (over 16 KiB) the cache hands out again is not new from the kernel either
    big = gpu.alloc(64 << 10)
    big.u32[:] = 0xFFFF_FFFF
    addr, hits = big.gpu_addr, gpu.memory().pools.cache_hits
    big.free()
    again = gpu.alloc(64 << 10)
    assert again.gpu_addr == addr and gpu.memory().pools.cache_hits == hits + 1 and not again.u32.any()
    gpu.close()


def check_pools_example(dev):
    """examples/pools.py, shortened: the same buffers and GPU writes cost a small fraction of
    the ioctls with the pools on, and end with the same contents (the example checks them)."""
    from examples import pools

    kmd = kmd_model.bind(dev)
    on, off = pools.run(True, 300, 32, 1), pools.run(False, 300, 32, 1)
    assert off.ioctls >= 2 * 300 and on.ioctls * 10 < off.ioctls, (on.ioctls, off.ioctls)  # GEM_CREATE + GEM_VA each
    # + the queue's page and its IBs: one on the model, more on the RTL while the GPU lags behind
    assert on.stats.slab_allocs >= 300 + 2 and off.stats.bos_created >= 300 + 2
    assert "pools" in pools.table([on, off]) and kmd.live_bos() == []


CHECKS = [check_buffers_at_virtual_addresses, check_slabs_and_cache_reuse, check_pools_off_costs_ioctls,
          check_zeroed_unless_asked, check_pools_example]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_cache_expiry_and_limit():
    """Cached BOs not reused within `expiry` operations, or over max_cache_bytes, go back to
    the kernel (GEM_CLOSE)."""
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open()
    mm = gpu.mm
    mm.expiry = 4
    bufs = [gpu.alloc((64 << 10) * (k + 1)) for k in range(3)]
    for b in bufs:
        b.free()
    assert mm.stats().cached == 3
    for k in range(3):
        gpu.alloc((20 << 10) + (k << 12)).free()  # cache operations go by
    st = mm.stats()
    assert st.cache_expired >= 3 and st.bos_released >= 3
    mm.max_cache_bytes = SLAB_BYTES
    gpu.alloc(1 << 20).free()  # over the limit at once
    assert mm.stats().cached_bytes <= SLAB_BYTES
    mm.expiry = 1 << 20
    for b in [gpu.alloc(SLAB_BYTES // 2) for _ in range(2)]:
        b.free()
    assert mm.stats().cached_bytes == SLAB_BYTES  # exactly at the limit: both stay
    gpu.close()
    assert kmd.live_bos() == []
    with pytest.raises(TypeError, match="open: pools must be True or False, not 'yes'"):
        umd.open(pools="yes")
    assert Request.GEM_VA  # (the winsys speaks it)


def test_alloc_argument_errors():
    """Each bad argument of alloc (and open) is one precise line; nothing is allocated."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    n = gpu.ws.ioctls
    cases = [
        (ValueError, ALIGN + "0x3", dict(size=64, alignment=3)),
        (ValueError, ALIGN + "-0x1000", dict(size=64, alignment=-4096)),
        (TypeError, ALIGN + "1.5", dict(size=64, alignment=1.5)),
        (ValueError, "alloc: domain must be 'gtt' or 'vram', not 7", dict(size=64, domain=7)),
        (ValueError, "alloc: domain must be 'gtt' or 'vram', not None", dict(size=64, domain=None)),
        (ValueError, "alloc: domain must be 'gtt' or 'vram', not 2.0", dict(size=64, domain=2.0)),
        (ValueError, "alloc: domain must be 'gtt' or 'vram', not True", dict(size=64, domain=True)),
        (TypeError, "alloc: zero must be True or False, not 'yes'", dict(size=64, zero="yes")),
        # (more than the VA range holds, and than the whole heap: it said "GPU virtual address space
        # exhausted", as if freeing buffers would make room; the kernel's MEMORY INFO says so)
        (umd.OutOfMemory, "alloc: 0x40000000 bytes is more than the whole of GTT (32 MiB, 15.9 MiB of it free now: "
         "gpu.memory(); docs/tutorial.md, \"How much memory an app has\")", dict(size=1 << 30)),
    ]
    for exc, msg, kw in cases:
        with pytest.raises(exc) as ei:
            gpu.alloc(**kw)
        assert str(ei.value) == msg, kw
    assert gpu.ws.ioctls == n + 1 and gpu.memory().va.allocations == 0  # (the failed alloc's MEMORY INFO)
    assert gpu.alloc(64, 2).domain == gpu.alloc(64, "gtt").domain  # a Domain value is fine
    import numpy as np

    assert gpu.alloc(64, np.int64(4)).domain == gpu.alloc(64, "vram").domain  # numpy's integers too
    gpu.close()


def test_pools_example_argument_errors(capsys):
    """examples/pools.py refuses bad counts and a plot it could not write before it runs."""
    from examples import pools

    kmd_model.bind(RefModel())
    for argv, msg in ((["--live", "0"], "argument --live: must be at least 1, not 0"),
                      (["--plot", "/nonexistent/dir/x.png"], "--plot /nonexistent/dir/x.png: no such directory "
                                                             "/nonexistent/dir")):
        with pytest.raises(SystemExit) as ei:
            pools.main(argv)
        assert ei.value.code == 2 and capsys.readouterr().err.splitlines()[-1] == f"pools: error: {msg}"
    kmd_model.unbind()


def test_pools_example_counts_it_cannot_run(capsys):
    """`pools --allocs 99999999999` (a typo's extra zeros) had no bound and ran for days; a
    --live window larger than the device's memory ended in alloc's OutOfMemory traceback and
    a crash report. Both are one line and status 2, the device closed (no leak report)."""
    from examples import pools

    kmd = kmd_model.bind(RefModel())
    with pytest.raises(SystemExit) as ei:
        pools.main(["--allocs", "40000", "--live", "40000"])
    err = capsys.readouterr().err.splitlines()[-1]
    assert ei.value.code == 2 and re.fullmatch(
        r"pools: error: --live 40000: that many buffers alive at once do not fit: with the pools on the device's "
        r"memory ran out with \d+ alive \(alloc: no device memory for .*\); give a smaller --live", err), err
    assert not kmd.files  # (its device closed)
    with pytest.raises(SystemExit) as ei:  # (refused before it runs: no device needed)
        pools.main(["--allocs", "99999999999"])
    assert ei.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == ("pools: error: argument --allocs: must be at most 1000000, "
                                                        "not 99999999999")
    kmd_model.unbind()


def fill_gtt_behind_a_held_submission(kmd, gpu, q):
    """GTT full, and a 2 MiB BO the app freed still in use by q's submission, which a job
    holding the CP keeps in flight (so the BO cache cannot hand the BO out); returns the
    holder (`hold.bo.u32[0x200] = 1` lets the CP go on)."""
    from kmd_model.uapi import Domain

    from tests.kmd.test_kmd_ioctl import Client
    from tests.security.security_helpers import Holder

    hold = Holder()  # the CP waits in its job: q's submission stays in flight behind it
    big = gpu.alloc(0x20_0000, "gtt")
    q.write(big, 0, 1)
    q.flush()
    big.free()  # into the BO cache, fenced by q's submission
    hog = Client()
    gtt = kmd.bo.heaps[Domain.GTT]
    while gtt.largest_free >= 0x1000:
        hog.io(Request.GEM_CREATE, kmd_model.uapi.GemCreateArgs(gtt.largest_free, 0, Domain.GTT))
    return hold


def test_out_of_memory_gives_the_cache_back_and_waits_for_the_queues():
    """GTT full, and the BO the app freed is still in use by a submission in flight (so the
    cache cannot hand it out): a new BO of its size fails with ENOMEM once; the pools then
    give the whole cache back to the kernel, wait for every queue's last submission (the
    freed BO's memory comes back when that job retires) and try again, which succeeds."""
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open(api_version=2)
    q = gpu.queue(flush_threshold=1 << 20)
    hold = fill_gtt_behind_a_held_submission(kmd, gpu, q)
    hold.bo.u32[0x200] = 1  # the CP may go on: q's job ends the next time the KMD looks
    n0 = dict(gpu.mm.n)
    again = gpu.alloc(0x20_0000, "gtt")  # a cache miss (not idle), ENOMEM, the drain, a retry
    n = gpu.mm.n
    assert (n["misses"] - n0["misses"], n["released"] - n0["released"], n["created"] - n0["created"]) == (1, 1, 1)
    assert gpu.mm.cached_bytes == 0 and not any(gpu.mm.cache.values())
    assert q.seq_done(q.last_seq)
    again.u32[:2] = [7, 8]
    assert again.u32[:2].tolist() == [7, 8]
    gpu.close()


@pytest.mark.parametrize("expiry", [4, None])
def test_a_cached_bo_lives_exactly_expiry_operations(expiry):
    """The BO cache's clock counts operations (each get and each put): a cached BO survives
    `expiry` of them after its own put and goes back to the kernel at the next. None: the
    default, 256 (docs/architecture.md)."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    mm = gpu.mm
    if expiry is None:
        expiry = 256  # (not read from mm: the test pins the documented default)
    else:
        mm.expiry = expiry
    gpu.alloc(64 << 10).free()  # put: cached
    e0 = mm.stats().cache_expired
    for _ in range(expiry // 2):  # 2 operations each: a get (a miss, then hits) and a put of another size class
        gpu.alloc(128 << 10).free()
    assert (mm.stats().cached, mm.stats().cache_expired) == (2, e0)  # both still there
    keep = gpu.alloc(128 << 10)  # the 5th operation: the first BO has waited too long
    assert (mm.stats().cached, mm.stats().cache_expired) == (0, e0 + 1)
    keep.free()
    gpu.close()


def test_a_closed_device_reports_an_empty_cache():
    """Device.close gives the cached BOs back; what the exit report then says of the pools."""
    from gpucosim.crash import exit_report

    kmd = kmd_model.bind(RefModel())
    gpu = umd.open()
    gpu.alloc(64 << 10).free()
    assert (gpu.mm.stats().cached, gpu.mm.stats().cached_bytes) == (1, 64 << 10)
    gpu.close()
    st = gpu.mm.stats()
    assert (st.cached, st.cached_bytes, st.bos_released) == (0, 0, 1) and kmd.live_bos() == []
    text, leaks = exit_report(kmd, [], {}, devices=[gpu])
    assert "1 miss, 0 expired, 0 cached (0 bytes);" in text and leaks == 0, text


ALIGN = "alloc: alignment must be 0 or a power of two up to 0x20000000 (the GPU VA range's largest), not "
"""Every bad alignment's one line: the default VM's range is [0x100000, 0x3f000000), whose
largest aligned address is 0x20000000."""


@pytest.mark.parametrize("alignment", [3, 6, 0x1001, -4])
def test_alloc_alignment_must_be_a_power_of_two(alignment):
    kmd_model.bind(RefModel())
    gpu = umd.open()
    shown = f"{alignment:#x}"
    with pytest.raises(ValueError, match=rf"^{re.escape(ALIGN + shown)}$"):
        gpu.alloc(0x100, alignment=alignment)
    assert gpu.alloc(0x100, alignment=1).gpu_addr % 4096 == 0 and gpu.alloc(0x100, alignment=0x2000).gpu_addr % 0x2000 == 0
    gpu.close()


@pytest.mark.parametrize("alignment, exc, shown", [
    (1 << 70, ValueError, "0x400000000000000000"), (0x40000000, ValueError, "0x40000000"),
    (1 << 47, ValueError, "0x800000000000"), (1 << 200, ValueError, "<an int of 201 bits>"),
    (True, TypeError, "True"), ("4096", TypeError, "'4096'"), (None, TypeError, "None")])
def test_alloc_alignment_beyond_the_va_range_is_an_argument_error(alignment, exc, shown):
    """An alignment at which the VA range has no address (1 << 70: larger than any GPU
    address) was the VA allocator's OutOfMemory, "GPU virtual address space exhausted",
    with the whole range free; it is the same one line as every other bad alignment, naming
    the bound, and nothing is allocated. The bound itself is taken, at its address."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    n = gpu.ws.ioctls
    with pytest.raises(exc) as ei:
        gpu.alloc(64, alignment=alignment)
    assert str(ei.value) == ALIGN + shown and type(ei.value) is exc
    assert gpu.ws.ioctls == n and gpu.memory().va.allocations == 0
    top = gpu.memory().va
    assert (top.start, top.end) == (0x100000, 0x3f000000)
    b = gpu.alloc(64, alignment=0x20000000)
    assert b.gpu_addr == 0x20000000
    b.map()[:8] = 7
    gpu.close()


def test_exit_report_counts_only_the_apps_buffers_as_leaks():
    """A queue's own buffers (its fence page, IBs, upload staging) are the runtime's, not the
    app's: the exit report's LEAK line names only what the app allocated and kept."""
    from gpucosim.crash import exit_report

    kmd = kmd_model.bind(RefModel())
    gpu = umd.open()
    gfx, copy = gpu.queue(), gpu.queue(engine="copy")
    keep, a = gpu.alloc(100), gpu.alloc(4096)
    copy.upload(a, 0, bytes(range(64)))  # a staging buffer, live until the flush
    gfx.write(a, 64, [1, 2])  # an IB
    own = [b for b in gpu.buffers if b not in (keep, a)]
    assert len(own) >= 4  # two fence pages, an IB of each queue, the staging buffer
    text, _ = exit_report(kmd, [], {}, devices=[gpu])
    leak = next(ln for ln in text.splitlines() if "of the app" in ln)
    shown = leak.split("never freed: ", 1)[1]
    assert leak.startswith("  LEAK: 2 buffers of the app, 4 KiB, never freed: ") and \
        sorted(shown.split(", ")) == sorted([repr(keep), repr(a)]), leak


def test_exit_report_names_a_device_the_app_never_closed():
    """An app that forgets gpu.close() saw only BO leaks (its slabs, its queue's IBs) and no
    word of the cause; a closed device gets no such line."""
    from gpucosim.crash import exit_report

    kmd = kmd_model.bind(RefModel())
    gpu = umd.open()
    q = gpu.queue()
    q.write(gpu.alloc(64), 0, 1)
    q.signal().wait()
    text, _ = exit_report(kmd, [], {}, devices=[gpu])
    assert [ln for ln in text.splitlines() if "closed" in ln] == [
        f"  LEAK: the app never closed its device ({gpu.name}, fd {gpu.ws.file.fd}): "
        "gpu.close() frees its buffers, queues and pools"]
    assert "never closed" not in exit_report(kmd, [], {}, devices=[gpu], at_exit=False)[0]  # (a crash report)
    gpu.close()
    assert "never closed" not in exit_report(kmd, [], {}, devices=[gpu])[0]
    kmd_model.unbind()


def test_an_allocation_larger_than_the_va_space_is_one_error():
    """alloc(1 TiB): the pool drains its caches and tries again; the second OutOfMemory was
    raised inside the handler of the first, so the app's traceback showed both, joined by
    "During handling of the above exception, another exception occurred"."""
    from umd.errors import OutOfMemory

    kmd_model.bind(RefModel())
    gpu = umd.open()
    with pytest.raises(OutOfMemory, match=r"^alloc: 0x10000000000 bytes is more than the whole of VRAM \(32 MiB") as ei:
        gpu.alloc(1 << 40, "vram")
    assert ei.value.__context__ is None
    gpu.close()
    kmd_model.unbind()


def test_a_slab_goes_back_to_the_cache_only_once_its_last_entry_is_free():
    """A slab whose entries are all free again returns to the BO cache, unless it is the only
    slab of its size class; one that still has a live entry stays, whatever else was freed."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    per_slab = SLAB_BYTES // 256
    bufs = [gpu.alloc(256) for _ in range(per_slab + 2)]  # the first slab full, two in a second
    second = bufs[-1].backing
    assert bufs[-2].backing is second and bufs[0].backing is not second
    st = gpu.mm.stats()
    assert (st.slabs, st.cached) == (2, 0)
    bufs[-1].free()  # one entry of the second slab still live: it stays
    assert (gpu.mm.stats().slabs, gpu.mm.stats().cached) == (2, 0)
    assert gpu.alloc(256).backing is second  # and its free entry is handed out again
    for b in bufs[1:per_slab]:  # the first slab down to one live entry: it stays too
        b.free()
    assert (gpu.mm.stats().slabs, gpu.mm.stats().cached) == (2, 0)
    bufs[0].free()  # the first slab empty, the second not: the first goes to the cache
    st = gpu.mm.stats()
    assert (st.slabs, st.cached, st.cached_bytes) == (1, 1, SLAB_BYTES)
    gpu.close()


def test_new_memory_from_the_kernel_is_handed_out_zero_without_a_cpu_write():
    """The kernel zeroes a new BO: a zeroed allocation carved from a new slab needs no CPU
    mapping and no memset; only an entry handed out before is zeroed by the CPU."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    x, y = gpu.alloc(256), gpu.alloc(1024)  # two slabs, both new
    assert x.backing is not y.backing and x.backing.view is None and y.backing.view is None
    w = gpu.alloc(256)  # a second entry of x's slab, never used: still no CPU write
    assert w.backing is x.backing and x.backing.view is None
    assert not x.map().any() and not w.map().any()
    x.map()[:] = 0xAB
    x.free()
    z = gpu.alloc(256, zero=True)  # x's entry again: the CPU zeroes what the app left there
    assert z.bo_offset == x.bo_offset and not z.map().any()
    gpu.close()


@pytest.mark.parametrize("pools", [True, False])
def test_an_allocation_the_kernel_refuses_gives_its_va_range_back(pools):
    """The UMD takes the VA range first, then asks GEM_CREATE for the memory: when the
    kernel has none (ENOMEM), the range is free again. It was kept, twice per failed
    alloc (the pools retry once): a few failed 200 MiB allocations used up the whole VA
    range, and nothing larger than a few MiB could be allocated afterwards."""
    kmd_model.bind(RefModel())
    gpu = umd.open(pools=pools)
    free = gpu.memory().va.free
    for _ in range(6):
        with pytest.raises(umd.OutOfMemory, match=r"^alloc: no device memory for 0xc800000 bytes "
                                                  r"\(ENOMEM: GEM_CREATE: no 0xc800000 bytes free in VRAM"):
            gpu.alloc(200 << 20, "vram")
    assert gpu.memory().va.free == free
    assert gpu.alloc(16 << 20, "vram").size == 16 << 20  # more than the leak had left


def test_a_queue_closed_with_its_job_still_running_keeps_what_the_job_uses():
    """close() waits DEFAULT_TIMEOUT cycles, then gives up and frees the context; the kernel
    lets the job finish. Until it has, neither the buffers it writes nor the queue's fence
    page (where it writes its fence) may go to a new allocation: the pools used to treat a
    closed queue as idle and hand both out at once, for the running job to overwrite."""
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 40)  # the held job is slow, not hung
    gpu = umd.open()
    flag = gpu.alloc(4096)
    q = gpu.queue()
    data = gpu.alloc(256)  # a slab entry
    q.wait_mem(flag, 0, 1)  # the job holds here until the app lets it go
    q.write(data, 0, [0xDEAD] * 64)
    q.flush()
    data.free()
    page = q.qbo.gpu_addr
    with pytest.raises(umd.GpuTimeout, match=r"^close: queue \(context 1\) not idle after 2000000 cycles: "
                       r"closed all the same, its last job \(seqno 0x1\) still running"):
        q.close()  # gives up after DEFAULT_TIMEOUT cycles (it said nothing): the job still runs
    assert q.closed
    fresh = [gpu.alloc(256) for _ in range(64)] + [gpu.alloc(4096) for _ in range(8)]
    spans = [(b.gpu_addr, b.gpu_addr + b.size) for b in fresh]
    for addr, end in ((data.gpu_addr, data.gpu_addr + 256), (page, page + 4096)):
        assert not any(a < end and addr < e for a, e in spans), "memory of the running job handed out"
    flag.u32[0] = 1  # the job goes on: it writes data and its fence
    other = gpu.queue()
    other.write(flag, 4, 1)
    other.finish()  # (the model runs; the held job ends first: one CP)
    run_device(kmd)
    assert all(int(v) == 0 for b in fresh for v in b.u32[:4])  # nothing of the job landed in them
    # the job over, its buffer comes back to the pools
    assert any(gpu.alloc(256).gpu_addr == data.gpu_addr for _ in range(64))
    gpu.close()


def test_over_the_cache_limit_the_oldest_cached_bo_goes_first():
    """Over max_cache_bytes the cache gives back its oldest BOs first, whatever their size
    class. It gave back whichever bucket was made first instead: here the BO just freed,
    keeping one that had waited longer."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    mm = gpu.mm
    gpu.alloc(64 << 10).free()
    gpu.alloc(64 << 10).free()  # (a hit: the 64 KiB bucket is there, empty for a moment)
    old = gpu.alloc(128 << 10)
    young = gpu.alloc(64 << 10)
    old_va, young_va = old.gpu_addr, young.gpu_addr
    mm.max_cache_bytes = (192 << 10) - 1  # the two do not both fit
    old.free()
    young.free()
    cached = [b.va for bucket in mm.cache.values() for b, _, _ in bucket]
    assert cached == [young_va] and old_va not in cached
    gpu.close()


@pytest.mark.parametrize("evicted_by", ["limit", "expiry"])
def test_a_freed_bo_the_cache_gives_back_waits_for_the_flush_of_commands_naming_it(evicted_by):
    """A buffer freed with a write to it recorded and not flushed yet: the BO cache may give
    it back at once (over max_cache_bytes) or before the flush (expired), but the kernel
    must keep it until the CS that names it is in, as with pools off. It closed the BO
    at once: the flush failed with EINVAL, the write to a buffer the app had freed
    correctly refused as outside every mapping."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    q = gpu.queue()
    mm = gpu.mm
    if evicted_by == "limit":
        mm.max_cache_bytes = 64 << 10
    else:
        mm.expiry = 2
    b = gpu.alloc(100_000)
    handle = b.handle
    q.write(b, 0, [1])
    b.free()
    if evicted_by == "expiry":
        for _ in range(3):
            gpu.alloc(300_000).free()  # cache operations go by: the freed BO expires
    assert mm.stats().cache_expired >= 1 and handle in gpu.ws.file.handles  # not closed yet
    q.flush()
    q.finish()
    assert handle not in gpu.ws.file.handles  # closed once the CS was in
    gpu.close()


def _stranded(gpu) -> int:
    """VRAM bytes free but outside the largest hole: what fragmentation costs a large BO."""
    v = gpu.memory().vram
    return v.total - v.used - v.largest_free


def test_a_va_alignment_does_not_align_the_memory_behind_it():
    """alloc(alignment=) aligns the buffer's GPU address, a VA: the GPU reaches the memory
    through 4 KiB PTEs, so where the kernel places it needs no more than a page. The UMD
    passed the VA alignment to GEM_CREATE as well: each 64 KiB buffer aligned to 2 MiB
    left a hole of up to 2 MiB of VRAM before it (8 of them stranded 15.5 MiB)."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    before, used = _stranded(gpu), gpu.memory().vram.used
    bufs = [gpu.alloc(64 << 10, "vram", alignment=2 << 20) for _ in range(8)]
    assert all(b.gpu_addr % (2 << 20) == 0 for b in bufs)
    assert _stranded(gpu) == before  # packed: no hole before any of them
    # (the rest is their page tables: 2 MiB-aligned VAs need a table each)
    assert gpu.memory().vram.used - used == 8 * (64 << 10) + 8 * 4096
    q = gpu.queue()
    for k, b in enumerate(bufs):
        q.write(b, (64 << 10) - 4, [k + 1])
    q.finish()
    assert [int(b.map().view("<u4")[-1]) for b in bufs] == list(range(1, 9))
    gpu.close()


def test_a_buffer_freed_after_its_queue_gave_up_waits_for_the_queues_running_job():
    """The app frees a buffer the job of an abandoned queue (closed with its job still
    running) writes, after that close: the pools must still count the abandoned queue's
    submitted work as the buffer's fence, and keep the memory until the job is over."""
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 40)  # the held job is slow, not hung
    gpu = umd.open()
    flag = gpu.alloc(4096)
    q = gpu.queue()
    data = gpu.alloc(256)  # a slab entry
    q.wait_mem(flag, 0, 1)  # the job holds here until the app lets it go
    q.write(data, 0, [0xDEAD] * 64)
    q.flush()
    with pytest.raises(umd.GpuTimeout, match=r"^close: queue \(context 1\) not idle after 2000000 cycles: "
                       r"closed all the same, its last job \(seqno 0x1\) still running"):
        q.close()  # gives up after DEFAULT_TIMEOUT cycles (it said nothing): the job still runs
    assert q.closed and q.abandoned
    data.free()  # after the close
    fresh = [gpu.alloc(256) for _ in range(64)]
    assert not any(b.gpu_addr < data.gpu_addr + 256 and data.gpu_addr < b.gpu_addr + b.size for b in fresh), \
        "memory of the running job handed out"
    flag.u32[0] = 1  # the job goes on and ends
    other = gpu.queue()
    other.write(flag, 4, 1)
    other.finish()
    run_device(kmd)
    assert all(int(v) == 0 for b in fresh for v in b.u32[:4])  # nothing of the job landed in them
    gpu.close()


def test_a_small_buffer_fits_where_a_new_slab_does_not():
    """With less free GTT than a new slab takes (here 64 KiB free, a 4 KiB entry's slab is
    128 KiB), alloc(4096) was OutOfMemory "alloc: no device memory for 0x20000 bytes": a size
    the app never asked for, with the memory it did ask for free. The request gets a BO of its
    own then; when not even that fits, the error names the app's size."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    hold = []
    while (free := gpu.memory().gtt.largest_free) >= (128 << 10):
        hold.append(gpu.alloc(max(free - (64 << 10), 32 << 10)))
    assert gpu.memory().gtt.largest_free == 64 << 10
    small = [gpu.alloc(4096), gpu.alloc(16384), gpu.alloc(8192)]  # (no slab of theirs fits)
    assert all(b.slab is None for b in small) and all(int(b.u32[0]) == 0 for b in small)
    with pytest.raises(umd.OutOfMemory, match=r"^alloc: no device memory for 0x3000 bytes \(ENOMEM: "):
        for _ in range(64):  # (till GTT has no 12 KiB left: its slab would be 256 KiB, named as that)
            small.append(gpu.alloc(12288))
    for b in small:
        b.free()
    gpu.close()


def test_a_slab_is_64_kib_or_32_entries_up_to_256_kib():
    """Slab sizes by entry size (docs/architecture.md): 64 KiB while that holds 32 entries, then
    32 entries (4 and 8 KiB entries: 128 and 256 KiB), never over 256 KiB (16 KiB entries:
    16 of them); memory().pools counts the slabs and their bytes."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    sizes = {}
    for n in (200, 2048, 4096, 8192, 16384):
        b = gpu.alloc(n)
        sizes[b.slab.entry] = b.backing.size
    assert sizes == {256: 64 << 10, 2048: 64 << 10, 4096: 128 << 10, 8192: 256 << 10, 16384: 256 << 10}
    st = gpu.memory().pools
    assert (st.slabs, st.slab_bytes) == (5, sum(sizes.values()))
    gpu.close()


def test_waste_counts_only_live_buffers():
    """waste_bytes (the exit report's rounding waste) is what live buffers were given beyond
    their size: a freed slab entry or BO takes its share back, and waste_peak_bytes keeps
    the most it has been."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    w0 = gpu.memory().pools.waste_bytes
    small, mid, big = gpu.alloc(200), gpu.alloc(3000), gpu.alloc(40000)  # 256 and 4096-byte entries, a 40 KiB BO
    grown = 56 + 1096 + (40960 - 40000)
    assert gpu.memory().pools.waste_bytes == w0 + grown
    small.free()
    assert gpu.memory().pools.waste_bytes == w0 + grown - 56
    mid.free()
    big.free()
    st = gpu.memory().pools
    assert (st.waste_bytes, st.waste_peak_bytes) == (w0, w0 + grown)
    gpu.close()


def test_a_new_ib_takes_one_its_wait_for_memory_gave_back(monkeypatch):
    """A queue that reclaims no IBs while its jobs wait (behind a WAIT_REG_MEM here; on an
    async queue, while its flushes are still queued for the submission thread) fills GTT
    with IBs. The new IB's wait for memory then reclaimed every finished submission's IBs
    into the queue's pool, tried to allocate once more, and with nothing left in flight
    raised OutOfMemory ("new IB: no memory ... with nothing of its own in flight"), its
    pool full of free IBs: `examples/async_submit.py --submits 10000 --writes 64`, within
    its documented range, ended so in a traceback on the model. It takes one of them."""
    # (no shadow copies, and room for every job: a CS held back for either waits on the GPU)
    kmd = kmd_model.bind(RefModel(), cs_check=False, sched_jobs=1024, hw_submission_limit=1024, ring_log2_dw=16)
    gpu = umd.open()
    gate, buf = gpu.alloc(64), gpu.alloc(64)
    q = gpu.queue(ib_size_dw=1 << 14, max_inflight=1000, flush_threshold=1_000_000)  # 64 KiB IBs
    q.wait_mem(gate, 0, 1)  # every later job waits behind this one
    q.flush()
    from kmd_model.uapi import Domain

    opened: list = []
    wait, g, gtt = kmd.dev.wait_irq, gate.u32, kmd.bo.heaps[Domain.GTT]

    def wait_irq(cycles):  # the wait for memory (GTT too full for an IB) lets the gate go
        if cycles > 0 and not opened and gtt.largest_free < 0x10000:
            opened.append(True)
            g[0] = 1
        return wait(cycles)

    monkeypatch.setattr(kmd.dev, "wait_irq", wait_irq)
    for i in range(400):  # 25 MiB of IBs, more than GTT holds
        q.write(buf, 0, i)
        q.flush()
    q.finish()
    assert opened and buf.u32[0] == 399 and q.pool.created < 400
    gpu.close()
