"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone): each supported value of a listed field does what the docs say it does, not
only runs without an error (test_contract_driver.py's check_every_listed_value_and_reserved_bit
and test_contract_sdma_packets.py's SDMA one check that each runs, or is UNSUPPORTED).

docs/hardware.md and docs/packets.md: WRITE_DATA "DST_SEL MEMORY, MEMORY_SYNC and TC_L2 all
write memory"; ENGINE_SEL / ENGINE = PFP "the same as ME" (the gfx9 table); RELEASE_MEM
DST_SEL TC_L2 and the cache controls "accepted and named; no effect": the write goes to
memory; its EVENT_TYPE an open list; DMA_DATA SRC_SEL ADDRESS and ADDRESS_TC_L2 copy, DATA
fills, DST_SEL ADDRESS and ADDRESS_TC_L2 write memory. The SDMA's POLL_REGMEM FUNC: "the
others as the CP's WAIT_REG_MEM", whose compare is unsigned: (value & MASK) FUNC VALUE, with
values either side of bit 31, where a signed compare would answer otherwise.

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (IH_BASE, IH_WB, M32, OUT, SRING, Gpu, IhRing, SdmaRing, bring_up,
                                                  dma_data, lo_hi, pm4, release_mem, sdma, write_data)


def check_cp_listed_values_act_as_documented(dev):
    """Every supported DST_SEL and ENGINE_SEL of WRITE_DATA writes its data to memory; a
    WAIT_REG_MEM with ENGINE PFP waits as one with ME; RELEASE_MEM with DST_SEL MEMORY and
    TC_L2, each INT_SEL that is supported and three EVENT_TYPEs (both listed, one not) writes
    its data, and appends an EOP entry and sets INT_STATUS.EOP exactly for SEND_INT and
    SEND_INT_ON_CONFIRM; DMA_DATA copies from SRC_SEL ADDRESS and ADDRESS_TC_L2, fills with
    DATA, into DST_SEL ADDRESS and ADDRESS_TC_L2, with ENGINE ME and PFP."""
    g, ring, ih = bring_up(dev)
    k = 0
    for dst in ("MEMORY", "MEMORY_SYNC", "TC_L2"):
        for eng in ("ME", "PFP"):
            a = OUT + 8 * k
            g.w32(a, [0, 0])
            ring.run(write_data(a, [0x1000 + k, 0x2000 + k], DST_SEL=dst, ENGINE_SEL=eng))
            assert g.fields("STATUS")["ERROR"] == 0, (dst, eng, g.fields("CP_ERROR"))
            assert g.r32(a, 2) == [0x1000 + k, 0x2000 + k], f"WRITE_DATA DST_SEL {dst} ENGINE_SEL {eng}: {g.r32(a, 2)}"
            k += 1
    flag = OUT + 0x100
    for eng in ("ME", "PFP"):
        g.w32(flag, [0])
        w = pm4("WAIT_REG_MEM", **lo_hi("ADDR", flag, 2), REFERENCE=5, MASK=M32, FUNCTION="EQ", MEM_SPACE="MEMORY",
                POLL_INTERVAL=4, ENGINE=eng)
        ring.submit(w, write_data(flag + 4, [0x77]))
        g.waiting()
        g.dev.delay(200)
        assert g.fields("STATUS")["WAITING"] == 1 and g.r32(flag + 4) == 0, f"WAIT_REG_MEM ENGINE {eng} did not wait"
        g.w32(flag, [5])
        g.idle()
        assert g.r32(flag + 4) == 0x77, f"WAIT_REG_MEM ENGINE {eng} did not pass"
        g.w32(flag + 4, [0])
    ih.pop()
    g.write("INT_STATUS", g.value("INT_STATUS", EOP=1))
    k = 0
    ints = ("NONE", "SEND_INT", "SEND_INT_ON_CONFIRM", "SEND_DATA_ON_CONFIRM")
    for dst in ("MEMORY", "TC_L2"):
        for int_sel in ints:
            for event in (20, 40, 0x3F):
                a = OUT + 0x200 + 8 * k
                g.w32(a, [0, 0])
                ring.run(release_mem(a, 0xE0_0000_0000 | k, DATA_SEL="DATA_64", DST_SEL=dst, INT_SEL=int_sel,
                                     EVENT_TYPE=event, INT_CTXID=k))
                assert g.fields("STATUS")["ERROR"] == 0, (dst, int_sel, event, g.fields("CP_ERROR"))
                assert g.r32(a, 2) == [k, 0xE0], f"RELEASE_MEM DST_SEL {dst} EVENT_TYPE {event}: {g.r32(a, 2)}"
                entries = ih.pop()
                eop = g.field("INT_STATUS", "EOP")
                if int_sel in ("SEND_INT", "SEND_INT_ON_CONFIRM"):
                    assert [(ih.source(e), e["DATA0"], e["DATA1"], e["DATA3"]) for e in entries] == \
                        [("EOP", k, k, a)] and eop == 1, f"RELEASE_MEM INT_SEL {int_sel}: {entries}, EOP {eop}"
                else:
                    assert entries == [] and eop == 0, f"RELEASE_MEM INT_SEL {int_sel}: {entries}, EOP {eop}"
                g.write("INT_STATUS", g.value("INT_STATUS", EOP=1))
                k += 1
    src, dst_base = OUT + 0x1000, OUT + 0x2000
    g.w32(src, [0x0A0B0C0D, 0x01020304, 0x11121314, 0x21222324])
    k = 0
    for s_sel in ("ADDRESS", "ADDRESS_TC_L2", "DATA"):
        for d_sel in ("ADDRESS", "ADDRESS_TC_L2"):
            for eng in ("ME", "PFP"):
                d = dst_base + 0x20 * k
                g.w32(d, [0] * 5)
                fill = 0xF1F2F3F4 - k
                p = dma_data(d + 1, fill if s_sel == "DATA" else src + 1, 13, SRC_SEL=s_sel, DST_SEL=d_sel,
                             ENGINE=eng, CP_SYNC=1)
                ring.run(p)
                assert g.fields("STATUS")["ERROR"] == 0, (s_sel, d_sel, eng, g.fields("CP_ERROR"))
                got = b"".join(v.to_bytes(4, "little") for v in g.r32(d, 5))
                moved = (fill.to_bytes(4, "little") * 4)[1:14] if s_sel == "DATA" else \
                    b"".join(v.to_bytes(4, "little") for v in g.r32(src, 4))[1:14]
                assert got == b"\0" + moved + b"\0" * 6, \
                    f"DMA_DATA SRC_SEL {s_sel} DST_SEL {d_sel} ENGINE {eng}: {got.hex()}"
                k += 1


def check_sdma_poll_regmem_compares_unsigned(dev):
    """POLL_REGMEM with RETRY_COUNT 0 reads once: (value & MASK) FUNC VALUE holding moves on
    (the FENCE after it is written, no entry); not holding gives up with its POLL_TIMEOUT
    entry (DATA2 the dword read). Each of LT, LE, EQ, NE, GE, GT with a value that holds and
    one that does not, either side of bit 31 (unsigned: 0x8000_0000 is above 0x7FFF_FFFF),
    and a mask that leaves bits out."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    s = SdmaRing(g, SRING, 8)
    flag, fence = OUT + 0x80, OUT + 0x90
    cases = [("LT", M32, 5, 4, 6), ("LT", M32, 0x8000_0000, 0x7FFF_FFFF, 0x8000_0000),
             ("LE", 0xFF, 5, 0x105, 6), ("LE", M32, 0x7FFF_FFFF, 0x7FFF_FFFF, 0xFFFF_FFFF),
             ("EQ", 0xF0, 0x30, 0x131, 0x20), ("NE", M32, 7, 8, 7),
             ("GE", M32, 0x8000_0000, 0x8000_0000, 0x7FFF_FFFF), ("GE", 0xFFFF, 0x8000, 0x1_8000, 0x7FFF),
             ("GT", M32, 1, 0x8000_0000, 1), ("GT", M32, 0x7FFF_FFFF, 0xFFFF_FFFF, 0)]
    for k, (fn, mask, ref, holds, fails) in enumerate(cases):
        for value, ok in ((holds, True), (fails, False)):
            g.w32(flag, [value])
            g.w32(fence, [0])
            s.run(sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=ref, MASK=mask, FUNC=fn, MEM_POLL="MEMORY",
                       RETRY_COUNT=0, INTERVAL=1),
                  sdma("FENCE", DATA=0x100 + k, **lo_hi("ADDR", fence, 2)))
            assert g.fields("SDMA_STATUS")["ERROR"] == 0, g.fields("SDMA_ERROR")
            assert g.r32(fence) == 0x100 + k, f"{fn}: the FENCE after the poll"
            entries = ih.pop() if ok else g.until(lambda: ih.pop() or None, f"{fn}'s POLL_TIMEOUT entry")
            what = f"{value:#x} & {mask:#x} {fn} {ref:#x}"
            if ok:
                assert entries == [], f"{what} holds: no POLL_TIMEOUT, got {entries}"
            else:
                assert [(ih.source(e), e["DATA0"], e["DATA2"]) for e in entries] == \
                    [("SDMA_POLL_TIMEOUT", flag, value)], f"{what} does not hold: {entries}"


CHECKS = [check_cp_listed_values_act_as_documented, check_sdma_poll_regmem_compares_unsigned]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())
