"""Submission contexts as a hostile client uses them (kmd_model/ctx.py): how many one file
may hold, and what a dependency on another context's or ring's seqno means."""

from __future__ import annotations

import errno

import kmd_model
from kmd_model.ctx import MAX_CONTEXTS
from kmd_model.uapi import CtxArgs, CtxOp, Request
from spec import pm4
from testbench.refmodel import RefModel

from .test_kmd_ioctl import Client, expect


def alloc(c: Client) -> int:
    return c.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id


def test_a_file_holds_at_most_max_contexts_and_a_freed_one_makes_room():
    """A client allocating contexts in a loop would grow the driver without end; amdgpu's
    idr gives a file ids 1..AMDGPU_VM_MAX_NUM_CTX - 1 and answers ENOSPC past them. The
    refusal changes nothing, other files are not limited by it, and freeing one context
    lets the next ALLOC succeed."""
    kmd = kmd_model.bind(RefModel())
    c = Client()  # (its first context is one of them)
    ids = [c.ctx] + [alloc(c) for _ in range(MAX_CONTEXTS - 1)]
    assert MAX_CONTEXTS == 4095 and len(set(ids)) == MAX_CONTEXTS
    before = len(kmd.contexts)
    expect(errno.ENOSPC, f"CTX ALLOC: this file has {MAX_CONTEXTS} contexts, the most one file may have "
           "(free one first)", alloc, c)
    assert len(kmd.contexts) == before and len(c.f.contexts) == MAX_CONTEXTS
    other = Client()  # a limit per file, not per device
    assert alloc(other) not in ids
    c.io(Request.CTX, CtxArgs(CtxOp.FREE, ids[7]))
    new = alloc(c)
    assert len(c.f.contexts) == MAX_CONTEXTS
    bo = c.bo()
    assert c.wait(c.submit(c.ib(bo, pm4.write_data(bo.addr, [5])), ctx=new), ctx=new) and bo.u32[0] == 5
    expect(errno.ENOSPC, f"CTX ALLOC: this file has {MAX_CONTEXTS} contexts, the most one file may have "
           "(free one first)", alloc, c)
    c.f.close()
    assert not any(x.file is c.f for x in kmd.contexts.values())
