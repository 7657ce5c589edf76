"""Command-stream scenarios run on the reference model and on the RTL; each returns what a
driver can observe (errors, status, pointers, counters, IH entries, memory), so
tests/difftest/test_rtl_vs_model.py can compare the two. Scenarios drive the device only through
the Device API, as a driver would (tests/model/refmodel/refmodel_helpers.py:Driver)."""
from kmd_model import regs
from kmd_model.regs import CpError

from spec import pm4
from tests.model.refmodel.refmodel_helpers import Driver, submit_ibs_and_chains, r32, w32, OUT, IB1, IB2, RPTR_WB, IH_RING, OP
from tests.model.refmodel.test_refmodel_errors import RING_ERRORS


def settle(d, n=400):
    for _ in range(n):
        if d.fields(regs.STATUS)["IDLE"]:
            return True
        d.dev.delay(20)
    return False


def observe(d):
    o = {}
    o["idle"] = settle(d)
    o["error"] = list(d.error())
    st = d.fields(regs.STATUS)
    o["status"] = {k: st[k] for k in ("IDLE", "HALTED", "ERROR", "RB_EMPTY", "WAITING", "LEVEL")}
    o["rptr"], o["wptr"], o["ih_wptr"] = d.read(regs.RB_RPTR), d.read(regs.RB_WPTR), d.read(regs.IH_WPTR)
    o["int_status"] = d.read(regs.INT_STATUS)
    o["dwords"] = d.read(regs.PERF_DWORDS_FETCHED)
    o["packets"] = [d.read(regs.PERF_PACKETS, i) for i in range(8)]
    ents = d.ih_entries()[-4:]
    for e in ents:
        e["TIMESTAMP_LO"] = e["TIMESTAMP_HI"] = 0
    o["ih"] = ents
    o["mem"] = r32(d.dev, OUT, 0x80)
    o["rptr_wb"] = r32(d.dev, RPTR_WB)
    o["scratch"] = d.read(regs.SCRATCH)
    if o["error"][2] == OP["DMA_DATA"] and o["error"][0] in (CpError.BUS_SLVERR, CpError.BUS_DECERR):
        # docs/hardware.md: a failing transfer leaves its destination undefined, and the
        # transfers queued behind it may have been parsed (counted in PERF_DWORDS_FETCHED)
        o["mem"] = "undefined after a DMA bus error"
        o["dwords"] = "not compared after a DMA bus error"
        o["dma_bytes"] = "not compared after a DMA bus error"
        o["rptr"] = o["rptr_wb"] = "the ring may have moved past a transfer still running"
    else:
        o["dma_bytes"] = [d.read(regs.PERF_DMA_BYTES_READ), d.read(regs.PERF_DMA_BYTES_WRITTEN)]
    return o


SCEN = {}


def scen(f):
    SCEN[f.__name__] = f
    return f


for name, (packet, code, opcode) in RING_ERRORS.items():
    def f(d, packet=packet):
        d.submit(pm4.nop(1), packet, pm4.write_data(OUT + 0x80, [1]))
        return d
    f.__name__ = "ring_" + name
    SCEN[f.__name__] = f


@scen
def chain(d):
    submit_ibs_and_chains(d)


@scen
def wrap(d):
    d.submit(pm4.nop(250))
    settle(d)
    d.submit(pm4.write_data(OUT, [0xAAAA, 0xBBBB, 3, 4]), pm4.release_mem(OUT + 0x20, 9, int_sel=1))


@scen
def nesting(d):
    w32(d.dev, IB1 + 0x800, pm4.nop(1))
    ib2 = pm4.nop(3) + pm4.indirect_buffer(IB1 + 0x800, 2)
    ib1 = pm4.indirect_buffer(IB2, len(ib2))
    w32(d.dev, IB2, ib2)
    w32(d.dev, IB1, ib1)
    d.submit(pm4.indirect_buffer(IB1, len(ib1)))


@scen
def ib_past_end(d):
    ib = pm4.nop(1) + pm4.write_data(OUT, [1, 2])
    w32(d.dev, IB1, ib)
    d.submit(pm4.indirect_buffer(IB1, len(ib) - 1))


