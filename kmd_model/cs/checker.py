"""The command-stream checker and its shadow copies: a second line of defence behind the MMU.

The MMU (kmd_model/mm/vm.py) already keeps a job inside its file's mappings; on top of that
the KMD does what i915's command parser does: at CS it copies every IB the job can reach
(the chunks, the IB2s they call, the IBs they CHAIN to) out of the client's memory,
checks the copies, points the copied INDIRECT_BUFFER packets at the copies of their
targets, and gives the ring the copies. The CP never fetches a command from client
memory, so nothing a client writes after the CS ioctl returns (from the CPU, or from the
GPU with WRITE_DATA or DMA_DATA into its own IBs) reaches the CP unchecked, and a stream
the KMD accepts never stops the CP with a packet error. The copies live in the kernel's
shadow pool (kmd_model/cs/shadow.py), mapped executable-only at the top of every VM, and are
freed when the job's fence signals. Addresses are the file's virtual addresses: "in one
BO of the client" below means inside one of its VM's mappings.

What a checked copy may do (docs/architecture.md, "The security boundary"):

    every packet    passes every check the CP makes (spec/rules.py, the same table), so
                    the CP never stops on it with a packet error; reserved bits are 0
    WRITE_DATA      writes [addr, addr + 4 * len(data))           in one BO of the client
                    (with ADDR_INCR = NO_INCREMENT: [addr, addr + 4))
    WAIT_REG_MEM    reads  [addr, addr + 4)                       in one BO of the client
    RELEASE_MEM     writes [addr, addr + 4 or 8) (per DATA_SEL)   in one BO of the client
    DMA_DATA        reads  [src, src + n), writes [dst, dst + n)  each in one BO of the client
    INDIRECT_BUFFER runs   [base, base + 4 * IB_SIZE)             in one BO of the client,
                    copied and checked itself; no CHAIN loop; at most `max_job_dw` dwords run
                    in all (each IB counted every time it runs)

The checks are made on whole IBs at once with numpy (one Python step per packet header to
find the packets, none per payload dword); the first packet that fails is then checked
again one at a time by the same rules, which writes the error message.

A check may take a second (a job of `max_job_dw` one-dword packets) and runs under the
driver's lock: between its steps, once it has done PAUSE_DW dwords' worth of work since the
last (dwords walked, packets checked, PAUSE_DW / PAUSE_CALLS an INDIRECT_BUFFER followed,
IB_WORK an IB: a job smaller than that never pauses), it calls the CS's `pause`, which hands the lock to the threads waiting for it (core/lock.py). What it read
stays good only while the file's mappings stay as they were: after a pause that let others
in, a check whose file's mappings changed (a new `Vm.lookup_arrays()`: a GEM_VA, a
GEM_CLOSE, a closed BO released) raises CheckAgain, and the CS starts again; every read of
client memory is made under the lock, with the mappings the check began with.
"""

from __future__ import annotations

import errno
import logging
from typing import TYPE_CHECKING

import numpy as np

from spec import packets, pm4, rules
from spec.packets import HEADER

from ..log import get_logger
from ..reset.cp_error import LEVEL_TEXT
from ..uapi import KmdError, PacketAt, VmFlags
from .checked import CheckedJob, Segment

if TYPE_CHECKING:
    from ..core.ctx import Context

log = get_logger("cs")

SEGMENT_ALIGN = 32  # bytes: each shadow copy starts on a 32-byte boundary, as the UMD's IBs do

_TYPE, _OPCODE, _COUNT = (HEADER.field(n) for n in ("TYPE", "OPCODE", "COUNT"))
# as plain ints: the checker runs once per IB, and Field.max is a property
_TYPE_LSB, _OP_LSB, _OP_MAX, _CNT_LSB, _CNT_MAX = _TYPE.lsb, _OPCODE.lsb, _OPCODE.max, _COUNT.lsb, _COUNT.max
_NOP_OP = packets.NOP.opcode
_MAX_PACKET_DW = _CNT_MAX + 2  # the longest packet: its header and COUNT + 1 dwords
_IB = packets.INDIRECT_BUFFER
_WD_NO_INCREMENT = packets.WRITE_DATA.field("ADDR_INCR").values["NO_INCREMENT"]
_IB_LO, _IB_HI = (_IB.field(n) for n in _IB.value("base").fields)
_RM_BYTES = {"NONE": 0, "DATA_32": 4, "DATA_64": 8, "TIMESTAMP": 8}
_DMA = packets.DMA_DATA
_DMA_FILL = _DMA.field("SRC_SEL").values["DATA"]
# what each access needs of its mapping: the MMU's rule (spec/vm.py), checked at CS so a
# job never faults on it; an IB needs EXECUTABLE although the CP runs its checked copy
_R, _W, _X = VmFlags.READABLE, VmFlags.WRITEABLE, VmFlags.EXECUTABLE
_NEED = {"reads": _R, "polls": _R, "writes": _W, "runs": _X}  # _reach's verbs

