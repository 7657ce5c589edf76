"""copy_from_user for the ioctls: the handler works on the kernel's own copy of its arguments.

A C driver copies the argument structure in once and never reads the client's memory for it
again. Here the arguments are the client's Python objects, and reading one can run client
code: a property of a subclass of the argument class, an `int` subclass whose `__int__`
answers differently each time (the handle GEM_CLOSE looked up and the handle it removed
were two different ones) or raises, a `__repr__` that raises or spans lines. So every field
is read once, here: integers become plain `int`s, everything else becomes an `Opaque` with
its one-line description taken once; the handlers only ever see those.
"""

from __future__ import annotations

from dataclasses import fields
from enum import Enum
from typing import Any

import numpy as np

from .. import uapi
from ..uapi import CsChunkDep, CsChunkFence, CsChunkIb

SHOWN = 80  # characters of a bad value's description kept in a message
WIDEST = 128  # bits: an integer wider than this is shown by its width
CHUNKS = (CsChunkIb, CsChunkFence, CsChunkDep)
# the uAPI's own enums (VaOp.MAP, Domain.GTT ...): ints whose methods are ours, kept as they are
# so traces name them
ENUMS = frozenset(t for t in vars(uapi).values() if isinstance(t, type) and issubclass(t, Enum)
                  and issubclass(t, int) and t.__module__ == uapi.__name__)
# looked up by the type's identity: `type(v) in ENUMS` hashes the client's class, and its
# metaclass's __hash__ and __eq__ are client code
_ENUM_IDS = frozenset(id(t) for t in ENUMS)
_TYPE_NAME = type.__dict__["__name__"]  # the name a class was made with, read without its metaclass


def type_name(v: Any) -> str:
    """`type(v).__name__` without client code: that reads `__name__` through v's metaclass,
    whose property may raise, or answer a str subclass whose methods (`__format__`, run by
    every f-string message naming it) are client code again. A plain str."""
    return str.__str__(_TYPE_NAME.__get__(type(v)))


def is_a(v: Any, cls: type | tuple[type, ...]) -> bool:
    """isinstance(v, cls) from v's real type alone: isinstance also asks v for `__class__`,
    which a client's object may answer with its own code (a property that raises came out
    of the KMD as the client's exception; one that lies made a value pass for a uAPI type)."""
    return issubclass(type(v), cls)


class Opaque:
    """A value of the wrong kind, as a message shows it: its repr read once, on one line."""

    __slots__ = ("text", "kind")

    def __init__(self, v: Any, text: str | None = None):
        self.kind = type_name(v)
        self.text = shown(v) if text is None else text

    def __repr__(self) -> str:
        return self.text


def hexed(v: int) -> str:
    """`f"{v:#x}"` for a message; an int wider than any field (10**5000 as a handle) by its
    width, not as 4,000 digits."""
    n = int.bit_length(v)
    if n > WIDEST:
        return f"<{'a negative' if v < 0 else 'an'} int of {n} bits>"
    return f"{v:#x}"


def shown(v: Any) -> str:
    """`repr(v)` for a message: one line, at most SHOWN characters, never an exception."""
    if is_a(v, int) and int.bit_length(v) > WIDEST:  # (repr would raise past 4,300 digits)
        return hexed(v)
    try:
        text = str.__str__(repr(v))  # an exact str: a str subclass's split() and len() are client code too
    except Exception as e:  # the client's __repr__ is client code
        text = f"<{type_name(v)} whose repr raised {type_name(e)}>"
    text = " ".join(text.split())
    return text if len(text) <= SHOWN else text[:SHOWN - 3] + "..."


def kernel_int(v: Any) -> Any:
    """A plain `int` for an integer (a numpy one too), converted once; the value unchanged for
    a bool or None; an Opaque for anything else, or for an integer whose conversion fails."""
    if v is None or type(v) is bool:  # (bool cannot be subclassed)
        return v
    if is_a(v, (int, np.integer)):
        if type(v) is int or id(type(v)) in _ENUM_IDS:
            return v
        try:  # an int subclass's own __int__ runs: once, here. int() answers an exact int or
            return int(v)  # raises (an __int__ answering an int subclass is copied to an int)
        except Exception as e:
            return Opaque(v, f"<{type_name(v)} whose int() raised {type_name(e)}>")
    return Opaque(v)


class LongList(Opaque):
    """A chunk list longer than any CS may carry, not copied: its length, taken from the
    list's own storage, is all the CS needs to refuse it (a copy first cost a client's
    200,000 chunks a second, and its length is the client's choice)."""

    __slots__ = ("n",)

    def __init__(self, v: Any, n: int):
        super().__init__(v, f"<a {type_name(v)} of {n} chunks, not copied>")
        self.n = n


def copy_in(args: Any, cls: type, max_chunks: int | None = None) -> Any:
    """A `cls` holding each field of `args` (an instance of `cls` or of a subclass), each read
    once; a CsArgs's chunk list is copied element by element from the list's own storage (a
    subclass's __iter__ or __getitem__ is not called), or, longer than `max_chunks`, kept
    as a LongList of its length alone (a subclass's __len__ is not called either)."""
    out = {}
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls))
    for name in names:
        try:
            v = getattr(args, name)
        except Exception as e:  # a property that raises
            v = Opaque(None, f"<a {name} whose read raised {type_name(e)}>")
        out[name] = _chunks(v, max_chunks) if name == "chunks" else kernel_int(v)
    return cls(**out)


_FIELDS: dict[type, tuple[str, ...]] = {}


def _chunks(v: Any, most: int | None) -> Any:
    if is_a(v, list):
        n, items = list.__len__(v), list.__iter__(v)
    elif is_a(v, tuple):
        n, items = tuple.__len__(v), tuple.__iter__(v)
    else:
        return Opaque(v)
    if most is not None and n > most:
        return LongList(v, n)
    return [copy_in(ch, next(c for c in CHUNKS if is_a(ch, c))) if is_a(ch, CHUNKS) else Opaque(ch)
            for ch in items]
