"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone): the SDMA engine's ring and packets. Byte pointers and RB_SIZE, every
packet and every value docs/packets.md lists (and those it does not), COPY_LINEAR,
CONSTANT_FILL and WRITE_LINEAR at their edges, a burst NOP filling the ring, POLL_REGMEM's
spacing, the packet counters (the SDMA's errors, resets and halts:
test_contract_sdma_errors.py).

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (IB1, IH_BASE, IH_WB, M32, OUT, RING, RING1, RPTR1_WB, SRING, SRPTR_WB, Gpu,
                                         IhRing, Ring, SdmaRing, bring_up, dma_data, expect_error, expect_sdma_error,
                                         ib, lo_hi, pm4_packets, release_mem, sdma, sdma_packets, wait_mem, write_data)


def check_sdma_ring_and_packets(dev):
    """Byte pointers, RB_SIZE clamping, every packet, TRAP with and without TRAP_ENABLE,
    POLL_REGMEM's timeout entry, the counters by packet index."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    assert g.read("SDMA_RB_CNTL") == 0x8 and g.fields("SDMA_RB_CNTL")["RB_SIZE"] == 4
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    S = sdma_packets()
    src, dst = 0x100000, 0x200000
    g.w32(src, list(range(100, 140)))
    s.run(sdma("WRITE_LINEAR", [5, 6, 7], **lo_hi("DST_ADDR", OUT, 2), COUNT=2),
          sdma("COPY_LINEAR", COUNT=37, **lo_hi("SRC_ADDR", src + 2), **lo_hi("DST_ADDR", dst + 1)),
          sdma("CONSTANT_FILL", SRC_DATA=0xA1B2C3D4, COUNT=5, **lo_hi("DST_ADDR", dst + 0x101)),
          sdma("NOP", [0, 0], COUNT=2), [0],
          sdma("FENCE", DATA=0xFE, **lo_hi("ADDR", OUT + 12, 2)))
    assert g.r32(OUT, 4) == [5, 6, 7, 0xFE]
    assert bytes(g.dev.mem[dst + 1:dst + 39]) == bytes(g.dev.mem[src + 2:src + 40])
    assert bytes(g.dev.mem[dst + 0x100:dst + 0x108]) == bytes([0, 0xC3, 0xB2, 0xA1, 0xD4, 0xC3, 0xB2, 0])
    n = 4 * (7 + 7 + 5 + 3 + 1 + 4)
    assert (g.read("SDMA_RB_RPTR"), g.read("SDMA_RB_WPTR"), g.r32(SRPTR_WB)) == (n, n, n)
    assert [g.read("PERF_SDMA_PACKETS", S[k].index) for k in ("NOP", "COPY_LINEAR", "WRITE_LINEAR",
                                                              "CONSTANT_FILL", "FENCE")] == [2, 1, 1, 1, 1]
    assert (g.read("PERF_SDMA_BYTES_WRITTEN"), g.read("PERF_SDMA_DWORDS_FETCHED")) == (38 + 6, n // 4)
    assert g.read("PERF_SDMA_BYTES_READ") == g.beats_bytes(src + 2, 38), "whole bus beats"
    # FILLSIZE DWORDS (Mesa's) fills as BYTES does; FENCE after a copy is written after its data.
    g.w32(src, [(k * 0x9E3779B1) & M32 for k in range(4096)])
    s.submit(sdma("CONSTANT_FILL", SRC_DATA=0x01020304, COUNT=7, **lo_hi("DST_ADDR", dst + 0x201), FILLSIZE="DWORDS"),
             sdma("COPY_LINEAR", COUNT=0x3FFF, **lo_hi("SRC_ADDR", src), **lo_hi("DST_ADDR", dst + 0x4000)),
             sdma("FENCE", DATA=0xFD, **lo_hi("ADDR", OUT + 8, 2)))
    g.until(lambda: g.r32(OUT + 8) == 0xFD, "the SDMA fence")
    assert bytes(g.dev.mem[dst + 0x4000:dst + 0x8000]) == bytes(g.dev.mem[src:src + 0x4000])
    assert bytes(g.dev.mem[dst + 0x200:dst + 0x20A]) == bytes([0, 3, 2, 1, 4, 3, 2, 1, 4, 0])
    g.idle("SDMA_STATUS")
    # TRAP: an entry only while SDMA_CNTL.TRAP_ENABLE is set.
    s.run(sdma("TRAP", INT_CONTEXT=0x123))
    assert ih.pop() == []
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    s.run(sdma("TRAP", INT_CONTEXT=0xABCDEF1))
    (e,) = g.until(lambda: ih.pop() or None, "the TRAP entry")
    assert (e["CLIENT_ID"], e["SOURCE_ID"], e["DATA0"], e["DATA1"], e["DATA2"], e["DATA3"]) == \
        (0x08, 224, 0xABCDEF1, 0, 0, 0), e
    # POLL_REGMEM with RETRY_COUNT 2: gives up at the third failing read, entry 246, moves on.
    flag = OUT + 0x40
    g.w32(flag, [0x1234])
    s.run(sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=M32, FUNC="EQ", MEM_POLL="MEMORY",
               RETRY_COUNT=2, INTERVAL=1), sdma("FENCE", DATA=0xAF, **lo_hi("ADDR", OUT + 16, 2)))
    (e,) = g.until(lambda: ih.pop() or None, "the POLL_TIMEOUT entry")
    assert (e["CLIENT_ID"], e["SOURCE_ID"], e["DATA0"], e["DATA1"], e["DATA2"], e["DATA3"]) == \
        (0x08, 246, flag, 0, 0x1234, 0), e
    assert g.r32(OUT + 16) == 0xAF and g.fields("SDMA_STATUS")["ERROR"] == 0
    # A poll in progress shows SDMA_STATUS.WAITING; it ends when the value holds.
    s.submit(sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=1, FUNC="EQ", MEM_POLL="MEMORY",
                  RETRY_COUNT=0xFFF, INTERVAL=1))
    g.waiting("SDMA_STATUS")
    g.w32(flag, [0x1235])
    assert g.idle("SDMA_STATUS")["WAITING"] == 0
    # Doorbell bits 1:0 are ignored.
    s.emit(sdma("FENCE", DATA=0xB0, **lo_hi("ADDR", OUT + 20, 2)))
    g.write("SDMA_DOORBELL", s.wptr | 3)
    g.idle("SDMA_STATUS")
    assert g.r32(OUT + 20) == 0xB0 and g.read("SDMA_RB_WPTR") == s.wptr


def check_every_sdma_listed_value_and_reserved_bit(dev):
    """Each value docs/packets.md lists for an SDMA field runs, but those marked not
    supported and those not listed (POLL_REGMEM FUNC 7) stop the queue with UNSUPPORTED;
    reserved bits (but those below an address's low field) and MTYPE / CSA_ADDR are ignored."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    s = SdmaRing(g, SRING, 6)
    S = sdma_packets()
    src = 0x100000
    g.w32(src, [0x5EED, 0x5EED])
    g.w32(IB1, [0])
    base = {"COPY_LINEAR": lambda **kw: sdma("COPY_LINEAR", COUNT=7, **lo_hi("SRC_ADDR", src),
                                             **lo_hi("DST_ADDR", OUT), **kw),
            "WRITE_LINEAR": lambda **kw: sdma("WRITE_LINEAR", [0x42, 0x43], COUNT=1, **lo_hi("DST_ADDR", OUT, 2), **kw),
            "POLL_REGMEM": lambda **kw: sdma("POLL_REGMEM", **lo_hi("ADDR", OUT, 2), VALUE=0, MASK=0, RETRY_COUNT=0,
                                             INTERVAL=1, **{"FUNC": "ALWAYS", "MEM_POLL": "MEMORY", **kw}),
            "CONSTANT_FILL": lambda **kw: sdma("CONSTANT_FILL", SRC_DATA=0x0F0F0F0F, COUNT=7,
                                               **lo_hi("DST_ADDR", OUT), **kw),
            "FENCE": lambda **kw: sdma("FENCE", DATA=0x44, **lo_hi("ADDR", OUT, 2), **kw),
            "INDIRECT_BUFFER": lambda **kw: sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=1, **kw),
            "TRAP": lambda **kw: sdma("TRAP", INT_CONTEXT=1, **kw)}
    checked = 0
    for name, make in base.items():
        for f in S[name].fields.values():
            if not f.values:
                continue
            listed = set(f.values.values())
            for v in sorted(listed) + [v for v in range(1 << f.width) if v not in listed][:2]:
                bad = v in {f.values[u] for u in f.unsupported} or v not in listed
                at = s.wptr // 4
                s.run(make(**{f.name: v}))
                checked += 1
                if bad:
                    expect_sdma_error(s, ih, "UNSUPPORTED", "RING", S[name].opcode, SRING + 4 * (at % 64), at % 64)
                else:
                    assert g.fields("SDMA_STATUS")["ERROR"] == 0, f"{name}.{f.name} = {v}: {g.fields('SDMA_ERROR')}"
                    if name == "POLL_REGMEM" and f.name == "FUNC" and v in (1, 4, 6):  # LT, NE, GT fail on 0
                        (e,) = g.until(lambda: ih.pop() or None, "the POLL_TIMEOUT entry")
                        assert ih.source(e) == "SDMA_POLL_TIMEOUT", e
    assert checked >= 30
    ignored = {"FENCE": {"MTYPE": 7}, "INDIRECT_BUFFER": {"CSA_ADDR_LO": M32, "CSA_ADDR_HI": M32}}
    for name, make in base.items():
        pkt = S[name]
        p = make(**ignored.get(name, {}))
        used = [0] * (1 + pkt.fixed)
        for f in pkt.fields.values():
            d = 0 if f.dword == "hdr" else f.dword + 1
            used[d] |= f.mask | (((1 << f.lsb) - 1) if f.name.endswith("_LO") else 0)
        p = [d | (~u & M32) for d, u in zip(p, used)] + p[len(used):]
        g.w32(OUT, [0, 0])
        s.run(p)
        assert g.fields("SDMA_STATUS")["ERROR"] == 0, f"{name} with reserved bits: {g.fields('SDMA_ERROR')}"
        want = {"COPY_LINEAR": [0x5EED, 0x5EED], "WRITE_LINEAR": [0x42, 0x43], "CONSTANT_FILL": [0x0F0F0F0F] * 2,
                "FENCE": [0x44, 0]}.get(name)
        assert want is None or g.r32(OUT, 2) == want, f"{name}: {g.r32(OUT, 2)}"


