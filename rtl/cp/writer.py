"""Block writer: the CP's memory writes, one 32-byte block at a time.

Every CP write (WRITE_DATA dwords, RELEASE_MEM fences, rptr/wptr write-back, IH entries)
fits in an aligned 32-byte block, which can never cross a 4 KiB boundary. The requester
places dwords at their block positions and says which to write (`req_mask`), and holds
them (`req_data`) until the write is answered, as the writer reads them beat by beat; the writer
issues one INCR burst covering the touched beats with byte strobes, waits for the write
response and reports it. One write at a time: the CP waits for every response anyway
(errors are then exact, and a fence is never visible before the data it follows); the
next request is taken in the cycle the response arrives.

With `user_width`, a request carries AxUSER (`req_user`: the MMU's VMID and access kind),
and the response's BUSER comes with `done` as `user`.
"""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

BLOCK_DWORDS = 8


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
            "req_valid": In(1), "req_ready": Out(1),
            "req_block": In(addr_width - 5),  # address bits [47:5]
            "req_mask": In(BLOCK_DWORDS),  # dwords of the block to write
            # dword i at bits [32i+31:32i]; read while the write goes out, so the requester
            # holds it from the cycle after the request until `done` (the CP's block buffer)
            "req_data": In(32 * BLOCK_DWORDS),
            "done": Out(1), "resp": Out(2),  # pulse when the write response arrives
            "awvalid": Out(1), "awready": In(1), "awaddr": Out(addr_width), "awlen": Out(8),
            "wvalid": Out(1), "wready": In(1), "wdata": Out(data_width),
            "wstrb": Out(data_width // 8), "wlast": Out(1),
            "bvalid": In(1), "bresp": In(2),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        dpb = self.data_width // 32
        nbeats = max(1, BLOCK_DWORDS // dpb)  # beats per block
        bw = max(1, ceil_log2(nbeats))

        block = Signal(self.addr_width - 5)
        mask = Signal(BLOCK_DWORDS)
        user = Signal(max(1, self.req_user_width))
        data = self.req_data
        first_beat = Signal(bw)
        last_beat = Signal(bw)
        beat = Signal(bw)
        aw_pending = Signal()
        w_pending = Signal()

        # first and last touched dword of the request → first and last beat
        lo = Signal(3)
        hi = Signal(3)
        for i in reversed(range(BLOCK_DWORDS)):
            with m.If(self.req_mask[i]):
                m.d.comb += lo.eq(i)
        for i in range(BLOCK_DWORDS):
            with m.If(self.req_mask[i]):
                m.d.comb += hi.eq(i)
        shift = ceil_log2(dpb)

        m.d.comb += self.busy.eq(aw_pending | w_pending)  # and in BURST/RESP (below)

        def accept():
            with m.If(self.req_valid):
                if self.req_user_width:
                    m.d.sync += user.eq(self.req_user)
                m.d.sync += [
                    block.eq(self.req_block), mask.eq(self.req_mask),
                    first_beat.eq(lo >> shift), last_beat.eq(hi >> shift), beat.eq(lo >> shift),
                    aw_pending.eq(~self.awready), w_pending.eq(1),  # AW goes out at once
                ]
                m.next = "BURST"

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.req_ready.eq(1)
                accept()
            with m.State("BURST"):
                m.d.comb += self.busy.eq(1)
                with m.If(~aw_pending & ~w_pending):
                    m.next = "RESP"
            with m.State("RESP"):
                m.d.comb += self.busy.eq(1)
                with m.If(self.bvalid):
                    # the next request may come in the cycle this one is answered (an IH
                    # entry right after its fence write is confirmed)
                    m.d.comb += [self.done.eq(1), self.resp.eq(self.bresp), self.req_ready.eq(1)]
                    if self.resp_user_width:
                        m.d.comb += self.user.eq(self.buser)
                    m.next = "IDLE"
                    accept()

        # The address goes out in the cycle the request is taken (straight from the request),
        # or from the registers while it waits for AWREADY: either way it is stable.
        with m.If(self.req_ready):
            m.d.comb += [
                self.awvalid.eq(self.req_valid),
                self.awaddr.eq(Cat(Const(0, 5), self.req_block) |
                               ((lo >> shift) << (shift + 2) if nbeats > 1 else 0)),
                self.awlen.eq((hi >> shift) - (lo >> shift)),
            ]
            if self.req_user_width:
                m.d.comb += self.awuser.eq(self.req_user)
        with m.Else():
            m.d.comb += [
                self.awvalid.eq(aw_pending),
                self.awaddr.eq(Cat(Const(0, 5), block) | (first_beat << (shift + 2) if nbeats > 1 else 0)),
                self.awlen.eq(last_beat - first_beat),
            ]
            if self.req_user_width:
                m.d.comb += self.awuser.eq(user)
        with m.If(aw_pending & self.awready):
            m.d.sync += aw_pending.eq(0)

        beat_data = data.word_select(beat, self.data_width) if nbeats > 1 else data[:self.data_width]
        beat_mask = mask.word_select(beat, dpb) if nbeats > 1 else mask
        if dpb >= BLOCK_DWORDS:
            # a beat wider than the block (never at ≤ 256 bits): only the block's lanes
            beat_data = data
            beat_mask = mask
        m.d.comb += [
            self.wvalid.eq(w_pending),
            self.wdata.eq(beat_data),
            self.wstrb.eq(Cat(b.replicate(4) for b in beat_mask)),
            self.wlast.eq(beat == last_beat),
        ]
        with m.If(self.wvalid & self.wready):
            m.d.sync += beat.eq(beat + 1)
            with m.If(self.wlast):
                m.d.sync += w_pending.eq(0)
        return m
