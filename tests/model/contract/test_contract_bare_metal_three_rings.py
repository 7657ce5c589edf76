"""The bare-metal driver (tests/model/contract/bare_metal_driver.py: written from the generated
C headers, docs/hardware.md and docs/packets.md alone, packets by hand) on all three rings
at once (CP queue 0, CP queue 1, the SDMA; one ring at a time: test_contract_bare_metal.py):
hardware.md "Bring-up and shutdown" step by step with an IH overflow, every CP error kind on
queue 1 and its queue reset while queue 0 and the SDMA run, a shutdown that finds work left
(paused, then reset or resumed), and CONTROL.SOFT_RESET with all three rings busy.

The checks run on the reference model here and, through tests/cosim/driver_checks.py, on the
RTL (Verilator and Icarus), as contract_bare_metal__check_*, the name of the file they were
split from.
"""

from __future__ import annotations

from tests.model.contract.bare_metal_driver import (FENCE, H, IB, IH, IH_WB, OUT, RING, RING_DW, RPTR_WB, SDMA_RING_DW,
                                                    SDMA_RPTR_WB, TIMEOUT, Bare, dma_fill, ih_field, indirect_buffer,
                                                    nop, release_mem, sdma_fence, sdma_fill, sdma_trap,
                                                    sdma_write_linear, write_data)
from tests.model.contract.on_the_model import on_the_model


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


CHECKS = [check_bring_up_all_three_rings_at_once_ih_overflow_and_shut_down,
          check_every_cp_error_kind_on_queue_1_and_its_reset_while_queue_0_and_the_sdma_run,
          check_shutdown_with_work_left_paused_then_reset_or_resumed,
          check_soft_reset_with_all_three_rings_busy]


test_bare_metal_driver_on_the_model = on_the_model(CHECKS, name="test_bare_metal_driver_on_the_model")