# opcode -> (min COUNT, max COUNT) for the header checks, as 256-entry tables
_KNOWN = np.zeros(256, dtype=bool)
_MIN_COUNT = np.zeros(256, dtype=np.int64)
_MAX_COUNT = np.zeros(256, dtype=np.int64)
for _p in packets.PACKETS:
    _KNOWN[_p.opcode] = True
    _MIN_COUNT[_p.opcode], _MAX_COUNT[_p.opcode] = _p.min_count, _p.max_count

_RM_DATA_SEL = packets.RELEASE_MEM.field("DATA_SEL")
_RM_NBYTES = np.zeros(_RM_DATA_SEL.max + 1, dtype=np.int64)  # DATA_SEL -> bytes written
for _name, _v in _RM_DATA_SEL.values.items():
    _RM_NBYTES[_v] = _RM_BYTES.get(_name, 0)  # (the unsupported ones are refused anyway)


def _lut(mx: int, values) -> np.ndarray:
    t = np.zeros(mx + 1, dtype=bool)
    t[list(values)] = True
    return t


class _Plan:
    """spec/rules.py's checks of one packet kind, as numpy lookups over many packets."""

    def __init__(self, r: rules.PacketRules):
        p = self.packet = r.packet
        self.fixed = p.fixed
        self.offsets = 1 + np.arange(p.fixed)  # payload dwords after the header
        self.enums = [(*e.where, _lut(e.field.max, e.supported)) for e in r.enums]
        # bits that must be 0: reserved bits (the KMD's rule) and low address bits (check 5),
        # one test per dword; then the alignment rules that hold only for some field values
        zero = list(r.reserved)
        self.aligns = []
        for a in r.aligns:
            if a.when is None:
                zero[a.dword] |= a.low
            else:
                wd, wlsb, wmx, vals = a.when_where
                self.aligns.append((a.dword, a.low, (wd, wlsb, wmx, _lut(wmx, vals))))
        self.aligns = [(d, m, None) for d, m in enumerate(zero) if m] + self.aligns
        self._fields = {f.name: (f.dword, f.lsb, f.max) for f in p.fields}
        self._values = {}
        for v in p.values:
            lo, hi = (p.field(n) for n in v.fields)
            self._values[v.name] = (lo.dword, hi.dword, hi.lsb, hi.max)

    def field(self, pay: np.ndarray, name: str) -> np.ndarray:
        d, lsb, mx = self._fields[name]
        return (pay[:, d] >> lsb) & mx

    def value(self, pay: np.ndarray, name: str) -> np.ndarray:
        """A 64-bit value (an address) as the CP reads it: the low dword whole, the high field."""
        lo, hi, lsb, mx = self._values[name]
        return ((pay[:, hi] >> lsb) & mx) << 32 | pay[:, lo]


_PLANS = {p.opcode: _Plan(rules.RULES[p.name]) for p in packets.PACKETS}


PAUSE_DW = 1 << 16  # dwords of one IB whose packets are found between two pauses (some 25 ms)
PAUSE_CALLS = 1 << 12  # INDIRECT_BUFFERs followed between two pauses (some 25 ms)
IB_WORK = 256  # dwords' worth of work an IB's check costs whatever its size (numpy calls)


class CheckAgain(Exception):
    """A check paused, other ioctls ran, and the file's mappings changed (or it was closed):
    what the check read may not be the client's any more. The CS starts again."""