@scen
def write_err(d):
    d.dev.mem_model.configure(error_window=(OUT + 0x20, OUT + 0x28, "SLVERR"))
    d.submit(pm4.nop(1), pm4.write_data(OUT + 0x10, list(range(1, 17))))


@scen
def fetch_err(d):
    ib = pm4.nop(1) + pm4.write_data(OUT, [1, 2])
    w32(d.dev, IB1, ib)
    d.dev.mem_model.configure(error_window=(IB1 + 16, IB1 + 24, "SLVERR"))
    d.submit(pm4.indirect_buffer(IB1, len(ib)))


@scen
def fetch_err_header(d):
    d.submit(pm4.indirect_buffer(1 << 40, 8))


@scen
def poll_err(d):
    d.dev.mem_model.configure(error_window=(OUT + 0x100, OUT + 0x108, "DECERR"))
    d.submit(pm4.wait_reg_mem(OUT + 0x104, 0, 0, "ALWAYS"))


@scen
def fence_err(d):
    d.dev.mem_model.configure(error_window=(OUT + 0x100, OUT + 0x108, "DECERR"))
    d.submit(pm4.release_mem(OUT + 0x100, 1, data_sel="DATA_64", int_sel="SEND_INT"))


# Addresses with bits above the bus's 48 (ADDR_HI is 32 bits wide): BUS_DECERR at the low
# 48 bits when the access is made (docs/hardware.md); an interrupt-only fence makes no access.
ABOVE_BUS = 1 << 52


@scen
def fence_above_bus(d):
    d.submit(pm4.release_mem(ABOVE_BUS | (OUT + 0x20), 0x1122_3344_5566_7788, data_sel="DATA_64",
                             int_sel="SEND_INT"))


@scen
def fence_above_bus_32(d):
    d.submit(pm4.write_data(OUT, [5]), pm4.release_mem(ABOVE_BUS | (OUT + 0x24), 9, data_sel="DATA_32"))


@scen
def write_above_bus(d):
    d.submit(pm4.write_data(ABOVE_BUS | (OUT + 0x10), [1, 2, 3]))


@scen
def eop_only_above_bus(d):
    d.submit(pm4.release_mem(ABOVE_BUS | (OUT + 0x30), 0x77, data_sel="NONE", int_sel="SEND_INT", int_ctxid=3),
             pm4.write_data(OUT + 0x40, [0xAB]))


def _above_bus_translated(d, packet):
    """`packet` in an IB of a translated VMID whose tables map OUT's page (writable and
    readable): its address is that page's with bit 52 set too. The CP checks the bus's 48
    bits before the MMU sees the address, so it is BUS_DECERR at the low 48 bits, as
    untranslated, not a VM fault (RANGE) of the MMU."""
    from spec import vm as vm_spec
    from tests.model.refmodel.register_checks import PT_PAGE, PT_ROOT, PT_VA, PT_VMID

    def put64(addr, v):
        w32(d.dev, addr, [v & 0xFFFF_FFFF, v >> 32])

    for reg, v in ((regs.VM_CONTEXT_PT_BASE_LO, PT_ROOT & 0xFFFF_FFFF), (regs.VM_CONTEXT_PT_BASE_HI, PT_ROOT >> 32),
                   (regs.VM_CONTEXT_CNTL, 1)):
        d.io.write(reg, v, PT_VMID)
    put64(PT_ROOT + 8 * vm_spec.index(PT_VA, 0), vm_spec.pde(PT_ROOT + vm_spec.PAGE_SIZE))
    put64(PT_ROOT + vm_spec.PAGE_SIZE + 8 * vm_spec.index(PT_VA, 1),
          vm_spec.pte(PT_PAGE, vm_spec.READABLE | vm_spec.EXECUTABLE))
    put64(PT_ROOT + vm_spec.PAGE_SIZE + 8 * vm_spec.index(OUT, 1),
          vm_spec.pte(OUT, vm_spec.READABLE | vm_spec.WRITEABLE))
    ib = pm4.write_data(OUT + 0x60, [0x11]) + packet + pm4.write_data(OUT + 0x64, [0x22])
    w32(d.dev, PT_PAGE, ib)
    d.submit(pm4.indirect_buffer(PT_VA, len(ib), vmid=PT_VMID))


@scen
def write_above_bus_translated(d):
    _above_bus_translated(d, pm4.write_data(ABOVE_BUS | (OUT + 0x10), [1, 2, 3]))


