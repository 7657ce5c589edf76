"""An app's memory: Device.alloc (a Buffer at a GPU virtual address, from the pools of
umd/winsys/pool.py), Device.memory (the heaps, the VA range, the pools) and the Buffer,
the CPU's view of one and its free. The Device and the dispatch machinery are in
umd/runtime.py.
"""

from __future__ import annotations

import errno
import operator
from dataclasses import dataclass
from enum import IntFlag
from typing import Any, Callable

import numpy as np

from kmd_model.ioctl.copyin import shown
from kmd_model.mm.mapping import sub_mapping
from kmd_model.uapi import Domain as KmdDomain, InfoQuery, KmdError, MappingRevoked

from .args import _flag, _index
from .errors import OPEN_NEW_DEVICE, DeviceLost, OutOfMemory
from .runtime import Device, _Handle, api_call, fixed, record
from .winsys.ioctl import DRIVER_CLOSED
from .winsys.pool import Backing, PoolStats, _mib
from .winsys.va import VaStats

DOMAINS = {"gtt": KmdDomain.GTT, "vram": KmdDomain.VRAM}


class Domain(IntFlag):
    """Where a Buffer's memory is (Buffer.domain): the uAPI's Domain values (kmd_model.uapi's,
    which it equals, as an int), printed as alloc() names them: "gtt", "vram" (Python 3.11
    printed the uAPI's IntFlag as its number, 2 or 4), and equal to those words too."""

    GTT = int(KmdDomain.GTT)
    VRAM = int(KmdDomain.VRAM)

    def __str__(self) -> str:
        return self.name.lower()

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __eq__(self, other: object) -> bool:
        # what it prints equals it too, in any case as alloc() takes it: `buf.domain == "vram"`
        # was False for a VRAM buffer (silently: the other branch of the app's if ran)
        if isinstance(other, str):
            return str(self) == other.lower()
        return int.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = IntFlag.__hash__  # (the uAPI value's: a key as before)


def device_alloc(self: Device, size: int, domain: str | int = "gtt", *, alignment: int = 0,
                 zero: bool = True, _owner: Any = None) -> "Buffer":
    """A buffer of `size` bytes in "gtt" or "vram" at a GPU virtual address (`gpu_addr`),
    zero-filled unless zero=False. `alignment` aligns `gpu_addr`: 0 (the default: a page,
    4 KiB, for a buffer of its own; a small one, 16 KiB or less, carved from a slab, is
    aligned to its size rounded up to a power of two, at least 256 bytes: alloc(64) is at a
    multiple of 256, not of a page) or a power of two up to the largest the device's VA range
    holds an address at (`gpu.memory().va` is the range; 512 MiB with the KMD's default VM);
    any other value is a one-line ValueError (TypeError when it is not an int) naming that
    bound. Small buffers are carved from slabs and freed ones are reused (umd/winsys/pool.py)
    unless the device was opened with pools=False (then every buffer is a page-aligned BO)."""
    size = _index("alloc", "size", size)
    if size <= 0:
        raise ValueError(f"alloc: size must be > 0, not {size}")
    alignment = _alignment(self, alignment)
    if isinstance(domain, str):
        dom = DOMAINS.get(domain.lower())
    else:  # an integer, numpy's too (as every other integer argument); not a bool or a float
        try:
            n = operator.index(domain) if not isinstance(domain, bool) else None
        except Exception:  # (not an integer, or the app's __index__ raised)
            n = None
        dom = KmdDomain(n) if n in DOMAINS.values() else None
    if dom is None:
        raise ValueError(f"alloc: domain must be 'gtt' or 'vram', not {shown(domain)}")
    zero = _flag("alloc", "zero", zero)
    try:
        backing, offset, slab, fresh = self.mm.alloc(size, KmdDomain(dom), alignment)
        lacking = None
    except OutOfMemory as e:
        if _owner is not None or str(e).startswith("alloc:"):
            raise
        lacking = e  # the VA allocator's words, which name no call: the app's alloc is raised below
    except KmdError as e:
        # EIO: the device is lost (a failed reset), and the kernel makes no memory on it any
        # more; a queue's own allocation names its call itself (Queue)
        if e.errno != errno.EIO or _owner is not None:
            raise
        raise DeviceLost(f"alloc: {e.message}") from e
    if lacking is not None:  # (outside the handler: not "During handling of the above exception")
        raise OutOfMemory(f"alloc: {_larger_than_the_heap(self, size, KmdDomain(dom)) or lacking}")
    buf = Buffer(self, backing, offset, size, dom, slab)
    buf.owner = _owner
    if zero and not fresh:
        buf.map()[:] = 0  # reused memory: what was there is the app's own, but alloc promises zeros
    self.buffers.add(buf)
    return buf


