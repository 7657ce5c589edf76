"""A hostile program against the KMD and the UMD, as an outside tester writes one: every value
it hands the driver is client code. Arguments whose reading runs the client's code (an `int`
subclass whose `__int__` answers differently each time, raises, blocks, or makes ioctls of
its own; a subclass of an argument class whose field is a property; a `__repr__` that
raises, spans lines or is megabytes long; an int of 5,000 digits) are read once, by the
kernel's copy (kmd_model/ioctl/copyin.py), before the driver's lock and before any lookup,
and refused in one line. The UMD used wrongly is tests/security/client_code/test_security_hostile_app.py.
"""

from __future__ import annotations

import errno

import numpy as np
import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import (CsArgs, CsChunkDep, CsChunkFence, CsChunkIb, CtxArgs, CtxOp, GemCloseArgs,
                            GemCreateArgs, GemMmapArgs, GemVaArgs, GemWaitIdleArgs, InfoArgs, KmdError, Request,
                            VaOp, WaitCsArgs)
from spec import pm4
from testbench.refmodel import RefModel

from ..security_helpers import quiet
from tests.kmd.test_kmd_ioctl import Client

SECRET = 0x5EC2_E7ED


class Flip(int):
    """An int whose int() answers the next of `values` each time it is asked."""

    def __new__(cls, *values: int):
        self = super().__new__(cls, values[0])
        self.values, self.reads = values, 0
        return self

    def __int__(self) -> int:
        self.reads += 1
        return self.values[(self.reads - 1) % len(self.values)]

    __index__ = __int__


class Boom(int):
    """An int whose int() raises."""

    def __int__(self) -> int:
        raise RuntimeError("boom")

    __index__ = __int__


def _close_flipping_property(a: int, b: int) -> GemCloseArgs:
    class FlippingClose(GemCloseArgs):  # each read of .handle answers the other handle
        reads = 0

        @property
        def handle(self):
            FlippingClose.reads += 1
            return (a, b)[(FlippingClose.reads - 1) % 2]

        @handle.setter
        def handle(self, v):
            pass

    return FlippingClose(0)


@pytest.mark.parametrize("how", ["int subclass", "property"])
def test_gem_close_with_a_handle_that_changes_between_reads_closes_one_bo_and_leaves_no_dangling_handle(how):
    """GEM_CLOSE looked the handle up (BO A) and then removed the handle it read a second time
    (BO B): A was freed with its handle still in the table, so GEM_MMAP of it mapped memory
    the allocator then gave another client (whose data the hostile client read), and B lost
    its handle without being freed. Now the handle is read once: A is closed, B is whole."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    a, b = c.bo(0x1000), c.bo(0x1000)
    live = len(kmd.live_bos())
    args = GemCloseArgs(Flip(a.handle, b.handle)) if how == "int subclass" else \
        _close_flipping_property(a.handle, b.handle)
    c.io(Request.GEM_CLOSE, args)
    assert len(kmd.live_bos()) == live - 1  # exactly one BO closed and freed
    assert all(not bo.closed and not bo.freed for bo in c.f.handles.values())  # no handle to a freed BO
    assert sorted(c.f.handles) == [b.handle]
    # the other client's new BO takes the freed memory: nothing the hostile file still holds reaches it
    victim = Client()
    v = victim.bo(0x1000)
    victim.run(v, pm4.write_data(v.addr + 0x800, [SECRET] * 8), 0x100)
    for h in list(c.f.handles):
        view = c.io(Request.GEM_MMAP, GemMmapArgs(h)).view.view("<u4")
        assert SECRET not in view.tolist()
    c.f.close()
    victim.f.close()
    assert not kmd.live_bos(victim.f) and not kmd.live_bos(c.f)
    quiet(kmd)


def test_an_ioctl_made_from_inside_the_kmds_reading_of_an_argument_cannot_free_what_the_ioctl_uses():
    """A user fence chunk's offset is an int whose int() closes the fence BO: the KMD had
    looked the BO up already, then converted the offset (running the client's code, which
    made a GEM_CLOSE: the BO was idle, so freed), and queued the job with its fence aimed
    at the freed page. Another client got that page, and the job's seqno landed in it. Now
    every argument is read before any lookup: the close comes first, and the CS is EINVAL."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    ib = c.bo(0x1000)
    fence = c.io(Request.GEM_CREATE, GemCreateArgs(0x1000)).handle
    phys = c.f.handles[fence].gpu_addr

    class ClosesTheFence(int):
        def __int__(self):
            c.io(Request.GEM_CLOSE, GemCloseArgs(fence))
            return int.__int__(self)

    chunk = c.ib(ib, pm4.wait_reg_mem(ib.addr + 0x800, 1, 1, "EQ"))  # held until released
    try:
        seq = c.submit(chunk, CsChunkFence(fence, ClosesTheFence(0x10)))
    except KmdError as e:
        seq = None
        assert e.errno == errno.EINVAL and e.message == f"CS: chunk 1: no BO with handle {fence}"
    victim = Client()
    v = victim.bo(0x1000)
    assert victim.phys(v) == phys  # the freed page went to the other client
    ib.u32[0x200] = 1
    if seq is not None:
        c.wait(seq)
    victim.run(v, pm4.write_data(v.addr + 0x800, [SECRET]), 0x100)
    assert v.u32[4] == 0, "the hostile job's fence wrote the other client's memory"
    quiet(kmd)


