"""The cocotb side of a campaign: many streams in one simulator process.

`campaign(dut)` (started by tests/difftest/cocotb_difftest.py) reads its job from the environment,
starts the device once, and for each stream: sets the memory model's back-pressure,
pulses the hardware reset (a clean device: registers, counters, the AXI checker),
zeroes memory, runs the stream's driver program on the RTL in a bridge thread, runs it
on a fresh reference model, compares, and appends one JSON line to $DIFFTEST_OUT. The
stream and its model run are usually made ahead, in the process that started this one
(testbench/difftest/simulator/prefetch.py), from the same inputs by the same code.

Environment: DIFFTEST_SEED, DIFFTEST_FIRST, DIFFTEST_COUNT, DIFFTEST_OUT (JSON lines),
DIFFTEST_STEP=1 (lockstep: observe after every ring packet), DIFFTEST_REPORT (a file for
the long story of every stream, for replays), DIFFTEST_STREAMS_FILE (a pickled list of
hand-made Streams to run instead of generated ones: for cutting a failure down),
DIFFTEST_PREFETCH and DIFFTEST_PREFETCH_KEY (the prefetch server's socket and key).
"""

from __future__ import annotations

import json
import os
import time
import traceback
from asyncio import CancelledError

import cocotb
from cocotb.task import Task
from cocotb.triggers import Timer

from testbench.sim import bridge
from testbench.sim.cocotb_device import CLOCK_PERIOD_NS, CocotbDevice
from testbench.memory import ProtocolChecker

from ..campaign import explain, make_stream, read_caps, record, run_model
from ..compare import compare
from ..driver import Observation, execute
from ..streams import layout as L
from .prefetch import Prefetcher


MMIO_TIMEOUT = 10_000  # cycles: an MMIO access that takes longer fails its stream
AHEAD = 2  # streams asked of the prefetch server ahead of the one running
WATCH_PERIOD = MMIO_TIMEOUT // 4  # cycles between the watchdog's looks: a hang is caught within 1.25 x MMIO_TIMEOUT


class MmioTimeout(RuntimeError):
    pass


class FastDevice(CocotbDevice):
    """CocotbDevice whose MMIO accesses time out, so a hung register bus fails one stream,
    not the campaign. When cocotb drives the clock (GPUCOSIM_CLOCK=cocotb) its delays and
    interrupt timeouts are single timers too (ClockCycles wakes Python every cycle, which
    dominated long polls on Icarus); with the HDL clock every wait already is one.

    The timeout is a watchdog, not a race per access: cocotb's with_timeout starts two
    tasks, a timer and an event for every access, which doubled an MMIO access's cost (109
    against 55 us on Verilator with the HDL clock, about 240 accesses a stream). Here each
    trip to the scheduler (one access, or a batch: read_many, write_many) runs in one task
    of its own, and one watchdog task, woken every WATCH_PERIOD cycles, cancels it when its
    current access has been pending MMIO_TIMEOUT cycles or more."""

    mmio_ops = 0
    _pending: Task | None = None  # the trip in flight, run by _guarded
    _since = 0  # the cycle its current access began
    _access = ("", 0)  # and what that access is: ("read" or "write", offset)
    _expired: Task | None = None  # the trip the watchdog cancelled
    _watchdog: Task | None = None

    @classmethod
    async def start(cls, dut, mem_size: int = 64 << 20, **mem_config) -> "FastDevice":
        dev = await super().start(dut, mem_size=mem_size, **mem_config)
        dev._watchdog = cocotb.start_soon(dev._watch())
        return dev

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        super().close()

    async def _watch(self) -> None:
        while True:
            await Timer(WATCH_PERIOD * CLOCK_PERIOD_NS, unit="ns")
            task = self._pending
            if task is not None and self.now() - self._since >= MMIO_TIMEOUT:
                self._expired = task
                task.cancel()

    async def _guarded(self, coro):
        """Run `coro`, whose accesses announce themselves (_timed_read, _timed_write), in
        a task the watchdog may cancel."""
        task = Task(coro)
        self._pending = task
        try:
            return await task
        except CancelledError:
            if self._expired is not task:
                raise  # the caller was cancelled, not the access
            kind, offset = self._access
            raise MmioTimeout(f"MMIO {kind} at {offset:#06x} not answered in {MMIO_TIMEOUT} cycles") from None
        finally:
            self._pending = None

    async def _timed_read(self, offset: int) -> int:
        self._since, self._access = self.now(), ("read", offset)
        return await super()._aread(offset)

    async def _timed_write(self, offset: int, value: int) -> None:
        self._since, self._access = self.now(), ("write", offset)
        await super()._awrite(offset, value)

    def mmio_read32(self, offset: int) -> int:
        self.mmio_ops += 1
        return super().mmio_read32(offset)

    def mmio_write32(self, offset: int, value: int) -> None:
        self.mmio_ops += 1
        super().mmio_write32(offset, value)

    async def _aread(self, offset: int) -> int:
        return await self._guarded(self._timed_read(offset))

    async def _awrite(self, offset: int, value: int) -> None:
        await self._guarded(self._timed_write(offset, value))

    def read_many(self, offsets: list[int]) -> list[int]:
        """Several register reads in one trip to the scheduler (each is still a real
        AXI4-Lite read, in order, at the cycles it would have one by one): half the cost
        of reading them one by one."""
        offsets = list(offsets)
        for offset in offsets:
            self._check_offset(offset)
        self.mmio_ops += len(offsets)
        return bridge.resume(self._aread_many)(offsets)

    async def _aread_many(self, offsets: list[int]) -> list[int]:
        return await self._guarded(self._reads(offsets))

    async def _reads(self, offsets: list[int]) -> list[int]:
        return [await self._timed_read(o) for o in offsets]

    def write_many(self, writes: list[tuple[int, int]]) -> None:
        """Several register writes, (offset, value), in one trip, as read_many."""
        for offset, value in writes:
            self._check_offset(offset)
            self._check_value(value)
        self.mmio_ops += len(writes)
        bridge.resume(self._awrite_many)(list(writes))

    async def _awrite_many(self, writes: list[tuple[int, int]]) -> None:
        await self._guarded(self._writes(writes))

    async def _writes(self, writes: list[tuple[int, int]]) -> None:
        for offset, value in writes:
            await self._timed_write(offset, value)

    def delay_read(self, cycles: int, offset: int) -> int:
        """delay(cycles), then mmio_read32(offset), in one trip (a poll's two)."""
        self._check_offset(offset)
        self.mmio_ops += 1
        return bridge.resume(self._adelay_read)(cycles, offset)

    async def _adelay_read(self, cycles: int, offset: int) -> int:
        if cycles > 0:
            await self._cycles(cycles)
        return await self._guarded(self._timed_read(offset))

    def run_reads(self, program, offset: int):
        """driver.run_reads in one trip: a whole poll, however many reads it takes."""
        self._check_offset(offset)
        return bridge.resume(self._arun_reads)(program, offset)

    async def _arun_reads(self, program, offset: int):
        try:
            cycles = next(program)
            while True:
                if cycles > 0:
                    await self._cycles(cycles)
                self.mmio_ops += 1
                cycles = program.send(await self._guarded(self._timed_read(offset)))
        except StopIteration as e:
            return e.value

    def _cycles(self, cycles: int):
        return super()._cycles(cycles) if self.hdl_clock else Timer(cycles * CLOCK_PERIOD_NS, unit="ns")