class _Walk:
    """State of one check: the copies made so far and the budget left; the mappings it
    reads (`arrays`, `mine`: kept here, the checker's own copy restored after each pause, as
    other CSs check meanwhile) and the CS's `pause` (None: never pauses)."""

    def __init__(self, ctx: "Context", limit: int, max_ibs: int, space=None, pause=None, charge=None):
        self.ctx = ctx
        self.space = space
        self.pause = pause
        self.charge = charge  # charge(nbytes): before each copy (the CS's memory bound: may raise)
        self.arrays = space.lookup_arrays() if space is not None else None
        self.mine = self.arrays[2] == ctx.file.fd if space is not None else None
        self.limit = limit
        self.max_ibs = max_ibs
        self.copied = 0  # dwords copied (distinct IBs)
        self.work = 0  # dwords' worth of work since the last pause (_pause)
        self.memo: dict[tuple[int, int, int], Segment] = {}
        self.segments: list[Segment] = []
        self.packets = 0

    def over(self) -> KmdError:
        return KmdError(errno.EINVAL, f"CS: the job of context {self.ctx.id} runs more than {self.limit} "
                        "dwords (the per-job limit; every IB counts each time it runs)")


class CsChecker:
    def __init__(self, mem32: np.ndarray, caps: rules.Caps, max_job_dw: int, max_job_ibs: int):
        self.mem32 = mem32
        self.caps = caps
        self.max_job_dw = max_job_dw
        self.max_job_ibs = max_job_ibs  # distinct IBs copied per job: bounds the checker's CPU time
        self._mem_dw = len(mem32)

    # ------------------------------------------------------------------ the job

    def check(self, ctx: "Context", ibs: list[tuple[int, int]], space, pause=None, charge=None) -> CheckedJob:
        """Copy and check the job's IB chunks [(va, size_dw)] and everything they reach, in
        `space` (the file's Vm: its mappings, lookup_arrays()); raise KmdError on the first
        problem. `pause()`, called between steps, may let other threads have the driver's
        lock (True when it did): CheckAgain if the mappings changed meanwhile. `charge(nbytes)`
        is told of each copy before it is made (and may refuse it: KmdError)."""
        w = _Walk(ctx, self.max_job_dw, self.max_job_ibs, space, pause, charge)
        self._use(w)
        chunks = []
        total = 0
        for addr, size_dw in ibs:
            i = self._owned_index(addr, 4 * size_dw)
            if i is None:
                part = self._straddles(ctx, addr, "an IB")
                # EINVAL, as amdgpu_cs_find_mapping answers for a ring whose IBs the kernel parses
                raise KmdError(errno.EINVAL, f"CS: IB at {addr:#x}+{4 * size_dw:#x} "
                               + (f"is outside every mapping of context {ctx.id}" if part is None else part))
            if not self._permits(i, _X):
                raise KmdError(errno.EINVAL, f"CS: IB at {addr:#x}+{4 * size_dw:#x} is in a mapping of "
                               f"context {ctx.id} without EXECUTABLE")
            seg = self._chain(w, addr, size_dw, 1, None)
            total += seg.runs
            if total > w.limit:
                raise w.over()
            chunks.append(seg)
        return CheckedJob(chunks, w.segments, total, w.packets,
                          self._layout(w.segments))

    def _use(self, w: _Walk) -> None:
        self._arrays, self._mine = w.arrays, w.mine

    def _pause(self, w: _Walk, work: int) -> None:
        """Between two steps of a check, `work` (in dwords' worth) done since the last: once
        PAUSE_DW of it is done, let the threads waiting for the driver's lock in (w.pause;
        a job smaller than that never pauses); after they ran, go on only if the file's
        mappings are the ones read so far."""
        if w.pause is None:
            return
        w.work += work
        if w.work < PAUSE_DW:
            return
        w.work = 0
        if not w.pause():
            return
        if w.space.lookup_arrays() is not w.arrays:  # (a new tuple at every change: vm.py)
            raise CheckAgain()
        self._use(w)  # (another CS's check ran meanwhile)

    @staticmethod
    def _layout(segments: list[Segment]) -> int:
        off = 0
        for s in segments:
            s.offset = off
            off += -(-4 * s.size_dw // SEGMENT_ALIGN) * SEGMENT_ALIGN
        return off

    def place(self, job: CheckedJob, addr: int, va: int) -> list[tuple[int, int]]:
        """Write the checked copies at `addr` (kernel memory, `job.shadow_bytes` long, which
        the job sees at `va`), every INDIRECT_BUFFER pointing at its target's copy; return
        the chunks' (va, size)."""
        job.shadow_addr, job.shadow_mem = va, addr
        mem32 = self.mem32
        for s in job.segments:
            words = s.words
            if s.links:  # every INDIRECT_BUFFER at once (an IB may hold 262,144 of them)
                n = len(s.links)
                at = np.fromiter((x for x, _ in s.links), dtype=np.int64, count=n)  # their headers
                a = va + np.fromiter((t.offset for _, t in s.links), dtype=np.int64, count=n)
                lo, hi = at + 1 + _IB_LO.dword, at + 1 + _IB_HI.dword
                words[lo] = ((words[lo].astype(np.int64) & ~_IB_LO.mask) | (a & _IB_LO.mask)).astype(np.uint32)
                words[hi] = ((words[hi].astype(np.int64) & ~_IB_HI.mask) | (a >> 32)).astype(np.uint32)
            i = (addr + s.offset) >> 2
            mem32[i:i + s.size_dw] = words
            s.words = None  # the image is in memory now
        if log.isEnabledFor(logging.DEBUG):
            log.debug("checked %d packet(s) in %d IB(s), %d dwords to run; copies at VA %#x (memory %#x, "
                      "%#x bytes):\n%s",
                      job.packets, len(job.segments), job.dwords, va, addr, job.shadow_bytes, "\n".join(
                          f"  {LEVEL_TEXT.get(s.level, f'IB{s.level}')} {s.client:#x} ({s.size_dw} dwords) "
                          f"-> {va + s.offset:#x}" for s in job.segments))
        return [(va + s.offset, s.size_dw) for s in job.chunks]

    # ------------------------------------------------------------------ one IB and its chain

    def _chain(self, w: _Walk, addr: int, size_dw: int, level: int, via: str | None) -> Segment:
        """The IB at `addr` and the IBs it CHAINs to, at `level`: copied and checked; returns
        the first one's Segment with its `runs`. `via` names the packet that called it."""
        walk: list[Segment] = []
        on_path: set[tuple[int, int, int]] = set()
        tail = 0
        while True:
            key = (addr, size_dw, level)
            seg = w.memo.get(key)
            if seg is not None:
                if key in on_path:
                    raise KmdError(errno.EINVAL, f"CS: {via} chains back to the IB at {addr:#x} "
                                   f"({size_dw} dwords) that this chain already ran: the CP would never finish")
                tail = seg.runs  # an IB checked before (reached another way): its chain is known
                assert seg.done
                if walk:
                    walk[-1].links.append((walk[-1].chain_at, seg))
                first = seg
                break
            seg = Segment(addr, size_dw, level)
            w.memo[key] = seg
            on_path.add(key)
            if walk:
                walk[-1].links.append((walk[-1].chain_at, seg))
            walk.append(seg)
            w.segments.append(seg)
            if len(w.segments) > w.max_ibs:
                raise KmdError(errno.EINVAL, f"CS: the job of context {w.ctx.id} reaches more than {w.max_ibs} "
                               "distinct IBs (the per-job limit; an IB called again is counted once)")
            w.copied += size_dw
            if w.copied > w.limit:
                raise w.over()
            if w.charge is not None:
                w.charge(4 * size_dw)
            self._pause(w, IB_WORK)  # (before the read: with the mappings the walk began with)
            k = self._owned_index(addr, 4 * size_dw)  # (checked by the caller)
            i = (addr + int(self._arrays[3][k])) >> 2  # where the client's IB is in memory
            seg.words = self.mem32[i:i + size_dw].copy()  # the one read of client memory
            nxt = self._check_ib(w, seg)
            if nxt is None:
                break
            addr, size_dw, via = nxt
        for seg in reversed(walk):
            seg.runs += seg.size_dw + tail
            seg.done = True
            if seg.runs > w.limit:
                raise w.over()
            tail = seg.runs
        return walk[0] if walk else first

    def _check_ib(self, w: _Walk, seg: Segment) -> tuple[int, int, str] | None:
        """Check one copied IB: its packets up to a CHAIN, and (recursively) the IBs they call.
        Returns the CHAIN's target (address, size, where) or None."""
        words = seg.words
        n = len(words)
        starts, length = _packet_starts(words, (lambda work: self._pause(w, work)) if w.pause is not None else None)
        h = words[starts].astype(np.int64)
        op = (h >> _OP_LSB) & _OP_MAX
        cnt = (h >> _CNT_LSB) & _CNT_MAX
        kind = h >> _TYPE_LSB
        t3 = kind == 3
        filler = kind == 2
        count_ok = t3 & _KNOWN[op] & (_MIN_COUNT[op] <= cnt) & (cnt <= _MAX_COUNT[op])
        bad = ~(filler | (count_ok & (starts + length <= n) & ((h & rules.HEADER_RESERVED) == 0)))
        # per packet kind, every field check at once
        calls: list[tuple[int, int, int, bool]] = []  # (packet index, base, size, chain) of INDIRECT_BUFFERs
        good = ~bad & t3  # (fillers need no more checks)
        for opcode in set(op[good].tolist()):
            plan = _PLANS[opcode]
            every = np.flatnonzero(good & (op == opcode))
            for lo in range(0, len(every), PAUSE_DW):  # (PAUSE_DW packets at a time: a pause between)
                sel = every[lo:lo + PAUSE_DW]
                self._pause(w, len(sel))
                pay = words[starts[sel][:, None] + plan.offsets].astype(np.int64)
                kbad = self._kind_bad(w, seg.level, plan, pay, cnt[sel])
                bad[sel] |= kbad
                if plan.packet is _IB:
                    ok = ~kbad
                    base = plan.value(pay, "base")
                    size = plan.field(pay, "IB_SIZE")
                    chain = plan.field(pay, "CHAIN")
                    calls += zip(sel[ok].tolist(), base[ok].tolist(), size[ok].tolist(), chain[ok].tolist())
        w.packets += int(np.count_nonzero(~filler))
        # the CP stops at the first bad packet or ends the IB at the first CHAIN
        first_bad = int(np.argmax(bad)) if bad.any() else len(starts)
        for j, base, size, chain in calls:
            if j > first_bad:
                break
            # (each call is a Python step, of an IB looked at before too: 262,144 in 1 M dwords)
            self._pause(w, PAUSE_DW // PAUSE_CALLS)
            at = int(starts[j])
            where = _Where(seg.level, seg.client, at)
            if chain:
                if j < first_bad:
                    seg.chain_at = at
                    return base, size, f"INDIRECT_BUFFER at {where}"
                break
            try:
                target = self._chain(w, base, size, seg.level + 1, f"INDIRECT_BUFFER at {where}")
            except KmdError as e:  # a packet refused in there: which call ran it (PacketAt.via)
                if isinstance(e.info, PacketAt):
                    e.info = PacketAt(e.info.addr, (seg.client + 4 * at, *e.info.via))
                raise
            seg.runs += target.runs
            seg.links.append((at, target))
        if first_bad < len(starts):
            off = int(starts[first_bad])
            err = self._explain(w.ctx, seg, off)
            err.info = PacketAt(seg.client + 4 * off)  # (the UMD names the call that recorded it)
            raise err
        return None

    def _kind_bad(self, w: _Walk, level: int, plan: "_Plan", pay: np.ndarray, cnt: np.ndarray) -> np.ndarray:
        """Per packet of one kind (fixed payloads `pay`, header COUNTs `cnt`): fails a check."""
        p = plan.packet
        caps = self.caps
        bad = np.zeros(len(pay), dtype=bool)
        for d, lsb, mx, lut in plan.enums:  # check 4: closed enums
            bad |= ~lut[(pay[:, d] >> lsb) & mx]
        for d, low, when in plan.aligns:  # check 5 (and the KMD's own: reserved bits)
            mis = (pay[:, d] & low) != 0
            if when is not None:
                wd, wlsb, wmx, wlut = when
                mis &= wlut[(pay[:, wd] >> wlsb) & wmx]
            bad |= mis
        if p is packets.WRITE_DATA:
            one = plan.field(pay, "ADDR_INCR") == _WD_NO_INCREMENT  # every dword to addr
            bad |= ~self._owned(w, plan.value(pay, "addr"), np.where(one, 4, 4 * (cnt + 1 - plan.fixed)), _W)
        elif p is packets.WAIT_REG_MEM:
            bad |= ~self._owned(w, plan.value(pay, "addr"), 4)
        elif p is packets.RELEASE_MEM:
            n = _RM_NBYTES[plan.field(pay, "DATA_SEL")]
            some = n > 0
            if some.any():
                bad[some] |= ~self._owned(w, plan.value(pay, "addr")[some], n[some], _W)
        elif p is _DMA:
            if not caps.has_dma:
                bad[:] = True
            count = plan.field(pay, "BYTE_COUNT")
            bad |= count > caps.dma_max_bytes  # check 7
            n = np.maximum(count, 1)
            bad |= ~self._owned(w, plan.value(pay, "dst"), n, _W)
            copy = plan.field(pay, "SRC_SEL") != _DMA_FILL
            if copy.any():
                bad[copy] |= ~self._owned(w, plan.value(pay, "src")[copy], n[copy])
        elif p is _IB:
            size = plan.field(pay, "IB_SIZE")
            chain = plan.field(pay, "CHAIN") != 0
            bad |= size == 0  # check 6
            if level == 0:
                bad |= chain
            if level + 1 > caps.ib_levels:
                bad |= ~chain
            bad |= ~self._owned(w, plan.value(pay, "base"), 4 * np.maximum(size, 1), _X)
        return bad

    # ------------------------------------------------------------------ address ranges

    def _owned(self, w: _Walk, addr: np.ndarray, size: np.ndarray, need: int = _R) -> np.ndarray:
        """Per range [addr, addr + size): it lies in one mapping of the submitting file, and
        that mapping permits `need` (VmFlags; a read unless said)."""
        starts, ends = self._arrays[:2]
        # int64: an ADDR_HI above bit 30 wraps negative, which is refused like any address
        # at or above 2^48 (no BO lies there)
        inmem = (addr >= 0) & (addr < (1 << 48))
        i = np.searchsorted(starts, np.where(inmem, addr, 0), side="right") - 1
        ok = inmem & (i >= 0)
        i = np.where(ok, i, 0)
        ok &= self._mine[i] & (addr + size <= ends[i]) & ((self._arrays[4][i] & need) == need)
        return ok

    def _permits(self, i: int, need: int) -> bool:
        """Mapping `i` (of lookup_arrays) allows the access `need` (VmFlags)."""
        return int(self._arrays[4][i]) & need == need

    def _owned_index(self, addr: int, nbytes: int) -> int | None:
        """The index of the submitting file's live BO holding [addr, addr + nbytes), if any."""
        starts, ends = self._arrays[:2]
        if not 0 <= addr < 1 << 48:
            return None
        i = int(np.searchsorted(starts, addr, side="right")) - 1
        if i < 0 or not self._mine[i] or addr + max(nbytes, 1) > ends[i]:
            return None
        return i

    # ------------------------------------------------------------------ messages

    def _straddles(self, ctx: "Context", addr: int, what: str) -> str | None:
        """What a message says of a range its caller found in no one mapping, starting at
        `addr`: it starts in one of the file's mappings and so ends past it (None when it
        starts in none); two mappings side by side are refused like any other end, and the
        message says which it is."""
        starts, ends = self._arrays[:2]
        if not 0 <= addr < 1 << 48:
            return None
        i = int(np.searchsorted(starts, addr, side="right")) - 1
        if i < 0 or not self._mine[i] or addr >= ends[i]:
            return None
        end = int(ends[i])
        if i + 1 < len(starts) and int(starts[i + 1]) == end and self._mine[i + 1]:
            return (f"crosses from one mapping of context {ctx.id} into the next at {end:#x}: {what} must lie "
                    "inside one mapping")
        return f"runs past the end of its mapping of context {ctx.id} at {end:#x}"

    def _explain(self, ctx: "Context", seg: Segment, off: int) -> KmdError:
        """The error for the packet at dword `off` of `seg`, found bad by the vectorised checks:
        the same rules again, one at a time and in the CP's order, to say which one failed."""
        where = _Where(seg.level, seg.client, off)
        # (the packet's dwords alone: the whole IB as a list cost 1 M ints for one packet)
        item = pm4.decode(seg.words[off:off + _MAX_PACKET_DW].tolist(), 0)
        item.offset += off
        if not item.ok:
            return KmdError(errno.EINVAL, f"CS: malformed packet at {where}: {pm4.describe(item)}")
        r = rules.RULES[item.name]
        payload = item.payload
        fail = rules.packet_error(r, payload, seg.level, self.caps)
        if fail is not None:
            return KmdError(errno.EINVAL, f"CS: {item.name} at {where}: {fail[1]}")
        res = item.header & rules.HEADER_RESERVED
        if res:
            return KmdError(errno.EINVAL, f"CS: {item.name} at {where}: reserved header bits {res:#x} are set "
                            "(the CP ignores them; this KMD refuses them)")
        for d, mask in enumerate(r.reserved):
            if payload[d] & mask:
                return KmdError(errno.EINVAL, f"CS: {item.name} at {where}: reserved bits "
                                f"{payload[d] & mask:#x} of payload dword {d} are set (the CP ignores "
                                "them; this KMD refuses them)")
        for verb, a, n in _reach(item):
            need = _NEED[verb]
            k = self._owned_index(a, n)
            if k is None:
                part = self._straddles(ctx, a, "a packet's range")
                # (amdgpu's parsers answer EINVAL for an operand too: amdgpu_vce_cs_reloc)
                return KmdError(errno.EINVAL, f"CS: {item.name} at {where} {verb} [{a:#x}, {a + n:#x}), "
                                + (f"outside every mapping of context {ctx.id}" if part is None else f"which {part}"))
            if not self._permits(k, need):
                return KmdError(errno.EINVAL, f"CS: {item.name} at {where} {verb} [{a:#x}, {a + n:#x}), "
                                f"in a mapping of context {ctx.id} without {need.name}")
        raise AssertionError(f"CS checker: the vectorised checks refused {item.name} at {where}, "
                             "the per-packet checks did not")  # pragma: no cover - a checker bug


def _reach(item: pm4.Packet) -> list[tuple[str, int, int]]:
    """(verb, address, bytes) of every memory range a packet uses (_NEED: the permission)."""
    f = item.fields
    p = item.defn
    if p is packets.WRITE_DATA:
        one = f["ADDR_INCR"] == _WD_NO_INCREMENT
        return [("writes", rules.addr_of(p, "addr", item.payload), 4 if one else 4 * len(item.data))]
    if p is packets.WAIT_REG_MEM:
        return [("polls", rules.addr_of(p, "addr", item.payload), 4)]
    if p is packets.RELEASE_MEM:
        n = _RM_BYTES[p.field("DATA_SEL").names[f["DATA_SEL"]]]
        return [("writes", rules.addr_of(p, "addr", item.payload), n)] if n else []
    if p is _DMA:
        n = f["BYTE_COUNT"]
        out = [("writes", rules.addr_of(p, "dst", item.payload), n)]
        if f["SRC_SEL"] != _DMA_FILL:
            out.append(("reads", rules.addr_of(p, "src", item.payload), n))
        return out
    if p is _IB:
        return [("runs", rules.addr_of(p, "base", item.payload), 4 * f["IB_SIZE"])]
    return []


def _lengths(h: np.ndarray) -> np.ndarray:
    """Dwords of the packet each header dword starts: type-3 headers span COUNT + 2 (the
    NOP with the all-ones COUNT is the header alone), anything else one."""
    cnt = (h >> _CNT_LSB) & _CNT_MAX
    t3 = (h >> _TYPE_LSB) == 3
    nop_pad = t3 & (((h >> _OP_LSB) & _OP_MAX) == _NOP_OP) & (cnt == _CNT_MAX)
    return np.where(t3 & ~nop_pad, cnt + 2, 1)


def _packet_starts(words: np.ndarray, pause=None) -> tuple[np.ndarray, np.ndarray]:
    """Dword index of every packet header, walking the lengths from the first dword, and
    each packet's length; `pause(dwords)` called after every PAUSE_DW dwords at most (one
    Python step a packet: 1 M one-dword packets took half a second)."""
    n = len(words)
    blocks = []
    i = 0
    while i < n:  # a block of PAUSE_DW dwords at a time, its lengths and starts made as it goes
        m = min(n - i, PAUSE_DW)
        length = _lengths(words[i:i + m].astype(np.int64)).tolist()
        out: list[int] = []
        append = out.append
        j = 0
        while j < m:
            append(j)
            j += length[j]
        blocks.append(np.array(out, dtype=np.int64) + i)
        i += j  # (the next packet's header: in a later block)
        if pause is not None:
            pause(m)
    starts = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)  # (words: 1 dword at least)
    return starts, _lengths(words[starts].astype(np.int64))


class _Where:
    """Where a packet is, "IB+0x10 (0x201010)", formatted only when a message needs it."""

    __slots__ = ("level", "ib", "offset")

    def __init__(self, level: int, ib: int, offset: int):
        self.level, self.ib, self.offset = level, ib, offset

    def __str__(self) -> str:
        return (f"{LEVEL_TEXT.get(self.level, f'IB{self.level}')}+{4 * self.offset:#x} "
                f"({self.ib + 4 * self.offset:#x})")
