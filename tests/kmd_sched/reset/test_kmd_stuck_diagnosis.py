"""The timeout diagnosis at its edges (kmd_model/reset/stuck.py): `find_unsatisfied_wait`
through IB2s, CHAINs, fillers, budgets and the boundaries of every WAIT_REG_MEM function,
reading an IB only where `translate` maps all of it; `any_wait_holds` walking as the
diagnosis does; `find_unsatisfied_poll` past an IB it cannot read; and, in hostile PM4 and
SDMA streams, the packets the decoders find.

These came out of the mutation campaign (`make mutate`, docs/verification.md), split by
concept from tests/kmd/test_kmd_checker.py (the CS checker, which reads the same streams).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from kmd_model.reset.stuck import (_pm4_packets, _sdma_packets, any_wait_holds, find_unsatisfied_poll,
                                   find_unsatisfied_wait)
from spec import packets, pm4, sdma
from spec.sdma import packets as sdma_packets


MEM_DW = 0x1000


def _mem(*placed: tuple[int, list[int]]) -> np.ndarray:
    mem = np.zeros(MEM_DW, dtype=np.uint32)
    for addr, words in placed:
        mem[addr // 4: addr // 4 + len(words)] = words
    return mem


def _wait(addr: int, ref: int, fn: str, mask: int = 0xFFFF_FFFF) -> list[int]:
    return pm4.wait_reg_mem(addr, ref, mask, fn)


FLAG = 0x3F00  # the dword the waits poll


def _put(mem: np.ndarray, addr: int, words: list[int]) -> np.ndarray:
    mem = mem.copy()
    mem[addr // 4: addr // 4 + len(words)] = words
    return mem


def _identity_many(va):
    return np.where(va + 4 <= 4 * MEM_DW, va, -1)


# Streams a hostile client can put in an IB: every kind of dword the walks must pass over
# (type-0/1/2 headers, unknown opcodes, counts past the end or off by one, the one-dword
# NOP, SDMA headers of unknown ops and sub-ops, WRITE_LINEARs whose count runs past the end),
# and the packets they look at, cut anywhere (a CHAIN or an IB packet at the very end).

def _hostile_pm4(rng: random.Random) -> list[int]:
    looked_at = (packets.WAIT_REG_MEM, packets.INDIRECT_BUFFER, packets.NOP)
    words: list[int] = []
    while len(words) < 48:
        k = rng.randrange(10)
        if k == 0:
            words.append(pm4.TYPE2_FILLER | rng.getrandbits(30))
        elif k == 1:
            words.append(rng.choice((0, 1)) << 30 | rng.getrandbits(30))  # type 0 or 1
        elif k == 2:  # any opcode, any count (0x3FFF: a wrapping NOP, or far past the end)
            words.append(pm4.header(rng.getrandbits(8), rng.choice((0, 1, 5, 6, 0x3FFE, 0x3FFF, rng.getrandbits(14)))))
        elif k == 3:  # a looked-at opcode with its count off by one, or the header alone
            p = rng.choice(looked_at)
            words.append(pm4.header(p.opcode, rng.choice((p.min_count - 1, p.max_count + 1, p.min_count, 0x3FFF))
                                    & 0x3FFF))
        elif k == 4:
            words += _wait(4 * rng.getrandbits(10), rng.getrandbits(2), rng.choice(("EQ", "NE", "LT", "GE")))
        elif k == 5:
            words += pm4.indirect_buffer(4 * rng.getrandbits(10), rng.randrange(40), chain=rng.getrandbits(1))
        elif k == 6:
            words.append(pm4.NOP_PAD)
        elif k == 7:
            words += pm4.nop(rng.randrange(4))
        else:
            words.append(rng.getrandbits(32))
    return words[:rng.randrange(len(words) + 1)]


def _hostile_sdma(rng: random.Random) -> list[int]:
    words: list[int] = []
    while len(words) < 48:
        k = rng.randrange(9)
        if k == 0:  # any op and sub-op (a NOP's header-held count, an unknown POLL_REGMEM sub-op)
            op, sub_op = rng.choice((0, 2, 8, rng.getrandbits(8))), rng.choice((0, 0, 1, rng.getrandbits(8)))
            words.append(sdma.header(op, sub_op, rng.getrandbits(16)))
        elif k == 1:
            words += sdma.nop(rng.randrange(4))
        elif k == 2:
            words += sdma.poll_regmem(4 * rng.getrandbits(10), rng.getrandbits(2), 0xFFFF_FFFF,
                                      rng.choice(("EQ", "NE", "LT", "GE")))
        elif k == 3:  # a WRITE_LINEAR whose count is anything (past the end, or the stream's last dwords)
            w = sdma.write_linear(4 * rng.getrandbits(10), [rng.getrandbits(32)] * rng.randrange(1, 4))
            w[3] = rng.choice((w[3], rng.getrandbits(32), 0xFFFF_FFFF, rng.getrandbits(5)))
            words += w
        elif k == 4:
            words += sdma.write_linear(4 * rng.getrandbits(10), [rng.getrandbits(32)] * rng.randrange(1, 4))
        elif k == 5:
            words += sdma.indirect_buffer(32 * rng.getrandbits(7), rng.randrange(40))
        else:
            words.append(rng.getrandbits(32))
    return words[:rng.randrange(len(words) + 1)]


@pytest.mark.parametrize("fn, holds", [
    ("LT", (True, False, False)), ("LE", (True, True, False)), ("EQ", (False, True, False)),
    ("NE", (True, False, True)), ("GE", (False, True, True)), ("GT", (False, False, True)),
    ("ALWAYS", (True, True, True))])
def test_diagnosis_on_the_boundary(fn, holds):
    """Memory one below, equal to and one above the reference: each function holds or not
    exactly as the CP's compare does, and the message says why it does not."""
    sym = {"LT": "<", "LE": "<=", "EQ": "==", "NE": "!=", "GE": ">=", "GT": ">", "ALWAYS": "always"}[fn]
    ref = 0x80
    for value, h in zip((ref - 1, ref, ref + 1), holds):
        mem = _mem((0x100, _wait(FLAG, ref, fn)), (FLAG, [value]))
        got = find_unsatisfied_wait(mem, [(0x100, 7)], 2)
        if h:
            assert got is None, (fn, value, got)
        else:
            assert got == (f"WAIT_REG_MEM at IB+0x0 (0x100): *{FLAG:#x} & 0xffffffff = {value:#x}, "
                           f"waits for {sym} {ref:#x}"), got


