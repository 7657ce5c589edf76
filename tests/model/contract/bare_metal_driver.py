"""A minimal register-level driver, as an outside driver writer would write one from the
generated C headers (include/gpucosim_regs.h, include/gpucosim_packets.h: read here for
their numbers), docs/hardware.md and the packet tables of docs/packets.md: packets are
written by hand, dword by dword, each from its table (no builder, no KMD, no spec/ code).
Its checks: test_contract_bare_metal.py and test_contract_bare_metal_three_rings.py.

tests/model/contract/contract_driver.py parses the docs' tables; this one takes every register
offset, field position and IH constant from the headers a C driver would #include, so a
header that disagreed with the device fails its checks.

Where the docs left this driver guessing, the answer went into them and stays pinned here:
the irq rises before the IH wptr write-back lands for every entry (ih_pop reads IH_WPTR),
a queue reset is done only when its IDLE reads 1 (queue_reset), the SDMA's doorbell errors
report ADDR in bytes and OFFSET in dwords, TIMESTAMP_LO/HI are not latched (timestamp).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

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
