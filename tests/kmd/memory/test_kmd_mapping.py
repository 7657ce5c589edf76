"""CPU mappings (GEM_MMAP) while they are valid: numpy arithmetic, comparisons and
out= arguments on them compute on the device's bytes (not on something vacuous that
compares equal to anything); copies are plain arrays; and revocation, twice or on a
backend whose memory is not a file. test_security_mappings.py has the attacks on stale ones."""

from __future__ import annotations

import errno
import os
import tempfile

import numpy as np
import pytest

import kmd_model
from kmd_model.mm import mapping
from kmd_model.mm.mapping import CpuMapping, Mapping, map_bo
from kmd_model.uapi import Domain, GemCloseArgs, GemCreateArgs, GemMmapArgs, KmdError, MappingRevoked, Request
from testbench.refmodel import RefModel

from ..test_kmd_ioctl import Client


def test_arithmetic_and_comparisons_see_the_device_bytes():
    dev = RefModel()
    kmd_model.bind(dev)
    c = Client()
    bo = c.bo(0x1000)
    u = bo.u32
    assert isinstance(u, CpuMapping)
    u[:4] = [1, 2, 3, 4]
    eq = u[:4] == 3
    assert type(eq) is np.ndarray and eq.tolist() == [False, False, True, False]
    assert (u[:4] + 1).tolist() == [2, 3, 4, 5] and int(u[:4].sum()) == 10
    assert not (u[:4] == 9).any() and (u[:4] != 9).all()
    obo = c.bo(0x1000)
    np.add(u[:4], 10, out=obo.u32[:4])  # out= a mapping: writes the device's memory
    pa = c.phys(obo)
    assert dev.mem[pa:pa + 16].view("<u4").tolist() == [11, 12, 13, 14]
    plain = np.zeros(4, np.uint32)
    assert np.multiply(u[:4], 2, out=plain) is plain  # numpy's contract: the result is the out array
    assert plain.tolist() == [2, 4, 6, 8]
    np.add(u[:4], u[:4], out=(u[4:8],))  # a tuple out=, itself a mapping
    assert u[4:8].tolist() == [2, 4, 6, 8]
    assert np.asarray(u[:2]).tolist() == [1, 2] and np.asarray(u[:2], dtype=np.uint16).dtype == np.uint16
    assert np.asarray(u[:2], dtype=np.uint16).tolist() == [1, 2]


def test_copies_are_plain_arrays():
    kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x1000)
    bo.u32[:3] = [7, 8, 9]
    cp = bo.u32[:3].copy()
    assert type(cp) is np.ndarray and cp.flags.c_contiguous and cp.tolist() == [7, 8, 9]
    cp[0] = 1
    assert bo.u32[0] == 7
    f = bo.u32[:4].reshape(2, 2).copy(order="F")
    assert f.flags.f_contiguous and f.tolist() == [[7, 8], [9, 0]]
    # numpy's other copying methods keep the subclass (a CpuMapping that owns its data):
    # those copies are the client's memory too, and outlive the BO's GEM_CLOSE
    owned = [bo.u32[:3].astype(np.uint64), bo.u32[:4].reshape(2, 2).flatten(), bo.u32[:3].repeat(2)]
    assert all(isinstance(a, CpuMapping) and a.base is None for a in owned)
    c.io(Request.GEM_CLOSE, GemCloseArgs(bo.handle))
    with pytest.raises(MappingRevoked):
        bo.u32[0]
    assert [a.tolist() for a in owned] == [[7, 8, 9], [7, 8, 9, 0], [7, 7, 8, 8, 9, 9]]