def test_diagnosis_masks_and_skips():
    """The mask applies; fillers, malformed packets, a reserved FUNCTION and polls outside
    memory (at its end, or above 4 GiB) are passed over, and the next wait is found."""
    mem = _mem((FLAG, [0x1_23]))
    assert find_unsatisfied_wait(_put(mem, 0x100, _wait(FLAG, 0x23, "EQ", 0xFF)), [(0x100, 7)], 2) is None
    bad_count = _wait(FLAG, 0, "ALWAYS")
    bad_count[0] = pm4.header(bad_count[0] >> 8 & 0xFF, 6)  # COUNT one too large: malformed
    reserved_fn = pm4.encode_fields("WAIT_REG_MEM", {"FUNCTION": 7, "MEM_SPACE": 1, "ADDR_LO": FLAG >> 2})
    words = ([pm4.TYPE2_FILLER] + bad_count + [0] + reserved_fn
             + _wait(4 * MEM_DW, 1, "EQ")  # the dword just past memory
             + pm4.encode_fields("WAIT_REG_MEM", {"FUNCTION": 3, "MEM_SPACE": 1, "ADDR_LO": FLAG >> 2,
                                                  "ADDR_HI": 1, "REFERENCE": 1, "MASK": 1})
             + _wait(FLAG, 0x24, "EQ", 0xFF))
    at = 4 * (1 + 8 + 7 + 7 + 7)
    got = find_unsatisfied_wait(_put(mem, 0x100, words), [(0x100, len(words))], 2, client_addr=lambda a: a + 0x10000)
    assert got == f"WAIT_REG_MEM at IB+{at:#x} ({0x10100 + at:#x}): *{FLAG:#x} & 0xff = 0x23, waits for == 0x24"


