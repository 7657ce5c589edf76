"""The UMD used wrongly, as a hostile or careless app does: a view kept past free(), an
`__index__` read twice or raising, a `__repr__` that raises, spans lines or answers a str
subclass, a Buffer's size or a Queue's `closed` rewritten by the app. (The KMD's side, the
ioctl copy-in, is tests/security/client_code/test_security_hostile_program.py.)
"""

from __future__ import annotations

import re

import pytest

import kmd_model
from testbench.refmodel import RefModel

from tests.umd.handles import named as _named

from .test_security_hostile_program import _BadRepr, _Lines, _SneakyRepr


@pytest.mark.parametrize("pools", [True, False])
def test_a_view_kept_past_free_cannot_write_the_buffer_that_gets_its_memory_next(pools):
    """An app keeps `buf.u32` (or `buf.map()`) and frees the buffer: the next buffer of that
    size got the same memory (the slab's entry, the cached BO), and the stale view wrote it.
    Now each buffer's view is a mapping of its own, revoked at free(): every use raises
    a ValueError in one line naming the free, and the new buffer keeps what it holds."""
    import umd

    kmd_model.bind(RefModel())
    with umd.open(pools=pools) as gpu:
        a = gpu.alloc(64)
        words, raw = a.u32, a.map()
        half = words[8:]  # a view of the view
        a.free()
        a.free()  # a second free is a no-op
        b = gpu.alloc(64)
        if pools:
            assert b.gpu_addr == a.gpu_addr  # the same memory, or the test proves nothing
        q = gpu.queue()
        q.write(b, 0, list(range(1, 17)))
        q.finish()
        for stale, op in ((words, lambda v: v.__setitem__(0, 0xBAD)), (raw, lambda v: v.fill(0xFF)),
                          (half, lambda v: v.__setitem__(0, 0xBAD)), (words, lambda v: v.tolist()),
                          (raw, lambda v: v.tobytes()), (words, lambda v: v.put(0, 1)),
                          (words, lambda v: v.flat.__setitem__(0, 1))):
            with pytest.raises(ValueError) as ei:  # (the UMD's words: kmd_model's MappingRevoked before)
                op(stale)
            assert str(ei.value) == (f"a view of {_named(a)} (Buffer.map, Buffer.u32) used after the buffer was freed "
                                     "(Buffer.free): its memory may be another buffer's now: copy what you need "
                                     "(view.copy()) before freeing it")
        assert b.u32.tolist() == list(range(1, 17))
        with pytest.raises(ValueError, match=r"^map: <umd.Buffer .*> was freed \(Buffer.free\)$"):
            a.map()


class _Index:
    """Not an int, but an integer by __index__: answers each of `values` in turn."""

    def __init__(self, *values: int):
        self.values, self.reads = values, 0

    def __index__(self) -> int:
        self.reads += 1
        return self.values[(self.reads - 1) % len(self.values)]


class _SlyInt(int):
    """An int subclass whose every conversion and arithmetic answers `bad`: the UMD checks
    the int's own value (operator.index: an exact int, no method of this class runs) and must
    use that value, never the object, whose __index__, __int__ and operators say otherwise."""

    bad = 0

    def _bad(self, *_a):
        type(self).reads += 1
        return type(self).bad

    reads = 0
    __index__ = __int__ = __and__ = __rand__ = __or__ = __ror__ = __rshift__ = __lshift__ = _bad
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __mod__ = __floordiv__ = _bad


class _IndexBoom:
    def __index__(self) -> int:
        raise RuntimeError("boom")


# (call, argument name, good value, a bad value, the call made with v as that argument)
_UMD_CALLS = [
    ("alloc", "size", 64, -8, lambda g, q, c, b, v: g.alloc(v)),
    ("alloc", "alignment", 64, 3, lambda g, q, c, b, v: g.alloc(64, alignment=v)),
    ("write", "offset", 8, -8, lambda g, q, c, b, v: q.write(b, v, [1])),
    ("write", "data[0]", 0x1234, 1 << 40, lambda g, q, c, b, v: q.write(b, 0x100, [v])),
    ("write", "data", 0x1234, 1 << 40, lambda g, q, c, b, v: q.write(b, 0x104, v)),
    ("emit_raw", "dwords[0]", 0x8000_0000, 1 << 40, lambda g, q, c, b, v: q.emit_raw([v])),
    ("wait_mem", "offset", 0, -8, lambda g, q, c, b, v: q.wait_mem(b, v, 0, compare="always")),
    ("wait_mem", "ref", 0, 1 << 40, lambda g, q, c, b, v: q.wait_mem(b, 0, v, compare="always")),
    ("wait_mem", "mask", 0xFFFF_FFFF, 1 << 40, lambda g, q, c, b, v: q.wait_mem(b, 0, 0, mask=v, compare="always")),
    ("wait_mem", "poll_interval", 16, 1 << 40, lambda g, q, c, b, v: q.wait_mem(b, 0, 0, poll_interval=v)),
    ("wait_mem", "poll_interval", 16, 1 << 40, lambda g, q, c, b, v: c.wait_mem(b, 0, 0, poll_interval=v)),
    ("fill", "value", 0x55, 1 << 40, lambda g, q, c, b, v: q.fill(b, 0x200, 8, v)),
    ("fill", "size", 8, -8, lambda g, q, c, b, v: q.fill(b, 0x200, v, 0x55)),
    ("copy", "size", 8, -8, lambda g, q, c, b, v: q.copy(b, 0x300, b, 0x100, v)),
    ("download", "size", 8, -8, lambda g, q, c, b, v: q.download(b, 0x100, v)),
    ("finish", "timeout", 1_000_000, -1, lambda g, q, c, b, v: q.finish(v)),
    ("queue", "flush_threshold", 4, -1, lambda g, q, c, b, v: g.queue(flush_threshold=v)),
    ("queue", "flush_dwords", 64, -1, lambda g, q, c, b, v: g.queue(flush_dwords=v)),
    ("queue", "ib_size_dw", 64, -8, lambda g, q, c, b, v: g.queue(ib_size_dw=v)),
    ("queue", "max_inflight", 2, -1, lambda g, q, c, b, v: g.queue(max_inflight=v)),
]


