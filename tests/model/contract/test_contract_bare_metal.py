"""A minimal register-level driver, as an outside driver writer would write one from the
generated C headers (include/gpucosim_regs.h, include/gpucosim_packets.h: read here for
their numbers), docs/hardware.md and the packet tables of docs/packets.md: packets are
written by hand, dword by dword, each from its table (no builder, no KMD, no spec/ code).

tests/model/contract/contract_driver.py parses the docs' tables; this one takes every register
offset, field position and IH constant from the headers a C driver would #include, so a
header that disagreed with the device fails here. Each check is one bring-up: the CP ring
with its fence and EOP entry, the SDMA ring with its fence and trap, and one bad packet on
each engine with its error registers, IH entry and the documented recovery, and both
queue resets under load, with an SDMA doorbell error. The checks run on the reference model
here and, through tests/cosim/driver_checks.py, on the RTL (Verilator and Icarus).

Where the docs left this driver guessing, the answer went into them and stays pinned here:
the irq rises before the IH wptr write-back lands for every entry (ih_pop reads IH_WPTR),
a queue reset is done only when its IDLE reads 1 (queue_reset), the SDMA's doorbell errors
report ADDR in bytes and OFFSET in dwords, TIMESTAMP_LO/HI are not latched (timestamp).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import pytest

INCLUDE = Path(__file__).resolve().parents[3] / "include"

# Memory layout (physical: VMID 0 is not translated). Ring and IH bases are 256-byte aligned.
RING, RPTR_WB, IH, IH_WB = 0x100000, 0x1F000, 0x110000, 0x1F040
SDMA_RING, SDMA_RPTR_WB, OUT, FENCE, IB = 0x120000, 0x1F080, 0x130000, 0x1F100, 0x140000
RING_DW, SDMA_RING_DW, IH_DW = 64, 64, 64  # sizes: 2^6 dwords each
TIMEOUT = 20_000  # cycles: a bound for every wait here, generous on slow memory and a 32-bit bus


@lru_cache(maxsize=None)
def header() -> dict[str, int]:
    """Every numeric #define and enum value of the two generated C headers."""
    out = {}
    for name in ("gpucosim_regs.h", "gpucosim_packets.h"):
        text = (INCLUDE / name).read_text()
        for m in re.finditer(r"^\s*(?:#define\s+(GPUCOSIM_\w+)\s+|(GPUCOSIM_\w+)\s*=\s*)(0x[0-9a-fA-F]+|\d+)u?\b",
                             text, re.M):
            out[m[1] or m[2]] = int(m[3], 0)
    return out


def H(name: str) -> int:
    return header()["GPUCOSIM_" + name]


