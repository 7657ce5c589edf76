"""Block writer: the CP's memory writes, one 32-byte block at a time.

Every CP write (WRITE_DATA dwords, RELEASE_MEM fences, rptr/wptr write-back, IH entries)
fits in an aligned 32-byte block, which can never cross a 4 KiB boundary. The requester
places dwords at their block positions and says which to write (`req_mask`); it raises
`req_valid` from a register and holds it until `done`, and the block, mask, user and data
until `sent` (the writer asks for the data beat by beat while it writes: `beat_data` is the
block's beat `beat`). `sent` (from registers) says the write's AW and last W beat are
accepted: the writer reads nothing more of the request, so the requester may load its next
request's block, mask, user and data while the response is awaited (AXI A3.3.1: B comes
only after both, so `sent` is always up in the cycle of `done`). The writer issues one INCR burst covering the touched beats with byte
strobes, offering AW and the first W beat in the same cycle, waits for the write response
and reports it. One write at a time: the CP waits for
every response anyway (errors are then exact, and a fence is never visible before the
data it follows); a request raised in the cycle of `done` is the next write.

Every AXI VALID comes from a register and every address, length and strobe from the
requester's registers through a few LUTs, so no path runs from the CP's state machine
to the bus in one cycle (issue 14: that path set the front end's Fmax).

With `req_user`, a request carries AxUSER (`req_user`: the MMU's VMID and access kind,
held with the request), and with `resp_user` the response's BUSER comes with `done` as
`user`.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

BLOCK_DWORDS = 8


class WriteSource:
    """Where the CP keeps the block it asks the writer to write (rtl/cp/processor.py)."""
    BLOCK = 0  # the block buffer (WRITE_DATA)
    VALUE = 1  # `wval`: 64 bits over every pair of dwords (fences, rptr/wptr write-back)
    IH = 2  # the IH entry's registers


class BlockWriter(wiring.Component):
    def __init__(self, data_width: int = 64, addr_width: int = 48, req_user: int = 0, resp_user: int = 0):
        assert data_width in (32, 64, 128, 256)
        self.data_width = data_width
        self.addr_width = addr_width
        self.req_user_width = req_user
        self.resp_user_width = resp_user
        user = {}
        if req_user:
            user.update(req_user=In(req_user), awuser=Out(req_user))
        if resp_user:
            user.update(buser=In(resp_user), user=Out(resp_user))
        super().__init__(user | {
            # held from the request until `done` (the CP's block buffer)
            "req_valid": In(1),
            "req_block": In(addr_width - 5),  # address bits [47:5]
            "req_mask": In(BLOCK_DWORDS),  # dwords of the block to write
            "beat": Out(max(1, ceil_log2(BLOCK_DWORDS * 32 // data_width))),  # the beat being written
            "beat_data": In(data_width),  # the block's dwords of that beat, lowest first
            "req_ready": Out(1),  # no write under way: a request raised now starts next cycle
            "done": Out(1), "resp": Out(2),  # pulse when the write response arrives
            "awvalid": Out(1), "awready": In(1), "awaddr": Out(addr_width), "awlen": Out(8),
            "wvalid": Out(1), "wready": In(1), "wdata": Out(data_width),
            "wstrb": Out(data_width // 8), "wlast": Out(1),
            "bvalid": In(1), "bresp": In(2),
            "busy": Out(1),
            "sent": Out(1),  # AW and the last W beat accepted: only the response is awaited
        })

    def elaborate(self, platform):
        m = Module()
        dpb = self.data_width // 32
        nbeats = max(1, BLOCK_DWORDS // dpb)  # beats per block
        bw = max(1, ceil_log2(nbeats))
        shift = ceil_log2(dpb)
        mask = self.req_mask

        aw_sent = Signal()  # AW of the current request accepted
        w_sent = Signal()  # its last W beat accepted
        w_started = Signal()  # a W beat of it accepted: `beat` holds the next one
        beat = Signal(bw)

        # first and last touched dword → first and last beat (from the requester's registers)
        lo = Signal(3)
        hi = Signal(3)
        for i in reversed(range(BLOCK_DWORDS)):
            with m.If(mask[i]):
                m.d.comb += lo.eq(i)
        for i in range(BLOCK_DWORDS):
            with m.If(mask[i]):
                m.d.comb += hi.eq(i)
        first = Signal(bw)
        last = Signal(bw)
        m.d.comb += [first.eq(lo >> shift), last.eq(hi >> shift)]
        cur = Signal(bw)
        m.d.comb += cur.eq(Mux(w_started, beat, first))

        m.d.comb += [
            self.busy.eq(self.req_valid),
            self.sent.eq(aw_sent & w_sent),
            self.req_ready.eq(~self.req_valid | self.bvalid),
            self.awvalid.eq(self.req_valid & ~aw_sent),
            self.awaddr.eq(Cat(Const(0, 5), self.req_block) | (first << (shift + 2) if nbeats > 1 else 0)),
            self.awlen.eq(last - first),
        ]
        if self.req_user_width:
            m.d.comb += self.awuser.eq(self.req_user)
        beat_mask = mask.word_select(cur, dpb) if nbeats > 1 else mask
        m.d.comb += [
            self.beat.eq(cur),
            self.wvalid.eq(self.req_valid & ~w_sent),
            self.wdata.eq(self.beat_data),
            self.wstrb.eq(Cat(b.replicate(4) for b in beat_mask)),
            self.wlast.eq(cur == last),
        ]
        with m.If(self.awvalid & self.awready):
            m.d.sync += aw_sent.eq(1)
        with m.If(self.wvalid & self.wready):
            m.d.sync += [w_started.eq(1), beat.eq(cur + 1)]
            with m.If(self.wlast):
                m.d.sync += w_sent.eq(1)
        # (the only write in flight is this one: its B ends it)
        with m.If(self.bvalid):
            m.d.comb += [self.done.eq(1), self.resp.eq(self.bresp)]
            if self.resp_user_width:
                m.d.comb += self.user.eq(self.buser)
            m.d.sync += [aw_sent.eq(0), w_sent.eq(0), w_started.eq(0)]
        return m
