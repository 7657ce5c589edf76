"""Client code that calls the driver near Python's recursion limit (split by concept from
test_security_reentry.py, client code run inside an ioctl): the driver runs on a stack of
its own (`kernel_stack`, kmd_model/core/lock.py), so an ioctl, an open or a close made at
any depth is done whole or not at all (at the very limit it fails on entry, having done
nothing), an ioctl from a gc callback while the driver makes room for its stack runs, and
the driver keeps its stack until the last thread leaves, then gives it back."""

from __future__ import annotations

import errno
import gc
import sys
import threading
import traceback

import kmd_model
from kmd_model.uapi import CtxArgs, CtxOp, GemCloseArgs, GemCreateArgs, GemVaArgs, KmdError, Request, VaOp
from spec import pm4
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import RWX, Client

from .test_security_reentry import _page_at


def _holes(kmd) -> list:
    """Every heap's free ranges: what an operation that failed on entry leaves as it was."""
    return [[list(h) for h in heap.holes] for heap in kmd.bo.heaps.values()]


def _at_depth(depth: int, fn):
    """fn() called with `depth` frames on the thread's stack (the client recursing first)."""
    f, n = sys._getframe(), 0
    while f is not None:
        n, f = n + 1, f.f_back
    return _at_depth(depth, fn) if n < depth else fn()


