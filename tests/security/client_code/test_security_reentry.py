"""Client code run in the middle of an ioctl (kmd_model/core/signals.py): a signal handler,
which Python runs between any two bytecodes of the main thread, and the garbage collector's
callbacks and finalizers, which run at any allocation. A kernel runs neither inside an
ioctl; here each made the driver's change half-done and another client's memory reachable:
a handler's GEM_CLOSE freed a CS's user-fence page before the job held it, a handler's
KeyboardInterrupt between an UNMAP's page-table update and its TLB flush left a stale
entry, a gc callback's close freed the page directory under a CS's job, a gc callback's
open inside the allocator put another file's page directory in the next client BO.
Python's recursion limit met inside the driver: test_security_recursion_limit.py.

The signal or the callback is raised at the exact point of the driver's work where it did
harm (a wrapper around the driver's own function), so each test is deterministic."""

from __future__ import annotations

import errno
import gc
import signal
import sys
import threading
import time

import pytest

import kmd_model
from kmd_model.uapi import (CsChunkFence, CtxArgs, CtxOp, Domain, GemCloseArgs, GemCreateArgs, GemMmapArgs, GemVaArgs,
                            InfoArgs, InfoQuery, KmdError, Request, VaOp, WaitCsArgs)
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import RWX, Client
from tests.kmd_sched.sched_helpers import sdma_ib

main_thread_only = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                      reason="Python runs signal handlers in the main thread only")


class _Handler:
    """The client's own handler for SIGUSR1, installed for the test."""

    def __init__(self, kmd, fn):
        self.kmd, self.fn = kmd, fn
        self.prev = signal.signal(signal.SIGUSR1, self)
        self.calls: list[bool] = []  # whether the driver's lock was held in each call

    def __call__(self, signum, frame):
        self.calls.append(self.kmd.lock.owned())
        if len(self.calls) == 1:
            self.fn()

    def restore(self):
        signal.signal(signal.SIGUSR1, self.prev)


def _signal_inside(monkeypatch, owner, name):
    """SIGUSR1 raised as the driver enters `owner.name` (one of its own functions)."""
    orig = getattr(owner, name)

    def wrapped(*args, **kwargs):
        signal.raise_signal(signal.SIGUSR1)
        return orig(*args, **kwargs)
    monkeypatch.setattr(owner, name, wrapped)


def _page_at(c: Client, phys: int) -> int:
    """The victim allocates one-page BOs until it is given the page at `phys`."""
    for _ in range(4096):
        h = c.io(Request.GEM_CREATE, GemCreateArgs(0x1000)).handle
        if c.f.handles[h].gpu_addr == phys:
            return h
    raise AssertionError(f"the victim never got the page at {phys:#x}")


class _SignalBetweenSwaps:
    """signal.signal as kmd_model/core/signals.py calls it, with `raised` sent right after it
    sets `after`'s handler to `to`: a signal that comes between two of the calls that hold
    the process's handlers (an ioctl's entry) or give them back (its return)."""

    def __init__(self, monkeypatch, after: int, to, raised: int):
        import _signal
        from kmd_model.core import signals as ks
        self.real, self.sent = _signal.signal, False

        def signal_(signum, handler):
            prev = self.real(signum, handler)
            if not self.sent and signum == after and to(handler):
                self.sent = True
                signal.raise_signal(raised)
            return prev
        monkeypatch.setattr(ks, "_signal", type("_Signal", (), {"signal": staticmethod(signal_),
                                                                 "getsignal": staticmethod(_signal.getsignal)}))


