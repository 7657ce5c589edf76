"""Differential streams for the SDMA copy engine: the RTL (rtl/sdma/) against the reference
model (testbench/refmodel/sdma.py), stream by stream, as the CP's campaign does.

Stream `index` of master seed `seed` is determined by (seed, index): its kind comes from
`PLAN` (every SDMA error class and four valid streams in each block), its contents from a
random generator seeded with "seed/index". A stream programs the SDMA ring (random base,
size, rptr write-back, TRAP_ENABLE) and the IH ring over MMIO, preloads memory, makes one
or more submissions (each waited for: SDMA_STATUS.IDLE), and observes every register,
the IH ring and a digest of memory (`refmodel.snapshot`). A malformed stream plants one
faulty packet (in the ring or an IB) or a bad doorbell after valid packets, with packets
after it that must never run (they write the canary region); after the error it resets
the queue (SDMA_CNTL.QUEUE_RESET) and a good submission must complete.

What docs/hardware.md leaves undefined is left out of the comparison: the destination of
a transfer that failed and, in those streams, the SDMA byte counters; SDMA busy cycles
and timestamps always.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from kmd_model import regs
from kmd_model.regs import CpError, IbLevel
from spec import sdma
from spec.sdma import packets as sp
from testbench.refmodel import RefModel, snapshot

from .streams import layout as L

M32 = 0xFFFF_FFFF
SETTLE = 100_000  # cycles a submission may take before the stream calls it a hang
BEYOND = L.MEM_SIZE  # addresses from here answer DECERR on both backends
CANARY = L.CANARY_REGION[0]


@dataclass
class SdmaStream:
    index: int
    seed: int
    kind: str  # "valid" or an error class
    ring_base: int
    ring_log2: int  # dwords
    rptr_wb: bool
    trap: bool
    preload: list[tuple[int, bytes]] = field(default_factory=list)
    # ("submit", dwords) or ("doorbell", delta bytes from the driver's wptr)
    steps: list[tuple] = field(default_factory=list)
    expect: str = ""  # the error code a malformed stream must stop with
    expect_level: int = 0
    undefined: list[tuple[int, int]] = field(default_factory=list)  # bytes not compared
    timing_regs: tuple[str, ...] = ()  # registers not compared
    window: tuple[int, int, str] | None = None  # the memory model's error window
    listing: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.kind


class _Gen:
    """Places packets and buffers; each packet's targets are fresh memory."""

    def __init__(self, rng: random.Random):
        self.r = rng
        self.dst = L.DMA_DST_REGION[0]
        self.data = L.DATA_REGION[0]
        self.ib = L.IB_REGION[0]
        self.sem = L.SEM_REGION[0]
        self.canary = CANARY
        self.preload: list[tuple[int, bytes]] = []

    def fresh_dst(self, n: int) -> int:
        a = self.dst + self.r.randrange(64)
        self.dst = (a + n + 63) & ~31
        assert self.dst < L.DMA_DST_REGION[1]
        return a

    def fresh_data(self, ndw: int) -> int:
        a = self.data + 4 * self.r.randrange(8)
        self.data = (a + 4 * ndw + 31) & ~31
        assert self.data < L.DATA_REGION[1]
        return a

    def src(self, n: int) -> int:
        return L.SRC_REGION[0] + self.r.randrange(L.SRC_REGION[1] - L.SRC_REGION[0] - n)

    def place_ib(self, words: list[int]) -> int:
        a = self.ib
        self.ib = (a + 4 * len(words) + 32 + 31) & ~31
        assert self.ib < L.IB_REGION[1]
        self.preload.append((a, np.asarray(words, dtype="<u4").tobytes()))
        return a

    def semaphore(self, value: int) -> int:
        a = self.sem
        self.sem += 4
        self.preload.append((a, value.to_bytes(4, "little")))
        return a

    def packet(self, in_ib: bool = False) -> list[int]:
        """One valid packet (an INDIRECT_BUFFER only from the ring)."""
        r = self.r
        kinds = ["copy", "fill", "write", "fence", "trap", "nop", "poll"] + ([] if in_ib else ["ib"])
        k = r.choice(kinds)
        if k == "copy":
            n = r.choice([1, 3, 4, 37, 64, 255, 600, 1500, 4096]) if r.random() < 0.7 else r.randrange(1, 5000)
            return sdma.copy_linear(self.fresh_dst(n), self.src(n), n)
        if k == "fill":
            n = r.randrange(1, 700)
            return sdma.constant_fill(self.fresh_dst(n), r.getrandbits(32), n, fillsize=r.choice(["BYTES", "DWORDS"]))
        if k == "write":
            d = [r.getrandbits(32) for _ in range(r.choice([1, 2, 3, 7, 8, 9, 17, 40]))]
            return sdma.write_linear(self.fresh_data(len(d)), d)
        if k == "fence":
            return sdma.fence(self.fresh_data(1), r.getrandbits(32))
        if k == "trap":
            return sdma.trap(int_context=r.getrandbits(28))
        if k == "nop":
            return sdma.pad(r.randrange(1, 6)) if r.random() < 0.7 else sdma.nop(r.randrange(0, 9))
        if k == "poll":
            v = r.getrandbits(32)
            a = self.semaphore(v)
            if r.random() < 0.7:  # holds at once
                return sdma.poll_regmem(a, v, M32, r.choice(["EQ", "LE", "GE", "ALWAYS"]), interval=r.randrange(0, 4))
            # never holds: gives up after RETRY_COUNT + 1 reads (a SDMA_POLL_TIMEOUT entry)
            return sdma.poll_regmem(a, v ^ 1, M32, "EQ", interval=r.randrange(0, 3), retry_count=r.randrange(0, 4))
        body: list[int] = []
        for _ in range(r.randrange(1, 5)):
            body += self.packet(in_ib=True)
        body = body + sdma.pad(-len(body) % 8) if r.random() < 0.5 else body
        return sdma.indirect_buffer(self.place_ib(body), len(body))

    def packets(self, n: int) -> list[int]:
        out: list[int] = []
        for _ in range(n):
            out += self.packet()
        return out

    def never(self) -> list[int]:
        """A packet that must never run: it writes the canary region."""
        a = self.canary
        self.canary += 32
        return sdma.fence(a, 0xBAD0BAD0)