def test_every_umd_integer_argument_is_read_once():
    """An app's integer whose __index__ answers a good value and then a bad one: the UMD checked
    the first answer and then handed the object itself on (to the packet builders, to the
    queue's settings), which read it again: a wait_mem or fill failed with the builder's
    error, a write's or emit_raw's second answer reached the command buffer and the next
    flush raised OverflowError, a queue's flush_dwords compared the object at every write.
    Now each argument is read once and the value checked is the value used."""
    import umd

    kmd_model.bind(RefModel())
    with umd.open() as gpu:
        q, copy = gpu.queue(), gpu.queue(engine="copy")
        b = gpu.alloc(0x1000)
        for call, name, good, bad, make in _UMD_CALLS:
            v = _Index(good, bad)
            out = make(gpu, q, copy, b, v)
            assert v.reads == 1, (call, name, v.reads)
            if call == "queue":
                out.write(b, 0x400, [1, 2])
                out.finish()
                out.close()
        q.finish()
        copy.finish()
        assert b.u32[0x40:0x42].tolist() == [0x1234, 0x1234]  # the writes' data: the first answers
        assert b.u32[0x80:0x82].tolist() == [0x55, 0x55]  # the fill's value
    # an int subclass whose __index__ (and __int__, and its operators) answer another value
    # each time: passes every check with its int value, and that value is the one used
    with umd.open() as gpu:
        q, copy = gpu.queue(), gpu.queue(engine="copy")
        b = gpu.alloc(0x1000)
        for call, name, good, bad, make in _UMD_CALLS:
            sly = type("Sly", (_SlyInt,), {"bad": bad, "reads": 0})
            out = make(gpu, q, copy, b, sly(good))
            assert sly.reads == 0, (call, name, sly.reads)  # nothing of the app's class ran
            if call == "queue":
                out.write(b, 0x400, [1, 2])
                out.finish()
                out.close()
        q.finish()
        copy.finish()
        assert b.u32[0x40:0x42].tolist() == [0x1234, 0x1234]
        assert b.u32[0x80:0x82].tolist() == [0x55, 0x55]


def test_an_app_integer_whose_index_raises_is_the_calls_one_line_type_error():
    """An __index__ that raises was that exception out of the UMD's call, from wherever the UMD
    first converted it; now it is the call's TypeError naming the argument, and nothing is
    recorded."""
    import umd

    kmd_model.bind(RefModel())
    with umd.open() as gpu:
        q, copy = gpu.queue(), gpu.queue(engine="copy")
        b = gpu.alloc(0x1000)
        for call, name, _good, _bad, make in _UMD_CALLS:
            with pytest.raises(TypeError) as ei:
                make(gpu, q, copy, b, _IndexBoom())
            # (alloc's alignment states its own rule, "must be 0 or a power of two up to ...")
            rule = "must be an int" if (call, name) != ("alloc", "alignment") else "must be 0 or a power of two up to "
            assert str(ei.value).startswith(f"{call}: {name} {rule}") and "\n" not in str(ei.value), (call, name)
            assert str(ei.value).endswith(", not a _IndexBoom whose __index__ raised RuntimeError"), (call, name)
        assert q.flush() is None and copy.flush() is None  # nothing was recorded
        with pytest.raises(TypeError) as ei:
            umd.open(_IndexBoom())
        assert str(ei.value) == ("open: api_version must be an int: 1, 2 or 3 (leave it out for the newest, 3), not a "
                                 "_IndexBoom whose __index__ raised RuntimeError")


@pytest.mark.parametrize("value, shown", [(_BadRepr(), "<_BadRepr whose repr raised RuntimeError>"),
                                          (_Lines(), "first second"), (10**5000, "<an int of 16610 bits>"),
                                          (_SneakyRepr(), "sneaky " + "s" * 70 + "...")],
                         ids=["repr_raises", "repr_lines", "huge_int", "repr_a_str_subclass"])
