"""The register map's behaviour through the Device API, on any backend.

tests/rtl/cocotb_regs.py runs these on the RTL under each simulator, tests/model/refmodel/test_refmodel_registers.py
on the reference model: the same assertions, so the two cannot drift apart.
"""

from __future__ import annotations

import random

from kmd_model import regs
from kmd_model.device import BusError
from kmd_model.mmio import Mmio

# Fields whose value the hardware changes on its own: checked for behaviour, not value.
LIVE = {("TIMESTAMP_LO", "COUNT"), ("TIMESTAMP_HI", "COUNT")}


def expected_reset(reg, data_width: int) -> dict[str, int]:
    """What each field must read after reset: the SystemRDL reset value, 0 for write-only
    fields, and for hardware-driven fields what an idle, freshly reset device drives."""
    driven = {
        ("CAPS", "BUS_BYTES_LOG2"): (data_width // 8).bit_length() - 1,
        ("CAPS", "ADDR_BITS"): 48,
        ("CAPS", "IB_LEVELS"): 2,
        ("CAPS", "IH"): 1,
        ("CAPS", "DMA"): 1,
        ("CAPS", "DMA_MAX_LOG2"): 20,
        ("CAPS", "VM"): 1,
        ("VM_CAPS", "LEVELS"): 2,
        ("VM_CAPS", "VMIDS"): 16,
        ("VM_CAPS", "TLB_LOG2"): 4,
        ("STATUS", "IDLE"): 1,
        ("STATUS", "RB_EMPTY"): 1,
        ("QUEUE_CAPS", "SDMA"): 1,
        ("QUEUE_CAPS", "CP_QUEUES"): 2,  # (the model's is 1 when built without queue 1)
        ("CP_HQD1_STATUS", "IDLE"): 1,
        ("CP_HQD1_STATUS", "RB_EMPTY"): 1,
        ("SDMA_STATUS", "IDLE"): 1,
        ("SDMA_STATUS", "RB_EMPTY"): 1,
    }
    out = {}
    for f in reg.FIELDS:
        if (reg.NAME, f.name) in LIVE:
            continue
        if f.sw == "w":
            out[f.name] = 0
        elif f.reset is not None:
            out[f.name] = f.reset
        else:
            out[f.name] = driven.get((reg.NAME, f.name), 0)
    return out


def check_reset_values(dev, data_width: int) -> None:
    """Every register reads its SystemRDL reset value (or the idle hardware's value)."""
    io = Mmio(dev)
    bad = []
    for reg in regs.REGISTERS:
        for i in range(reg.ARRAY_LEN):
            got = io.fields(reg, i)
            for name, want in expected_reset(reg, data_width).items():
                if got[name] != want:
                    bad.append(f"{reg.NAME}[{i}].{name} = {got[name]:#x}, reset is {want:#x}")
    assert not bad, "\n".join(bad)
    t0 = io.read(regs.TIMESTAMP_LO)
    dev.delay(10)
    t1 = io.read(regs.TIMESTAMP_LO)
    assert t1 - t0 >= 10, f"TIMESTAMP advanced {t1 - t0} in >= 10 cycles"


def _storage(reg) -> bool:
    """A register of plain storage: every field RW, no pulse, no W1C, and nothing the CP or
    the interrupt line acts on, nor the SDMA ring's or the CP's second queue's enable (so
    writing it anything starts nothing)."""
    return (reg not in (regs.CONTROL, regs.RB_CNTL, regs.IH_CNTL, regs.INT_ENABLE, regs.SDMA_RB_CNTL,
                        regs.CP_HQD1_RB_CNTL)
            and all(f.sw == "rw" and not f.onwrite and not f.swmod for f in reg.FIELDS))


def fill_storage(dev, seed: int) -> None:
    """Write a value other than its reset value to every entry of every storage register, for
    check_reset_values after a reset of the device (not a power-up) to show the reset undid
    it: the page-table bases, kept in a memory (LUTRAM), included."""
    rng = random.Random(seed)
    io = Mmio(dev)
    for reg in regs.REGISTERS:
        if not _storage(reg):
            continue
        for i in range(reg.ARRAY_LEN):
            reset = sum(f.put(f.reset or 0) for f in reg.FIELDS)
            value = rng.getrandbits(32) | sum(f.put((1 << f.width) - 1) for f in reg.FIELDS if not f.reset)
            while value & sum(f.mask for f in reg.FIELDS) == reset:  # (a draw may hit it)
                value = rng.getrandbits(32)
            io.write(reg, value, i)
            assert io.read(reg, i) != reset, f"{reg.NAME}[{i}] still reads its reset value"


def check_first_byte_writes(dev) -> None:
    """After a reset, a one-byte write to an entry of a storage array changes only that byte:
    the others read their reset value, whatever the entry held before the reset."""
    io = Mmio(dev)
    for reg in regs.REGISTERS:
        if reg.ARRAY_LEN == 1 or not _storage(reg):
            continue
        top = (max(f.lsb + f.width for f in reg.FIELDS) - 1) // 8  # the highest byte with a field
        reset = sum(f.put(f.reset or 0) for f in reg.FIELDS)
        for i in range(reg.ARRAY_LEN):
            dev.mmio_write_bytes(reg.addr(i) + top, bytes([0xA5]))
            want = (reset & ~(0xFF << 8 * top)) | 0xA5 << 8 * top
            got = io.read(reg, i)
            mask = sum(f.put((1 << f.width) - 1) for f in reg.FIELDS)
            assert got == want & mask, f"{reg.NAME}[{i}]: a byte write of 0xA5 to byte {top} read {got:#x}, " \
                                       f"expected {want & mask:#x}"


def check_access_types(dev, seed: int) -> None:
    """RW fields keep what is written, RO ignore writes, WO read 0, RW1C clear on 1, and a
    one-byte write changes one byte."""
    rng = random.Random(seed)
    io = Mmio(dev)
    bad = []
    for reg in regs.REGISTERS:
        if reg in (regs.CONTROL, regs.INT_FORCE):
            continue  # their pulses reset or raise state: covered below
        for i in range(reg.ARRAY_LEN):
            before = io.read(reg, i)
            value = rng.getrandbits(32)
            io.write(reg, value, i)
            after = io.read(reg, i)
            for f in reg.FIELDS:
                if (reg.NAME, f.name) in LIVE or f.onwrite == "woclr":
                    continue
                want = f.get(value) if f.sw == "rw" else 0 if f.sw == "w" else f.get(before)
                if f.get(after) != want:
                    bad.append(f"{reg.NAME}[{i}].{f.name} ({f.access}): wrote {f.get(value):#x}, "
                               f"read {f.get(after):#x}, expected {want:#x}")
            io.write(reg, 0 if reg is not regs.INT_STATUS else 0xFFFF_FFFF, i)
    assert not bad, "\n".join(bad)

    # CONTROL: HALT is RW, SOFT_RESET and PERF_CLEAR are write-only pulses.
    io.write_fields(regs.CONTROL, HALT=1, PERF_CLEAR=1)
    assert io.fields(regs.CONTROL) == {"HALT": 1, "SOFT_RESET": 0, "PERF_CLEAR": 0}
    io.write(regs.CONTROL, 0)

    # RW1C: raise every event with INT_FORCE, then clear them one at a time.
    events = [f for f in regs.INT_STATUS.FIELDS if f.onwrite == "woclr"]
    io.write_fields(regs.INT_FORCE, **{f.name: 1 for f in events})
    assert io.read(regs.INT_FORCE) == 0, "INT_FORCE is write-only"
    status = io.fields(regs.INT_STATUS)
    assert all(status[f.name] == 1 for f in events), f"INT_FORCE did not raise all events: {status}"
    io.write(regs.INT_STATUS, 0)  # writing 0 clears nothing
    assert io.fields(regs.INT_STATUS) == status
    for f in events:
        io.write(regs.INT_STATUS, f.put(1))
        status[f.name] = 0
        assert io.fields(regs.INT_STATUS) == status, f"W1C of {f.name}"

    # Byte strobes: a one-byte write changes only that byte.
    io.write(regs.SCRATCH, 0x11223344)
    dev.mmio_write_bytes(regs.SCRATCH.addr() + 2, bytes([0xAB]))
    assert io.read(regs.SCRATCH) == 0x11AB3344


def check_probe_and_scratch(dev, data_width: int, seed: int) -> None:
    """The KMD's register layer identifies the device and round-trips SCRATCH."""
    rng = random.Random(seed)
    io = Mmio(dev)
    info = io.probe()
    assert (info.version, info.bus_bytes * 8, info.addr_bits, info.ib_levels, info.has_dma, info.has_ih,
            info.dma_max_bytes) == ((0, 2, 0), data_width, 48, 2, True, True, 1 << 20)
    for _ in range(64):
        v = rng.getrandbits(32)
        io.write(regs.SCRATCH, v)
        assert io.read(regs.SCRATCH) == v


def check_unmapped_access(dev) -> None:
    """Unmapped offsets answer DECERR: reads return no data, writes change nothing."""
    io = Mmio(dev)
    for off in (0x0F00, 0x01C, 0x148, 0xFFFC):
        try:
            dev.mmio_read32(off)
        except BusError as e:
            assert e.resp == 3
            assert str(e) == f"MMIO read at {off:#06x} answered DECERR (no register at that offset)"
        else:
            raise AssertionError(f"read of unmapped {off:#x} did not fail")
    io.write(regs.SCRATCH, 0x5A5A5A5A)
    try:
        dev.mmio_write32(0x0F00, 0xFFFFFFFF)
    except BusError as e:
        assert str(e) == "MMIO write at 0x0f00 answered DECERR (no register at that offset)"
    else:
        raise AssertionError("write to unmapped 0xf00 did not fail")
    assert io.read(regs.SCRATCH) == 0x5A5A5A5A
    for bad in (-4, 0x2, "0x10"):
        try:
            dev.mmio_read32(bad)
        except ValueError as e:
            assert "MMIO offset must be a non-negative multiple of 4" in str(e)
        else:
            raise AssertionError(f"offset {bad!r} accepted")


def check_irq_line(dev) -> None:
    """irq follows INT_STATUS & INT_ENABLE, and a waiting driver sees it rise."""
    io = Mmio(dev)
    assert not dev.irq_level()
    io.write_fields(regs.INT_FORCE, EOP=1)
    assert not dev.irq_level(), "irq rose with the source disabled"
    io.write_fields(regs.INT_ENABLE, EOP=1)
    assert dev.wait_irq(100)
    io.write(regs.INT_STATUS, regs.INT_STATUS.EOP.put(1))
    assert not dev.irq_level(), "irq stayed high after W1C"
    t0 = dev.now()
    assert not dev.wait_irq(50)
    assert dev.now() - t0 >= 50, "wait_irq returned before its timeout"


# A VMID's page tables at PT_ROOT (root directory, then its level-1 table) mapping PT_VA to
# the page at PT_PAGE and OUT to itself, for the check that a reset takes the VMID's base
# back to 0 (PT_VA and OUT share a level-1 table).
PT_VMID, PT_ROOT, PT_VA, PT_PAGE = 1, 0x80000, 0x10_0000, 0x90000


def point_pt_base(dev) -> None:
    """Set VMID PT_VMID's page-table base to PT_ROOT (for a reset to take back)."""
    io = Mmio(dev)
    io.write(regs.VM_CONTEXT_PT_BASE_LO, PT_ROOT & 0xFFFF_FFFF, PT_VMID)
    io.write(regs.VM_CONTEXT_PT_BASE_HI, PT_ROOT >> 32, PT_VMID)
    assert io.read(regs.VM_CONTEXT_PT_BASE_LO, PT_VMID) == PT_ROOT


def check_pt_base_reset_reaches_mmu(dev) -> None:
    """After a reset the MMU walks a VMID whose base was not written since from address 0,
    not from the base written before the reset: page tables left at that old base map an
    IB, yet the IB faults on its fetch (the root at 0 is all zeros) and never runs."""
    from spec import pm4
    from spec import vm as vm_spec
    from tests.model.refmodel.refmodel_helpers import OUT, Driver, r32, w32

    assert vm_spec.index(OUT, 0) == vm_spec.index(PT_VA, 0)
    def put64(addr, v):
        w32(dev, addr, [v & 0xFFFF_FFFF, v >> 32])
    put64(PT_ROOT + 8 * vm_spec.index(PT_VA, 0), vm_spec.pde(PT_ROOT + vm_spec.PAGE_SIZE))
    put64(PT_ROOT + vm_spec.PAGE_SIZE + 8 * vm_spec.index(PT_VA, 1),
          vm_spec.pte(PT_PAGE, vm_spec.READABLE | vm_spec.EXECUTABLE))
    put64(PT_ROOT + vm_spec.PAGE_SIZE + 8 * vm_spec.index(OUT, 1), vm_spec.pte(OUT, vm_spec.WRITEABLE))
    ib = pm4.write_data(OUT, [0x600D])
    w32(dev, PT_PAGE, ib)
    d = Driver(dev)
    d.io.write(regs.VM_CONTEXT_CNTL, 1, PT_VMID)
    d.submit(pm4.indirect_buffer(PT_VA, len(ib), vmid=PT_VMID))
    for _ in range(400):
        if d.fields(regs.STATUS)["IDLE"]:
            break
        dev.delay(20)
    assert d.fields(regs.STATUS)["IDLE"], "the CP did not go idle"
    assert r32(dev, OUT) != 0x600D, "the IB ran through the page-table base written before the reset"
    assert d.error()[0] == regs.CpError.VM_FAULT, f"CP_ERROR {d.error()}, expected a VM fault on the IB's fetch"
    assert io_fault(d) == (PT_VMID, PT_VA), f"VM_FAULT_STATUS/ADDR {io_fault(d)}"


def io_fault(d) -> tuple[int, int]:
    """The VMID and address VM_FAULT_* latched."""
    return d.fields(regs.VM_FAULT_STATUS)["VMID"], d.io.read64(regs.VM_FAULT_ADDR_LO, regs.VM_FAULT_ADDR_HI)


def check_soft_reset_ends_per_engine(dev) -> None:
    """CONTROL.SOFT_RESET while the CP's second queue and the SDMA are mid-copy: each
    engine's part ends when its own bursts have, ignoring its doorbells until then, so the
    driver waits for the IDLE of all three queues (docs/hardware.md, Errors); once they all
    read 1, each queue takes its doorbell and runs from a clean ring."""
    from spec import pm4, sdma
    from tests.model.refmodel.refmodel_helpers import r32, w32

    io = Mmio(dev)
    ring0, ring1, sring, out, src, dst, sdst = 0x10000, 0x11000, 0x12000, 0x13000, 0x100000, 0x200000, 0x300000
    io.write(regs.RB_BASE_LO, ring0 >> 8)
    io.write(regs.RB_SIZE, 7)
    io.write_fields(regs.RB_CNTL, ENABLE=1)
    io.write(regs.CP_HQD1_RB_BASE_LO, ring1 >> 8)
    io.write(regs.CP_HQD1_RB_SIZE, 7)
    io.write_fields(regs.CP_HQD1_RB_CNTL, ENABLE=1)
    io.write(regs.SDMA_RB_BASE_LO, sring >> 8)
    io.write_fields(regs.SDMA_RB_CNTL, RB_SIZE=8, RB_ENABLE=1)
    copy = pm4.dma_data(dst, src, 0x10000, cp_sync=1)
    w32(dev, ring1, copy)
    io.write(regs.CP_HQD1_RB_DOORBELL, len(copy))
    scopy = sdma.copy_linear(sdst, src, 0x10000)
    w32(dev, sring, scopy)
    io.write(regs.SDMA_DOORBELL, 4 * len(scopy))
    dev.delay(200)
    io.write_fields(regs.CONTROL, SOFT_RESET=1)
    statuses = (regs.STATUS, regs.CP_HQD1_STATUS, regs.SDMA_STATUS)
    for _ in range(200):
        if all(io.fields(s)["IDLE"] for s in statuses):
            break
        dev.delay(10)
    got = {s.NAME: io.read(s) for s in statuses}
    assert all(s.decode(got[s.NAME])["IDLE"] and not s.decode(got[s.NAME])["ERROR"] for s in statuses), got
    pointers = (regs.RB_RPTR, regs.RB_WPTR, regs.CP_HQD1_RB_RPTR, regs.CP_HQD1_RB_WPTR, regs.SDMA_RB_RPTR,
                regs.SDMA_RB_WPTR)
    assert [io.read(p) for p in pointers] == [0] * 6
    for ring, doorbell, tag in ((ring0, regs.RB_DOORBELL, 0xA0), (ring1, regs.CP_HQD1_RB_DOORBELL, 0xA1)):
        p = pm4.write_data(out + 4 * (tag & 3), [tag])
        w32(dev, ring, p)
        io.write(doorbell, len(p))
    f = sdma.fence(out + 8, 0xA2)
    w32(dev, sring, f)
    io.write(regs.SDMA_DOORBELL, 4 * len(f))
    for _ in range(100):
        if r32(dev, out, 3) == [0xA0, 0xA1, 0xA2]:
            break
        dev.delay(10)
    assert r32(dev, out, 3) == [0xA0, 0xA1, 0xA2], "a doorbell taken after the reset was lost"


def check_registers_md_reset_values(dev) -> None:
    """Every register docs/registers.md gives a reset value for reads that value after a
    reset, but for the fields it names as the device's state: an outside driver checking
    reset values from the docs finds what they say (STATUS used to be documented as
    0x00000000; an idle device reads IDLE and RB_EMPTY 1)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "registers.md").read_text()
    io = Mmio(dev)
    bad, checked = [], 0
    for m in re.finditer(r"^## (\w+)\n\n\*\*[^*]+\*\* — offset 0x[0-9a-f]+(?: \+ \d+·i, i = 0 … \d+)?, (.*)\.$", text, flags=re.M):
        name, what = m.groups()
        reg = getattr(regs, name)
        if reg.MODEL_ONLY or what.startswith("driven by the hardware"):
            continue
        r = re.fullmatch(r"reset (0x[0-9a-f]{8})(?: but for ([\w, ]+) \(the device's state\))?", what)
        assert r, f"{name}: unexpected reset text {what!r}"
        want = int(r.group(1), 16)
        mask = 0xFFFF_FFFF
        for f in (r.group(2) or "").split(", "):
            if f:
                mask &= ~getattr(reg, f).mask
        for i in range(reg.ARRAY_LEN):
            got = io.read(reg, i)
            checked += 1
            if got & mask != want & mask:
                bad.append(f"{name}[{i}] reads {got:#010x} after reset, docs/registers.md says {want:#010x}")
    assert checked >= 88 and not bad, "\n".join(bad) or f"only {checked} registers checked"