def _pattern(g, addr, n, seed):
    """n bytes of a pattern at addr (dword writes, n a multiple of 4); returns them."""
    words = [((k + seed) * 0x9E3779B1) & M32 for k in range(n // 4)]
    g.w32(addr, words)
    return b"".join(w.to_bytes(4, "little") for w in words)


def _bytes(g, addr, n):
    return bytes(g.dev.mem[addr:addr + n])


def check_sdma_copy_fill_write_edges(dev):
    """COPY_LINEAR, CONSTANT_FILL and WRITE_LINEAR at their smallest (COUNT 0: one byte, one
    dword), unaligned on both sides, across 4 KiB pages, at their largest (4 MiB: COUNT
    0x3FFFFF), and the bytes around each left alone; a copy whose source is an earlier copy's
    or fill's destination reads what it wrote (packets act in order); the byte counters. (The
    4 MiB transfers on the model and Verilator only: see below.)"""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    s = SdmaRing(g, SRING, 8, SRPTR_WB)
    src, dst = 0x100000, 0x300000
    pat = _pattern(g, src, 0x4000, 1)
    g.dev.mem[dst:dst + 0x8000] = [0xEE] * 0x8000
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    copy = lambda d, a, n: sdma("COPY_LINEAR", COUNT=n - 1, **lo_hi("SRC_ADDR", a), **lo_hi("DST_ADDR", d))  # noqa
    fill = lambda d, v, n: sdma("CONSTANT_FILL", SRC_DATA=v, COUNT=n - 1, **lo_hi("DST_ADDR", d))  # noqa
    # one byte each; unaligned across a 4 KiB page on both sides (src 3 bytes before its page's
    # end, dst 1 byte before another's), and a copy of exactly one page between two pages
    st = s.run(copy(dst + 3, src + 5, 1), fill(dst + 0x11, 0xA1B2C3D4, 1),
               copy(dst + 0x1FFF, src + 0xFFD, 0x2005), copy(dst + 0x4801, src + 0x2803, 0x1000))
    assert st["ERROR"] == 0, g.fields("SDMA_ERROR")
    assert _bytes(g, dst, 8) == bytes([0xEE] * 3 + [pat[5]] + [0xEE] * 4)
    assert _bytes(g, dst + 0x10, 3) == bytes([0xEE, 0xC3, 0xEE]), "byte a gets byte a mod 4 of the value"
    assert _bytes(g, dst + 0x1FFE, 0x2007) == bytes([0xEE]) + pat[0xFFD:0xFFD + 0x2005] + bytes([0xEE])
    assert _bytes(g, dst + 0x4800, 0x1002) == bytes([0xEE]) + pat[0x2803:0x3803] + bytes([0xEE])
    assert g.read("PERF_SDMA_BYTES_WRITTEN") == 1 + 1 + 0x2005 + 0x1000
    assert g.read("PERF_SDMA_BYTES_READ") == (g.beats_bytes(src + 5, 1) + g.beats_bytes(src + 0xFFD, 0x2005)
                                              + g.beats_bytes(src + 0x2803, 0x1000)), "whole beats; a fill reads none"
    # WRITE_LINEAR: one dword, and 6 across a page (dst 8 bytes before its end)
    s.run(sdma("WRITE_LINEAR", [0x11111111], **lo_hi("DST_ADDR", dst + 0x6000, 2), COUNT=0),
          sdma("WRITE_LINEAR", [1, 2, 3, 4, 5, 6], **lo_hi("DST_ADDR", dst + 0x6FF8, 2), COUNT=5))
    assert g.r32(dst + 0x5FFC, 3) == [0xEEEEEEEE, 0x11111111, 0xEEEEEEEE]
    assert g.r32(dst + 0x6FF4, 8) == [0xEEEEEEEE, 1, 2, 3, 4, 5, 6, 0xEEEEEEEE]
    # in order: a fill, then a copy of what it filled, then a copy of that copy, then the fence
    a, b, c = dst + 0x8000, dst + 0xA003, dst + 0xC001
    s.run(fill(a + 1, 0x04030201, 0x1801), copy(b, a, 0x1803), copy(c, b, 0x1803),
          sdma("FENCE", DATA=0x5A, **lo_hi("ADDR", OUT, 2)))
    want = bytes([0]) + bytes((x % 4) + 1 for x in range(a + 1, a + 0x1802)) + bytes([0])
    assert _bytes(g, a, 0x1803) == want and _bytes(g, c, 0x1803) == want and g.r32(OUT) == 0x5A
    # the largest: COUNT 0x3FFFFF is 4 MiB (a fill: no reads), then a 4 MiB copy of it; on the
    # model and Verilator (5 s): Icarus, about 2,300 cycles/s here, took 7.5 minutes for the
    # two (the same RTL as Verilator's)
    if g.dev.name == "icarus":
        return
    big, big2 = 0x1000000, 0x1800000
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    s.submit(fill(big, 0x5EED0000 | 0x77, 1 << 22), sdma("FENCE", DATA=0x5B, **lo_hi("ADDR", OUT, 2)))
    g.until(lambda: g.r32(OUT) == 0x5B, "the fence after 4 MiB", cycles=4_000_000, step=2000)
    g.idle("SDMA_STATUS")
    assert (g.read("PERF_SDMA_BYTES_WRITTEN"), g.read("PERF_SDMA_BYTES_READ")) == (1 << 22, 0)
    assert g.r32(big, 1) == 0x5EED0077 and g.r32(big + (1 << 22) - 4) == 0x5EED0077 and g.r32(big + (1 << 22)) == 0
    s.submit(copy(big2 + 1, big, 1 << 22))
    g.until(lambda: g.fields("SDMA_STATUS")["IDLE"], "4 MiB copied", cycles=4_000_000, step=2000)
    assert g.read("PERF_SDMA_BYTES_READ") == 1 << 22
    assert _bytes(g, big2, 8) == bytes([0, 0x77, 0, 0xED, 0x5E, 0x77, 0, 0xED])
    assert _bytes(g, big2 + (1 << 22) - 3, 5) == bytes([0x77, 0, 0xED, 0x5E, 0])
    assert ih.pop() == [] and g.fields("SDMA_STATUS")["ERROR"] == 0


def check_sdma_wrap_nop_halt_errors_and_cross_engine_waits(dev):
    """A burst NOP of the largest COUNT (16383) filling a ring of 2^14 dwords exactly;
    a packet straddling the ring's end; POLL_REGMEM ALWAYS still reads (and faults);
    SDMA_CNTL.HALT during a poll lets it finish first; a doorbell 2^31 bytes ahead is
    DOORBELL_BACKWARDS; a copy whose read starts beyond memory at an odd byte (ADDR that
    byte), a fill and a copy whose writes do, and the transfers queued behind a failing one
    writing nothing; the SDMA waiting on the CP's fence and the CP on the SDMA's, through memory."""
    g, ring, ih = bring_up(dev)
    S = sdma_packets()
    end = 64 << 20
    s = SdmaRing(g, SRING, 14, SRPTR_WB)  # 16384 dwords
    s.submit(sdma("NOP", [0] * 16383, COUNT=16383))
    g.until(lambda: g.fields("SDMA_STATUS")["IDLE"], "16384 dwords fetched", cycles=200_000, step=500)
    assert g.read("SDMA_RB_RPTR") == 1 << 16 == g.r32(SRPTR_WB) and g.fields("SDMA_STATUS")["ERROR"] == 0
    assert g.read("PERF_SDMA_PACKETS", S["NOP"].index) == 1
    # a WRITE_LINEAR across the ring's end (its first 3 dwords the ring's last), then a copy,
    # in a ring of 64 dwords (moved as docs/hardware.md says: RB_ENABLE clear, QUEUE_RESET)
    g.set("SDMA_RB_CNTL", RB_SIZE=14, RB_ENABLE=0)
    g.set("SDMA_CNTL", QUEUE_RESET=1)
    g.idle("SDMA_STATUS")
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    s.run(*[[0]] * (64 - 3))
    g.w32(0x100000, [0x0BADF00D, 0x600DF00D])
    s.run(sdma("WRITE_LINEAR", [0x71, 0x72], **lo_hi("DST_ADDR", OUT, 2), COUNT=1), [0] * 7,
          sdma("COPY_LINEAR", COUNT=7, **lo_hi("SRC_ADDR", 0x100000), **lo_hi("DST_ADDR", OUT + 8)))
    assert g.r32(OUT, 4) == [0x71, 0x72, 0x0BADF00D, 0x600DF00D] and g.fields("SDMA_STATUS")["ERROR"] == 0
    # ALWAYS reads once: beyond memory it faults
    at = (s.wptr // 4) % s.size
    s.submit(sdma("POLL_REGMEM", **lo_hi("ADDR", end + 0x40, 2), VALUE=0, MASK=0, FUNC="ALWAYS", MEM_POLL="MEMORY",
                  RETRY_COUNT=0xFFF, INTERVAL=1))
    expect_sdma_error(s, ih, "BUS_DECERR", "RING", S["POLL_REGMEM"].opcode, end + 0x40, at)
    # SDMA_CNTL.HALT during a poll: it polls on and finishes; the FENCE after waits for the halt's end
    flag = OUT + 0x40
    g.w32(flag, [0])
    s.submit(sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=1, FUNC="EQ", MEM_POLL="MEMORY",
                  RETRY_COUNT=0xFFF, INTERVAL=1), sdma("FENCE", DATA=0x73, **lo_hi("ADDR", OUT + 16, 2)))
    g.waiting("SDMA_STATUS")
    g.set("SDMA_CNTL", HALT=1)
    g.dev.delay(100)
    st = g.fields("SDMA_STATUS")
    assert (st["WAITING"], st["HALTED"]) == (1, 0), st
    g.w32(flag, [1])
    g.until(lambda: g.fields("SDMA_STATUS")["HALTED"], "SDMA_STATUS.HALTED after the poll")
    assert g.r32(OUT + 16) == 0 and g.fields("SDMA_STATUS")["WAITING"] == 0
    g.set("SDMA_CNTL", HALT=0)
    g.idle("SDMA_STATUS")
    assert g.r32(OUT + 16) == 0x73
    # 2^31 bytes ahead is backwards ((int32)(v − wptr) < 0)
    v = (s.wptr + (1 << 31)) & M32
    g.write("SDMA_DOORBELL", v)
    expect_sdma_error(s, ih, "DOORBELL_BACKWARDS", "RING", 0, v, (g.read("SDMA_RB_RPTR") // 4) % s.size)
    # transfer errors beyond memory's end at an odd byte; what is queued behind writes nothing
    g.w32(0x200000, [0] * 64)
    s.submit(sdma("COPY_LINEAR", COUNT=63, **lo_hi("SRC_ADDR", end + 0x25), **lo_hi("DST_ADDR", 0x300000)),
             sdma("CONSTANT_FILL", SRC_DATA=0x74747474, COUNT=255, **lo_hi("DST_ADDR", 0x200000)),
             sdma("FENCE", DATA=0x75, **lo_hi("ADDR", OUT + 20, 2)))
    expect_sdma_error(s, ih, "BUS_DECERR", "RING", S["COPY_LINEAR"].opcode, end + 0x25, 0)
    assert g.r32(0x200000, 64) == [0] * 64 and g.r32(OUT + 20) == 0
    s.submit(sdma("CONSTANT_FILL", SRC_DATA=1, COUNT=63, **lo_hi("DST_ADDR", end + 0x13)))
    expect_sdma_error(s, ih, "BUS_DECERR", "RING", S["CONSTANT_FILL"].opcode, end + 0x13, 0)
    s.submit(sdma("COPY_LINEAR", COUNT=63, **lo_hi("SRC_ADDR", 0x100000), **lo_hi("DST_ADDR", end + 0x7)))
    expect_sdma_error(s, ih, "BUS_DECERR", "RING", S["COPY_LINEAR"].opcode, end + 0x7, 0)
    # through memory: the SDMA polls the CP's fence, then copies; the CP waits for the SDMA's fence
    cp_fence, sdma_fence = OUT + 0x80, OUT + 0x84
    g.w32(cp_fence, [0, 0])
    g.w32(0x100000, list(range(0x500, 0x540)))
    s.submit(sdma("POLL_REGMEM", **lo_hi("ADDR", cp_fence, 2), VALUE=7, MASK=M32, FUNC="EQ", MEM_POLL="MEMORY",
                  RETRY_COUNT=0xFFF, INTERVAL=1),
             sdma("COPY_LINEAR", COUNT=255, **lo_hi("SRC_ADDR", 0x100000), **lo_hi("DST_ADDR", 0x200000)),
             sdma("FENCE", DATA=8, **lo_hi("ADDR", sdma_fence, 2)))
    ring.submit(wait_mem(sdma_fence, 8, M32, "EQ"), write_data(OUT + 0x88, [0x76]))
    g.dev.delay(200)
    assert (g.fields("SDMA_STATUS")["WAITING"], g.fields("STATUS")["WAITING"], g.r32(0x200000)) == (1, 1, 0)
    ring.submit(release_mem(cp_fence, 7))  # behind its own wait: nobody moves
    g.dev.delay(200)
    assert g.r32(cp_fence) == 0, "the CP's queue is in order: its fence waits behind its wait"
    ring2 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    ring2.run(release_mem(cp_fence, 7))  # queue 1 writes it: the SDMA moves, then the CP
    g.idle("SDMA_STATUS")
    g.idle()
    assert g.r32(0x200000, 64) == list(range(0x500, 0x540)) and g.r32(OUT + 0x88) == 0x76


def check_sdma_ring_size_above_20_and_the_longest_write_linear(dev):
    """SDMA_RB_CNTL.RB_SIZE above 20 acts as 20 (docs/registers.md) and reads back what was
    written: a doorbell 4·2^20 bytes ahead of rptr is ring space, one 4 more DOORBELL_OVERFLOW;
    WRITE_LINEAR's COUNT at its largest (0xFFFFF: 2^20 data dwords, packets.md's N ≤ 1048576)
    never fits a buffer (the ring holds at most 2^20 dwords, an IB at most IB_SIZE 0xFFFFF), so
    it is BAD_COUNT at its header, in the ring and in an IB, before a byte is written."""
    g, _, ih = bring_up(dev)
    S = sdma_packets()
    big = 0x100_0000  # a 4 MiB ring at 16 MiB
    s = SdmaRing(g, big, 20)
    for size in (21, 25, 31):
        g.set("SDMA_RB_CNTL", RB_SIZE=size, RB_ENABLE=0)
        g.set("SDMA_RB_CNTL", RB_SIZE=size, RB_ENABLE=1)
        assert g.fields("SDMA_RB_CNTL")["RB_SIZE"] == size, "RB_SIZE reads back what was written"
        g.write("SDMA_DOORBELL", (4 << 20) + 4)
        expect_sdma_error(s, ih, "DOORBELL_OVERFLOW", "RING", 0, (4 << 20) + 4, 0)
    wl = sdma("WRITE_LINEAR", **lo_hi("DST_ADDR", OUT, 2), COUNT=0xFFFFF)
    assert len(wl) == 4
    g.w32(OUT, [0xC0FFEE] * 4)
    g.w32(big, wl)
    g.write("SDMA_DOORBELL", 4 << 20)  # the whole ring, 2^20 dwords: accepted
    expect_sdma_error(s, ih, "BAD_COUNT", "RING", S["WRITE_LINEAR"].opcode, big, 0)
    g.w32(IB1, wl)
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=0xFFFFF))
    expect_sdma_error(s, ih, "BAD_COUNT", "IB1", S["WRITE_LINEAR"].opcode, IB1, 0)
    assert g.r32(OUT, 4) == [0xC0FFEE] * 4, "nothing written"
    # the ring is still 2^20 dwords: a FENCE, then a doorbell that leaves rptr 4·2^20 − 16
    # behind, i.e. wptr exactly one ring ahead of where rptr stands
    s.run(sdma("FENCE", DATA=0x77, **lo_hi("ADDR", OUT, 2)))
    assert g.r32(OUT) == 0x77 and g.read("SDMA_RB_RPTR") == 16
    g.write("SDMA_DOORBELL", 16 + (4 << 20) + 4)
    expect_sdma_error(s, ih, "DOORBELL_OVERFLOW", "RING", 0, 16 + (4 << 20) + 4, 4)


def check_sdma_poll_reads_are_16_interval_cycles_apart(dev):
    """POLL_REGMEM reads at once, then every max(1, 16·INTERVAL) cycles, and gives up at its
    (RETRY_COUNT + 1)-th failing read (docs/hardware.md): between a TRAP's entry and the
    POLL_TIMEOUT entry of the poll right after it lie at least RETRY_COUNT intervals (the
    entries' TIMESTAMPs), and not many more (each read's latency, the IH write); INTERVAL 0
    polls as fast as its reads come back. (Measured, Verilator, default memory: 673/677
    cycles at INTERVAL 4, 353/357 at 1, 353/357 for 40 reads at 0, 64/32-bit bus; the model,
    whose reads take no time, 640, 320, 40.)"""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    s = SdmaRing(g, SRING, 6)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    flag = OUT + 0x80
    g.w32(flag, [0x55])
    stamp = lambda e: e["TIMESTAMP_LO"] | e["TIMESTAMP_HI"] << 32
    got = {}
    for interval, retries in ((4, 10), (1, 20), (0, 40)):
        s.run(sdma("TRAP", INT_CONTEXT=interval),
              sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=M32, FUNC="EQ", MEM_POLL="MEMORY",
                   RETRY_COUNT=retries, INTERVAL=interval))
        g.until(lambda: (g.read("IH_WPTR") - ih.rptr) & M32 >= 64, "both entries")
        t, p = ih.pop()
        assert (ih.source(t), t["DATA0"], ih.source(p), p["DATA2"]) == ("SDMA_TRAP", interval, "SDMA_POLL_TIMEOUT", 0x55)
        gap, least = stamp(p) - stamp(t), retries * max(1, 16 * interval)
        got[interval] = gap
        # (at most: each read's latency on slow, stalling memory and the IH writes on top)
        assert least <= gap <= least + 200 * (retries + 1) + 1000, \
            f"INTERVAL {interval}, RETRY_COUNT {retries}: {gap} cycles from the TRAP to the timeout, at least {least}"
    return got


def check_write_linear_is_counted_once_its_last_dword_is_read(dev):
    """PERF_SDMA_PACKETS counts a packet as it starts (docs/hardware.md), but for WRITE_LINEAR:
    it counts once its last data dword is read, after every block before it was written, so
    one whose write fails in a block before the one holding its last dword (or whose data
    cannot be fetched) is not counted, while one failing in its last block is; the CP's
    WRITE_DATA counts as it starts, its write or its data's fetch failing or not (the
    testbench memory answers SLVERR in a 4 KiB window at ERR). And after a transfer's error in
    an IB the queue's own STATUS (LEVEL, RB_EMPTY) moves with its rptr, which depends on
    timing: the error registers' LEVEL is the one that names the failing packet's level.
    (Until 7 December 2026 the reference model counted every WRITE_LINEAR whose data it had
    read, a write error in any block or not.)"""
    g, ring, ih = bring_up(dev)
    S, P = sdma_packets(), pm4_packets()
    err = 0x70000
    dev.mem_model.configure(error_window=(err, err + 0x1000, "SLVERR"))
    try:
        s = SdmaRing(g, SRING, 8, SRPTR_WB)
        wl = S["WRITE_LINEAR"].index
        # (dwords, first byte, counted): blocks are the 32-byte-aligned pieces of the data
        cases = [(16, err - 0x1C, 0),  # 7 dwords written, then the failing block of 8, one more after it
                 (16, err, 0),  # the first block fails
                 (9, err - 0x20, 1),  # 8 written, the failing block holds the last dword
                 (3, err - 8, 1),  # one block across the window's start: the last dword's
                 (16, err - 0x20, 1)]  # 8 written, the failing second block holds the last
        for n, dst, counted in cases:
            g.w32(dst - 0x20 if dst < err else OUT, [0] * 8)
            g.set("CONTROL", PERF_CLEAR=1)
            s.submit(sdma("WRITE_LINEAR", list(range(1, n + 1)), **lo_hi("DST_ADDR", dst, 2), COUNT=n - 1))
            expect_sdma_error(s, ih, "BUS_SLVERR", "RING", S["WRITE_LINEAR"].opcode, max(err, dst), 0)
            got = g.read("PERF_SDMA_PACKETS", wl)
            assert got == counted, f"WRITE_LINEAR of {n} dwords at ERR{dst - err:+#x}: PERF_SDMA_PACKETS {got}"
            if dst < err:
                k = (err - dst) // 4
                assert g.r32(dst, k) == list(range(1, k + 1)), "every block before the failing one is written"
        # its data fetched from an IB that runs into the window: not counted, a fetch error
        body = sdma("WRITE_LINEAR", list(range(1, 17)), **lo_hi("DST_ADDR", OUT, 2), COUNT=15)
        g.w32(err - 0x20, body[:8])
        g.set("CONTROL", PERF_CLEAR=1)
        s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", err - 0x20, 5), IB_SIZE=len(body)))
        expect_sdma_error(s, ih, "BUS_SLVERR", "IB1", S["WRITE_LINEAR"].opcode, err, 0)
        assert g.read("PERF_SDMA_PACKETS", wl) == 0 and g.read("PERF_SDMA_PACKETS", S["INDIRECT_BUFFER"].index) == 1
        # the CP's WRITE_DATA counts as it starts: failing in its first of two blocks, and with
        # its data's fetch failing (in an IB that runs into the window)
        g.set("CONTROL", PERF_CLEAR=1)
        ring.submit(write_data(err - 0x1C, list(range(1, 17))))
        expect_error(ring, ih, "BUS_SLVERR", "RING", P["WRITE_DATA"].opcode, err, 0)
        body = write_data(OUT + 0x100, list(range(1, 17)))
        g.w32(err - 0x20, body[:8])
        ring.submit(ib(err - 0x20, len(body)))
        expect_error(ring, ih, "BUS_SLVERR", "IB1", P["WRITE_DATA"].opcode, err, 0)
        assert g.read("PERF_PACKETS", P["WRITE_DATA"].index) == 2
        # a transfer failing as the last packet of an IB: the error names IB1; the queue's
        # STATUS shows IB1 with RB_RPTR before the IB (the model, or an RTL still inside it),
        # or RING with RB_RPTR past it (the RTL, whose transfer packet finished once queued)
        body = dma_data(OUT, err + 0x100, 0x400)
        g.w32(IB1, body)
        ring.submit(ib(IB1, len(body)))
        g.idle()
        st, rptr = g.fields("STATUS"), g.read("RB_RPTR")
        assert (st["LEVEL"], st["RB_EMPTY"], rptr) in ((g.level["IB1"], 0, 0), (g.level["RING"], 1, 4)), (st, rptr)
        expect_error(ring, ih, "BUS_SLVERR", "IB1", P["DMA_DATA"].opcode, err + 0x100, 0)
        body = sdma("COPY_LINEAR", COUNT=0x3FF, **lo_hi("SRC_ADDR", err + 0x100), **lo_hi("DST_ADDR", OUT))
        g.w32(IB1, body)
        s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=len(body)))
        g.idle("SDMA_STATUS")
        st, rptr = g.fields("SDMA_STATUS"), g.read("SDMA_RB_RPTR")
        assert (st["LEVEL"], st["RB_EMPTY"], rptr) in ((g.level["IB1"], 0, 0), (g.level["RING"], 1, 24)), (st, rptr)
        expect_sdma_error(s, ih, "BUS_SLVERR", "IB1", S["COPY_LINEAR"].opcode, err + 0x100, 0)
    finally:
        dev.mem_model.configure(error_window=None)


CHECKS = [check_sdma_ring_and_packets, check_every_sdma_listed_value_and_reserved_bit,
          check_sdma_copy_fill_write_edges, check_sdma_wrap_nop_halt_errors_and_cross_engine_waits,
          check_sdma_ring_size_above_20_and_the_longest_write_linear,
          check_sdma_poll_reads_are_16_interval_cycles_apart,
          check_write_linear_is_counted_once_its_last_dword_is_read]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())
