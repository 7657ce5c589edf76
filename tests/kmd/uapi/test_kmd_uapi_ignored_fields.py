"""Fields an operation does not use, as docs/uapi.md states them to an outside UMD writer:
their value is ignored where amdgpu ignores it, but each is still the C structure's field
("EINVAL: a field of the wrong type ... out of range or wider than its C field"), and a
field that would change what runs when it is set is refused, not silently dropped. (CTX
ALLOC's ctx_id is test_kmd_uapi_contract.py's.)
"""

from __future__ import annotations

import errno

import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import CsChunkIb, GemVaArgs, Request, VaOp
from spec import pm4
from testbench.refmodel import RefModel

from tests.kmd.uapi.test_kmd_uapi_contract import PAGE, Umd, ib, refused

WRONG = (None, "1", 1.0, True, -1, 1 << 64)  # not an int, or no u64


@pytest.fixture
def u():
    kmd_model.bind(RefModel())
    return Umd()


def test_an_ib_by_gpu_addr_takes_no_offset(u):
    """CsChunkIb.offset is into the handle's BO: an IB by gpu_addr with an offset ran from
    gpu_addr, the offset dropped whatever it held (0x100, "x", None): a UMD meaning
    gpu_addr + offset ran the wrong dwords. Now any offset but 0 there is EINVAL."""
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    ib(u32, pm4.write_data(va + 0x2000, [1]))
    ib(u32, pm4.write_data(va + 0x2000, [2]), offset=0x100)
    for off in (0x100, 4, *WRONG):
        e = refused(errno.EINVAL, "CS", u.cs, ctx, CsChunkIb(8, gpu_addr=va, offset=off))
        assert e.message.startswith("CS: chunk 0: offset"), e.message
    assert u.wait(ctx, u.cs(ctx, CsChunkIb(8, gpu_addr=va + 0x100, offset=0))) and u32[0x800] == 2
    assert u.wait(ctx, u.cs(ctx, CsChunkIb(8, handle=h, offset=0x100))) and u32[0x800] == 2
    assert u.cs(ctx, CsChunkIb(8, gpu_addr=va)) == 3  # (no refusal took a seqno)


def test_an_ib_chunks_handle_of_the_wrong_type_is_an_unknown_handle(u):
    """handle 0 is "by gpu_addr"; None or False there is no 0 but a handle of the wrong type,
    an unknown one (ENOENT), as everywhere else: they ran the IB by gpu_addr."""
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    ib(u32, pm4.write_data(va + 0x2000, [1]))
    for handle in (None, False, "0", 0.0):
        refused(errno.ENOENT, "CS", u.cs, ctx, CsChunkIb(8, handle=handle, gpu_addr=va))
        refused(errno.ENOENT, "CS", u.cs, ctx, CsChunkIb(8, handle=handle))
    refused(errno.EINVAL, "CS", u.cs, ctx, CsChunkIb(8, handle=h, gpu_addr=va))  # both
    assert u.wait(ctx, u.cs(ctx, CsChunkIb(8, handle=0, gpu_addr=va))) and u32[0x800] == 1


def test_clear_ignores_the_handles_value_and_unmap_the_offsets_but_not_their_type(u):
    """GemVaArgs: CLEAR ignores its handle's value (any u32), UNMAP and CLEAR their
    offset_in_bo's (any u64), as amdgpu_gem_va_ioctl does; a value of the wrong type or wider
    than the field was taken too. Now EINVAL, nothing changed."""
    h = u.create(PAGE)
    va = u.va
    u.map(h, va, PAGE)
    for handle in WRONG[:4] + (1 << 32,):
        refused(errno.EINVAL, "GEM_VA", u.io, Request.GEM_VA, GemVaArgs(handle, VaOp.CLEAR, va, 0, PAGE, 0))
    for off in WRONG:
        refused(errno.EINVAL, "GEM_VA", u.io, Request.GEM_VA, GemVaArgs(0, VaOp.CLEAR, va, off, PAGE, 0))
        refused(errno.EINVAL, "GEM_VA", u.io, Request.GEM_VA, GemVaArgs(h, VaOp.UNMAP, va, off, 0, 0))
    refused(errno.EINVAL, "GEM_VA", u.map, h, va, PAGE)  # still mapped: every refusal changed nothing
    u.io(Request.GEM_VA, GemVaArgs(h, VaOp.UNMAP, va, 0x7000, 0, 0))  # any u64 value: unused
    u.map(h, va, PAGE)
    u.io(Request.GEM_VA, GemVaArgs((1 << 32) - 1, VaOp.CLEAR, va, (1 << 64) - 1, PAGE, 0))
    u.map(h, va, PAGE)  # (cleared)
