"""The strace-like ioctl trace (`GPUCOSIM_LOG=ioctl=info`, `Kmd.trace_hooks`): how each kind
of argument prints, which fields are left out, and where a long line is cut. The trace
is what a person reads to see what a UMD asked for, so the text is pinned exactly."""

from __future__ import annotations

import errno

import numpy as np
import pytest

from kmd_model.ioctl import trace as ioctl_trace
from kmd_model.uapi import (CsArgs, CsChunkFence, CsChunkIb, CtxArgs, CtxOp, CtxOut, Domain, GemCreateArgs,
                            GemFlags, GemMmapOut, InfoArgs, InfoQuery, KmdError, ResetStatus)


@pytest.mark.parametrize("value, text", [
    (True, "True"), (None, "None"), (0, "0"), (9, "9"), (-9, "-9"), (10, "0xa"), (-10, "-0xa"), (0x1000, "0x1000"),
    (Domain.VRAM, "VRAM"), (Domain.GTT | Domain.VRAM, "GTT|VRAM"), (GemFlags(0), "0"), (ResetStatus.GUILTY, "GUILTY"),
    (np.zeros(3, np.uint32), "<uint32[3] view>"),
    (CsChunkIb(8, handle=2, offset=0x40), "Ib(bo 2+0x40, 8 dw)"),
    (CsChunkIb(16, gpu_addr=0x2000000), "Ib(0x2000000, 16 dw)"),
    (CsChunkIb(4), "Ib(?, 4 dw)"),
    (CsChunkFence(2, 0x100), "Fence(bo 2+0x100)"),
    ((1, 20), "[1, 0x14]"), ([], "[]"),
    ({"busy": 3, "bytes": 0x40}, "{busy=3, bytes=0x40}"),
    ("x", "'x'"), (1.5, "1.5"),
])
def test_values(value, text):
    assert ioctl_trace._fmt_value(value) == text


def test_structures_leave_out_defaults():
    assert ioctl_trace.fmt(GemCreateArgs(0x1000)) == "{size=0x1000}"
    # a default in the middle does not hide what follows it
    assert ioctl_trace.fmt(GemCreateArgs(0x1000, 0, Domain.VRAM, GemFlags.NO_CPU_ACCESS)) == \
        "{size=0x1000, domain=VRAM, flags=NO_CPU_ACCESS}"
    assert ioctl_trace.fmt(CtxArgs(CtxOp.QUERY_STATE, 3)) == "{op=QUERY_STATE, ctx_id=3}"
    # what the call is (op, query) shows even at its default
    assert ioctl_trace.fmt(InfoArgs(InfoQuery.DEV_INFO)) == "{query=DEV_INFO}"
    assert ioctl_trace.fmt(CtxOut(5)) == "{ctx_id=5}"
    assert ioctl_trace.fmt(CtxOut(5, ResetStatus.INNOCENT, 2)) == "{ctx_id=5, reset_status=INNOCENT, resets=2}"
    assert ioctl_trace.fmt(GemMmapOut(np.zeros(16, np.uint8), 16)) == "{view=<uint8[16] view>, size=0x10}"
    assert ioctl_trace.fmt(CsArgs(1, [CsChunkIb(8, 2), CsChunkFence(2, 4)])) == \
        "{ctx_id=1, chunks=[Ib(bo 2+0x0, 8 dw), Fence(bo 2+0x4)]}"
    assert ioctl_trace.fmt(7) == "7"  # not a structure: the value


def test_long_lines_are_cut_at_the_limit():
    exact = "{" + "a" * (ioctl_trace.CLIP - 2) + "}"
    assert len(exact) == ioctl_trace.CLIP and ioctl_trace._clip(exact) == exact
    longer = exact[:-1] + "b}"
    assert ioctl_trace._clip(longer) == longer[:ioctl_trace.CLIP - 4] + "...}"
    assert len(ioctl_trace._clip(longer)) == ioctl_trace.CLIP


def test_record_lines():
    args = CsArgs(1, [CsChunkIb(8, gpu_addr=0x10 * i) for i in range(8)])
    ok = ioctl_trace.IoctlRecord(3, "CS", args, CtxOut(2), None, 12, 41.4)
    text = str(ok)
    assert text == f"ioctl(fd 3, CS, {ioctl_trace._clip(ioctl_trace.fmt(args))}) = {{ctx_id=2}} <12 cycles, 41 us>"
    assert "...}" in text
    bad = ioctl_trace.IoctlRecord(4, "GEM_CREATE", GemCreateArgs(0), None, KmdError(errno.EINVAL, "GEM_CREATE: no"), 0, 2.6)
    assert str(bad) == "ioctl(fd 4, GEM_CREATE, {size=0}) = -1 EINVAL (GEM_CREATE: no) <0 cycles, 3 us>"