@scen
def fence_above_bus_translated(d):
    _above_bus_translated(d, pm4.release_mem(ABOVE_BUS | (OUT + 0x20), 7, data_sel="DATA_32"))


@scen
def poll_above_bus_translated(d):
    _above_bus_translated(d, pm4.wait_reg_mem(ABOVE_BUS | (OUT + 0x30), 0, 0, "ALWAYS"))


@scen
def rptr_wb_err(d):
    d.dev.mem_model.configure(error_window=(RPTR_WB, RPTR_WB + 8, "SLVERR"))
    d.submit(pm4.nop(2), pm4.nop(1))


@scen
def rptr_wb_err_ib(d):
    ib = pm4.write_data(OUT, [1])
    w32(d.dev, IB1, ib)
    d.submit(pm4.nop(1))
    settle(d)
    d.dev.mem_model.configure(error_window=(RPTR_WB, RPTR_WB + 8, "SLVERR"))
    d.submit(pm4.indirect_buffer(IB1, len(ib)))


@scen
def ih_err(d):
    d.dev.mem_model.configure(error_window=(IH_RING, IH_RING + 32, "SLVERR"))
    d.submit(pm4.release_mem(OUT, 1, int_sel="SEND_INT"))


@scen
def doorbell_back(d):
    d.submit(pm4.nop(2))
    settle(d)
    d.io.write(regs.RB_DOORBELL, 2)


@scen
def doorbell_over(d):
    d.submit(pm4.nop(2))
    settle(d)
    d.io.write(regs.RB_DOORBELL, 3 + 257)


# Far jumps: "backwards" is the sign of (new wptr - wptr) as a 32-bit number, so a jump
# back by more than 2^30 is still backwards and one forward by more than 2^30 is not.
@scen
def doorbell_back_far(d):
    d.submit(pm4.nop(2))
    settle(d)
    d.io.write(regs.RB_DOORBELL, (3 - 0x6000_0000) & 0xFFFF_FFFF)


@scen
def doorbell_over_far(d):
    d.submit(pm4.nop(2))
    settle(d)
    d.io.write(regs.RB_DOORBELL, 3 + 0x4000_0001)


@scen
def wait_release(d):
    w32(d.dev, OUT + 0x40, [0xABCD_0000])
    d.submit(pm4.wait_reg_mem(OUT + 0x40, 0x1234, 0xFFFF, "EQ", poll_interval=30), pm4.write_data(OUT, [5]))
    d.dev.delay(200)
    w32(d.dev, OUT + 0x40, [0xABCD_1234])


@scen
def ih_overflow(d):
    d.io.write_fields(regs.IH_SIZE, LOG2_DWORDS=3)  # one entry
    d.submit(pm4.release_mem(OUT, 1, int_sel="SEND_INT"), pm4.release_mem(OUT + 4, 2, int_sel="SEND_INT"))


@scen
def halt_error(d):
    d.io.write_fields(regs.CONTROL, HALT=1)
    d.io.write(regs.RB_DOORBELL, 1000)


# WAIT_REG_MEM with every compare function and a mask: the polled dword first fails the
# compare, then a CPU write makes it pass; the marker written after the wait shows it ended.
# Both values sit on the boundary of the compare (the reference is 0x20): LT holds at 0x20
# and is released by 0x1f, so LT read as LE (or GT as GE) is caught here.
WAIT_FUNCTIONS = {"ALWAYS": (0x0, 0x0), "LT": (0x20, 0x1F), "LE": (0x21, 0x20), "EQ": (0x21, 0x20),
                  "NE": (0x20, 0x21), "GE": (0x1F, 0x20), "GT": (0x20, 0x21)}  # (blocking value, releasing value)


def _wait_function(function, hold, release):
    def f(d):
        w32(d.dev, OUT + 0x40, [0xFF00 | hold])  # the mask 0xFF drops the 0xFF00 bits
        d.submit(pm4.wait_reg_mem(OUT + 0x40, 0x20, 0xFF, function, poll_interval=8),
                 pm4.write_data(OUT, [0x5EE]))
        d.dev.delay(300)
        d.io.write(regs.SCRATCH, r32(d.dev, OUT))  # what the marker was while blocked
        w32(d.dev, OUT + 0x40, [0xFF00 | release])
    return f