def _alignment(self: Device, v: Any) -> int:
    """alloc's alignment, or the one error every bad one gets (0 is the default: the page):
    what is accepted, named with its bound, and the value refused. An alignment beyond the VA
    range was the VA allocator's OutOfMemory, "address space exhausted", with the range free."""
    top = self.mm.va.max_alignment()
    rule = f"alloc: alignment must be 0 or a power of two up to {top:#x} (the GPU VA range's largest)"
    try:
        n = _index("alloc", "alignment", v)
    except TypeError as e:  # (what _index said it is: an __index__ that raised is named, not asked again)
        raise TypeError(f"{rule}, not {str(e).split(', not ', 1)[1]}") from None
    except ValueError as e:  # wider than 128 bits: shown as its width (v's __index__ is not asked again)
        raise ValueError(f"{rule}, not {str(e).split(', not ', 1)[1]}") from None
    if n < 0 or n & (n - 1) or n > top:
        raise ValueError(f"{rule}, not {n:#x}")
    return n


@dataclass(frozen=True)
class MemoryReport:
    """Device.memory(): the KMD's heaps (vram, gtt), the device's VA range (va: used,
    free ranges, largest free range) and the pools (hits, misses, slabs, waste)."""

    vram: Any
    gtt: Any
    va: VaStats
    pools: PoolStats

    def __str__(self) -> str:
        """What print(gpu.memory()) shows: the heaps and the VA range in MiB, in one line (it
        was the dataclasses' repr, every count in bytes, some 700 characters)."""
        heaps = "; ".join(f"{name} {_mib(h.total)}: {_mib(h.used)} used, the largest buffer that fits "
                          f"{_mib(h.largest_free)}"
                          for name, h in (("VRAM", self.vram), ("GTT", self.gtt)))
        va = self.va
        return (f"{heaps}; GPU VA {_mib(va.end - va.start)}: {_mib(va.used)} used by "
                f"{va.allocations} allocation{'s' * (va.allocations != 1)}, the largest free range "
                f"{_mib(va.largest_free)} (used counts the kernel's own buffers too; repr() has every field)")


def _larger_than_the_heap(self: Device, size: int, dom: KmdDomain) -> str | None:
    """Why an allocation the VA range had no room for could never be had, when it is larger
    than its whole heap: alloc(1 << 40) said "GPU virtual address space exhausted", as if
    freeing buffers would make room."""
    try:
        heap = getattr(self.ws.query(InfoQuery.MEMORY), dom.name.lower())
    except KmdError:
        return None
    if size <= heap.total:
        return None
    return (f"{size:#x} bytes is more than the whole of {dom.name} ({_mib(heap.total)}, {_mib(heap.total - heap.used)} "
            "of it free now: gpu.memory(); docs/tutorial.md, \"How much memory an app has\")")


def device_memory(self: Device) -> MemoryReport:
    """The memory this app can have: the kernel's heaps (`vram`, `gtt`: total, used with the
    kernel's own buffers counted, largest_free, in bytes), this Device's GPU virtual address
    range (`va`) and its buffer pools (`pools`). The kernel's CS shadow pool takes 16 MiB of
    the model's and the RTL's 32 MiB of GTT (docs/tutorial.md, "How much memory an app has")."""
    self.mm.take_back()
    m = self.ws.query(InfoQuery.MEMORY)
    return MemoryReport(m.vram, m.gtt, self.mm.va.stats(), self.mm.stats())


# ---------------------------------------------------------------------------- Buffer