@main_thread_only
def test_a_handler_raising_inside_an_unmap_runs_after_it_and_leaves_no_stale_tlb_entry(monkeypatch):
    """KeyboardInterrupt (as ^C's handler raises) between GEM_VA UNMAP's page-table update and
    its TLB flush: the mapping was gone and the flush never done, so a GEM_CLOSE freed the
    page at once; a victim was given it and wrote a secret, and the attacker's job read the
    secret through the TLB's stale entry after mapping a BO of its own at the same VA."""
    kmd = kmd_model.bind(RefModel(), job_timeout=200_000)
    a = Client()
    ibbo, out = a.bo(0x2000), a.bo(0x1000)
    VA = 0x1000_0000
    x = a.io(Request.GEM_CREATE, GemCreateArgs(0x1000)).handle
    a.io(Request.GEM_VA, GemVaArgs(x, VaOp.MAP, VA, 0, 0x1000, RWX))
    a.run(ibbo, pm4.dma_data(out.addr, VA, 4))  # the VMID's TLB now holds VA -> x
    phys = a.f.handles[x].gpu_addr

    def interrupt():
        raise KeyboardInterrupt("the app's own handler")
    h = _Handler(kmd, interrupt)
    _signal_inside(monkeypatch, type(kmd.vmids), "flush_vm")
    try:
        with pytest.raises(KeyboardInterrupt):
            a.io(Request.GEM_VA, GemVaArgs(x, VaOp.UNMAP, VA))
    finally:
        h.restore()
        monkeypatch.undo()
    assert h.calls == [False], "the handler ran inside the ioctl, not after it"
    a.io(Request.GEM_CLOSE, GemCloseArgs(x))
    v = Client()
    v.io(Request.GEM_MMAP, GemMmapArgs(_page_at(v, phys))).view.view("<u4")[:] = 0x05EC_12E7
    y = a.io(Request.GEM_CREATE, GemCreateArgs(0x1000)).handle
    a.io(Request.GEM_VA, GemVaArgs(y, VaOp.MAP, VA, 0, 0x1000, RWX))
    out.u32[0] = 0
    a.run(ibbo, pm4.dma_data(out.addr, VA, 4))
    assert int(out.u32[0]) == 0, f"the attacker's job read {int(out.u32[0]):#x} through a stale TLB entry"


@main_thread_only
def test_an_ioctl_from_a_handler_inside_a_cs_runs_after_it(monkeypatch):
    """The handler closed the CS's user-fence BO while the CS was between its fence-chunk
    lookup and the job's hold on the BO: freed at once, the page went to another client and
    the job's fence write landed in it. Now the handler runs once the CS has returned, when
    the job holds the BO: the close leaves it to the job, and the victim's page is another."""
    kmd = kmd_model.bind(RefModel(), job_timeout=2_000_000)
    a = Client()
    flag, ibbo = a.bo(0x1000), a.bo(0x2000)
    a.submit(a.ib(ibbo, pm4.wait_reg_mem(flag.addr, 1, 0xFFFF_FFFF, "EQ")))  # holds the ring until flag = 1
    fence = a.io(Request.GEM_CREATE, GemCreateArgs(0x1000)).handle
    phys = a.f.handles[fence].gpu_addr
    h = _Handler(kmd, lambda: a.f.ioctl(Request.GEM_CLOSE, GemCloseArgs(fence)))
    _signal_inside(monkeypatch, type(a.f), "bo")  # (the CS looks the fence chunk's BO up by its handle)
    try:
        seq = a.submit(a.ib(ibbo, pm4.nop(2), offset=0x1000), CsChunkFence(fence, 0))
    finally:
        h.restore()
        monkeypatch.undo()
    assert h.calls[:1] == [False], h.calls  # (the first call closed it; later ones came from that close)
    assert fence not in a.f.handles  # (the handler's close was done, after the CS)
    v = Client()
    pages = [v.io(Request.GEM_CREATE, GemCreateArgs(0x1000)).handle for _ in range(64)]
    got = {v.f.handles[p].gpu_addr for p in pages}
    assert phys not in got, "the fence page was freed while the job still had to write it"
    flag.u32[0] = 1
    assert a.wait(seq)


