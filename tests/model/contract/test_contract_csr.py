"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone): the CSR block over AXI4-Lite as docs/registers.md's opening paragraph and
tables describe it. Every offset of the aperture answers as the register table lists it
(a listed one OKAY, any other DECERR, with no alias of a register above the first 4 KiB),
bits no field names read 0 whatever is written there, and a write in part (byte strobes)
acts on the bytes it names alone, for every kind of register: RW, R, W (a doorbell's
merge, a request's), RW1C, the pulses and the locked ("RO while") ones.

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (IH_BASE, OUT, RING, Gpu, IhRing, Ring, bring_up, registers, release_mem,
                                         write_data)

APERTURE = 1 << 16  # registers.md: a 64 KiB aperture, the registers in its first 4 KiB


def _bus_error(fn) -> int | None:
    """The AXI response an MMIO access answered when it was not OKAY, None when it was."""
    try:
        fn()
    except RuntimeError as e:  # the Device API's BusError: .resp is the AXI response
        if not hasattr(e, "resp"):
            raise
        return e.resp
    return None


def _listed() -> dict[int, tuple[str, int]]:
    """{offset: (register, element)} of every register and array element registers.md lists."""
    return {r.addr(i): (r.name, i) for r in registers().values() for i in range(r.count)}


# Registers whose value moves on its own on an idle device.
LIVE = ("TIMESTAMP_LO", "TIMESTAMP_HI")


def _snapshot(g: Gpu) -> dict:
    return {(n, i): g.read(n, i) for off, (n, i) in sorted(_listed().items()) if n not in LIVE}


def check_every_offset_answers_as_registers_md_lists(dev):
    """Every dword offset of the register space: a listed register reads OKAY, any other
    offset answers DECERR to a read, to a whole write and to a one-byte write (each at a
    quarter of them), and such writes of all ones change no register; offsets above the
    first 4 KiB, up to the aperture's top, are no aliases of the registers (a register's
    offset + 4 KiB·k answers DECERR, and a write there leaves the register)."""
    g = Gpu(dev)
    listed = _listed()
    assert len(listed) >= 140 and max(listed) < 0x1000
    g.write("SCRATCH", 0x5A5A_A5A5)
    before = _snapshot(g)
    decerr = 3
    bad = []
    for off in range(0, 0x1000, 4):
        if off in listed:
            r = _bus_error(lambda: dev.mmio_read32(off))
            if r is not None:
                bad.append(f"{off:#05x} ({listed[off][0]}): read answered {r}")
            continue
        tries = [("read", lambda: dev.mmio_read32(off))]
        if off % 16 == 0:  # (writes at a quarter of them, a whole and a one-byte one: 0.8 s on Icarus)
            tries.append(("write", lambda: dev.mmio_write32(off, 0xFFFF_FFFF)))
        elif off % 16 == 8:
            tries.append(("byte write", lambda: dev.mmio_write_bytes(off + 3, b"\xff")))
        for what, fn in tries:
            r = _bus_error(fn)
            if r != decerr:
                bad.append(f"{off:#05x} (not listed): {what} answered {r}, not DECERR")
    # aliases: each listed register's offset in every other 4 KiB of the aperture
    for k in range(1, APERTURE // 0x1000):
        for name in ("ID", "SCRATCH", "RB_DOORBELL", "CP_QUEUE_RESET"):
            off = g.regs[name].addr() + 0x1000 * k
            r = _bus_error(lambda: dev.mmio_read32(off))
            w = _bus_error(lambda: dev.mmio_write32(off, 0xFFFF_FFFF))
            if (r, w) != (decerr, decerr):
                bad.append(f"{off:#06x} ({name} + {k} * 4 KiB): read {r}, write {w}, not DECERR")
    assert not bad, "\n".join(bad[:20]) + (f"\n... {len(bad)} in all" if len(bad) > 20 else "")
    after = _snapshot(g)
    changed = {k: (hex(before[k]), hex(after[k])) for k in before if before[k] != after[k]}
    assert not changed, f"writes to unlisted offsets changed registers: {changed}"
    assert g.read("SCRATCH") == 0x5A5A_A5A5 and not dev.irq_level()


def _named(name: str) -> int:
    return sum(f.mask for f in registers()[name].fields.values())


# Registers whose fields may all be written with ones on an idle device, starting nothing
# that lasts (enables with no work, a halt, priorities, page-table bases): restored after.
ALL_ONES = ("CONTROL", "INT_ENABLE", "IH_BASE_HI", "IH_SIZE", "IH_WPTR_ADDR_HI", "IH_CNTL", "RB_BASE_HI", "RB_SIZE",
            "RB_RPTR_ADDR_HI", "RB_CNTL", "VM_INVALIDATE_ADDR_HI", "VM_CONTEXT_CNTL", "VM_CONTEXT_PT_BASE_LO",
            "VM_CONTEXT_PT_BASE_HI", "SDMA_RB_BASE_HI", "SDMA_RB_RPTR_ADDR_HI", "CP_HQD1_RB_BASE_HI",
            "CP_HQD1_RB_SIZE", "CP_HQD1_RB_RPTR_ADDR_HI", "CP_HQD1_RB_CNTL", "CP_QUEUE_PRIORITY")


def check_bits_no_field_names_read_0(dev):
    """Every register with bits no field names: those bits read 0 after reset, after a write
    of ones to them alone (which changes no field: no pulse, no clear, no request takes
    effect: the fields written as they read) and after a write of ones to every bit (the
    fields take their ones, the other bits stay 0), and in the registers the hardware
    drives after an error whose values fill their fields (CP_ERROR with opcode 0xFF,
    CP_ERROR_ADDR_HI 0xFFFF)."""
    g = Gpu(dev)
    regs = registers()
    spare = {n: (~_named(n)) & 0xFFFF_FFFF for n in regs if _named(n) != 0xFFFF_FFFF}
    assert len(spare) >= 40
    bad = []

    def look(when):
        for n, m in spare.items():
            for i in range(regs[n].count):
                v = g.read(n, i)
                if v & m:
                    bad.append(f"{n}[{i}] {when}: {v:#010x}, bits {v & m:#010x} no field names")

    look("after reset")
    before = _snapshot(g)
    for n, m in spare.items():
        for i in range(regs[n].count):
            g.write(n, g.read(n, i) & ~m | m, i)  # (the fields as they read)
    look("after ones written to the unnamed bits")
    after = _snapshot(g)
    changed = {k: (hex(before[k]), hex(after[k])) for k in before if before[k] != after[k]}
    assert not changed, f"ones written to bits no field names changed fields: {changed}"
    assert g.fields("INT_STATUS") == {f: 0 for f in regs["INT_STATUS"].fields}, "INT_FORCE bit 0 raised something"
    for n in ALL_ONES:
        for i in range(regs[n].count):
            g.write(n, 0xFFFF_FFFF, i)
            want = _named(n) & ~regs["CONTROL"].fields["SOFT_RESET"].mask & ~regs["CONTROL"].fields["PERF_CLEAR"].mask \
                if n == "CONTROL" else _named(n)
            if g.read(n, i) != want:
                bad.append(f"{n}[{i}]: ones written, read {g.read(n, i):#010x}, expected {want:#010x}")
            g.write(n, regs[n].reset or 0, i)
    g.set("CONTROL", SOFT_RESET=1)  # (the pulse of the write of ones above, done: idle again)
    for s in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
        g.idle(s)
    look("after ones written to every bit")
    # The hardware's own values at their widest: an opcode 0xFF, an error address 0xFFFF_xxxx_xxxx.
    g2, ring, ih = bring_up(dev)
    ring.submit([0xC000FF00, 0])  # type 3, COUNT 0, opcode 0xFF: ILLEGAL_OPCODE
    g.idle()
    assert g.fields("CP_ERROR")["OPCODE"] == 0xFF
    look("after an ILLEGAL_OPCODE 0xFF")
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    ring.wptr = 0
    ring.submit(write_data(0xFFFF_FFFF_FFFF_FFF0, [1]))  # bits above 47: BUS_DECERR at the low 48
    g.idle()
    assert g.read("CP_ERROR_ADDR_HI") == 0xFFFF and g.read("CP_ERROR_ADDR_LO") == 0xFFFF_FFF0
    look("after an error at 0xffff_ffff_fff0")
    assert not bad, "\n".join(bad)


def check_byte_writes_of_every_register_kind(dev):
    """A write in part (byte strobes) acts on the bytes it names alone, for every kind of
    register: an RW1C byte without its bits clears nothing; a pulse (CONTROL's PERF_CLEAR
    and SOFT_RESET, INT_FORCE, CP_QUEUE_RESET, SDMA_CNTL.QUEUE_RESET) fires only from the
    byte that holds it; an R register ignores it; a locked register ("RO while") ignores it
    while locked and takes that byte alone once unlocked; and VM_INVALIDATE_REQ, a W register,
    keeps the bytes a write leaves out from its last write, as a doorbell does, and makes a
    request only when the write names PER_VMID's bytes: a write of ALL_ADDR's byte alone
    requests nothing (a stale TLB entry keeps translating) and sets ALL_ADDR for the next."""
    from tests.model.contract.contract_driver import (PA_OUT, PA_OUT2, PT_L1, RPTR_WB, SRING, VA_CODE, VA_OUT, VA_RO, VALID,
                                             READABLE, WRITEABLE, PA_CODE, SdmaRing, expect_error, ib, map_vmid1,
                                             pm4_packets)

    g, ring, ih = bring_up(dev)
    regs = registers()

    def byte(name, k, v, i=0):
        dev.mmio_write_bytes(regs[name].addr(i) + k, bytes([v]))

    # RW1C: INT_STATUS's events live in byte 0.
    g.set("INT_FORCE", EOP=1, CP_ERROR=1, IH_OVERFLOW=1)
    events = g.value("INT_STATUS", EOP=1, CP_ERROR=1, IH_OVERFLOW=1)
    assert g.read("INT_STATUS") == events
    for k in (1, 2, 3):
        byte("INT_STATUS", k, 0xFF)
        byte("INT_FORCE", k, 0xFF)
    assert g.read("INT_STATUS") == events, "a byte without the RW1C bits cleared some"
    byte("INT_STATUS", 0, g.value("INT_STATUS", EOP=1))
    assert g.read("INT_STATUS") == g.value("INT_STATUS", CP_ERROR=1, IH_OVERFLOW=1)
    g.write("INT_STATUS", events)
    byte("INT_FORCE", 0, g.value("INT_FORCE", CP_ERROR=1))
    assert g.read("INT_STATUS") == g.value("INT_STATUS", CP_ERROR=1), "INT_FORCE's byte 0 raises its bit"
    g.write("INT_STATUS", events)
    # CONTROL: PERF_CLEAR and SOFT_RESET fire from byte 0 alone.
    P = pm4_packets()
    ring.run(write_data(OUT, [1, 2, 3]))
    counters = (g.read("PERF_PACKETS", P["WRITE_DATA"].index), g.read("PERF_DWORDS_FETCHED"), g.read("RB_RPTR"))
    assert counters == (1, 7, 7)
    for k in (1, 2, 3):
        byte("CONTROL", k, 0xFF)
    assert (g.read("PERF_PACKETS", P["WRITE_DATA"].index), g.read("PERF_DWORDS_FETCHED"), g.read("RB_RPTR")) == \
        counters and g.read("CONTROL") == 0, "a byte of CONTROL without its bits fired a pulse"
    byte("CONTROL", 0, g.value("CONTROL", PERF_CLEAR=1))
    assert (g.read("PERF_PACKETS", P["WRITE_DATA"].index), g.read("PERF_DWORDS_FETCHED"), g.read("RB_RPTR")) == \
        (0, 0, 7), "PERF_CLEAR from byte 0: the counters, not the pointers"
    # R: a byte write answers OKAY and changes nothing.
    for name in ("RB_RPTR", "RB_WPTR", "STATUS", "ID"):
        before = g.read(name)
        for k in range(4):
            byte(name, k, 0xA5)
        assert g.read(name) == before, name
    # CP_QUEUE_RESET: a queue stopped by an error stays so until byte 0 names it.
    ring.submit([0xC000FF00, 0])
    g.idle()
    assert g.fields("STATUS")["ERROR"] == 1
    for k in (1, 2, 3):
        byte("CP_QUEUE_RESET", k, 0xFF)
    g.dev.delay(50)
    assert g.fields("STATUS")["ERROR"] == 1 and g.read("RB_RPTR") == 7, "CP_QUEUE_RESET fired from another byte"
    ih.pop()
    byte("CP_QUEUE_RESET", 0, g.value("CP_QUEUE_RESET", Q0=1))
    st = g.idle()
    assert (st["ERROR"], g.read("RB_RPTR"), g.read("RB_WPTR")) == (0, 0, 0)
    ring.wptr = 0
    g.write("INT_STATUS", events)
    # SDMA_CNTL: QUEUE_RESET from byte 0 alone; TRAP_ENABLE kept by the other bytes' writes.
    s = SdmaRing(g, SRING, 6)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    s.submit([0x00000307])  # OP 7, SUB_OP 3: ILLEGAL_OPCODE
    assert g.idle("SDMA_STATUS")["ERROR"] == 1
    for k in (1, 2, 3):
        byte("SDMA_CNTL", k, 0xFF)
    g.dev.delay(50)
    assert g.fields("SDMA_STATUS")["ERROR"] == 1 and g.fields("SDMA_CNTL")["TRAP_ENABLE"] == 1
    g.until(lambda: ih.pop() or None, "the SDMA_ERROR entry")
    byte("SDMA_CNTL", 0, g.value("SDMA_CNTL", QUEUE_RESET=1, TRAP_ENABLE=1))
    st = g.idle("SDMA_STATUS")
    assert (st["ERROR"], g.read("SDMA_RB_RPTR"), g.fields("SDMA_CNTL")["TRAP_ENABLE"]) == (0, 0, 1)
    # Locked while enabled: RB_BASE_LO ignores a byte write while RB_CNTL.ENABLE is set,
    # and takes that byte alone once it is clear.
    base = g.read("RB_BASE_LO")
    byte("RB_BASE_LO", 1, 0x7E)
    assert g.read("RB_BASE_LO") == base
    g.set("RB_CNTL", ENABLE=0, RPTR_WB=1)
    byte("RB_BASE_LO", 1, 0x7E)
    assert g.read("RB_BASE_LO") == base & ~0xFF00 | 0x7E00
    g.write("RB_BASE_LO", base)
    g.set("RB_CNTL", ENABLE=1, RPTR_WB=1)
    # VM_INVALIDATE_REQ (W): VMID 1's entry of VA_OUT in the TLB, its PTE then moved.
    map_vmid1(g)

    def run(va, value):
        g.w32(PA_CODE, write_data(va, [value]))
        assert ring.run(ib(VA_CODE, 5, VMID=1))["ERROR"] == 0

    def ack(want):
        g.until(lambda: g.read("VM_INVALIDATE_ACK") == want, f"VM_INVALIDATE_ACK = {want:#x}")

    run(VA_OUT + 0x20, 0x11)
    assert g.r32(PA_OUT + 0x20) == 0x11
    g.write("VM_INVALIDATE_ADDR_LO", VA_RO >> 12)
    g.set("VM_INVALIDATE_REQ", PER_VMID=0b110)  # VA_RO's page of VMIDs 1 and 2: VA_OUT's entry stays
    ack(0b110)
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT2 | VALID | WRITEABLE | READABLE)
    byte("VM_INVALIDATE_REQ", 2, 1)  # ALL_ADDR's byte alone: no request
    run(VA_OUT + 0x24, 0x12)
    assert (g.r32(PA_OUT + 0x24), g.r32(PA_OUT2 + 0x24)) == (0x12, 0), \
        "a write of ALL_ADDR's byte alone made a request (the stale entry was dropped)"
    assert g.read("VM_INVALIDATE_ACK") == 0b110
    byte("VM_INVALIDATE_REQ", 0, 0b10)  # PER_VMID's byte 0: a request, ALL_ADDR from the last write
    ack(0b10)
    run(VA_OUT + 0x28, 0x13)
    assert (g.r32(PA_OUT + 0x28), g.r32(PA_OUT2 + 0x28)) == (0, 0x13), \
        "the request did not take ALL_ADDR from the byte written before it"
    byte("VM_INVALIDATE_REQ", 1, 0x80)  # byte 1: byte 0 from the last write
    ack(0x8002)


def check_irq_is_int_status_and_int_enable_bit_by_bit(dev):
    """irq = OR(INT_STATUS & INT_ENABLE), bit by bit: each event bit raised alone (INT_FORCE)
    drives the line through its own enable bit and through no other; IH_PENDING does through
    its enable while an entry is pending and stops when IH_RPTR reaches IH_WPTR; every enable
    set with nothing pending leaves the line low."""
    g, ring, ih = bring_up(dev)
    events = ("EOP", "CP_ERROR", "IH_OVERFLOW")
    enables = list(g.regs["INT_ENABLE"].fields)
    assert sorted(enables) == sorted(events + ("IH_PENDING",))
    all_events = g.value("INT_STATUS", **dict.fromkeys(events, 1))
    bad = []
    for f in events:
        g.write("INT_STATUS", all_events)
        g.set("INT_FORCE", **{f: 1})
        for e in enables:
            g.set("INT_ENABLE", **{e: 1})
            if dev.irq_level() != (e == f):
                bad.append(f"INT_STATUS.{f} with INT_ENABLE.{e} alone: irq {dev.irq_level()}")
        g.write("INT_ENABLE", 0)
    g.write("INT_STATUS", all_events)
    g.write("INT_ENABLE", 0xF)
    if dev.irq_level():
        bad.append("every enable set, nothing pending: irq high")
    g.write("INT_ENABLE", 0)
    ring.run(release_mem(OUT, 1, INT_SEL="SEND_INT"))
    g.until(lambda: g.fields("INT_STATUS")["IH_PENDING"], "the EOP entry")
    g.write("INT_STATUS", all_events)  # EOP cleared: IH_PENDING alone
    for e in enables:
        g.set("INT_ENABLE", **{e: 1})
        if dev.irq_level() != (e == "IH_PENDING"):
            bad.append(f"IH_PENDING with INT_ENABLE.{e} alone: irq {dev.irq_level()}")
    g.set("INT_ENABLE", IH_PENDING=1)
    ih.pop()  # IH_RPTR = IH_WPTR
    if dev.irq_level() or g.fields("INT_STATUS")["IH_PENDING"]:
        bad.append("IH_RPTR = IH_WPTR: IH_PENDING or the line still high")
    g.write("INT_ENABLE", 0)
    assert not bad, "\n".join(bad)


def check_offsets_beyond_the_aperture_are_refused_not_aliased(dev):
    """The aperture is 64 KiB (registers.md): an access at or beyond its end is the driver's
    mistake, refused by the Device API with one line on every backend (a ValueError naming
    the offset), and no register is touched. On the RTL, whose AXI4-Lite address has 16 bits,
    the cocotb backend put the offset on the bus cut to them until 7 December 2026: 0x10000
    read ID and a write of 0x10098 rang RB_DOORBELL (the model refused both)."""
    g, ring, ih = bring_up(dev)
    before = _snapshot(g)
    bad = []
    tries = [("read", 0x10000, lambda: dev.mmio_read32(0x10000)),
             ("read", 0x10008 + 0x20000, lambda: dev.mmio_read32(0x30008)),
             ("write", 0x10098, lambda: dev.mmio_write32(0x10098, 5)),
             ("write", 0x1000C, lambda: dev.mmio_write32(0x1000C, 0x1234)),
             ("narrow write", 0xFFFF, lambda: dev.mmio_write_bytes(0xFFFF, b"\x01\x02")),
             ("narrow write", 0x1000C, lambda: dev.mmio_write_bytes(0x1000C, b"\x77"))]
    for what, off, fn in tries:
        try:
            got = fn()
        except ValueError as e:
            if str(e) != f"MMIO offset {off:#x} is outside the 16-bit register space":
                bad.append(f"{what} at {off:#x}: {e}")
            continue
        except RuntimeError as e:  # (BusError: the access went out, cut to the aperture)
            bad.append(f"{what} at {off:#x}: went out as {e}")
            continue
        bad.append(f"{what} at {off:#x}: taken ({got!r}), not refused")
    assert not bad, "\n".join(bad)
    assert _snapshot(g) == before and (g.read("RB_WPTR"), g.read("SCRATCH")) == (0, 0)
    # the aperture's last dword is an offset like any other not listed: DECERR
    assert _bus_error(lambda: dev.mmio_read32(APERTURE - 4)) == 3


CHECKS = [check_every_offset_answers_as_registers_md_lists, check_bits_no_field_names_read_0,
          check_byte_writes_of_every_register_kind, check_irq_is_int_status_and_int_enable_bit_by_bit,
          check_offsets_beyond_the_aperture_are_refused_not_aliased]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())
