"""What the uAPI says of a failed job, field by field (docs/uapi.md): INFO VM_FAULT
(VmFaultInfo) after a GFX job's fault, where the other uAPI tests held its address (a GFX
fault) and its all-0 fields for an SDMA fault, but no test read what a CP fault latches
(status, its VMID, access, cause and level, each the status's field by spec/vm.py's names);
and HwErrorInfo, a CP error's KmdError.info at WAIT_CS, whose message the page showed as
"illegal opcode 0x7b at IB1+0x40 (0x201040), context 3" where the driver says "IB+0x40"
(an IB1 is "IB" in every message, as in crash reports and the checker's: the page was wrong).
"""

from __future__ import annotations

import errno

import pytest

import kmd_model
from kmd_model import regs, uapi
from kmd_model.uapi import InfoQuery, Request, VaOp, VmFlags
from spec import pm4, vm as vm_spec
from testbench.refmodel import RefModel

from tests.kmd.uapi.test_kmd_uapi_contract import PAGE, RW, Umd, ib, refused
from tests.kmd.uapi.test_kmd_uapi_lifetimes import held


@pytest.mark.parametrize("how, cause", [("CLEAR", "INVALID"), ("REPLACE read-only", "PERMISSION")])
def test_a_gfx_jobs_vm_fault_is_info_vm_fault_field_by_field(how, cause):
    """A held job writes a page after its hold; its range is CLEARed (no entry: INVALID) or
    REPLACEd by a READABLE-only mapping (PERMISSION) under it: the job faults (WAIT_CS
    ECANCELED) and VM_FAULT says where, with which VMID, what access and why, at the leaf
    level (the page's entry), each field the status register's."""
    kmd_model.bind(RefModel(), job_timeout=20_000)
    u = Umd()
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    t = u.create(PAGE)
    tva = u.va
    u.va += 2 * PAGE
    u.map(t, tva, PAGE, flags=RW)
    job = held(u, ctx, u32, h, va, pm4.write_data(tva + 0x10, [0x77]))
    if how == "CLEAR":
        u.io(Request.GEM_VA, uapi.GemVaArgs(0, VaOp.CLEAR, tva, 0, PAGE, 0))
    else:
        u.map(u.create(PAGE), tva, PAGE, flags=VmFlags.READABLE, op=VaOp.REPLACE)
    u32[0x3000 // 4] = 1
    e = refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, job)
    assert e.info.addr == tva + 0x10
    f = u.io(Request.INFO, uapi.InfoArgs(InfoQuery.VM_FAULT))
    st = regs.VM_FAULT_STATUS
    assert f.addr == tva + 0x10 and f.status != 0
    assert (f.vmid, f.access, f.cause, f.level) == (
        st.VMID.get(f.status), vm_spec.Access(st.ACCESS.get(f.status)).name,
        vm_spec.Cause(st.CAUSE.get(f.status)).name, st.LEVEL.get(f.status))
    assert f.vmid in range(1, 16) and (f.access, f.cause) == ("WRITE", cause)
    assert f.level == u.info.vm_levels - 1  # the page's entry (its table stays: the BO's page is all that went)


def test_a_cp_errors_hw_error_info_field_by_field():
    """HwErrorInfo: an illegal opcode 0x7b 0x40 bytes into a job's IB (the checker off, as it
    refuses the packet): its code, level, opcode (no name: unknown), offset, address (the
    client's VA), seqno, context and message, in the form the page shows."""
    kmd_model.bind(RefModel(), cs_check=False, job_timeout=20_000)
    u = Umd()
    u.ctx()
    ctx = u.ctx()  # (context 2: the message names the right one)
    h, u32, va = u.bo(0x4000)
    ok = u.cs(ctx, ib(u32, pm4.write_data(va + 0x2000, [1]), handle=h))
    bad = u.cs(ctx, ib(u32, pm4.nop(15) + [pm4.header(0x7B, 0), 0], offset=0x100, handle=h))
    e = refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, bad)
    want = uapi.HwErrorInfo(code="ILLEGAL_OPCODE", level="IB1", opcode=0x7B, opcode_name=None, offset=0x40,
                            addr=va + 0x140, seq=bad, ctx_id=ctx,
                            message=f"illegal opcode 0x7b at IB+0x40 ({va + 0x140:#x}), context {ctx}")
    assert e.info == want and e.message == f"WAIT_CS: {want.message}"
    assert u.wait(ctx, ok) and bad == ok + 1