def test_diagnosis_follows_ib2s_and_chains():
    """The CP's path: into IB2s (levels below the device's), along CHAINs (the same
    level), and not into an IB the device could not nest, nor one of IB_SIZE 0."""
    ib1, ib2, tail, ib3 = 0x100, 0x800, 0xC00, 0x1000
    stuck = _wait(FLAG, 1, "EQ")
    done = _wait(FLAG, 0, "EQ")
    mem = _mem((ib1, pm4.indirect_buffer(ib2, 0x10) + done), (ib2, pm4.nop(2) + stuck))
    assert find_unsatisfied_wait(mem, [(ib1, 11)], 2) == \
        f"WAIT_REG_MEM at IB2+0xc ({ib2 + 0xc:#x}): *{FLAG:#x} & 0xffffffff = 0x0, waits for == 0x1"
    assert find_unsatisfied_wait(mem, [(ib1, 11)], 1) is None  # a device with one level never runs the IB2
    zero = pm4.encode_fields("INDIRECT_BUFFER", {"IB_BASE_LO": ib2 >> 2, "VALID": 1})
    assert find_unsatisfied_wait(_mem((ib1, zero), (ib2, stuck)), [(ib1, 4)], 2) is None
    # a CHAIN continues at the same level; what follows it in the IB never runs
    mem = _mem((ib1, pm4.nop(1) + pm4.indirect_buffer(tail, 7, chain=1) + stuck), (tail, stuck))
    assert find_unsatisfied_wait(mem, [(ib1, 13)], 2) == \
        f"WAIT_REG_MEM at IB+0x0 ({tail:#x}): *{FLAG:#x} & 0xffffffff = 0x0, waits for == 0x1"
    # an IB3 (IB2 calling an IB) is past the device's 2 levels: not followed
    mem = _mem((ib1, pm4.indirect_buffer(ib2, 4)), (ib2, pm4.indirect_buffer(ib3, 7)), (ib3, stuck))
    assert find_unsatisfied_wait(mem, [(ib1, 4)], 2) is None
    assert find_unsatisfied_wait(mem, [(ib1, 4)], 3) == \
        f"WAIT_REG_MEM at IB3+0x0 ({ib3:#x}): *{FLAG:#x} & 0xffffffff = 0x0, waits for == 0x1"
    # addresses with a high part: an IB2 above 4 GiB is outside this memory
    hi = pm4.encode_fields("INDIRECT_BUFFER", {"IB_BASE_LO": ib2 >> 2, "IB_BASE_HI": 1, "IB_SIZE": 7, "VALID": 1})
    assert find_unsatisfied_wait(_mem((ib1, hi), (ib2, stuck)), [(ib1, 4)], 2) is None


@pytest.mark.parametrize("many", [None, _identity_many], ids=["one_by_one", "at_once"])
def test_any_wait_holds_walks_as_the_diagnosis(many):
    """The job timer's other question (a queue kept off the CP may be parked in a poll that
    holds, Kmd._may_be_parked): does some WAIT_REG_MEM of the job hold? Along the CP's path
    (an IB2, a CHAIN), whichever comes first; not in an IB the device could not nest, nor
    after a CHAIN; with or without the polls' compares made at once."""
    ib1, ib2, tail = 0x100, 0x800, 0xC00
    no, yes = _wait(FLAG, 1, "EQ"), _wait(FLAG, 0, "EQ")
    kw = dict(translate_many=many)
    assert not any_wait_holds(_mem((ib1, no + no)), [(ib1, 14)], 2, **kw)
    assert any_wait_holds(_mem((ib1, no + yes)), [(ib1, 14)], 2, **kw)  # a later one
    assert any_wait_holds(_mem((ib1, no), (ib2, yes)), [(ib1, 7), (ib2, 7)], 2, **kw)  # another IB of the job
    mem = _mem((ib1, no + pm4.indirect_buffer(ib2, 7)), (ib2, yes))
    assert any_wait_holds(mem, [(ib1, 11)], 2, **kw)
    assert not any_wait_holds(mem, [(ib1, 11)], 1, **kw)  # (one level: the IB2 never runs)
    mem = _mem((ib1, no + pm4.indirect_buffer(tail, 7, chain=1) + yes), (tail, no))
    assert not any_wait_holds(mem, [(ib1, 18)], 2, **kw)  # (what follows a CHAIN never runs)
    assert any_wait_holds(_put(mem, tail, yes), [(ib1, 18)], 2, **kw)
    assert not any_wait_holds(_mem(), [(ib1, 8)], 2, **kw)  # no poll at all


