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

from tests.kmd.uapi.test_kmd_uapi_contract import PAGE, Umd, ib, refused
from tests.kmd.uapi.test_kmd_uapi_lifetimes import held_writing_a_page


@pytest.mark.parametrize("how, cause", [("CLEAR", "INVALID"), ("REPLACE read-only", "PERMISSION")])
def test_a_gfx_jobs_vm_fault_is_info_vm_fault_field_by_field(how, cause):
    """A held job writes a page after its hold; its range is CLEARed (no entry: INVALID) or
    REPLACEd by a READABLE-only mapping (PERMISSION) under it: the job faults (WAIT_CS
    ECANCELED) and VM_FAULT says where, with which VMID, what access and why, at the leaf
    level (the page's entry), each field the status register's."""
    u, ctx, u32, h, va, t, tva, job = held_writing_a_page(0x10)
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


def test_a_refused_packets_packet_at_names_it_and_the_calls_that_ran_its_ib():
    """PacketAt, a checker refusal's KmdError.info: the packet's address as the client's IB
    holds it, and `via` the INDIRECT_BUFFER packets that called its IB, outermost first:
    empty for a packet of an IB chunk and for one of an IB the chunk chains to (CHAIN), the
    calling packet's address for one in an IB2. The message names the packet's address too."""
    kmd_model.bind(RefModel())
    u = Umd()
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    hole = u.va + 0x10_0000  # mapped by nothing: a write there is refused
    bad = pm4.write_data(hole, [1])
    u32[0x400 // 4:0x420 // 4] = pm4.pad(2) + bad + pm4.pad(6 - len(bad))  # an IB2, its packet at +0x8
    u32[0xC00 // 4:0xC20 // 4] = bad + pm4.pad(8 - len(bad))  # an IB chained to
    first = pm4.write_data(va + 0x2000, [1])
    call = pm4.indirect_buffer(va + 0x400, 8)
    cases = [
        (ib(u32, first + call, handle=h), uapi.PacketAt(va + 0x408, (va + 4 * len(first),))),
        (ib(u32, bad, offset=0x600, handle=h), uapi.PacketAt(va + 0x600, ())),
        (ib(u32, pm4.indirect_buffer(va + 0xC00, 8, chain=1), offset=0x800, handle=h), uapi.PacketAt(va + 0xC00, ())),
    ]
    for chunk, at in cases:
        e = refused(errno.EINVAL, "CS", u.cs, ctx, chunk)
        assert e.info == at, (e, e.info)
        assert f"({at.addr:#x}) writes [{hole:#x}, {hole + 4:#x}), outside every mapping" in e.message, e.message
    assert u.wait(ctx, u.cs(ctx, ib(u32, first, offset=0x1000, handle=h)))  # none took a seqno: 1
