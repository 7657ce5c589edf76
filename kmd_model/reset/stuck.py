"""What a timed-out job is stuck in (the job timer's diagnosis, reset/job_timer.py): the first
poll of its IBs whose condition does not hold in memory now, a WAIT_REG_MEM for a PM4 job
(find_unsatisfied_wait, walking IB2s and CHAINs as the CP does), a POLL_REGMEM for an SDMA
job (find_unsatisfied_poll). Its place becomes the timeout error's (HwErrorInfo `level`,
`offset`, `addr`), so the UMD names the call that recorded the poll. The two share the
compare (the engines' FUNCTION codes are the same) and the sentence. The same walk answers
whether some WAIT_REG_MEM of a job holds (any_wait_holds: the job timer's parked queue).
"""

from __future__ import annotations

import numpy as np

from spec import packets, pm4, sdma
from spec.sdma import codec as sdma_codec
from spec.sdma import packets as sdma_packets

from .. import regs
from .cp_error import LEVEL_TEXT


class StuckWait(str):
    """find_unsatisfied_wait's (and find_unsatisfied_poll's) answer: the sentence, and where the
    packet is, for the error's fields: `level` (1: IB1), `offset` (bytes from its IB's start),
    `addr` (the client's)."""

    level: int
    offset: int
    addr: int


def _stuck(text: str, level: int, offset: int, addr: int) -> StuckWait:
    s = StuckWait(text)
    s.level, s.offset, s.addr = level, offset, addr
    return s


_WRM_FUNC = {0: lambda v, r: True, 1: lambda v, r: v < r, 2: lambda v, r: v <= r,
             3: lambda v, r: v == r, 4: lambda v, r: v != r, 5: lambda v, r: v >= r,
             6: lambda v, r: v > r}
_WRM_SYM = {0: "always", 1: "<", 2: "<=", 3: "==", 4: "!=", 5: ">=", 6: ">"}


# ------------------------------------------------------------------ the packets a walk looks at

# The walks look at a few kinds of packet (WAIT_REG_MEM and INDIRECT_BUFFER, POLL_REGMEM)
# in IBs of up to a million dwords each, under the driver's lock: decoding every packet
# of them in Python (pm4.decode_stream, sdma.decode_stream) took 5 s a million dwords, so a
# client whose job of maximum-size IBs hung held every other client's ioctls that long at
# each of its timeouts. The packets are found as the decoders find them, by their headers
# alone (each dword's length as a header, with numpy, then one step a packet), and only
# those of the kinds looked at are decoded.

_H = pm4.HEADER
_TYPE, _OP, _COUNT = (_H.field(n) for n in ("TYPE", "OPCODE", "COUNT"))
_PM4_WRAPS = np.zeros(_OP.max + 1, dtype=bool)  # opcode -> COUNT all ones is the header alone (NOP)
for _p in packets.PACKETS:
    _PM4_WRAPS[_p.opcode] = _p.count_wraps


def _starts(length: np.ndarray, wanted: np.ndarray):
    """The packet starts a decoder's walk from dword 0 finds (`length`: each dword's packet
    length as a header, >= 1) that are `wanted`, in order."""
    lens, want = length.tolist(), wanted.tolist()
    n, i = len(lens), 0
    while i < n:
        if want[i]:
            yield i
        i += lens[i]


def _pm4_packets(words, opcodes: tuple[int, ...]):
    """pm4.decode_stream(words)'s items of these opcodes (Packets, or Malformed ones), in
    order, the others skipped undecoded (from one copy of `words`, as decode_stream's)."""
    h = np.array(words, dtype=np.int64)
    t3 = ((h >> _TYPE.lsb) & _TYPE.max) == 3
    op = (h >> _OP.lsb) & _OP.max
    cnt = (h >> _COUNT.lsb) & _COUNT.max
    length = np.where(t3, np.where(_PM4_WRAPS[op], ((cnt + 1) & _COUNT.max) + 1, cnt + 2), 1)
    for i in _starts(length, t3 & np.isin(op, opcodes)):
        yield pm4.decode(h, i)


