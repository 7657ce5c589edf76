"""docs/uapi.md's one-line meanings, as an outside UMD writer reads them, hold: each test
takes a statement of the page (kmd_model/uapi.py's comments) that no other test checks and
does what it says. test_kmd_uapi_reference.py checks the page's shape; the errnos are
test_kmd_uapi_contract*.py's."""

from __future__ import annotations

import errno

import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import CtxArgs, CtxOp, Domain, GemCreateArgs, GemVaArgs, InfoArgs, InfoQuery, KmdError, Request, VaOp
from testbench.refmodel import RefModel

PAGE = 0x1000


def _file(**model):
    kmd_model.bind(RefModel(**model))
    return kmd_model.open_render_node()


def _memory(f) -> uapi.MemoryInfo:
    return f.ioctl(Request.INFO, InfoArgs(InfoQuery.MEMORY))


@pytest.mark.parametrize("domain", [Domain.GTT, Domain.VRAM])
def test_largest_free_is_the_largest_bo_that_fits_now(domain):
    """HeapInfo.largest_free: "the largest BO that fits now": a BO of that size is made, one
    page more is ENOMEM; and GemCreateOut.size: "more than a heap holds: ENOMEM"."""
    f = _file()
    heap = "gtt" if domain == Domain.GTT else "vram"
    free = getattr(_memory(f), heap).largest_free
    assert free > 0 and free % PAGE == 0
    with pytest.raises(KmdError) as e:
        f.ioctl(Request.GEM_CREATE, GemCreateArgs(free + PAGE, domain=domain))
    assert e.value.errno == errno.ENOMEM
    with pytest.raises(KmdError) as e:
        f.ioctl(Request.GEM_CREATE, GemCreateArgs(getattr(_memory(f), heap).total + PAGE, domain=domain))
    assert e.value.errno == errno.ENOMEM
    assert f.ioctl(Request.GEM_CREATE, GemCreateArgs(free, domain=domain)).size == free
    assert getattr(_memory(f), heap).largest_free < PAGE or heap == "gtt"  # (GTT: the shadow pool's hole)


def test_used_counts_the_kernels_own_bos():
    """HeapInfo.used: "in use, the kernel's own BOs (rings, page tables, shadow IBs) counted":
    a file that made no BO sees the kernel's ring and shadow pool in GTT (16 MiB of shadow
    IBs at least) and its page directory; a GEM_VA MAP that needs a new page table counts
    it, and a BO counts its whole pages (GemCreateArgs.size: "rounded up to whole pages")."""
    f = _file()
    m0 = _memory(f)
    assert m0.gtt.used >= 16 << 20 and m0.vram.used >= PAGE
    h = f.ioctl(Request.GEM_CREATE, GemCreateArgs(PAGE + 1)).handle
    m1 = _memory(f)
    assert m1.gtt.used - m0.gtt.used == 2 * PAGE and m1.vram.used == m0.vram.used
    info = f.ioctl(Request.INFO, InfoArgs(InfoQuery.DEV_INFO))
    f.ioctl(Request.GEM_VA, GemVaArgs(h, VaOp.MAP, info.va_start, map_size=PAGE))
    m2 = _memory(f)
    assert (m2.gtt.used + m2.vram.used) - (m1.gtt.used + m1.vram.used) == PAGE  # its page table


def test_ctx_alloc_answers_an_id_above_0_and_ignores_ctx_id():
    """CtxOut.ctx_id: "ALLOC: the new context's id (> 0)", each its own; CtxArgs.ctx_id is
    ALLOC's to ignore (any u32 value, as amdgpu_ctx_ioctl), but a field of the wrong type
    is EINVAL (the module's rule), as priority's is for every op."""
    f = _file()
    ids = [f.ioctl(Request.CTX, CtxArgs(CtxOp.ALLOC, ctx_id=c)).ctx_id for c in (0, 7, 0xFFFF_FFFF)]
    assert all(i > 0 for i in ids) and len(set(ids)) == 3, ids
    for bad in ("x", None, 1.0, -1, 1 << 32):
        with pytest.raises(KmdError, match=r"^EINVAL: CTX ALLOC: ctx_id must ") as e:
            f.ioctl(Request.CTX, CtxArgs(CtxOp.ALLOC, ctx_id=bad))
        assert e.value.errno == errno.EINVAL
    assert f.ioctl(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id not in ids  # (refused: nothing was made)


def test_dev_info_without_a_dma_engine():
    """DevInfo.dma_max_bytes: "0 without DMA"; has_dma False there; sdma_rings: "1 on the
    model"; va_alignment: "the page size: GEM_VA's unit" (a VA half a page off is EINVAL)."""
    f = _file(dma=False)
    i = f.ioctl(Request.INFO, InfoArgs(InfoQuery.DEV_INFO))
    assert (i.has_dma, i.dma_max_bytes, i.sdma_rings, i.va_alignment) == (False, 0, 1, PAGE)
    h = f.ioctl(Request.GEM_CREATE, GemCreateArgs(PAGE)).handle
    with pytest.raises(KmdError) as e:
        f.ioctl(Request.GEM_VA, GemVaArgs(h, VaOp.MAP, i.va_start + i.va_alignment // 2, map_size=PAGE))
    assert e.value.errno == errno.EINVAL


@pytest.mark.parametrize("ring", ["gfx", "dma"])
def test_an_ib_of_any_size_runs(ring):
    """CsChunkIb: "size_dw 1 .. DEV_INFO.max_ib_dw, any size on either ring (UMDs pad it to
    DEV_INFO.ib_align_dw ... unasked)"; DevInfo.ib_align_dw: "UMDs their IBs (not asked)"
    (it said "padded to DEV_INFO.ib_align_dw by the UMD", "pad IB sizes to this many dwords",
    as if a size off it were refused): a 5-dword WRITE_DATA IB and a 7-dword COPY_LINEAR IB,
    no padding, run."""
    from spec import pm4, sdma
    from tests.kmd.uapi.test_kmd_uapi_contract import Umd

    kmd_model.bind(RefModel())
    u = Umd()
    h, u32, va = u.bo()
    ctx = u.ctx()
    u32[0x401] = 0x77
    if ring == "gfx":
        words, ip = pm4.write_data(va + 0x1000, [0x55]), uapi.HwIp.GFX
    else:
        words, ip = sdma.copy_linear(va + 0x1000, va + 0x1004, 4), uapi.HwIp.DMA
    assert len(words) % u.info.ib_align_dw
    u32[0x200:0x200 + len(words)] = words
    assert u.wait(ctx, u.cs(ctx, uapi.CsChunkIb(len(words), handle=h, offset=0x800, ip_type=ip)))
    assert u32[0x400] == (0x55 if ring == "gfx" else 0x77)
