"""Run a stream's actions on a Device (the RTL under cocotb or the reference model).

The driver does the same thing on both backends and records what a driver can see
(`Observation`): the registers the spec defines at each `observe` point, every IH entry
it consumed (timestamps zeroed), and `checks`, the invariants that failed on that
backend (a hang, bytes written outside the allowed ranges, the CP not idle soon after an
error, a ring that does not work after recovery). Memory stays in `dev.mem`; the caller
compares it before the next stream reuses the device.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from kmd_model import regs
from kmd_model.device import Device
from kmd_model.mmio import Mmio
from spec import ih as ih_spec
from spec import pm4
from testbench.refmodel import SNAPSHOT_SKIP, RefModel, mem_diff

from .streams import layout as L
from .streams.stream import IDLE_AFTER_ERROR, KMD_TIMEOUT, Stream

M32 = 0xFFFF_FFFF
SETTLE_BUDGET = 200_000  # cycles a settle may take before the driver calls it a hang
ERROR_BUDGET = 100_000  # cycles to wait for an expected CP_ERROR interrupt
_INT_EVENTS = regs.INT_STATUS.EOP.mask | regs.INT_STATUS.CP_ERROR.mask | regs.INT_STATUS.IH_OVERFLOW.mask
_TS = [(4 * ih_spec.BY_NAME["TIMESTAMP_LO"].dword, 4), (4 * ih_spec.BY_NAME["TIMESTAMP_HI"].dword, 2)]


def _observed() -> tuple[list[tuple[str, type, int]], set[str]]:
    """(label, register, index) of every register an observation reads (all readable ones
    but time and cycle counters, as refmodel.snapshot), and the labels of those the
    hardware drives (the rest only echo what the driver wrote: read once, at the end)."""
    every, hw = [], set()
    for reg in regs.REGISTERS:
        if reg.NAME in SNAPSHOT_SKIP or not any(f.sw in ("r", "rw") for f in reg.FIELDS):
            continue
        driven = any(f.sw == "r" and f.hw == "w" or f.onwrite == "woclr" for f in reg.FIELDS)
        for i in range(reg.ARRAY_LEN):
            label = f"{reg.NAME}[{i}]" if reg.ARRAY_LEN > 1 else reg.NAME
            every.append((label, reg, i))
            if driven:
                hw.add(label)
    return every, hw


OBSERVED, HW_DRIVEN = _observed()
_scratch = threading.local()  # StreamDriver.do_mark's buffer


@dataclass
class Observation:
    backend: str
    events: list[tuple[str, dict]] = field(default_factory=list)
    ih: list[dict] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)  # packets the model started (model only)
    idle_after: list[int] = field(default_factory=list)  # cycles from error / soft reset to idle
    status: str = ""  # how the stream ended: "idle", "error CODE", "stuck", "hang"
    marks: list[int] = field(default_factory=list)  # len(trace) at each event

    def to_json(self) -> dict:
        return {"backend": self.backend, "events": self.events, "ih": self.ih, "checks": self.checks,
                "idle_after": self.idle_after, "status": self.status}


def ih_timestamp_ranges(stream: Stream) -> list[tuple[int, int]]:
    """The timestamp bytes of every IH ring slot: they differ between backends by nature."""
    c = stream.config
    if not c.ih_enable:
        return []
    return [(c.ih_base + 32 * k + o, c.ih_base + 32 * k + o + n)
            for k in range(1 << c.ih_log2) for o, n in _TS]


def outside(diffs: list[tuple[int, int]], allowed: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of the byte ranges `diffs` not covered by `allowed`."""
    merged: list[list[int]] = []
    for a, b in sorted(allowed):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    out = []
    for a, b in diffs:
        for x, y in merged:
            if y <= a or x >= b:
                continue
            if x > a:
                out.append((a, x))
            a = max(a, y)
            if a >= b:
                break
        if a < b:
            out.append((a, b))
    return out


_STATUS = regs.STATUS.addr()


def _poll_idle(now, t0: int, limit: int, delay: int, longest: int):
    """A STATUS poll as a program for run_reads: read now, then after `delay` cycles,
    doubling up to `longest`, until IDLE or more than `limit` cycles after `t0`. Returns
    (STATUS, cycles since t0 at that read, idle)."""
    st = yield 0
    while True:
        dt = now() - t0
        if st & regs.STATUS.IDLE.mask:
            return st, dt, True
        if dt > limit:
            return st, dt, False
        st = yield delay
        delay = min(2 * delay, longest)


