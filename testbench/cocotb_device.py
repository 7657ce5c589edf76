"""The RTL under cocotb as a `kmd_model.device.Device`.

Driver code is ordinary blocking Python. `run_driver(dut, fn)` starts it in a thread with
`cocotb.task.bridge`; each MMIO access or wait inside it becomes a `cocotb.task.resume`
call that runs a coroutine in the scheduler and blocks the driver thread until it
finishes. cocotb never lets the two run at once, so the driver may read and write the
shared memory view freely between calls: the simulator is stopped while it does.

Memory traffic never goes through Python: the memory model's storage is a shared file
mapped by the simulator's C side (testbench/csrc) and by numpy here.
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
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from kmd_model.device import BusError, Device

from .memory import MemoryModel, ProtocolChecker, SharedMemory

T = TypeVar("T")

CLOCK_PERIOD_NS = 10  # 100 MHz: the cycle is the unit everywhere; ns only matter for waves


def design_params() -> dict:
    """HDL parameters of the running design (set by testbench.sim.run)."""
    return json.loads(os.environ.get("GPUCOSIM_PARAMS", "{}"))


class CocotbDevice(Device):
    """The tb_top toplevel (gpu_top + memory model + AXI checker) behind the Device API."""

    def __init__(self, dut, memory: SharedMemory):
        self.dut = dut
        self.name = os.environ.get("GPUCOSIM_SIM", cocotb.SIM_NAME.split()[0].lower())
        self.memory = memory
        self.mem_model = MemoryModel(dut, memory)
        self.checker: ProtocolChecker | None = None  # started after reset
        self.mmio = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        self.mmio.write_if.log.setLevel(logging.WARNING)  # it logs every access at INFO
        self.mmio.read_if.log.setLevel(logging.WARNING)
        self._read = cocotb.task.resume(self._aread)
        self._write = cocotb.task.resume(self._awrite)
        self._wait_irq = cocotb.task.resume(self._await_irq)
        self._delay = cocotb.task.resume(self._adelay)

    @classmethod
    async def start(cls, dut, mem_size: int = 64 << 20, **mem_config) -> "CocotbDevice":
        """Create the shared memory, start the clock, reset the design."""
        memory = SharedMemory(size=mem_size)
        dev = cls(dut, memory)
        dev.mem_model.configure(**mem_config)
        cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start())
        dut.rst.value = 1
        await ClockCycles(dut.clk, 4)
        dut.rst.value = 0
        await ClockCycles(dut.clk, 2)
        dev.checker = ProtocolChecker(dut)
        return dev

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
        """A narrow MMIO write (byte strobes): for testing the register block, not the KMD."""
        cocotb.task.resume(self.mmio.write)(offset, bytes(data))

    def now(self) -> int:
        return int(get_sim_time("ns")) // CLOCK_PERIOD_NS

    def delay(self, cycles: int) -> None:
        if cycles > 0:
            self._delay(cycles)

    # -- coroutines run in the scheduler -------------------------------------------------

    async def _aread(self, offset: int) -> int:
        resp = await self.mmio.read(offset, 4)
        if int(resp.resp) != 0:
            raise BusError("read", offset, int(resp.resp))
        return int.from_bytes(resp.data, "little")

    async def _awrite(self, offset: int, value: int) -> None:
        resp = await self.mmio.write(offset, value.to_bytes(4, "little"))
        if int(resp.resp) != 0:
            raise BusError("write", offset, int(resp.resp))

    async def _await_irq(self, timeout_cycles: int) -> bool:
        await First(RisingEdge(self.dut.irq), ClockCycles(self.dut.clk, timeout_cycles))
        await Timer(1, unit="ps")  # let the edge settle before sampling
        return bool(int(self.dut.irq.value))

    async def _adelay(self, cycles: int) -> None:
        await ClockCycles(self.dut.clk, cycles)

    def close(self) -> None:
        self.memory.close()


async def run_driver(dut, fn: Callable[[CocotbDevice], T], **start_kwargs) -> T:
    """Start the device, run blocking driver code `fn(dev)` against it, return its result."""
    dev = await CocotbDevice.start(dut, **start_kwargs)
    try:
        result = await cocotb.task.bridge(fn)(dev)
        dev.checker.check()
        return result
    finally:
        dev.checker.stop()
        dev.close()