# ---------------------------------------------------------------------------- error classes
# Each returns (faulty packet dwords, the undefined byte ranges, timing registers) for the
# generator `g`; `where` says whether it runs in an IB.

def _illegal(g: _Gen, r: random.Random):
    while True:
        op, sub = r.randrange(256), r.randrange(256) if r.random() < 0.5 else 0
        if (op, sub) not in sp.by_op:
            return [sdma.header(op, sub, r.getrandbits(16))], "ILLEGAL_OPCODE"


def _unsupported(g: _Gen, r: random.Random):
    choices = []
    for p in sp.SDMA_PACKETS:
        for f in p.fields:
            if f.enum and not f.open_enum:
                bad = [e.value for e in f.enum if not e.supported]
                if bad:
                    choices.append((p, f, bad))
    p, f, bad = r.choice(choices)
    build = {"COPY_LINEAR": lambda: sdma.copy_linear(g.fresh_dst(16), g.src(16), 16),
             "WRITE_LINEAR": lambda: sdma.write_linear(g.fresh_data(2), [1, 2]),
             "POLL_REGMEM": lambda: sdma.poll_regmem(g.semaphore(1), 1, M32, "EQ"),
             "CONSTANT_FILL": lambda: sdma.constant_fill(g.fresh_dst(16), 5, 16)}[p.name]
    words = build()
    words[f.dword + 1] = (words[f.dword + 1] & ~f.mask) | (r.choice(bad) << f.lsb)
    return words, "UNSUPPORTED"


def _fence_misaligned(g: _Gen, r: random.Random):
    low = r.randrange(1, 4)
    k = r.choice(["fence", "write", "poll"])
    if k == "fence":
        w = sdma.fence(g.fresh_data(1), 7)
        w[1] |= low
    elif k == "write":
        w = sdma.write_linear(g.fresh_data(3), [1, 2, 3])
        w[1] |= low
    else:
        w = sdma.poll_regmem(g.semaphore(1), 1, M32, "EQ")
        w[1] |= low
    return w, "FENCE_MISALIGNED"


def _ib_misaligned(g: _Gen, r: random.Random):
    w = sdma.indirect_buffer(g.place_ib(sdma.fence(g.fresh_data(1), 1)), 4)
    w[1] |= r.randrange(1, 32)
    return w, "IB_MISALIGNED"


def _ib_size_zero(g: _Gen, r: random.Random):
    return sdma.encode_fields("INDIRECT_BUFFER", {"IB_BASE_LO": g.place_ib(sdma.pad(8)) >> 5}), "IB_SIZE_ZERO"


def _ib_nesting(g: _Gen, r: random.Random):
    inner = g.place_ib(sdma.fence(g.fresh_data(1), 3))
    return sdma.indirect_buffer(inner, 4), "IB_NESTING"  # (planted inside an IB: see _malformed)


