"""IH writer: an interrupt becomes an 8-dword entry (spec/ih.py) in the IH ring, written as
one 32-byte block from the entry's own registers (not through the CP's block buffer),
then IH_WPTR moves, INT_STATUS.EOP is set for an EOP entry (with IH_PENDING, in the same
cycle), and IH_WPTR is written back with IH_CNTL.WPTR_WB.

`c` is the CP's context (rtl/cp/processor.py): its signals and helpers by name."""

from amaranth.hdl import Cat, Const

from spec import ih as ih_spec

from .writer import BLOCK_DWORDS, WriteSource

FULL = Const((1 << BLOCK_DWORDS) - 1, BLOCK_DWORDS)  # an entry is a whole block
# where another engine's entry (ext_ih_*) returns to: the states the CP appends them in
RET_RUN, RET_ERROR, RET_WRM = 0, 1, 2
_RET_STATES = {RET_RUN: "RUN", RET_ERROR: "ERROR", RET_WRM: "WRM_SLEEP"}


def load(c, src, data, client=ih_spec.Client.GRBM_CP, vmid=None, err=False):
    """The entry's client and source ids, the VMID (default: the packet's), the four source
    data dwords and the GPU clock now into the entry's registers, which the writer reads as
    one 32-byte block. `err`: the entry reports the error that stopped the CP (after it, the
    CP stays stopped)."""
    m = c.m
    m.d.sync += [c.ih_src.eq(src), c.ih_ts.eq(c.cp.timestamp), c.ih_client.eq(client), c.ih_ring.eq(c.q),
                 c.ih_vmid.eq(c.cur_vmid if vmid is None else vmid), c.ih_err.eq(err)]
    m.d.sync += [c.ih_data[i].eq(d) for i, d in enumerate(data)]


def will_request(c):
    """request() asks for the entry's write (else it drops the entry, or counts an overflow)."""
    return c.csr.ih_cntl_enable & ~c.ih_entry_full


def request(c, prepared=None, asked=False):
    """Append the entry load() holds (in this cycle's FSM transition), or count an overflow.
    `prepared`: the block request (address, mask, source) is loaded already, and this Value
    says whether to ask for the write (a speculative first step asks only if its checks pass);
    `asked`: the request is loaded already and the caller asks for the write (`wr_again`, when
    will_request() says so). The entry is written with VMID 0 (the kernel's IH ring)."""
    m = c.m
    m.d.sync += c.ih_written.eq(0)
    with m.If(~c.csr.ih_cntl_enable):
        m.next = "IH_DONE"
    with m.Elif(c.ih_entry_full):
        m.d.comb += c.ovf_set.eq(1)
        m.next = "IH_DONE"
    with m.Else():
        if asked:
            m.next = "IH_ENTRY_WAIT"
        elif prepared is not None:
            m.d.comb += c.wr_set.eq(prepared)
            m.next = "IH_ENTRY_WAIT"
        else:
            load_request(c)
            c.request_block("IH_ENTRY_WRITE", "IH_ENTRY_WAIT")


def load_request(c):
    """The entry's block request (its slot, the whole block, the entry's registers, VMID 0)."""
    c.load_block(c.ih_entry_addr, FULL, WriteSource.IH, vmid=0)


def start(c, src, data, **kw):
    """Append an IH entry (in this cycle's FSM transition); `kw` as load()'s."""
    load(c, src, data, **kw)
    request(c)


def start_ext(c, ret):
    """Append the entry another engine requests (ext_ih_*: the SDMA's), in this cycle's FSM
    transition from state `ret` (RET_*), which it returns to; its write's response goes back
    with `ext_ih_done`. A failed write is the other engine's error, not the CP's."""
    cp = c.cp
    load(c, cp.ext_ih_src, [cp.ext_ih_data[32 * i:32 * (i + 1)] for i in range(4)], client=cp.ext_ih_client,
         vmid=cp.ext_ih_vmid)
    c.m.d.sync += c.ih_ring.eq(0)  # (RING_ID is the CP queue's: 0 for another engine)
    c.m.d.sync += [c.ih_ext.eq(1), c.ih_ret.eq(ret)]
    request(c)


def _ext(c):
    """The entry in hand is another engine's: its request holds until it is answered (a soft
    reset drops it, and resets the CP too), so the flag counts only while it does."""
    return c.ih_ext & c.cp.ext_ih_valid