class Bare:
    """Registers by the header's names; fields as (REG, FIELD) through _SHIFT and _MASK."""

    def __init__(self, dev):
        self.dev = dev

    def r(self, reg: str) -> int:
        return self.dev.mmio_read32(H(reg))

    def w(self, reg: str, value: int = 0, **fields):
        for f, v in fields.items():
            value |= (v << H(f"{reg}_{f}_SHIFT")) & H(f"{reg}_{f}_MASK")
        self.dev.mmio_write32(H(reg), value)

    def f(self, reg: str, field: str, value: int | None = None) -> int:
        v = self.r(reg) if value is None else value
        return (v & H(f"{reg}_{field}_MASK")) >> H(f"{reg}_{field}_SHIFT")

    def w64(self, lo: str, hi: str, value: int):
        self.w(lo, value & 0xFFFF_FFFF)
        self.w(hi, value >> 32)

    def put(self, addr: int, dwords):
        for i, d in enumerate(dwords):
            self.dev.mem[addr + 4 * i:addr + 4 * i + 4] = list((d & 0xFFFF_FFFF).to_bytes(4, "little"))

    def get(self, addr: int, n: int = 1) -> list[int]:
        b = bytes(self.dev.mem[addr:addr + 4 * n])
        return [int.from_bytes(b[4 * i:4 * i + 4], "little") for i in range(n)]

    def timestamp(self) -> int:
        """The 48-bit GPU clock: LO and HI are not latched together, so HI, LO, HI again."""
        while True:
            hi, lo = self.r("TIMESTAMP_HI"), self.r("TIMESTAMP_LO")
            if self.r("TIMESTAMP_HI") == hi:
                return hi << 32 | lo

    def until(self, what, cond):
        """Poll `cond()` with short delays; a bounded wait, as a driver's fence wait is."""
        for _ in range(TIMEOUT // 20):
            if cond():
                return
            self.dev.delay(20)
        raise AssertionError(f"{what}: not within {TIMEOUT} cycles")

    # -- bring-up, as hardware.md "Ring and doorbell" and "Interrupts and the IH ring" order it

    def bring_up(self):
        assert self.r("ID") == H("ID_RESET"), "not a gpucosim device"
        assert self.f("VERSION", "MAJOR") == 0, "a register interface this driver does not know"
        self.w64("IH_BASE_LO", "IH_BASE_HI", IH >> 8)
        self.w("IH_SIZE", LOG2_DWORDS=IH_DW.bit_length() - 1)
        self.w64("IH_WPTR_ADDR_LO", "IH_WPTR_ADDR_HI", IH_WB)
        self.w("IH_CNTL", ENABLE=1, WPTR_WB=1)
        self.w("INT_ENABLE", IH_PENDING=1)  # the irq line is high exactly while entries wait
        self.w64("RB_BASE_LO", "RB_BASE_HI", RING >> 8)
        self.w("RB_SIZE", LOG2_QWORDS=RING_DW.bit_length() - 2)  # log2 qwords: 2^(n+1) dwords
        self.w64("RB_RPTR_ADDR_LO", "RB_RPTR_ADDR_HI", RPTR_WB)
        self.w("RB_CNTL", ENABLE=1, RPTR_WB=1)
        self.wptr = self.ih_rptr = self.sdma_wptr = 0
        return self

    def sdma_up(self):
        assert self.f("QUEUE_CAPS", "SDMA") >= 1
        self.w64("SDMA_RB_BASE_LO", "SDMA_RB_BASE_HI", SDMA_RING >> 8)
        self.w64("SDMA_RB_RPTR_ADDR_LO", "SDMA_RB_RPTR_ADDR_HI", SDMA_RPTR_WB)
        self.w("SDMA_CNTL", TRAP_ENABLE=1)
        self.w("SDMA_RB_CNTL", RB_ENABLE=1, RB_SIZE=SDMA_RING_DW.bit_length() - 1, RPTR_WRITEBACK_ENABLE=1)
        return self

    # -- submission: copy into the ring at wptr (dwords; the SDMA's bytes), ring the doorbell

    def queue_reset(self, sdma: bool):
        """SDMA_CNTL.QUEUE_RESET or CP_QUEUE_RESET.Q0, then wait for the queue's IDLE: until it
        reads 1 the engine is still draining and ignores doorbells; IDLE at once means done
        at once (the model). The write-back dword is ours to clear."""
        p, err = ("SDMA_", "SDMA_ERROR") if sdma else ("", "CP_ERROR")
        if sdma:
            self.w("SDMA_CNTL", TRAP_ENABLE=1, QUEUE_RESET=1)  # (one register: TRAP_ENABLE is written too)
        else:
            self.w("CP_QUEUE_RESET", Q0=1)

        def clean():
            return (self.r(f"{p}RB_RPTR"), self.r(f"{p}RB_WPTR"), self.r(err)) == (0, 0, 0)
        assert not self.f(f"{p}STATUS", "IDLE") or clean(), "IDLE before the reset was done"
        self.until(f"{p}queue reset", lambda: self.f(f"{p}STATUS", "IDLE"))
        assert clean() and not self.f(f"{p}STATUS", "ERROR")
        self.put(SDMA_RPTR_WB if sdma else RPTR_WB, [0])
        setattr(self, "sdma_wptr" if sdma else "wptr", 0)

    def submit(self, *packets):
        for p in packets:
            for d in p:
                self.put(RING + 4 * (self.wptr % RING_DW), [d])
                self.wptr = (self.wptr + 1) & 0xFFFF_FFFF
        self.w("RB_DOORBELL", self.wptr)

    def sdma_submit(self, *packets):
        for p in packets:
            for d in p:
                self.put(SDMA_RING + (self.sdma_wptr % (4 * SDMA_RING_DW)), [d])
                self.sdma_wptr = (self.sdma_wptr + 4) & 0xFFFF_FFFF
        self.w("SDMA_DOORBELL", self.sdma_wptr)

    # -- the IH ring: entries between our rptr and IH_WPTR (bytes, 32 per entry)

    def ih_pop(self) -> list[list[int]]:
        """Wait for the irq, take every entry up to IH_WPTR, then move IH_RPTR. The irq rises
        with IH_PENDING as IH_WPTR moves, before the wptr write-back lands (hardware.md), so
        IH_WPTR is read by MMIO and the write-back is only checked to follow: to reach it, or
        pass it where another engine's entry landed meanwhile (both rings running)."""
        assert self.dev.wait_irq(TIMEOUT), "no interrupt"
        wptr = self.r("IH_WPTR")
        self.until("IH wptr write-back", lambda: (self.get(IH_WB)[0] - wptr) & 0xFFFF_FFFF < 1 << 31)
        out = []
        while self.ih_rptr != wptr:
            out.append(self.get(IH + self.ih_rptr % (4 * IH_DW), H("IH_ENTRY_DWORDS")))
            self.ih_rptr = (self.ih_rptr + H("IH_ENTRY_BYTES")) & 0xFFFF_FFFF
        self.w("IH_RPTR", self.ih_rptr)
        return out


def ih_field(entry: list[int], name: str) -> int:
    return (entry[H(f"IH_{name}_DWORD")] & H(f"IH_{name}_MASK")) >> H(f"IH_{name}_SHIFT")


# ---------------------------------------------------------------------------- packets by hand
# PM4 (packets.md): header = 3 << 30 | COUNT << 16 | opcode << 8, COUNT = payload dwords - 1.

def nop(n: int) -> list[int]:
    return [0xC0001000 | (n - 1) << 16] + [0] * n


def write_data(addr: int, data: list[int]) -> list[int]:
    # dword 0: DST_SEL MEMORY (5) at [11:8], WR_CONFIRM [20]; ADDR_LO; ADDR_HI; data
    return [0xC0003700 | (2 + len(data)) << 16, 5 << 8 | 1 << 20, addr & 0xFFFF_FFFF, addr >> 32, *data]


def release_mem(addr: int, value: int, ctxid: int) -> list[int]:
    # amdgpu's fence: EVENT_TYPE CACHE_FLUSH_AND_INV_TS_EVENT (0x14), EVENT_INDEX END_OF_PIPE (5);
    # DATA_SEL DATA_32 (1) at [31:29], INT_SEL SEND_INT_ON_CONFIRM (2) at [26:24]
    return [0xC0064900, 0x14 | 5 << 8, 1 << 29 | 2 << 24, addr & 0xFFFF_FFFF, addr >> 32, value, 0, ctxid]


def dma_fill(dst: int, value: int, nbytes: int) -> list[int]:
    # CP_SYNC [31], SRC_SEL DATA (2) at [30:29]; SRC_ADDR_LO is the value; BYTE_COUNT [25:0]
    return [0xC0055000, 1 << 31 | 2 << 29, value, 0, dst & 0xFFFF_FFFF, dst >> 32, nbytes]


def indirect_buffer(base: int, size_dw: int) -> list[int]:
    return [0xC0023F00, base & 0xFFFF_FFFF, base >> 32, size_dw]  # VMID 0, IB_SIZE [19:0]


# SDMA (packets.md "SDMA packets"): dword 0 holds OP [7:0], SUB_OP [15:8]; byte counts are bytes - 1.

def sdma_write_linear(dst: int, data: list[int]) -> list[int]:
    return [0x00000002, dst & 0xFFFF_FFFF, dst >> 32, len(data) - 1, *data]


def sdma_fill(dst: int, value: int, nbytes: int) -> list[int]:
    return [0x0000000B, dst & 0xFFFF_FFFF, dst >> 32, value, nbytes - 1]


def sdma_copy(dst: int, src: int, nbytes: int) -> list[int]:
    return [0x00000001, nbytes - 1, 0, src & 0xFFFF_FFFF, src >> 32, dst & 0xFFFF_FFFF, dst >> 32]


def sdma_fence(addr: int, value: int) -> list[int]:
    return [0x00000005, addr & 0xFFFF_FFFF, addr >> 32, value]


def sdma_trap(ctx: int) -> list[int]:
    return [0x00000006, ctx]


# ---------------------------------------------------------------------------- the checks

def check_cp_ring_fence_and_eop(dev):
    """Ring bring-up, WRITE_DATA, a DMA fill, an IB, then amdgpu's fence: the value lands in
    memory, then one EOP entry carries INT_CTXID, the value and the address; the pointers
    and both write-backs agree; reading the entry and moving IH_RPTR lowers the irq."""
    g = Bare(dev).bring_up()
    g.w("RB_WPTR", 7)  # amdgpu writes CP_RB0_WPTR; here it is read-only and the write does nothing
    assert g.r("RB_WPTR") == 0 and g.f("STATUS", "IDLE")
    g.put(IB, write_data(OUT + 0x40, [0xB1]))
    g.submit(nop(2), write_data(OUT, [0x11, 0x22, 0x33]), dma_fill(OUT + 0x100, 0xA5A5A5A5, 64),
             indirect_buffer(IB, 5), release_mem(FENCE, 0xFE01, ctxid=0x77))
    g.until("fence", lambda: g.get(FENCE)[0] == 0xFE01)
    assert g.get(OUT, 3) == [0x11, 0x22, 0x33] and g.get(OUT + 0x40) == [0xB1]
    assert g.get(OUT + 0x100, 16) == [0xA5A5A5A5] * 16 and g.get(OUT + 0x140) == [0]
    assert dev.wait_irq(TIMEOUT) and dev.wait_irq(10), "a level: high until the entry is consumed"
    [e] = g.ih_pop()
    assert (ih_field(e, "CLIENT_ID"), ih_field(e, "SOURCE_ID")) == (H("IH_CLIENT_GRBM_CP"), H("IH_SOURCE_EOP"))
    assert (ih_field(e, "RING_ID"), ih_field(e, "VMID"), ih_field(e, "PASID")) == (0, 0, 0)
    assert e[4:8] == [0x77, 0xFE01, 0, FENCE], [hex(x) for x in e]
    stamp = e[1] | ih_field(e, "TIMESTAMP_HI") << 32
    assert 0 < stamp <= g.timestamp()
    g.until("idle", lambda: g.f("STATUS", "IDLE"))
    n = 3 + 7 + 7 + 4 + 8
    assert (g.r("RB_RPTR"), g.r("RB_WPTR"), g.get(RPTR_WB)[0]) == (n, n, n)
    assert g.f("INT_STATUS", "EOP") == 1
    g.w("INT_STATUS", EOP=1)  # sticky: write 1 to clear
    assert g.r("INT_STATUS") == 0 and not dev.wait_irq(50)
    # PERF_PACKETS(<P>_INDEX) counts what ran (the IB's WRITE_DATA too)
    counts = [dev.mmio_read32(H("PERF_PACKETS_BASE") + H("PERF_PACKETS_STRIDE") * H(f"PM4_{p}_INDEX"))
              for p in ("NOP", "WRITE_DATA", "INDIRECT_BUFFER", "RELEASE_MEM", "DMA_DATA")]
    assert counts == [1, 2, 1, 1, 1]
    # 12 more jobs of 13 dwords: both rings wrap (the 8-entry IH ring too), packets straddle the end
    for k in range(12):
        g.until("ring space", lambda: g.wptr - g.get(RPTR_WB)[0] <= RING_DW - 13)
        g.submit(write_data(OUT + 0x300 + 4 * k, [k]), release_mem(FENCE, 0x100 + k, ctxid=k))
        [e] = g.ih_pop()
        assert e[4:8] == [k, 0x100 + k, 0, FENCE] and g.get(OUT + 0x300 + 4 * k) == [k]


def check_sdma_ring_fence_and_trap(dev):
    """The SDMA ring in bytes: WRITE_LINEAR, CONSTANT_FILL, COPY_LINEAR, FENCE, then TRAP's
    entry (client SDMA0, source SDMA_TRAP, INT_CONTEXT in DATA0), which sets no INT_STATUS
    event bit; the rptr and its write-back count bytes."""
    g = Bare(dev).bring_up().sdma_up()
    g.sdma_submit(sdma_write_linear(OUT, [1, 2, 3, 4]), sdma_fill(OUT + 0x80, 0x5A5A5A5A, 32),
                  sdma_copy(OUT + 0x200, OUT, 16), sdma_fence(FENCE, 0x5D01), sdma_trap(0xC0FFEE))
    g.until("SDMA fence", lambda: g.get(FENCE)[0] == 0x5D01)
    assert g.get(OUT + 0x200, 4) == [1, 2, 3, 4] and g.get(OUT + 0x80, 9) == [0x5A5A5A5A] * 8 + [0]
    [e] = g.ih_pop()
    assert (ih_field(e, "CLIENT_ID"), ih_field(e, "SOURCE_ID")) == (H("IH_CLIENT_SDMA0"), H("IH_SOURCE_SDMA_TRAP"))
    assert (ih_field(e, "RING_ID"), ih_field(e, "VMID")) == (0, 0) and e[4:8] == [0xC0FFEE, 0, 0, 0]
    assert g.r("INT_STATUS") == 0, "the SDMA's entries raise the irq through IH_PENDING alone"
    g.until("SDMA idle", lambda: g.f("SDMA_STATUS", "IDLE"))
    n = 4 * (8 + 5 + 7 + 4 + 2)
    assert (g.r("SDMA_RB_RPTR"), g.r("SDMA_RB_WPTR"), g.get(SDMA_RPTR_WB)[0]) == (n, n, n)
    assert g.r("RB_RPTR") == 0 and g.f("STATUS", "IDLE"), "the CP is a separate engine"
    # 12 more jobs of 44 bytes: the 256-byte ring wraps, packets straddle its end
    for k in range(12):
        g.until("ring space", lambda: g.sdma_wptr - g.get(SDMA_RPTR_WB)[0] <= 4 * SDMA_RING_DW - 44)
        g.sdma_submit(sdma_write_linear(OUT + 0x300 + 4 * k, [k]), sdma_fence(FENCE, 0x200 + k), sdma_trap(k))
        [e] = g.ih_pop()
        assert e[4] == k and g.get(FENCE) == [0x200 + k] and g.get(OUT + 0x300 + 4 * k) == [k]
    # With IH_CNTL.ENABLE clear an entry is dropped, not kept: a TRAP then leaves no trace at all
    g.w("IH_CNTL", ENABLE=0, WPTR_WB=1)
    g.sdma_submit(sdma_fence(FENCE, 0x5D05), sdma_trap(0x77))
    g.until("SDMA idle", lambda: g.f("SDMA_STATUS", "IDLE") and g.get(FENCE) == [0x5D05])
    g.w("IH_CNTL", ENABLE=1, WPTR_WB=1)
    assert (g.r("IH_WPTR"), g.r("INT_STATUS")) == (g.ih_rptr, 0) and not dev.wait_irq(100)


def check_cp_bad_packet_and_soft_reset(dev):
    """An unknown opcode in an IB: CP_ERROR (code, level, opcode), ADDR the header's byte
    address, OFFSET its dword offset in the IB; STATUS.ERROR, INT_STATUS.CP_ERROR and one
    CP_ERROR entry carrying those registers; doorbells ignored while stopped. Recovery as
    hardware.md "Errors" gives it: SOFT_RESET, wait for the three IDLE bits, IH_RPTR = 0,
    clear the write-back dwords, then the ring runs again from 0."""
    g = Bare(dev).bring_up()
    bad = [0xC0017900, 0, 0]  # opcode 0x79 (gfx9's SET_UCONFIG_REG): not implemented here
    g.put(IB, write_data(OUT, [0xAA]) + bad)
    g.submit(indirect_buffer(IB, 8), write_data(OUT + 4, [0xBB]))
    [e] = g.ih_pop()
    assert (ih_field(e, "CLIENT_ID"), ih_field(e, "SOURCE_ID")) == (H("IH_CLIENT_GRBM_CP"), H("IH_SOURCE_CP_ERROR"))
    err = g.r("CP_ERROR")
    assert (g.f("CP_ERROR", "CODE", err), g.f("CP_ERROR", "LEVEL", err), g.f("CP_ERROR", "OPCODE", err)) == \
        (H("CP_ERROR_ILLEGAL_OPCODE"), H("IB_LEVEL_IB1"), 0x79)
    addr = g.r("CP_ERROR_ADDR_LO") | g.r("CP_ERROR_ADDR_HI") << 32
    assert (addr, g.r("CP_ERROR_OFFSET")) == (IB + 4 * 5, 5)
    assert e[4:8] == [err, IB + 20, 0, 5] and ih_field(e, "VMID") == 0
    assert g.get(OUT, 2) == [0xAA, 0], "the work before the error is done, nothing after it"
    g.until("stopped", lambda: g.f("STATUS", "IDLE"))
    assert g.f("STATUS", "ERROR") and g.f("INT_STATUS", "CP_ERROR")
    wptr = g.r("RB_WPTR")
    g.w("RB_DOORBELL", wptr + 7)
    assert g.r("RB_WPTR") == wptr and g.r("CP_ERROR") == err, "ignored while stopped"
    # recovery
    g.w("CONTROL", SOFT_RESET=1)
    g.until("reset", lambda: g.f("STATUS", "IDLE") and g.f("CP_HQD1_STATUS", "IDLE") and g.f("SDMA_STATUS", "IDLE"))
    assert (g.r("RB_RPTR"), g.r("RB_WPTR"), g.r("IH_WPTR"), g.r("CP_ERROR"), g.f("STATUS", "ERROR")) == (0, 0, 0, 0, 0)
    assert g.r("RB_BASE_LO") == RING >> 8 and g.f("RB_CNTL", "ENABLE") == 1, "settings are kept"
    g.w("IH_RPTR", 0)
    g.put(RPTR_WB, [0])
    g.put(IH_WB, [0])
    g.w("INT_STATUS", CP_ERROR=1)
    g.wptr = g.ih_rptr = 0
    g.submit(write_data(OUT + 8, [0xCC]), release_mem(FENCE, 0xFE02, ctxid=2))
    g.until("fence after the reset", lambda: g.get(FENCE)[0] == 0xFE02)
    [e] = g.ih_pop()
    assert ih_field(e, "SOURCE_ID") == H("IH_SOURCE_EOP") and e[4:6] == [2, 0xFE02]
    g.until("idle", lambda: g.f("STATUS", "IDLE"))  # the rptr write-back follows the fence's IH entry
    assert g.get(OUT + 8) == [0xCC] and g.get(RPTR_WB)[0] == 5 + 8


def check_sdma_bad_packet_and_queue_reset(dev):
    """An unknown SDMA (OP, SUB_OP) stops the SDMA queue alone: SDMA_ERROR (code, level, op,
    sub_op), ADDR and OFFSET (dwords) of the header, SDMA_STATUS.ERROR, an SDMA_ERROR entry;
    the CP runs on meanwhile. SDMA_CNTL.QUEUE_RESET clears it: rptr = wptr = 0, and the
    ring runs again from its start."""
    g = Bare(dev).bring_up().sdma_up()
    bad = [0x00000307]  # OP 7, SUB_OP 3: not in the table
    g.sdma_submit(sdma_write_linear(OUT, [0x51]), bad, sdma_fence(FENCE, 0x5D02))
    [e] = g.ih_pop()
    assert (ih_field(e, "CLIENT_ID"), ih_field(e, "SOURCE_ID")) == (H("IH_CLIENT_SDMA0"), H("IH_SOURCE_SDMA_ERROR"))
    err = g.r("SDMA_ERROR")
    assert [g.f("SDMA_ERROR", f, err) for f in ("CODE", "LEVEL", "OP", "SUB_OP")] == \
        [H("CP_ERROR_ILLEGAL_OPCODE"), H("IB_LEVEL_RING"), 7, 3]
    addr = g.r("SDMA_ERROR_ADDR_LO") | g.r("SDMA_ERROR_ADDR_HI") << 32
    assert (addr, g.r("SDMA_ERROR_OFFSET")) == (SDMA_RING + 4 * 5, 5)
    assert e[4:8] == [err, SDMA_RING + 20, 0, 5]
    assert g.f("SDMA_STATUS", "ERROR") and g.r("INT_STATUS") == 0
    assert g.get(OUT) == [0x51] and g.get(FENCE) == [0]
    g.w("SDMA_DOORBELL", g.sdma_wptr + 8)
    assert g.r("SDMA_RB_WPTR") == g.sdma_wptr and g.r("SDMA_ERROR") == err, "ignored while stopped"
    # the CP is untouched: a job on it completes while the SDMA is stopped
    g.submit(release_mem(FENCE + 4, 0xFE03, ctxid=3))
    g.until("CP fence", lambda: g.get(FENCE + 4)[0] == 0xFE03)
    [e] = g.ih_pop()
    assert ih_field(e, "SOURCE_ID") == H("IH_SOURCE_EOP")
    g.w("INT_STATUS", EOP=1)
    # recovery: the queue alone
    g.queue_reset(sdma=True)
    assert g.f("SDMA_RB_CNTL", "RB_ENABLE") == 1 and g.f("SDMA_CNTL", "TRAP_ENABLE") == 1
    g.sdma_submit(sdma_fence(FENCE, 0x5D03), sdma_trap(9))
    g.until("SDMA fence after the reset", lambda: g.get(FENCE)[0] == 0x5D03)
    [e] = g.ih_pop()
    assert ih_field(e, "SOURCE_ID") == H("IH_SOURCE_SDMA_TRAP") and e[4] == 9
    g.until("SDMA idle", lambda: g.f("SDMA_STATUS", "IDLE"))
    assert g.get(SDMA_RPTR_WB)[0] == g.r("SDMA_RB_RPTR") == 24


def check_queue_resets_under_load_and_sdma_doorbell_error(dev):
    """SDMA_CNTL.QUEUE_RESET and CP_QUEUE_RESET.Q0 while a long fill runs: the queue's IDLE
    reads 0 until it is clean (the engine drains its bus traffic first; a doorbell meanwhile
    would be lost), and a doorbell after IDLE runs. Then a doorbell behind wptr: DOORBELL_BACKWARDS
    with ADDR the rejected value (bytes, as the doorbell) and OFFSET the rptr in dwords,
    masked by the ring, as SDMA_ERROR_OFFSET counts."""
    g = Bare(dev).bring_up().sdma_up()
    g.sdma_submit(sdma_fill(0x200000, 0x11111111, 1 << 16))
    dev.delay(60)
    g.queue_reset(sdma=True)
    g.sdma_submit(sdma_fence(FENCE, 0x5D04))
    g.until("SDMA fence after a reset of a busy queue", lambda: g.get(FENCE)[0] == 0x5D04)
    g.submit(dma_fill(0x300000, 0x22222222, 1 << 16))
    dev.delay(60)
    g.queue_reset(sdma=False)
    g.submit(release_mem(FENCE + 8, 0xFE04, ctxid=4))
    g.until("CP fence after a reset of a busy queue", lambda: g.get(FENCE + 8)[0] == 0xFE04)
    assert ih_field(g.ih_pop()[0], "SOURCE_ID") == H("IH_SOURCE_EOP")
    # 17 more packets of 16 bytes: rptr = 288 bytes, 72 dwords, 8 in a 64-dword ring
    for k in range(17):
        g.until("ring space", lambda: g.sdma_wptr - g.r("SDMA_RB_RPTR") <= 4 * SDMA_RING_DW - 16)
        g.sdma_submit(sdma_fence(FENCE + 4, k))
    g.until("SDMA idle", lambda: g.f("SDMA_STATUS", "IDLE"))
    assert g.r("SDMA_RB_RPTR") == 288
    g.w("SDMA_DOORBELL", 200)
    [e] = g.ih_pop()
    err = g.r("SDMA_ERROR")
    assert [g.f("SDMA_ERROR", f, err) for f in ("CODE", "LEVEL", "OP", "SUB_OP")] == \
        [H("CP_ERROR_DOORBELL_BACKWARDS"), H("IB_LEVEL_RING"), 0, 0]
    assert (g.r("SDMA_ERROR_ADDR_LO"), g.r("SDMA_ERROR_ADDR_HI"), g.r("SDMA_ERROR_OFFSET")) == (200, 0, 8)
    assert ih_field(e, "SOURCE_ID") == H("IH_SOURCE_SDMA_ERROR") and e[4:8] == [err, 200, 0, 8]
    assert g.r("SDMA_RB_WPTR") == 288, "the rejected value is not taken"


RING1, RPTR1_WB = 0x150000, 0x1F0C0  # queue 1's ring (CP_HQD1_*) and its rptr write-back


def check_bring_up_all_three_rings_at_once_ih_overflow_and_shut_down(dev):
    """hardware.md "Bring-up and shutdown", step by step: the state after reset as the header's
    _RESET values give it (every engine idle, nothing pending, the line low); the IH ring
    first, then INT_ENABLE, then queue 0, queue 1 and the SDMA ring; 16 rounds with one job
    on each ring at once (each ring wraps at least twice, the 8-entry IH ring six times), every entry
    taken by IH_WPTR with the write-back following; then 12 entries with none read: 8 land,
    4 are dropped, IH_OVERFLOW and EOP set, the write-back at the full ring's wptr, and the
    documented recovery (read what is there, move IH_RPTR, clear the sticky bits, look at the
    fences for what was missed) lets the next entry in; then the shutdown: every ring idle,
    its enable cleared, the IH ring drained and disabled, INT_ENABLE 0, after which a
    doorbell is ignored and the line stays low; and a second bring-up after CONTROL.SOFT_RESET,
    since the pointers outlive the shutdown. Enabling a ring or the IH ring writes nothing to
    its write-back dword: the driver zeroes it."""
    g = Bare(dev)
    for reg in ("CONTROL", "INT_ENABLE", "IH_CNTL", "IH_SIZE", "RB_CNTL", "RB_SIZE", "CP_HQD1_RB_CNTL",
                "CP_HQD1_RB_SIZE", "CP_QUEUE_PRIORITY", "SDMA_RB_CNTL", "SDMA_CNTL", "IH_RPTR"):
        assert g.r(reg) == H(f"{reg}_RESET"), reg
    assert g.r("VM_CONTEXT_CNTL_BASE") == H("VM_CONTEXT_CNTL_RESET") == 0, "VMID 0 untranslated: addresses are physical"
    for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
        assert g.f(st, "IDLE") == 1 and g.f(st, "ERROR") == 0, st
    assert (g.r("INT_STATUS"), g.r("IH_WPTR"), g.r("RB_WPTR"), g.r("CP_HQD1_RB_WPTR"), g.r("SDMA_RB_WPTR")) == (0,) * 5
    assert not dev.wait_irq(1)
    wbs = (IH_WB, RPTR_WB, RPTR1_WB, SDMA_RPTR_WB)
    for a in wbs:  # what a previous driver left there: enabling a ring writes no write-back
        g.put(a, [0xDEAD0000 | a & 0xFFFF])

    def up():
        g.bring_up()  # the IH ring and INT_ENABLE first, then queue 0
        g.w64("CP_HQD1_RB_BASE_LO", "CP_HQD1_RB_BASE_HI", RING1 >> 8)
        g.w("CP_HQD1_RB_SIZE", LOG2_QWORDS=RING_DW.bit_length() - 2)
        g.w64("CP_HQD1_RB_RPTR_ADDR_LO", "CP_HQD1_RB_RPTR_ADDR_HI", RPTR1_WB)
        g.w("CP_HQD1_RB_CNTL", ENABLE=1, RPTR_WB=1)
        g.sdma_up()
        dev.delay(100)
        assert [g.get(a)[0] for a in wbs] == [0xDEAD0000 | a & 0xFFFF for a in wbs], "written back at enable"
        for a in wbs:  # so the driver zeroes each dword itself (ring space is read from it)
            g.put(a, [0])
    up()
    wptr1 = 0

    def submit1(*packets):
        nonlocal wptr1
        for p in packets:
            for d in p:
                g.put(RING1 + 4 * (wptr1 % RING_DW), [d])
                wptr1 += 1
        g.w("CP_HQD1_RB_DOORBELL", wptr1)

    def jobs(k, ctx):
        g.until("ring space", lambda: g.wptr - g.get(RPTR_WB)[0] <= RING_DW - 13
                and wptr1 - g.get(RPTR1_WB)[0] <= RING_DW - 13
                and g.sdma_wptr - g.get(SDMA_RPTR_WB)[0] <= 4 * SDMA_RING_DW - 44)
        g.submit(write_data(OUT + 4 * k, [k]), release_mem(FENCE, k, ctxid=ctx))
        submit1(write_data(OUT + 0x400 + 4 * k, [k]), release_mem(FENCE + 4, k, ctxid=ctx | 1 << 8))
        g.sdma_submit(sdma_write_linear(OUT + 0x800 + 4 * k, [k]), sdma_fence(FENCE + 8, k), sdma_trap(ctx | 2 << 8))

    def decode(e):
        src = (ih_field(e, "CLIENT_ID"), ih_field(e, "SOURCE_ID"), ih_field(e, "RING_ID"))
        return {(H("IH_CLIENT_GRBM_CP"), H("IH_SOURCE_EOP"), 0): 0, (H("IH_CLIENT_GRBM_CP"), H("IH_SOURCE_EOP"), 1): 1,
                (H("IH_CLIENT_SDMA0"), H("IH_SOURCE_SDMA_TRAP"), 0): 2}[src] << 8 | (e[4] & 0xFF)

    for k in range(16):
        jobs(k, k)
        got = []
        while len(got) < 3:
            got += [decode(e) for e in g.ih_pop()]
        assert sorted(got) == [k, 1 << 8 | k, 2 << 8 | k], (k, got)
        assert [e for e in got if e >> 8 == 0] == [k], "queue 0's entries in order"
        assert g.get(FENCE, 3) == [k] * 3
    assert g.get(OUT, 16) == g.get(OUT + 0x400, 16) == g.get(OUT + 0x800, 16) == list(range(16))
    assert g.f("INT_STATUS", "EOP") == 1 and g.f("INT_STATUS", "IH_OVERFLOW") == 0
    g.w("INT_STATUS", EOP=1)
    # 12 entries, none read: the 8-entry ring takes 8, drops 4 and says so
    base = g.r("IH_WPTR")
    assert base == g.ih_rptr == 48 * 32
    for k in range(16, 20):
        jobs(k, k)
    g.until("all fences", lambda: g.get(FENCE, 3) == [19] * 3)
    g.until("all idle", lambda: g.f("STATUS", "IDLE") and g.f("CP_HQD1_STATUS", "IDLE") and g.f("SDMA_STATUS", "IDLE"))
    assert g.r("IH_WPTR") == base + 8 * 32 and g.get(IH_WB) == [base + 8 * 32]
    st = g.r("INT_STATUS")
    assert [g.f("INT_STATUS", f, st) for f in ("IH_PENDING", "EOP", "IH_OVERFLOW", "CP_ERROR")] == [1, 1, 1, 0]
    kept = [decode(e) for e in g.ih_pop()]
    assert len(kept) == 8 and set(kept) <= {q << 8 | k for q in range(3) for k in range(16, 20)}, kept
    g.w("INT_STATUS", EOP=1, IH_OVERFLOW=1)
    assert g.r("INT_STATUS") == 0 and not dev.wait_irq(20)
    jobs(20, 20)
    got = []
    while len(got) < 3:
        got += [decode(e) for e in g.ih_pop()]
    assert sorted(got) == [20, 1 << 8 | 20, 2 << 8 | 20] and g.f("INT_STATUS", "IH_OVERFLOW") == 0
    # shutdown: rings idle, then their enables, then the IH ring's, then the line
    g.until("all idle", lambda: g.f("STATUS", "IDLE") and g.f("CP_HQD1_STATUS", "IDLE") and g.f("SDMA_STATUS", "IDLE"))
    g.w("RB_CNTL", ENABLE=0, RPTR_WB=1)
    g.w("CP_HQD1_RB_CNTL", ENABLE=0, RPTR_WB=1)
    g.w("SDMA_RB_CNTL", RB_ENABLE=0, RB_SIZE=SDMA_RING_DW.bit_length() - 1, RPTR_WRITEBACK_ENABLE=1)
    assert g.r("IH_WPTR") == g.ih_rptr
    g.w("IH_CNTL", ENABLE=0, WPTR_WB=1)
    g.w("INT_ENABLE", 0)
    g.w("INT_STATUS", EOP=1)
    for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
        assert g.f(st, "IDLE") == 1 and g.f(st, "ERROR") == 0, st
    wp = (g.r("RB_WPTR"), g.r("CP_HQD1_RB_WPTR"), g.r("SDMA_RB_WPTR"))
    assert wp == (g.wptr, wptr1, g.sdma_wptr) == (g.r("RB_RPTR"), g.r("CP_HQD1_RB_RPTR"), g.r("SDMA_RB_RPTR"))
    g.put(RING + 4 * (g.wptr % RING_DW), release_mem(FENCE, 0xDEAD, ctxid=0))
    g.w("RB_DOORBELL", g.wptr + 8)
    g.w("CP_HQD1_RB_DOORBELL", wptr1 + 8)
    g.w("SDMA_DOORBELL", g.sdma_wptr + 16)
    dev.delay(200)
    assert (g.r("RB_WPTR"), g.r("CP_HQD1_RB_WPTR"), g.r("SDMA_RB_WPTR")) == wp, "ignored while disabled"
    assert g.get(FENCE) == [20] and g.r("INT_STATUS") == 0 and not dev.wait_irq(20)
    assert g.r("RB_BASE_LO") == RING >> 8 and g.r("IH_BASE_LO") == IH >> 8, "the settings stay for the next bring-up"
    # the next bring-up finds the pointers where they were: a driver that starts its rings at
    # 0 resets the device first (or reads RB_WPTR, IH_WPTR ... and starts there)
    assert (g.r("IH_WPTR"), g.r("RB_RPTR")) == (g.ih_rptr, g.wptr) != (0, 0)
    g.w("CONTROL", SOFT_RESET=1)
    g.until("reset", lambda: g.f("STATUS", "IDLE") and g.f("CP_HQD1_STATUS", "IDLE") and g.f("SDMA_STATUS", "IDLE"))
    assert [g.r(r) for r in ("RB_RPTR", "RB_WPTR", "CP_HQD1_RB_RPTR", "CP_HQD1_RB_WPTR", "SDMA_RB_RPTR",
                             "SDMA_RB_WPTR", "IH_WPTR")] == [0] * 7
    assert g.r("IH_RPTR") == g.ih_rptr, "IH_RPTR is a setting: the driver writes it"
    g.w("IH_RPTR", 0)
    for a in wbs:
        g.put(a, [0xDEAD0000 | a & 0xFFFF])
    up()
    wptr1 = 0
    jobs(21, 21)
    got = []
    while len(got) < 3:
        got += [decode(e) for e in g.ih_pop()]
    assert sorted(got) == [21, 1 << 8 | 21, 2 << 8 | 21] and g.get(FENCE, 3) == [21] * 3
    assert g.r("IH_WPTR") == 96 and g.get(IH_WB) == [96]


def check_every_cp_error_kind_on_queue_1_and_its_reset_while_queue_0_and_the_sdma_run(dev):
    """Each CP error a bare-metal driver can make on queue 1 (every code but BUS_SLVERR, which
    needs a memory that answers it, and VM_FAULT, which needs page tables: test_contract_vm),
    one after another: after a good WRITE_DATA, the bad packet or doorbell stops queue 1
    alone: CP_HQD1_ERROR (CODE, LEVEL, OPCODE), its ADDR and OFFSET as "Errors" gives them,
    CP_HQD1_STATUS ERROR and IDLE, INT_STATUS.CP_ERROR, and one CP_ERROR entry with RING_ID 1
    carrying the registers, while queue 0 and the SDMA each finish a job with its entry.
    The recovery is the queue's: CP_QUEUE_RESET.Q1, wait for CP_HQD1_STATUS.IDLE, zero the
    rptr write-back, clear INT_STATUS.CP_ERROR, and queue 1 runs again from its ring's start."""
    g = Bare(dev).bring_up().sdma_up()
    g.w64("CP_HQD1_RB_BASE_LO", "CP_HQD1_RB_BASE_HI", RING1 >> 8)
    g.w("CP_HQD1_RB_SIZE", LOG2_QWORDS=RING_DW.bit_length() - 2)
    g.w64("CP_HQD1_RB_RPTR_ADDR_LO", "CP_HQD1_RB_RPTR_ADDR_HI", RPTR1_WB)
    g.w("CP_HQD1_RB_CNTL", ENABLE=1, RPTR_WB=1)
    levels, dma_log2 = g.f("CAPS", "IB_LEVELS"), g.f("CAPS", "DMA_MAX_LOG2")
    assert dma_log2 < 26 and levels >= 1, "a BYTE_COUNT over the limit fits the field"
    ibs = [IB + 0x100 * i for i in range(levels + 1)]
    for a, b in zip(ibs, ibs[1:]):  # each IB holds the next: the last one is one level too deep
        g.put(a, indirect_buffer(b, 4))
    g.put(ibs[-1], nop(3))
    far = 0xFFFF_FFFF_F000  # the 48-bit space's last page: no memory answers there
    wd = 0xC0003700
    at, R = RING1 + 4 * 5, H("IB_LEVEL_RING")
    # name: (packet after the good WRITE_DATA, or a doorbell value; CODE, LEVEL, OPCODE, ADDR, OFFSET)
    kinds = {
        "ILLEGAL_OPCODE": ([0xC0017900, 0, 0], "ILLEGAL_OPCODE", R, 0x79, at, 5),
        "BAD_COUNT": ([wd | 2 << 16, 5 << 8, OUT, 0], "BAD_COUNT", R, 0x37, at, 5),
        "IB_NESTING": (indirect_buffer(ibs[0], 4), "IB_NESTING", levels, 0x3F, ibs[-2], 0),
        "IB_SIZE_ZERO": (indirect_buffer(IB, 0), "IB_SIZE_ZERO", R, 0x3F, at, 5),
        "IB_MISALIGNED": (indirect_buffer(IB + 2, 4), "IB_MISALIGNED", R, 0x3F, at, 5),
        "FENCE_MISALIGNED": (write_data(OUT + 2, [1]), "FENCE_MISALIGNED", R, 0x37, at, 5),
        "DMA_BYTE_COUNT": (dma_fill(OUT, 0, (1 << dma_log2) + 4), "DMA_BYTE_COUNT", R, 0x50, at, 5),
        "UNSUPPORTED": ([wd | 3 << 16, 0 << 8, 0x100, 0, 1], "UNSUPPORTED", R, 0x37, at, 5),
        "BUS_DECERR": (write_data(far, [1]), "BUS_DECERR", R, 0x37, far, 5),
        "DOORBELL_BACKWARDS": (0xFFFF_FFF0, "DOORBELL_BACKWARDS", R, 0, 0xFFFF_FFF0, 5),
        "DOORBELL_OVERFLOW": (5 + RING_DW + 1, "DOORBELL_OVERFLOW", R, 0, 5 + RING_DW + 1, 5),
    }
    for k, (name, (bad, code, level, opcode, addr, offset)) in enumerate(kinds.items()):
        good = write_data(OUT + 0x600 + 4 * k, [0x100 + k])
        g.put(RING1, good)
        if isinstance(bad, int):
            g.w("CP_HQD1_RB_DOORBELL", 5)
            g.until("queue 1's good packet", lambda: g.r("CP_HQD1_RB_RPTR") == 5)
            g.w("CP_HQD1_RB_DOORBELL", bad)
        else:
            g.put(RING1 + 20, bad)
            g.w("CP_HQD1_RB_DOORBELL", 5 + len(bad))
        g.submit(write_data(OUT + 0x700 + 4 * k, [k]), release_mem(FENCE, k, ctxid=k))
        g.sdma_submit(sdma_fence(FENCE + 8, k), sdma_trap(k))
        seen = {}
        while len(seen) < 3:
            for e in g.ih_pop():
                seen[(ih_field(e, "CLIENT_ID"), ih_field(e, "SOURCE_ID"), ih_field(e, "RING_ID"))] = e
        e = seen.pop((H("IH_CLIENT_GRBM_CP"), H("IH_SOURCE_CP_ERROR"), 1))
        assert sorted(seen) == sorted([(H("IH_CLIENT_GRBM_CP"), H("IH_SOURCE_EOP"), 0),
                                       (H("IH_CLIENT_SDMA0"), H("IH_SOURCE_SDMA_TRAP"), 0)]), name
        g.until(f"{name}: queue 1 stopped", lambda: g.f("CP_HQD1_STATUS", "IDLE"))
        err = g.r("CP_HQD1_ERROR")
        got = [g.f("CP_HQD1_ERROR", f, err) for f in ("CODE", "LEVEL", "OPCODE")]
        assert got == [H(f"CP_ERROR_{code}"), level, opcode], (name, got)
        regs = [g.r("CP_HQD1_ERROR_ADDR_LO"), g.r("CP_HQD1_ERROR_ADDR_HI"), g.r("CP_HQD1_ERROR_OFFSET")]
        assert regs == [addr & 0xFFFF_FFFF, addr >> 32, offset], (name, [hex(x) for x in regs])
        assert e[4:8] == [err, *regs] and ih_field(e, "VMID") == 0, name
        assert g.f("CP_HQD1_STATUS", "ERROR") and g.f("INT_STATUS", "CP_ERROR"), name
        assert not g.f("STATUS", "ERROR") and not g.f("SDMA_STATUS", "ERROR") and g.r("CP_ERROR") == 0, name
        assert g.get(OUT + 0x600 + 4 * k) == [0x100 + k] and g.get(FENCE, 3) == [k, 0, k], name
        wptr1 = g.r("CP_HQD1_RB_WPTR")
        g.w("CP_HQD1_RB_DOORBELL", wptr1 + 1)
        assert g.r("CP_HQD1_RB_WPTR") == wptr1 and g.r("CP_HQD1_ERROR") == err, f"{name}: ignored while stopped"
        g.w("CP_QUEUE_RESET", Q1=1)
        g.until(f"{name}: queue 1 reset", lambda: g.f("CP_HQD1_STATUS", "IDLE"))
        assert [g.r(r) for r in ("CP_HQD1_RB_RPTR", "CP_HQD1_RB_WPTR", "CP_HQD1_ERROR", "CP_HQD1_ERROR_ADDR_LO",
                                 "CP_HQD1_ERROR_ADDR_HI", "CP_HQD1_ERROR_OFFSET")] == [0] * 6, name
        assert not g.f("CP_HQD1_STATUS", "ERROR") and g.f("CP_HQD1_RB_CNTL", "ENABLE"), name
        g.put(RPTR1_WB, [0])
        g.w("INT_STATUS", CP_ERROR=1, EOP=1)
        assert g.r("INT_STATUS") == 0, name
    # queue 1 after its last reset: a job runs from its ring's start, with its entry
    g.put(RING1, write_data(OUT + 0x6F0, [0xF1]) + release_mem(FENCE + 4, 0xF1, ctxid=0xF1))
    g.w("CP_HQD1_RB_DOORBELL", 13)
    [e] = g.ih_pop()
    assert (ih_field(e, "SOURCE_ID"), ih_field(e, "RING_ID"), e[4]) == (H("IH_SOURCE_EOP"), 1, 0xF1)
    g.until("queue 1 idle", lambda: g.f("CP_HQD1_STATUS", "IDLE"))
    assert g.get(OUT + 0x6F0) == [0xF1] and g.get(RPTR1_WB) == [13] and g.r("CP_HQD1_RB_RPTR") == 13


def check_shutdown_with_work_left_paused_then_reset_or_resumed(dev):
    """A shutdown that finds work in the rings: each enable cleared while a long fill is in
    hand. The fill finishes (every byte written), the packets behind it wait: what the
    status registers read then, the paused state, is IDLE 0, RB_EMPTY 0, HALTED, ERROR,
    WAITING, DMA_BUSY 0 and LEVEL RING, RB_RPTR past the fill and its write-back with it,
    no entry; no bit says the packet in hand is done, so a driver that must know waits for
    the rptr to pass it (or halts, or resets the queue). CP_QUEUE_RESET.Q0 then drops queue
    0's rest (IDLE 1, pointers 0, no fence, no entry); the SDMA's RB_ENABLE set again runs its
    rest (fence, TRAP). The model runs a doorbell's packets before the next MMIO: it shows
    the rings done (the timing-free half of the check), the RTL the pause."""
    g = Bare(dev).bring_up().sdma_up()
    big = 1 << 14
    g.submit(dma_fill(0x200000, 0x33333333, big), release_mem(FENCE, 0xE1, ctxid=0xE1))
    g.sdma_submit(sdma_fill(0x300000, 0x44444444, big), sdma_fence(FENCE + 8, 0xE2), sdma_trap(0xE2))
    g.until("both fills begun", lambda: g.get(0x200000) == [0x33333333] and g.get(0x300000) == [0x44444444])
    g.w("RB_CNTL", ENABLE=0, RPTR_WB=1)
    g.w("SDMA_RB_CNTL", RB_ENABLE=0, RB_SIZE=SDMA_RING_DW.bit_length() - 1, RPTR_WRITEBACK_ENABLE=1)
    g.until("both fills done", lambda: g.get(0x200000 + big - 4) == [0x33333333]
            and g.get(0x300000 + big - 4) == [0x44444444])
    dev.delay(200)
    assert g.get(0x200000 + big) == [0] and g.get(0x300000 + big) == [0]
    cp_paused, sdma_paused = g.get(FENCE) == [0], g.get(FENCE + 8) == [0]
    assert cp_paused == sdma_paused == (dev.__class__.__name__ != "RefModel"), "the RTL catches both fills in hand"
    st, sd = g.r("STATUS"), g.r("SDMA_STATUS")
    p = int(cp_paused)
    assert [g.f("STATUS", f, st) for f in ("IDLE", "RB_EMPTY", "HALTED", "ERROR", "WAITING", "DMA_BUSY", "LEVEL")] \
        == [1 - p, 1 - p, 0, 0, 0, 0, H("IB_LEVEL_RING")], hex(st)
    assert [g.f("SDMA_STATUS", f, sd) for f in ("IDLE", "RB_EMPTY", "HALTED", "ERROR", "WAITING", "LEVEL")] \
        == [1 - p, 1 - p, 0, 0, 0, H("IB_LEVEL_RING")], hex(sd)
    rp, srp = (7, 20) if p else (15, 44)
    assert (g.r("RB_RPTR"), g.r("RB_WPTR"), g.get(RPTR_WB)) == (rp, 15, [rp])
    assert (g.r("SDMA_RB_RPTR"), g.r("SDMA_RB_WPTR"), g.get(SDMA_RPTR_WB)) == (srp, 44, [srp])
    if p:
        assert g.get(FENCE, 3) == [0, 0, 0] and g.r("IH_WPTR") == 0 and g.r("INT_STATUS") == 0
    # queue 0: a reset drops the rest
    g.queue_reset(sdma=False)
    dev.delay(200)
    assert g.get(FENCE) == [0xE1 * (1 - p)] and g.r("IH_WPTR") == 64 * (1 - p) and g.f("STATUS", "RB_EMPTY") == 1
    # the SDMA: enabled again, it runs on from its rptr
    g.w("SDMA_RB_CNTL", RB_ENABLE=1, RB_SIZE=SDMA_RING_DW.bit_length() - 1, RPTR_WRITEBACK_ENABLE=1)
    entries = g.ih_pop()
    assert [(ih_field(e, "SOURCE_ID"), e[4]) for e in entries][-1] == (H("IH_SOURCE_SDMA_TRAP"), 0xE2)
    assert len(entries) == 2 - p and g.get(FENCE + 8) == [0xE2]
    g.until("SDMA idle", lambda: g.f("SDMA_STATUS", "IDLE"))
    assert g.get(SDMA_RPTR_WB) == [44] and g.r("SDMA_RB_RPTR") == 44


def check_soft_reset_with_all_three_rings_busy(dev):
    """CONTROL.SOFT_RESET while queue 0's fill, queue 1's long WRITE_DATA and the SDMA's fill
    run: from the first read after the write, each engine's IDLE reads 1 only with its part
    done (its pointers 0, its error clear), and once all three do the bus is quiet: nothing
    the engines had in hand writes memory afterwards, no fence, no entry (IH_WPTR 0; the model,
    whose doorbells' packets all ran before the next MMIO, has the fences and IH_WPTR 0). The
    settings are kept, so after IH_RPTR = 0 and the write-back dwords cleared each ring runs
    again from 0 without being programmed again."""
    g = Bare(dev).bring_up().sdma_up()
    g.w64("CP_HQD1_RB_BASE_LO", "CP_HQD1_RB_BASE_HI", RING1 >> 8)
    g.w("CP_HQD1_RB_SIZE", LOG2_QWORDS=RING_DW.bit_length() - 2)
    g.w64("CP_HQD1_RB_RPTR_ADDR_LO", "CP_HQD1_RB_RPTR_ADDR_HI", RPTR1_WB)
    g.w("CP_HQD1_RB_CNTL", ENABLE=1, RPTR_WB=1)
    big = 1 << 15
    g.submit(dma_fill(0x200000, 0x55555555, big), release_mem(FENCE, 0xA0, ctxid=0xA0))
    g.put(RING1, write_data(OUT, list(range(1, 49))) + release_mem(FENCE + 4, 0xA1, ctxid=0xA1))
    g.w("CP_HQD1_RB_DOORBELL", 52 + 8)
    g.sdma_submit(sdma_fill(0x300000, 0x66666666, big), sdma_fence(FENCE + 8, 0xA2), sdma_trap(0xA2))
    dev.delay(40)
    g.w("CONTROL", SOFT_RESET=1)
    parts = {"STATUS": ("RB_RPTR", "RB_WPTR", "CP_ERROR"), "CP_HQD1_STATUS": ("CP_HQD1_RB_RPTR", "CP_HQD1_RB_WPTR",
             "CP_HQD1_ERROR"), "SDMA_STATUS": ("SDMA_RB_RPTR", "SDMA_RB_WPTR", "SDMA_ERROR")}
    done = set()
    for _ in range(TIMEOUT // 10):
        for st, regs in parts.items():
            if st not in done and g.f(st, "IDLE"):
                assert [g.r(r) for r in regs] == [0, 0, 0] and not g.f(st, "ERROR"), f"{st}.IDLE before its reset"
                done.add(st)
        if len(done) == 3:
            break
        dev.delay(10)
    assert len(done) == 3, f"not done: {set(parts) - done}"
    snap = [g.get(0x200000, big // 4), g.get(0x300000, big // 4), g.get(OUT, 48)]
    dev.delay(1000)
    assert [g.get(0x200000, big // 4), g.get(0x300000, big // 4), g.get(OUT, 48)] == snap, "written after the reset"
    assert g.r("IH_WPTR") == 0 and not g.f("INT_STATUS", "IH_PENDING") and not dev.wait_irq(20)
    if dev.__class__.__name__ != "RefModel":  # the RTL: every ring caught in hand
        assert g.get(FENCE, 3) == [0, 0, 0] and g.get(IH_WB) == [0] and g.r("INT_STATUS") == 0
        assert g.get(0x200000 + big - 4) == [0] and g.get(0x300000 + big - 4) == [0], "the fills cut short"
    else:  # the model ran each doorbell's packets before the next MMIO: all done before the reset
        assert g.get(FENCE, 3) == [0xA0, 0xA1, 0xA2] and g.f("INT_STATUS", "EOP")
        g.w("INT_STATUS", EOP=1)
    # settings kept: each ring runs again from 0
    g.w("IH_RPTR", 0)
    for a in (RPTR_WB, RPTR1_WB, SDMA_RPTR_WB, IH_WB):
        g.put(a, [0])
    g.wptr = g.sdma_wptr = g.ih_rptr = 0
    g.submit(release_mem(FENCE, 0xB0, ctxid=0xB0))
    g.put(RING1, release_mem(FENCE + 4, 0xB1, ctxid=0xB1))
    g.w("CP_HQD1_RB_DOORBELL", 8)
    g.sdma_submit(sdma_fence(FENCE + 8, 0xB2), sdma_trap(0xB2))
    got = []
    while len(got) < 3:
        got += [e[4] for e in g.ih_pop()]
    assert sorted(got) == [0xB0, 0xB1, 0xB2] and g.get(FENCE, 3) == [0xB0, 0xB1, 0xB2]


CHECKS = [check_cp_ring_fence_and_eop, check_sdma_ring_fence_and_trap, check_cp_bad_packet_and_soft_reset,
          check_sdma_bad_packet_and_queue_reset, check_queue_resets_under_load_and_sdma_doorbell_error,
          check_bring_up_all_three_rings_at_once_ih_overflow_and_shut_down,
          check_every_cp_error_kind_on_queue_1_and_its_reset_while_queue_0_and_the_sdma_run,
          check_shutdown_with_work_left_paused_then_reset_or_resumed, check_soft_reset_with_all_three_rings_busy]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_bare_metal_driver_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())