def run_reads(program, dev: Device, offset: int):
    """Run `program`, a generator that yields the cycles to wait before each read of the
    register at `offset` and is sent what it read; return what it returns. (The cocotb
    backend's run_reads does the same in one trip to the scheduler.)"""
    try:
        cycles = next(program)
        while True:
            dev.delay(cycles)
            cycles = program.send(dev.mmio_read32(offset))
    except StopIteration as e:
        return e.value


class _Writes:
    """Stands for a device under kmd_model's Mmio helpers: keeps the register writes they
    make, (offset, value) in order, to be sent as one batch."""

    def __init__(self):
        self.writes: list[tuple[int, int]] = []

    def mmio_write32(self, offset: int, value: int) -> None:
        self.writes.append((offset, value))


class StreamDriver:
    def __init__(self, stream: Stream, dev: Device, obs: Observation, step: bool = False):
        self.s, self.dev, self.obs, self.step = stream, dev, obs, step
        self.io = Mmio(dev)
        self.c = stream.config
        self.wptr = 0
        self.ih_rptr = 0
        self.mark: np.ndarray | None = None
        self.hung = False
        # Longest pause between STATUS polls: a register read costs ~25 cycles of Verilator
        # time but only ~5 of Icarus time, which simulates slowly.
        self.max_poll = 32 if dev.name == "icarus" else 256
        self.m32 = dev.mem.view("<u4")

    # ------------------------------------------------------------------ helpers

    def status(self) -> dict:
        return self.io.fields(regs.STATUS)

    def status_after(self, cycles: int) -> dict:
        """STATUS read `cycles` from now: in one trip to the scheduler where the device
        offers it (the cocotb backend's delay_read), at the cycles of a delay and a read."""
        delay_read = getattr(self.dev, "delay_read", None)
        if delay_read is None:
            self.dev.delay(cycles)
            return self.status()
        return regs.STATUS.decode(delay_read(cycles, regs.STATUS.addr()))

    def poll_idle(self, t0: int, limit: int, delay: int, longest: int) -> tuple[dict, int, bool]:
        """_poll_idle, run in one trip where the device offers it."""
        program = _poll_idle(self.dev.now, t0, limit, delay, longest)
        run = getattr(self.dev, "run_reads", None)
        st, dt, idle = run(program, _STATUS) if run else run_reads(program, self.dev, _STATUS)
        return regs.STATUS.decode(st), dt, idle

    def write_mem(self, addr: int, dwords) -> None:
        a = np.asarray(dwords, dtype=np.uint32)
        self.dev.mem[addr:addr + 4 * a.size] = a.view(np.uint8)

    def configure(self, window=None) -> None:
        self.dev.mem_model.configure(error_window=window, **self.c.mem)

    def setup(self) -> None:
        c = self.c
        self.configure()
        # About 30 writes with nothing to decide between them: one batch where the device
        # takes one (the cocotb backend: one trip to the scheduler, the same bus cycles).
        rec = _Writes()
        io = Mmio(rec)
        # AMD's units: bases >> 8, the ring in log2 qwords, the IH ring in log2 dwords
        io.write64(regs.RB_BASE_LO, regs.RB_BASE_HI, c.ring_base >> 8)
        io.write_fields(regs.RB_SIZE, LOG2_QWORDS=c.ring_log2 - 1)
        io.write64(regs.RB_RPTR_ADDR_LO, regs.RB_RPTR_ADDR_HI, L.RPTR_WB)
        io.write64(regs.IH_BASE_LO, regs.IH_BASE_HI, c.ih_base >> 8)
        io.write_fields(regs.IH_SIZE, LOG2_DWORDS=c.ih_log2 + 3)
        io.write64(regs.IH_WPTR_ADDR_LO, regs.IH_WPTR_ADDR_HI, L.IH_WPTR_WB)
        io.write_fields(regs.IH_CNTL, ENABLE=int(c.ih_enable), WPTR_WB=int(c.ih_wptr_wb))
        io.write_fields(regs.RB_CNTL, ENABLE=1, RPTR_WB=int(c.rptr_wb))
        io.write_fields(regs.INT_ENABLE, CP_ERROR=1)  # irq = the CP stopped with an error
        # every VMID untranslated, nothing left in the TLB from an earlier stream
        for i in range(regs.VM_CONTEXT_CNTL.ARRAY_LEN):
            io.write(regs.VM_CONTEXT_CNTL, 0, i)
        self.write_all(rec.writes)
        self.invalidate((1 << regs.VM_CONTEXT_CNTL.ARRAY_LEN) - 1)

    def read_all(self, offsets: list[int]) -> list[int]:
        """Register reads, in order: one trip to the scheduler where the device offers it
        (the cocotb backend's read_many, at the cycles of the reads one by one)."""
        many = getattr(self.dev, "read_many", None)
        return many(offsets) if many else [self.dev.mmio_read32(o) for o in offsets]

    def write_all(self, writes: list[tuple[int, int]]) -> None:
        """Register writes (offset, value), in order, as read_all (write_many)."""
        many = getattr(self.dev, "write_many", None)
        if many:
            many(writes)
        else:
            for offset, value in writes:
                self.dev.mmio_write32(offset, value)

    def invalidate(self, vmids: int) -> None:
        """VM_INVALIDATE_REQ for every address of `vmids`; wait for the acknowledge."""
        self.io.write_fields(regs.VM_INVALIDATE_REQ, PER_VMID=vmids, ALL_ADDR=1)
        t0 = self.dev.now()
        while self.io.read(regs.VM_INVALIDATE_ACK) != vmids:
            if self.dev.now() - t0 > 1000:
                self.obs.checks.append(f"no VM_INVALIDATE_ACK for VMIDs {vmids:#x} within 1000 cycles")
                return
            self.dev.delay(2)

    def ring_write(self, dwords: list[int]) -> None:
        n = len(dwords)
        idx = (self.c.ring_base >> 2) + ((self.wptr + np.arange(n, dtype=np.int64)) & (self.c.ring_size - 1))
        self.m32[idx] = np.asarray(dwords, dtype=np.uint32)
        self.wptr = (self.wptr + n) & M32
        self.io.write(regs.RB_DOORBELL, self.wptr)

    def wait_idle(self, budget: int, what: str) -> bool:
        """Poll STATUS until IDLE; False (and a check) after `budget` cycles."""
        if self.hung:
            return bool(self.status()["IDLE"])
        _, _, idle = self.poll_idle(self.dev.now(), budget, 8, self.max_poll)
        if idle:
            return True
        self.hung = True
        self.obs.checks.append(
            f"hang: CP not idle {budget} cycles into {what} (STATUS {self.io.read(regs.STATUS):#x}, "
            f"RB_RPTR {self.io.read(regs.RB_RPTR):#x}, RB_WPTR {self.io.read(regs.RB_WPTR):#x})")
        self.obs.status = "hang"
        return False

    def consume_ih(self, w: int | None = None) -> None:
        """Take the IH entries up to IH_WPTR (read here, or `w`: read just before)."""
        c = self.c
        if not c.ih_enable:
            return
        if w is None:
            w = self.io.read(regs.IH_WPTR)  # bytes, as amdgpu's
        size = ih_spec.ENTRY_BYTES << c.ih_log2
        n = ((w - self.ih_rptr) & M32) // ih_spec.ENTRY_BYTES
        if ih_spec.ENTRY_BYTES * n > size or (w - self.ih_rptr) % ih_spec.ENTRY_BYTES:
            self.obs.checks.append(f"IH_WPTR {w:#x} is {(w - self.ih_rptr) & M32} bytes ahead of IH_RPTR "
                                   f"{self.ih_rptr:#x}: not whole entries within the ring's {size}")
            n = min(n, size // ih_spec.ENTRY_BYTES)
        for k in range(n):
            a = c.ih_base + ((self.ih_rptr + ih_spec.ENTRY_BYTES * k) & (size - 1))
            e = ih_spec.decode(self.m32[a >> 2:(a >> 2) + 8].tolist())
            e["TIMESTAMP_LO"] = e["TIMESTAMP_HI"] = 0
            self.obs.ih.append(e)
        if w != self.ih_rptr:
            self.ih_rptr = w
            self.io.write(regs.IH_RPTR, w)

    def regs_now(self, full: bool, then: tuple[int, ...] = ()) -> tuple[dict, list[int]]:
        """Every register the spec defines (`full`), or those the hardware drives; and the
        registers at offsets `then`, read right after them in the same trip (the model,
        read without spending time, reads none of them: [])."""
        if isinstance(self.dev, RefModel):
            r = self.dev.snapshot(memory=False)["regs"]
            return (r if full else {k: v for k, v in r.items() if k in HW_DRIVEN}), []
        which = [(label, reg.addr(i)) for label, reg, i in OBSERVED if full or label in HW_DRIVEN]
        values = self.read_all([o for _, o in which] + list(then))
        return {label: v for (label, _), v in zip(which, values)}, values[len(which):]

    # ------------------------------------------------------------------ actions

    def run(self) -> Observation:
        self.setup()
        for a in self.s.actions:
            getattr(self, "do_" + a[0])(*a[1:])
        if not self.obs.status:
            st = self.status()
            self.obs.status = "idle" if st["IDLE"] and not st["ERROR"] else f"STATUS {self.io.read(regs.STATUS):#x}"
        return self.obs

    def do_mem(self, addr: int, dwords) -> None:
        self.write_mem(addr, dwords)

    def do_submit(self, dwords: list[int], releases: list) -> None:
        if not self.step:
            self.ring_write(dwords)
            for a in releases:
                getattr(self, "do_" + a[0])(*a[1:])
            return
        # Lockstep: the releases first (a satisfied wait is just a faster wait), then
        # one packet per doorbell, observing everything after each.
        for a in releases:
            getattr(self, "do_" + a[0])(*a[1:])
        mask = self.c.ring_size - 1
        for item in pm4.decode_stream(dwords):
            off = (self.wptr) & mask
            self.ring_write(dwords[item.offset:item.offset + item.length])
            self.wait_idle(SETTLE_BUDGET, "a lockstep packet")
            self.do_observe(f"after RING+{4 * off:#06x} {pm4.describe(item)}")

    def do_doorbell(self, delta: int) -> None:
        self.io.write(regs.RB_DOORBELL, (self.wptr + delta) & M32)

    def do_errwin(self, base: int, limit: int, resp: str) -> None:
        self.configure((base, limit, resp))

    def do_vm(self, vmid: int, root: int) -> None:
        io = self.io
        io.write(regs.VM_CONTEXT_PT_BASE_LO, root & M32 & ~0xFFF, vmid)
        io.write(regs.VM_CONTEXT_PT_BASE_HI, root >> 32, vmid)
        io.write(regs.VM_CONTEXT_CNTL, regs.VM_CONTEXT_CNTL.ENABLE.mask, vmid)
        self.invalidate(1 << vmid)

    def do_pte(self, addr: int, vmid: int) -> None:
        self.write_mem(addr, [0, 0])
        self.invalidate(1 << vmid)

    def do_delay(self, cycles: int) -> None:
        self.dev.delay(cycles)

    def do_settle(self) -> None:
        self.wait_idle(SETTLE_BUDGET, "a settle")
        self.consume_ih()

    def do_mark(self) -> None:
        # Into this thread's one buffer: a fresh 4 MiB copy costs its page faults, ~1.5 ms
        # a stream (a driver runs to its end in one thread before the next starts there).
        buf = getattr(_scratch, "mark", None)
        if buf is None or buf.size != self.dev.mem.size:
            buf = _scratch.mark = np.empty(self.dev.mem.size, dtype=np.uint8)
        np.copyto(buf, self.dev.mem)
        self.mark = buf

    def do_check(self, allowed: list[tuple[int, int]]) -> None:
        diffs = mem_diff(self.mark, self.dev.mem, limit=1 << 20)
        bad = outside(diffs, allowed)
        if bad:
            shown = ", ".join(f"[{a:#x}, {b:#x})" for a, b in bad[:4])
            self.obs.checks.append(f"{sum(b - a for a, b in bad)} byte(s) changed outside the allowed "
                                   f"ranges: {shown}{' ...' if len(bad) > 4 else ''}")

    def _idle_within(self, t0: int, what: str) -> None:
        _, dt, idle = self.poll_idle(t0, 20 * IDLE_AFTER_ERROR, 4, 4)
        if idle:
            self.obs.idle_after.append(dt)
            if dt > IDLE_AFTER_ERROR:
                self.obs.checks.append(f"CP idle only {dt} cycles after {what} (limit {IDLE_AFTER_ERROR})")
            return
        self.obs.checks.append(f"CP not idle {dt} cycles after {what} (STATUS {self.io.read(regs.STATUS):#x})")
        self.hung = True

    def do_expect_error(self) -> None:
        if not self.dev.wait_irq(ERROR_BUDGET):
            st = self.status()
            self.obs.checks.append(f"no CP_ERROR interrupt within {ERROR_BUDGET} cycles "
                                   f"(STATUS IDLE={st['IDLE']} WAITING={st['WAITING']} ERROR={st['ERROR']})")
            self.obs.status = "no CP_ERROR interrupt"
            return
        self._idle_within(self.dev.now(), "the error interrupt")
        code = self.io.fields(regs.CP_ERROR)["CODE"]
        self.obs.status = f"error {regs.CpError(code).name if code in regs.CpError._value2member_map_ else code}"

    def do_stuck(self) -> None:
        """Wait until the CP is idle or has been in one WAIT_REG_MEM for the KMD's timeout.

        One WAIT_REG_MEM: polling (STATUS.WAITING) at both ends of the timeout with the same
        LEVEL, RB_RPTR and dwords parsed (PERF_Q0_DWORDS_FETCHED: a poll parses nothing new,
        any packet after it does), as the KMD's job timer takes progress. LEVEL and RB_RPTR
        alone do not tell two polls of one IB apart (RB_RPTR moves past the INDIRECT_BUFFER
        only when the whole IB has run): on slow memory a CP seen in an IB's first poll and,
        400 cycles on, in a later one, was taken for stuck and soft-reset mid-IB (seed
        20261206's stream 2339)."""
        t0 = self.dev.now()
        d = 4
        st = self.status()
        where = (regs.RB_RPTR.addr(), regs.PERF_Q0_DWORDS_FETCHED.addr())
        while True:
            if st["IDLE"]:
                code = self.io.fields(regs.CP_ERROR)["CODE"]
                self.obs.status = "idle" if not st["ERROR"] else \
                    f"error {regs.CpError(code).name if code in regs.CpError._value2member_map_ else code}"
                return
            if st["WAITING"]:
                at = self.read_all(list(where))
                st2 = self.status_after(KMD_TIMEOUT)
                if st2["WAITING"] and st2["LEVEL"] == st["LEVEL"] and self.read_all(list(where)) == at:
                    self.obs.status = "stuck"
                    return
            if self.dev.now() - t0 > SETTLE_BUDGET:
                self.hung = True
                self.obs.status = "hang"
                self.obs.checks.append(f"hang: CP neither idle nor waiting {SETTLE_BUDGET} cycles after the "
                                       f"submission (STATUS {self.io.read(regs.STATUS):#x})")
                return
            st = self.status_after(d)
            d = min(2 * d, self.max_poll)

    def do_observe(self, label: str) -> None:
        # consume_ih's IH_WPTR read goes with the observation's
        r, then = self.regs_now(full=label == "final", then=(regs.IH_WPTR.addr(),) if self.c.ih_enable else ())
        self.obs.events.append((label, r))
        self.obs.marks.append(len(self.obs.trace))
        self.consume_ih(then[0] if then else None)

    def do_recover(self) -> None:
        """Soft reset; the CP must be idle and clean, and then run a good submission."""
        io = self.io
        self.configure()
        t0 = self.dev.now()
        io.write_fields(regs.CONTROL, SOFT_RESET=1)
        self._idle_within(t0, "the soft reset")
        names = ("CP_ERROR", "STATUS", "RB_RPTR", "RB_WPTR", "IH_WPTR")
        after = dict(zip(names, self.read_all([getattr(regs, n).addr() for n in names])))
        self.obs.events.append(("after soft reset", after))
        self.obs.marks.append(len(self.obs.trace))
        st = regs.STATUS.decode(after["STATUS"])
        if after["CP_ERROR"] or st["ERROR"] or not st["IDLE"] or after["RB_RPTR"] or after["RB_WPTR"] \
                or after["IH_WPTR"]:
            self.obs.checks.append("soft reset did not return the CP to a clean idle state: "
                                   + ", ".join(f"{k} {v:#x}" for k, v in after.items()))
        self.write_all([(regs.INT_STATUS.addr(), _INT_EVENTS), (regs.IH_RPTR.addr(), 0)])
        self.ih_rptr = self.wptr = 0
        v = (0x600D_0000 | self.s.index & 0xFFFF)
        self.ring_write(pm4.write_data(L.RECOVERY, [v])
                        + pm4.release_mem(L.RECOVERY + 8, v ^ M32,
                                          int_sel="SEND_INT" if self.c.ih_enable else "NONE"))
        ok = self.wait_idle(SETTLE_BUDGET, "the submission after recovery")
        self.consume_ih()
        got = (int(self.m32[L.RECOVERY >> 2]), int(self.m32[(L.RECOVERY + 8) >> 2]))
        if not ok or got != (v, v ^ M32) or self.status()["ERROR"]:
            self.obs.checks.append(f"the ring did not work after recovery: wrote {got[0]:#x}, {got[1]:#x}, "
                                   f"expected {v:#x}, {v ^ M32:#x} (STATUS {io.read(regs.STATUS):#x})")


def execute(stream: Stream, dev: Device, *, step: bool = False, obs: Observation | None = None) -> Observation:
    """Run `stream` on `dev` (freshly reset, memory zeroed) and return what was seen."""
    obs = obs or Observation(dev.name)
    return StreamDriver(stream, dev, obs, step).run()