def _ext_finish(c, resp=None, user=None):
    """The other engine's entry is written (or dropped): answer it, go back."""
    m, cp = c.m, c.cp
    m.d.comb += cp.ext_ih_done.eq(1)
    if resp is not None:
        m.d.comb += [cp.ext_ih_resp.eq(resp), cp.ext_ih_user.eq(user)]
    m.d.sync += c.ih_ext.eq(0)
    for ret, name in _RET_STATES.items():
        with m.If(c.ih_ret == ret):
            m.next = name


def entry(client, src, vmid, ts, data, ring=0):
    """The entry's eight dwords from its registers, at the positions spec/ih.py gives
    (fields this front end does not drive, such as PASID, are 0)."""
    values = {
        "CLIENT_ID": client, "SOURCE_ID": src, "VMID": vmid, "RING_ID": Const(0, 8) | ring,
        "TIMESTAMP_LO": ts[:32], "TIMESTAMP_HI": ts[32:48],
        "DATA0": data[0], "DATA1": data[1], "DATA2": data[2], "DATA3": data[3],
    }
    dwords = []
    for d in range(ih_spec.ENTRY_DWORDS):
        parts = []
        pos = 0
        for f in sorted((f for f in ih_spec.FIELDS if f.dword == d), key=lambda f: f.lsb):
            if f.lsb > pos:
                parts.append(Const(0, f.lsb - pos))
            parts.append(values[f.name][:f.width] if f.name in values else Const(0, f.width))
            pos = f.lsb + f.width
        if pos < 32:
            parts.append(Const(0, 32 - pos))
        dwords.append(Cat(*parts))
    return Cat(*dwords)


def states(c):
    """Append an entry (EOP or CP_ERROR), then write back the wptr."""
    m, state, writer = c.m, c.state, c.writer
    m.d.comb += c.cp.ext_ih_addr.eq(c.wr_addr)  # (a failed write's address, with ext_ih_done)
    with state("IH_ENTRY_WRITE"):
        c.request_write("IH_ENTRY_WAIT")
    with state("IH_ENTRY_WAIT"):
        m.d.comb += c.stall.eq(1)
        wb_addr = Cat(Const(0, 2), c.csr.ih_wptr_addr_lo[2:], c.csr.ih_wptr_addr_hi)
        # the wptr write-back's request, loaded once the entry is sent (the writer reads no
        # more of it) rather than when it is answered: if the answer asks for no write-back,
        # nothing reads them before the next request loads its own
        with m.If(writer.sent):
            c.load_dwords(wb_addr, c.ih_wptr + ih_spec.ENTRY_BYTES, vmid=0)
        m.d.comb += c.wr_again.eq(c.csr.ih_cntl_wptr_wb)  # (the write-back, with an OKAY answer)
        with m.If(c.wr_bad):
            with m.If(_ext(c)):
                _ext_finish(c, writer.resp, writer.user)
            with m.Elif(c.ih_err):
                m.next = "ERROR"  # reporting an error failed: the entry is lost
            with m.Else():
                c.write_failed()  # at the written address
        with m.Elif(c.wr_ok):
            # INT_STATUS.EOP rises with IH_PENDING (the irq line), not after the wptr
            # write-back: a handler woken by the line before the write-back lands finds
            # no entry, and then reads INT_STATUS for the event (kmd_model/irq/handler.py)
            m.d.comb += [c.ih_advance.eq(1), c.eop_set.eq(~c.ih_err & ~_ext(c))]  # (not another engine's)
            m.d.sync += c.ih_written.eq(1)
            m.d.sync += c.ih_wptr.eq(c.ih_wptr + ih_spec.ENTRY_BYTES)  # AMD: bytes
            with m.If(c.csr.ih_cntl_wptr_wb):
                m.next = "IH_WB_WAIT"  # (loaded above, asked for by `wr_again`)
            with m.Else():
                m.next = "IH_DONE"
    with state("IH_WB_WRITE"):
        c.request_write("IH_WB_WAIT")
    with state("IH_WB_WAIT"):
        m.d.comb += c.stall.eq(1)
        with m.If(c.wr_bad & _ext(c)):
            _ext_finish(c, writer.resp, writer.user)
        with m.Elif(c.wr_bad & ~c.ih_err):
            c.write_failed()  # at the written address
        with m.Elif(writer.done & c.ih_err):
            m.next = "ERROR"
        with m.Elif(c.wr_ok):
            m.next = "IH_DONE"
    with state("IH_DONE"):
        with m.If(c.ih_err):
            m.next = "ERROR"
        with m.Else():
            m.d.comb += c.eop_set.eq(~c.ih_written)  # (no entry: IH disabled, or full)
            m.next = "DONE"
        with m.If(_ext(c)):  # another engine's entry: no EOP; back where it came from
            m.d.comb += c.eop_set.eq(0)
            _ext_finish(c)
