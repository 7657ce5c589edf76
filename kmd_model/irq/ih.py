"""The interrupt handler: walks the IH ring and dispatches its entries (amdgpu_ih.c).

The hardware appends 8-dword entries (spec/ih.py) and writes IH_WPTR to a write-back
dword; the pointers count bytes, as amdgpu's do (32 per entry). The handler reads
entries from its rptr up to that wptr, hands each to the
source's handler (EOP -> fence processing, CP_ERROR and VM_FAULT -> error handling), then writes
IH_RPTR so the hardware may reuse the space and INT_STATUS.IH_PENDING (the irq line)
drops. Entries that arrive while the handler runs are picked up before it returns.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from spec import ih as ih_spec

from .. import regs
from ..log import get_logger

if TYPE_CHECKING:
    from ..core.kmd import Kmd

log = get_logger("ih")

MASK32 = 0xFFFF_FFFF
_SOURCE = ih_spec.BY_NAME["SOURCE_ID"]
_CLIENT = ih_spec.BY_NAME["CLIENT_ID"]


class IhRing:
    def __init__(self, kmd: "Kmd", gpu_addr: int, log2_entries: int, wptr_wb_index: int):
        self.kmd = kmd
        self.gpu_addr = gpu_addr
        self.log2_entries = log2_entries
        self.size_dw = ih_spec.ENTRY_DWORDS << log2_entries
        self.size_bytes = 4 * self.size_dw
        self.mask = self.size_bytes - 1  # rptr and wptr count bytes
        self.ring32 = kmd.mem32[gpu_addr // 4: gpu_addr // 4 + self.size_dw]
        self.wptr_wb_index = wptr_wb_index
        self.rptr = 0  # bytes, free running
        self.entries = 0
        # the write-back's value when the handler last took IH_WPTR from the register
        # instead (take_from_register): until the write-back moves off it, it is stale
        self.wb_stale: int | None = None
        self.by_source: dict[str, int] = {}
        self.handlers = {
            ih_spec.Source.EOP: kmd.on_eop,
            ih_spec.Source.CP_ERROR: kmd.on_cp_error_entry,
            ih_spec.Source.VM_FAULT: kmd.on_vm_fault_entry,
            ih_spec.Source.SDMA_TRAP: kmd.on_sdma_trap,
            ih_spec.Source.SDMA_ERROR: kmd.on_sdma_error_entry,
            ih_spec.Source.SDMA_POLL_TIMEOUT: kmd.on_sdma_poll_timeout,
        }

    def init_hw(self) -> None:
        """Program IH_*; the hardware's IH_WPTR is 0 (after reset), so is our rptr."""
        m = self.kmd.mmio
        m.write(regs.IH_CNTL, 0)
        # as vega10_ih_enable_ring: the base >> 8, the size as log2 dwords
        m.write64(regs.IH_BASE_LO, regs.IH_BASE_HI, self.gpu_addr >> 8)
        m.write_fields(regs.IH_SIZE, LOG2_DWORDS=self.log2_entries + (ih_spec.ENTRY_DWORDS.bit_length() - 1))
        m.write64(regs.IH_WPTR_ADDR_LO, regs.IH_WPTR_ADDR_HI, self.kmd.wb_addr(self.wptr_wb_index))
        # IH_RPTR is a plain register: SOFT_RESET leaves it alone, so put it back to 0
        # with the hardware's IH_WPTR, or IH_PENDING would stay high.
        self.kmd.wb32[self.wptr_wb_index] = 0
        self.rptr = 0
        self.wb_stale = None
        m.write(regs.IH_RPTR, 0)
        m.write_fields(regs.IH_CNTL, ENABLE=1, WPTR_WB=1)

    def get_wptr(self) -> int:
        """The write-back's wptr; our rptr while the write-back still shows the value it had
        when the handler last read IH_WPTR itself (the hardware's write-back of that IH_WPTR
        has not landed: the write-backs of one IH ring land in order, each a later wptr)."""
        wb = int(self.kmd.wb32[self.wptr_wb_index])
        if self.wb_stale is not None:
            if wb == self.wb_stale:
                return self.rptr
            self.wb_stale = None
        return wb

    def take_from_register(self) -> int:
        """The irq line is high but the write-back shows no new entry: the line rises when
        IH_WPTR moves, a few cycles before the wptr write-back lands (docs/hardware.md, "The
        IH ring"). Read IH_WPTR itself, as amdgpu's get_wptr does when the write-back cannot
        be trusted, and handle what it shows; return how many entries. One MMIO read, where
        reading INT_STATUS for the event, clearing it and being called again took three
        accesses and a second interrupt."""
        wb = int(self.kmd.wb32[self.wptr_wb_index])
        hw = self.kmd.mmio.read(regs.IH_WPTR)
        if hw == self.rptr:
            return 0
        if wb == hw:
            return self.process()
        self.wb_stale = wb
        return self.process(hw)

    def process(self, hw_wptr: int | None = None) -> int:
        """Handle every entry between our rptr and the hardware's wptr, and those that come in
        meanwhile, up to twice the ring's entries; return how many. The bound gives the caller
        back: a job raising interrupts for ever (with the checker off, a CHAIN loop around a
        RELEASE_MEM) kept the handler here, and the job timer that would reset it never ran
        (198,670 entries in 5 s, the WAIT_CS in it past its own timeout). The line stays high
        while entries remain: the next interrupt takes them. `hw_wptr`: IH_WPTR as read from
        the register, to take instead of the write-back first."""
        n = 0
        budget = 2 * (self.size_bytes // ih_spec.ENTRY_BYTES)
        wptr = self.get_wptr() if hw_wptr is None else hw_wptr
        while self.rptr != wptr and n < budget:
            pending = (wptr - self.rptr) & MASK32
            if pending > self.size_bytes or pending % ih_spec.ENTRY_BYTES:
                # a corrupt write-back: start again from the hardware's own IH_WPTR (and put
                # the copy in memory right), and say so to the hardware below, or IH_PENDING
                # (and the line) would stay high. What lay in between is lost; the fences it
                # signalled are in fence memory anyway.
                hw = self.kmd.mmio.read(regs.IH_WPTR)
                log.error("IH wptr write-back %#x is not a whole number of entries ahead of rptr %#x: "
                          "resync at IH_WPTR %#x", wptr, self.rptr, hw)
                self.kmd.wb32[self.wptr_wb_index] = hw
                self.rptr = hw
            else:
                while self.rptr != wptr:
                    i = (self.rptr & self.mask) >> 2
                    entry = self.ring32[i:i + ih_spec.ENTRY_DWORDS].tolist()
                    self.rptr = (self.rptr + ih_spec.ENTRY_BYTES) & MASK32
                    self._dispatch(entry)
                    n += 1
            self.kmd.mmio.write(regs.IH_RPTR, self.rptr)
            wptr = self.get_wptr()  # anything that came in meanwhile
        self.entries += n
        return n

    def _dispatch(self, entry: list[int]) -> None:
        src = _SOURCE.get(entry)
        source = ih_spec.source_of(_CLIENT.get(entry), src)
        if source is None:
            log.warning("IH entry with unknown client %#x source %d: %s", _CLIENT.get(entry), src,
                        [f"{d:#x}" for d in entry])
            return
        self.by_source[source.name] = self.by_source.get(source.name, 0) + 1
        if log.isEnabledFor(logging.INFO):
            f = ih_spec.decode(entry)
            ts = f["TIMESTAMP_LO"] | f["TIMESTAMP_HI"] << 32
            log.info("IH entry client %#x source %d (%s) ring %d @%d data %s", f["CLIENT_ID"], src, source.name,
                     f["RING_ID"], ts, " ".join(f"{f[k]:#x}" for k in ih_spec.DATA_FIELDS))
        fields = ih_spec.decode(entry)
        if self.kmd.observers:
            self.kmd.notify("ih_entry", source=source.name, entry=fields, raw=entry)
        self.handlers[source](fields)