def test_any_wait_holds_decodes_no_poll_that_does_not_hold(monkeypatch):
    """A job of polls none of which holds: the answer without decoding them one by one (each
    decode is Python work under the driver's lock, at each of the timer's looks)."""
    no = _wait(FLAG, 1, "EQ")
    words = no * ((MEM_DW - 0x100) // len(no) - 1)
    mem = _mem((0x100, words))
    decoded = [0]
    real = pm4.decode
    monkeypatch.setattr(pm4, "decode", lambda *a, **k: (decoded.__setitem__(0, decoded[0] + 1), real(*a, **k))[1])
    assert not any_wait_holds(mem, [(0x100, len(words))], 2, translate_many=_identity_many)
    assert decoded[0] == 0, decoded
    assert any_wait_holds(_put(mem, 0x100 + 4 * len(words) - 4 * len(no), _wait(FLAG, 0, "EQ")),
                          [(0x100, len(words))], 2, translate_many=_identity_many)
    assert len(words) > 3000 and decoded[0] == 0, decoded


def test_diagnosis_budget_and_memory_bounds():
    """At most `max_dwords` dwords are walked over all chunks (a job exactly that long is
    walked); an IB that runs past the end of memory is not; address 0 is memory."""
    stuck = _wait(FLAG, 1, "EQ") + [pm4.TYPE2_FILLER]  # 8 dwords
    mem = _mem((0, stuck), (0x100, pm4.pad(8)), (0x200, stuck))
    msg = f"WAIT_REG_MEM at IB+0x0 ({{:#x}}): *{FLAG:#x} & 0xffffffff = 0x0, waits for == 0x1"
    assert find_unsatisfied_wait(mem, [(0, 8)], 2) == msg.format(0)
    assert find_unsatisfied_wait(mem, [(0x100, 8), (0x200, 8)], 2, max_dwords=16) == msg.format(0x200)
    assert find_unsatisfied_wait(mem, [(0x100, 8), (0x200, 8)], 2, max_dwords=15) is None
    assert find_unsatisfied_wait(mem, [(0x200, 8)], 2, max_dwords=7) is None
    end = 4 * MEM_DW
    mem = _mem((end - 32, stuck))
    assert find_unsatisfied_wait(mem, [(end - 32, 8)], 2) == msg.format(end - 32)
    assert find_unsatisfied_wait(mem, [(end - 32, 9)], 2) is None  # one dword past the end
    mem = _mem((end - 64, stuck))
    assert find_unsatisfied_wait(mem, [(end - 64, 16)], 2) == msg.format(end - 64)
    assert find_unsatisfied_wait(mem, [(end - 64, 17)], 2) is None


def test_diagnosis_reads_an_ib_only_where_translate_maps_all_of_it():
    """Without `read`, an IB is read where `translate` puts it only when translate maps its
    whole range (asked with the IB's size in bytes): an IB that runs off the one mapped page
    is not read on from the memory after that page, which is anyone's (here it holds the
    rest of a WAIT_REG_MEM that is not the job's); the same IB inside the page is found, and
    so is a wait polling the page's last dword."""
    page_va, page = 0x40_0000, 0x1000  # one page of the job's VA, at physical address 0

    def translate(va: int, n: int) -> int | None:
        return va - page_va if page_va <= va and va + n <= page_va + page else None
    stuck = _wait(page_va + 0x100, 1, "EQ") + [pm4.TYPE2_FILLER]  # 8 dwords; polls the page's 0x100
    msg = "WAIT_REG_MEM at IB+0x0 ({:#x}): *0x400100 & 0xffffffff = 0x0, waits for == 0x1"
    inside = _mem((0x800, stuck))
    assert find_unsatisfied_wait(inside, [(page_va + 0x800, 8)], 2, translate=translate) == msg.format(page_va + 0x800)
    across = _mem((page - 16, stuck))  # its first 4 dwords in the page, the rest past it
    assert find_unsatisfied_wait(across, [(page_va + page - 16, 8)], 2, translate=translate) is None
    # a wait polling the page's last dword is read there (translate is asked for its 4 bytes)
    last = _wait(page_va + page - 4, 1, "EQ")
    assert find_unsatisfied_wait(_mem((0x800, last)), [(page_va + 0x800, 7)], 2, translate=translate) == (
        f"WAIT_REG_MEM at IB+0x0 ({page_va + 0x800:#x}): *{page_va + page - 4:#x} & 0xffffffff = 0x0, waits for == 0x1")


def test_poll_diagnosis_passes_over_an_ib_it_cannot_read():
    """An SDMA job's IB that `read` cannot give (not all mapped) is passed over, not the end
    of the search, and so is any other packet: the POLL_REGMEM a later IB of the job is stuck
    in, behind a NOP, is still found."""
    words = sdma.nop(1) + sdma.poll_regmem(FLAG, 1, 0xFFFF_FFFF, "EQ")
    mem = _mem((0x200, words))

    def read(va: int, n: int) -> np.ndarray | None:
        return None if va == 0x100 else mem[va // 4: va // 4 + n]
    got = find_unsatisfied_poll(mem, [(0x100, len(words)), (0x200, len(words))], lambda a: a, read, lambda va, n: va)
    assert got == f"POLL_REGMEM at IB+0x8 (0x208): *{FLAG:#x} & 0xffffffff = 0x0, waits for == 0x1"
    assert (got.level, got.offset, got.addr) == (1, 8, 0x208)


def test_diagnosis_finds_the_packets_the_decoders_find_in_hostile_streams():
    """The diagnosis finds packets by their headers alone (a length per dword, then one step
    a packet: reset/stuck.py) rather than decoding each: in any stream it finds exactly the
    WAIT_REG_MEMs and INDIRECT_BUFFERs (POLL_REGMEMs) that pm4.decode_stream
    (sdma.decode_stream) finds, well-formed or not, at the same offsets, from a list or from
    memory; and a walk over such a stream, as the whole IB or cut at the end of memory (a
    packet running past it), neither raises nor runs on."""
    rng = random.Random(0x57C4)
    wanted = (packets.WAIT_REG_MEM.opcode, packets.INDIRECT_BUFFER.opcode)
    poll = sdma_packets.by_name["POLL_REGMEM"]
    for _ in range(400):
        words = _hostile_pm4(rng)
        want = [repr(i) for i in pm4.decode_stream(words)
                if words[i.offset] >> 30 == 3 and words[i.offset] >> 8 & 0xFF in wanted]
        assert [repr(i) for i in _pm4_packets(words, wanted)] == want, words
        assert [repr(i) for i in _pm4_packets(np.array(words, dtype=np.uint32), wanted)] == want, words
        mem = _mem((4 * MEM_DW - 4 * len(words), words))
        for ib in ((4 * MEM_DW - 4 * len(words), len(words)), (4 * MEM_DW - 4 * len(words), len(words) + 1)):
            got = find_unsatisfied_wait(mem, [ib], 3)
            assert got is None or got.startswith("WAIT_REG_MEM at IB"), got

        words = _hostile_sdma(rng)
        want = [repr(i) for i in sdma.decode_stream(words) if words[i.offset] & 0xFFFF == poll.op | poll.sub_op << 8]
        assert [repr(i) for i in _sdma_packets(words, "POLL_REGMEM")] == want, words
        assert [repr(i) for i in _sdma_packets(np.array(words, dtype=np.uint32), "POLL_REGMEM")] == want, words
        mem = _mem((4 * MEM_DW - 4 * len(words), words))
        got = find_unsatisfied_poll(mem, [(4 * MEM_DW - 4 * len(words), len(words))], lambda a: a,
                                    lambda va, n: mem[va // 4: va // 4 + n], lambda va, n: va)
        assert got is None or got.startswith("POLL_REGMEM at IB"), got


def test_diagnosis_passes_over_the_polls_that_hold_with_the_same_answer():
    """With `translate_many` the walks make every poll's compare at once (numpy) and decode
    only those that may not hold (a job of polls that hold cost one Python decode each, the
    driver's lock held): in hostile streams of polls of every function, reference and mask,
    at addresses the translation maps, does not map, maps past the end of memory or above
    4 GiB, the answer is the one the walk gives looking at each poll."""
    rng = random.Random(0x5A4E)
    base = 0x2000  # the translation: [0x10000, 0x12000) -> [base, base + 0x2000), nothing else

    def translate(va: int, n: int) -> int | None:
        return base + va - 0x10000 if 0x10000 <= va and va + n <= 0x12000 else None

    def translate_many(va: np.ndarray) -> np.ndarray:
        return np.where((va >= 0x10000) & (va + 4 <= 0x12000), base + va - 0x10000, -1)

    def addr() -> int:
        return rng.choice((0x10000 + 4 * rng.getrandbits(11), 4 * rng.getrandbits(10), 0x11FFC, 0x12000,
                           0x1_0001_0000, 4 * MEM_DW))
    fns = ("ALWAYS", "LT", "LE", "EQ", "NE", "GE", "GT")
    mem = np.array([rng.choice((0, 1, 2, 0xFFFF_FFFF, rng.getrandbits(32))) for _ in range(MEM_DW)], dtype=np.uint32)
    for _ in range(300):
        pm, sd = _hostile_pm4(rng), _hostile_sdma(rng)
        for _ in range(rng.randrange(1, 12)):
            ref, mask = rng.choice((0, 1, 2, 0xFFFF_FFFF, rng.getrandbits(32))), rng.choice((0xFFFF_FFFF, 0xFF, 1, 0))
            at = rng.randrange(len(pm) + 1)
            w = pm4.wait_reg_mem(addr(), ref, mask, rng.choice(fns))
            if rng.random() < 0.1:
                w[1] |= 7  # FUNCTION 7: compares nothing
            pm[at:at] = w
            at = rng.randrange(len(sd) + 1)
            sd[at:at] = sdma.poll_regmem(addr(), ref, mask, rng.choice(fns))
        m = _put(mem, 0x100, pm[:0x700])
        ib = (0x100, min(len(pm), 0x700))
        args = dict(translate=lambda va, n: va if va + n <= 4 * MEM_DW else None)
        want = find_unsatisfied_wait(m, [ib], 2, **args)
        assert find_unsatisfied_wait(m, [ib], 2, translate_many=lambda va: np.where(va + 4 <= 4 * MEM_DW, va, -1),
                                     **args) == want
        ml = _put(mem, base, pm[:0x700])
        ib = (0x10000, min(len(pm), 0x700))
        want = find_unsatisfied_wait(ml, [ib], 2, translate=translate)
        assert find_unsatisfied_wait(ml, [ib], 2, translate=translate, translate_many=translate_many) == want
        ms = _put(mem, base, sd[:0x700])
        read = lambda va, n: ms[translate(va, 4 * n) // 4:][:n] if translate(va, 4 * n) is not None else None  # noqa: E731
        ib = (0x10000, min(len(sd), 0x700))
        want = find_unsatisfied_poll(ms, [ib], lambda a: a, read, translate)
        got = find_unsatisfied_poll(ms, [ib], lambda a: a, read, translate, translate_many)
        assert got == want and (got is None or (got.level, got.offset, got.addr) == (want.level, want.offset, want.addr))
