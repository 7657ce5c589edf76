"""Dword fetcher: reads a ring or an IB ahead of the parser with AXI4 INCR bursts.

The CP has one fetcher per level (ring, IB1, IB2), as AMD's CP keeps separate ring/IB1/IB2
fetch queues, so the ring's prefetched dwords stay valid while an IB runs.

A fetcher reads dword indices [ptr, end) of a buffer at `base`, where index i lives at
`base + 4 * (i & mask)` (the ring wraps with mask = size − 1; an IB has mask = all ones).
`end` may grow while it runs (a doorbell moves the ring's wptr). Bursts never cross 4 KiB
or the ring's wrap point and never read past `end`. Space in the beat buffer is reserved
when a burst is issued, so R beats are always accepted (rready is constant 1).

`flush` drops everything: buffered beats are discarded and beats still in flight are
counted down and thrown away as they arrive, so a redirect never sees stale data.
Dwords come out one per cycle with the AXI response of their beat (an error response
poisons the dwords of that beat; the parser reports it only if it consumes one).
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2


class Fetcher(wiring.Component):
    def __init__(self, data_width: int = 64, addr_width: int = 48, depth_beats: int = 8,
                 max_burst_beats: int = 8):
        assert data_width in (32, 64, 128, 256)
        assert depth_beats >= max_burst_beats and depth_beats & (depth_beats - 1) == 0
        self.data_width = data_width
        self.addr_width = addr_width
        self.dpb = data_width // 32  # dwords per beat
        self.depth = depth_beats
        self.max_burst = max_burst_beats
        super().__init__({
            # control
            "start": In(1), "base": In(addr_width), "mask": In(32), "ptr": In(32), "end": In(32),
            "flush": In(1),
            # AXI read address / data (the R channel is routed here by ID)
            "arvalid": Out(1), "arready": In(1), "araddr": Out(addr_width), "arlen": Out(8),
            "rvalid": In(1), "rdata": In(data_width), "rresp": In(2), "rlast": In(1),
            # dword stream to the parser
            "dw_valid": Out(1), "dw_data": Out(32), "dw_resp": Out(2), "dw_ready": In(1),
            # reads still in flight (including ones being dropped after a flush)
            "busy": Out(1),
            # dwords fetched (for PERF_DWORDS_FETCHED): pulses with the count of a burst's dwords
            "fetched": Out(range(max_burst_beats * (data_width // 32) + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        dpb, depth = self.dpb, self.depth
        idx_w = max(1, ceil_log2(dpb))
        cnt_w = ceil_log2(depth + 1)

        active = Signal()
        base = Signal(self.addr_width)
        mask = Signal(32)
        fptr = Signal(32)  # next dword index to request

        # ---- beat buffer: data, response, first and last valid dword index in the beat
        buf_data = Array(Signal(self.data_width, name=f"buf_data{i}") for i in range(depth))
        buf_resp = Array(Signal(2, name=f"buf_resp{i}") for i in range(depth))
        buf_first = Array(Signal(idx_w, name=f"buf_first{i}") for i in range(depth))
        buf_last = Array(Signal(idx_w, name=f"buf_last{i}") for i in range(depth))
        rd = Signal(ceil_log2(depth))
        wr = Signal(ceil_log2(depth))
        level = Signal(cnt_w)
        outstanding = Signal(cnt_w)  # beats requested, not yet received (counting ones to drop)
        drop = Signal(cnt_w)  # of those, beats to discard (requested before a flush)

        # ---- bursts in flight: (first dword index in first beat, dwords) per burst
        nb_w = ceil_log2(self.max_burst * dpb + 1)
        cmd_first = Array(Signal(idx_w, name=f"cmd_first{i}") for i in range(depth))
        cmd_n = Array(Signal(nb_w, name=f"cmd_n{i}") for i in range(depth))
        crd = Signal(ceil_log2(depth))
        cwr = Signal(ceil_log2(depth))
        cur_left = Signal(nb_w)  # dwords of the head burst not yet received
        cur_started = Signal()  # the head burst has delivered a beat

        # ---- issue: how many dwords the next burst may read
        remaining = Signal(32)
        m.d.comb += remaining.eq(self.end - fptr)
        idx = Signal(32)
        m.d.comb += idx.eq(fptr & mask)
        addr = Signal(self.addr_width)
        m.d.comb += addr.eq(base + Cat(Const(0, 2), idx))
        to_wrap = Signal(33)
        m.d.comb += to_wrap.eq(mask + 1 - idx)  # mask all ones → 2^32 − idx, never the limit
        first = Signal(idx_w)
        if dpb > 1:
            m.d.comb += first.eq(addr[2:2 + idx_w])
        to_4k = Signal(11)
        m.d.comb += to_4k.eq(1024 - addr[2:12])
        max_dw = Signal(nb_w)
        m.d.comb += max_dw.eq(self.max_burst * dpb - first)
        n = Signal(nb_w)
        n1 = Signal(33)
        n2 = Signal(33)
        n3 = Signal(33)
        m.d.comb += [
            n1.eq(Mux(remaining < to_wrap, remaining, to_wrap)),
            n2.eq(Mux(n1 < to_4k, n1, to_4k)),
            n3.eq(Mux(n2 < max_dw, n2, max_dw)),
            n.eq(n3),
        ]
        beats = Signal(range(self.max_burst + 1))
        m.d.comb += beats.eq((first + n + dpb - 1) >> ceil_log2(dpb) if dpb > 1 else n)
        credits = Signal(cnt_w + 1)
        m.d.comb += credits.eq(depth - level - outstanding)
        cmd_full = Signal()
        m.d.comb += cmd_full.eq((cwr + 1)[:len(cwr)] == crd)

        can_issue = Signal()
        m.d.comb += can_issue.eq(active & (remaining != 0) & (beats <= credits) & ~cmd_full & ~self.flush)
        m.d.comb += [
            self.arvalid.eq(can_issue),
            self.araddr.eq(Cat(Const(0, 2 + ceil_log2(dpb)), addr[2 + ceil_log2(dpb):])),
            self.arlen.eq(beats - 1),
        ]
        ar_fire = Signal()
        m.d.comb += ar_fire.eq(self.arvalid & self.arready)
        m.d.comb += self.fetched.eq(Mux(ar_fire, n, 0))

        # ---- receive: attach dword range to each beat
        r_keep = Signal()
        m.d.comb += r_keep.eq(self.rvalid & (drop == 0))
        head_first = Signal(idx_w)
        m.d.comb += head_first.eq(Mux(cur_started, 0, cmd_first[crd]))
        head_left = Signal(nb_w)
        m.d.comb += head_left.eq(Mux(cur_started, cur_left, cmd_n[crd]))
        take = Signal(nb_w)
        m.d.comb += take.eq(Mux(head_left < dpb - head_first, head_left, dpb - head_first))

        # ---- output: one dword per cycle from the head beat
        sub = Signal(idx_w)
        sub_fresh = Signal(init=1)
        cur = Signal(idx_w)
        m.d.comb += cur.eq(Mux(sub_fresh, buf_first[rd], sub))
        m.d.comb += [
            self.dw_valid.eq((level != 0) & ~self.flush),
            self.dw_data.eq(buf_data[rd].word_select(cur, 32) if dpb > 1 else buf_data[rd]),
            self.dw_resp.eq(buf_resp[rd]),
        ]
        pop_dw = Signal()
        pop_beat = Signal()
        m.d.comb += [
            pop_dw.eq(self.dw_valid & self.dw_ready),
            pop_beat.eq(pop_dw & (cur == buf_last[rd])),
        ]

        push = Signal()
        m.d.comb += push.eq(r_keep)
        m.d.sync += level.eq(level + push - pop_beat)
        with m.If(push):
            m.d.sync += [
                buf_data[wr].eq(self.rdata),
                buf_resp[wr].eq(self.rresp),
                buf_first[wr].eq(head_first),
                buf_last[wr].eq(head_first + take - 1),
                wr.eq(wr + 1),
            ]
            with m.If(head_left == take):
                m.d.sync += [cur_started.eq(0), crd.eq(crd + 1)]
            with m.Else():
                m.d.sync += [cur_started.eq(1), cur_left.eq(head_left - take)]
        with m.If(pop_dw):
            with m.If(pop_beat):
                m.d.sync += [rd.eq(rd + 1), sub_fresh.eq(1)]
            with m.Else():
                m.d.sync += [sub.eq(cur + 1), sub_fresh.eq(0)]

        # outstanding beats: + on AR, − on every R beat (kept or dropped)
        m.d.sync += outstanding.eq(outstanding + Mux(ar_fire, beats, 0) - self.rvalid)
        with m.If(self.rvalid & (drop != 0)):
            m.d.sync += drop.eq(drop - 1)

        with m.If(ar_fire):
            m.d.sync += [
                cmd_first[cwr].eq(first),
                cmd_n[cwr].eq(n),
                cwr.eq(cwr + 1),
                fptr.eq(fptr + n),
            ]

        with m.If(self.flush):
            # Everything requested so far and not yet arrived is dropped on arrival.
            m.d.sync += [
                active.eq(0),
                level.eq(0), rd.eq(0), wr.eq(0), sub_fresh.eq(1),
                crd.eq(0), cwr.eq(0), cur_started.eq(0),
                drop.eq(outstanding - self.rvalid),  # the beat arriving now is handled here
            ]

        # After the flush block: start with flush in the same cycle is a redirect.
        with m.If(self.start):
            m.d.sync += [active.eq(1), base.eq(self.base), mask.eq(self.mask), fptr.eq(self.ptr)]

        m.d.comb += self.busy.eq(outstanding != 0)
        return m
