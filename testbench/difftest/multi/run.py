"""Running a multi-queue stream (testbench/difftest/multi) on a Device, the RTL under cocotb
or the reference model, and comparing what the two did (see the package's docstring for
what is compared and why)."""

from __future__ import annotations

import numpy as np

from kmd_model import regs
from kmd_model.regs import CpError
from spec import ih as ih_spec
from testbench.refmodel import RefModel, mem_diff

from ..driver import HW_DRIVEN, OBSERVED
from ..streams import layout as L
from ..streams.stream import wrapped
from .gen import ENGINES, IH_LOG2_DW, KMD_TIMEOUT, M32, ORDERED, RPTR_WB, SETTLE, MultiStream, make

COMPARED = ("registers at every observation (all readable ones at the end; time and cycle counters aside), each "
            "queue's error registers included; IH entries in order per producer (q0, q1, SDMA), and in order across "
            "producers in the ordered phase; memory except the IH ring's slots and what a stream declares undefined; "
            "how each engine stands at every observation (idle, the planted error code, stuck)")

# ---------------------------------------------------------------------------- the driver

_Q = {
    "q0": dict(base=regs.RB_BASE_LO, base_hi=regs.RB_BASE_HI, size=regs.RB_SIZE, wb=regs.RB_RPTR_ADDR_LO,
               cntl=regs.RB_CNTL, doorbell=regs.RB_DOORBELL, status=regs.STATUS, error=regs.CP_ERROR),
    "q1": dict(base=regs.CP_HQD1_RB_BASE_LO, base_hi=regs.CP_HQD1_RB_BASE_HI, size=regs.CP_HQD1_RB_SIZE,
               wb=regs.CP_HQD1_RB_RPTR_ADDR_LO, cntl=regs.CP_HQD1_RB_CNTL, doorbell=regs.CP_HQD1_RB_DOORBELL,
               status=regs.CP_HQD1_STATUS, error=regs.CP_HQD1_ERROR),
    "sdma": dict(doorbell=regs.SDMA_DOORBELL, status=regs.SDMA_STATUS, error=regs.SDMA_ERROR),
}


def ih_slots() -> tuple[int, int]:
    return L.IH_REGION[0], L.IH_REGION[0] + (4 << IH_LOG2_DW)


