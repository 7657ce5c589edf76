import cocotb
from testbench.cocotb_device import run_driver
from tests.test_refmodel import Driver, r32, OUT, IB1
from kmd_model import regs
from spec import pm4


@cocotb.test()
async def smoke(dut):
    def body(dev):
        d = Driver(dev)
        d.submit(pm4.write_data(OUT, [0x11111111, 0x22222222, 0x33333333]))
        for _ in range(100):
            if d.fields(regs.STATUS)["IDLE"]:
                break
            dev.delay(10)
        dut._log.info("status %s rptr %d wptr %d err %s", d.fields(regs.STATUS), d.read(regs.RB_RPTR), d.read(regs.RB_WPTR), d.error())
        dut._log.info("mem %s", [hex(x) for x in r32(dev, OUT, 3)])
        assert r32(dev, OUT, 3) == [0x11111111, 0x22222222, 0x33333333]
        # IB + fence
        from tests.test_refmodel import w32
        w32(dev, IB1, pm4.write_data(OUT + 0x100, [0xABCD]))
        d.submit(pm4.indirect_buffer(IB1, 5), pm4.release_mem(OUT + 0x200, 7, int_sel="SEND_INT_ON_CONFIRM"))
        for _ in range(100):
            if d.fields(regs.STATUS)["IDLE"]:
                break
            dev.delay(10)
        dut._log.info("status %s err %s ih %s", d.fields(regs.STATUS), d.error(), d.ih_entries())
        assert r32(dev, OUT + 0x100) == 0xABCD
        assert r32(dev, OUT + 0x200) == 7
    await run_driver(dut, body)