class Buffer(_Handle):
    """Device memory: `gpu_addr` (a GPU virtual address), `size`, a CPU mapping (`map()`,
    `u32`). It lives in a BO of its own or in a slab's (`handle`, at `bo_offset`)."""

    _what = "device memory"
    _made_by = "buf = gpu.alloc(size)"
    _hint = " (a copy would free it twice): pass its bytes (Buffer.map().copy(), Queue.download())"
    # What the buffer is (where, how big, whose) is read-only to the app: the UMD's checks of
    # every call trust it, so `buf.size = 1 << 20` would let a write reach the next buffer, and
    # `buf.freed = False` a freed buffer's memory, now another buffer's.
    # (each says so by name, as a Queue's and a Device's do: it was Python's "property 'size'
    # of 'Buffer' object has no setter")
    device = fixed("Buffer", "device", doc="the Device that allocated it")
    backing = fixed("Buffer", "backing", doc="the BO it lives in (umd/winsys/pool.py's Backing: its own, a "
                                             "cached one, or a slab's)")
    handle = property(lambda self: self._backing.handle,
                      fixed("Buffer", "handle", doc="").fset,
                      doc="the GEM handle of the BO it lives in (read-only)")
    bo_offset = fixed("Buffer", "bo_offset", doc="its offset in that BO: 0 for a BO of its own, its entry's "
                                                 "in a slab's")
    gpu_addr = fixed("Buffer", "gpu_addr", ": the UMD picks it (alloc(alignment=...) aligns it)",
                     doc="its GPU virtual address, in the Device's VM: what packets name")
    size = fixed("Buffer", "size", ": alloc() makes a buffer of another size", doc="its size in bytes, as "
                                                                                  "alloc() was asked")
    domain = fixed("Buffer", "domain", ": alloc(size, domain) makes one in the other",
                   doc="where the kernel placed its memory, as alloc() names it: a Domain (umd.memory.Domain.GTT "
                       "or .VRAM, equal to the uAPI's values) that prints as, and equals, \"gtt\" or \"vram\" "
                       "(buf.domain == \"vram\")")
    slab = fixed("Buffer", "slab", doc="the slab it was carved from (a buffer of 16 KiB or less), or None")
    freed = record("Buffer", "freed", "free() sets it")

    def __init__(self, device: Device, backing: Backing, bo_offset: int, size: int, domain: KmdDomain, slab=None):
        self._device = device
        self._backing = backing
        self._bo_offset = bo_offset
        self._gpu_addr = backing.va + bo_offset
        self._size = size
        self._domain = Domain(int(domain))
        self._slab = slab
        self.owner = None  # the Queue whose own buffer it is (its page, IBs, staging); None: the app's
        self._view: np.ndarray | None = None
        self._revoke: Callable[[str], None] | None = None  # the CPU view's (sub_mapping), at free()
        self._freed = False
        self._freed_how = ""  # what freed it (Buffer.free, or its device's close), said at free()

    def map(self, *, _call: str = "map") -> np.ndarray:  # (`buf.map(100)` was taken as the caller's name)
        """The bytes as a numpy uint8 view of device memory (GEM_MMAP, once per BO). A view
        (or a slice of one) used after the buffer's free() raises ValueError naming the free;
        a copy (view.copy()) is the app's own."""
        if self.freed:
            raise ValueError(f"{_call}: <umd.Buffer {self._where()}> was freed ({self._freed_how})")
        if self.device.ws.lost():  # (GEM_MMAP's EBADF; a view made before is revoked: it was handed out dead)
            raise DeviceLost(f"{_call}: {DRIVER_CLOSED}: {OPEN_NEW_DEVICE}")
        if self._view is None:
            # a mapping of its own, revoked at free(): its bytes (a slab's entry, a cached BO)
            # go to the next buffer, which a view kept past free() must not write. The app's
            # view is a sub-mapping of the one free() revokes, so that a use raises what
            # _mapping_lost makes of it (a use of a revoked sub-mapping itself would be
            # kmd_model's MappingRevoked, which no UMD document names)
            own, self._revoke = sub_mapping(self.backing.map(self.device.ws), self.bo_offset,
                                            self.bo_offset + self.size)
            self._view, _ = sub_mapping(own, 0, self.size, self._mapping_lost)
        return self._view

    def _mapping_lost(self, why: str) -> Exception:
        """What a view of the buffer raises once its mapping is revoked under it: the driver
        closed the Device's file (its unload or reload), as every call of the Device then
        says; or the app freed the buffer (Buffer.free, Device.close), a ValueError as every
        call given a freed buffer raises. kmd_model's MappingRevoked was an internal class
        no UMD document names."""
        if self.device.ws.lost():
            return DeviceLost(f"a view of <umd.Buffer {self._where()}> (Buffer.map, Buffer.u32): {DRIVER_CLOSED}: {OPEN_NEW_DEVICE}")
        if self.freed:
            return ValueError(f"a view of <umd.Buffer {self._where()}> (Buffer.map, Buffer.u32) used after the buffer was freed "
                              f"({self._freed_how}): its memory may be another buffer's now: copy what you "
                              "need (view.copy()) before freeing it")
        return MappingRevoked(why)  # (no Buffer's BO is closed under it otherwise: free() revokes the view first)

    @property
    def u32(self) -> np.ndarray:
        """The buffer as little-endian dwords."""
        v = self.map(_call="u32")  # (its error names what the app called)
        return v[:len(v) & ~3].view("<u4")

    @u32.setter
    def u32(self, value: Any) -> None:
        # (`buf.u32 = [1, 2]` was Python's "property 'u32' of 'Buffer' object has no setter")
        raise AttributeError("Buffer.u32 is a view of the buffer's memory, not set itself: write through it "
                             "(buf.u32[0] = 1, buf.u32[:2] = [1, 2])")

    @api_call("Buffer.free")
    def free(self) -> None:
        """Release the buffer; the KMD keeps the memory until the GPU is done with it. A second
        free() does nothing (as a second close() of a queue), so that `with` may end a buffer the
        app freed itself."""
        if self.freed:
            return
        self._freed_how = self._freed_by()  # (now: a device closed later did not free it)
        if self._revoke is not None:
            self._revoke(f"<umd.Buffer {self._where()}> was freed ({self._freed_how}): its CPU mapping is gone")
        self.device.mm.free(self)
        self.device.buffers.discard(self)
        self._view = self._revoke = None
        self._freed = True

    def _freed_by(self) -> str:
        # (an app that closed its device finds its buffers gone too, by no free() of its own)
        return "its device was closed: Device.close" if self.device.closing else "Buffer.free"

    def __enter__(self) -> "Buffer":
        return self

    def __exit__(self, *exc) -> None:
        """`with gpu.alloc(n) as buf:` frees the buffer at the end, as free() does."""
        self.free()

    def _range(self, call: str, offset: int, nbytes: int) -> int:
        offset = _index(call, "offset", offset)
        if offset < 0 or offset & 3:
            raise ValueError(f"{call}: offset must be a non-negative multiple of 4, not {offset}")
        if offset + nbytes > self.size:
            raise ValueError(f"{call}: [{offset:#x}, {offset + nbytes:#x}) is outside the "
                             f"{self.size:#x}-byte buffer")
        if self.freed:  # (callers check it first, naming the argument: _own_buffer)
            raise ValueError(f"{call}: <umd.Buffer {self._where()}> was freed ({self._freed_how})")
        return self.gpu_addr + offset

    def __repr__(self) -> str:
        return f"<umd.Buffer {self._where()}{' freed' * self.freed}>"

    def _where(self) -> str:
        """What the messages about it name it by: its repr without its state ("<umd.Buffer GTT
        0x100000+0x40> was freed", not "<... freed> was freed")."""
        return f"{self.domain.name} {self.gpu_addr:#x}+{self.size:#x}"