def _bad_count(g: _Gen, r: random.Random):
    """A packet that runs past its buffer: the caller cuts it (`cut` dwords kept)."""
    k = r.choice(["copy", "write", "nop", "poll", "fence", "fill"])
    w = {"copy": lambda: sdma.copy_linear(g.fresh_dst(8), g.src(8), 8),
         "write": lambda: sdma.write_linear(g.fresh_data(6), list(range(6))),
         "nop": lambda: sdma.nop(r.randrange(1, 12)),
         "poll": lambda: sdma.poll_regmem(g.semaphore(1), 1, M32, "EQ"),
         "fence": lambda: sdma.fence(g.fresh_data(1), 1),
         "fill": lambda: sdma.constant_fill(g.fresh_dst(8), 1, 8)}[k]()
    # the length is decided from the header (or WRITE_LINEAR's COUNT, dword 3): keep at least
    # that much so the error is the length's, not a missing dword's
    keep = r.randrange(4 if k == "write" else 1, len(w))
    return w[:keep], "BAD_COUNT"


def _decerr(g: _Gen, r: random.Random):
    k = r.choice(["fence", "write", "poll", "copy_dst", "copy_src", "fill", "ib_beyond_bus", "ib_beyond_mem"])
    far = BEYOND + 4 * r.randrange(1 << 16)
    undefined: list[tuple[int, int]] = []
    if k == "fence":
        w = sdma.fence(far, 1)
    elif k == "write":  # within one 32-byte block: the RTL has fetched all of it before it writes
        n = r.randrange(1, 5)
        w = sdma.write_linear(far & ~31, list(range(n)))
    elif k == "poll":
        w = sdma.poll_regmem(far, 0, 0, "EQ")
    elif k == "copy_dst":
        n = r.randrange(1, 300)
        w = sdma.copy_linear(far, g.src(n), n)
    elif k == "copy_src":
        n = r.randrange(1, 300)
        d = g.fresh_dst(n)
        w = sdma.copy_linear(d, far, n)
        undefined.append((d, d + n))
    elif k == "fill":
        w = sdma.constant_fill(far, 9, r.randrange(1, 300))
    elif k == "ib_beyond_bus":
        w = sdma.encode_fields("INDIRECT_BUFFER", {"IB_BASE_LO": 0x100, "IB_BASE_HI": r.randrange(1 << 16, 1 << 32),
                                                   "IB_SIZE": 8})
    else:
        w = sdma.indirect_buffer(far & ~31, r.randrange(1, 20))
    timing: tuple[str, ...] = ()
    if k.startswith(("copy", "fill")):  # a transfer's error: the packet was done when it was queued
        timing = ("PERF_SDMA_BYTES_READ", "PERF_SDMA_BYTES_WRITTEN", "SDMA_RB_RPTR")
        undefined.append((L.RPTR_WB, L.RPTR_WB + 4))
    return w, "BUS_DECERR", undefined, timing


CLASSES = {
    "sdma_illegal_opcode": _illegal,
    "sdma_bad_count": _bad_count,
    "sdma_unsupported": _unsupported,
    "sdma_fence_misaligned": _fence_misaligned,
    "sdma_ib_misaligned": _ib_misaligned,
    "sdma_ib_size_zero": _ib_size_zero,
    "sdma_ib_nesting": _ib_nesting,
    "sdma_bus_decerr": _decerr,
    "sdma_doorbell_backwards": None,
    "sdma_doorbell_overflow": None,
}
PLAN: tuple[str, ...] = tuple(CLASSES) + ("valid",) * 4