def test_revoke_keeps_the_first_reason_and_repr_says_so():
    kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x1000)
    kmd = kmd_model.bound()
    arr = kmd.map_bo(c.f.handles[bo.handle])
    m = c.f.handles[bo.handle].mappings[0]  # the BO's one OS mapping: every GEM_MMAP's array is over it
    arr[:4] = 0x5E
    assert repr(arr).startswith("CpuMapping([")
    m.revoke("first")
    m.revoke("second")
    with pytest.raises(MappingRevoked, match="^first$"):
        arr[0]
    assert repr(arr) == str(arr) == "CpuMapping(<revoked>)"
    # numpy turns an ndarray subclass into a plain array without asking it (no __array__
    # call), so np.asarray does not raise: it sees the private pages the revocation put
    # there, not the BO's bytes
    assert not np.asarray(arr).any()
    assert dev_bytes(kmd, c.f.handles[bo.handle].gpu_addr, 4) == [0x5E] * 4


def dev_bytes(kmd, addr: int, n: int) -> list[int]:
    return kmd.dev.mem[addr:addr + n].tolist()


def test_mapping_without_a_memory_file():
    """A backend whose memory is a plain array (no file to map again): the mapping is a view
    of it, revoked at the Python level."""
    mem = np.zeros(0x10000, np.uint8)
    m = map_bo(mem, None, 0x1000, 0x1000)
    assert m.size is None
    m.array[:4] = [1, 2, 3, 4]
    assert mem[0x1000:0x1004].tolist() == [1, 2, 3, 4]
    m.revoke("gone")
    with pytest.raises(MappingRevoked, match="^gone$"):
        m.array[:4] = 0
    assert mem[0x1000:0x1004].tolist() == [1, 2, 3, 4]  # the memory itself is the device's still


def test_a_revocation_the_kernel_refuses_raises_its_errno(monkeypatch):
    """Revoking maps anonymous pages over the mapping (mmap with MAP_FIXED); should the kernel
    refuse, the OSError carries the kernel's errno (read through ctypes' use_errno), not 0.
    Here the mapping is a view one byte into the pages: MAP_FIXED at an address that is not
    page aligned is EINVAL. (libc's mmap is looked up again here, as at import: the lookup
    is what asks ctypes to keep errno.)"""
    assert mapping._mmap is not None  # Linux: libc's mmap
    monkeypatch.setattr(mapping, "_mmap", mapping._libc_mmap()[0])
    with tempfile.TemporaryFile() as f:
        f.truncate(0x2000)
        m = map_bo(np.zeros(1, np.uint8), (f.fileno(), 0), 0x1000, 0x1000)
        assert m.size == 0x1000
        with pytest.raises(OSError, match="revoking a BO mapping failed") as ei:
            Mapping(m.array[1:], m.size).revoke("gone")
        assert ei.value.errno == errno.EINVAL


def test_an_os_mapping_takes_no_descriptor_and_is_unmapped_with_its_last_array():
    """libc's mmap, not Python's (which kept a duplicate of the descriptor per mapping): no
    descriptor each, and the pages are unmapped once no array or view over them is left,
    revoked or not (a view kept alive keeps them mapped)."""
    import gc

    def maps() -> int:
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)
    with tempfile.TemporaryFile() as f:
        f.truncate(0x100000)
        gc.collect()  # (earlier tests' devices and their descriptors go now, not during the count)
        fds, before = len(os.listdir("/proc/self/fd")), maps()
        ms = [map_bo(np.zeros(1, np.uint8), (f.fileno(), 0), 0x1000 * (2 * i), 0x1000) for i in range(100)]
        assert len(os.listdir("/proc/self/fd")) <= fds and maps() >= before + 90
        kept = ms[3].array[8:16]
        ms[5].revoke("gone")
        del ms
        gc.collect()
        assert maps() <= before + 10  # (ms[3]'s pages stay: its view is alive; other mappings come and go)
        kept[0] = 9
        assert os.pread(f.fileno(), 1, 0x6000 + 8) == bytes([9])


