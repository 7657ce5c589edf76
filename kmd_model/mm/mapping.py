"""CPU mappings of BOs (GEM_MMAP), and their revocation when the BO's handle is closed.

A kernel unmaps a buffer's pages from a process when the buffer goes away, so a pointer
kept past that faults instead of reaching whatever is allocated there next. Here:

- each GEM_MMAP is a mapping of its own of the device memory's backing file (`mmap` at the
  BO's offset), not a slice of one big array, so nothing reached through it (`.base`
  included) leads outside the BO;
- at GEM_CLOSE (or when the file closes) the KMD revokes every mapping of the BO: its pages
  are replaced by private anonymous memory (so any alias of them, however obtained, no
  longer reaches device memory: writes go nowhere, reads see zeros), and the numpy array
  handed out, and every view made from it, raises `MappingRevoked` on use.

Backends whose memory is not file-backed (`Device.mem_file()` is None) get views of `mem`,
revoked at the Python level only.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import weakref
from typing import Any, Callable

import numpy as np

from ..uapi import MappingRevoked

_MAP_FIXED = 0x10  # Linux


def _libc_mmap():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn, unmap = libc.mmap, libc.munmap
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return None, None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    # (munmap's restype is ctypes' default, c_int: its answer is not read)
    unmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return fn, unmap


_mmap, _munmap = _libc_mmap()
_MAP_FAILED = ctypes.c_void_p(-1).value


class _Token:
    """Shared by a mapping and every view made from it: `revoked` None while valid, else why
    not. A sub-mapping's token (`sub_mapping`) has the mapping's as `parent`: revoking either
    revokes it; its `lost` (or None) makes the exception a use raises when the parent's
    revocation is why (the BO's handle closed under the sub-mapping's owner)."""

    __slots__ = ("revoked", "parent", "lost")

    def __init__(self, parent: "_Token | None" = None,
                 lost: "Callable[[str], Exception] | None" = None) -> None:
        self.revoked: str | None = None
        self.parent = parent
        self.lost = lost

    def why(self) -> str | None:
        t: _Token | None = self
        while t is not None:
            if t.revoked is not None:
                return t.revoked
            t = t.parent
        return None


def _check(a: "CpuMapping") -> None:
    t = a._token
    why = t.why() if t is not None else None
    if why is not None:
        raise _error(t)


def _error(t: _Token) -> Exception:
    """What a use of a revoked mapping raises: MappingRevoked(why), or what the nearest
    sub-mapping's `lost` makes of a revocation above it."""
    lost = None
    while t.revoked is None:
        lost = lost or t.lost
        t = t.parent
    return MappingRevoked(t.revoked) if lost is None else lost(t.revoked)


