"""The UMD's memory: the VA allocator (umd/va.py) and the pools (umd/pool.py).

Unit tests of the allocator, then `check_*(dev)` bodies (the model here, the RTL in
tests/test_rtl_drivers.py): every Buffer is at a GPU virtual address the KMD maps; small
buffers come from slabs and freed ones are reused only once the work that may use them is
done; the BO cache reuses freed BOs by size and gives expired ones back; memory() and the
counters say so; with pools off each buffer costs its ioctls.
"""

from __future__ import annotations

import pytest

import kmd_model
import umd
from kmd_model.uapi import Request
from testbench.refmodel import RefModel
from umd.pool import SLAB_BYTES
from umd.va import VaAllocator

P = 0x1000


def test_va_best_fit_alignment_guard_and_coalescing():
    va = VaAllocator(0x100000, 0x200000)
    a = va.alloc(0x1000)
    b = va.alloc(0x3000, alignment=0x10000)
    c = va.alloc(100)
    assert a == 0x100000 and b % 0x10000 == 0 and b >= a + 2 * P  # a's guard page lies between
    assert c == a + 2 * P  # best fit: the hole below b's alignment, not after b
    st = va.stats()
    assert (st.allocations, st.used) == (3, (1 + 1) * P + (3 + 1) * P + (1 + 1) * P)
    va.free(b)
    va.free(a)
    va.free(c)
    st = va.stats()
    assert (st.free_ranges, st.used, st.largest_free) == (1, 0, 0x100000 - P)  # all one range again
    with pytest.raises(umd.OutOfMemory, match=r"^GPU virtual address space exhausted: no free range of 0x101000 "
                                              r"bytes aligned to 0x1000 \(0x100000 bytes free in 1 ranges, "
                                              r"the largest 0xff000\)$"):
        va.alloc(0x100000)
    with pytest.raises(ValueError, match="must be a non-empty range of whole 0x1000-byte pages"):
        VaAllocator(0x100, 0x2000)


def test_va_fragmentation_is_visible():
    va = VaAllocator(0, 64 * P, guard_pages=0)
    xs = [va.alloc(P) for _ in range(64)]
    for x in xs[::2]:
        va.free(x)
    st = va.stats()
    assert (st.free_ranges, st.largest_free, st.free) == (32, P, 32 * P)  # half free, in 32 holes
    with pytest.raises(umd.OutOfMemory):
        va.alloc(2 * P)
    for x in xs[1::2]:
        va.free(x)
    assert va.stats().free_ranges == 1


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
    freed = small[1].gpu_addr
    small[1].free()
    again = gpu.alloc(200)
    assert again.gpu_addr != freed  # not reused while a submission that may use it runs
    st = gpu.memory().pools
    assert st.slab_frees_deferred == 1
    flag.u32[0] = 1
    q.finish()
    assert small[1].freed and gpu.alloc(200).gpu_addr == freed  # reclaimed after its fence
    assert gpu.memory().pools.waste_bytes >= 56 * 300
    big = gpu.alloc(64 << 10)
    addr = big.gpu_addr
    big.free()
    hits = gpu.memory().pools.cache_hits
    again = gpu.alloc(60 << 10)  # a compatible size: the cached BO
    assert again.gpu_addr == addr and gpu.memory().pools.cache_hits == hits + 1
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
    gpu.close()
    assert kmd.live_bos() == []
    with pytest.raises(TypeError, match="open: pools must be True or False, not 'yes'"):
        umd.open(pools="yes")
    assert Request.GEM_VA  # (the winsys speaks it)
