"""The command-stream checker: the security boundary until there is an MMU.

With no page tables, any address a packet names is a physical address, so before a
job reaches the ring the KMD walks every IB it will run (following INDIRECT_BUFFERs
and CHAINs, as the CP would, up to CAPS.IB_LEVELS deep) and requires the IB itself
and every address a packet can reach to lie inside one BO of the submitting File:

    WRITE_DATA      [addr, addr + 4 * len(data))        written
    WAIT_REG_MEM    [addr, addr + 4)                     read
    RELEASE_MEM     [addr, addr + 4 or 8) (per DATA_SEL) written
    INDIRECT_BUFFER [base, base + 4 * IB_SIZE)           fetched, then checked itself
    DMA_DATA        [src, src + n) read, [dst, dst + n) written

Anything else the hardware would refuse (malformed packets, unsupported field values,
IB_SIZE 0, too deep nesting, a DMA_DATA without a DMA engine) is refused here too,
with the disassembler's description, so errors surface as EINVAL at submission
rather than as a GPU reset later. Like the radeon/r600 checkers of old, this checks
the IBs in memory at submission time; a job that rewrites its own later IBs on the
GPU can still reach the hardware with something the checker never saw, which is why
the KMD also recovers from CP errors (kmd_model/kmd.py).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from spec import packets, pm4

from .cp_error import LEVEL_TEXT
from .uapi import KmdError

if TYPE_CHECKING:
    from .bo import Bo, BoManager
    from .ctx import Context

MAX_STREAM_DW = 1 << 20  # total dwords walked per submission (a CHAIN loop ends here)

_WD, _IB, _WRM, _RM, _DMA = (packets.by_name[n] for n in
                             ("WRITE_DATA", "INDIRECT_BUFFER", "WAIT_REG_MEM", "RELEASE_MEM", "DMA_DATA"))
_RM_BYTES = {"NONE": 0, "DATA_32": 4, "DATA_64": 8, "TIMESTAMP": 8}
_RM_BYTES = {_RM.field("DATA_SEL").values[k]: v for k, v in _RM_BYTES.items()}
_DMA_SRC_DATA = _DMA.field("SRC_SEL").values["DATA"]

# Per packet, the closed enum fields: (name, legal values, supported values).
_ENUMS = {
    p.name: [(f.name, frozenset(f.names), frozenset(e.value for e in f.enum if e.supported), f)
             for f in p.fields if f.enum and not f.open_enum]
    for p in packets.PACKETS
}


@dataclass
class CheckedStream:
    """What a successful check found: the BOs the job touches, and its size."""

    bos: set
    dwords: int
    packets: int


class CsChecker:
    def __init__(self, bo_mgr: "BoManager", mem32: np.ndarray, ib_levels: int, has_dma: bool,
                 max_dwords: int = MAX_STREAM_DW):
        self.bo_mgr = bo_mgr
        self.mem32 = mem32
        self.ib_levels = ib_levels
        self.has_dma = has_dma
        self.max_dwords = max_dwords

    def owned_bo(self, ctx: "Context", addr: int, size: int) -> "Bo | None":
        """The submitting File's live BO holding all of [addr, addr + size), if any."""
        bo = self.bo_mgr.lookup(addr)
        if bo is None or bo.owner is not ctx.file or bo.closed or not bo.contains(addr, size):
            return None
        return bo

    def check(self, ctx: "Context", ibs: list[tuple[int, int]]) -> CheckedStream:
        """Check the job's IBs [(gpu_addr, size_dw)]; raise KmdError on the first problem."""
        st = CheckedStream(set(), 0, 0)
        for addr, size_dw in ibs:
            bo = self.owned_bo(ctx, addr, 4 * size_dw)
            if bo is None:
                raise KmdError(errno.EFAULT, f"CS: IB at {addr:#x}+{4 * size_dw:#x} is outside "
                               f"every BO of context {ctx.id}")
            st.bos.add(bo)
            self._walk(ctx, addr, size_dw, 1, st)
        return st

    def _walk(self, ctx: "Context", addr: int, size_dw: int, level: int, st: CheckedStream) -> None:
        while True:  # one iteration per IB of a CHAIN
            st.dwords += size_dw
            if st.dwords > self.max_dwords:
                raise KmdError(errno.EINVAL, f"CS: command stream of context {ctx.id} runs past "
                               f"{self.max_dwords} dwords (a CHAIN loop?)")
            words = self.mem32[addr // 4: addr // 4 + size_dw]
            chained = None
            for item in pm4.decode_stream(words):
                where = _Where(level, addr, item.offset)
                if not item.ok:
                    raise KmdError(errno.EINVAL, f"CS: malformed packet at {where}: {pm4.describe(item)}")
                if item.name == "TYPE2_FILLER":
                    continue
                st.packets += 1
                self._check_fields(item, where)
                name = item.name
                f = item.fields
                if name == "WRITE_DATA":
                    a = f["ADDR_LO"] << 2 | f["ADDR_HI"] << 32
                    st.bos.add(self._range(ctx, item, where, "writes", a, 4 * len(item.data)))
                elif name == "WAIT_REG_MEM":
                    a = f["ADDR_LO"] << 2 | f["ADDR_HI"] << 32
                    st.bos.add(self._range(ctx, item, where, "polls", a, 4))
                elif name == "RELEASE_MEM":
                    n = _RM_BYTES[f["DATA_SEL"]]
                    a = f["ADDR_LO"] << 2 | f["ADDR_HI"] << 32
                    if n == 8 and a & 7:
                        raise KmdError(errno.EINVAL, f"CS: RELEASE_MEM at {where}: a 64-bit write "
                                       f"needs a qword-aligned address, not {a:#x}")
                    if n:
                        st.bos.add(self._range(ctx, item, where, "writes", a, n))
                elif name == "DMA_DATA":
                    if not self.has_dma:
                        raise KmdError(errno.EINVAL, f"CS: DMA_DATA at {where}: this device has no "
                                       "DMA engine (CAPS.DMA = 0)")
                    n = f["BYTE_COUNT"]
                    dst = f["DST_ADDR_LO"] | f["DST_ADDR_HI"] << 32
                    st.bos.add(self._range(ctx, item, where, "writes", dst, n))
                    if f["SRC_SEL"] != _DMA_SRC_DATA:
                        src = f["SRC_ADDR_LO"] | f["SRC_ADDR_HI"] << 32
                        st.bos.add(self._range(ctx, item, where, "reads", src, n))
                elif name == "INDIRECT_BUFFER":
                    base = f["IB_BASE_LO"] << 2 | f["IB_BASE_HI"] << 32
                    n = f["IB_SIZE"]
                    if n == 0:
                        raise KmdError(errno.EINVAL, f"CS: INDIRECT_BUFFER at {where}: IB_SIZE is 0")
                    if not f["VALID"]:
                        raise KmdError(errno.EINVAL, f"CS: INDIRECT_BUFFER at {where}: VALID is 0")
                    st.bos.add(self._range(ctx, item, where, "runs", base, 4 * n))
                    if f["CHAIN"]:
                        chained = (base, n)
                        break  # the CP does not come back to the rest of this IB
                    if level + 1 > self.ib_levels:
                        raise KmdError(errno.EINVAL, f"CS: INDIRECT_BUFFER at {where} nests deeper "
                                       f"than the device's {self.ib_levels} IB levels")
                    self._walk(ctx, base, n, level + 1, st)
            if chained is None:
                return
            addr, size_dw = chained

    def _range(self, ctx: "Context", item: pm4.Packet, where: "_Where", verb: str, addr: int, size: int) -> "Bo":
        bo = self.owned_bo(ctx, addr, max(size, 1))
        if bo is None:
            raise KmdError(errno.EFAULT, f"CS: {item.name} at {where} {verb} [{addr:#x}, "
                           f"{addr + size:#x}), outside every BO of context {ctx.id}")
        return bo

    @staticmethod
    def _check_fields(item: pm4.Packet, where: "_Where") -> None:
        for name, legal, supported, fdef in _ENUMS[item.name]:
            v = item.fields[name]
            if v not in supported:
                what = f"{name}={fdef.names[v]} is not supported" if v in legal else \
                    f"{name}={v} is not a defined value"
                raise KmdError(errno.EINVAL, f"CS: {item.name} at {where}: {what} by this device")


class _Where:
    """Where a packet is, "IB1+0x10 (0x201010)", formatted only when a message needs it
    (the checker sees every packet of every submission; most are fine)."""

    __slots__ = ("level", "ib", "offset")

    def __init__(self, level: int, ib: int, offset: int):
        self.level, self.ib, self.offset = level, ib, offset

    def __str__(self) -> str:
        return (f"{LEVEL_TEXT.get(self.level, f'IB{self.level}')}+{4 * self.offset:#x} "
                f"({self.ib + 4 * self.offset:#x})")


_WRM_FUNC = {0: lambda v, r: True, 1: lambda v, r: v < r, 2: lambda v, r: v <= r,
             3: lambda v, r: v == r, 4: lambda v, r: v != r, 5: lambda v, r: v >= r,
             6: lambda v, r: v > r}
_WRM_SYM = {0: "always", 1: "<", 2: "<=", 3: "==", 4: "!=", 5: ">=", 6: ">"}


def find_unsatisfied_wait(mem32: np.ndarray, ibs: list[tuple[int, int]], ib_levels: int,
                          max_dwords: int = MAX_STREAM_DW) -> str | None:
    """For a job that timed out: the first WAIT_REG_MEM in its IBs whose condition does not
    hold in memory now, described ("WAIT_REG_MEM at IB+0x10 (0x201010): *0x5000 = 0x0, waits
    for == 0x1"), or None. A diagnosis, not proof: the CP may be stuck elsewhere."""
    budget = [max_dwords]

    def walk(addr: int, size_dw: int, level: int) -> str | None:
        while True:
            budget[0] -= size_dw
            if budget[0] < 0 or addr < 0 or addr // 4 + size_dw > len(mem32):
                return None
            chained = None
            for item in pm4.decode_stream(mem32[addr // 4: addr // 4 + size_dw]):
                if not item.ok or item.name == "TYPE2_FILLER":
                    continue
                f = item.fields
                if item.name == "WAIT_REG_MEM":
                    a = f["ADDR_LO"] << 2 | f["ADDR_HI"] << 32
                    if a // 4 >= len(mem32):
                        continue
                    v = int(mem32[a // 4]) & f["MASK"]
                    fn = f["FUNCTION"]
                    if fn in _WRM_FUNC and not _WRM_FUNC[fn](v, f["REFERENCE"]):
                        lvl = LEVEL_TEXT.get(level, f"IB{level}")
                        return (f"WAIT_REG_MEM at {lvl}+{4 * item.offset:#x} ({addr + 4 * item.offset:#x}): "
                                f"*{a:#x} & {f['MASK']:#x} = {v:#x}, waits for {_WRM_SYM[fn]} {f['REFERENCE']:#x}")
                elif item.name == "INDIRECT_BUFFER" and f["IB_SIZE"]:
                    base = f["IB_BASE_LO"] << 2 | f["IB_BASE_HI"] << 32
                    if f["CHAIN"]:
                        chained = (base, f["IB_SIZE"])
                        break
                    if level < ib_levels:
                        hit = walk(base, f["IB_SIZE"], level + 1)
                        if hit:
                            return hit
            if chained is None:
                return None
            addr, size_dw = chained

    for addr, size_dw in ibs:
        hit = walk(addr, size_dw, 1)
        if hit:
            return hit
    return None