@pytest.mark.parametrize("req", ["GEM_CREATE", "GEM_VA", "CTX", "CS"])
def test_a_file_closed_by_the_clients_code_inside_an_ioctl_is_ebadf(req):
    """An argument whose int() closes the file: the ioctl had checked the file was open before
    reading its arguments, so GEM_CREATE made a BO on the closed file (leaked for good: the
    close had released the file's BOs already), GEM_VA mapped into its destroyed VM. Now the
    file is checked again once the arguments are read: EBADF, nothing made."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x1000)
    bo.u32[:8] = pm4.pad(8)
    raw = c.io(Request.GEM_CREATE, GemCreateArgs(0x1000)).handle

    class ClosesTheFile(int):
        def __int__(self):
            c.f.close()
            return int.__int__(self)

    v = ClosesTheFile
    args = {"GEM_CREATE": GemCreateArgs(v(0x1000)),
            "GEM_VA": GemVaArgs(raw, VaOp.MAP, 0x2000_0000, 0, v(0x1000)),
            "CTX": CtxArgs(CtxOp.ALLOC, 0, v(0)),
            "CS": CsArgs(c.ctx, [CsChunkIb(v(8), bo.handle)])}[req]
    with pytest.raises(KmdError) as ei:
        c.io(Request[req], args)
    assert (ei.value.name, ei.value.message) == ("EBADF", f"{req}: the file is closed")
    assert not kmd.live_bos() and kmd.stats["cs"] == 0
    assert not c.f.contexts and not c.f.vm.maps


def test_a_client_blocked_in_its_own_argument_code_does_not_stop_other_clients():
    """The KMD read its arguments under the driver's lock, so a client whose int() blocked
    (here: until another client's ioctl has run) held every other client's ioctls, its UMD's
    submissions included, for as long as it liked: a hang of the whole driver. The
    arguments are copied in before the lock is taken."""
    import threading

    kmd = kmd_model.bind(RefModel())
    hostile, other = Client(), Client()
    obo = other.bo(0x1000)
    done = threading.Event()

    class WaitsForTheOtherClient(int):
        def __int__(self):
            done.wait(120)  # (a guard, longer than the join below: with the old lock order nothing sets it)
            return int.__int__(self)

    result = []
    t = threading.Thread(target=lambda: result.append(
        hostile.io(Request.GEM_CREATE, GemCreateArgs(WaitsForTheOtherClient(0x1000)))))
    t.start()
    try:
        worker = threading.Thread(target=lambda: other.run(obo, pm4.write_data(obo.addr + 0x800, [7])))
        worker.start()
        worker.join(30)
        ran = not worker.is_alive() and obo.u32[0x200] == 7
    finally:
        done.set()
        t.join()
        worker.join()
    assert ran, "the other client's ioctls waited for the hostile client's argument code"
    assert result and result[0].size == 0x1000  # and the hostile call went through when it returned
    quiet(kmd)


def _every_integer_field(c: Client, bo) -> list[tuple[Request, object]]:
    """(request, a function of v giving its arguments with one integer field set to v) for every
    integer field of every ioctl, the chunks' fields included."""
    ib = CsChunkIb(8, bo.handle)
    mk = [
        (Request.GEM_CREATE, lambda v: GemCreateArgs(v)),
        (Request.GEM_CREATE, lambda v: GemCreateArgs(0x1000, v)),
        (Request.GEM_CREATE, lambda v: GemCreateArgs(0x1000, 0, v)),
        (Request.GEM_CREATE, lambda v: GemCreateArgs(0x1000, 0, uapi.Domain.GTT, v)),
        (Request.GEM_CLOSE, lambda v: GemCloseArgs(v)),
        (Request.GEM_MMAP, lambda v: GemMmapArgs(v)),
        (Request.GEM_WAIT_IDLE, lambda v: GemWaitIdleArgs(v, 0)),
        (Request.GEM_WAIT_IDLE, lambda v: GemWaitIdleArgs(bo.handle, v)),
        (Request.CTX, lambda v: CtxArgs(v)),
        (Request.CTX, lambda v: CtxArgs(CtxOp.FREE, v)),
        (Request.CTX, lambda v: CtxArgs(CtxOp.ALLOC, 0, v)),
        (Request.CTX, lambda v: CtxArgs(CtxOp.ALLOC, 0, 0, v)),
        (Request.INFO, lambda v: InfoArgs(v)),
        (Request.WAIT_CS, lambda v: WaitCsArgs(v, 1, 0)),
        (Request.WAIT_CS, lambda v: WaitCsArgs(c.ctx, v, 0)),
        (Request.WAIT_CS, lambda v: WaitCsArgs(c.ctx, 1, v)),
        (Request.CS, lambda v: CsArgs(v, [ib])),
    ]
    for i, name in enumerate(("handle", "operation", "va_address", "offset_in_bo", "map_size", "flags")):
        good = [bo.handle, VaOp.MAP, 0x3000_0000, 0, 0x1000, 2]
        mk.append((Request.GEM_VA, lambda v, i=i, good=good: GemVaArgs(*good[:i], v, *good[i + 1:])))
    for name in ("size_dw", "handle", "offset", "flags", "ip_type", "ip_instance", "ring"):
        mk.append((Request.CS, lambda v, name=name: CsArgs(c.ctx, [CsChunkIb(**{**vars(ib), name: v})])))
    mk.append((Request.CS, lambda v: CsArgs(c.ctx, [CsChunkIb(8, gpu_addr=v)])))
    for i in range(2):
        mk.append((Request.CS, lambda v, i=i: CsArgs(c.ctx, [ib, CsChunkFence(*[bo.handle, 0][:i], v,
                                                                               *[bo.handle, 0][i + 1:])])))
    for i in range(5):
        good = [0, 0, c.ctx, 1, 0]
        mk.append((Request.CS, lambda v, i=i, good=good: CsArgs(c.ctx, [CsChunkDep(*good[:i], v, *good[i + 1:]), ib])))
    return mk


def test_an_integer_whose_int_raises_is_einval_in_every_field_of_every_ioctl():
    """An int subclass whose __int__ raises was a RuntimeError out of the KMD (its int() ran
    inside the handler); now it is one line, EINVAL (ENOENT for a BO handle), with no effect."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x1000)
    c.run(bo, pm4.pad(8))
    cases = _every_integer_field(c, bo)
    assert len(cases) == 38
    for req, make in cases:
        before = (len(kmd.live_bos()), kmd.stats["cs"], len(c.f.contexts), len(c.f.vm.maps))
        with pytest.raises(KmdError) as ei:
            c.io(req, make(Boom(1)))
        e = ei.value
        assert e.errno in (errno.EINVAL, errno.ENOENT), (req.name, e)
        assert e.message.startswith(req.name.split("_")[0]) and "\n" not in e.message, e.message
        assert "whose int() raised RuntimeError" in e.message, e.message
        assert (len(kmd.live_bos()), kmd.stats["cs"], len(c.f.contexts), len(c.f.vm.maps)) == before
    with pytest.raises(KmdError) as ei:
        c.io(Boom(Request.INFO), InfoArgs(uapi.InfoQuery.DEV_INFO))
    assert ei.value.message == "unknown ioctl request <Boom whose int() raised RuntimeError>"
    c.run(bo, pm4.pad(8))  # the driver is whole
    quiet(kmd)


class _BadRepr:
    def __repr__(self):
        raise RuntimeError("repr")


class _Lines:
    def __repr__(self):
        return "first\nsecond"


class _Huge:
    def __repr__(self):
        return "x" * 1_000_000


class _Sneaky(str):
    """A str whose methods are client code: split() raises, len() lies."""

    def split(self, *a, **k):
        raise RuntimeError("split")

    def __len__(self):
        return 0


class _SneakyRepr:
    def __repr__(self):
        return _Sneaky("sneaky\n" + "s" * 100)


class _Width:
    def __init__(self, n: int):
        self.n = n

    def __repr__(self):
        return "w" * self.n


@pytest.mark.parametrize("value, shown", [
    (_BadRepr(), "<_BadRepr whose repr raised RuntimeError>"),
    (_Lines(), "first second"),
    (_Huge(), "x" * 77 + "..."),
    (_Width(80), "w" * 80),  # as long as a value is shown whole
    (_Width(81), "w" * 77 + "..."),
    (_SneakyRepr(), "sneaky " + "s" * 70 + "..."),  # a str subclass's split() and len() are not called
    (np.zeros((2, 2)), "array([[0., 0.], [0., 0.]])"),
])
def test_a_value_of_the_wrong_kind_is_shown_on_one_short_line(value, shown):
    """The message names the bad value by its repr: a repr that raised was a RuntimeError out of
    the KMD, one with a newline broke the one-line error, a megabyte one made a megabyte
    message. Traced, the call prints the same."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    seen = []
    kmd.trace_hooks.append(lambda rec: seen.append(str(rec)))
    with pytest.raises(KmdError) as ei:
        c.io(Request.GEM_CREATE, GemCreateArgs(value))
    assert ei.value.message == f"GEM_CREATE: size must be an int, not {shown}"
    with pytest.raises(KmdError) as ei:
        c.io(value, None)
    assert ei.value.message == f"unknown ioctl request {shown}"
    with pytest.raises(KmdError) as ei:
        c.io(Request.CS, CsArgs(c.ctx, [value]))
    assert ei.value.message == f"CS: chunk 0 is a {type(value).__name__}, not a CsChunkIb, CsChunkFence or CsChunkDep"
    with pytest.raises(KmdError):
        c.io(Request.GEM_MMAP, value)  # arguments of the wrong class altogether
    assert len(seen) == 4 and all("\n" not in s and len(s) < 400 for s in seen), seen


def test_an_argument_field_whose_read_raises_is_einval_naming_the_field():
    """A subclass of an argument class whose field is a property that raises: the copy-in
    reads it once and the ioctl refuses it in one line naming the field and the exception,
    with no effect (a None in its place would read as "no value given")."""
    kmd = kmd_model.bind(RefModel())
    c = Client()

    class RaisingHandle(GemCloseArgs):
        @property
        def handle(self):
            raise RuntimeError("handle")

        @handle.setter
        def handle(self, v):
            pass

    class RaisingSize(GemCreateArgs):
        @property
        def size(self):
            raise LookupError("size")

        @size.setter
        def size(self, v):
            pass

    bos = len(kmd.live_bos())
    for req, args, message in ((Request.GEM_CLOSE, RaisingHandle(1),
                                "GEM_CLOSE: no BO with handle <a handle whose read raised RuntimeError>"),
                               (Request.GEM_CREATE, RaisingSize(4096),
                                "GEM_CREATE: size must be an int, not <a size whose read raised LookupError>")):
        with pytest.raises(KmdError) as ei:
            c.io(req, args)
        assert (ei.value.errno, ei.value.message) == (errno.EINVAL, message)
    assert len(kmd.live_bos()) == bos


def test_an_integer_too_wide_for_any_field_is_named_by_its_width():
    """10**5000 as a handle or a context id: the message's repr of it raised ValueError (Python
    converts at most 4,300 digits) out of the KMD, and a traced CS chunk naming it did too;
    as a size it made a 4,200-character message. Now it is named by its width."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    seen = []
    kmd.trace_hooks.append(lambda rec: seen.append(str(rec)))
    huge = 10**5000
    for req, args, message in [
        (Request.GEM_MMAP, GemMmapArgs(huge), "GEM_MMAP: no BO with handle <an int of 16610 bits>"),
        (Request.CTX, CtxArgs(CtxOp.FREE, huge), "CTX FREE: no context <an int of 16610 bits> on this file"),
        (Request.GEM_CREATE, GemCreateArgs(-huge), "GEM_CREATE: size must be > 0, not <a negative int of 16610 bits>"),
        (Request.CS, CsArgs(c.ctx, [CsChunkIb(8, huge)]), "CS: chunk 0: no BO with handle <an int of 16610 bits>"),
        (Request.CS, CsArgs(c.ctx, [CsChunkIb(8, 1, "x", ip_type=huge)]),
         "CS: chunk 0: ip_type must fit in 64 bits, not <an int of 16610 bits>"),
        (huge, None, "unknown ioctl request <an int of 16610 bits>"),
    ]:
        with pytest.raises(KmdError) as ei:
            c.io(req, args)
        assert ei.value.message == message
    assert len(seen) == 6 and all(len(s) < 300 for s in seen), seen
    widest = (1 << 128) - 1  # as wide as any value is shown in full (39 digits)
    for v, shown, hexed in ((widest, str(widest), f"{widest:#x}"), (widest + 1, *["<an int of 129 bits>"] * 2)):
        with pytest.raises(KmdError) as ei:
            c.io(Request.GEM_MMAP, GemMmapArgs(v))
        assert ei.value.message == f"GEM_MMAP: no BO with handle {shown}"
        with pytest.raises(KmdError) as ei:
            c.io(Request.CS, CsArgs(c.ctx, [CsChunkIb(8, 1, "x", ip_type=v)]))
        assert ei.value.message == f"CS: chunk 0: ip_type must fit in 64 bits, not {hexed}"


@pytest.mark.parametrize("base", [list, tuple])
def test_a_chunk_list_is_copied_from_its_own_storage(base):
    """A list (or tuple) subclass whose __iter__ never ends (or yields other chunks than it
    holds): the kernel copies the sequence's elements, not what its __iter__ says."""
    kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x1000)
    bo.u32[:8] = pm4.pad(8)

    class Endless(base):
        def __iter__(self):
            while True:
                yield CsChunkIb(8, bo.handle, 0x800)

    seq = c.io(Request.CS, CsArgs(c.ctx, Endless([CsChunkIb(8, bo.handle)]))).seq
    assert c.wait(seq)


