"""The bare-metal driver (tests/model/contract/bare_metal_driver.py: written from the generated
C headers, docs/hardware.md and docs/packets.md alone, packets by hand) on one ring at a
time. Each check is one bring-up: the CP ring with its fence and EOP entry, the SDMA ring
with its fence and trap, and one bad packet on each engine with its error registers, IH
entry and the documented recovery, and both queue resets under load, with an SDMA doorbell
error (all three rings at once, bring-up and shutdown: test_contract_bare_metal_three_rings.py).
The checks run on the reference model here and, through tests/cosim/driver_checks.py, on the
RTL (Verilator and Icarus).
"""

from __future__ import annotations

from tests.model.contract.bare_metal_driver import (FENCE, H, IB, IH_WB, OUT, RING, RING_DW, RPTR_WB, SDMA_RING,
                                                    SDMA_RING_DW, SDMA_RPTR_WB, TIMEOUT, Bare, dma_fill, ih_field,
                                                    indirect_buffer, nop, release_mem, sdma_copy, sdma_fence, sdma_fill,
                                                    sdma_trap, sdma_write_linear, write_data)
from tests.model.contract.on_the_model import on_the_model


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


CHECKS = [check_cp_ring_fence_and_eop, check_sdma_ring_fence_and_trap, check_cp_bad_packet_and_soft_reset,
          check_sdma_bad_packet_and_queue_reset, check_queue_resets_under_load_and_sdma_doorbell_error]


test_bare_metal_driver_on_the_model = on_the_model(CHECKS, name="test_bare_metal_driver_on_the_model")
