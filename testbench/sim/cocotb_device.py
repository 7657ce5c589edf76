"""The RTL under cocotb as a `kmd_model.device.Device`.

Driver code is ordinary blocking Python. `run_driver(dut, fn)` starts it in a greenlet of
the simulator's thread (testbench/sim/bridge.py); each MMIO access or wait inside it switches
to the coroutine that runs it in the scheduler and back when it finishes. The two never
run at once, so the driver may read and write the shared memory view freely between
calls: the simulator is stopped while it does.

Memory traffic never goes through Python: the memory model's storage is a shared file
mapped by the simulator's C side (testbench/sim/csrc) and by numpy here.

Nor does the clock (issue 13): the HDL testbench makes it, and an MMIO access runs in
HDL too (testbench/sim/hdl/mmio_master.v), so between the driver's calls the simulator runs
at its own speed. A delay is one timer, an interrupt wait a timer and the irq line's edge,
an MMIO access one signal write and one wake; each wakes Python at the rising edge where
cocotb's ClockCycles and cocotbext-axi did, before that edge is evaluated, so every cycle
figure is the same as on the path where cocotb drives the clock (GPUCOSIM_CLOCK=cocotb,
kept to measure against).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Callable, TypeVar

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, First, RisingEdge, Timer
from cocotb.utils import get_sim_time

from kmd_model.device import BusError, Device

from ..memory import MemoryModel, ProtocolChecker, SharedMemory
from . import CLOCK_ENV, CLOCK_PERIOD_NS, bridge

T = TypeVar("T")

PERIOD_PS = CLOCK_PERIOD_NS * 1000


def design_params() -> dict:
    """HDL parameters of the running design (set by testbench.sim.run)."""
    return json.loads(os.environ.get("GPUCOSIM_PARAMS", "{}"))


class PortMmio:
    """MMIO through testbench/sim/hdl/mmio_master.v: one signal write per access, one wake at
    its end (the HDL clock's path)."""

    def __init__(self, dut):
        self.cmd = dut.mmio_cmd
        self.resp = dut.mmio_resp
        self.resp_valid = RisingEdge(dut.mmio_resp_valid)
        # mmio_master's registers change at rising edges, so the next edge is always one
        # period away: one Timer, made once (2 of an access's 17 us on Verilator went to
        # making one per access and reading the time for it)
        self.next_edge = Timer(PERIOD_PS, unit="ps")
        self.req = 0
        self.cmd.value = 0  # not X (Icarus): the master takes the request bit's value in reset

    async def access(self, we: int, offset: int, data: int = 0, strb: int = 0xF) -> tuple[int, int]:
        """(response code, read data) of one 32-bit access."""
        self.req ^= 1
        self.cmd.value = self.req << 53 | we << 52 | strb << 48 | offset << 32 | data
        await self.resp_valid
        # The response is taken at the next rising edge: the driver resumes there, before
        # that edge is evaluated, where cocotbext-axi's transaction ended.
        await self.next_edge
        r = self.resp.value.to_unsigned()
        return r >> 32, r & 0xFFFF_FFFF


class AxiLiteMmio:
    """MMIO through cocotbext-axi's AxiLiteMaster, which runs in Python on every edge of
    a transaction (the path where cocotb drives the clock)."""

    def __init__(self, dut):
        from cocotbext.axi import AxiLiteBus, AxiLiteMaster

        self.master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        self.master.write_if.log.setLevel(logging.WARNING)  # it logs every access at INFO
        self.master.read_if.log.setLevel(logging.WARNING)

    async def access(self, we: int, offset: int, data: int = 0, strb: int = 0xF) -> tuple[int, int]:
        if not we:
            r = await self.master.read(offset, 4)
            return int(r.resp), int.from_bytes(r.data, "little")
        lanes = [k for k in range(4) if strb >> k & 1]
        lo, hi = lanes[0], lanes[-1] + 1  # cocotbext-axi writes a byte range: its strobes
        r = await self.master.write(offset + lo, data.to_bytes(4, "little")[lo:hi])
        return int(r.resp), 0


def _to_edge(cycles: int) -> int:
    """Picoseconds from now to the `cycles`-th rising edge from now."""
    t = int(get_sim_time("ps"))
    return (t // PERIOD_PS + cycles) * PERIOD_PS - t


class CocotbDevice(Device):
    """The tb_top toplevel (gpu_top + memory model + AXI checker) behind the Device API."""

    thread_bound = True  # bridge.resume works only in the greenlet run_driver bridged

    def __init__(self, dut, memory: SharedMemory):
        self.dut = dut
        self.name = os.environ.get("GPUCOSIM_SIM", cocotb.SIM_NAME.split()[0].lower())
        # who drives the clock: the HDL testbench, or cocotb (set by testbench.sim.run)
        self.hdl_clock = os.environ.get(CLOCK_ENV, "hdl") == "hdl"
        self.memory = memory
        self.mem_model = MemoryModel(dut, memory)
        self.checker: ProtocolChecker | None = None  # started after reset
        self.mmio = PortMmio(dut) if self.hdl_clock else AxiLiteMmio(dut)
        self._read = bridge.resume(self._aread)
        self._write = bridge.resume(self._awrite)
        self._wait_irq = bridge.resume(self._await_irq)
        self._delay = bridge.resume(self._adelay)

    @classmethod
    async def start(cls, dut, mem_size: int = 64 << 20, **mem_config) -> "CocotbDevice":
        """Create the shared memory, start the clock (unless the HDL makes it), reset the design."""
        memory = SharedMemory(size=mem_size)
        dev = cls(dut, memory)
        dev.mem_model.configure(**mem_config)
        if not dev.hdl_clock:
            cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start())
        await dev.reset()
        dev.checker = ProtocolChecker(dut)
        return dev

    async def reset(self) -> None:
        """Four cycles of reset, then two to come out of it."""
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 4)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    # -- Device API (called from the driver thread) ------------------------------------

    def mmio_read32(self, offset: int) -> int:
        self._check_offset(offset)
        return self._read(offset)

    def mmio_write32(self, offset: int, value: int) -> None:
        self._check_offset(offset)
        self._check_value(value)
        self._write(offset, value)

    @property
    def mem(self) -> np.ndarray:
        return self.memory.view

    def wait_irq(self, timeout_cycles: int) -> bool:
        if int(self.dut.irq.value):
            return True
        if timeout_cycles <= 0:
            return False
        return self._wait_irq(timeout_cycles)

    def mmio_write_bytes(self, offset: int, data: bytes) -> None:
        """A narrow MMIO write (byte strobes): for testing the register block, not the KMD.
        Bytes in several registers are written one register at a time."""
        if offset < 0 or not data:
            raise ValueError(f"a narrow write needs bytes at a non-negative offset, not {offset!r}, {data!r}")
        self._check_mmio_range(offset, len(data))
        bridge.resume(self._awrite_bytes)(offset, bytes(data))

    def now(self) -> int:
        """The simulator's own time in cycles (its clock has a fixed period from time 0)."""
        return int(get_sim_time("ps")) // PERIOD_PS

    def delay(self, cycles: int) -> None:
        if cycles > 0:
            self._delay(cycles)

    # -- coroutines run in the scheduler -------------------------------------------------

    async def _aread(self, offset: int) -> int:
        resp, data = await self.mmio.access(0, offset)
        if resp != 0:
            raise BusError("read", offset, resp)
        return data

    async def _awrite(self, offset: int, value: int) -> None:
        resp, _ = await self.mmio.access(1, offset, value)
        if resp != 0:
            raise BusError("write", offset, resp)

    async def _awrite_bytes(self, offset: int, data: bytes) -> None:
        end = offset + len(data)
        for word in range(offset & ~3, end, 4):
            lo, hi = max(offset, word), min(end, word + 4)
            strb = ((1 << (hi - lo)) - 1) << (lo - word)
            value = int.from_bytes(data[lo - offset:hi - offset], "little") << 8 * (lo - word)
            resp, _ = await self.mmio.access(1, word, value, strb)
            if resp != 0:
                raise BusError("write", word, resp)

    def _cycles(self, cycles: int):
        """A trigger at the `cycles`-th rising edge from now: one timer when the HDL makes
        the clock (it fires at the edge's time, before the edge is evaluated, as ClockCycles
        wakes when cocotb drives the clock), else ClockCycles, which wakes on every edge."""
        if not self.hdl_clock:
            return ClockCycles(self.dut.clk, cycles)
        return Timer(_to_edge(cycles), unit="ps")

    async def _await_irq(self, timeout_cycles: int) -> bool:
        await First(RisingEdge(self.dut.irq), self._cycles(timeout_cycles))
        await Timer(1, unit="ps")  # let the edge settle before sampling
        return bool(int(self.dut.irq.value))

    async def _adelay(self, cycles: int) -> None:
        await self._cycles(cycles)

    def close(self) -> None:
        self.memory.close()


async def run_driver(dut, fn: Callable[[CocotbDevice], T], **start_kwargs) -> T:
    """Start the device, run blocking driver code `fn(dev)` against it, return its result."""
    dev = await CocotbDevice.start(dut, **start_kwargs)
    try:
        result = await bridge.bridge(fn)(dev)
        dev.checker.check()
        return result
    finally:
        dev.checker.stop()
        dev.close()