def test_an_ioctl_or_close_from_a_gc_callback_inside_an_ioctl_is_refused_or_deferred(monkeypatch):
    """A gc callback (or a `__del__`) runs in whichever thread allocates, inside the driver
    too. Its ioctl is refused (EDEADLK: the kernel runs no client code during an ioctl), and
    its close of the file whose CS is under way takes the fd at once and releases the file
    once the CS has returned: the CS's job runs on page tables that are still its file's,
    never on a freed page directory another client was given."""
    kmd = kmd_model.bind(RefModel(), job_timeout=2_000_000)
    b = Client()  # holds the gfx ring until its CPU writes 1
    flag = b.bo(0x1000)
    b.submit(b.ib(b.bo(0x1000), pm4.wait_reg_mem(flag.addr, 1, 0xFFFF_FFFF, "EQ")))
    a = Client()
    X = 0x200_0000
    abo = a.io(Request.GEM_CREATE, GemCreateArgs(0x1000)).handle
    a.io(Request.GEM_VA, GemVaArgs(abo, VaOp.MAP, X, 0, 0x1000, RWX))
    aib = a.bo(0x1000)
    seen: list = []

    def client_code():  # what a gc callback of the client's does, run where the CS queues its job
        if seen:
            return
        try:
            a.f.ioctl(Request.CTX, CtxArgs(CtxOp.ALLOC))
        except KmdError as e:
            seen.append(e)
        a.f.close()
        seen.append(("closed", a.f.closed, a.f.fd in kmd.files))

    gc.callbacks.append(lambda phase, info: client_code() if phase == "start" and kmd.lock.owned() else None)
    old = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    try:
        try:
            a.submit(a.ib(aib, pm4.write_data(X, [0x0BAD_0BAD])))
        except KmdError as e:
            assert e.errno == errno.EBADF, e  # (closed before the CS got that far: refused, equally safe)
    finally:
        gc.set_threshold(*old)
        gc.callbacks.pop()
    assert seen, "the callback never ran inside an ioctl"
    assert isinstance(seen[0], KmdError) and seen[0].errno == errno.EDEADLK, seen
    assert seen[0].message == ("CTX: made from inside another ioctl of this thread (a signal handler or a "
                               "garbage-collector callback): the kernel runs no client code during an ioctl")
    assert seen[1] == ("closed", True, True), seen  # the fd went at once, the release waited
    assert a.f.fd not in kmd.files  # ... for the ioctl to return
    v = Client()
    vb = v.io(Request.GEM_CREATE, GemCreateArgs(0x1000)).handle
    v.io(Request.GEM_VA, GemVaArgs(vb, VaOp.MAP, X, 0, 0x1000, RWX))
    vv = v.io(Request.GEM_MMAP, GemMmapArgs(vb)).view.view("<u4")
    vv[:] = 0x1111_1111
    flag.u32[0] = 1
    v.run(v.bo(0x1000), pm4.nop(2))  # everything queued before has run
    assert int(vv[0]) == 0x1111_1111, f"a closed file's job wrote {int(vv[0]):#x} into another client's BO"


def test_a_close_from_a_gc_callback_waits_for_the_files_queued_jobs_too():
    """A close made by a gc callback inside an ioctl is released when the ioctl returns, and
    waits then for the file's queued jobs, as a close of its own does (Kmd.flush_file): it
    skipped the wait, so a client closing its files from a gc callback still queued jobs
    without bound behind a job holding the ring."""
    kmd = kmd_model.bind(RefModel(), hw_submission_limit=1, cs_check=False)
    c = Client()
    cb = c.bo(0x1000)
    c.submit(sdma_ib(cb, sdma.poll_regmem(cb.addr + 0x800, 1, 0xFFFF_FFFF, "EQ", interval=4)))  # till the timer
    a = Client()
    ab = a.bo(0x1000)
    for _ in range(8):
        a.submit(sdma_ib(ab, sdma.write_linear(ab.addr + 0x800, [1])))
    assert len(kmd.sdma_sched.queue) == 8

    def callback(phase, info):
        if phase == "start" and kmd.lock.owned() and not a.f.closed:
            a.f.close()
    gc.callbacks.append(callback)
    old = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    try:
        for _ in range(100):
            c.io(Request.INFO, InfoArgs(InfoQuery.DEV_INFO))
            if a.f.closed:
                break
    finally:
        gc.set_threshold(*old)
        gc.callbacks.remove(callback)
    assert a.f.closed and a.f.fd not in kmd.files, "the callback never closed the file inside an ioctl"
    assert not kmd.sdma_sched.queue  # (its jobs are in the ring or done)


