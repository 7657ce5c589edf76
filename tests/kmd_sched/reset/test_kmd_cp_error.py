"""The CP's error latches turned into sentences (kmd_model/reset/cp_error.py): every code, with
and without a known packet, at every level, and the places that carry no packet address
(doorbells, bus errors). The KMD prints these in WAIT_CS errors and crash reports; the
end-to-end cases are in test_kmd_reset.py."""

from __future__ import annotations

import pytest

from kmd_model import regs
from kmd_model.reset.cp_error import CpErrorState
from kmd_model.regs import CpError
from spec import packets
from spec import vm as vm_spec

WD = packets.WRITE_DATA.opcode
IB = packets.INDIRECT_BUFFER.opcode
DMA = packets.DMA_DATA.opcode


@pytest.mark.parametrize("code, opcode, what", [
    (CpError.ILLEGAL_OPCODE, 0x7B, "illegal opcode 0x7b"),
    (CpError.ILLEGAL_OPCODE, 0, "illegal packet header (type 0/1)"),
    (CpError.BAD_COUNT, WD, "bad COUNT in WRITE_DATA"),
    (CpError.BAD_COUNT, 0x7B, "bad COUNT in opcode 0x7b"),
    (CpError.IB_SIZE_ZERO, IB, "INDIRECT_BUFFER with IB_SIZE 0"),
    (CpError.IB_MISALIGNED, IB, "INDIRECT_BUFFER base not dword aligned"),
    (CpError.BUS_SLVERR, WD, "bus error SLVERR at address 0x5000 in WRITE_DATA"),
    (CpError.BUS_DECERR, 0, "bus error DECERR at address 0x5000 (its low 48 bits)"),
    (CpError.DOORBELL_BACKWARDS, 0, "doorbell moved wptr backwards to 0x5000"),
    (CpError.DOORBELL_OVERFLOW, 0, "doorbell wptr 0x5000 more than the ring size ahead of rptr"),
    (CpError.FENCE_MISALIGNED, packets.RELEASE_MEM.opcode, "misaligned address in RELEASE_MEM"),
    (CpError.DMA_BYTE_COUNT, DMA, "DMA_DATA byte count over the engine's limit"),
    (CpError.UNSUPPORTED, DMA, "unsupported field value in DMA_DATA"),
    (CpError.NONE, WD, "CP error NONE in WRITE_DATA"),
    (len(CpError), WD, f"CP error CODE_{len(CpError)} in WRITE_DATA"),  # the first code not defined
])
def test_what(code, opcode, what):
    assert CpErrorState(code, 1, opcode, 0x5000, 0).what() == what


@pytest.mark.parametrize("code, op, sub_op, what", [
    (CpError.BAD_COUNT, 0, 0, "bad COUNT in NOP"),
    (CpError.UNSUPPORTED, 1, 0, "unsupported field value in COPY_LINEAR"),
    (CpError.BAD_COUNT, 2, 0, "bad COUNT in WRITE_LINEAR"),
    (CpError.ILLEGAL_OPCODE, 0xF0, 0xFF, "illegal opcode 0xf0 SUB_OP 0xff"),
    (CpError.ILLEGAL_OPCODE, 1, 1, "illegal opcode 0x1 SUB_OP 0x1"),  # (AMD's COPY_TILED: not this SDMA's)
    (CpError.ILLEGAL_OPCODE, 0, 0x10, "illegal opcode 0x0 SUB_OP 0x10"),
    (CpError.ILLEGAL_OPCODE, 0x7B, 0, "illegal opcode 0x7b"),
    (CpError.BUS_SLVERR, 0xB, 0, "bus error SLVERR at address 0x5000 in CONSTANT_FILL"),
    (CpError.BUS_SLVERR, 0, 0, "bus error SLVERR at address 0x5000"),  # (OP 0: a header not read, no NOP)
    (CpError.BAD_COUNT, 0x37, 0, "bad COUNT in opcode 0x37"),  # (WRITE_DATA's opcode: no SDMA packet)
    # an SDMA IB base is 32-byte aligned (bits 4:0), not the CP's dword (bits 1:0)
    (CpError.IB_MISALIGNED, 4, 0, "INDIRECT_BUFFER base not 32-byte aligned"),
])
def test_what_of_the_sdma(code, op, sub_op, what):
    """SDMA_ERROR's OP was looked up in the CP's packet table and its SUB_OP dropped: "bad
    COUNT in opcode 0x0" for the SDMA's NOP, "unsupported field value in opcode 0x1" for a
    COPY_LINEAR, "illegal packet header (type 0/1)" (a PM4 header kind) for OP 0 with a SUB_OP."""
    assert CpErrorState(code, 1, op, 0x5000, 0, None, sdma=True, sub_op=sub_op).what() == what


