"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone): what the engines fetch. docs/hardware.md ("Ring and doorbell"): "Fetches
are AXI4 INCR bursts that never cross 4 KiB and never read outside [rptr, wptr) of the ring
or [0, IB_SIZE) of an IB", and the SDMA's "ring and IB are fetched ahead in bursts as the
CP's". What a driver sees of it: the ring space past a doorbell's value is the driver's to
write, as every ring wrap rewrites the last lap's dwords there, and the packets it writes
there before its next doorbell are the ones that run, never what the memory held at the
earlier doorbell (a fetcher that read ahead past wptr, or kept dwords past an IB's end for
the next IB at that address, would run those). Each round here leaves a packet the engine
refuses (an unknown opcode) right after the doorbell's value, lets the engine go idle, then
writes the next packets over it and rings again, at every alignment of the doorbell
against the fetch bursts, around each ring several times.

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (IB1, IH_BASE, IH_WB, OUT, RING, RING1, RPTR1_WB, RPTR_WB, SRING,
                                                  SRPTR_WB, Gpu, IhRing, Ring, SdmaRing, ib, lo_hi, pm4, pm4_header,
                                                  sdma, write_data)

AHEAD = 40  # dwords of refused packets left past each doorbell's value: more than a burst (16 beats of 8 bytes)


def _cp_bad() -> int:
    """A type-3 header of an opcode the CP does not implement (ILLEGAL_OPCODE if it ran)."""
    h = pm4_header()
    return h["TYPE"].put(3) | h["OPCODE"].put(0xBE)


SDMA_BAD = 0x0000_0003  # OP 3: not in the SDMA's table (ILLEGAL_OPCODE if it ran)


def _poison(g: Gpu, base: int, size: int, at: int, word: int) -> None:
    """`word` in the AHEAD ring dwords from dword pointer `at` on (wrapping)."""
    first = min(AHEAD, size - at % size)
    g.w32(base + 4 * (at % size), [word] * first)
    g.w32(base, [word] * (AHEAD - first))


def _cp_rounds(g: Gpu, ring: Ring, laps: int, slot0: int) -> None:
    bad = _cp_bad()
    _poison(g, ring.base, ring.size, ring.wptr, bad)
    k = 0
    while ring.wptr < laps * ring.size:
        pad = k % 9  # none, the one-dword NOP, or a NOP of 1-7 payload dwords: the doorbell at every alignment
        nop = [] if not pad else [[0xFFFF1000]] if pad == 1 else [pm4("NOP", [0] * (pad - 1))]
        packets = nop + [write_data(OUT + 4 * (slot0 + k % 16), [k + 1])]
        ring.emit(*packets)
        _poison(g, ring.base, ring.size, ring.wptr, bad)  # past the doorbell's value, before it
        ring.doorbell()
        st = g.idle(ring.status)
        assert st["ERROR"] == 0, f"round {k} (doorbell {ring.wptr:#x}): {ring.status} {st}, " \
                                 f"{ring.error} {g.fields(ring.error)}: a dword past wptr ran"
        assert g.r32(OUT + 4 * (slot0 + k % 16)) == k + 1, f"round {k}: the packet written before the doorbell"
        k += 1


def check_dwords_past_a_doorbell_run_as_written_before_the_next(dev):
    """CP queue 0 and queue 1 (rings of 64 dwords) and the SDMA (a ring of 64 dwords), three
    laps each: every round's packets are written over refused ones left past the previous
    doorbell's value, and run; none of the refused ones ever does. Then IBs: an IB of one
    WRITE_DATA followed in memory by refused packets, then a second IB at the address just
    past the first one's end, now holding a WRITE_DATA: it runs."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    q0 = Ring(g, RING, 6, RPTR_WB)
    q1 = Ring(g, RING1, 6, RPTR1_WB, queue=1)
    _cp_rounds(g, q0, 3, 0)
    _cp_rounds(g, q1, 3, 16)
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    _poison(g, s.base, s.size, 0, SDMA_BAD)
    k = 0
    while s.wptr < 3 * 4 * s.size:
        pad = k % 9
        s.emit(*([sdma("NOP", [0] * (pad - 1), COUNT=pad - 1)] if pad else []),
               sdma("FENCE", DATA=k + 1, **lo_hi("ADDR", OUT + 0x80 + 4 * (k % 16), 2)))
        _poison(g, s.base, s.size, s.wptr // 4, SDMA_BAD)
        g.write("SDMA_DOORBELL", s.wptr)
        st = g.idle("SDMA_STATUS")
        assert st["ERROR"] == 0, f"SDMA round {k} (doorbell {s.wptr:#x}): {st}, SDMA_ERROR " \
                                 f"{g.fields('SDMA_ERROR')}: a dword past wptr ran"
        assert g.r32(OUT + 0x80 + 4 * (k % 16)) == k + 1, f"SDMA round {k}"
        k += 1
    assert not [e for e in ih.pop() if ih.source(e) != "EOP"], "no error entry"
    # IBs: [0, IB_SIZE) only. The first IB's WRITE_DATA (5 dwords, IB_SIZE 5) is followed by
    # refused packets; the next IB starts right there once they are rewritten.
    bad = _cp_bad()
    at = IB1
    for k in range(12):
        p = write_data(OUT + 0x100 + 4 * k, [0x100 + k])
        g.w32(at, p + [bad] * AHEAD)
        q0.run(ib(at, len(p)))
        st = g.fields("STATUS")
        assert st["ERROR"] == 0, f"IB {k} at {at:#x}: {g.fields('CP_ERROR')}: a dword past IB_SIZE ran"
        assert g.r32(OUT + 0x100 + 4 * k) == 0x100 + k
        at += 4 * len(p)
    s.emit(*[sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1 + 0x400 + 0x20 * k, 5), IB_SIZE=4) for k in range(4)])
    for k in range(4):  # SDMA IBs of one FENCE each, back to back, each followed by a refused packet
        g.w32(IB1 + 0x400 + 0x20 * k, sdma("FENCE", DATA=0x200 + k, **lo_hi("ADDR", OUT + 0x180 + 4 * k, 2))
              + [SDMA_BAD] * 4)
    g.write("SDMA_DOORBELL", s.wptr)
    st = g.idle("SDMA_STATUS")
    assert st["ERROR"] == 0 and g.r32(OUT + 0x180, 4) == [0x200, 0x201, 0x202, 0x203], (st, g.fields("SDMA_ERROR"))


CHECKS = [check_dwords_past_a_doorbell_run_as_written_before_the_next]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())
