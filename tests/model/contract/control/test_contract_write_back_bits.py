"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone): the write-back addresses' low bits. docs/registers.md: RB_RPTR_ADDR_LO
"dword aligned (bits 1:0 are ignored)" (queue 1's CP_HQD1_RB_RPTR_ADDR likewise),
SDMA_RB_RPTR_ADDR_LO and IH_WPTR_ADDR_LO alike; each register is RW over its 32 bits, so it
reads back what was written. docs/hardware.md: the write-back is the pointer, 32 bits. So
with bits 1:0 set each write-back lands whole in the dword below, and the bytes around it
keep theirs. (The SDMA's and the IH's with bits 1:0 set: test_contract_sdma_errors.py and
test_contract_release_mem_and_ih.py; here all four side by side, each with 1, 2 and 3.)

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (IH_BASE, OUT, RING, RING1, SRING, Gpu, IhRing, Ring, SdmaRing, lo_hi,
                                                  release_mem, sdma, write_data)

WB = 0x8800  # four write-back dwords, each between two sentinel dwords: WB + 0x10 * k + 4
SENTINEL = 0xA5A5_A5A5


def check_write_back_addresses_ignore_bits_1_0(dev):
    """Queue 0's and queue 1's rptr, the SDMA's rptr and the IH ring's wptr write-back
    addresses written with bits 1:0 = 1, 2 and 3 (each ring's enable clear meanwhile, as the
    docs require): each register reads back the value as written, and after the next packet
    (entry) the pointer is in the dword at the address with bits 1:0 cleared, all 32 bits of
    it, the dwords before and after untouched."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, WB + 0x34)
    q0 = Ring(g, RING, 6, WB + 0x04)
    q1 = Ring(g, RING1, 6, WB + 0x14, queue=1)
    s = SdmaRing(g, SRING, 6, WB + 0x24)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    for low in (1, 2, 3):
        g.w32(WB, [SENTINEL] * 16)
        q0.set_rptr_wb(WB + 0x04 + low)
        q1.set_rptr_wb(WB + 0x14 + low)
        g.set("SDMA_RB_CNTL", RB_SIZE=6, RB_ENABLE=0, RPTR_WRITEBACK_ENABLE=1)
        g.write("SDMA_RB_RPTR_ADDR_LO", WB + 0x24 + low)
        g.set("SDMA_RB_CNTL", RB_SIZE=6, RB_ENABLE=1, RPTR_WRITEBACK_ENABLE=1)
        ih.set_wptr_wb(WB + 0x34 + low)
        for reg, k in (("RB_RPTR_ADDR_LO", 0), ("CP_HQD1_RB_RPTR_ADDR_LO", 1), ("SDMA_RB_RPTR_ADDR_LO", 2),
                       ("IH_WPTR_ADDR_LO", 3)):
            assert g.read(reg) == WB + 0x10 * k + 4 + low, f"{reg} reads {g.read(reg):#x}: it is RW over 32 bits"
        q0.run(write_data(OUT, [low]))
        q1.run(release_mem(OUT + 8, low, INT_SEL="SEND_INT"))  # (an IH entry: the IH wptr write-back)
        s.run(sdma("FENCE", DATA=low, **lo_hi("ADDR", OUT + 16, 2)))
        g.until(lambda: g.r32(WB + 0x34) == g.read("IH_WPTR"), "the IH wptr write-back")
        got = g.r32(WB, 16)
        want = [SENTINEL] * 16
        want[1], want[5], want[9], want[13] = q0.wptr, q1.wptr, s.wptr, g.read("IH_WPTR")
        assert got == want, f"bits 1:0 = {low}: write-back area {[hex(v) for v in got]}, " \
                            f"wanted {[hex(v) for v in want]}"
        assert g.r32(OUT) == low and g.r32(OUT + 8) == low and g.r32(OUT + 16) == low
        ih.pop()


CHECKS = [check_write_back_addresses_ignore_bits_1_0]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())
