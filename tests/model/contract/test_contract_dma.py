"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone; split by concept from test_contract_driver.py, which has the CP's ring and
packets): the CP's DMA engine. DMA_DATA copies and fills, across pages at odd alignments,
BYTE_COUNT and the counters, its errors and which burst and beat they name at every bus
width, a transfer whose reads and writes both fail, and the read pointer passing a transfer
before its data while idle waits for it.

The `check_*(dev)` bodies run here on the reference model at 64-, 32- and 256-bit buses and,
through CHECKS and tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus (as
contract_driver__check_*, the name of the file they were split from).
"""

from __future__ import annotations

from tests.model.contract.contract_driver import (M32, OUT, RING, RPTR_WB, SRING, SdmaRing, bring_up, dma_data,
                                                  expect_error, lo_hi, pm4, pm4_packets, release_mem, sdma, write_data)
from tests.model.contract.on_the_model import on_the_model


def check_dma_data(dev):
    """Copies at any alignment, fills (byte a gets byte a mod 4), zero length, the fence after
    DMA work sees the data, the byte counters."""
    g, ring, ih = bring_up(dev)
    src, dst = 0x100000, 0x200000
    pattern = [(0x01020304 * k) & M32 for k in range(64)]
    g.w32(src, pattern)
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    ring.run(dma_data(dst + 3, src + 1, 101), release_mem(OUT, 0xF00D, INT_SEL="SEND_INT"))
    want = bytes(g.dev.mem[src + 1:src + 102])
    assert bytes(g.dev.mem[dst + 3:dst + 104]) == want and g.dev.mem[dst + 2] == 0 and g.dev.mem[dst + 104] == 0
    assert g.r32(OUT) == 0xF00D and len(ih.pop()) == 1
    assert g.read("PERF_DMA_BYTES_WRITTEN") == 101
    ring.run(dma_data(dst + 0x1001, 0x11223344, 10, SRC_SEL="DATA"), dma_data(dst + 0x2000, src, 0))
    got = bytes(g.dev.mem[dst + 0x1000:dst + 0x100C])
    assert got == bytes([0, 0x33, 0x22, 0x11, 0x44, 0x33, 0x22, 0x11, 0x44, 0x33, 0x22, 0]), got.hex()
    assert g.r32(dst + 0x2000) == 0, "a zero-length transfer moves nothing"
    assert g.read("PERF_DMA_BYTES_WRITTEN") == 111
    assert g.read("PERF_PACKETS", pm4_packets()["DMA_DATA"].index) == 3
    st = g.fields("STATUS")
    assert (st["DMA_BUSY"], st["IDLE"]) == (0, 1)
    # The fence after DMA work (no CP_SYNC) is written after the data: once the CPU sees the
    # fence, the copy is complete.
    g.w32(src, [(k * 0x9E3779B1) & M32 for k in range(4096)])
    ring.submit(dma_data(dst + 0x4000, src, 0x4000), release_mem(OUT + 8, 0xFEED))
    g.until(lambda: g.r32(OUT + 8) == 0xFEED, "the fence")
    assert bytes(g.dev.mem[dst + 0x4000:dst + 0x8000]) == bytes(g.dev.mem[src:src + 0x4000])


def check_dma_errors_and_counters(dev):
    """A DMA read error names the first byte needed in the faulting beat, a write error the
    first byte of the faulting burst; PERF_DMA_BYTES_READ counts whole bus beats (64-bit bus);
    DMA_BYTE_COUNT comes after the field checks; a packet failing its checks is not counted."""
    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    end = 64 << 20
    assert g.fields("CAPS")["DMA_MAX_LOG2"] == 20
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    ring.run(dma_data(0x200003, 0x100001, 101, CP_SYNC=1))
    assert g.read("PERF_DMA_BYTES_READ") == g.beats_bytes(0x100001, 101) and g.read("PERF_DMA_BYTES_WRITTEN") == 101
    at = ring.wptr + 2
    ring.submit(pm4("NOP", [0]), dma_data(0x200000, end - 0x1E, 64, CP_SYNC=1))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end, at)
    ring.submit(dma_data(end - 8, 0x100000, 16, CP_SYNC=1))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end, 0)
    # Without CP_SYNC: the transfer queued behind a failing one writes nothing, and a
    # WRITE_DATA after them (it waits for every transfer) never runs.
    g.w32(0x100000, [0xC0DE] * 64)
    ring.submit(dma_data(0x200000, end - 0x100, 0x200), dma_data(0x240000, 0x100000, 256),
                write_data(OUT + 0x300, [0x301]))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end, 0)
    assert g.r32(0x240000, 64) == [0] * 64 and g.r32(OUT + 0x300) == 0
    ring.submit(dma_data(0x200000, 0x100000, (1 << 20) + 1, SRC_SEL="GDS"))
    expect_error(ring, ih, "UNSUPPORTED", "RING", P["DMA_DATA"].opcode, RING, 0)
    # A packet that fails its checks is not counted in PERF_PACKETS.
    n = g.read("PERF_PACKETS", P["WRITE_DATA"].index)
    at = ring.wptr
    ring.submit(write_data(OUT, [1], DST_SEL="REGISTER"))
    expect_error(ring, ih, "UNSUPPORTED", "RING", P["WRITE_DATA"].opcode, RING + 4 * at, at)
    assert g.read("PERF_PACKETS", P["WRITE_DATA"].index) == n


def check_dma_data_edges_and_counters(dev):
    """DMA_DATA across 4 KiB pages at odd alignments (copy and fill), BYTE_COUNT at
    2^DMA_MAX_LOG2 and one more (DMA_BYTE_COUNT at the header), errors of a read and of a write
    starting beyond memory at an odd byte (ADDR that byte), and exactly what the counters count:
    PERF_DWORDS_FETCHED the ring's dwords, PERF_PACKETS the packets by kind, the DMA byte
    counters whole beats read and bytes written (a fill reads nothing), a DMA_DATA cancelled
    behind a failing one not counted."""
    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    end = 64 << 20
    src, dst = 0x100000, 0x300000
    words = [((k + 7) * 0x9E3779B1) & M32 for k in range(0x1000)]
    g.w32(src, words)
    pat = b"".join(w.to_bytes(4, "little") for w in words)
    g.dev.mem[dst:dst + 0x6000] = [0xEE] * 0x6000
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    ring.run(dma_data(dst + 0xFF9, src + 0xFF3, 0x2011), dma_data(dst + 0x3FFE, 0xA1B2C3D4, 0x1003, SRC_SEL="DATA"),
             dma_data(dst + 0x5FFF, src, 1, CP_SYNC=1), pm4("NOP", [0, 0]))
    assert bytes(g.dev.mem[dst + 0xFF8:dst + 0x300B]) == bytes([0xEE]) + pat[0xFF3:0x3004] + bytes([0xEE])
    fill = bytes([0xD4, 0xC3, 0xB2, 0xA1][x % 4] for x in range(dst + 0x3FFE, dst + 0x5001))
    assert bytes(g.dev.mem[dst + 0x3FFD:dst + 0x5002]) == bytes([0xEE]) + fill + bytes([0xEE])
    assert bytes(g.dev.mem[dst + 0x5FFE:dst + 0x6001]) == bytes([0xEE, pat[0], 0])
    counted = {k: g.read("PERF_PACKETS", P[k].index) for k in P}
    assert counted == {k: {"DMA_DATA": 3, "NOP": 1}.get(k, 0) for k in P}, counted
    assert g.read("PERF_DWORDS_FETCHED") == 3 * 7 + 3 == g.read("PERF_Q0_DWORDS_FETCHED")
    assert g.read("PERF_DMA_BYTES_WRITTEN") == 0x2011 + 0x1003 + 1
    assert g.read("PERF_DMA_BYTES_READ") == g.beats_bytes(src + 0xFF3, 0x2011) + g.beats_bytes(src, 1)
    # BYTE_COUNT 2^20 is taken (a 1 MiB fill on the model and Verilator; on Icarus, about 2,300
    # cycles/s, one that meets memory's end 0x100 bytes in); 2^20 + 1 is DMA_BYTE_COUNT at the
    # packet's header
    big = 0x1000000
    if g.dev.name != "icarus":
        ring.submit(dma_data(big + 3, 0x5A5A5A5A, 1 << 20, SRC_SEL="DATA"), write_data(OUT, [0x61]))
        g.until(lambda: g.r32(OUT) == 0x61, "a 1 MiB fill", cycles=1_000_000, step=2000)
        assert g.read("PERF_DMA_BYTES_WRITTEN") == 0x2011 + 0x1003 + 1 + (1 << 20)
        assert g.r32(big) == 0x5A000000 and g.r32(big + (1 << 20)) == 0x5A5A5A and g.r32(big + (1 << 20) + 4) == 0
        g.idle()
    else:
        at = ring.wptr
        ring.submit(dma_data(end - 0x100, 0x5A5A5A5A, 1 << 20, SRC_SEL="DATA", CP_SYNC=1))
        expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end, at)
    at = ring.wptr
    ring.submit(dma_data(big, 0x5A5A5A5A, (1 << 20) + 1, SRC_SEL="DATA"))
    expect_error(ring, ih, "DMA_BYTE_COUNT", "RING", P["DMA_DATA"].opcode, RING + 4 * at, at)
    # a read starting beyond memory at an odd byte: ADDR that byte; a write likewise
    ring.submit(dma_data(dst, end + 0x25, 0x40, CP_SYNC=1))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end + 0x25, 0)
    ring.submit(dma_data(end + 0x13, src, 0x40, CP_SYNC=1))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end + 0x13, 0)
    ring.submit(dma_data(end + 0x7, 0x1, 0x40, SRC_SEL="DATA", CP_SYNC=1))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end + 0x7, 0)
    # PERF_PACKETS counts the failing DMA_DATA, not the one cancelled behind it (the RTL has
    # parsed it: its PERF_DWORDS_FETCHED depends on timing, this count does not)
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    ring.submit(dma_data(0x200000, end - 0x100, 0x200), dma_data(0x240000, src, 256), write_data(OUT, [0x63]))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end, 0)
    assert [g.read("PERF_PACKETS", P[k].index) for k in ("DMA_DATA", "WRITE_DATA")] == [1, 0]
    ring.run(write_data(OUT, [0x62]))
    assert g.r32(OUT) == 0x62


def check_dma_errors_name_the_faulting_burst_and_beat_at_every_bus_width(dev):
    """A DMA_DATA error in the middle of a transfer, where the memory answers SLVERR for 64
    bytes that lie inside a burst (not at its start): a write names the first byte of the
    faulting burst, bursts being split at 16-beat boundaries (16 · 2^CAPS.BUS_BYTES_LOG2
    bytes, below 4 KiB), so that byte moves with the bus width (the transfer's first byte when
    its first burst faults); a read names the first byte it needed in the faulting beat; the
    SDMA's CONSTANT_FILL and COPY_LINEAR report as DMA_DATA does; a transfer queued before
    the failing one is complete."""
    from tests.model.contract.contract_driver import SRING, SdmaRing, expect_sdma_error, sdma_packets

    g, ring, ih = bring_up(dev)
    P, S = pm4_packets(), sdma_packets()
    burst = 16 << g.fields("CAPS")["BUS_BYTES_LOG2"]
    w = 0x70000
    bad = w + 0x140  # 64-byte aligned: whole beats at every width up to 512 bits
    first_of_burst = lambda dst: max(dst, bad // burst * burst)  # noqa: E731
    dev.mem_model.configure(error_window=(bad, bad + 0x40, "SLVERR"))
    try:
        g.w32(0x100000, list(range(1, 0x101)))
        ring.submit(dma_data(OUT, 0x100000, 0x400), dma_data(w + 3, 0x1234_5678, 0x400, SRC_SEL="DATA"))
        expect_error(ring, ih, "BUS_SLVERR", "RING", P["DMA_DATA"].opcode, first_of_burst(w + 3), 7)
        assert g.r32(OUT, 0x100) == list(range(1, 0x101)), "the transfer before the failing one is complete"
        for dst in (w + 0x105, w + 0x13F, w + 0x140, w + 0x15D):
            ring.submit(dma_data(dst, 0x100000, 0x200, CP_SYNC=1))
            expect_error(ring, ih, "BUS_SLVERR", "RING", P["DMA_DATA"].opcode, first_of_burst(dst), 0)
        for src, at in ((w + 0x101, bad), (w + 0x13F, bad), (w + 0x147, w + 0x147)):
            ring.submit(dma_data(OUT + 0x1000, src, 0x200, CP_SYNC=1))
            expect_error(ring, ih, "BUS_SLVERR", "RING", P["DMA_DATA"].opcode, at, 0)
        s = SdmaRing(g, SRING, 6)
        s.submit(sdma("CONSTANT_FILL", SRC_DATA=7, COUNT=0x3FF, **lo_hi("DST_ADDR", w + 0x21)))
        expect_sdma_error(s, ih, "BUS_SLVERR", "RING", S["CONSTANT_FILL"].opcode, first_of_burst(w + 0x21), 0)
        s.submit(sdma("COPY_LINEAR", COUNT=0x1FF, **lo_hi("SRC_ADDR", w + 0x11), **lo_hi("DST_ADDR", OUT + 0x2000)))
        expect_sdma_error(s, ih, "BUS_SLVERR", "RING", S["COPY_LINEAR"].opcode, bad, 0)
    finally:
        dev.mem_model.configure(error_window=None)


def check_a_transfer_whose_reads_and_writes_both_fail_reports_one(dev):
    """A copy whose source and destination both meet an error (the testbench memory's SLVERR
    window at ERR) reports one error, the one answered first (docs/hardware.md, the DMA
    engine): the read's (its faulting beat's first needed byte) or the write's (its burst's
    first byte). A source failing at its first byte is reported whatever the destination
    does, as no write goes out before its data is read; a destination failing at once with
    the source failing 256 bytes on can report either on the RTL, whose reads run ahead of its
    writes (on Verilator, 64-bit bus, default memory, the read's), while the reference model, without
    time, reports the error at the lower offset into the transfer (there the write's). The
    CP's DMA_DATA and the SDMA's COPY_LINEAR alike."""
    from tests.model.contract.contract_driver import SRING, SdmaRing, expect_sdma_error, sdma_packets

    g, ring, ih = bring_up(dev)
    P, S = pm4_packets(), sdma_packets()
    err = 0x70000
    model = dev.name == "model"
    s = SdmaRing(g, SRING, 8)
    dev.mem_model.configure(error_window=(err, err + 0x1000, "SLVERR"))
    try:
        def cp(dst, src, n):
            ring.submit(dma_data(dst, src, n, CP_SYNC=1))
            g.idle()
            addr = g.read("CP_ERROR_ADDR_LO") | g.read("CP_ERROR_ADDR_HI") << 32
            expect_error(ring, ih, "BUS_SLVERR", "RING", P["DMA_DATA"].opcode, addr, 0)
            return addr

        def sd(dst, src, n):
            s.submit(sdma("COPY_LINEAR", COUNT=n - 1, **lo_hi("SRC_ADDR", src), **lo_hi("DST_ADDR", dst)))
            g.idle("SDMA_STATUS")
            addr = g.read("SDMA_ERROR_ADDR_LO") | g.read("SDMA_ERROR_ADDR_HI") << 32
            expect_sdma_error(s, ih, "BUS_SLVERR", "RING", S["COPY_LINEAR"].opcode, addr, 0)
            return addr

        for run in (cp, sd):
            # the source fails at its first byte, the destination 256 bytes on: the read's
            assert run(err - 0x100, err + 0x805, 0x200) == err + 0x805, "the first byte it needed"
            # the destination fails at once, the source 256 bytes on: either
            got = run(err + 0x800, err - 0x100, 0x200)
            assert got == (err + 0x800 if model else got) and got in (err, err + 0x800), \
                f"{run.__name__}: {got - err:+#x} from ERR"
    finally:
        dev.mem_model.configure(error_window=None)


def check_rptr_passes_a_transfer_before_its_data_idle_waits_for_it(dev):
    """A DMA_DATA without CP_SYNC (an SDMA CONSTANT_FILL or COPY_LINEAR) is passed once its
    transfer is queued: on the RTL RB_RPTR (SDMA_RB_RPTR), the rptr write-back and RB_EMPTY
    show the ring drained while the transfer still writes, IDLE reads 0 (and STATUS.DMA_BUSY
    1) until its last byte is answered; so a driver that reads the destination waits for IDLE
    (or a fence written after the transfer), not for the rptr. The model, without time, has
    the transfer done when the rptr passes it."""
    rtl = dev.name != "model"
    g, ring, ih = bring_up(dev)
    swb = OUT + 0x800
    s = SdmaRing(g, SRING, 8, swb)
    big, n = 0x400000, 0x10000  # 64 KiB: 8,192 cycles at least on a 64-bit bus
    for engine in ("CP", "SDMA"):
        g.dev.mem[big:big + n] = [0] * n
        if engine == "CP":
            ring.submit(dma_data(big, 0x5A5A5A5A, n, SRC_SEL="DATA"))
            r, wb, status, rptr = ring, RPTR_WB, "STATUS", "RB_RPTR"
        else:
            s.submit(sdma("CONSTANT_FILL", SRC_DATA=0x5A5A5A5A, COUNT=n - 1, **lo_hi("DST_ADDR", big)))
            r, wb, status, rptr = s, swb, "SDMA_STATUS", "SDMA_RB_RPTR"
        g.until(lambda: g.r32(wb) == r.wptr, f"{engine}: the rptr write-back past the fill")
        st = g.fields(status)
        assert g.read(rptr) == r.wptr and st["RB_EMPTY"] == 1, (engine, st)
        last = g.r32(big + n - 4)
        if rtl:
            assert st["IDLE"] == 0 and last == 0, f"{engine}: the ring drained, the fill still running: {st} {last:#x}"
            if engine == "CP":
                assert st["DMA_BUSY"] == 1, st
        # (a bound: 64 KiB on a 32-bit bus is 16,384 beats, several times that on slow memory)
        st = g.until(lambda: (lambda f: f if f["IDLE"] else None)(g.fields(status)), f"{engine}: {status}.IDLE",
                     cycles=2_000_000, step=200)
        assert (st["IDLE"], st["RB_EMPTY"], g.r32(big + n - 4), g.r32(big)) == (1, 1, 0x5A5A5A5A, 0x5A5A5A5A), \
            (engine, st)
        if engine == "CP":
            assert st["DMA_BUSY"] == 0, st
    assert not ih.pop()


CHECKS = [check_dma_data, check_dma_errors_and_counters, check_dma_data_edges_and_counters,
          check_dma_errors_name_the_faulting_burst_and_beat_at_every_bus_width,
          check_a_transfer_whose_reads_and_writes_both_fail_reports_one,
          check_rptr_passes_a_transfer_before_its_data_idle_waits_for_it]


test_contract_on_the_model = on_the_model(CHECKS, data_widths=(64, 32, 256))
