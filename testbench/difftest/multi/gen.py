"""The multi-queue streams (testbench/difftest/multi): what each kind runs, where each
engine's memory lies, and the generator. A stream is plain data derived from (seed,
index), run alike on both backends by run.py."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from kmd_model import regs
from spec import packets as pk
from spec import pm4
from spec import sdma as sdma_codec

from .. import sdma as S
from ..streams import layout as L
from ..streams.malformed import KNOWN_OPCODES, _lo_dword
from .careless import ring_pauses, ring_writes

M32 = 0xFFFF_FFFF
ENGINES = ("q0", "q1", "sdma")
SETTLE = 200_000  # cycles an engine may take to go idle before the stream calls it a hang
KMD_TIMEOUT = 400  # cycles a queue must sit in a poll that never holds before it is reset
IH_LOG2_DW = 11  # 256 entries: a stream never fills it between observations
ORDERED = ("ordered phase",)  # observations whose IH entries are compared in order across producers
RPTR_WB = {"q0": L.RPTR_WB, "q1": L.RPTR_WB + 0x10, "sdma": L.RPTR_WB + 0x20}
SHARED = L.DATA_REGION[0] + 0x60000  # cells both CP queues write in the ordered phase
# each engine's own slices of the layout's regions (index: ENGINES.index)
_SLICE = {"ring": 0x4000, "ib": 0x28000, "data": 0x20000, "dma": 0x28000, "sem": 0x4000, "canary": 0x4000}
_KINDS_VALID = ("mq_priority", "mq_turns", "mq_long_ib", "cp_sdma", "cp_sdma_sync")
# the error classes: name -> (what it plants, the code on the queue that stops)
ERROR_CLASSES = {
    "mq_packet_error": "a malformed packet on one CP queue while the other runs its job; that queue alone stops "
                       "with the packet's code, then CP_QUEUE_RESET brings it back",
    "mq_doorbell_error": "a bad doorbell (backwards or overflow) on the CP queue not running while the other runs "
                         "a long IB or polls; reported at the next packet boundary on the RTL",
    "mq_hang_reset": "one CP queue hangs in a WAIT_REG_MEM that never holds while the other runs; CP_QUEUE_RESET of "
                     "the hung queue (a running queue's reset) and a good job there",
    "cp_error_sdma_runs": "a malformed packet stops a CP queue while the SDMA runs its job, which completes; then the "
                          "CP queue's reset",
    "sdma_error_cp_runs": "an SDMA error class (sdma.CLASSES) while both CP queues run jobs, which complete; then "
                          "SDMA_CNTL.QUEUE_RESET",
}
PLAN: tuple[str, ...] = _KINDS_VALID + tuple(ERROR_CLASSES)
CP_FAULTS = ("illegal_opcode", "ib_size_zero", "ib_misaligned", "fence_misaligned", "decerr_write", "decerr_fence",
             "decerr_poll", "bad_count")


@dataclass
class MultiStream:
    index: int
    seed: int
    kind: str
    variant: str = ""
    rings: dict = field(default_factory=dict)  # engine -> (base, log2 dwords)
    rptr_wb: dict = field(default_factory=dict)  # engine -> bool
    prio: int = 0  # CP_QUEUE_PRIORITY
    trap: bool = True  # SDMA_CNTL.TRAP_ENABLE
    mem: dict = field(default_factory=dict)  # the memory model's back-pressure
    preload: list = field(default_factory=list)  # (addr, bytes)
    steps: list = field(default_factory=list)
    expect: dict = field(default_factory=dict)  # engine -> how it must end ("idle", "error CODE", "stuck")
    undefined: list = field(default_factory=list)  # byte ranges not compared
    timing_regs: dict = field(default_factory=dict)  # register label -> bits not compared
    expect_at: dict = field(default_factory=dict)  # observation label -> {engine: how it must stand}
    notes: list = field(default_factory=list)

    @property
    def error_class(self) -> str:
        return self.kind if self.kind in ERROR_CLASSES else ""

    @property
    def label(self) -> str:
        return self.kind + (f" ({self.variant})" if self.variant else "")

    def listing(self) -> list[str]:
        out = [f"multi stream {self.index} (seed {self.seed}): {self.label}; CP_QUEUE_PRIORITY {self.prio:#x}, "
               + ", ".join(f"{e} ring {1 << lg} dwords at {b:#x}{' +wb' if self.rptr_wb[e] else ''}"
                           for e, (b, lg) in self.rings.items())]
        out += [f"  note: {n}" for n in self.notes]
        for st in self.steps:
            if st[0] == "submit":
                dis = sdma_codec.disassemble(st[2]) if st[1] == "sdma" else pm4.disassemble(st[2])
                out.append(f"  submit {st[1]}: " + "\n      ".join(dis))
            elif st[0] == "mem":
                out.append(f"  mem {st[1]:#x} <- {[hex(x) for x in st[2]]}")
            else:
                out.append("  " + " ".join(str(x) for x in st))
        for a, b in sorted(self.preload):  # the IBs, by the engine whose slice holds them
            if L.IB_REGION[0] <= a < L.IB_REGION[1]:
                e = ENGINES[min((a - L.IB_REGION[0]) // _SLICE["ib"], 2)]
                words = np.frombuffer(b, dtype="<u4").tolist()
                dis = sdma_codec.disassemble(words, a) if e == "sdma" else pm4.disassemble(words, a)
                out.append(f"  IB of {e} at {a:#x}, {len(words)} dwords: " + "\n      ".join(dis))
        return out


# ---------------------------------------------------------------------------- generation

class _Space:
    """Fresh memory of one engine: its slices of the layout's regions."""

    def __init__(self, r: random.Random, eng: str):
        k = ENGINES.index(eng)
        self.r = r
        self.data0 = L.DATA_REGION[0] + k * _SLICE["data"]
        self.data = self.data0
        self.dma = L.DMA_DST_REGION[0] + k * _SLICE["dma"] // 2 + 0x100  # (3 slices of 0x14000)
        self.dma_end = self.dma + _SLICE["dma"] // 2 - 0x200
        self.ib = L.IB_REGION[0] + k * _SLICE["ib"]
        self.sem = L.SEM_REGION[0] + k * _SLICE["sem"]
        self.canary = L.CANARY_REGION[0] + k * _SLICE["canary"]

    def data_addr(self, ndw: int, align: int = 4) -> int:
        """A CP write destination; a queue's own writes may overlap (it runs in order)."""
        if self.r.random() < 0.25 and self.data > self.data0 + 64:  # overwrite an earlier one
            a = self.data0 + align * self.r.randrange((self.data - self.data0) // align)
        else:
            a = (self.data + align * self.r.randrange(4) + align - 1) & ~(align - 1)
            self.data = a + 4 * ndw
        assert self.data < self.data0 + _SLICE["data"]
        return a

    def dma_dst(self, n: int) -> int:
        a = self.dma + self.r.randrange(64)
        self.dma = (a + n + 63) & ~31
        assert self.dma < self.dma_end
        return a

    def new_ib(self, words: list[int], gen: "_Gen") -> int:
        a = self.ib + 4 * self.r.randrange(8)
        self.ib = (a + 4 * len(words) + 64) & ~31
        gen.load(a, words)
        return a

    def semaphore(self, gen: "_Gen", value: int) -> int:
        a = self.sem
        self.sem += 4 * self.r.choice([1, 2, 9])
        gen.load(a, [value])
        return a

    def canary_packet(self) -> list[int]:
        a = self.canary
        self.canary += 4
        return pm4.write_data(a, [0xCA11_AB1E])


class _Gen:
    def __init__(self, s: MultiStream, r: random.Random, dma: bool):
        self.s, self.r, self.dma = s, r, dma
        self.space = {e: _Space(r, e) for e in ENGINES[:2]}
        self.flags = L.SEM_REGION[0] + 3 * _SLICE["sem"]  # cross-engine flags
        self.shared_seq = 0
        self.irqs = 0
        sg = S._Gen(r)  # the SDMA generator, moved to the SDMA's slices
        k = ENGINES.index("sdma")
        sg.dst = L.DMA_DST_REGION[0] + k * _SLICE["dma"] // 2 + 0x100
        sg.data = L.DATA_REGION[0] + k * _SLICE["data"]
        sg.ib = L.IB_REGION[0] + k * _SLICE["ib"]
        sg.sem = L.SEM_REGION[0] + k * _SLICE["sem"]
        sg.canary = L.CANARY_REGION[0] + k * _SLICE["canary"]
        sg.preload = s.preload
        self.sdma = sg

    def load(self, addr: int, words: list[int]) -> None:
        self.s.preload.append((addr, np.asarray(words, dtype="<u4").tobytes()))

    def flag(self) -> int:
        a = self.flags
        self.flags += 4
        return a

    # ------------------------------------------------------------------ CP packets

    def cp_packet(self, q: str, depth: int = 0, *, ordered: bool = False, releases: list | None = None) -> list[int]:
        """One valid CP packet of queue `q` (an INDIRECT_BUFFER holding more below IB2).
        `ordered`: the cross-queue order is fixed (halted start): also writes shared cells,
        and no WAIT_REG_MEM waits for the CPU. `releases` collects the CPU writes that
        release this job's waits."""
        r, sp = self.r, self.space[q]
        choices = ["write"] * 4 + ["fence"] * 3 + ["nop", "wait"] + (["ib"] * 2 if depth < 2 else [])
        choices += ["dma"] if self.dma else []
        choices += ["shared"] * 3 + ["fence"] * 4 if ordered else []
        k = r.choice(choices)
        if k == "write":
            vals = [r.getrandbits(32) for _ in range(r.choice([1, 1, 2, 3, 5, 9, 16]))]
            return pm4.write_data(sp.data_addr(len(vals)), vals, wr_confirm=r.randrange(2))
        if k == "shared":
            self.shared_seq += 1
            return pm4.write_data(SHARED + 4 * r.randrange(8), [(ENGINES.index(q) << 28) | self.shared_seq])
        if k == "fence":
            sel = r.choice(["DATA_32", "DATA_64"])
            # (in the ordered phase the interrupts' order across queues is fixed: a log of it)
            intr = r.choice(["SEND_INT", "SEND_INT_ON_CONFIRM"] if ordered else
                            ["NONE", "NONE", "SEND_INT", "SEND_INT_ON_CONFIRM"])
            self.irqs += intr != "NONE"
            return pm4.release_mem(sp.data_addr(2, 8), r.getrandbits(32), data_sel=sel, int_sel=intr,
                                   int_ctxid=r.getrandbits(32))
        if k == "nop":  # (one-dword fillers too: each is a packet, a turn at equal priority)
            return r.choice([pm4.nop(r.randrange(0, 6)), [0x8000_0000 | r.getrandbits(16)], pm4.nop(0)])
        if k == "wait":
            v = r.getrandbits(32)
            if ordered or releases is None or r.random() < 0.5:  # holds at once
                a = sp.semaphore(self, v)
                return pm4.wait_reg_mem(a, v, M32, r.choice(["EQ", "GE", "LE"]), poll_interval=r.randrange(0, 20))
            a = sp.semaphore(self, v ^ 0x55)
            releases.append(("mem", a, [v]))
            return pm4.wait_reg_mem(a, v, M32, "EQ", poll_interval=r.randrange(0, 40))
        if k == "dma":
            n = r.choice([1, 7, 64, 300, 1000, r.randrange(1, 3000)])
            src = L.SRC_REGION[0] + r.randrange(L.SRC_REGION[1] - L.SRC_REGION[0] - n)
            return pm4.dma_data(sp.dma_dst(n), src, n, cp_sync=r.randrange(2))
        body: list[int] = []
        for _ in range(r.randrange(1, 7)):
            body += self.cp_packet(q, depth + 1, ordered=ordered, releases=releases)
        return pm4.indirect_buffer(sp.new_ib(body, self), len(body))

    def cp_job(self, q: str, n: int, **kw) -> list[int]:
        return [w for _ in range(n) for w in self.cp_packet(q, **kw)]

    def cp_fault(self, q: str, variant: str) -> tuple[list[int], str, bool]:
        """(a faulty packet, its code, whether it may sit in an IB)."""
        r, sp = self.r, self.space[q]
        beyond = L.MEM_SIZE + 8 * r.randrange(1 << 12)
        if variant == "illegal_opcode":
            op = r.choice([x for x in range(256) if x not in KNOWN_OPCODES])
            return [pm4.header(op, r.randrange(4))] + [r.getrandbits(32) for _ in range(r.randrange(4))], \
                "ILLEGAL_OPCODE", True
        if variant == "ib_size_zero":
            return pm4.encode_fields("INDIRECT_BUFFER", {"IB_BASE_LO": sp.ib >> 2, "VALID": 1}), "IB_SIZE_ZERO", True
        if variant == "ib_misaligned":
            dw = pm4.indirect_buffer(sp.new_ib(pm4.nop(1), self), 2)
            dw[_lo_dword(pk.INDIRECT_BUFFER, "base")] |= r.randint(1, 3)
            return dw, "IB_MISALIGNED", True
        if variant == "fence_misaligned":
            dw = pm4.write_data(sp.data_addr(2), [1, 2])
            dw[_lo_dword(pk.WRITE_DATA, "addr")] |= r.randint(1, 3)
            return dw, "FENCE_MISALIGNED", True
        if variant == "decerr_write":
            return pm4.write_data(beyond, [r.getrandbits(32)]), "BUS_DECERR", True
        if variant == "decerr_fence":
            return pm4.release_mem(beyond, 5, int_sel=r.choice(["NONE", "SEND_INT"])), "BUS_DECERR", True
        if variant == "decerr_poll":
            return pm4.wait_reg_mem(beyond, 0, 0, r.choice(["ALWAYS", "EQ"])), "BUS_DECERR", True
        # bad_count: COUNT too small for a fixed-size packet
        dw = pm4.write_data(sp.data_addr(1), [7])
        dw[0] = pm4.header(pk.WRITE_DATA.opcode, r.randint(0, pk.WRITE_DATA.min_count - 1))
        return dw, "BAD_COUNT", True

    def cp_faulty_job(self, q: str, variant: str) -> tuple[list[int], str]:
        """Valid packets, then the faulty one (in the ring or an IB), then canaries."""
        r, sp = self.r, self.space[q]
        bad, code, ib_ok = self.cp_fault(q, variant)
        pre = self.cp_job(q, r.randrange(0, 3))
        if ib_ok and r.random() < 0.4:
            body = self.cp_job(q, r.randrange(0, 2), depth=1) + bad + sp.canary_packet()  # (in IB1: no IB3)
            return pre + pm4.indirect_buffer(sp.new_ib(body, self), len(body)) + sp.canary_packet(), code
        return pre + bad + sp.canary_packet(), code

    # ------------------------------------------------------------------ SDMA packets

    def sdma_job(self, n: int) -> list[int]:
        out: list[int] = []
        for _ in range(n):
            p = self.sdma.packet()
            while (p[0] & 0xFF) == 0x05 and len(out) > 200:  # (keep within the ring)
                p = self.sdma.packet()
            out += p
        return out


def _config(r: random.Random, s: MultiStream) -> None:
    for k, e in enumerate(ENGINES):
        log2 = r.randrange(7, 11)  # dwords
        lo = L.RING_REGION[0] + k * _SLICE["ring"]
        s.rings[e] = (lo + 256 * r.randrange((_SLICE["ring"] - (4 << log2)) // 256 + 1), log2)
        s.rptr_wb[e] = r.random() < 0.7
    s.trap = r.random() < 0.85

    def latency() -> int:
        return r.choice([0, 0, 2, r.randint(1, 16), r.randint(17, 48)])

    stall = {ch: r.choice([16, 64]) for ch in ("aw", "w", "b", "ar", "r") if r.random() < 0.3} if r.random() < 0.4 \
        else {}
    s.mem = dict(rd_latency=latency(), wr_latency=latency(), stall=stall, seed=r.getrandbits(32) | 1)


def _prio(r: random.Random, equal: bool | None = None) -> int:
    P = regs.CP_QUEUE_PRIORITY
    p0 = r.randrange(4)
    if equal is None:
        p1 = r.randrange(4)
    elif equal:
        p1 = r.choice([x for x in range(4) if min(x, 2) == min(p0, 2)])
    else:
        p1 = r.choice([x for x in range(4) if min(x, 2) != min(p0, 2)])
    return P.Q0.put(p0) | P.Q1.put(p1)


def _fits(words: list[int], log2: int) -> bool:
    return len(words) < (1 << log2) // 2


def make(seed: int, index: int, dma: bool = True) -> MultiStream:
    kind = PLAN[index % len(PLAN)]
    case = index // len(PLAN)  # the how-many-th stream of its kind: walks the variants
    r = random.Random(f"gpucosim-multi-difftest/{seed}/{index}")
    s = MultiStream(index, seed, kind)
    _config(r, s)
    g = _Gen(s, r, dma)
    steps = s.steps
    s.expect = {e: "idle" for e in ENGINES}

    def job(q, n, **kw):
        """A CP job that fits its ring (with what else is pending there)."""
        for _ in range(20):
            rel: list = []
            words = g.cp_job(q, n, releases=rel if not kw.get("ordered") else None, **kw)
            if _fits(words, s.rings[q][1]):
                return words, rel
            n = max(1, n // 2)
        return pm4.nop(1), []

    def sdma_job(n):
        for _ in range(20):
            words = g.sdma_job(n)
            if len(words) < (1 << s.rings["sdma"][1]) // 2:
                return words
            n = max(1, n // 2)
        return sdma_codec.pad(2)

    def pieces(q, words, rel):
        """Doorbells in whole packets, random delays between them; the releases after."""
        items = [(it.offset, it.length) for it in pm4.decode_stream(words)]
        k = 0
        while k < len(items):
            n = r.randrange(1, 4)
            a, b = items[k][0], items[min(k + n, len(items)) - 1][0] + items[min(k + n, len(items)) - 1][1]
            steps.append(("submit", q, words[a:b]))
            k += n
            if r.random() < 0.5:
                steps.append(("delay", r.randrange(1, 300)))
        for x in rel:
            steps.append(("delay", r.randrange(1, 400)))
            steps.append(x)

    def random_phase(engines, n=(1, 6)):
        """Work on each engine, interleaved at random: the order across engines is timing's."""
        work = []
        for e in engines:
            if e == "sdma":
                work.append((e, sdma_job(r.randrange(*n)), []))
            else:
                w, rel = job(e, r.randrange(*n))
                work.append((e, w, rel))
        r.shuffle(work)
        for e, w, rel in work:
            if e == "sdma":
                steps.append(("submit", "sdma", w))
                if r.random() < 0.5:
                    steps.append(("delay", r.randrange(1, 300)))
            else:
                pieces(e, w, rel)

    if kind in ("mq_priority", "mq_turns"):
        s.prio = _prio(r, equal=kind == "mq_turns")
        s.variant = f"q0 prio {regs.CP_QUEUE_PRIORITY.Q0.get(s.prio)}, q1 prio {regs.CP_QUEUE_PRIORITY.Q1.get(s.prio)}"
        # the ordered phase: both queues loaded while halted, the last writer of each shared cell compared
        steps.append(("halt", 1))
        for q in ("q0", "q1"):
            w, _ = job(q, r.randrange(3, 9), ordered=True)
            steps.append(("submit", q, w))
        steps.append(("delay", r.randrange(0, 50)))
        steps.append(("halt", 0))
        steps.append(("settle", ("q0", "q1")))
        steps.append(("observe", "ordered phase"))
        random_phase(["q0", "q1"] + (["sdma"] if r.random() < 0.3 else []))
    elif kind == "mq_long_ib":
        s.prio = _prio(r) if r.random() < 0.3 else regs.CP_QUEUE_PRIORITY.Q0.put(r.randrange(2)) | \
            regs.CP_QUEUE_PRIORITY.Q1.put(2)
        sp = g.space["q0"]
        n = r.randrange(40, 250)
        rel: list = []
        body = []
        for i in range(n):
            if i == n // 2 and r.random() < 0.4:  # a poll the CPU releases: queue 0 yields while waiting
                v = r.getrandbits(32)
                a = sp.semaphore(g, v ^ 1)
                rel.append(("mem", a, [v]))
                body += pm4.wait_reg_mem(a, v, M32, "EQ", poll_interval=r.randrange(0, 30))
            else:
                body += pm4.write_data(sp.data_addr(1), [r.getrandbits(32)])
        s.variant = f"IB of {n} packets on q0{' with a released poll' if rel else ''}"
        steps.append(("submit", "q0", pm4.indirect_buffer(sp.new_ib(body, g), len(body))))
        steps.append(("delay", r.randrange(0, 1500)))
        w, rel1 = job("q1", r.randrange(1, 4))
        steps.append(("submit", "q1", w))
        for x in rel1 + rel:
            steps.append(("delay", r.randrange(1, 600)))
            steps.append(x)
    elif kind == "cp_sdma":
        s.prio = _prio(r)
        queues = r.choice([["q0"], ["q1"], ["q0", "q1"]])
        s.variant = "+".join(queues) + " with sdma"
        random_phase(queues + ["sdma"], (2, 8))
    elif kind == "cp_sdma_sync":
        s.prio = _prio(r)
        q = r.choice(["q0", "q1"])
        s.variant = f"{q} <-> sdma through memory"
        _sync(r, g, s, q)
    elif kind in ("mq_packet_error", "cp_error_sdma_runs"):
        s.prio = _prio(r)
        q = "q0" if (case + (kind == "cp_error_sdma_runs")) % 2 == 0 else "q1"
        variant = CP_FAULTS[(case // 2) % len(CP_FAULTS)]
        s.variant = f"{variant} on {q}"
        bad, code = g.cp_faulty_job(q, variant)
        other = ["q1" if q == "q0" else "q0"] if kind == "mq_packet_error" else ["sdma"]
        work = [(e, sdma_job(r.randrange(2, 8)) if e == "sdma" else job(e, r.randrange(2, 8))) for e in other]
        first = r.random() < 0.5  # the faulty job before the other engine's work, or after
        if first:
            steps.append(("submit", q, bad))
        for e, w in work:
            if e == "sdma":
                steps.append(("submit", e, w))
            else:
                pieces(e, w[0], w[1])
        if not first:
            steps.append(("delay", r.randrange(0, 200)))
            steps.append(("submit", q, bad))
        steps += [("until", q, "error"), ("settle", tuple(ENGINES)), ("observe", "error"), ("reset", q),
                  ("submit", q, g.cp_job(q, 2)), ("settle", tuple(ENGINES))]
        s.expect_at = {"error": {q: f"error {code}"}}
    elif kind == "mq_doorbell_error":
        s.prio = _prio(r)
        q = "q0" if case % 2 == 0 else "q1"
        other = "q1" if q == "q0" else "q0"
        backwards = (case // 2) % 2 == 0
        code = "DOORBELL_BACKWARDS" if backwards else "DOORBELL_OVERFLOW"
        busy = r.choice(["poll", "long_ib"])
        s.variant = f"{code.lower()} on {q} while {other} {'polls' if busy == 'poll' else 'runs a long IB'}"
        w, rel = job(q, r.randrange(1, 5))
        steps.append(("submit", q, w))
        steps += rel
        steps.append(("settle", (q,)))  # nothing pending on the queue whose doorbell goes bad
        sp = g.space[other]
        if busy == "poll":
            v = r.getrandbits(32)
            a = sp.semaphore(g, v ^ 1)
            steps.append(("submit", other, g.cp_job(other, r.randrange(0, 3)) + pm4.wait_reg_mem(
                a, v, M32, "EQ", poll_interval=r.randrange(0, 40)) + g.cp_job(other, r.randrange(1, 3))))
            steps.append(("until", other, "waiting"))
        else:
            body = [x for _ in range(r.randrange(30, 200)) for x in pm4.write_data(sp.data_addr(1), [r.getrandbits(32)])]
            steps.append(("submit", other, pm4.indirect_buffer(sp.new_ib(body, g), len(body))))
        size = 1 << s.rings[q][1]
        delta = (-r.randrange(1, 1 << 12) if backwards else size + r.randrange(1, 64)) & M32
        steps.append(("doorbell", q, delta))
        steps.append(("until", q, "error"))
        if busy == "poll":
            steps.append(("mem", a, [v]))
        steps += [("settle", ("q0", "q1")), ("observe", "error"), ("reset", q),
                  ("submit", q, g.cp_job(q, 2)), ("settle", tuple(ENGINES))]
        s.expect_at = {"error": {q: f"error {code}"}}
    elif kind == "mq_hang_reset":
        s.prio = _prio(r)
        q = "q0" if case % 2 == 0 else "q1"
        other = "q1" if q == "q0" else "q0"
        s.variant = f"{q} hangs, {other} runs"
        sp = g.space[q]
        a = sp.semaphore(g, r.getrandbits(32))
        fn = r.choice(["EQ", "NE", "GT", "LT"])
        v = int.from_bytes(s.preload[-1][1], "little")
        ref = {"EQ": v ^ 1, "NE": v, "GT": M32, "LT": 0}[fn]
        mask = M32
        inner = pm4.wait_reg_mem(a, ref, mask, fn, poll_interval=r.randrange(0, 40)) + sp.canary_packet()
        if r.random() < 0.4:
            hang = g.cp_job(q, r.randrange(0, 3)) + pm4.indirect_buffer(sp.new_ib(inner, g), len(inner))
        else:
            hang = g.cp_job(q, r.randrange(0, 3)) + inner
        steps.append(("submit", q, hang))
        w, rel = job(other, r.randrange(2, 8))
        if r.random() < 0.5:
            steps.append(("until", q, "waiting"))
        pieces(other, w, rel)
        steps += [("settle", (other,)), ("until", q, "stuck"), ("observe", "hung"), ("reset", q),
                  ("submit", q, g.cp_job(q, 2)), ("settle", tuple(ENGINES))]
        s.expect_at = {"hung": {q: "stuck"}}
    else:  # sdma_error_cp_runs
        s.prio = _prio(r)
        cls = tuple(S.CLASSES)[case % len(S.CLASSES)]
        s.variant = cls
        code = _sdma_fault(r, g, s, cls)
        work = [(q, job(q, r.randrange(2, 8))) for q in ("q0", "q1") if r.random() < 0.75] or [("q0", job("q0", 3))]
        for q, (w, rel) in work:
            pieces(q, w, rel)
            steps.append(("delay", r.randrange(0, 100)))
        steps += [("until", "sdma", "error"), ("settle", tuple(ENGINES)), ("observe", "error"), ("reset", "sdma"),
                  ("submit", "sdma", sdma_codec.fence(L.RECOVERY, 0x600D) + sdma_codec.trap(int_context=7)),
                  ("settle", tuple(ENGINES))]
        s.expect_at = {"error": {"sdma": f"error {code}"}}
    if steps[-1][0] != "settle":
        steps.append(("settle", tuple(ENGINES)))
    steps.append(("observe", "final"))
    ring_writes(s)
    ring_pauses(s)
    return s


def _sdma_fault(r: random.Random, g: _Gen, s: MultiStream, cls: str) -> str:
    """Plant an SDMA error class (testbench/difftest/sdma.py) after valid SDMA work."""
    sg, steps = g.sdma, s.steps
    size = 1 << s.rings["sdma"][1]
    if r.random() < 0.5:
        steps.append(("submit", "sdma", g.sdma_job(r.randrange(1, 3)) if size >= 256 else sdma_codec.pad(2)))
    if cls.startswith("sdma_doorbell"):
        steps.append(("submit", "sdma", sdma_codec.pad(r.randrange(1, 4))))
        steps.append(("settle", ("sdma",)))
        backwards = cls.endswith("backwards")
        steps.append(("doorbell", "sdma", (-4 * r.randrange(1, 1 << 12) if backwards
                                           else 4 * size + 4 * r.randrange(1, 64)) & M32))
        return "DOORBELL_BACKWARDS" if backwards else "DOORBELL_OVERFLOW"
    got = S.CLASSES[cls](sg, r)
    bad, code = got[0], got[1]
    if len(got) > 2:
        s.undefined += [(a, b) if (a, b) != (L.RPTR_WB, L.RPTR_WB + 4) else (RPTR_WB["sdma"], RPTR_WB["sdma"] + 4)
                        for a, b in got[2]]
        s.timing_regs.update({k: M32 for k in got[3]})
    in_ib = cls == "sdma_ib_nesting" or (cls not in ("sdma_ib_misaligned", "sdma_ib_size_zero")
                                         and code != "BUS_DECERR" and r.random() < 0.4)
    pre = sdma_codec.pad(r.randrange(1, 4)) if r.random() < 0.5 else []
    if in_ib:
        body = pre + bad + ([] if cls == "sdma_bad_count" else sg.never())
        steps.append(("submit", "sdma", sdma_codec.indirect_buffer(sg.place_ib(body), len(body)) + sg.never()))
    elif cls == "sdma_bad_count":
        steps.append(("submit", "sdma", pre + bad))
    else:
        steps.append(("submit", "sdma", pre + bad + sg.never()))
    return code


def _sync(r: random.Random, g: _Gen, s: MultiStream, q: str) -> None:
    """A CP job and an SDMA job that meet through memory, both ways, as a DAG:
    CP writes data D and flag A; SDMA polls A, copies D to E, fences B (and traps); the CP
    waits for B, then copies E onward with DMA_DATA (or writes a fence), and so on for
    1-3 rounds; each side may also have work of its own before and after."""
    sp, sg = g.space[q], g.sdma
    cp: list[int] = g.cp_job(q, r.randrange(0, 3))
    sd: list[int] = g.sdma_job(r.randrange(0, 3))
    rounds = r.randrange(1, 4)
    for _ in range(rounds):
        n = r.choice([1, 3, 8, 16])
        data = [r.getrandbits(32) for _ in range(n)]
        d = sp.data_addr(n)
        a, b = g.flag(), g.flag()
        va, vb = r.getrandbits(32) | 1, r.getrandbits(32) | 1
        cp += pm4.write_data(d, data)
        cp += (pm4.release_mem(a, va, int_sel=r.choice(["NONE", "SEND_INT"])) if r.random() < 0.5
               else pm4.write_data(a, [va], wr_confirm=1))
        e = sg.fresh_dst(4 * n)
        sd += sdma_codec.poll_regmem(a, va, M32, "EQ", interval=r.randrange(0, 4))
        sd += sdma_codec.copy_linear(e, d, 4 * n)
        sd += sdma_codec.fence(b, vb) + (sdma_codec.trap(int_context=r.getrandbits(28)) if r.random() < 0.5 else [])
        cp += pm4.wait_reg_mem(b, vb, M32, "EQ", poll_interval=r.randrange(0, 30))
        if g.dma and r.random() < 0.6:
            cp += pm4.dma_data(sp.dma_dst(4 * n), e, 4 * n, cp_sync=1)
        else:
            cp += pm4.release_mem(sp.data_addr(2, 8), vb ^ va, int_sel=r.choice(["NONE", "SEND_INT"]))
        cp += g.cp_job(q, r.randrange(0, 2))
        sd += g.sdma_job(r.randrange(0, 2))
    for e, words in ((q, cp), ("sdma", sd)):
        while len(words) >= (1 << s.rings[e][1]) // 2:  # a bigger ring (the rounds are not cut)
            log2 = s.rings[e][1] + 1
            lo = L.RING_REGION[0] + ENGINES.index(e) * _SLICE["ring"]
            s.rings[e] = (lo + 256 * r.randrange((_SLICE["ring"] - (4 << log2)) // 256 + 1), log2)
    order = [("submit", q, cp), ("submit", "sdma", sd)]
    if r.random() < 0.5:
        order.reverse()
    s.steps += [order[0], ("delay", r.randrange(0, 800)), order[1]]
