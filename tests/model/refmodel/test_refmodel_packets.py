"""The reference model's CP running well-formed packets, driven as a driver would
(tests/model/refmodel/refmodel_helpers.py: Driver): NOP and fillers, WRITE_DATA, the ring's wrap, IBs
and CHAIN, WAIT_REG_MEM, RELEASE_MEM and the IH ring, HALT, the performance counters,
the trace, and DMA_DATA on the DMA engine. What stops the CP is in
tests/model/refmodel/test_refmodel_errors.py.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from kmd_model import regs
from kmd_model.mmio import Mmio
from kmd_model.regs import IbLevel
from spec import pm4
from testbench.refmodel import RefModel

from .refmodel_helpers import (
    DMA_DATA, IB1, IH_RING, IH_WPTR_WB, INDIRECT_BUFFER, NOP, OUT, RELEASE_MEM, RPTR_WB, WAIT_REG_MEM, WRITE_DATA,
    Driver, r32, submit_ibs_and_chains, w32,
)


@pytest.fixture
def drv():
    return Driver()


# ---------------------------------------------------------------------------- packets

def test_nop_filler_and_rptr_writeback(drv):
    drv.submit(pm4.nop(2), [pm4.TYPE2_FILLER], [pm4.TYPE2_FILLER], pm4.write_data(OUT, [1, 2]))
    assert r32(drv.dev, OUT, 2) == [1, 2]
    assert drv.read(regs.RB_RPTR) == drv.read(regs.RB_WPTR) == 11
    assert r32(drv.dev, RPTR_WB) == 11
    assert (drv.perf(NOP), drv.perf(WRITE_DATA)) == (3, 1)  # fillers count as NOPs
    assert drv.read(regs.PERF_DWORDS_FETCHED) == 11
    st = drv.fields(regs.STATUS)
    assert (st["IDLE"], st["RB_EMPTY"], st["HALTED"], st["ERROR"], st["LEVEL"]) == (1, 1, 0, 0, 0)


def test_write_data_many_dwords():
    drv = Driver(ring_log2=13)
    data = np.arange(5000, dtype=np.uint32) * 0x01010101
    drv.submit(pm4.write_data(OUT + 4, data))
    assert np.array_equal(drv.dev.mem[OUT + 4:OUT + 4 + 4 * 5000].view("<u4"), data)
    assert r32(drv.dev, OUT) == 0 and r32(drv.dev, OUT + 4 * 5001) == 0
    assert drv.read(regs.PERF_DWORDS_FETCHED) == 5004


def test_packet_straddling_the_ring_wrap():
    d = Driver(ring_log2=4)
    d.submit(pm4.nop(13))  # 14 dwords: the next packet starts 2 dwords before the end
    d.submit(pm4.write_data(OUT, [0xAAAA, 0xBBBB]))  # 6 dwords: 2 at the end, 4 at the start
    assert r32(d.dev, OUT, 2) == [0xAAAA, 0xBBBB]
    assert d.read(regs.RB_RPTR) == 20 and r32(d.dev, RPTR_WB) == 20
    d.submit(pm4.release_mem(OUT + 8, 7))  # the ring keeps working after the wrap
    assert r32(d.dev, OUT + 8) == 7 and d.read(regs.RB_RPTR) == 28

def test_two_level_ibs_and_chain(drv):
    dev = drv.dev
    submit_ibs_and_chains(drv)
    assert r32(dev, OUT, 8) == [1, 2, 3, 0, 4, 5, 6, 7]
    assert r32(dev, OUT + 0x100) == 0, "the rest of an IB after a CHAIN never runs"
    assert drv.perf(INDIRECT_BUFFER) == 5 and drv.perf(WRITE_DATA) == 7
    assert drv.read(regs.RB_RPTR) == 4 + 5
    assert drv.fields(regs.STATUS)["LEVEL"] == IbLevel.RING
    # ring 9 + IB1 up to the CHAIN (5+4+5+4) + IB2 5 + IB1b 9 + IB2b 9 + IB2c 5
    assert drv.read(regs.PERF_DWORDS_FETCHED) == 9 + 18 + 5 + 9 + 9 + 5


def test_rptr_moves_past_an_ib_only_when_it_has_run(drv):
    ib = pm4.wait_reg_mem(OUT, 1, 0xFFFF_FFFF, "EQ", poll_interval=4) + pm4.write_data(OUT + 4, [9])
    w32(drv.dev, IB1, ib)
    drv.submit(pm4.nop(1), pm4.indirect_buffer(IB1, len(ib)))
    st = drv.fields(regs.STATUS)
    assert (st["WAITING"], st["LEVEL"], st["IDLE"], st["RB_EMPTY"]) == (1, IbLevel.IB1, 0, 0)
    assert drv.read(regs.RB_RPTR) == 2 and r32(drv.dev, RPTR_WB) == 2
    assert drv.perf(WAIT_REG_MEM) == 1, "counted when it starts"
    w32(drv.dev, OUT, [1])
    drv.dev.delay(4)
    assert r32(drv.dev, OUT + 4) == 9
    assert drv.read(regs.RB_RPTR) == 6 and r32(drv.dev, RPTR_WB) == 6
    assert drv.fields(regs.STATUS)["LEVEL"] == IbLevel.RING


def test_wait_reg_mem_released_by_a_later_cpu_write(drv):
    dev = drv.dev
    w32(dev, OUT, [0xABCD_0000])
    drv.submit(pm4.wait_reg_mem(OUT, 0x1234, 0xFFFF, "EQ", poll_interval=100),
               pm4.release_mem(OUT + 8, 0, data_sel="TIMESTAMP"))
    t0 = dev.now()  # the doorbell's time: the first poll
    assert drv.fields(regs.STATUS)["WAITING"] == 1
    w32(dev, OUT, [0xABCD_1234])  # high bits are masked off
    dev.delay(t0 + 99 - dev.now())
    assert r32(dev, OUT + 8, 2) == [0, 0], "released before the next poll"
    dev.delay(1)
    assert r32(dev, OUT + 8, 2) == [t0 + 100, 0], "released at the poll after the write"
    st = drv.fields(regs.STATUS)
    assert (st["WAITING"], st["IDLE"]) == (0, 1)
    assert drv.read(regs.RB_RPTR) == 15
    # busy: the cycles STATUS.IDLE was 0; no stalls, the model's memory answers at once
    assert (drv.read(regs.PERF_BUSY_CYCLES), drv.read(regs.PERF_STALL_CYCLES)) == (100, 0)
    assert drv.perf(WAIT_REG_MEM) == 1


WAITS = {  # function: (reference, a value that makes the wait block, one that releases it)
    "LT": (0x1234, 0x1234, 0x1233),
    "LE": (0x1234, 0x1235, 0x1234),
    "EQ": (0x1234, 0x1235, 0x1234),
    "NE": (0x1234, 0x1234, 0x1235),
    "GE": (0x1234, 0x1233, 0x1234),
    "GT": (0x1234, 0x1234, 0x1235),
}


@pytest.mark.parametrize("function", WAITS)
def test_wait_reg_mem_functions(drv, function):
    ref, blocks, releases = WAITS[function]
    w32(drv.dev, OUT, [0xFFFF_0000 | blocks])
    drv.submit(pm4.wait_reg_mem(OUT, ref, 0xFFFF, function, poll_interval=0), pm4.write_data(OUT + 4, [1]))
    assert drv.fields(regs.STATUS)["WAITING"] == 1 and r32(drv.dev, OUT + 4) == 0
    w32(drv.dev, OUT, [0xFFFF_0000 | releases])
    drv.dev.delay(1)  # POLL_INTERVAL 0 polls every cycle
    assert r32(drv.dev, OUT + 4) == 1
    assert drv.fields(regs.STATUS)["WAITING"] == 0


def test_wait_reg_mem_always_and_unsigned(drv):
    w32(drv.dev, OUT, [0x8000_0000])
    drv.submit(pm4.wait_reg_mem(OUT, 0x1234, 0, "ALWAYS"),
               pm4.wait_reg_mem(OUT, 0x7FFF_FFFF, 0xFFFF_FFFF, "GT"),
               pm4.write_data(OUT + 4, [1]))
    assert r32(drv.dev, OUT + 4) == 1 and drv.perf(WAIT_REG_MEM) == 2


def test_wait_irq_runs_time_to_a_release(drv):
    dev = drv.dev
    drv.io.write_fields(regs.INT_ENABLE, EOP=1)
    drv.submit(pm4.wait_reg_mem(OUT, 1, 1, "EQ", poll_interval=50),
               pm4.release_mem(OUT + 8, 0x55, int_sel="SEND_INT_ON_CONFIRM"))
    t0 = dev.now()
    assert not dev.wait_irq(1000) and dev.now() == t0 + 1000, "nothing can release the wait"
    w32(dev, OUT, [1])
    assert dev.wait_irq(1000)
    assert dev.now() == t0 + 1050 and r32(dev, OUT + 8) == 0x55


def test_release_mem_and_ih(drv):
    dev = drv.dev
    drv.io.write_fields(regs.INT_ENABLE, EOP=1)
    drv.submit(pm4.release_mem(OUT, 0x1111_2222),
               pm4.release_mem(OUT + 8, 0x3333_4444_5555_6666, data_sel="DATA_64"))
    assert r32(dev, OUT, 4) == [0x1111_2222, 0, 0x5555_6666, 0x3333_4444]
    assert not dev.irq_level() and drv.read(regs.IH_WPTR) == 0
    dev.delay(123)
    drv.submit(pm4.release_mem(OUT + 16, 0, data_sel="TIMESTAMP", int_sel="SEND_INT_ON_CONFIRM",
                               int_ctxid=0xC0DE))
    t = dev.now()
    assert r32(dev, OUT + 16, 2) == [t, 0]
    assert dev.irq_level() and dev.wait_irq(10)
    assert drv.fields(regs.INT_STATUS) == {"IH_PENDING": 1, "EOP": 1, "CP_ERROR": 0, "IH_OVERFLOW": 0}
    assert drv.read(regs.IH_WPTR) == 32 and r32(dev, IH_WPTR_WB) == 32  # bytes, as amdgpu's
    [e] = drv.ih_entries()
    # AMD's soc15 entry: client GRBM_CP (0x14), source CP_EOP_INTERRUPT (181), context id in
    # src_data[0]
    assert e == {"CLIENT_ID": 0x14, "SOURCE_ID": 181, "RING_ID": 0, "VMID": 0, "VMID_SRC": 0,
                 "TIMESTAMP_LO": t, "TIMESTAMP_HI": 0, "TIMESTAMP_SRC": 0, "PASID": 0,
                 "DATA0": 0xC0DE, "DATA1": 0, "DATA2": 0, "DATA3": OUT + 16}
    assert r32(dev, IH_RING) == 0x0000B514
    # Interrupt only (no data): INT_SEL SEND_INT.
    drv.submit(pm4.release_mem(OUT + 24, 0xF00D, data_sel="NONE", int_sel="SEND_INT", int_ctxid=2))
    assert r32(dev, OUT + 24) == 0
    e = drv.ih_entries()[1]
    assert (e["DATA0"], e["DATA1"], e["DATA3"]) == (2, 0xF00D, OUT + 24)
    # SEND_DATA_ON_CONFIRM (Mesa's EOP_INT_SEL_SEND_DATA_AFTER_WR_CONFIRM): data, no interrupt
    drv.submit(pm4.release_mem(OUT + 28, 0xBEEF, int_sel="SEND_DATA_ON_CONFIRM", int_ctxid=3))
    assert r32(dev, OUT + 28) == 0xBEEF and len(drv.ih_entries()) == 2
    # Consuming the entries drops IH_PENDING; EOP stays until cleared.
    drv.io.write(regs.IH_RPTR, 64)
    assert drv.fields(regs.INT_STATUS)["IH_PENDING"] == 0 and dev.irq_level()
    drv.io.write(regs.INT_STATUS, regs.INT_STATUS.EOP.put(1))
    assert not dev.irq_level()
    assert drv.perf(RELEASE_MEM) == 5


def test_irq_follows_ih_pending_only(drv):
    drv.io.write_fields(regs.INT_ENABLE, IH_PENDING=1)
    drv.submit(pm4.release_mem(OUT, 1, int_sel="SEND_INT"))
    assert drv.dev.irq_level()
    drv.io.write(regs.IH_RPTR, drv.read(regs.IH_WPTR))
    assert not drv.dev.irq_level()


def test_ih_overflow_and_disabled_ih():
    d = Driver(ih_log2=0)  # room for one entry
    d.submit(pm4.release_mem(OUT, 1, int_sel="SEND_INT"), pm4.release_mem(OUT + 4, 2, int_sel="SEND_INT"))
    assert r32(d.dev, OUT, 2) == [1, 2]
    assert d.read(regs.IH_WPTR) == 32
    assert d.fields(regs.INT_STATUS) == {"IH_PENDING": 1, "EOP": 1, "CP_ERROR": 0, "IH_OVERFLOW": 1}
    assert d.ih_entries()[0]["DATA1"] == 1
    d.io.write(regs.IH_RPTR, 32)
    d.submit(pm4.release_mem(OUT + 8, 3, int_sel="SEND_INT"))  # the ring wraps onto the same slot
    assert d.read(regs.IH_WPTR) == 64 and r32(d.dev, IH_RING + 20) == 3
    d.io.write(regs.IH_CNTL, 0)
    d.submit(pm4.release_mem(OUT + 12, 4, int_sel="SEND_INT"))
    assert d.read(regs.IH_WPTR) == 64 and r32(d.dev, OUT + 12) == 4


def test_ih_size_below_one_entry_is_one_entry():
    d = Driver(ih_log2=0)
    d.io.write_fields(regs.IH_SIZE, LOG2_DWORDS=0)  # 1 dword: smaller than an entry
    d.submit(pm4.release_mem(OUT, 1, int_sel="SEND_INT"), pm4.release_mem(OUT + 4, 2, int_sel="SEND_INT"))
    assert d.read(regs.IH_WPTR) == 32 and d.fields(regs.INT_STATUS)["IH_OVERFLOW"] == 1
    assert r32(d.dev, IH_RING + 32, 8) == [0] * 8, "nothing past the one entry"


def test_halt(drv):
    drv.io.write_fields(regs.CONTROL, HALT=1)
    assert drv.fields(regs.STATUS)["HALTED"] == 1
    drv.submit(pm4.write_data(OUT, [1]))
    st = drv.fields(regs.STATUS)
    assert (st["HALTED"], st["IDLE"], st["RB_EMPTY"]) == (1, 0, 0)
    assert r32(drv.dev, OUT) == 0 and drv.read(regs.RB_RPTR) == 0
    drv.io.write(regs.CONTROL, 0)
    assert r32(drv.dev, OUT) == 1 and drv.read(regs.RB_RPTR) == 5
    assert drv.fields(regs.STATUS)["HALTED"] == 0
    # HALT lets a WAIT_REG_MEM in progress finish, then stops before the next packet.
    drv.submit(pm4.wait_reg_mem(OUT + 8, 1, 1, "EQ", poll_interval=1), pm4.write_data(OUT + 4, [2]))
    drv.io.write_fields(regs.CONTROL, HALT=1)
    assert drv.fields(regs.STATUS)["HALTED"] == 0, "still waiting"
    w32(drv.dev, OUT + 8, [1])
    drv.dev.delay(1)
    st = drv.fields(regs.STATUS)
    assert (st["HALTED"], st["WAITING"]) == (1, 0) and r32(drv.dev, OUT + 4) == 0
    drv.io.write(regs.CONTROL, 0)
    assert r32(drv.dev, OUT + 4) == 2


def test_doorbell_ignored_while_ring_disabled():
    dev = RefModel()
    io = Mmio(dev)
    io.write(regs.RB_DOORBELL, 5)
    assert io.read(regs.RB_WPTR) == 0 and io.read(regs.RB_DOORBELL) == 0


def test_perf_counters_clear_and_soft_reset(drv):
    drv.submit(pm4.nop(1), pm4.write_data(OUT, [1]), pm4.release_mem(OUT + 8, 1))
    assert [drv.perf(i) for i in range(8)] == [1, 1, 0, 0, 1, 0, 0, 0]
    assert drv.read(regs.PERF_DWORDS_FETCHED) == 2 + 5 + 8
    drv.io.write_fields(regs.CONTROL, SOFT_RESET=1)
    assert drv.read(regs.PERF_DWORDS_FETCHED) == 15, "soft reset keeps the counters"
    drv.io.write_fields(regs.CONTROL, PERF_CLEAR=1)
    assert [drv.perf(i) for i in range(8)] == [0] * 8 and drv.read(regs.PERF_DWORDS_FETCHED) == 0


def test_trace():
    lines = []
    d = Driver(trace=lines.append)
    ib = pm4.write_data(OUT, [1]) + [pm4.TYPE2_FILLER]
    w32(d.dev, IB1, ib)
    d.submit(pm4.indirect_buffer(IB1, len(ib)), pm4.release_mem(OUT, 1, int_sel="SEND_INT_ON_CONFIRM"))
    assert lines == [
        "RING+0x0000: INDIRECT_BUFFER  base=0x00050000 size_dw=6",
        "IB1+0x0000: WRITE_DATA  addr=0x00040000 data=[0x00000001]",
        "IB1+0x0014: TYPE2 FILLER",
        "RING+0x0010: RELEASE_MEM  int_sel=SEND_INT_ON_CONFIRM addr=0x00040000 data=0x00000001",
    ]


# ---------------------------------------------------------------------------- DMA (dma=True)

def test_dma_copy_and_fill():
    d = Driver(dma=True)
    dev = d.dev
    src = np.arange(1000, dtype=np.uint8) * 7 % 251
    dev.mem[OUT + 3:OUT + 1003] = src
    d.submit(pm4.dma_data(OUT + 0x2001, OUT + 3, 1000),
             pm4.dma_data(OUT + 0x3002, 0xA1B2C3D4, 7, src_sel="DATA"),
             pm4.dma_data(OUT + 0x4000, OUT, 0))
    assert np.array_equal(dev.mem[OUT + 0x2001:OUT + 0x2001 + 1000], src)
    assert dev.mem[OUT + 0x2000] == 0 and dev.mem[OUT + 0x2001 + 1000] == 0
    # a fill puts byte (a mod 4) of the value at address a
    assert dev.mem[OUT + 0x3001:OUT + 0x300A].tolist() == [0, 0xB2, 0xA1, 0xD4, 0xC3, 0xB2, 0xA1, 0xD4, 0]
    assert d.perf(DMA_DATA) == 3
    # the engine reads whole 8-byte beats: [OUT, OUT + 1008) for 1000 bytes from OUT + 3
    assert (d.read(regs.PERF_DMA_BYTES_READ), d.read(regs.PERF_DMA_BYTES_WRITTEN)) == (1008, 1007)


def test_a_chain_to_itself_runs_a_burst_at_once_and_the_rest_as_time_passes():
    """The CP ran packets until the ring was empty: an IB that CHAINs to itself (checker off)
    never returned from the doorbell's MMIO write. It runs `cp_burst` packets at one
    instant, then one more per cycle as time passes, however long the step (it ran one burst
    a step at most: a device call of many cycles gave it `cp_burst` packets, so with
    cp_burst 1 the KMD's IB test at bind, 4 packets, timed out), busy all the while; a soft
    reset ends it."""
    drv = Driver(cp_burst=100)
    dev = drv.dev
    w32(dev, IB1, pm4.indirect_buffer(IB1, 4, chain=1))
    drv.submit(pm4.indirect_buffer(IB1, 4))  # returns

    def seen() -> tuple[int, int]:
        r = dev.snapshot(memory=False)["regs"]  # (read without spending time)
        return r[f"PERF_PACKETS[{INDIRECT_BUFFER}]"], regs.STATUS.IDLE.get(r["STATUS"])
    assert seen() == (100, 0)  # the ring's packet and 99 CHAINs
    dev.delay(40)
    assert seen() == (140, 0)
    dev.delay(1000)
    assert seen() == (1140, 0)  # one a cycle: ten bursts of 100 during the step
    assert not dev.wait_irq(500) and seen() == (1640, 0)
    for _ in range(3):
        dev.delay(7)
    assert seen() == (1661, 0)
    drv.io.write_fields(regs.CONTROL, SOFT_RESET=1)
    drv.wptr = 0
    drv.submit(pm4.write_data(OUT, [7]))
    assert r32(dev, OUT) == 7 and drv.fields(regs.STATUS)["IDLE"] == 1
    with pytest.raises(ValueError, match=r"^cp_burst must be a positive number of packets, not 0$"):
        RefModel(cp_burst=0)


@pytest.mark.parametrize("flag", ["dma", "ih", "vm", "queues", "sdma"])
@pytest.mark.parametrize("bad", ["yes", "no", 1, None])
def test_the_models_on_off_flags_take_only_true_or_false(flag, bad):
    """RefModel(dma="yes") was accepted as a device with DMA (and dma="no" too: bool("no") is
    True): the on/off arguments are True or False, named in one line as its others are."""
    with pytest.raises(TypeError, match=rf"^{flag} must be True or False, not {bad!r}$"):
        RefModel(**{flag: bad})
    assert RefModel(**{flag: False}) is not None


@pytest.mark.parametrize("arg, bad, says", [
    ("tlb_entries", 12, r"tlb_entries must be a power of two from 2 to 64 \(as the RTL's MMU\)"),
    ("tlb_entries", True, r"tlb_entries must be a power of two from 2 to 64 \(as the RTL's MMU\)"),
    ("tlb_entries", "16", r"tlb_entries must be a power of two from 2 to 64 \(as the RTL's MMU\)"),
    ("tlb_entries", 128, r"tlb_entries must be a power of two from 2 to 64 \(as the RTL's MMU\)"),
    ("dma_max_bytes", 0, r"dma_max_bytes must be a power of two from 1 to 2\^31"),
    ("dma_max_bytes", 3000, r"dma_max_bytes must be a power of two from 1 to 2\^31"),
    ("dma_max_bytes", 4096.0, r"dma_max_bytes must be a power of two from 1 to 2\^31"),
    ("dma_max_bytes", 1 << 32, r"dma_max_bytes must be a power of two from 1 to 2\^31"),
    ("mmio_cycles", -1, r"mmio_cycles must be a number of cycles, 0 or more"),
    ("mmio_cycles", 2.5, r"mmio_cycles must be a number of cycles, 0 or more"),
    ("mmio_cycles", None, r"mmio_cycles must be a number of cycles, 0 or more"),
    ("ib_levels", True, r"ib_levels must be 1\.\.15"),
    ("ib_levels", 2.0, r"ib_levels must be 1\.\.15"),
    ("cp_burst", True, r"cp_burst must be a positive number of packets"),
])
def test_the_models_sizes_are_checked_when_it_is_built(arg, bad, says):
    """RefModel(tlb_entries=12) reported VM_CAPS.TLB_LOG2 3 (an 8-entry TLB), dma_max_bytes=3000
    took BYTE_COUNTs to 3000 while CAPS.DMA_MAX_LOG2 said 2048, mmio_cycles=-1 ran time
    backwards at each MMIO access, ib_levels=2.0 and True passed: each is refused when the model
    is built, in one line naming the argument and the value."""
    with pytest.raises(ValueError, match=rf"^{says}.*, not {re.escape(repr(bad))}$"):
        RefModel(**{arg: bad})


def test_the_models_sizes_at_their_bounds_are_taken():
    """The bounds of each check are values a device can have."""
    for kw in ({"tlb_entries": 2}, {"tlb_entries": 64}, {"dma_max_bytes": 1}, {"dma_max_bytes": 1 << 31},
               {"mmio_cycles": 0}, {"ib_levels": 1}):
        assert RefModel(**kw) is not None
    r = RefModel(tlb_entries=64).snapshot(memory=False)["regs"]
    assert regs.VM_CAPS.TLB_LOG2.get(r["VM_CAPS"]) == 6


def test_the_models_unknown_arguments_name_the_ones_it_takes():
    """RefModel(foo=1) was Python's "RefModel.__init__() got an unexpected keyword argument
    'foo'", which named none of the parameters a model takes (a newcomer's RefModel(dmaa=False)
    alike): one line naming them, and the one meant when it is spelt close to one, as the UMD's
    calls say theirs (umd/calls.py). Too many positional arguments say what it takes too."""
    takes = ("RefModel() takes mem_size, mem, data_width, dma, ih, ib_levels, vm, tlb_entries, vm_levels, "
             "queues, sdma, dma_max_bytes, mmio_cycles, cp_burst, trace")
    with pytest.raises(TypeError) as e:
        RefModel(foo=1)
    assert str(e.value) == f"RefModel() got an unexpected keyword argument 'foo' ({takes})"
    with pytest.raises(TypeError) as e:
        RefModel(tlb_entires=32)
    assert str(e.value) == (f"RefModel() got an unexpected keyword argument 'tlb_entires': did you mean "
                            f"tlb_entries=? ({takes})")
    with pytest.raises(TypeError) as e:
        RefModel(1 << 20, 64)
    assert str(e.value).startswith("RefModel() takes from 0 to 1 positional arguments but 2 were given: "
                                   "RefModel(mem_size=")
    # a TypeError of a value (not of the arguments' names) keeps its own words
    with pytest.raises(TypeError, match=r"^dma must be True or False, not 'no'$"):
        RefModel(dma="no")