async def campaign(dut) -> None:
    env = os.environ
    seed = int(env["DIFFTEST_SEED"])
    first = int(env.get("DIFFTEST_FIRST", "0"))
    count = int(env.get("DIFFTEST_COUNT", "1"))
    step = env.get("DIFFTEST_STEP") == "1"
    report = env.get("DIFFTEST_REPORT")
    dev = await FastDevice.start(dut, mem_size=L.MEM_SIZE)
    dev.checker.stop()
    checker = ProtocolChecker(dut, fail=False)  # a violation is a mismatch of its stream, not a crash
    caps = await bridge.bridge(read_caps)(dev)
    sim = dev.name
    given = None
    if env.get("DIFFTEST_STREAMS_FILE"):
        from ..streams import file

        given = file.load(env["DIFFTEST_STREAMS_FILE"], "cp")
        first, count = 0, len(given)
    end = first + count
    # the model's side of each stream, made ahead by the process that started this one
    # (testbench/difftest/simulator/prefetch.py): two streams ahead, so it has a stream's RTL time
    pre = Prefetcher.connect(caps, step, end, AHEAD) if given is None else None

    async def one(index: int) -> tuple[dict, str]:
        """Stream `index` on the RTL and the model: its record and (for the report) its story."""
        t0 = time.perf_counter()
        ready = pre.take(index, L.MEM_SIZE) if pre is not None else None
        if pre is not None:
            pre.start(index)
        if given is not None:
            stream = given[index]
        elif ready is not None:
            stream = ready[0]
        else:
            stream = make_stream(seed, index, caps)
        t1 = time.perf_counter()
        dev.mem_model.configure(**stream.config.mem)  # the seed takes effect at the reset
        await dev.reset()
        dev.mem[:] = 0
        obs = Observation(sim)
        ops0, cyc0 = dev.mmio_ops, dev.now()

        def drive(d, stream=stream, obs=obs):
            try:
                execute(stream, d, step=step, obs=obs)
            except Exception as e:  # a driver-visible failure (e.g. an MMIO error response)
                obs.checks.append(f"driver stopped: {e!r}")
                obs.checks.append(traceback.format_exc(limit=3).replace("\n", " | "))

        await bridge.bridge(drive)(dev)
        t2 = time.perf_counter()
        v = checker.read()
        if v is not None:
            obs.checks.append(f"AXI protocol checker: {v.message}")
        if ready is not None:
            model, model_mem = ready[1], ready[2]
        else:
            model, m = run_model(stream, caps, step=step)
            model_mem = m.mem
        verdict = compare(stream, obs, model, dev.mem, model_mem)
        rec = record(stream, verdict, sim, time.perf_counter() - t0, obs, model)
        rec["caps"] = caps.__dict__
        rec["mmio"], rec["cycles"] = dev.mmio_ops - ops0, dev.now() - cyc0
        # seconds to get the stream (made here or made ahead), on the RTL, on the model
        # (or only compared, when made ahead)
        rec["t"] = [round(t1 - t0, 4), round(t2 - t1, 4), round(time.perf_counter() - t2, 4)]
        rec["ahead"] = ready is not None
        return rec, explain(stream, verdict, obs, model, sim) if report else ""

    with open(env["DIFFTEST_OUT"], "a") as out:
        for index in range(first, end):
            try:
                rec, story = await one(index)
            except Exception as e:
                if given is None:
                    raise  # a generated stream that cannot run is the generator's bug: loudly
                # a hand-made one (an unknown action, a memory setting the model has not):
                # a failed record naming it, and on to the next
                rec, story = file.unrunnable(given[index], index, sim, "cp", e)
            out.write(json.dumps(rec) + "\n")
            out.flush()
            if report:
                with open(report, "a") as f:
                    f.write(story + "\n\n")
    if pre is not None:
        pre.close()
    checker.stop()
    dev.close()