class _NameRaises(type):
    """A metaclass whose classes' `__name__` is client code, and raises: `type(v).__name__`
    runs it."""

    @property
    def __name__(cls):
        raise RuntimeError("__name__")


class _Nameless(metaclass=_NameRaises):
    def __repr__(self):
        return "nameless"


class _NamelessBadRepr(metaclass=_NameRaises):
    def __repr__(self):
        raise RuntimeError("repr")


class _NamelessError(Exception, metaclass=_NameRaises):
    pass


class _BoomNameless(int):
    """An int whose int() raises an exception whose class name raises too."""

    def __int__(self) -> int:
        raise _NamelessError()

    __index__ = __int__


class _Spy(str):
    """A class name that is a str subclass: formatting it into a message is client code."""

    under_lock = 0
    kmd = None

    def __format__(self, spec):
        if _Spy.kmd is not None and _Spy.kmd.lock.owned():
            _Spy.under_lock += 1
        return str.__format__(str(self), spec)


class _SpyName(type):
    @property
    def __name__(cls):
        return _Spy("Spy")


class _Spied(metaclass=_SpyName):
    def __repr__(self):
        return "spied"


# a class whose name itself is a str subclass (type() and a __name__ assignment keep one)
_Renamed = type(_Spy("Renamed"), (), {"__repr__": lambda self: "renamed"})