@main_thread_only
def test_a_signal_ends_a_wait_for_the_gpu_inside_an_ioctl():
    """The wait is interruptible, as the kernel's: a signal held during WAIT_CS ends it with
    EINTR (the handler, run as the ioctl returns, may raise instead: ^C's KeyboardInterrupt),
    not after the job's whole timeout."""
    kmd_model.bind(RefModel(), job_timeout=1 << 40)  # (the job is not reset while the test waits)
    a = Client()
    flag = a.bo(0x1000)
    seq = a.submit(a.ib(a.bo(0x1000), pm4.wait_reg_mem(flag.addr, 1, 0xFFFF_FFFF, "EQ")))
    came: list = []
    prev = signal.signal(signal.SIGALRM, lambda s, f: came.append(s))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        t0 = time.monotonic()
        with pytest.raises(KmdError) as e:
            a.io(Request.WAIT_CS, WaitCsArgs(a.ctx, seq, 2**64 - 1))
        took = time.monotonic() - t0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, prev)
    assert e.value.errno == errno.EINTR and "WAIT_CS: interrupted by a signal" in str(e.value), e.value
    assert came == [signal.SIGALRM] and took < 30, (came, took)
    flag.u32[0] = 1
    assert a.wait(seq)


@main_thread_only
def test_the_umd_makes_a_wait_the_kmd_ended_for_a_signal_again(monkeypatch):
    """A handler that does not raise (an app's SIGUSR1 bookkeeping): the KMD ends the wait
    with EINTR and the UMD makes it again, as libdrm's drmIoctl does; finish() returns when
    the job is done, not with an error."""
    import umd

    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 40)
    gpu = umd.open()
    q = gpu.queue()
    gate, out = gpu.alloc(64), gpu.alloc(64)
    cpu = gate.u32  # (mapped now: the handler writes it without an ioctl)
    q.wait_mem(gate, 0, 1)
    q.write(out, 0, 7)
    h = _Handler(kmd, lambda: None)
    wait = kmd.dev.wait_irq
    opened: list = []

    def wait_irq(cycles):  # a signal in each of the KMD's first two waits for the GPU
        if cycles > 0 and len(h.calls) < 2:
            signal.raise_signal(signal.SIGUSR1)
        elif len(h.calls) == 2 and not opened:
            opened.append(True)
            cpu[0] = 1  # (then the job ends)
        return wait(cycles)
    monkeypatch.setattr(kmd.dev, "wait_irq", wait_irq)
    try:
        q.finish()
    finally:
        h.restore()
    assert h.calls == [False, False] and out.u32[0] == 7, h.calls
    gpu.close()


