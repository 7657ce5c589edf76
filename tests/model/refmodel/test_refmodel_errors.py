"""What stops the reference model's CP, and how it says so (CP_ERROR, STATUS, the IH entry,
then a soft reset that makes the ring work again): malformed packets in the ring and in
IBs, the order the checks are made in, doorbells backwards or past the ring, and bus
errors on every access the CP and the DMA engine make. RING_ERRORS is also a
tests/difftest/scenarios.py scenario, run on the RTL.
"""

from __future__ import annotations

import pytest

from kmd_model import regs
from kmd_model.regs import CpError, IbLevel
from spec import pm4

from .refmodel_helpers import IB1, IB2, IH_RING, OP, OUT, RING, RPTR_WB, WRITE_DATA, Driver, r32, w32


@pytest.fixture
def drv():
    return Driver()


# ---------------------------------------------------------------------------- errors

def bad(name, fields=None, data=(), count=None):
    return pm4.encode_fields(name, fields or {}, data, count=count)


# (packets after a 2-dword NOP at ring offset 0, code, opcode, offset in the ring)
RING_ERRORS = {
    "illegal_opcode": ([pm4.header(0x7B, 1), 0, 0], CpError.ILLEGAL_OPCODE, 0x7B),
    "type0_header": ([0x0000_1234], CpError.ILLEGAL_OPCODE, 0),
    "type1_header": ([0x4000_0000], CpError.ILLEGAL_OPCODE, 0),
    "count_too_small": (bad("WRITE_DATA", {"DST_SEL": 5}, count=2), CpError.BAD_COUNT, OP["WRITE_DATA"]),
    "count_fixed_mismatch": (bad("RELEASE_MEM", count=7) + [0], CpError.BAD_COUNT, OP["RELEASE_MEM"]),
    "past_wptr": ([pm4.header(OP["NOP"], 20), 0], CpError.BAD_COUNT, OP["NOP"]),
    "write_data_dst_sel": (bad("WRITE_DATA", {"DST_SEL": 0, "ADDR_LO": OUT >> 2}, [1]),
                           CpError.UNSUPPORTED, OP["WRITE_DATA"]),
    "write_data_engine": (bad("WRITE_DATA", {"DST_SEL": 5, "ENGINE_SEL": 2, "ADDR_LO": OUT >> 2}, [1]),
                          CpError.UNSUPPORTED, OP["WRITE_DATA"]),
    "write_data_gds": (bad("WRITE_DATA", {"DST_SEL": 3, "ADDR_LO": OUT >> 2}, [1]),
                       CpError.UNSUPPORTED, OP["WRITE_DATA"]),
    "write_data_unsupported_first": (bad("WRITE_DATA", {"DST_SEL": 0}, [1])[:2] + [OUT + 2, 0, 1],
                                     CpError.UNSUPPORTED, OP["WRITE_DATA"]),
    "write_data_misaligned": (pm4.write_data(OUT, [1])[:2] + [OUT + 2] + [0, 1],
                              CpError.FENCE_MISALIGNED, OP["WRITE_DATA"]),
    "ib_misaligned": (pm4.indirect_buffer(IB1, 4)[:1] + [IB1 + 1] + pm4.indirect_buffer(IB1, 4)[2:],
                      CpError.IB_MISALIGNED, OP["INDIRECT_BUFFER"]),
    "ib_size_zero": (bad("INDIRECT_BUFFER", {"IB_BASE_LO": IB1 >> 2, "VALID": 1}),
                     CpError.IB_SIZE_ZERO, OP["INDIRECT_BUFFER"]),
    "ib_chain_before_misaligned": (pm4.indirect_buffer(IB1, 4)[:1] + [IB1 + 1, 0, 4 | 1 << 20],
                                   CpError.UNSUPPORTED, OP["INDIRECT_BUFFER"]),
    "chain_in_ring": (pm4.indirect_buffer(IB1, 4, chain=1), CpError.UNSUPPORTED, OP["INDIRECT_BUFFER"]),
    "wait_function_7": (bad("WAIT_REG_MEM", {"FUNCTION": 7, "MEM_SPACE": 1, "ADDR_LO": OUT >> 2}),
                        CpError.UNSUPPORTED, OP["WAIT_REG_MEM"]),
    "wait_register_space": (bad("WAIT_REG_MEM", {"FUNCTION": 3, "MEM_SPACE": 0, "ADDR_LO": OUT >> 2}),
                            CpError.UNSUPPORTED, OP["WAIT_REG_MEM"]),
    "wait_misaligned": (pm4.wait_reg_mem(OUT, 0, 0, "EQ")[:2] + [OUT + 1] + pm4.wait_reg_mem(OUT, 0, 0, "EQ")[3:],
                        CpError.FENCE_MISALIGNED, OP["WAIT_REG_MEM"]),
    "release_data_sel": (bad("RELEASE_MEM", {"EVENT_INDEX": 5, "DATA_SEL": 5, "ADDR_LO": OUT >> 2}),
                         CpError.UNSUPPORTED, OP["RELEASE_MEM"]),
    "release_int_sel": (bad("RELEASE_MEM", {"EVENT_INDEX": 5, "DATA_SEL": 1, "INT_SEL": 4, "ADDR_LO": OUT >> 2}),
                        CpError.UNSUPPORTED, OP["RELEASE_MEM"]),
    "release_dst_sel_queue": (bad("RELEASE_MEM", {"EVENT_INDEX": 5, "DATA_SEL": 1, "DST_SEL": 2,
                                                  "ADDR_LO": OUT >> 2}), CpError.UNSUPPORTED, OP["RELEASE_MEM"]),
    "wait_register_pfp": (bad("WAIT_REG_MEM", {"FUNCTION": 3, "MEM_SPACE": 0, "ENGINE": 1, "ADDR_LO": OUT >> 2}),
                          CpError.UNSUPPORTED, OP["WAIT_REG_MEM"]),
    "dma_dst_nowhere": (bad("DMA_DATA", {"DST_SEL": 2, "BYTE_COUNT": 16}), CpError.UNSUPPORTED, OP["DMA_DATA"]),
    "release_misaligned_64": (bad("RELEASE_MEM", {"EVENT_INDEX": 5, "DATA_SEL": 2, "ADDR_LO": (OUT + 4) >> 2}),
                              CpError.FENCE_MISALIGNED, OP["RELEASE_MEM"]),
    "release_none_misaligned": (pm4.release_mem(OUT, 1, data_sel="NONE")[:3] + [OUT + 2]
                                + pm4.release_mem(OUT, 1)[4:], CpError.FENCE_MISALIGNED, OP["RELEASE_MEM"]),
    "release_misaligned_32": (pm4.release_mem(OUT, 1)[:3] + [OUT + 2] + pm4.release_mem(OUT, 1)[4:],
                              CpError.FENCE_MISALIGNED, OP["RELEASE_MEM"]),
    "dma_byte_count": (pm4.dma_data(OUT, OUT + 64, 16)[:6] + [(1 << 20) + 1], CpError.DMA_BYTE_COUNT, OP["DMA_DATA"]),
    "dma_src_gds": (bad("DMA_DATA", {"SRC_SEL": 1, "BYTE_COUNT": 16}), CpError.UNSUPPORTED, OP["DMA_DATA"]),
    "dma_bad_count": (bad("DMA_DATA", count=4), CpError.BAD_COUNT, OP["DMA_DATA"]),
}


