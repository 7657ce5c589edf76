"""cp_ih: the IH ring (rtl/cp/ih.py and the CP's IH pointers): no entry over an unread one,
each at its slot, overflow drops, IH_WPTR steps by one entry, IH_PENDING level-true."""

from rtl.cp.writer import WriteSource
from spec import ih as ih_spec


def build(h, m, b, csr, cp):
    ih_wptr, ih_rptr = b("ih_wptr"), csr.ih_rptr
    nbytes = b("ih_bytes")
    used = (ih_wptr - ih_rptr)[:32]
    in_reset = h.state("RESET")
    was = h.past
    writer_start = h.writer_start()
    # a write starts, and it is the IH entry (the writer reads the block from the IH
    # entry's registers: `wr_src`)
    entry = h.started & writer_start & (b("wr_src") == WriteSource.IH)
    slot = (b("ih_base") + (ih_wptr & (nbytes - 1)))[:48]
    h.prove("no_overwrite", ~entry | (used < nbytes))
    h.prove("entry_slot", ~entry | (b("req_block", "writer") == slot[5:]) &
               (b("req_mask", "writer") == 0xFF))
    h.invariant(~h.state("IH_ENTRY_WRITE") | (used < nbytes))
    # (IH_RPTR may stop inside an entry: the ring is at most an entry less a byte over;
    # after a soft reset, until the driver sets IH_RPTR to 0 the ring looks full)
    h.invariant((used < nbytes + ih_spec.ENTRY_BYTES) | (ih_wptr == 0))
    # an entry's write is asked for from IH_ENTRY_WAIT: the ring had room (IH_RPTR only
    # moves forward meanwhile) and the block is the entry at its slot (until it is sent: the
    # state then loads the wptr write-back's request)
    h.invariant(~h.state("IH_ENTRY_WAIT") | ((used < nbytes) & (b("sent", "writer") |
                                                                (b("blk_addr")[5:] == slot[5:]) &
                                                                (b("blk_mask") == 0xFF) &
                                                                (b("wr_src") == WriteSource.IH))))
    # (whether the ring is full is kept a cycle ahead: it was full a cycle ago)
    ovf = b("ovf_set")
    h.prove("overflow_drops", ~ovf | (h.started & was(used >= nbytes) & ~writer_start))
    h.prove("overflow_keeps_wptr", ~(h.started & was(ovf)) | (ih_wptr == was(ih_wptr)) | was(in_reset))
    step = (ih_wptr - was(ih_wptr))[:32]
    h.prove("wptr_step", ~(h.started & (ih_wptr != was(ih_wptr))) |
               (step == ih_spec.ENTRY_BYTES) | (was(in_reset) & (ih_wptr == 0)))
    # (IH_PENDING is a register, worked out from what IH_WPTR and IH_RPTR become: it
    # compares them as they are, so it drops in the cycle an IH_RPTR write is answered)
    h.prove("pending_level", ~h.started | (csr.int_status_ih_pending == (ih_wptr != ih_rptr)))

    h.cover("overflow", ovf)
    h.cover("eop", b("eop_set"))
    # (answered after its entry was written, not dropped)
    h.cover("ext_entry", cp.ext_ih_done & b("ih_written"))

