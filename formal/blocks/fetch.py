"""The CP's dword fetcher (rtl/cp/fetch.py) alone: what it may read.

The CP drives a Fetcher per level: for the ring `ptr` = the parser's position (never
behind rptr), `end` = wptr (it only grows while the fetcher runs, at most a ring size
ahead), `mask` = size - 1 and a 256-byte aligned base; for an IB `ptr` = 0, `end` =
IB_SIZE and an all-ones mask (its fetcher counts bursts in addresses, not in ring
indices: `wraps` off). The harness checks one fetcher of each kind, each with its own
slave, and lets their inputs be free within those rules,
`start` and `flush` come any cycle, and a free slave answers the fetcher's bursts in order
(R beats only for bursts it asked for, RLAST on the last). With cp_ring.occupancy
([rptr, wptr] holds the parser), these properties give "the CP never fetches beyond wptr".
"""

from amaranth.hdl import Array, Cat, Const, Mux, Signal

from rtl.cp.fetch import Fetcher

from ..harness import Harness, WhiteBox


class FetchHarness(Harness):
    group = "fetch"

    def __init__(self, data_width=64, depth=8, max_burst=8):
        super().__init__()
        self.data_width, self.depth, self.max_burst = data_width, depth, max_burst

    def build(self, m):
        self.no_reset()
        # the CP's two kinds: the ring's fetcher (`wraps`) and an IB level's
        props = [self.one(m, wraps) for wraps in (True, False)]
        for name in props[0]:
            test = props[0][name] & props[1][name] if name not in COVERS else props[0][name] | props[1][name]
            if name in COVERS:
                self.cover(name, test)
            else:
                self.prove(name, test)

    def one(self, m, wraps):
        """A Fetcher as the CP drives one (`wraps`: the ring's), its slave, and each property's
        test (by name) for it."""
        tag = "ring" if wraps else "ib"
        dut = Fetcher(self.data_width, 48, depth_beats=self.depth, max_burst_beats=self.max_burst, wraps=wraps)
        b = WhiteBox(dut, "Fetcher")
        m.submodules[f"dut_{tag}"] = b.module
        B = self.data_width // 8

        def free(w, name):
            return self.free(w, f"{tag}_{name}")

        # ---- the CP's side: a buffer at `base` with mask 2^k - 1 (an IB's: all ones), a
        # window [lo, end)
        mask = Signal(32, name=f"{tag}_mask")
        base = self.const(48, f"{tag}_base")
        self.assume(base[:2] == 0)
        if wraps:
            k = self.const(6, "ring_log2_size")
            self.assume((k >= 1) & (k <= 32))
            m.d.comb += mask.eq((Const(1, 33) << k) - 1)
            self.assume(base[:8] == 0)
        else:
            m.d.comb += mask.eq(0xFFFF_FFFF)
        ptr_free = free(32, "ptr")
        # (an IB's fetcher starts at index 0, as the CP loads it: its window [0, IB_SIZE) never
        # wraps the 32-bit index)
        ptr = ptr_free if wraps else Const(0, 32)
        self.assume(base + 4 * (mask + 1) <= (1 << 48))  # the buffer lies on the bus
        # (the CP loads and starts a fetcher together, or loads it first: a start follows a
        # load, with nothing else between)
        start, flush = free(1, "start"), free(1, "flush")
        end = free(32, "end")
        m.d.comb += [dut.load.eq(start), dut.start.eq(start), dut.flush.eq(flush), dut.base.eq(base),
                     dut.mask.eq(mask), dut.ptr.eq(ptr), dut.end.eq(end), dut.dw_ready.eq(free(1, "dw_ready"))]
        lo = Signal(32, name=f"{tag}_lo")  # where the fetcher was started
        with m.If(start):
            m.d.sync += lo.eq(ptr)
        # a start redirects a flushed or idle fetcher
        self.assume(~start | flush | ~b("active"))
        just_started = self.past(start)
        fptr, active = b("fptr"), b("active")
        end_q = self.past(end, f"{tag}_end_q")
        if wraps:
            # The ring's fetcher is started once and then runs for ever: `end` (wptr) grows
            # without bound, and what holds is only wptr - rptr <= size, with rptr behind the
            # dwords the fetcher has delivered, which are behind fptr. The fetcher sees `end`
            # only through `end - fptr`, so measuring the window from fptr (a consumer that has
            # taken everything asked for) admits every trace the CP can make, over any number
            # of laps, and stays exact in 32-bit arithmetic (fptr is never far behind `end`).
            # A window measured from the start pointer allowed one lap only (issue 17).
            window = (end - fptr)[:32]
            fptr_q = self.past(fptr, f"{tag}_fptr_q")
            with m.If(active & ~start):
                self.assume(window <= mask + 1)
                # `end` only grows (the previous cycle's window was measured from fptr then)
                with m.If(self.started & ~just_started):
                    self.assume((end - fptr_q)[:32] >= (end_q - fptr_q)[:32])
        else:
            # an IB's window is fixed: [0, IB_SIZE) from its start; `end` may take its new
            # value in the cycle after the start, and only grows afterwards
            window = (end - lo)[:32]
            with m.If(~start):
                self.assume(window <= mask + 1)
                with m.If(self.started & ~just_started):
                    self.assume(window >= self.past(window))
        # ---- a free slave, in order
        D = self.depth
        q_len = Array(Signal(8, name=f"{tag}_q_len{i}") for i in range(D))
        wp, rp = Signal(range(2 * D), name=f"{tag}_wp"), Signal(range(2 * D), name=f"{tag}_rp")
        qb = len(wp) - 1
        count = Signal(range(2 * D + 1), name=f"{tag}_count")
        m.d.comb += count.eq((wp - rp)[:len(wp)])
        beat = Signal(8, name=f"{tag}_beat")
        m.d.comb += dut.arready.eq(free(1, "arready") & (count < D))
        ar_hs = dut.arvalid & dut.arready
        with m.If(ar_hs):
            m.d.sync += [q_len[wp[:qb]].eq(dut.arlen), wp.eq(wp + 1)]
        m.d.comb += [dut.rvalid.eq(free(1, "rvalid") & (count != 0)),
                     dut.rlast.eq(beat == q_len[rp[:qb]]),
                     dut.rdata.eq(free(self.data_width, "rdata")), dut.rresp.eq(free(2, "rresp"))]
        with m.If(dut.rvalid):
            m.d.sync += beat.eq(beat + 1)
            with m.If(dut.rlast):
                m.d.sync += [beat.eq(0), rp.eq(rp + 1)]

        # ---- what it reads (a burst is issued from registers: `n_next` dwords from fptr)
        n = b("n_next")
        t = {}
        # (a burst offered from the registers as a redirect comes is the old window's: measured
        # against `end` as it was, since the redirect may change `end` in its own cycle)
        if wraps:
            ar_window = Mux(start & self.started, (end_q - fptr)[:32], window)
            t["in_window"] = ~ar_hs | ((n <= ar_window) & (n != 0))
        else:
            ar_window = Mux(start & self.started, (end_q - lo)[:32], window)
            t["in_window"] = ~ar_hs | ((((fptr - lo)[:32] + n) <= ar_window) & (n != 0))
        idx = fptr & mask
        addr = (base + Cat(Const(0, 2), idx))[:48]
        t["address"] = ~ar_hs | (dut.araddr == (addr & ~Const(B - 1, 48)))
        t["no_wrap_crossing"] = ~ar_hs | (idx + n <= mask + 1)
        beats = dut.arlen + 1
        t["no_4k_crossing"] = ~ar_hs | (dut.araddr[:12] + beats * B <= 4096)
        first = addr[2:2 + max(1, (B // 4).bit_length() - 1)] if B > 4 else Const(0, 1)
        t["burst_legal"] = ~ar_hs | ((beats <= self.max_burst) & (beats * (B // 4) >= first + n) &
                                     ((beats - 1) * (B // 4) < first + n))
        level, outstanding, drop = b("level"), b("outstanding"), b("drop")
        t["room_for_beats"] = level + outstanding <= self.depth

        # ---- induction: the fetcher's window, its beat counts against the slave's
        if wraps:
            # (fptr never passes `end` as it was a cycle ago: a burst is worked out from it)
            self.invariant(~active | ~self.started | just_started | ((end_q - fptr)[:32] <= mask + 1))
        else:
            self.invariant(~active | start | ((fptr - lo)[:32] <= window))
        in_flight = Signal(range(D * 256 + 1), name=f"{tag}_in_flight")
        used = [((Const(i, qb + 1) - rp[:qb])[:qb] < count) for i in range(D)]  # slot i holds a burst
        m.d.comb += in_flight.eq(sum(Cat(q_len[i] + 1, Const(0, 4)) * used[i] for i in range(D)) - beat)
        # (the slave's own state: a burst's beat counter inside the burst, bursts as issued)
        self.invariant((count <= D) & ((count != 0) | (beat == 0)) & ((count == 0) | (beat <= q_len[rp[:qb]])))
        for i in range(D):
            self.invariant(~used[i] | (q_len[i] < self.max_burst))
        self.invariant(outstanding == in_flight)
        self.invariant(drop <= outstanding)
        # (the credits, free beats as they were a cycle ago less a burst issued then, never
        # exceed the free beats now; an offered burst fits in them: it was worked out when it did)
        credits = b("credits")
        self.invariant(credits + level + outstanding <= self.depth)
        self.invariant(~dut.arvalid | (b("beats_next") <= credits))
        burst_invariants(self, b, base, mask, wraps, self.data_width, self.max_burst)
        # (the burst worked out for the registers, once it holds (`n_ok`), lies in the window as
        # it was a cycle ago: it was worked out from `end` then, which only grows; in_window's
        # step needs it, the redirect's cycle measuring against that window too)
        if wraps:
            self.invariant(~b("n_ok") | (b("n_next") <= (end_q - fptr)[:32]))
        else:
            self.invariant(~b("n_ok") | ((fptr - lo)[:32] + b("n_next") <= (end_q - lo)[:32]))
            self.invariant(lo == 0)  # (an IB's fetcher starts at 0)

        t["wraps"] = ar_hs & (idx + n == mask + 1) & Const(int(wraps))
        # (a ring burst a whole ring past where the fetcher started: beyond the first lap)
        t["second_lap"] = ar_hs & ((fptr - lo)[:32] >= mask + 1) & Const(int(wraps))
        t["at_4k"] = ar_hs & (dut.araddr[:12] + beats * B == 4096)
        t["full_buffer"] = level == self.depth
        t["redirect_in_flight"] = flush & start & (outstanding != 0)
        return t


COVERS = ("wraps", "second_lap", "at_4k", "full_buffer", "redirect_in_flight")


def burst_invariants(h, b, base, mask, wraps, data_width, max_burst):
    """A running fetcher's registers against what it was loaded with (`base`, `mask`) and its
    pointer: the dwords `tb` to the end of fptr's aligned block, and the burst it offers, worked
    out a cycle before from registers that hold still while it waits. fetch's induction, and
    cp_queues' for the ring's fetcher inside the CP; `b(name)` reads the fetcher's signals."""
    B, dpb = data_width // 8, data_width // 32
    lane_bits = (dpb - 1).bit_length()
    k = (max_burst * dpb - 1).bit_length()
    fptr, active = b("fptr"), b("active")
    h.invariant(~active | (b("base") == base))
    if wraps:
        h.invariant(~active | (b("mask") == mask))
    tb = b("tb")
    bmask = mask[:k] if wraps else Const((1 << k) - 1, k)
    pos = fptr[:k] if wraps else (base[2:2 + k] + fptr[:k])[:k]
    h.invariant(~active | (tb == (bmask & ~pos) + 1))
    n_next, first_next = b("n_next"), b("first_next")
    h.invariant(~b("n_ok") | active)
    addr = (base + Cat(Const(0, 2), fptr & mask))[:48]
    first = addr[2:2 + max(1, (B // 4).bit_length() - 1)] if B > 4 else Const(0, 1)
    h.invariant(~b("arvalid") | ((n_next != 0) & (n_next <= tb) &
                                 (b("addr_next") == (addr & ~Const(B - 1, 48))) &
                                 (b("beats_next") == (first_next + n_next + dpb - 1) >> lane_bits) &
                                 (first_next == (first if dpb > 1 else 0))))