def test_an_ioctl_made_near_the_recursion_limit_is_done_whole_or_not_at_all():
    """The driver ran on the client's stack: an ioctl made a few frames below Python's
    recursion limit raised RecursionError wherever the driver's own calls ran out, in the
    middle of its change: a GEM_VA UNMAP's page-table update done, its TLB flush not (a
    RecursionError in the flush's first MMIO write), so the VMID kept the page's entry;
    after GEM_CLOSE its memory went to another client, which the file's next job then wrote
    through the stale entry (the checker off: the MMU is the boundary). The driver has a
    stack of its own now (core/lock.kernel_stack: room for its work, however deep the
    client called from): at every depth the UNMAP is done, TLB flush included, or the call
    fails on entry having done nothing."""
    kmd = kmd_model.bind(RefModel(), cs_check=False)
    v = Client()
    X = 0x300_0000
    limit = sys.getrecursionlimit()
    for depth in range(limit - 60, limit + 1):
        a = Client()  # (a new one each time: the last one's job faulted, its context is guilty)
        ib = a.bo(0x1000)
        h = a.io(Request.GEM_CREATE, GemCreateArgs(0x1000)).handle
        a.io(Request.GEM_VA, GemVaArgs(h, VaOp.MAP, X, 0, 0x1000, RWX))
        a.run(ib, pm4.write_data(X, [1]))  # the VMID's TLB holds the page
        phys = a.f.handles[h].gpu_addr
        try:
            _at_depth(depth, lambda: a.f.ioctl(Request.GEM_VA, GemVaArgs(h, VaOp.UNMAP, X)))
        except RecursionError:
            # refused before the driver did anything
            assert a.f.vm.find(X) is not None, f"depth {depth}: a RecursionError after the UNMAP's change"
            a.io(Request.GEM_VA, GemVaArgs(h, VaOp.UNMAP, X))
        assert a.f.vm.find(X) is None
        a.io(Request.GEM_CLOSE, GemCloseArgs(h))
        vh = _page_at(v, phys)  # the victim is given the page
        seq = a.submit(a.ib(ib, pm4.write_data(X, [0xBAD0_0BAD])))
        try:
            a.wait(seq)
        except KmdError as e:
            assert e.errno == errno.ECANCELED and "VM fault" in e.message, e  # the page is gone from the VM
        assert int(kmd.mem32[phys // 4]) != 0xBAD0_0BAD, f"depth {depth}: a stale TLB entry wrote the victim's page"
        v.io(Request.GEM_CLOSE, GemCloseArgs(vh))
        a.f.close()
    assert sys.getrecursionlimit() == limit
    _at_depth(limit - 50, lambda: v.io(Request.GEM_CREATE, GemCreateArgs(0x1000)))  # the limit raised ...
    assert sys.getrecursionlimit() == limit  # ... and set back: every call above was counted out


def test_an_ioctl_from_a_gc_callback_while_the_driver_makes_room_for_its_stack_runs():
    """Client code run while an ioctl sets up the driver's stack (core/lock.kernel_stack,
    before the driver's lock is taken: a gc callback at its first allocation) may make an
    ioctl of its own: it runs, and so does the first, rather than the second waiting for
    ever on the first's hold of the stack's bookkeeping."""
    kmd = kmd_model.bind(RefModel())
    a = Client()
    seen: list = []

    from kmd_model.core import lock

    def callback(phase, info):  # once, while this thread holds the stack's bookkeeping
        held = lock._stack_lock
        if phase != "start" or seen or not (held._is_owned() if hasattr(held, "_is_owned") else held.locked()):
            return
        seen.append(a.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id)

    def both():  # an ioctl from a shallow stack, and one from a deep one (the limit raised)
        out.append(a.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id)
        out.append(_at_depth(sys.getrecursionlimit() - 40, lambda: a.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id))

    out: list = []
    old_limit = sys.getrecursionlimit()
    t = threading.Thread(target=both, daemon=True)
    gc.callbacks.append(callback)
    old = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    try:
        t.start()
        t.join(20)
    finally:
        gc.set_threshold(*old)
        gc.callbacks.remove(callback)
    assert not t.is_alive(), "the ioctl hung"
    assert seen and len(out) == 2, (seen, out)
    assert sys.getrecursionlimit() == old_limit


def test_the_driver_keeps_its_stack_until_the_last_thread_leaves_and_then_gives_it_back():
    """kernel_stack (core/lock.py) with two threads in the driver: one that entered deep (the
    limit raised) and one that entered deeper still than the old limit (which the raised one
    allows). The first leaving does not set the limit back under the second (each thread is
    counted in and out: a count set to 1 on entry rather than raised let the first's exit set
    it back, and the second ran out of frames mid-change); the second, leaving last but too
    deep for the old limit, cannot set it back and leaves that to a later exit, which does
    (a failed setting-back that forgot the old limit left it raised for good)."""
    from kmd_model.core.lock import kernel_stack
    limit = sys.getrecursionlimit()
    inside, leave = threading.Event(), threading.Event()

    def first():
        def deep():
            with kernel_stack():
                inside.set()
                leave.wait(20)
        _at_depth(limit - 50, deep)

    t = threading.Thread(target=first, daemon=True)
    t.start()
    assert inside.wait(20)
    assert sys.getrecursionlimit() > limit

    def second():
        with kernel_stack():
            leave.set()
            t.join(20)
            during = sys.getrecursionlimit()  # the first has left; this one is still inside
        return during, sys.getrecursionlimit()

    during, after = _at_depth(limit + 100, second)
    assert not t.is_alive()
    assert during > limit + 100, f"the limit was set back to {during} under a thread still in the driver"
    assert after > limit + 100  # (set back from there, this thread would be past it)
    with kernel_stack():  # a later entry and exit, from a shallow stack
        pass
    assert sys.getrecursionlimit() == limit, "the limit stayed raised"


def _bound_with_its_first_allocations():
    """(kmd, the recursion limit, the heaps' holes): a driver bound to the model with its own
    first allocations made, so what a call at any depth leaves is compared with a settled heap."""
    kmd = kmd_model.bind(RefModel())
    Client()  # (the driver's own first allocations)
    return kmd, sys.getrecursionlimit(), _holes(kmd)


def test_an_open_made_near_the_recursion_limit_is_done_whole_or_not_at_all():
    """An open (open_render_node) runs on the driver's own stack too (core/lock.kernel_stack,
    as an ioctl and a close do): made however deep, it either succeeds or fails on entry (a
    RecursionError at the very limit, before the driver's work), never part-way through
    building the file (its VM's page tables, where it ran out without kernel_stack). Every
    file opened is closed, and the memory is as before."""
    kmd, limit, heaps = _bound_with_its_first_allocations()
    failed = []
    for depth in range(limit - 60, limit + 1):
        try:
            f = _at_depth(depth, kmd_model.open_render_node)
        except RecursionError as e:
            where = [fr.name for fr in traceback.extract_tb(e.__traceback__)]
            assert "_open" not in where, f"depth {depth}: RecursionError inside the open, in {where[-3:]}"
            assert _holes(kmd) == heaps, depth
            failed.append(depth)
            continue
        f.close()
    assert failed and failed[0] > limit - 60, failed  # (the very limit reached, and opens made below it)
    assert _holes(kmd) == heaps
    assert sys.getrecursionlimit() == limit


def test_a_close_made_near_the_recursion_limit_is_done_whole_or_not_at_all():
    """A close (File.close) runs on the driver's own stack too: made however deep, it either
    releases everything or fails on entry (a RecursionError at the very limit), never
    part-way through releasing the file's BOs, contexts and VM; a close that failed on
    entry is made again from a shallow stack, and the memory is as before."""
    kmd, limit, heaps = _bound_with_its_first_allocations()
    failed = []
    for depth in range(limit - 60, limit + 1):
        a = Client()
        h = a.io(Request.GEM_CREATE, GemCreateArgs(0x1000)).handle
        a.io(Request.GEM_VA, GemVaArgs(h, VaOp.MAP, 0x300_0000, 0, 0x1000, RWX))
        a.io(Request.CTX, CtxArgs(CtxOp.ALLOC))
        try:
            _at_depth(depth, a.f.close)
        except RecursionError as e:
            where = [fr.name for fr in traceback.extract_tb(e.__traceback__)]
            assert "_close" not in where, f"depth {depth}: RecursionError inside the close, in {where[-3:]}"
            failed.append(depth)
            a.f.close()
        assert _holes(kmd) == heaps, depth
    assert failed and failed[0] > limit - 60, failed
    assert sys.getrecursionlimit() == limit
