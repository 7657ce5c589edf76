"""Which API call recorded the packet a GPU error names (GpuError.command), or why none is.

A CP error latches the packet's own address (CP_ERROR_ADDR), which the queue's labels map
to the call. A fault (a VM fault, a bus error) latches the faulting access's address
instead, and the packet's offset in its IB (CP_ERROR_OFFSET) but no IB base: the packet is
at that offset of one of the failed submission's IBs, and where several IBs have a packet
there (chained IBs, a copy queue's IB chunks) it is the one whose address lies within a
packet's transfer below the fault's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kmd_model.sched.fence import seq_passed
from kmd_model.uapi import HwErrorInfo
from spec import pm4, sdma

if TYPE_CHECKING:
    from ..memory import Buffer
    from ..queue import Queue

# the errors whose address (CP_ERROR_ADDR) is the faulting access's, not the packet's
_FAULTS = ("VM_FAULT", "BUS_SLVERR", "BUS_DECERR")


def find_command(q: Queue, info: HwErrorInfo, subs) -> tuple[str | None, str | None]:
    """The API call that recorded the packet the error names, or None and why none is
    named (for a fault, whose address is the access's, not the packet's), from the
    submissions `subs` (the failed one first when known: its IBs may be another's since)."""
    if info.code not in _FAULTS:  # CP_ERROR_ADDR is the packet's own address
        label = _label_at(info.addr, subs)
        return (None if label is None else str(label)), None
    # a fault: the packet is at IB+offset of one of the failed submission's IBs
    if info.level == "RING":
        return None, "the fault is in the kernel's ring packets, which no API call recorded"
    if info.level != "IB1":
        return None, (f"the fault is in an {info.level}, which an INDIRECT_BUFFER of the app's own "
                      "(emit_raw) ran: the UMD recorded none of its packets")
    sub = next((s for s in subs if seq_passed(info.seq, s.seq)), None)
    if sub is None:
        return None, "the UMD no longer holds the failed submission's commands"
    at = [(ib, ib.gpu_addr + info.offset) for ib in sub.ibs if ib.gpu_addr + info.offset in sub.labels]
    if len(at) > 1:  # (several IBs: the CP latches no IB base) the packet whose address is near the fault's
        at = [(ib, a) for ib, a in at if _packet_reaches(q, ib, info.offset, info.addr)] or at
    named = sorted({str(sub.labels[a]) for _, a in at})
    if len(named) == 1:
        return named[0], None
    if not named:
        return None, f"no packet the UMD recorded starts at IB+{info.offset:#x}"
    return None, (f"the CP latches no IB base, and IB+{info.offset:#x} of the submission's IBs is "
                  f"{' or '.join(named)}")


def _label_at(addr: int, subs):
    return next((sub.labels[addr] for sub in subs if addr in sub.labels), None)


def hint_of(info: HwErrorInfo, subs) -> str | None:
    """What the call that recorded the packet a (non-fault) error names adds (Label.hint)."""
    label = None if info.code in _FAULTS else _label_at(info.addr, subs)
    return getattr(label, "hint", None)


def _packet_reaches(q: Queue, ib: Buffer, offset: int, addr: int) -> bool:
    """Does the packet at `offset` of `ib` (the UMD's own copy) name an address at most one
    packet's transfer below `addr` (the fault's)?"""
    codec = sdma if q.copy_engine else pm4
    item = codec.decode(ib.u32[offset // 4: offset // 4 + q.cmdbuf.max_packet_dw].tolist())
    if not item.ok:
        return False
    reach = max(q.dma_chunk, 4 * q.max_write_dw)
    return any(0 <= addr - v < reach for name, v in item.args.items()
               if name in ("addr", "src", "dst") and isinstance(v, int))