class Driver:
    def __init__(self, s: MultiStream, dev):
        self.s, self.dev = s, dev
        self.m32 = dev.mem.view("<u4")
        self.wptr = {e: 0 for e in ENGINES}  # CP: dwords; SDMA: bytes
        self.ih_rptr = 0
        self.out = {"events": [], "ih": [], "ih_at": [], "checks": [], "status": {}}
        self.max_poll = 32 if getattr(dev, "name", "") == "icarus" else 128

    def w(self, reg, value, i: int = 0) -> None:
        self.dev.mmio_write32(reg.addr(i), value & M32)

    def rd(self, reg, i: int = 0) -> int:
        return self.dev.mmio_read32(reg.addr(i))

    def setup(self) -> None:
        s, w = self.s, self.w
        for a, b in s.preload:
            self.dev.mem[a:a + len(b)] = np.frombuffer(b, dtype=np.uint8)
        src = np.random.default_rng(s.index).integers(0, 256, L.SRC_REGION[1] - L.SRC_REGION[0], dtype=np.uint8)
        self.dev.mem[L.SRC_REGION[0]:L.SRC_REGION[1]] = src
        w(regs.IH_BASE_LO, L.IH_REGION[0] >> 8)
        w(regs.IH_SIZE, IH_LOG2_DW)
        w(regs.IH_CNTL, regs.IH_CNTL.ENABLE.mask)
        for q in ("q0", "q1"):
            r_, (base, log2) = _Q[q], s.rings[q]
            w(r_["base"], base >> 8)
            w(r_["size"], log2 - 1)  # log2 qwords
            w(r_["wb"], RPTR_WB[q])
            w(r_["cntl"], regs.RB_CNTL.ENABLE.mask | (regs.RB_CNTL.RPTR_WB.mask if s.rptr_wb[q] else 0))
        base, log2 = s.rings["sdma"]
        w(regs.SDMA_RB_BASE_LO, base >> 8)
        w(regs.SDMA_RB_RPTR_ADDR_LO, RPTR_WB["sdma"])
        w(regs.SDMA_RB_CNTL, regs.SDMA_RB_CNTL.RB_ENABLE.put(1) | regs.SDMA_RB_CNTL.RB_SIZE.put(log2)
          | regs.SDMA_RB_CNTL.RPTR_WRITEBACK_ENABLE.put(int(s.rptr_wb["sdma"])))
        w(regs.SDMA_CNTL, regs.SDMA_CNTL.TRAP_ENABLE.put(int(s.trap)))
        w(regs.CP_QUEUE_PRIORITY, s.prio)

    def status(self, e: str) -> dict:
        return _Q[e]["status"].decode(self.rd(_Q[e]["status"]))

    def ended(self, e: str) -> str:
        st = self.status(e)
        if st["ERROR"]:
            code = _Q[e]["error"].CODE.get(self.rd(_Q[e]["error"]))
            return f"error {CpError(code).name if code in CpError._value2member_map_ else code}"
        if st["IDLE"]:
            return "idle"
        return "stuck" if st["WAITING"] else "busy"

    def poll(self, cond, what: str, budget: int = SETTLE) -> bool:
        t0, d = self.dev.now(), 8
        while not cond():
            if self.dev.now() - t0 > budget:
                self.out["checks"].append(f"hang: {what} not after {budget} cycles ("
                                          + ", ".join(f"{e} {self.ended(e)}" for e in ENGINES) + ")")
                return False
            self.dev.delay(d)
            d = min(2 * d, self.max_poll)
        return True

    def run(self) -> dict:
        self.setup()
        for st in self.s.steps:
            if getattr(self, "do_" + st[0])(*st[1:]) is False:
                break  # a hang: the stream stops here (the check says so)
        return self.out

    def do_submit(self, e: str, words: list[int]) -> None:
        base, log2 = self.s.rings[e]
        mask = (1 << log2) - 1
        if e == "sdma":
            at = self.wptr[e] // 4
            idx = base // 4 + ((at + np.arange(len(words))) & mask)
            self.m32[idx] = np.asarray(words, dtype=np.uint32)
            self.wptr[e] = (self.wptr[e] + 4 * len(words)) & M32
        else:
            idx = base // 4 + ((self.wptr[e] + np.arange(len(words))) & mask)
            self.m32[idx] = np.asarray(words, dtype=np.uint32)
            self.wptr[e] = (self.wptr[e] + len(words)) & M32
        self.w(_Q[e]["doorbell"], self.wptr[e])

    def do_ring_write(self, name: str, value: int) -> None:
        """A write to an enabled ring's base, size or write-back address (careless.ring_writes): ignored."""
        self.w(getattr(regs, name), value)

    def do_pause(self, e: str, cycles: int) -> None:
        """Clear a ring's enable, wait, set it again (careless.ring_pauses): the rest of its work
        runs from the packet boundary where it paused."""
        s = self.s
        if e == "sdma":
            f = regs.SDMA_RB_CNTL
            cntl = f.RB_SIZE.put(s.rings["sdma"][1]) | f.RPTR_WRITEBACK_ENABLE.put(int(s.rptr_wb["sdma"]))
            on = f.RB_ENABLE.mask
        else:
            cntl = regs.RB_CNTL.RPTR_WB.mask if s.rptr_wb[e] else 0
            on = regs.RB_CNTL.ENABLE.mask
        reg = regs.SDMA_RB_CNTL if e == "sdma" else _Q[e]["cntl"]
        self.w(reg, cntl)
        self.dev.delay(cycles)
        self.w(reg, cntl | on)

    def do_doorbell(self, e: str, delta: int) -> None:
        self.w(_Q[e]["doorbell"], self.wptr[e] + delta)

    def do_delay(self, n: int) -> None:
        self.dev.delay(n)

    def do_mem(self, addr: int, words: list[int]) -> None:
        self.m32[addr // 4:addr // 4 + len(words)] = np.asarray(words, dtype=np.uint32)

    def do_halt(self, on: int) -> None:
        self.w(regs.CONTROL, regs.CONTROL.HALT.put(on))

    def do_settle(self, engines) -> bool:
        return self.poll(lambda: all(self.status(e)["IDLE"] for e in engines), f"{'+'.join(engines)} idle")

    def do_until(self, e: str, what: str) -> bool:
        if what == "error":
            return self.poll(lambda: self.status(e)["ERROR"] and self.status(e)["IDLE"], f"{e} stopped by an error")
        if what == "waiting":
            return self.poll(lambda: self.status(e)["WAITING"] or self.status(e)["IDLE"], f"{e} polling")
        # stuck: in a poll, and still in that one (the same rptr, level and dwords parsed: the
        # only engine left running, a re-poll parses nothing new) a KMD timeout later. (Two
        # polls of one IB, KMD_TIMEOUT apart, share the rptr and the level.)
        rptr = {"q0": regs.RB_RPTR, "q1": regs.CP_HQD1_RB_RPTR, "sdma": regs.SDMA_RB_RPTR}[e]
        parsed = regs.PERF_SDMA_DWORDS_FETCHED if e == "sdma" else regs.PERF_DWORDS_FETCHED

        def stuck():
            st, p, n = self.status(e), self.rd(rptr), self.rd(parsed)
            if not st["WAITING"]:
                return False
            self.dev.delay(KMD_TIMEOUT)
            st2 = self.status(e)
            return (bool(st2["WAITING"]) and st2["LEVEL"] == st["LEVEL"] and self.rd(rptr) == p
                    and self.rd(parsed) == n)
        return self.poll(stuck, f"{e} stuck in a poll")

    def do_reset(self, e: str) -> bool:
        if e == "sdma":
            self.w(regs.SDMA_CNTL, regs.SDMA_CNTL.QUEUE_RESET.mask | regs.SDMA_CNTL.TRAP_ENABLE.put(int(self.s.trap)))
        else:
            self.w(regs.CP_QUEUE_RESET, (regs.CP_QUEUE_RESET.Q0 if e == "q0" else regs.CP_QUEUE_RESET.Q1).mask)
        self.wptr[e] = 0
        return self.do_settle((e,))

    def regs_now(self, full: bool) -> dict:
        if isinstance(self.dev, RefModel):
            got = self.dev.snapshot(memory=False)["regs"]
            return got if full else {k: v for k, v in got.items() if k in HW_DRIVEN}
        which = [(label, reg.addr(i)) for label, reg, i in OBSERVED if full or label in HW_DRIVEN]
        many = getattr(self.dev, "read_many", None)
        values = many([o for _, o in which]) if many else [self.dev.mmio_read32(o) for _, o in which]
        return dict(zip([label for label, _ in which], values))

    def do_observe(self, label: str) -> None:
        self.out["events"].append((label, self.regs_now(full=label == "final")))
        self.out["status"][label] = {e: self.ended(e) for e in ENGINES}
        wptr = self.rd(regs.IH_WPTR)
        size = ih_spec.ENTRY_BYTES << (IH_LOG2_DW - 3)
        n = ((wptr - self.ih_rptr) & M32) // ih_spec.ENTRY_BYTES
        if n > size // ih_spec.ENTRY_BYTES:
            self.out["checks"].append(f"IH_WPTR {wptr:#x} more than the IH ring ahead of IH_RPTR {self.ih_rptr:#x}")
            n = size // ih_spec.ENTRY_BYTES
        for k in range(n):
            a = L.IH_REGION[0] + ((self.ih_rptr + ih_spec.ENTRY_BYTES * k) & (size - 1))
            e = ih_spec.decode(self.m32[a >> 2:(a >> 2) + 8].tolist())
            e["TIMESTAMP_LO"] = e["TIMESTAMP_HI"] = 0
            self.out["ih"].append(e)
            self.out["ih_at"].append(label)
        if wptr != self.ih_rptr:
            self.ih_rptr = wptr
            self.w(regs.IH_RPTR, wptr)


def drive(s: MultiStream, dev) -> dict:
    return Driver(s, dev).run()


# ---------------------------------------------------------------------------- comparison

def producer(e: dict) -> str:
    """Which engine an IH entry comes from: its entries keep their order."""
    if e["CLIENT_ID"] == ih_spec.Client.SDMA0:
        return "sdma"
    if e["CLIENT_ID"] == ih_spec.Client.GRBM_CP:
        return f"cp q{e['RING_ID']}"
    return f"client {e['CLIENT_ID']:#x} ring {e['RING_ID']}"


def by_producer(entries: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for e in entries:
        out.setdefault(producer(e), []).append(e)
    return out


def undefined(s: MultiStream) -> list[tuple[int, int]]:
    """Bytes not compared: the IH ring's slots (the entries are compared per producer)
    and what the stream declares."""
    return [ih_slots()] + list(s.undefined)


def compare(s: MultiStream, rtl: dict, model: dict, rtl_mem: np.ndarray | None = None,
            model_mem: np.ndarray | None = None) -> list[str]:
    diffs = [f"rtl: {c}" for c in rtl.get("checks", [])] + [f"model: {c}" for c in model.get("checks", [])]
    la, lb = [x[0] for x in model.get("events", [])], [x[0] for x in rtl.get("events", [])]
    if la != lb:
        diffs.append(f"observations: model {la}, rtl {lb}")
    for (label, a), (_, b) in zip(model.get("events", []), rtl.get("events", [])):
        for k in sorted(set(a) | set(b)):
            x, y = a.get(k), b.get(k)
            m = s.timing_regs.get(k, 0)
            if x is not None and y is not None and (x & ~m) == (y & ~m):
                continue
            if x != y:
                diffs.append(f"{label}: {k}: model {x if x is None else hex(x)}, rtl {y if y is None else hex(y)}")
    for label in la:
        if model.get("status", {}).get(label) != rtl.get("status", {}).get(label):
            diffs.append(f"{label}: engines ended model {model['status'].get(label)}, "
                         f"rtl {rtl.get('status', {}).get(label)}")
    for label in ORDERED:  # there the order across producers is the contract's too
        xa = [e for e, at in zip(model.get("ih", []), model.get("ih_at", [])) if at == label]
        xb = [e for e, at in zip(rtl.get("ih", []), rtl.get("ih_at", [])) if at == label]
        if [(producer(e), e) for e in xa] != [(producer(e), e) for e in xb]:
            diffs.append(f"{label}: IH entries in order: model {[producer(e) for e in xa]}, "
                         f"rtl {[producer(e) for e in xb]}")
    pa, pb = by_producer(model.get("ih", [])), by_producer(rtl.get("ih", []))
    for p in sorted(set(pa) | set(pb)):
        xa, xb = pa.get(p, []), pb.get(p, [])
        if len(xa) != len(xb):
            diffs.append(f"IH entries of {p}: model {len(xa)}, rtl {len(xb)}")
        for i, (x, y) in enumerate(zip(xa, xb)):
            if x != y:
                diffs.append(f"IH entry {i} of {p}: " + ", ".join(f"{f} model {x[f]:#x} rtl {y.get(f, 0):#x}"
                                                                    for f in x if x[f] != y.get(f)))
    if rtl_mem is not None and model_mem is not None:
        ranges = mem_diff(model_mem, rtl_mem, undefined(s), limit=16)
        for a, b in ranges[:8]:
            n = min(b - a, 8)
            diffs.append(f"memory [{a:#x}, {b:#x}): model {bytes(model_mem[a:a + n]).hex()}, "
                         f"rtl {bytes(rtl_mem[a:a + n]).hex()}")
    return diffs


def expected(s: MultiStream, model: dict) -> list[str]:
    """What the model did against what the stream's kind says must happen (exact codes)."""
    out = []
    want = {"final": s.expect, **getattr(s, "expect_at", {})}
    for label, engines in want.items():
        got = model.get("status", {}).get(label)
        if got is None:
            out.append(f"model: no '{label}' observation")
            continue
        for e, w in engines.items():
            if got[e] != w:
                out.append(f"model: at '{label}' {e} ended {got[e]}, the stream plants {w}")
    return out


def run_model(s: MultiStream, mmio_cycles: int | None = None, dma: bool = True,
              data_width: int = 64) -> tuple[dict, RefModel]:
    """`data_width`: the RTL's bus width, which CAPS and the byte counters show (a 32-bit RTL
    against a model told nothing mismatched on both in every stream)."""
    kw = {} if mmio_cycles is None else {"mmio_cycles": mmio_cycles}
    m = RefModel(L.MEM_SIZE, dma=dma, data_width=data_width, **kw)
    return drive(s, m), m


def model_options(caps: int) -> dict:
    """What the model compared with an RTL must be told of it, from the RTL's CAPS: whether it
    has the DMA engine, and its bus width (shown in CAPS and in the byte counters; a 32-bit RTL
    against a model told nothing mismatched in every stream, 24 of 24)."""
    return {"dma": bool(regs.CAPS.DMA.get(caps)), "data_width": 8 << regs.CAPS.BUS_BYTES_LOG2.get(caps)}


def check_pair(s: MultiStream) -> list[str]:
    """The generator's own check: two models with different MMIO timing agree, and the
    model ends every engine the way the stream's kind says."""
    a, ma = run_model(s)
    b, mb = run_model(s, mmio_cycles=3)
    return compare(s, b, a, mb.mem, ma.mem) + expected(s, a)


def record(s: MultiStream, diffs: list[str], sim: str, wall: float, model: dict) -> dict:
    return {"index": s.index, "sim": sim, "family": "multi", "kind": s.kind, "class": s.error_class,
            "variant": s.variant, "ok": not diffs, "diffs": diffs[:20], "wall": round(wall, 4),
            "outcome": model.get("status", {}).get("final", {}),
            "codes": {label: {e: f"{e} {v.removeprefix('error ')}" for e, v in st.items()}
                      for label, st in s.expect_at.items()},
            "replay": "" if not diffs else replay_command(sim, s.seed, s.index),
            "listing": s.listing() if diffs else []}


def replay_command(sim: str, seed: int, index: int) -> str:
    return f"python -m testbench.difftest --multi --sim {sim} --seed {seed} --replay {index}"


def explain(s: MultiStream, diffs: list[str], rtl: dict, model: dict, sim: str) -> str:
    """The long story of one stream: listing, how each engine ended, differences."""
    out = s.listing()
    for label, st in model.get("status", {}).items():
        out.append(f"{label}: model {st}, {sim} {rtl.get('status', {}).get(label)}")
    if diffs:
        out.append(f"MISMATCH between {sim} and the model:")
        out += [f"  {d}" for d in diffs]
        for name, obs in (("model", model), (sim, rtl)):  # the IH entries as each side consumed them
            out.append(f"IH entries on the {name} (observation: producer, SOURCE_ID, DATA0): " + "; ".join(
                f"{at}: {producer(e)} {e['SOURCE_ID']} {e['DATA0']:#x}" for e, at in zip(obs.get("ih", []),
                                                                               obs.get("ih_at", []))))
        out.append(f"replay: {replay_command(sim, s.seed, s.index)}")
    else:
        out.append(f"{sim} and the model agree.")
    return wrapped("\n".join(out))  # (as --list: an IH line or a listing's was thousands of characters)


async def campaign(dut) -> None:
    """The cocotb side: streams [MULTI_FIRST, +MULTI_COUNT) of MULTI_SEED, one JSON line each."""
    import json
    import os
    import time

    from testbench.sim import bridge
    from testbench.memory import ProtocolChecker

    from ..simulator.rtl import FastDevice

    env = os.environ
    seed, first, count = int(env["DIFFTEST_SEED"]), int(env["DIFFTEST_FIRST"]), int(env["DIFFTEST_COUNT"])
    report = env.get("DIFFTEST_REPORT")
    dev = await FastDevice.start(dut, mem_size=L.MEM_SIZE)
    dev.checker.stop()
    checker = ProtocolChecker(dut, fail=False)
    opts = model_options(await bridge.bridge(dev.mmio_read32)(regs.CAPS.addr()))
    dma = opts["dma"]
    given = None
    if env.get("DIFFTEST_STREAMS_FILE"):  # hand-made MultiStreams (a pickled list), as the CP campaign's
        from ..streams import file

        given = file.load(env["DIFFTEST_STREAMS_FILE"], "multi")
        first, count = 0, len(given)
    async def one(index: int) -> tuple[dict, str]:
        """Stream `index` on the RTL and the model: its record and (for the report) its story."""
        t0 = time.perf_counter()
        s = given[index] if given is not None else make(seed, index, dma)
        dev.mem_model.configure(**s.mem)
        await dev.reset()
        dev.mem[:] = 0
        box: dict = {}

        def body(d, s=s, box=box):
            try:
                box["obs"] = drive(s, d)
            except Exception as e:  # a driver-visible failure
                box["obs"] = {"checks": [f"driver stopped: {e!r}"]}

        c0 = dev.now()
        await bridge.bridge(body)(dev)
        cycles = dev.now() - c0
        rtl = box["obs"]
        v = checker.read()
        if v is not None:
            rtl.setdefault("checks", []).append(f"AXI protocol checker: {v.message}")
        model, m = run_model(s, **opts)
        diffs = compare(s, rtl, model, dev.mem, m.mem) + expected(s, model)
        rec = record(s, diffs, dev.name, time.perf_counter() - t0, model)
        rec["cycles"] = cycles
        return rec, explain(s, diffs, rtl, model, dev.name) if report else ""

    with open(env["DIFFTEST_OUT"], "a") as out:
        for index in range(first, first + count):
            try:
                rec, story = await one(index)
            except Exception as e:
                if given is None:
                    raise  # a generated stream that cannot run is the generator's bug: loudly
                rec, story = file.unrunnable(given[index], index, dev.name, "multi", e)  # (as the CP's)
            out.write(json.dumps(rec) + "\n")
            out.flush()
            if report:
                with open(report, "a") as f:
                    f.write(story + "\n\n")
    checker.stop()
    dev.close()