def make(seed: int, index: int) -> SdmaStream:
    kind = PLAN[index % len(PLAN)]
    r = random.Random(f"gpucosim-sdma-difftest/{seed}/{index}")
    log2 = r.randrange(6, 11)
    base = L.RING_REGION[0] + 256 * r.randrange((L.RING_REGION[1] - L.RING_REGION[0] - (4 << log2)) // 256)
    s = SdmaStream(index, seed, kind, base, log2, rptr_wb=r.random() < 0.8, trap=r.random() < 0.8)
    g = _Gen(r)
    size = 1 << log2

    def submit(words):
        assert len(words) <= size
        s.steps.append(("submit", words))

    if kind == "valid":
        for _ in range(r.randrange(1, 4)):
            words = g.packets(r.randrange(1, 8))
            while len(words) > size:
                words = g.packets(1)
            submit(words)
    else:
        if r.random() < 0.5:  # valid work first
            words = g.packets(r.randrange(1, 3))
            submit(words if len(words) <= size // 2 else sdma.pad(r.randrange(1, 4)))
        if kind.startswith("sdma_doorbell"):
            submit(g.packets(1) if size >= 64 else sdma.pad(2))
            s.expect = CpError.DOORBELL_BACKWARDS.name if kind.endswith("backwards") else CpError.DOORBELL_OVERFLOW.name
            delta = -4 * r.randrange(1, 1 << 12) if kind.endswith("backwards") else 4 * size + 4 * r.randrange(1, 64)
            s.steps.append(("doorbell", delta & M32))
        else:
            got = CLASSES[kind](g, r)
            bad, code = got[0], got[1]
            if len(got) > 2:
                s.undefined += got[2]
                s.timing_regs = got[3]
            s.expect = code
            in_ib = kind == "sdma_ib_nesting" or (kind not in ("sdma_ib_misaligned", "sdma_ib_size_zero")
                                                  and code != "BUS_DECERR" and r.random() < 0.4)
            if kind == "sdma_bus_decerr" and bad[0] & 0xFF == sp.INDIRECT_BUFFER.op:
                in_ib = False
            pre = sdma.pad(r.randrange(1, 4)) if r.random() < 0.5 else []
            if in_ib:
                body = pre + bad
                cut = kind == "sdma_bad_count"
                if not cut:
                    body += g.never()
                ib = g.place_ib(body)
                submit(sdma.indirect_buffer(ib, len(body)) + g.never())
                s.expect_level = IbLevel.IB1
            else:
                if kind == "sdma_bad_count":
                    submit(pre + bad)  # the packet runs past wptr
                else:
                    submit(pre + bad + g.never())
    s.preload = g.preload
    s.listing = [f"{kind}: ring {size} dwords at {base:#x}, rptr_wb {s.rptr_wb}, trap {s.trap}"] + [
        f"  {st[0]} " + ("\n    ".join(sdma.disassemble(st[1])) if st[0] == "submit" else f"{st[1]:#x}")
        for st in s.steps]
    return s


# ---------------------------------------------------------------------------- the driver

def _settle(dev, what: str) -> str:
    """Until SDMA_STATUS.IDLE; '' or a complaint."""
    end = dev.now() + SETTLE
    while not regs.SDMA_STATUS.IDLE.get(dev.mmio_read32(regs.SDMA_STATUS.addr())):
        if dev.now() >= end:
            return f"{what}: SDMA not idle after {SETTLE} cycles"
        dev.delay(32)
    return ""


IH_BASE, IH_LOG2_DW = L.IH_REGION[0], 8


def _ih_timestamps() -> list[tuple[int, int]]:
    from .driver import _TS
    return [(IH_BASE + 32 * k + o, IH_BASE + 32 * k + o + n) for k in range(1 << (IH_LOG2_DW - 3)) for o, n in _TS]


def drive(s: SdmaStream, dev) -> dict:
    """Run the stream on `dev`; returns what a driver sees (registers, IH entries, memory)."""
    w = dev.mmio_write32
    checks: list[str] = []
    for a, b in s.preload:
        dev.mem[a:a + len(b)] = np.frombuffer(b, dtype=np.uint8)
    src = np.random.default_rng(s.index).integers(0, 256, L.SRC_REGION[1] - L.SRC_REGION[0], dtype=np.uint8)
    dev.mem[L.SRC_REGION[0]:L.SRC_REGION[1]] = src
    w(regs.IH_BASE_LO.addr(), IH_BASE >> 8)
    w(regs.IH_SIZE.addr(), IH_LOG2_DW)
    w(regs.IH_CNTL.addr(), regs.IH_CNTL.ENABLE.mask)
    w(regs.SDMA_RB_BASE_LO.addr(), s.ring_base >> 8)
    w(regs.SDMA_RB_RPTR_ADDR_LO.addr(), L.RPTR_WB)
    w(regs.SDMA_RB_CNTL.addr(), regs.SDMA_RB_CNTL.RB_ENABLE.put(1) | regs.SDMA_RB_CNTL.RB_SIZE.put(s.ring_log2)
      | regs.SDMA_RB_CNTL.RPTR_WRITEBACK_ENABLE.put(int(s.rptr_wb)))
    w(regs.SDMA_CNTL.addr(), regs.SDMA_CNTL.TRAP_ENABLE.put(int(s.trap)))
    m32 = dev.mem.view("<u4")
    mask = (1 << s.ring_log2) - 1
    wptr = 0  # dwords
    for step in s.steps:
        if step[0] == "submit":
            for x in step[1]:
                m32[s.ring_base // 4 + (wptr & mask)] = x
                wptr += 1
            w(regs.SDMA_DOORBELL.addr(), (4 * wptr) & M32)
        else:
            w(regs.SDMA_DOORBELL.addr(), (4 * wptr + step[1]) & M32)
        c = _settle(dev, step[0])
        if c:
            checks.append(c)
            break
    exclude = _ih_timestamps() + s.undefined
    # the registers in one trip where the device offers it (FastDevice.read_many)
    read_many = getattr(dev, "read_many", None)
    out = {"end": snapshot(dev, exclude=exclude, read_many=read_many), "checks": checks}
    if s.expect:
        # the queue reset brings the engine back; a good submission completes
        w(regs.SDMA_CNTL.addr(), regs.SDMA_CNTL.QUEUE_RESET.mask | regs.SDMA_CNTL.TRAP_ENABLE.put(int(s.trap)))
        c = _settle(dev, "queue reset")
        if not c:
            at = L.RECOVERY
            for k, x in enumerate(sdma.fence(at, 0x600D) + sdma.trap(int_context=7)):
                m32[s.ring_base // 4 + k] = x
            w(regs.SDMA_DOORBELL.addr(), 4 * 6)
            c = _settle(dev, "recovery")
            if not c and int(m32[at // 4]) != 0x600D:
                c = "recovery: the fence after the queue reset was not written"
        if c:
            checks.append(c)
        out["final"] = snapshot(dev, exclude=exclude, read_many=read_many)
    return out


def compare(s: SdmaStream, rtl: dict, model: dict) -> list[str]:
    diffs = [f"rtl: {c}" for c in rtl["checks"]] + [f"model: {c}" for c in model["checks"]]
    for point in ("end", "final"):
        if point not in model:
            continue
        a, b = model[point], rtl.get(point)
        if b is None:
            diffs.append(f"{point}: the RTL did not get there")
            continue
        for k in sorted(set(a["regs"]) | set(b["regs"])):
            if k in s.timing_regs:
                continue
            if a["regs"].get(k) != b["regs"].get(k):
                diffs.append(f"{point} {k}: model {a['regs'].get(k)!r} rtl {b['regs'].get(k)!r}")
        if a["ih"] != b["ih"]:
            diffs.append(f"{point} IH entries: model {a['ih']} rtl {b['ih']}")
        if a["mem"] != b["mem"]:
            diffs.append(f"{point}: memory differs")
    if "end" in model:
        e = regs.SDMA_ERROR.decode(model["end"]["regs"]["SDMA_ERROR"])
        if CpError(e["CODE"]).name != (s.expect or "NONE"):
            diffs.append(f"model stopped with {CpError(e['CODE']).name}, the stream plants {s.expect or 'nothing'}")
    return diffs


def run_model(s: SdmaStream, mmio_cycles: int | None = None) -> tuple[dict, RefModel]:
    kw = {} if mmio_cycles is None else {"mmio_cycles": mmio_cycles}
    m = RefModel(L.MEM_SIZE, **kw)
    return drive(s, m), m


def memory_diffs(a: np.ndarray, b: np.ndarray, s: SdmaStream) -> list[str]:
    """Byte ranges where two memories differ, outside what the stream leaves undefined."""
    from .driver import outside
    from testbench.refmodel import mem_diff
    return [f"memory differs at [{x:#x}, {y:#x})" for x, y in outside(mem_diff(a, b), _ih_timestamps() + s.undefined)]


async def campaign(dut) -> None:
    """The cocotb side: streams [SDMA_FIRST, +SDMA_COUNT) of SDMA_SEED, one JSON line each."""
    import json
    import os

    from testbench.sim import bridge

    from .simulator.rtl import FastDevice

    env = os.environ
    seed, first, count = int(env["SDMA_SEED"]), int(env["SDMA_FIRST"]), int(env["SDMA_COUNT"])
    dev = await FastDevice.start(dut, mem_size=L.MEM_SIZE)
    with open(env["SDMA_OUT"], "a") as out:
        for index in range(first, first + count):
            s = make(seed, index)
            dev.mem_model.configure()
            await dev.reset()
            dev.mem[:] = 0
            box: dict = {}

            def body(d, s=s, box=box):
                try:
                    box["obs"] = drive(s, d)
                except Exception as e:  # a driver-visible failure
                    box["obs"] = {"checks": [f"driver stopped: {e!r}"]}

            await bridge.bridge(body)(dev)
            rtl = box["obs"]
            model, m = run_model(s)
            diffs = compare(s, rtl, model) if "end" in rtl else rtl["checks"]
            diffs += memory_diffs(dev.mem, m.mem, s) if diffs else []
            out.write(json.dumps({"index": index, "kind": s.kind, "ok": not diffs, "diffs": diffs[:20],
                                  "listing": s.listing if diffs else []}) + "\n")
            out.flush()
    dev.close()