@pytest.mark.parametrize("case", RING_ERRORS)
def test_packet_errors_in_the_ring(drv, case):
    packet, code, opcode = RING_ERRORS[case]
    drv.submit(pm4.nop(1), packet, pm4.write_data(OUT + 0x80, [1]))
    drv.expect_error(code, IbLevel.RING, opcode, RING + 8, 2)
    assert drv.read(regs.RB_RPTR) == 2, "rptr stays at the faulting packet"
    assert r32(drv.dev, OUT + 0x80) == 0 and r32(drv.dev, OUT) == 0, "nothing after the error runs"
    drv.recover()


def test_bad_count_past_the_end_of_an_ib(drv):
    ib = pm4.nop(1) + pm4.write_data(OUT, [1, 2])
    w32(drv.dev, IB1, ib)
    drv.submit(pm4.indirect_buffer(IB1, len(ib) - 1))
    drv.expect_error(CpError.BAD_COUNT, IbLevel.IB1, OP["WRITE_DATA"], IB1 + 8, 2)
    assert r32(drv.dev, OUT) == 0
    drv.recover()


def test_ib_nesting_and_check_order(drv):
    inner = pm4.nop(1)
    w32(drv.dev, IB1 + 0x800, inner)
    ib2 = pm4.nop(1) + pm4.indirect_buffer(IB1 + 0x800, 2)[:1] + [IB1 + 0x802, 0, 2] \
        + pm4.indirect_buffer(IB1 + 0x800, 2)
    ib1 = pm4.indirect_buffer(IB2, len(ib2))
    w32(drv.dev, IB2, ib2)
    w32(drv.dev, IB1, ib1)
    drv.submit(pm4.indirect_buffer(IB1, len(ib1)))
    # a misaligned base is IB_MISALIGNED even where the nesting is too deep: it is checked first
    drv.expect_error(CpError.IB_MISALIGNED, IbLevel.IB2, OP["INDIRECT_BUFFER"], IB2 + 8, 2)
    assert drv.fields(regs.STATUS)["LEVEL"] == IbLevel.IB2
    drv.recover()
    w32(drv.dev, IB2 + 8, pm4.nop(3))
    drv.submit(pm4.indirect_buffer(IB1, len(ib1)))
    drv.expect_error(CpError.IB_NESTING, IbLevel.IB2, OP["INDIRECT_BUFFER"], IB2 + 24, 6)
    drv.recover()