def test_nesting_names_the_device_limit():
    s = CpErrorState(CpError.IB_NESTING, 2, IB, 0x5000, 0)
    assert s.what(2) == "INDIRECT_BUFFER nested deeper than the 2 IB levels"
    assert s.what() == "INDIRECT_BUFFER nested deeper than the IB levels"
    # the SDMA's IBs do not nest at all (docs/hardware.md): CAPS.IB_LEVELS is the CP's
    sdma_state = CpErrorState(CpError.IB_NESTING, 1, 4, 0x5000, 0, None, sdma=True)
    assert sdma_state.what(2) == "INDIRECT_BUFFER inside an SDMA IB (SDMA IBs do not nest)"


@pytest.mark.parametrize("code, level, where", [
    (CpError.ILLEGAL_OPCODE, 0, "ring+0x1c (0x5000)"),
    (CpError.ILLEGAL_OPCODE, 1, "IB+0x1c (0x5000)"),
    (CpError.ILLEGAL_OPCODE, 2, "IB2+0x1c (0x5000)"),
    (CpError.ILLEGAL_OPCODE, 3, "LEVEL_3+0x1c (0x5000)"),  # deeper than the register's names go
    (CpError.UNSUPPORTED, 1, "IB+0x1c (0x5000)"),
    # the address is the bus's or the doorbell's, not the packet's: not shown as the place
    (CpError.BUS_SLVERR, 1, "IB+0x1c"),
    (CpError.BUS_DECERR, 2, "IB2+0x1c"),
    (CpError.DOORBELL_BACKWARDS, 0, "ring+0x1c"),
    (CpError.DOORBELL_OVERFLOW, 0, "ring+0x1c"),
])
def test_where(code, level, where):
    assert CpErrorState(code, level, WD, 0x5000, 7).where() == where


def test_names_and_registers():
    f = regs.CP_ERROR
    s = CpErrorState.from_regs(f.CODE.put(CpError.BAD_COUNT) | f.LEVEL.put(2) | f.OPCODE.put(WD), 0x1234, 5)
    assert (s.code, s.level, s.opcode, s.addr, s.offset_dw) == (CpError.BAD_COUNT, 2, WD, 0x1234, 5)
    assert (s.code_name, s.level_name, s.opcode_name) == ("BAD_COUNT", "IB2", "WRITE_DATA")
    odd = CpErrorState(14, 3, 0x7B, 0, 0)
    assert (odd.code_name, odd.level_name, odd.opcode_name) == ("CODE_14", "LEVEL_3", None)


@pytest.mark.parametrize("cause, level, access, why", [
    (vm_spec.Cause.INVALID, 1, vm_spec.Access.WRITE, "no valid entry at page-table level 1"),
    (vm_spec.Cause.PERMISSION, 1, vm_spec.Access.WRITE, "permission missing"),
    (vm_spec.Cause.RANGE, 0, vm_spec.Access.FETCH, "beyond the page tables"),
    (vm_spec.Cause.WALK_ERROR, 0, vm_spec.Access.DMA_READ, "page-table read failed at level 0"),
])
def test_vm_fault_says_why_exactly(cause, level, access, why):
    """Each cause of VM_FAULT_STATUS in its words, with the access, the VMID and the packet."""
    F = regs.VM_FAULT_STATUS
    status = F.CAUSE.put(cause) | F.LEVEL.put(level) | F.ACCESS.put(access) | F.VMID.put(5)
    s = CpErrorState(CpError.VM_FAULT, 1, WD, 0x5000, 0, status)
    assert s.what() == f"VM fault: {access.name} at 0x5000 in WRITE_DATA (VMID 5, {why})"
    assert CpErrorState(CpError.VM_FAULT, 0, 0, 0x5000, 0, status).what() == \
        f"VM fault: {access.name} at 0x5000 (VMID 5, {why})"  # no packet: a ring fetch


def test_unchecked_write_above_2_48_is_reported_so():
    """With the CS checker off (the checker itself refuses such an address at CS, naming it
    whole: tests/kmd/test_kmd_checker.py), a WRITE_DATA at 2^48 + a mapped address is the
    CP's BUS_DECERR at the low 48 bits, translated as untranslated: the CP checks the bus's
    48 bits before the MMU sees the address (the RTL does; the model gave a VM fault,
    RANGE, and the KMD said "beyond the page tables")."""
    import kmd_model
    from kmd_model.uapi import KmdError
    from spec import pm4
    from testbench.refmodel import RefModel
    from tests.kmd.test_kmd_ioctl import Client
    kmd = kmd_model.bind(RefModel(), cs_check=False)
    c = Client()
    bo = c.bo(0x4000)
    seq = c.submit(c.ib(bo, pm4.write_data(1 << 48 | (bo.addr + 0x100), [1])))
    with pytest.raises(KmdError) as ei:
        c.wait(seq)
    assert ei.value.message == (f"WAIT_CS: bus error DECERR at address {bo.addr + 0x100:#x} (its low 48 bits) in WRITE_DATA at IB+0x0, "
                                f"context {c.ctx}")
    assert not bo.u32[0x40] and kmd.stats["vm_faults"] == 0