class _HashRaises(type):
    """A metaclass whose classes' hash and == raise: a set or dict lookup of the type runs them."""

    def __hash__(cls):
        raise RuntimeError("__hash__")

    def __eq__(cls, other):
        raise RuntimeError("__eq__")


class _HashBoom(int, metaclass=_HashRaises):
    pass


def test_a_values_class_name_is_read_without_client_code():
    """A value's class whose `__name__` is a metaclass's property: the copy-in's
    `type(v).__name__` ran it, so one that raises came out of the KMD as the client's
    RuntimeError (from every field, the arguments, the request, a chunk, the chunk list, an
    exception raised by an int()); one that answers a str subclass had its `__format__` run
    under the driver's lock (a CS's 'chunk 0 is a ...'), where a client blocking in it
    stopped every other client, and so did a class whose name itself is one. An int subclass whose metaclass's hash raises was looked up
    in a set of the uAPI's enums, and raised too. Now the name the class was made with is
    read (type's own descriptor), as a plain str, and each is one line."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    _Spy.kmd, _Spy.under_lock = kmd, 0
    for req, args, err, message in [
        (Request.GEM_CREATE, GemCreateArgs(_Nameless()), errno.EINVAL, "GEM_CREATE: size must be an int, not nameless"),
        (Request.GEM_CREATE, GemCreateArgs(_NamelessBadRepr()), errno.EINVAL,
         "GEM_CREATE: size must be an int, not <_NamelessBadRepr whose repr raised RuntimeError>"),
        (Request.GEM_CREATE, _Nameless(), errno.EINVAL, "GEM_CREATE: arguments must be a GemCreateArgs, not _Nameless"),
        (_Nameless(), None, errno.EINVAL, "unknown ioctl request nameless"),
        (Request.CS, CsArgs(c.ctx, [_Nameless()]), errno.EINVAL,
         "CS: chunk 0 is a _Nameless, not a CsChunkIb, CsChunkFence or CsChunkDep"),
        (Request.CS, CsArgs(c.ctx, _Nameless()), errno.EINVAL, "CS: chunks must be a list, not _Nameless"),
        (Request.GEM_MMAP, GemMmapArgs(_BoomNameless(1)), errno.ENOENT,
         "GEM_MMAP: no BO with handle <_BoomNameless whose int() raised _NamelessError>"),
        (Request.CS, CsArgs(c.ctx, [_Spied()]), errno.EINVAL,
         "CS: chunk 0 is a _Spied, not a CsChunkIb, CsChunkFence or CsChunkDep"),
        (Request.CS, CsArgs(c.ctx, _Spied()), errno.EINVAL, "CS: chunks must be a list, not _Spied"),
        (Request.CS, CsArgs(c.ctx, [_Renamed()]), errno.EINVAL,
         "CS: chunk 0 is a Renamed, not a CsChunkIb, CsChunkFence or CsChunkDep"),
    ]:
        with pytest.raises(KmdError) as ei:
            c.io(req, args)
        assert (ei.value.errno, ei.value.message) == (err, message)
        assert type(ei.value.message) is str
    assert _Spy.under_lock == 0
    # an int subclass is an int, whatever its metaclass's hash does
    out = c.io(Request.GEM_CREATE, GemCreateArgs(_HashBoom(0x2000)))
    assert out.size == 0x2000
    assert c.io(_HashBoom(Request.INFO), InfoArgs(uapi.InfoQuery.DEV_INFO)).va_start > 0
    quiet(kmd)