def test_check_order_opcode_before_count_before_fields(drv):
    drv.submit([pm4.header(0x7B, 0x3FFF)])  # unknown opcode, count far past wptr
    drv.expect_error(CpError.ILLEGAL_OPCODE, IbLevel.RING, 0x7B, RING, 0)
    drv.recover()
    at = drv.wptr
    drv.submit(bad("DMA_DATA", {"SRC_SEL": 1}, count=9))  # a bad count beats UNSUPPORTED
    drv.expect_error(CpError.BAD_COUNT, IbLevel.RING, OP["DMA_DATA"], RING + 4 * at, at)
    drv.recover()


def test_doorbell_errors(drv):
    drv.submit(pm4.nop(2))  # rptr = wptr = 3
    drv.io.write(regs.RB_DOORBELL, 2)
    drv.expect_error(CpError.DOORBELL_BACKWARDS, IbLevel.RING, 0, 2, 3)
    assert drv.read(regs.RB_WPTR) == 3
    drv.io.write(regs.RB_DOORBELL, 10)
    assert drv.error()[0] == CpError.DOORBELL_BACKWARDS, "the first error stays latched"
    assert drv.read(regs.RB_WPTR) == 3, "doorbells are ignored while stopped"
    drv.recover()
    drv.io.write(regs.RB_DOORBELL, 5 + 256 + 1)  # rptr 5: one dword too many
    drv.expect_error(CpError.DOORBELL_OVERFLOW, IbLevel.RING, 0, 5 + 257, 5)
    drv.recover()
    drv.io.write(regs.RB_DOORBELL, 5 + 0x8000_0000)  # backwards in int32 terms
    drv.expect_error(CpError.DOORBELL_BACKWARDS, IbLevel.RING, 0, 5 + 0x8000_0000, 5)


def test_doorbell_full_ring_is_fine():
    d = Driver(ring_log2=3)
    d.submit(pm4.nop(7))  # exactly the ring size
    assert d.read(regs.RB_RPTR) == 8 and d.error()[0] == 0


def test_bus_error_on_a_write(drv):
    drv.dev.configure(error_window=(OUT + 0x20, OUT + 0x28, "SLVERR"), rd_latency=30, stall={"r": 0.5})
    data = list(range(1, 17))  # OUT+0x10 .. OUT+0x50: blocks 0x00, 0x20, 0x40
    drv.submit(pm4.nop(1), pm4.write_data(OUT + 0x10, data))
    drv.expect_error(CpError.BUS_SLVERR, IbLevel.RING, OP["WRITE_DATA"], OUT + 0x20, 2)
    assert r32(drv.dev, OUT + 0x10, 16) == [1, 2, 3, 4, 0, 0, 7, 8, 9, 10, 11, 12, 0, 0, 0, 0]
    assert drv.perf(WRITE_DATA) == 1, "it started executing"
    assert drv.read(regs.PERF_DWORDS_FETCHED) == 2 + 4 + 12
    drv.dev.configure(error_window=None)
    drv.recover()


