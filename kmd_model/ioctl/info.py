"""INFO: what the driver and the device tell a client (amdgpu_info_ioctl)."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING, Any

from .. import uapi
from ..core.kmd import MAX_IB_DW
from ..mm.vm import PAGE
from ..uapi import Domain, InfoQuery, KmdError, Request
from .dispatch import _int, ioctl_def

if TYPE_CHECKING:
    from ..core.file import File
    from ..core.kmd import Kmd


@ioctl_def(Request.INFO)
def info(kmd: "Kmd", file: "File", a: uapi.InfoArgs) -> Any:
    q = _int("INFO", "query", a.query, 0, 0xFFFF_FFFF)  # drm_amdgpu_info.query: a u32
    i = kmd.info
    if q == InfoQuery.FW_VERSION:
        return uapi.FwVersionInfo(uapi.KMD_NAME, uapi.KMD_VERSION, i.version)
    if q == InfoQuery.DEV_INFO:
        from spec import packets
        return uapi.DevInfo(
            backend=kmd.dev.name, hw_version=i.version, bus_bytes=i.bus_bytes, addr_bits=i.addr_bits,
            ib_levels=i.ib_levels, has_dma=i.has_dma, has_ih=i.has_ih, dma_max_bytes=i.dma_max_bytes,
            ring_size_dw=kmd.ring.size_dw, sdma_rings=1 if kmd.sdma_sched is not None else 0,
            max_ib_chunks=kmd.params.max_ib_chunks, max_dep_chunks=kmd.params.max_dep_chunks,
            ib_align_dw=kmd.params.ib_align_dw, max_ib_dw=MAX_IB_DW, max_job_dw=kmd.max_job_dw,
            max_job_ibs=kmd.params.max_job_ibs,
            packets=tuple(p.name for p in packets.PACKETS),
            va_start=file.vm.va_start, va_end=file.vm.va_end, va_alignment=PAGE, vm_levels=file.vm.levels)
    if q == InfoQuery.MEMORY:
        def heap(d: Domain) -> uapi.HeapInfo:
            h = kmd.bo.heaps[d]
            return uapi.HeapInfo(h.size, h.used, h.largest_free)  # (not h.base: a physical address)
        return uapi.MemoryInfo(heap(Domain.VRAM), heap(Domain.GTT))
    if q == InfoQuery.VM_FAULT:
        kmd.service()  # a fault the interrupt has not been handled for yet
        return file.vm.fault or uapi.VmFaultInfo()
    if q == InfoQuery.COUNTERS:
        kmd.service()
        if not file.cap_perfmon:
            return _own_counters(kmd, file)
        c = kmd.counters()
        return uapi.Counters(c["hw"], c["packets"], kmd.kmd_stats())
    raise KmdError(errno.EINVAL, f"INFO: unknown query {q} (known: "
                   f"{', '.join(f'{x.name} ({x.value:#x})' for x in InfoQuery)})")


def _own_counters(kmd: "Kmd", file: "File") -> uapi.Counters:
    """COUNTERS for a file without CAP_PERFMON: the device's clock (amdgpu gives every client
    AMDGPU_INFO_TIMESTAMP) and what the file did itself (amdgpu's fdinfo, which only the file's
    owner reads). The performance counters and the driver's statistics count every client's
    work: the packets another client ran by kind, its DMA bytes, its ioctls, interrupts and
    fences, how many files and contexts are open. A system-wide perf event needs CAP_PERFMON
    (perf_event_paranoid) and amdgpu's statistics are debugfs, root's: a client reading them
    between two of its own calls counted another client's work as it ran."""
    ts = kmd.mmio.timestamp()
    return uapi.Counters({"timestamp": ts}, {}, {
        "ioctls": file.ioctls, "ioctl_errors": file.ioctl_errors, "contexts": len(file.contexts),
        "live_bos": len(file.handles), "hangs": file.hangs})