def _sdma_packets(words, name: str):
    """sdma.decode_stream(words)'s items of packet `name` (Packets, or Malformed ones), in
    order, the others skipped undecoded (from one copy of `words`, as decode_stream's)."""
    w, at = _sdma_starts(words, name)
    window = w.tolist()
    for i in at:
        yield sdma.decode(window, i)


def _sdma_starts(words, name: str) -> tuple[np.ndarray, list[int]]:
    """(the words as int64, the starts of packet `name`): _sdma_packets' walk, undecoded."""
    w = np.array(words, dtype=np.int64)
    n = len(w)
    op = sdma_codec.SDMA_OP
    sub = sdma_codec.SDMA_SUB_OP
    key = ((w >> op.lsb) & op.max) | ((w >> sub.lsb) & sub.max) << op.width
    length = np.ones(n, dtype=np.int64)  # (an unknown header: one dword, as decode)
    at = np.arange(n)
    for p in sdma_packets.SDMA_PACKETS:
        mine = key == (p.op | p.sub_op << op.width)
        if p.tail is None:
            length[mine] = 1 + p.fixed
            continue
        lf = p.field(p.length_field)
        if lf.dword == -1:
            v = w
        else:  # (past the end: truncated, the stream's last item)
            j = at + 1 + lf.dword
            v = np.where(j < n, w[np.minimum(j, n - 1)], 0)
            mine_short = mine & (j >= n)
            length[mine_short] = n
            mine &= ~mine_short
        length[mine] = (1 + p.fixed + ((v >> lf.lsb) & lf.max) + p.length_bias)[mine]
    want = key == (sdma_packets.by_name[name].op | sdma_packets.by_name[name].sub_op << op.width)
    return w, list(_starts(np.maximum(length, 1), want))