def test_bus_errors_on_fetch(drv):
    # A payload dword of an IB packet in a SLVERR window: ADDR is that dword, OFFSET its header.
    ib = pm4.nop(1) + pm4.write_data(OUT, [1, 2])
    w32(drv.dev, IB1, ib)
    drv.dev.configure(error_window=(IB1 + 16, IB1 + 24, "SLVERR"))
    drv.submit(pm4.indirect_buffer(IB1, len(ib)))
    drv.expect_error(CpError.BUS_SLVERR, IbLevel.IB1, OP["WRITE_DATA"], IB1 + 16, 2)
    assert drv.read(regs.PERF_DWORDS_FETCHED) == 4 + 2 + 3, "the faulting dword was consumed"
    drv.dev.configure(error_window=None)
    drv.recover()
    # An IB beyond the memory: its header fetch answers DECERR.
    far = 1 << 40
    drv.submit(pm4.indirect_buffer(far, 8))
    drv.expect_error(CpError.BUS_DECERR, IbLevel.IB1, 0, far, 0)  # no header, no opcode
    drv.recover()


def test_prefetch_past_the_packet_does_not_fault(drv):
    drv.dev.configure(error_window=(RING + 24, RING + 0x1000, "DECERR"))
    drv.submit(pm4.write_data(OUT, [5]))  # 5 dwords; the window starts 1 dword after
    assert r32(drv.dev, OUT) == 5 and drv.error()[0] == 0


def test_bus_error_on_a_poll_and_on_a_fence(drv):
    drv.dev.configure(error_window=(OUT + 0x100, OUT + 0x108, "DECERR"))
    drv.submit(pm4.wait_reg_mem(OUT + 0x104, 0, 0, "ALWAYS"))
    drv.expect_error(CpError.BUS_DECERR, IbLevel.RING, OP["WAIT_REG_MEM"], OUT + 0x104, 0)
    drv.recover()
    at = drv.wptr
    drv.submit(pm4.release_mem(OUT + 0x100, 1, data_sel="DATA_64", int_sel="SEND_INT"))
    drv.expect_error(CpError.BUS_DECERR, IbLevel.RING, OP["RELEASE_MEM"], OUT + 0x100, at)
    assert drv.fields(regs.INT_STATUS)["EOP"] == 0, "no interrupt for a fence that was not written"
    drv.recover()


def test_bus_error_while_waiting(drv):
    drv.submit(pm4.wait_reg_mem(OUT, 1, 1, "EQ", poll_interval=10))
    drv.dev.configure(error_window=(OUT, OUT + 8, "SLVERR"))
    drv.dev.delay(10)
    drv.expect_error(CpError.BUS_SLVERR, IbLevel.RING, OP["WAIT_REG_MEM"], OUT, 0)
    drv.dev.configure(error_window=None)
    drv.recover()


def test_bus_error_on_rptr_writeback(drv):
    drv.dev.configure(error_window=(RPTR_WB, RPTR_WB + 8, "SLVERR"))
    drv.submit(pm4.nop(2), pm4.nop(1))
    drv.expect_error(CpError.BUS_SLVERR, IbLevel.RING, OP["NOP"], RPTR_WB, 0)
    assert drv.read(regs.RB_RPTR) == 3, "rptr moved before its write-back failed"
    drv.dev.configure(error_window=None)
    drv.recover()


