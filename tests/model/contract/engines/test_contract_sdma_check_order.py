"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone): the order of the SDMA engine's packet checks. docs/hardware.md ("The SDMA copy
engine", Packets): "the checks, first failing one wins: ILLEGAL_OPCODE, BAD_COUNT,
UNSUPPORTED, FENCE_MISALIGNED / IB_MISALIGNED, IB_SIZE_ZERO, IB_NESTING. Then bus errors and
VM faults", an IB base with bits above 47 being BUS_DECERR at its low 48 bits. Each case
here is a packet failing two of them, so only the order tells which is latched (each check
alone: test_contract_sdma_errors.py). The CP's order: test_contract_driver.py's
check_packet_checks and check_ib_levels_and_chain.

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (IB1, IB2, IH_BASE, IH_WB, M32, OUT, SRING, Gpu, IhRing, SdmaRing,
                                                  lo_hi, sdma, sdma_packets)


def _stopped(s: SdmaRing, ih: IhRing, code: str, level: str, name: str, addr: int, offset: int, sub_op: int = 0):
    """The SDMA queue stopped with exactly this SDMA_ERROR (OP and SUB_OP those of the packet
    in hand) and its 241 entry; then SDMA_CNTL.QUEUE_RESET and the ring starts again at 0."""
    g = s.gpu
    st = g.idle("SDMA_STATUS")
    assert st["ERROR"] == 1, f"{code}: {st}"
    err = g.fields("SDMA_ERROR")
    got = (err["CODE"], err["LEVEL"], err["OP"], err["SUB_OP"],
           g.read("SDMA_ERROR_ADDR_LO") | g.read("SDMA_ERROR_ADDR_HI") << 32, g.read("SDMA_ERROR_OFFSET"))
    want = (g.err[code], g.level[level], sdma_packets()[name].opcode, sub_op, addr, offset)
    assert got == want, f"{code} expected: (CODE, LEVEL, OP, SUB_OP, ADDR, OFFSET) {got}, wanted {want}"
    (e,) = g.until(lambda: ih.pop() or None, "the SDMA_ERROR entry")
    assert (e["CLIENT_ID"], e["SOURCE_ID"], e["DATA0"], e["DATA1"], e["DATA2"], e["DATA3"]) == \
        (0x08, 241, g.read("SDMA_ERROR"), addr & M32, addr >> 32, offset), e
    g.set("SDMA_CNTL", QUEUE_RESET=1)
    st = g.idle("SDMA_STATUS")
    assert st["ERROR"] == 0 and g.read("SDMA_RB_RPTR") == 0 == g.read("SDMA_RB_WPTR"), st
    s.wptr = 0


def _ib(base: int, size: int) -> list[int]:
    """An SDMA INDIRECT_BUFFER; `base`'s bits 4:0 go into IB_BASE_LO's reserved bits as they are."""
    p = sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", base & ~31, 5), IB_SIZE=size)
    p[1] |= base & 31
    return p


def check_sdma_packet_checks_fail_in_their_documented_order(dev):
    """On the ring: an unknown SUB_OP of a known OP, its header alone, is ILLEGAL_OPCODE (not
    BAD_COUNT); a WRITE_LINEAR with TMZ whose data runs past the doorbell is BAD_COUNT (not
    UNSUPPORTED); one with TMZ and a misaligned address, and a POLL_REGMEM with FUNC 7 and a
    misaligned address, are UNSUPPORTED (not FENCE_MISALIGNED); an INDIRECT_BUFFER with a
    misaligned base and IB_SIZE 0 is IB_MISALIGNED, one beyond the bus with IB_SIZE 0
    IB_SIZE_ZERO (the base's BUS_DECERR only with a size). In an IB: an INDIRECT_BUFFER
    misaligned, or of IB_SIZE 0, is IB_MISALIGNED / IB_SIZE_ZERO (not IB_NESTING), one
    beyond the bus IB_NESTING (no fetch is made), one running past its IB BAD_COUNT."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    s = SdmaRing(g, SRING, 8)
    S = sdma_packets()
    s.submit([S["COPY_LINEAR"].opcode | 1 << 8])  # SUB_OP 1: no such packet
    _stopped(s, ih, "ILLEGAL_OPCODE", "RING", "COPY_LINEAR", SRING, 0, sub_op=1)
    wl = sdma("WRITE_LINEAR", [1, 2, 3, 4], **lo_hi("DST_ADDR", OUT, 2), COUNT=3, TMZ="SECURE")
    s.submit(wl[:5])  # 4 data dwords, 1 of them before the doorbell
    _stopped(s, ih, "BAD_COUNT", "RING", "WRITE_LINEAR", SRING, 0)
    wl = sdma("WRITE_LINEAR", [1], **lo_hi("DST_ADDR", OUT, 2), COUNT=0, TMZ="SECURE")
    wl[1] |= 2  # DST_ADDR_LO's reserved bits 1:0
    s.submit(wl)
    _stopped(s, ih, "UNSUPPORTED", "RING", "WRITE_LINEAR", SRING, 0)
    assert g.r32(OUT) == 0, "the refused WRITE_LINEAR wrote nothing"
    poll = sdma("POLL_REGMEM", **lo_hi("ADDR", OUT, 2), VALUE=0, MASK=0, FUNC="ALWAYS", MEM_POLL="MEMORY",
                RETRY_COUNT=0, INTERVAL=1)
    poll[0] |= 7 << S["POLL_REGMEM"].fields["FUNC"].lsb  # FUNC 7: a value the table does not list
    poll[1] |= 1
    s.submit(poll)
    _stopped(s, ih, "UNSUPPORTED", "RING", "POLL_REGMEM", SRING, 0)
    s.submit(_ib(IB1 + 8, 0))
    _stopped(s, ih, "IB_MISALIGNED", "RING", "INDIRECT_BUFFER", SRING, 0)
    far = 1 << 48 | IB1
    s.submit(_ib(far, 0))
    _stopped(s, ih, "IB_SIZE_ZERO", "RING", "INDIRECT_BUFFER", SRING, 0)
    s.submit(_ib(far, 4))
    _stopped(s, ih, "BUS_DECERR", "RING", "INDIRECT_BUFFER", IB1, 0)
    # inside an IB, behind two NOPs: the inner INDIRECT_BUFFER's header at IB1 + 8, offset 2
    for inner, code in ((_ib(IB2 + 4, 0), "IB_MISALIGNED"), (_ib(IB2 + 4, 4), "IB_MISALIGNED"),
                        (_ib(IB2, 0), "IB_SIZE_ZERO"), (_ib(1 << 48 | IB2, 0), "IB_SIZE_ZERO"),
                        (_ib(1 << 48 | IB2, 4), "IB_NESTING")):
        g.w32(IB1, [0, 0] + inner)
        s.submit(_ib(IB1, 8))
        _stopped(s, ih, code, "IB1", "INDIRECT_BUFFER", IB1 + 8, 2)
    g.w32(IB1, [0, 0] + _ib(IB2, 4))
    s.submit(_ib(IB1, 7))  # the inner packet's last dword is past the IB
    _stopped(s, ih, "BAD_COUNT", "IB1", "INDIRECT_BUFFER", IB1 + 8, 2)
    # the queue runs on after every one of them
    s.run(sdma("FENCE", DATA=0x5D, **lo_hi("ADDR", OUT + 4, 2)))
    assert g.r32(OUT + 4) == 0x5D and g.fields("SDMA_STATUS")["ERROR"] == 0


CHECKS = [check_sdma_packet_checks_fail_in_their_documented_order]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())