class CpuMapping(np.ndarray):
    """A uint8 numpy array over one BO's bytes, as GEM_MMAP returns it. Views (slices,
    `.view("<u4")`) share its fate; copies do not. After GEM_CLOSE every use raises
    `MappingRevoked`."""

    _token: _Token | None = None

    def __array_finalize__(self, obj: Any) -> None:
        # a view shares the mapping's token; an array owning its data (a copy) is free of it
        self._token = getattr(obj, "_token", None) if self.base is not None else None

    def __getitem__(self, key):
        _check(self)
        return super().__getitem__(key)

    def __setitem__(self, key, value) -> None:
        _check(self)
        super().__setitem__(key, value)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        args = []
        for x in inputs:
            if isinstance(x, CpuMapping):
                _check(x)
                x = x.view(np.ndarray)
            args.append(x)
        out = kwargs.get("out")
        if out:
            for x in out:
                if isinstance(x, CpuMapping):
                    _check(x)
            kwargs["out"] = tuple(x.view(np.ndarray) if isinstance(x, CpuMapping) else x for x in out)
        return getattr(ufunc, method)(*args, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        _check(self)
        for x in (*args, *kwargs.values()):
            if isinstance(x, CpuMapping):
                _check(x)
        return super().__array_function__(func, types, args, kwargs)

    def __array__(self, dtype=None, copy=None):
        _check(self)
        a = self.view(np.ndarray)
        return a if dtype is None else a.astype(dtype, copy=False)

    def __repr__(self) -> str:
        t = self._token
        if t is not None and t.why() is not None:
            return "CpuMapping(<revoked>)"
        return super().__repr__()

    __str__ = __repr__



def _guarded(name: str):
    """ndarray method `name`, refused once the mapping is revoked."""
    base = getattr(np.ndarray, name)

    def method(self, *args, **kwargs):
        _check(self)
        return base(self, *args, **kwargs)
    method.__name__ = name
    return method


# every public ndarray method (fill, put, item, sort, astype ...): one that reads or writes the
# bytes, or makes something that does, must not reach them once revoked
_METHODS = {n for n in dir(np.ndarray) if not n.startswith("_") and callable(getattr(np.ndarray, n))
            and n not in ("copy",)}  # (copy: _copy below)
for _name in sorted(_METHODS | {"__iter__", "__int__", "__index__", "__bool__", "__len__", "__float__",
                                "__complex__", "__reduce__", "__reduce_ex__", "__copy__", "__deepcopy__",
                                "__setstate__", "__contains__", "__buffer__", "__dlpack__"}):
    if hasattr(np.ndarray, _name):
        setattr(CpuMapping, _name, _guarded(_name))


def _guarded_property(name: str) -> property:
    """ndarray attribute `name` (flat, data, ctypes ...), refused once the mapping is revoked."""
    prop = getattr(np.ndarray, name)

    def get(self):
        _check(self)
        return prop.__get__(self)

    def put(self, value):
        _check(self)
        prop.__set__(self, value)
    return property(get, put)


for _name in ("flat", "data", "ctypes", "real", "imag", "T", "mT"):
    if hasattr(np.ndarray, _name):
        setattr(CpuMapping, _name, _guarded_property(_name))


def _copy(self, order="C"):
    """A copy is the client's own memory: a plain ndarray, free of the mapping."""
    _check(self)
    return np.ndarray.view(self, np.ndarray).copy(order)


CpuMapping.copy = _copy


class Mapping:
    """One BO's OS mapping (if any: `size` bytes at `addr`) and the array over it GEM_MMAP hands
    out views of. Whether it is revoked, the token and the address are the kernel's own,
    kept here: the array is the client's to reach (every view's `.base`), and a token read
    from its attribute at GEM_CLOSE was whatever the client had put there (None skipped the
    revocation, OS mapping included, and the view reached the BO the next client got); the
    token itself is shared with every view, so its `revoked` only tells the Python-level
    checks why (a client that marked it before the close had the OS mapping left as it was,
    and cleared it after)."""

    def __init__(self, array: CpuMapping, size: int | None):
        self.array = array
        self.size = size
        self.token = array._token
        self.addr = np.ndarray.view(array, np.ndarray).ctypes.data
        self.revoked = False

    def view(self) -> CpuMapping:
        """A new view of the whole mapping, for a GEM_MMAP, with the kernel's token."""
        v = self.array.view(CpuMapping)
        v._token = self.token
        return v

    def revoke(self, why: str) -> None:
        if self.revoked:
            return
        self.revoked = True
        self.token.revoked = why
        if self.size is not None and _mmap is not None:
            r = _mmap(self.addr, self.size, mmap.PROT_READ | mmap.PROT_WRITE,
                      mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_FIXED, -1, 0)
            if r in (None, _MAP_FAILED):  # the kernel refused
                raise OSError(ctypes.get_errno(), "revoking a BO mapping failed")


def _os_mapping(fd: int, offset: int, size: int):
    """`size` bytes of file `fd` from `offset`, mapped shared, as a ctypes array; unmapped when
    the last reference to it (every array and view over it) is gone. libc's mmap, not Python's:
    an `mmap.mmap` keeps a duplicate of the descriptor for as long as it lives, so a client
    with one mapped BO per descriptor the process may open (20,000 here) had its next
    GEM_MMAP, and every other client's, refused with EMFILE."""
    if _mmap is None:  # pragma: no cover - not Linux: Python's, one descriptor each
        return mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=offset)
    addr = _mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, offset)
    if addr in (None, _MAP_FAILED):
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    buf = (ctypes.c_uint8 * size).from_address(addr)
    weakref.finalize(buf, _munmap, addr, size)
    return buf


def map_bo(mem: np.ndarray, mem_file: tuple[int, int] | None, offset: int, size: int) -> Mapping:
    """A mapping of bytes [offset, offset + size) of device memory, page aligned."""
    if mem_file is not None:
        fd, base = mem_file
        arr = np.frombuffer(_os_mapping(fd, base + offset, size), dtype=np.uint8).view(CpuMapping)
        os_size: int | None = size
    else:
        os_size = None
        arr = mem[offset:offset + size].view(CpuMapping)
    arr._token = _Token()
    return Mapping(arr, os_size)  # (before the client can reach the array)


def sub_mapping(array: CpuMapping, start: int, stop: int,
                lost: Callable[[str], Exception] | None = None) -> tuple[CpuMapping, Callable[[str], None]]:
    """Bytes [start, stop) of a CPU mapping (GEM_MMAP's array, or a view of it) as a mapping
    of their own, and the function that revokes it alone (`revoke(why)`): the UMD hands each
    buffer of a slab one, so a view an app keeps past `Buffer.free()` raises MappingRevoked
    instead of writing the buffer that gets the same bytes next. Revoking the whole mapping
    (GEM_CLOSE) revokes it too; a use then raises `lost(why)` when given (the UMD's DeviceLost
    for a file the driver closed under its Device), else MappingRevoked(why). (A slice of a
    CpuMapping is one: no view needed.)"""
    sub = array[start:stop]
    tok = _Token(sub._token, lost)
    sub._token = tok

    def revoke(why: str) -> None:
        if tok.revoked is None:
            tok.revoked = why
    return sub, revoke