def test_bus_error_on_rptr_writeback_after_an_ib(drv):
    ib = pm4.write_data(OUT, [1])
    w32(drv.dev, IB1, ib)
    drv.submit(pm4.nop(1))
    drv.dev.configure(error_window=(RPTR_WB, RPTR_WB + 8, "SLVERR"))
    drv.submit(pm4.indirect_buffer(IB1, len(ib)))
    # the write-back belongs to the ring's INDIRECT_BUFFER packet, which has just finished
    drv.expect_error(CpError.BUS_SLVERR, IbLevel.RING, OP["INDIRECT_BUFFER"], RPTR_WB, 2)
    assert drv.read(regs.RB_RPTR) == 6 and r32(drv.dev, OUT) == 1
    assert drv.fields(regs.STATUS)["LEVEL"] == IbLevel.RING


def test_halted_reads_0_once_an_error_stopped_the_cp(drv):
    drv.io.write_fields(regs.CONTROL, HALT=1)
    drv.io.write(regs.RB_DOORBELL, 1000)
    st = drv.fields(regs.STATUS)
    assert (st["HALTED"], st["ERROR"], st["IDLE"]) == (0, 1, 1)


def test_bus_error_on_the_ih_ring(drv):
    drv.dev.configure(error_window=(IH_RING, IH_RING + 32, "SLVERR"))
    drv.submit(pm4.release_mem(OUT, 1, int_sel="SEND_INT"))
    assert r32(drv.dev, OUT) == 1
    assert drv.error() == (CpError.BUS_SLVERR, IbLevel.RING, OP["RELEASE_MEM"], IH_RING, 0)
    assert drv.read(regs.IH_WPTR) == 0, "the error entry could not be written either"
    assert drv.fields(regs.INT_STATUS)["CP_ERROR"] == 1
    drv.dev.configure(error_window=None)
    drv.recover()


def test_dma_byte_count():
    d = Driver(dma=True, dma_max_bytes=4096)
    d.submit(pm4.nop(1), pm4.dma_data(OUT, OUT + 0x1000, 4097))
    d.expect_error(CpError.DMA_BYTE_COUNT, IbLevel.RING, OP["DMA_DATA"], RING + 8, 2)
    d.recover()


def test_dma_bus_error():
    d = Driver(dma=True)
    d.dev.configure(error_window=(OUT + 0x100, OUT + 0x200, "SLVERR"))
    d.dev.mem[OUT:OUT + 0x400] = 0xEE
    d.submit(pm4.dma_data(OUT + 0x1000, OUT + 0xF0, 0x40))
    d.expect_error(CpError.BUS_SLVERR, IbLevel.RING, OP["DMA_DATA"], OUT + 0x100, 0)
    assert d.dev.mem[OUT + 0x1000:OUT + 0x1010].tolist() == [0xEE] * 16
    assert d.dev.mem[OUT + 0x1010] == 0



@pytest.mark.parametrize("kind", ["write", "fence", "poll"])
def test_a_translated_address_above_the_bus_is_decerr_not_a_vm_fault(kind):
    """A WRITE_DATA, RELEASE_MEM or WAIT_REG_MEM in an IB of a translated VMID whose address
    is a mapped page's with bit 52 set: the CP answers BUS_DECERR at the low 48 bits before
    the MMU sees the address, as the RTL does (tests/difftest/scenarios.py
    *_above_bus_translated, on both simulators); the model gave a VM fault (RANGE). Nothing
    is written, no VM fault is latched, the IB's packet before it ran."""
    from tests.difftest.scenarios import SCEN
    from tests.model.refmodel.register_checks import PT_VMID

    d = Driver()
    SCEN[f"{kind}_above_bus_translated"](d)
    opcode, off = {"write": ("WRITE_DATA", 0x10), "fence": ("RELEASE_MEM", 0x20), "poll": ("WAIT_REG_MEM", 0x30)}[kind]
    d.expect_error(CpError.BUS_DECERR, IbLevel.IB1, OP[opcode], OUT + off, 5)  # after the 5-dword WRITE_DATA
    assert list(r32(d.dev, OUT + 0x60, 2)) == [0x11, 0]
    assert list(r32(d.dev, OUT + 0x10, 4)) == [0, 0, 0, 0]
    assert d.read(regs.VM_FAULT_STATUS) == 0 and d.read(regs.VM_FAULT_ADDR_LO) == 0
    assert d.ih_entries()[-1]["VMID"] == PT_VMID
