"""cocotb side of `make bench` (testbench/bench.py): cycle-exact measurements on the RTL.

Each measurement watches the bus signals of tb_top from cocotb; results go to the JSON
file named by $GPUCOSIM_BENCH_OUT. Timing figures are reported, never asserted.
"""

import json
import os
import time

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge

from kmd_model import regs
from spec import pm4
from testbench.cocotb_device import CocotbDevice, design_params, run_driver

RING, RPTR_WB, IH_RING, IH_WB, IB, OUT = 0x10000, 0x8000, 0x20000, 0x8040, 0x30000, 0x40000

RESULTS: dict = {}


def _save():
    path = os.environ.get("GPUCOSIM_BENCH_OUT")
    if path:
        old = json.loads(open(path).read()) if os.path.exists(path) else {}
        old.update(RESULTS)
        with open(path, "w") as f:
            json.dump(old, f, indent=1)


async def _setup(dut) -> CocotbDevice:
    dev = await CocotbDevice.start(dut)
    w = dev.mmio.write

    async def wr(reg, value):
        await w(reg.addr(), int(value).to_bytes(4, "little"))

    await wr(regs.RB_BASE_LO, RING)
    await wr(regs.RB_SIZE, 10)
    await wr(regs.RB_RPTR_ADDR_LO, RPTR_WB)
    await wr(regs.IH_BASE_LO, IH_RING)
    await wr(regs.IH_SIZE, 6)
    await wr(regs.IH_WPTR_ADDR_LO, IH_WB)
    await wr(regs.IH_CNTL, regs.IH_CNTL.ENABLE.put(1) | regs.IH_CNTL.WPTR_WB.put(1))
    await wr(regs.INT_ENABLE, regs.INT_ENABLE.IH_PENDING.put(1))
    await wr(regs.RB_CNTL, regs.RB_CNTL.ENABLE.put(1) | regs.RB_CNTL.RPTR_WB.put(1))
    dev._wr = wr
    return dev


def _put(dev, addr, dwords):
    a = np.asarray(dwords, dtype=np.uint32)
    dev.mem[addr:addr + 4 * a.size] = a.view(np.uint8)


async def _doorbell_accepted(dut, dev, wptr) -> int:
    """Write the doorbell; the cycle count when the AXI-Lite write data was accepted."""
    dev.mmio.init_write(regs.RB_DOORBELL.addr(), int(wptr).to_bytes(4, "little"))
    cycle = 0
    while True:
        await RisingEdge(dut.clk)
        cycle += 1
        if int(dut.s_axil_wvalid.value) and int(dut.s_axil_wready.value):
            return cycle


@cocotb.test()
async def cp_latency(dut):
    """Doorbell → first ring fetch, and submit → irq for an IB holding one RELEASE_MEM."""
    dev = await _setup(dut)
    ib = pm4.release_mem(OUT, 1, data_sel="DATA_32", int_sel="SEND_INT_ON_CONFIRM")
    _put(dev, IB, ib)
    _put(dev, RING, pm4.indirect_buffer(IB, len(ib)))
    await ClockCycles(dut.clk, 10)
    dev.mmio.init_write(regs.RB_DOORBELL.addr(), (4).to_bytes(4, "little"))
    accepted = fetch = irq = None
    for cycle in range(1, 2000):
        await RisingEdge(dut.clk)
        if accepted is None and int(dut.s_axil_wvalid.value) and int(dut.s_axil_wready.value):
            accepted = cycle
        if accepted is not None and fetch is None and int(dut.arvalid.value):
            fetch = cycle
        if accepted is not None and int(dut.irq.value):
            irq = cycle
            break
    RESULTS["cp_doorbell_to_fetch_cycles"] = fetch - accepted
    RESULTS["cp_submit_to_irq_cycles"] = irq - accepted
    RESULTS["bus_bytes"] = design_params()["DATA_WIDTH"] // 8
    _save()


@cocotb.test()
async def driver_batching(dut):
    """1024 small WRITE_DATA commands through the UMD at batch sizes 1, 8 and 64."""

    def body(dev):
        import kmd_model
        import umd

        out = {}
        for batch in (1, 8, 64):
            kmd = kmd_model.bind(dev)
            try:
                gpu = umd.open(api_version=2)
                buf = gpu.alloc(4 * 1024, "gtt")
                q = gpu.queue(flush_threshold=batch)
                s0 = dict(kmd.kmd_stats())
                c0 = dev.now()
                for i in range(1024):
                    q.write(buf, 4 * i, [i])
                q.finish()
                s1 = kmd.kmd_stats()
                assert buf.u32[:1024].tolist() == list(range(1024)), "batched writes lost data"
                out[batch] = {
                    "ioctls_per_cmd": (s1["ioctls"] - s0["ioctls"]) / 1024,
                    "doorbells_per_cmd": (s1["doorbells"] - s0["doorbells"]) / 1024,
                    "cycles": dev.now() - c0,
                }
                gpu.close()
            finally:
                kmd_model.unbind()
        return out

    out = await run_driver(dut, body)
    RESULTS["driver_ioctls_per_cmd"] = {str(b): v["ioctls_per_cmd"] for b, v in out.items()}
    RESULTS["driver_doorbells_per_cmd"] = {str(b): v["doorbells_per_cmd"] for b, v in out.items()}
    RESULTS["driver_cycles_1024_cmds"] = {str(b): v["cycles"] for b, v in out.items()}
    _save()


@cocotb.test()
async def sim_speed_idle(dut):
    """Simulated cycles per wall second with the design idle (the reference for DMA runs)."""
    await _setup(dut)
    n = 200_000
    t0 = time.perf_counter()
    await ClockCycles(dut.clk, n)
    RESULTS["sim_cycles_per_s_idle"] = n / (time.perf_counter() - t0)
    _save()
