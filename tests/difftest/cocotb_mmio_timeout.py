"""cocotb side of tests/difftest/test_difftest.py's test of the campaign's MMIO watchdog
(testbench/difftest/simulator/rtl.py): an access nobody answers fails with MmioTimeout after
MMIO_TIMEOUT cycles, and the device works again after a reset."""

import cocotb
from cocotb.triggers import ClockCycles

from kmd_model import regs
from testbench.sim import bridge
from testbench.difftest.streams import layout as L
from testbench.difftest.campaign import read_caps
from testbench.difftest.simulator.rtl import MMIO_TIMEOUT, WATCH_PERIOD, FastDevice, MmioTimeout


# a broken watchdog fails here instead of simulating forever
@cocotb.test(timeout_time=20 * MMIO_TIMEOUT * 10, timeout_unit="ns")
async def mmio_timeout(dut):
    dev = await FastDevice.start(dut, mem_size=L.MEM_SIZE)
    dev.checker.stop()
    # Held in reset, the MMIO master drops every request and the register block answers none.
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)

    def hang(d):
        t0 = d.now()
        try:
            d.mmio_read32(regs.CAPS.addr())
        except MmioTimeout as e:
            return d.now() - t0, str(e)
        return None

    got = await bridge.bridge(hang)(dev)
    assert got is not None, "a read nobody answers returned"
    waited, msg = got
    assert MMIO_TIMEOUT <= waited <= MMIO_TIMEOUT + WATCH_PERIOD, waited
    assert msg == f"MMIO read at {regs.CAPS.addr():#06x} not answered in {MMIO_TIMEOUT} cycles"
    dut.rst.value = 0
    await dev.reset()
    caps = await bridge.bridge(read_caps)(dev)  # probes the device: registers answer again
    assert caps.ib_levels >= 1
    dev.close()