def test_the_umds_messages_show_an_apps_value_on_one_short_line(value, shown):
    """The UMD named a bad argument by its repr: a repr that raised escaped as that exception,
    a repr with a newline broke the one-line message, and 10**5000 raised ValueError (Python
    converts at most 4,300 digits) or, as a size, printed 4,000 digits in an OutOfMemory."""
    import umd

    kmd_model.bind(RefModel())
    with umd.open() as gpu:
        q = gpu.queue()
        b = gpu.alloc(64)
        calls = [(lambda: gpu.alloc(64, value), f"alloc: domain must be 'gtt' or 'vram', not {shown}"),
                 (lambda: gpu.alloc(64, zero=value), f"alloc: zero must be True or False, not {shown}"),
                 (lambda: q.write(value, 0, [1]), f"write: buf must be a umd Buffer, not {shown}"),
                 (lambda: q.wait_mem(b, 0, 0, compare=value),
                  f"wait_mem: compare must be one of always, <, <=, ==, !=, >=, >, not {shown}"),
                 (lambda: q.wait_event(value), f"wait_event: event must be a umd Event, not {shown}"),
                 (lambda: gpu.queue(engine=value), f"queue: engine must be one of 'gfx', 'copy', not {shown}"),
                 (lambda: umd.open(value), f"open: api_version {shown} is not a version this UMD serves: 1, 2 or 3 "
                                           "(leave it out for the newest, 3)" if isinstance(value, int) else
                  f"open: api_version must be an int: 1, 2 or 3 (leave it out for the newest, 3), not {shown}")]
        if isinstance(value, int):
            calls += [(lambda: gpu.alloc(value), f"alloc: size must fit in 64 bits, not {shown}"),
                      (lambda: q.write(b, value, [1]), f"write: offset must fit in 64 bits, not {shown}")]
        else:
            calls += [(lambda: gpu.alloc(value), f"alloc: size must be an int, not {shown}")]
        for call, message in calls:
            with pytest.raises((TypeError, ValueError)) as ei:
                call()
            assert str(ei.value) == message


def test_what_a_buffer_is_cannot_be_rewritten_by_the_app():
    """`buf.size = 1 << 20` made every later call trust the new size: a write 4 KiB past the
    64-byte buffer was recorded and ran, over the app's next buffer; `buf.freed = False`
    gave a freed buffer its mapping back, over the memory of the buffer allocated there
    since. A buffer's address, size, device and state are read-only."""
    import umd

    kmd_model.bind(RefModel())
    with umd.open() as gpu:
        q = gpu.queue()
        a, b = gpu.alloc(64), gpu.alloc(64)
        for name, value in (("size", 1 << 20), ("gpu_addr", b.gpu_addr), ("freed", True), ("device", None),
                            ("handle", 1), ("bo_offset", 0), ("domain", 4), ("backing", None), ("slab", None)):
            # (named as a Queue's and a Device's are: it was Python's "property 'size' of 'Buffer'
            # object has no setter")
            said = ("Buffer.freed is the UMD's own record (free() sets it): read-only" if name == "freed" else
                    f"Buffer.{name} is fixed when the buffer is made")
            with pytest.raises(AttributeError, match="^" + re.escape(said)):
                setattr(a, name, value)
        off = b.gpu_addr - a.gpu_addr  # b's first dword, by a's offsets
        with pytest.raises(ValueError, match=rf"^write: \[{off:#x}, {off + 4:#x}\) is outside the 0x40-byte buffer$"):
            q.write(a, off, [0xBAD])
        assert a.freed is False  # (a bool, as documented: not merely falsy)
        a.free()
        assert a.freed is True
        with pytest.raises(AttributeError):
            a.freed = False
        with pytest.raises(ValueError, match="was freed"):
            a.map()
        q.finish()
        assert not b.u32.any()


def test_a_closed_queue_or_device_cannot_be_reopened_by_the_app():
    """`queue.closed = False` after close() took calls again: write() recorded into a queue
    whose context was freed, and flush() came back as the KMD's EINVAL for the context. The
    flag is read-only: the calls stay the queue's own one-line ValueError."""
    import umd

    kmd_model.bind(RefModel())
    gpu = umd.open()
    q = gpu.queue()
    b = gpu.alloc(64)
    q.close()
    for obj in (q, gpu):
        with pytest.raises(AttributeError, match=rf"^{type(obj).__name__}.closed is the UMD's own record \(close\(\) "
                                                 r"sets it\): read-only$"):
            obj.closed = False
        if obj is gpu:
            gpu.close()
            with pytest.raises(AttributeError):
                gpu.closed = False
    with pytest.raises(ValueError, match="^write: the queue is closed$"):
        q.write(b, 0, [1])
    with pytest.raises(ValueError, match="^alloc: the device is closed$"):
        gpu.alloc(64)