def _surely_held(p, fn: str, ref: str, w: np.ndarray, at: list[int], mem32: np.ndarray,
                 translate_many) -> np.ndarray:
    """For the polls `p` (WAIT_REG_MEM or POLL_REGMEM) starting at `at` in `w` (int64): True
    where _unsatisfied surely answers None (its compare holds in memory now, its address is
    in no memory, its function compares nothing), all at once with numpy. Only the rest are
    decoded and looked at one by one: a job of a million dwords of polls that hold, then one
    that does not, had 174,762 POLL_REGMEMs decoded one by one (5.3 s an IB, the driver's
    lock held, at each of its timeouts). `translate_many(vas)`: their memory addresses, -1
    where none (None: no such function, every poll is looked at)."""
    a = np.array(at, dtype=np.int64)
    n = len(w)
    if translate_many is None or not len(a):
        return np.zeros(len(a), dtype=bool)
    whole = a + 1 + p.fixed <= n  # (a truncated one is decoded: Malformed, skipped there)
    a = np.where(whole, a, 0)

    def field(name: str) -> np.ndarray:
        f = p.field(name)
        return (w[np.minimum(a + 1 + f.dword, n - 1)] >> f.lsb) & f.max
    lo, hi = field("ADDR_LO"), field("ADDR_HI")
    narrow = hi < (1 << 30)  # (wider: far past any memory, left to the exact look)
    va = (lo << 2) | (np.where(narrow, hi, 0) << 32)
    pa = translate_many(va)
    inmem = (pa >= 0) & (pa // 4 < len(mem32))
    v = np.where(inmem, mem32[np.where(inmem, pa // 4, 0)].astype(np.int64), 0) & field("MASK")
    f, r = field(fn), field(ref)
    holds = np.ones(len(a), dtype=bool)  # (a function with no compare: never stuck)
    for code, cmp in ((0, None), (1, np.less), (2, np.less_equal), (3, np.equal), (4, np.not_equal),
                      (5, np.greater_equal), (6, np.greater)):
        mine = f == code
        if cmp is not None:
            holds[mine] = cmp(v, r)[mine]
    return whole & narrow & (~inmem | holds)


def _unsatisfied(mem32: np.ndarray, translate, client_addr, item, fn: int, ref: int, level: int,
                 ib: int) -> StuckWait | None:
    """`item`, a WAIT_REG_MEM or POLL_REGMEM at `level` in the IB at `ib` (the job's address),
    described when its compare (`fn` of the masked dword at its address with `ref`) does
    not hold in memory now; None when it holds or the address is in no memory."""
    f = item.fields
    a = f["ADDR_LO"] << 2 | f["ADDR_HI"] << 32
    ap = translate(a, 4)
    if ap is None or ap // 4 >= len(mem32):
        return None
    v = int(mem32[ap // 4]) & f["MASK"]
    if fn in _WRM_FUNC and not _WRM_FUNC[fn](v, ref):
        lvl = LEVEL_TEXT.get(level, f"IB{level}")
        at = client_addr(ib + 4 * item.offset)
        return _stuck(f"{item.name} at {lvl}+{4 * item.offset:#x} ({at:#x}): "
                      f"*{a:#x} & {f['MASK']:#x} = {v:#x}, waits for {_WRM_SYM[fn]} {ref:#x}",
                      level, 4 * item.offset, at)
    return None


_LOOKED_AT = (packets.WAIT_REG_MEM.opcode, packets.INDIRECT_BUFFER.opcode)
_WRM_OP = packets.WAIT_REG_MEM.opcode


def find_unsatisfied_wait(mem32: np.ndarray, ibs: list[tuple[int, int]], ib_levels: int,
                          max_dwords: int = 1 << 22, client_addr=lambda a: a,
                          translate=lambda va, n: va, read=None, translate_many=None) -> StuckWait | None:
    """For a job that timed out: the first WAIT_REG_MEM in its IBs (as the CP runs them: the
    checked copies) whose condition does not hold in memory now, described ("WAIT_REG_MEM at
    IB+0x10 (0x201010): *0x5000 & 0xffffffff = 0x0, waits for == 0x1", the packet named by
    the client's address, `client_addr`), or None. `translate(va, nbytes)`: where the job's
    addresses are in memory (None: nowhere); `read(va, ndwords)`: the dwords of an IB (None:
    not all mapped), by default the `translate`d range when it is one piece of memory. A diagnosis,
    not proof: the CP may be stuck elsewhere. Each IB is read once: memory does not change
    during the walk, so an IB met again (a CHAIN loop, checker off) adds nothing; such a
    loop was walked until `max_dwords` ran out (3.3 s for an 8-dword IB, the driver's lock
    held). `translate_many`: `translate` for an array of addresses (-1: nowhere), with which
    the WAIT_REG_MEMs whose compare holds are passed over undecoded (_surely_held), and an
    INDIRECT_BUFFER met again with the same dwords is decoded once."""
    return _walk_waits(mem32, ibs, ib_levels, max_dwords, client_addr, translate, read, translate_many, False)


def any_wait_holds(mem32: np.ndarray, ibs: list[tuple[int, int]], ib_levels: int, max_dwords: int = 1 << 22,
                   client_addr=lambda a: a, translate=lambda va, n: va, read=None, translate_many=None) -> bool:
    """Does some WAIT_REG_MEM of the job (its IBs walked as find_unsatisfied_wait walks them,
    same arguments) hold in memory now (or poll no memory, or compare nothing, as
    find_unsatisfied_wait passes it over)? A queue polling in that job may be in that one
    (the job timer: a queue the other CP queue kept off the CP may be parked in it,
    Kmd._may_be_parked). With `translate_many` only the polls it finds holding count (all
    at once, none decoded): one whose address is past 2^62 does not, the safe side."""
    return _walk_waits(mem32, ibs, ib_levels, max_dwords, client_addr, translate, read, translate_many,
                       True) is not None


def _walk_waits(mem32, ibs, ib_levels, max_dwords, client_addr, translate, read, translate_many,
                want_held: bool):
    """find_unsatisfied_wait's walk: the first WAIT_REG_MEM whose condition does not hold
    (StuckWait), or with `want_held` the first that holds (True); None when there is none."""
    budget = [max_dwords]
    seen: set[tuple[int, int, int]] = set()

    def contiguous(va: int, n: int) -> np.ndarray | None:
        pa = translate(va, 4 * n)
        return None if pa is None or pa // 4 + n > len(mem32) else mem32[pa // 4: pa // 4 + n]

    fetch = read or contiguous

    def walk(addr: int, size_dw: int, level: int) -> StuckWait | bool | None:
        while True:
            if (addr, size_dw, level) in seen:
                return None
            seen.add((addr, size_dw, level))
            budget[0] -= size_dw
            words = fetch(addr, size_dw) if addr >= 0 and budget[0] >= 0 else None
            if words is None:
                return None
            chained = None
            h = np.array(words, dtype=np.int64)
            t3 = ((h >> _TYPE.lsb) & _TYPE.max) == 3
            op = (h >> _OP.lsb) & _OP.max
            cnt = (h >> _COUNT.lsb) & _COUNT.max
            length = np.where(t3, np.where(_PM4_WRAPS[op], ((cnt + 1) & _COUNT.max) + 1, cnt + 2), 1)
            at = list(_starts(length, t3 & np.isin(op, _LOOKED_AT)))
            waits = [i for i in at if op[i] == _WRM_OP]
            held = set(np.array(waits, dtype=np.int64)[_surely_held(
                packets.WAIT_REG_MEM, "FUNCTION", "REFERENCE", h, waits, mem32, translate_many)].tolist())
            ibs_seen: dict[tuple, object] = {}
            for i in at:
                if i in held:
                    if want_held:
                        return True
                    continue
                if op[i] == _WRM_OP:
                    if want_held and translate_many is not None:
                        # (its compare does not hold, or its address is past 2^62: no poll to
                        # wait in. Decoded one by one, a job of a million dwords of polls that
                        # do not hold cost seconds, the driver's lock held, at every look)
                        continue
                    item = pm4.decode(h, i)
                else:  # an INDIRECT_BUFFER: the same dwords decode the same (a call repeated in a loop)
                    key = tuple(h[i:i + int(length[i])].tolist())
                    item = ibs_seen.get(key)
                    if item is None:
                        item = ibs_seen[key] = pm4.decode(h, i)
                if not item.ok:
                    continue
                f = item.fields
                if item.name == "WAIT_REG_MEM":
                    hit = _unsatisfied(mem32, translate, client_addr, item, f["FUNCTION"], f["REFERENCE"], level, addr)
                    if want_held and not hit:
                        return True
                    if hit and not want_held:
                        return hit
                elif item.name == "INDIRECT_BUFFER" and f["IB_SIZE"]:
                    base = f["IB_BASE_LO"] << 2 | f["IB_BASE_HI"] << 32
                    if f["CHAIN"]:
                        chained = (base, f["IB_SIZE"])
                        break
                    if level < ib_levels:
                        hit = walk(base, f["IB_SIZE"], level + 1)
                        if hit:
                            return hit
            if chained is None:
                return None
            addr, size_dw = chained

    for addr, size_dw in ibs:
        hit = walk(addr, size_dw, 1)
        if hit:
            return hit
    return None


def find_unsatisfied_poll(mem32, ibs: list[tuple[int, int]], client_addr, read, translate,
                          translate_many=None) -> StuckWait | None:
    """find_unsatisfied_wait for an SDMA job: the first POLL_REGMEM of its IBs (SDMA IBs do not
    nest) whose condition does not hold in memory now ("POLL_REGMEM at IB+0x0 (0x201000):
    *0x5000 & 0xffffffff = 0x0, waits for == 0x1"), or None. A diagnosis, as the gfx one
    (`translate_many` as there: the polls that hold are passed over undecoded)."""
    for addr, size_dw in ibs:
        words = read(addr, size_dw)
        if words is None:
            continue
        w, at = _sdma_starts(words, "POLL_REGMEM")
        held = _surely_held(sdma_packets.POLL_REGMEM, "FUNC", "VALUE", w, at, mem32, translate_many)
        window = None
        for i in (i for i, h in zip(at, held.tolist()) if not h):
            if window is None:
                window = w.tolist()
            item = sdma.decode(window, i)
            if not item.ok:
                continue
            hit = _unsatisfied(mem32, translate, client_addr, item, item.fields["FUNC"], item.fields["VALUE"],
                               regs.IbLevel.IB1, addr)
            if hit:
                return hit
    return None
