"""Dword fetcher: reads a ring or an IB ahead of the parser with AXI4 INCR bursts.

The CP has one fetcher per level (ring, IB1, IB2), as AMD's CP keeps separate ring/IB1/IB2
fetch queues, so the ring's prefetched dwords stay valid while an IB runs.

A fetcher reads dword indices [ptr, end) of a buffer at `base`, where index i lives at
`base + 4 * (i & mask)` (a ring fetcher, `wraps`, wraps with mask = size − 1; an IB's has
no mask). `load` takes base, mask and ptr (and stops the fetcher), `start` runs it; they
may come in the same cycle, or `start` later (the CP loads an IB's fetcher while it checks
the packet). `end` may grow while it runs (a doorbell moves the ring's wptr). Space in the
beat buffer is reserved when a burst is issued, so R beats are always accepted (rready is
constant 1). The beat buffer and the record of bursts in flight are small memories
(LUTRAM on an FPGA).

Bursts are aligned blocks: a burst reads at most to the next multiple of `maxd` dwords
(the longest burst), counted in the ring's indices for a ring (its base is 256-byte
aligned, so that is also an address boundary, and a ring smaller than a block wraps at
its end) and in the address for an IB; a block never crosses 4 KiB. The dwords left to the
block's end are kept in a register (`tb`), so the next burst's length is a compare of that
with `end − ptr`, worked out from registers into registers (`n_next`, with whether the
burst fits the free buffer space), and issued from those in a later cycle: a fetcher
offers a burst at most every other cycle and one cycle after a start (a burst's length is
never more than what `end` allowed a cycle before: `end` only grows while the fetcher
runs; the free space it compares with is a cycle old, which only underestimates it).

`flush` drops everything: buffered beats are discarded and beats still in flight are
counted down and thrown away as they arrive, so a redirect never sees stale data.
Dwords come out one per cycle from a register (`dw_data`, with the AXI response of their
beat: an error response poisons the dwords of that beat; the parser reports it only if it
consumes one), with `dw_tag`: what the consumer's `tag` function says of the dword,
worked out as its beat arrives and kept with it in the buffer. An R beat that arrives
while the buffer is empty goes straight into that register, so the register costs no
cycle. `dw_ready` (the consumer's pop, which comes late in the cycle) only picks between
two next states worked out beforehand, so it passes one LUT inside the fetcher.
`dw_valid` is the register itself: a consumer never pops while it flushes the fetcher.
With `user_width`, the beat's RUSER (the MMU's fault report) comes with its dwords as
`dw_user`.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2


class Fetcher(wiring.Component):
    def __init__(self, data_width: int = 64, addr_width: int = 48, depth_beats: int = 8,
                 max_burst_beats: int = 8, tag=None, wraps: bool = True, user_width: int = 0,
                 index_width: int = 32):
        """`tag`: (layout, function(m, dword) -> Value of that layout): what the consumer wants
        to know of each dword (`dw_tag`). `wraps`: a ring (indices masked by `mask`).
        `index_width`: the bits of the dword indices (`ptr`, `end`) that matter, for a buffer
        whose `end` is always below 2**index_width (an IB of a 20-bit IB_SIZE): the index and
        `end − ptr` are that wide, not 32 bits (`cp_32`'s critical path ran from `end` through
        that subtraction and the burst's fit into `go_next`, 12.09 ns)."""
        assert wraps and index_width == 32 or not wraps and 1 <= index_width <= 32
        assert data_width in (32, 64, 128, 256)
        assert depth_beats >= max_burst_beats and depth_beats & (depth_beats - 1) == 0
        assert max_burst_beats & (max_burst_beats - 1) == 0
        self.data_width = data_width
        self.addr_width = addr_width
        self.dpb = data_width // 32  # dwords per beat
        self.depth = depth_beats
        self.max_burst = max_burst_beats
        self.wraps = wraps
        self.index_width = index_width
        self.tag_layout, self.tag_fn = tag if tag is not None else (data.StructLayout({"none": 1}), None)
        self.user_width = user_width
        user = {"ruser": In(user_width), "dw_user": Out(user_width)} if user_width else {}
        super().__init__(user | {
            # control
            "load": In(1), "base": In(addr_width), "mask": In(32), "ptr": In(32),
            "start": In(1), "end": In(32), "flush": In(1),
            # AXI read address / data (the R channel is routed here by ID)
            "arvalid": Out(1), "arready": In(1), "araddr": Out(addr_width), "arlen": Out(8),
            "rvalid": In(1), "rdata": In(data_width), "rresp": In(2), "rlast": In(1),
            # dword stream to the parser
            "dw_valid": Out(1), "dw_data": Out(32), "dw_resp": Out(2), "dw_ready": In(1),
            "dw_bad": Out(1),  # dw_resp is not OKAY (a register of its own: one bit for the consumer)
            "dw_tag": Out(self.tag_layout),
            # reads still in flight (including ones being dropped after a flush)
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        dpb, depth = self.dpb, self.depth
        idx_w = max(1, ceil_log2(dpb))
        lane_bits = ceil_log2(dpb)
        cnt_w = ceil_log2(depth + 1)
        ptr_w = max(1, ceil_log2(depth))
        maxd = self.max_burst * dpb  # dwords of the longest burst: the block
        k = ceil_log2(maxd)
        nb_w = ceil_log2(maxd + 1)
        tag_w = self.tag_layout.size

        active = Signal()
        base = Signal(self.addr_width)
        mask = Signal(32)
        iw = self.index_width
        fptr = Signal(iw)  # next dword index to request
        tb = Signal(nb_w)  # dwords from fptr to the end of its block (1 .. maxd)

        # ---- beat buffer (LUTRAM): data, response, first and last valid dword index in the
        # beat, and each dword's tag
        beat = data.StructLayout({"data": self.data_width, "resp": 2, "first": idx_w, "last": idx_w,
                                  "tags": tag_w * dpb} | ({"user": self.user_width} if self.user_width else {}))
        m.submodules.beats = beats = Memory(shape=beat, depth=1 << ptr_w, init=[])
        bw = beats.write_port()
        br = beats.read_port(domain="comb")
        rd = Signal(ptr_w)
        wr = Signal(ptr_w)
        level = Signal(cnt_w)  # beats in the buffer not yet (wholly) moved to the output register
        buffered = Signal()  # level != 0
        outstanding = Signal(cnt_w)  # beats requested, not yet received (counting ones to drop)
        drop = Signal(cnt_w)  # of those, beats to discard (requested before a flush)

        # ---- bursts in flight (LUTRAM): first dword index in the first beat, dwords.
        # (as many records as buffer beats, and no more bursts than beats in flight)
        burst = data.StructLayout({"first": idx_w, "n": nb_w})
        m.submodules.bursts = bursts = Memory(shape=burst, depth=1 << ptr_w, init=[])
        cw_ = bursts.write_port()
        cr_ = bursts.read_port(domain="comb")
        crd = Signal(ptr_w)
        cwr = Signal(ptr_w)
        cur_left = Signal(nb_w)  # dwords of the head burst not yet received
        cur_started = Signal()  # the head burst has delivered a beat
        m.d.comb += [bw.addr.eq(wr), br.addr.eq(rd), cw_.addr.eq(cwr), cr_.addr.eq(crd)]

        # ---- the block: where a load puts fptr in it (`tb` then follows each burst)
        bmask = Signal(k)  # block size − 1 (a ring smaller than a block: its size − 1)
        if self.wraps:
            m.d.comb += bmask.eq(mask[:k])
        else:
            m.d.comb += bmask.eq((1 << k) - 1)

        def block_left(base_, ptr_, bmask_):
            """Dwords from index `ptr_` to the end of its block."""
            if self.wraps:
                pos = ptr_[:k]  # (the ring's base is 256-byte aligned: indices are addresses)
            else:
                pos = (base_[2:2 + k] + ptr_[:k])[:k]
            return (bmask_ & ~pos) + 1

        # ---- stage 1: the next burst, from registers into registers
        idx = Signal(iw)
        m.d.comb += idx.eq(fptr & mask if self.wraps else fptr)
        addr = Signal(self.addr_width)
        m.d.comb += addr.eq(base + Cat(Const(0, 2), idx))
        first = Signal(idx_w)
        if dpb > 1:
            m.d.comb += first.eq(addr[2:2 + idx_w])
        remaining = Signal(iw)
        m.d.comb += remaining.eq(self.end[:iw] - fptr)
        # (`remaining` against the small `tb` and `room`: its high bits zero and a compare of
        # the low ones, instead of two 32-bit compares, each a carry chain of 16 CCU2C)
        rw = max(nb_w, cnt_w + 2 + lane_bits)  # (the width of `room`, below)
        rem_small = Signal()
        m.d.comb += rem_small.eq(remaining[rw:] == 0)
        few = Signal()  # the buffer ends before the block
        m.d.comb += few.eq(rem_small & (remaining[:rw] < tb))
        n = Signal(nb_w)
        m.d.comb += n.eq(Mux(few, remaining[:nb_w], tb))
        # free buffer beats, as they were a cycle ago (less a burst issued in that cycle)
        credits = Signal(cnt_w + 1)
        free = Signal(cnt_w + 1)
        m.d.comb += free.eq(depth - level - outstanding)
        # the burst fits: first + n dwords within credits beats (both candidates for n at once)
        room = Signal(cnt_w + 1 + lane_bits + 1)
        m.d.comb += room.eq((credits << lane_bits) - first)
        fits = Signal()
        m.d.comb += fits.eq((credits != 0) & Mux(few, remaining[:rw] <= room, tb <= room))
        n_next = Signal(nb_w)  # the next burst: dwords, beats, first dword, address
        beats_next = Signal(range(self.max_burst + 1))
        first_next = Signal(idx_w)
        addr_next = Signal(self.addr_width)
        n_ok = Signal()  # n_next and the rest hold for the registers as they are now
        go_next = Signal()  # ... and the burst is not empty (tb never is) and fits
        # (one expression, the burst's issue last: `ar_fire` comes from the consumer's AR
        # arbitration late in the cycle, and as the last of a chain of resets of the
        # register (flush, load, start) it took two LUTs more, sdma_32's critical path after
        # its packet checks: fetch_ring.n_ok -> the SDMA's read port -> n_ok, 10.5-10.7 ns)
        kill = Signal()
        m.d.comb += kill.eq(self.flush | self.load | self.start)
        with m.If(~self.arvalid):  # (an offered burst holds until it is taken, as AXI wants)
            m.d.sync += [
                n_next.eq(n), first_next.eq(first),
                beats_next.eq((first + n + dpb - 1) >> lane_bits if dpb > 1 else n),
                addr_next.eq(Cat(Const(0, 2 + lane_bits), addr[2 + lane_bits:])),
                go_next.eq(~(few & (remaining[:nb_w] == 0)) & fits),
            ]

        # ---- stage 2: issue
        ar_fire = Signal()
        m.d.comb += [
            self.arvalid.eq(n_ok & go_next),
            self.araddr.eq(addr_next),
            self.arlen.eq(beats_next - 1),
            ar_fire.eq(self.arvalid & self.arready),
        ]
        m.d.sync += credits.eq(Mux(ar_fire, free - beats_next, free))
        with m.If(ar_fire):
            # the registers move: stage 1 works the next burst out again
            m.d.sync += [fptr.eq(fptr + n_next), cwr.eq(cwr + 1),
                         tb.eq(Mux(n_next == tb, bmask + 1, tb - n_next))]

        # ---- receive: attach dword range and tags to each beat
        r_keep = Signal()
        m.d.comb += r_keep.eq(self.rvalid & (drop == 0))
        head_first = Signal(idx_w)
        m.d.comb += head_first.eq(Mux(cur_started, 0, cr_.data.first))
        head_left = Signal(nb_w)
        m.d.comb += head_left.eq(Mux(cur_started, cur_left, cr_.data.n))
        take = Signal(nb_w)
        m.d.comb += take.eq(Mux(head_left < dpb - head_first, head_left, dpb - head_first))
        in_tags = [self.tag_fn(m, self.rdata[32 * i:32 * (i + 1)]) if self.tag_fn else Const(0, tag_w)
                   for i in range(dpb)]
        m.d.comb += [
            bw.en.eq(r_keep), bw.data.data.eq(self.rdata), bw.data.resp.eq(self.rresp),
            bw.data.first.eq(head_first), bw.data.last.eq(head_first + take - 1),
            bw.data.tags.eq(Cat(*in_tags)),
        ]
        if self.user_width:
            m.d.comb += bw.data.user.eq(self.ruser)
        with m.If(r_keep):
            m.d.sync += wr.eq(wr + 1)
            with m.If(head_left == take):
                m.d.sync += [cur_started.eq(0), crd.eq(crd + 1)]
            with m.Else():
                m.d.sync += [cur_started.eq(1), cur_left.eq(head_left - take)]

        # ---- output register: one dword at a time from the buffer's oldest beat, or, with the
        # buffer empty, from the beat arriving now (it is written to the buffer too, at rd).
        # Everything but the choice between "taken" and "not taken" is worked out before
        # dw_ready arrives.
        out_valid = Signal()
        # (a copy for the consumer, inverted so that synthesis keeps it apart: `out_valid`
        # drives the register's own loads here, about 60, and the parser's decisions start
        # from the copy, which the placer can put near them)
        out_empty_c = Signal(init=1)
        out_data = Signal(32)
        out_resp = Signal(2)
        out_bad = Signal()
        out_tag = Signal(self.tag_layout)
        out_user = Signal(max(1, self.user_width))
        sub = Signal(idx_w)
        sub_fresh = Signal(init=1)  # the oldest beat has not given a dword yet
        src = Signal(beat)
        m.d.comb += src.eq(Mux(buffered, br.data, bw.data))
        cur = Signal(idx_w)
        m.d.comb += cur.eq(Mux(buffered & ~sub_fresh, sub, src.first))
        have = Signal()  # a dword can move into the output register
        m.d.comb += have.eq(buffered | r_keep)
        last_dw = Signal()  # ... and it is its beat's last
        m.d.comb += last_dw.eq(cur == src.last if dpb > 1 else 1)
        adv = Signal()  # ... and the beat is done with it (the read pointer moves on)
        m.d.comb += adv.eq(have & last_dw)
        # the buffer's level either way (a beat in, a beat done)
        lvl_keep = Signal(cnt_w)
        lvl_done = Signal(cnt_w)
        lvl_adv = Signal(cnt_w)
        m.d.comb += [lvl_keep.eq(level + r_keep), lvl_done.eq(level + r_keep - 1),
                     lvl_adv.eq(Mux(adv, lvl_done, lvl_keep))]
        # the register takes a dword when it is empty or its dword is popped: from here on
        # dw_ready only picks. The pointers' and the level's next values are worked out both
        # ways from registers (`*_t`: the register takes a dword, `*_h`: it holds one, or
        # takes one if it is empty), kept as wires so that synthesis leaves dw_ready the last
        # input, one LUT before each flip-flop (it took two or three LUTs after it, on
        # `cp_32`'s critical path: the pop -> `load` -> `level` -> `buffered`)
        load = Signal()
        m.d.comb += load.eq(~out_valid | self.dw_ready)
        with m.If(load):
            m.d.sync += [out_data.eq(src.data.word_select(cur, 32) if dpb > 1 else src.data),
                         out_resp.eq(src.resp), out_bad.eq(src.resp != 0),
                         out_tag.eq(src.tags.word_select(cur, tag_w) if dpb > 1 else src.tags)]
            if self.user_width:
                m.d.sync += out_user.eq(src.user)

        def both(name, width, taken, held_full):
            """(taken, held): the next value if the register takes a dword, and if it does not
            (its own value while it is full, else the taken one)."""
            t = Signal(width, name=f"{name}_t", attrs={"keep": 1})
            h = Signal(width, name=f"{name}_h", attrs={"keep": 1})
            m.d.comb += [t.eq(taken), h.eq(Mux(out_valid, held_full, taken))]
            return t, h
        rd_t, rd_h = both("rd", ptr_w, Mux(adv, rd + 1, rd), rd)
        sub_t, sub_h = both("sub", idx_w, Mux(have & ~last_dw, cur + 1, sub), sub)
        fresh_t, fresh_h = both("sub_fresh", 1, Mux(adv, 1, Mux(have & ~last_dw, 0, sub_fresh)), sub_fresh)
        lvl_t, lvl_h = both("level", cnt_w, lvl_adv, lvl_keep)
        buf_t, buf_h = both("buffered", 1, lvl_adv != 0, lvl_keep != 0)
        val_t, val_h = both("out_valid", 1, have, out_valid)
        m.d.sync += [rd.eq(Mux(self.dw_ready, rd_t, rd_h)), sub.eq(Mux(self.dw_ready, sub_t, sub_h)),
                     sub_fresh.eq(Mux(self.dw_ready, fresh_t, fresh_h)),
                     level.eq(Mux(self.dw_ready, lvl_t, lvl_h)), buffered.eq(Mux(self.dw_ready, buf_t, buf_h)),
                     out_valid.eq(Mux(self.dw_ready, val_t, val_h)),
                     out_empty_c.eq(~Mux(self.dw_ready, val_t, val_h))]
        m.d.comb += [self.dw_valid.eq(~out_empty_c), self.dw_data.eq(out_data),
                     self.dw_resp.eq(out_resp), self.dw_bad.eq(out_bad), self.dw_tag.eq(out_tag)]
        if self.user_width:
            m.d.comb += self.dw_user.eq(out_user)

        # outstanding beats: + on AR, − on every R beat (kept or dropped); both sums are formed
        # before AR's handshake picks one
        out_now = Signal(cnt_w)
        out_issued = Signal(cnt_w)
        m.d.comb += [out_now.eq(outstanding - self.rvalid), out_issued.eq(outstanding + beats_next - self.rvalid)]
        m.d.sync += outstanding.eq(Mux(ar_fire, out_issued, out_now))
        with m.If(self.rvalid & (drop != 0)):
            m.d.sync += drop.eq(drop - 1)

        m.d.comb += [cw_.en.eq(ar_fire), cw_.data.first.eq(first_next), cw_.data.n.eq(n_next)]

        with m.If(self.flush):
            # Everything requested so far and not yet arrived is dropped on arrival.
            m.d.sync += [
                active.eq(0), out_valid.eq(0), out_empty_c.eq(1),
                level.eq(0), buffered.eq(0), rd.eq(0), wr.eq(0), sub_fresh.eq(1),
                crd.eq(0), cwr.eq(0), cur_started.eq(0),
                # (the beat arriving now is handled here; a burst issued now is dropped too)
                drop.eq(Mux(ar_fire, out_issued, out_now)),
            ]

        # After the flush block: load and start with flush in the same cycle is a redirect.
        with m.If(self.load):
            m.d.sync += [active.eq(0), base.eq(self.base), fptr.eq(self.ptr),
                         tb.eq(block_left(self.base, self.ptr, self.mask[:k] if self.wraps else bmask))]
            if self.wraps:
                m.d.sync += mask.eq(self.mask)
        with m.If(self.start):
            m.d.sync += active.eq(1)
        m.d.sync += n_ok.eq(active & ~kill & ~ar_fire)

        m.d.comb += self.busy.eq(outstanding != 0)
        return m