# ---------------------------------------------------------------------------- a buffer argument

def _own_buffer(device: Device, call: str, name: str, buf: Any) -> "Buffer":
    """`buf` as a buffer argument of `device`'s calls: a Buffer of another device holds a VA
    of that device's VM, which here names whatever this device has at the same address."""
    if not isinstance(buf, Buffer):
        hint = ""
        if isinstance(buf, int) and not isinstance(buf, bool):  # (an address: a Buffer's own gpu_addr?)
            inside = next((b for b in device.buffers if b.owner is None and b.gpu_addr <= buf < b.gpu_addr + b.size),
                          None)
            if inside is not None:
                hint = (f" ({buf:#x}, an address in <umd.Buffer {inside._where()}>: give the Buffer itself and the "
                        f"offset in it, {buf - inside.gpu_addr:#x})")
        raise TypeError(f"{call}: {name} must be a umd Buffer, not {shown(buf)}{hint}")
    if buf.freed:  # (first: a buffer its closed device freed is no other device's; and copy's names which)
        raise ValueError(f"{call}: {name} <umd.Buffer {buf._where()}> was freed ({buf._freed_how})")
    if buf.device is not device:
        raise ValueError(f"{call}: {name} {buf!r} belongs to another device (its gpu_addr is an address "
                         "in that device's own address space)")
    return buf