for _fn, (_hold, _release) in WAIT_FUNCTIONS.items():
    SCEN[f"wait_{_fn.lower()}"] = _wait_function(_fn, _hold, _release)


@scen
def release_mem_kinds(d):
    d.submit(pm4.release_mem(OUT, 0x1234_5678, data_sel="DATA_32"),
             pm4.release_mem(OUT + 8, 0xAABB_CCDD_1122_3344, data_sel="DATA_64", int_sel="SEND_INT_ON_CONFIRM",
                             int_ctxid=7),
             pm4.release_mem(OUT + 0x10, 0, data_sel="NONE", int_sel="SEND_INT"),
             pm4.release_mem(OUT + 0x18, 0, data_sel="TIMESTAMP"))
    settle(d)
    # the clock value differs between backends; only "it moved, and the high dword is 0"
    ts = r32(d.dev, OUT + 0x18, 2)
    w32(d.dev, OUT + 0x18, [int(ts[0] != 0), ts[1]])


def run(name, dev):
    d = Driver(dev)
    SCEN[name](d)
    obs = observe(d)
    if obs["error"][0]:
        # every error leaves a device a soft reset brings back: then a write must land
        d.io.write_fields(regs.CONTROL, SOFT_RESET=1)
        d.io.write(regs.INT_STATUS, 0xFFFF_FFFF)
        d.io.write(regs.IH_RPTR, 0)
        d.dev.mem_model.configure(error_window=None)
        d.wptr = 0
        d.submit(pm4.write_data(OUT + 0x1F0, [0x600D]))
        settle(d)
        obs["after_reset"] = {"error": list(d.error()), "marker": r32(d.dev, OUT + 0x1F0),
                              "rptr": d.read(regs.RB_RPTR)}
    return obs


# ---------------------------------------------------------------------------- DMA_DATA

def _pattern(d, addr, n, seed):
    import numpy as np
    d.dev.mem[addr:addr + n] = (np.arange(n, dtype=np.uint32) * 37 + seed).astype(np.uint8)


@scen
def dma_copies_and_fills(d):
    """Copies and fills at odd alignments and lengths, then a fence that must see them."""
    src = OUT + 0x1000
    _pattern(d, src, 0x800, 5)
    d.submit(pm4.dma_data(OUT + 0x3, src + 0x5, 0x1F3),
             pm4.dma_data(OUT + 0x210, src + 0x100, 0x100, cp_sync=1),
             pm4.dma_data(OUT + 0x309, 0xA1B2C3D4, 0x37, src_sel="DATA"),
             pm4.dma_data(OUT + 0x380, src, 0),
             pm4.release_mem(OUT + 0x3F8, 0x600D, int_sel="SEND_INT_ON_CONFIRM"))


@scen
def dma_in_ib_then_fence(d):
    src = OUT + 0x1000
    _pattern(d, src, 0x1000, 9)
    ib = (pm4.dma_data(OUT, src, 0x1000 - 0x40) + pm4.dma_data(OUT + 0x100, 0x5A5A5A5A, 3, src_sel="DATA")
          + pm4.write_data(OUT + 0x1F8, [0xAB]))
    w32(d.dev, IB1, ib)
    d.submit(pm4.indirect_buffer(IB1, len(ib)), pm4.release_mem(OUT + 0x1FC, 7, int_sel="SEND_INT"))


@scen
def dma_read_error(d):
    src = OUT + 0x1000
    _pattern(d, src, 0x400, 3)
    d.dev.mem_model.configure(error_window=(src + 0x100, src + 0x140, "SLVERR"))
    d.submit(pm4.nop(1), pm4.dma_data(OUT + 0x10, src + 0x20, 0x200), pm4.write_data(OUT + 0x1F8, [1]))


@scen
def dma_write_error(d):
    d.dev.mem_model.configure(error_window=(OUT + 0x180, OUT + 0x200, "DECERR"))
    d.submit(pm4.dma_data(OUT + 0x100, 0x11223344, 0x100, src_sel="DATA"),
             pm4.dma_data(OUT + 0x300, 0x55667788, 0x10, src_sel="DATA"), pm4.write_data(OUT + 0x1F8, [1]))