def test_an_open_from_a_gc_callback_inside_an_ioctl_is_refused():
    """An open (open_render_node) from client code inside an ioctl was not refused, as an
    ioctl from there is: a gc callback that ran inside GEM_CREATE's allocation, between the
    allocator's finding a hole and its splitting it, opened a file, whose page directory was
    taken from the same hole; the GEM_CREATE then wrote its split over it, the page
    directory's page went back on the free list, and the next VRAM BO, the client's to map
    and write, held another file's page directory (its PTEs: any memory). It is EDEADLK now,
    and the allocator's free list never holds a live BO's page."""
    kmd = kmd_model.bind(RefModel())
    a = Client()
    seen: list = []

    def callback(phase, info):  # opens once, from inside the VRAM allocator
        if phase != "start" or seen or not kmd.lock.owned():
            return
        f = sys._getframe(1)
        # (Heap.alloc, or its copy under the mutation campaign, xǁHeapǁalloc__mutmut_orig:
        # == "alloc" failed the campaign's coverage pass whenever bo.py was mutated)
        while f is not None and not ("alloc" in f.f_code.co_name and f.f_code.co_filename.endswith("bo.py")):
            f = f.f_back
        if f is None:
            return
        try:
            seen.append(kmd_model.open_render_node())
        except KmdError as e:
            seen.append(e)

    gc.callbacks.append(callback)
    old = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    try:
        vram = kmd.bo.heaps[Domain.VRAM]
        a.io(Request.GEM_CREATE, GemCreateArgs(vram.largest_free - 0x10000, 0, Domain.VRAM))
    finally:
        gc.set_threshold(*old)
        gc.callbacks.remove(callback)
    assert seen, "the callback never ran inside the allocator"
    e = seen[0]
    assert isinstance(e, KmdError) and e.errno == errno.EDEADLK, e
    assert e.message == ("open: made from inside an ioctl of this thread (a signal handler or a garbage-collector "
                         "callback): the kernel runs no client code during an ioctl")
    for heap in kmd.bo.heaps.values():
        for bo in kmd.bo.live:
            assert not any(s < bo.end and bo.gpu_addr < e for s, e in heap.holes), (bo, heap.holes)
    Client()  # an open from outside an ioctl is as before
    a.io(Request.GEM_CREATE, GemCreateArgs(0x8000, 0, Domain.VRAM))  # the next VRAM BO: no one else's page
    live = sorted(kmd.bo.live, key=lambda b: b.gpu_addr)
    assert all(x.end <= y.gpu_addr for x, y in zip(live, live[1:])), live


@main_thread_only
@pytest.mark.parametrize("where", ["return", "entry"])
def test_a_signal_that_comes_while_an_ioctl_swaps_the_handlers_leaves_none_held(monkeypatch, where):
    """An ioctl holds every Python signal handler (core/signals.py: each replaced by one that
    notes the signal) and gives them back as it returns, one `signal.signal` call each. A
    signal whose handler raises (^C's KeyboardInterrupt), coming between two of those calls,
    raised out of the loop: at the return, the handlers after it in the loop stayed the
    driver's note-taker for good (SIGUSR2's handler was lost: every later SIGUSR2 noted and
    never delivered; SIGALRM's or SIGTERM's, and `gpucosim run --timeout` would never stop the
    run), and the signals held until then were never delivered; at the entry, those already
    replaced. Now every handler is the client's again however the swap ends, the held
    signals are delivered, and the handler's exception is raised after."""
    kmd_model.bind(RefModel())
    a = Client()
    came: list = []

    def usr1(signum, frame):
        came.append(signum)
        raise KeyboardInterrupt("usr1")

    def usr2(signum, frame):
        came.append(signum)

    prev1, prev2 = signal.signal(signal.SIGUSR1, usr1), signal.signal(signal.SIGUSR2, usr2)
    try:
        if where == "return":  # SIGUSR1 once its own handler is back, before SIGUSR2's is
            _SignalBetweenSwaps(monkeypatch, signal.SIGUSR1, lambda h: h is usr1, signal.SIGUSR1)
        else:  # SIGUSR2 once SIGUSR1's handler is held, before SIGUSR2's own is: usr2 then raises
            usr2_raising = [True]

            def usr2(signum, frame):  # noqa: F811
                came.append(signum)
                if usr2_raising.pop(0) if usr2_raising else False:
                    raise KeyboardInterrupt("usr2")
            signal.signal(signal.SIGUSR2, usr2)
            _SignalBetweenSwaps(monkeypatch, signal.SIGUSR1, lambda h: h is not usr1, signal.SIGUSR2)
        with pytest.raises(KeyboardInterrupt):
            a.io(Request.CTX, CtxArgs(CtxOp.ALLOC))
        monkeypatch.undo()
        assert (signal.getsignal(signal.SIGUSR1), signal.getsignal(signal.SIGUSR2)) == (usr1, usr2)
        came.clear()
        signal.raise_signal(signal.SIGUSR2)  # the client's handler runs, not the driver's note-taker
        assert came == [signal.SIGUSR2]
        assert a.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id  # (and the driver is as before)
    finally:
        signal.signal(signal.SIGUSR1, prev1)
        signal.signal(signal.SIGUSR2, prev2)