def test_a_sub_mapping_falls_with_its_mapping_and_alone():
    """The UMD hands each buffer of a slab a sub-mapping (umd.Buffer's CPU view): revoking it
    (Buffer.free) leaves the rest of the BO's mapping usable, and revoking the BO's mapping
    (GEM_CLOSE) revokes every sub-mapping of it too, with the BO's reason, however deep."""
    mem = np.zeros(0x10000, np.uint8)
    m = map_bo(mem, None, 0x1000, 0x1000)
    a, revoke_a = mapping.sub_mapping(m.array, 0, 0x40)
    b, _ = mapping.sub_mapping(m.array, 0x40, 0x80)
    bb, _ = mapping.sub_mapping(b, 0x10, 0x20)  # a view's own sub-mapping
    a[:2] = [1, 2]
    bb[0] = 9
    assert mem[0x1000:0x1002].tolist() == [1, 2] and mem[0x1050] == 9
    revoke_a("freed")
    with pytest.raises(MappingRevoked, match="^freed$"):
        a[0] = 7
    b[0] = 3  # its neighbours are untouched
    assert m.array[0x40] == 3 and mem[0x1000] == 1
    m.revoke("the BO is closed")
    for view in (b, bb, a):
        with pytest.raises(MappingRevoked, match="^(the BO is closed|freed)$"):
            view[0] = 5
    with pytest.raises(MappingRevoked, match="^the BO is closed$"):
        bb[0]
    assert mem[0x1040] == 3 and mem[0x1050] == 9


def test_ndarray_attributes_see_the_bytes_until_revoked():
    """`.flat`, `.T`, `.real`, `.data` ... reach the bytes without an item access: while the
    mapping is valid they are numpy's own (reading and writing the device's memory); after
    revocation each raises MappingRevoked, reading and writing."""
    mem = np.zeros(0x10000, np.uint8)
    m = map_bo(mem, None, 0x1000, 0x1000)
    u = m.array.view("<u4")
    u[:4] = [1, 2, 3, 4]
    assert list(u[:4].flat) == [1, 2, 3, 4] and u[:4].T.tolist() == [1, 2, 3, 4]
    assert u[:4].real.tolist() == [1, 2, 3, 4] and bytes(u[:1].data) == b"\x01\0\0\0"
    u[:4].flat = 7  # the setter too writes the device's bytes
    assert mem[0x1000:0x1010].view("<u4").tolist() == [7] * 4
    m.revoke("gone")
    for name in ("flat", "T", "real", "data", "ctypes"):
        with pytest.raises(MappingRevoked, match="^gone$"):
            getattr(u, name)
    with pytest.raises(MappingRevoked, match="^gone$"):
        u.flat = 0
    assert mem[0x1000:0x1010].view("<u4").tolist() == [7] * 4


def test_an_os_mapping_the_kernel_refuses_is_the_calls_error_with_the_kernels_errno():
    """A backend whose memory file the OS will not map writable (opened read-only here: mmap
    of a MAP_SHARED, PROT_WRITE mapping is EACCES): GEM_MMAP fails with the kernel's errno and
    its reason, not ENOMEM (what the KMD answers when the OS gave no errno), and map_bo's
    OSError carries that errno (read through ctypes' use_errno), not only its text."""
    with tempfile.NamedTemporaryFile() as f:
        f.truncate(0x10000)
        ro = os.open(f.name, os.O_RDONLY)
        try:
            with pytest.raises(OSError) as ei:
                map_bo(np.zeros(1, np.uint8), (ro, 0), 0x1000, 0x1000)
            assert (ei.value.errno, ei.value.strerror) == (errno.EACCES, os.strerror(errno.EACCES))

            class ReadOnlyMemory(RefModel):
                def mem_file(self):
                    return ro, 0
            kmd_model.bind(ReadOnlyMemory())
            c = Client()
            h = c.io(Request.GEM_CREATE, GemCreateArgs(0x1000, 0, Domain.GTT, 0)).handle
            with pytest.raises(KmdError) as ki:
                c.io(Request.GEM_MMAP, GemMmapArgs(h))
            assert (ki.value.errno, ki.value.message) == (
                errno.EACCES, f"GEM_MMAP: BO fd{c.f.fd}:{h}: the OS refused a CPU mapping (Permission denied)")
        finally:
            os.close(ro)