@main_thread_only
def test_an_open_holds_signals_as_an_ioctl_does(monkeypatch):
    """open (open_render_node) took the driver's lock without holding the signals, as ioctls
    and closes do: a handler ran in the middle of it. Its ioctl was EDEADLK (it runs after
    the open now, as from inside an ioctl), and its KeyboardInterrupt, raised between the
    allocator's taking the new page directory's page and the BO that records it, left that
    page allocated for good: the VRAM heap one page short per ^C in an open. Now the open is
    whole, then the handler runs."""
    kmd = kmd_model.bind(RefModel())
    a = Client()
    vram = kmd.bo.heaps[Domain.VRAM]
    results: list = []

    def ioctl():
        try:
            results.append(a.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id)
        except KmdError as e:
            results.append(e)

    h = _Handler(kmd, ioctl)
    _signal_inside(monkeypatch, kmd_model.mm.vm.Vm, "_new_table")
    try:
        b = kmd_model.open_render_node()
    finally:
        h.restore()
        monkeypatch.undo()
    assert h.calls == [False] and results == [2], (h.calls, results)
    b.close()

    used = vram.used
    h = _Handler(kmd, lambda: (_ for _ in ()).throw(KeyboardInterrupt("^C in an open")))
    from kmd_model.mm import bo as bo_mod
    real_bo = bo_mod.Bo

    def bo_(*args, **kwargs):  # the signal as the allocator records the page it took
        signal.raise_signal(signal.SIGUSR1)
        return real_bo(*args, **kwargs)
    monkeypatch.setattr(bo_mod, "Bo", bo_)
    try:
        with pytest.raises(KeyboardInterrupt):
            kmd_model.open_render_node()
    finally:
        h.restore()
        monkeypatch.undo()
    # every page taken is a live BO's (the open was made whole, then the handler raised)
    assert vram.used == sum(b.size for b in kmd.bo.live if b.domain == Domain.VRAM), vram.used
    opened = [f for f in kmd.files.values() if f is not a.f]
    assert len(opened) == 1
    opened[0].close()
    assert vram.used == used


@main_thread_only
def test_elapse_reads_its_count_once_and_a_signal_ends_it():
    """File.elapse (not an ioctl: the device's time passing while the client spins on memory)
    runs with the client's signal handlers held, as an ioctl does. It read its count twice,
    once to check it and once to use it: an int subclass answering 5, then 2**40, passed the
    check and had the device run 2**40 cycles (some 15 minutes on the model, days on
    Verilator; 2**28 here, to fail fast) with ^C and `--timeout` held all the while; and a legal 2**32 cycles held them
    too (hours on Verilator). It reads the count once now, and a held signal ends it early,
    as it ends a wait for the GPU inside an ioctl (nothing is promised by the time passing:
    the client's loop reads its memory and spins again)."""
    dev = RefModel()
    kmd_model.bind(dev)
    f = kmd_model.open_render_node()

    class Sly(int):
        calls = 0

        def __int__(self):
            Sly.calls += 1
            return 5 if Sly.calls == 1 else 1 << 28

    t0 = dev.now()
    f.elapse(Sly(5))
    assert 5 <= dev.now() - t0 < 1 << 20 and Sly.calls == 1
    f.elapse(0)
    came: list = []
    prev = signal.signal(signal.SIGALRM, lambda s, fr: came.append(s))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        t0, w0 = dev.now(), time.monotonic()
        f.elapse(1 << 32)  # (about 3.5 s on the model)
        took = time.monotonic() - w0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, prev)
    assert came == [signal.SIGALRM] and took < 1.5 and dev.now() - t0 < 1 << 32, (came, took, dev.now() - t0)
