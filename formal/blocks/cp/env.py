"""The CP's world in the harness: the CSR block's ports (free, the configuration fixed) and a
free memory that answers in order within AXI's rules (and within `latency` cycles when set)."""

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Const, Signal
from amaranth.lib import wiring

from rtl import csr as csr_mod
from spec import packets as pk


COUNT = pk.HEADER.field("COUNT")

# the registers the driver programs before enabling: chosen once, then held
CONFIG = ("rb_base_lo", "rb_base_hi", "rb_size", "rb_rptr_addr_lo", "rb_rptr_addr_hi", "rb_cntl_rptr_wb",
          "ih_base_lo", "ih_base_hi", "ih_size", "ih_wptr_addr_lo", "ih_wptr_addr_hi",
          "ih_cntl_enable", "ih_cntl_wptr_wb", "int_enable_ih_pending", "int_enable_eop",
          "int_enable_cp_error", "int_enable_ih_overflow")


# The CP's second hardware queue (rtl/cp/queues.py) stays off in these proofs: its enable, its
# doorbell and the queue resets are held at 0, so queue 0 runs alone, as before it existed.
QUEUE1_OFF = ("cp_hqd1_rb_cntl_enable", "cp_hqd1_rb_doorbell_swmod", "cp_queue_reset_q0", "cp_queue_reset_q1")


# with both queues on (cp_queues): queue 1's configuration and the priorities, chosen once
CONFIG_QUEUE1 = ("cp_hqd1_rb_base_lo", "cp_hqd1_rb_base_hi", "cp_hqd1_rb_size", "cp_hqd1_rb_rptr_addr_lo",
                 "cp_hqd1_rb_rptr_addr_hi", "cp_hqd1_rb_cntl_rptr_wb", "cp_queue_priority_q0",
                 "cp_queue_priority_q1")


def free_csr(h, queues=False):
    """A stand-in for the CSR block with its exact ports: what the hardware reads is free,
    what it drives is a plain signal. `queues`: queue 1 on (its enable, doorbell and the
    queue resets free like queue 0's), else held off (QUEUE1_OFF)."""
    dut = csr_mod.CSRBlock()
    dut._MustUse__used = True  # only its signature is used
    ports = {}
    for name, member in dut.signature.members.items():
        if name == "bus":
            continue
        sig = Signal(member.shape, name=f"csr_{name}")
        ports[name] = sig
        if member.flow == wiring.Out:  # the register block drives it: the driver's choice
            if name in QUEUE1_OFF and not queues:
                h.m.d.comb += sig.eq(0)
            elif name in CONFIG or (queues and name in CONFIG_QUEUE1):
                h.m.d.comb += sig.eq(h.const(len(sig), f"cfg_{name}"))
            elif name not in ("ih_rptr", "ih_rptr_next"):  # (the harness's: IH_RPTR and its next value)
                h.m.d.comb += sig.eq(h.free(len(sig), f"drv_{name}"))
    return SimpleNamespace(**ports)



def memory(h, m, bus):
    """A free slave, in order, within AXI's rules (and `latency` when non-zero; holding
    `image` when given)."""
    D = h.ar_queue
    q_id = Array(Signal(4, name=f"mem_ar_id{i}") for i in range(D))
    q_len = Array(Signal(8, name=f"mem_ar_len{i}") for i in range(D))
    q_addr = Array(Signal(len(bus.araddr) if h.image else 0, name=f"mem_ar_addr{i}") for i in range(D))
    wp = Signal(range(2 * D))
    rp = Signal(range(2 * D))
    qb = len(wp) - 1
    count = Signal(range(2 * D + 1))
    m.d.comb += count.eq((wp - rp)[:len(wp)])
    beat = Signal(8)
    m.d.comb += bus.arready.eq(h.free(1, "mem_arready") & (count < D))
    with m.If(bus.arvalid & bus.arready):
        m.d.sync += [q_id[wp[:qb]].eq(bus.arid), q_len[wp[:qb]].eq(bus.arlen), q_addr[wp[:qb]].eq(bus.araddr),
                     wp.eq(wp + 1)]
    rvalid = h.free(1, "mem_rvalid")
    m.d.comb += [
        bus.rvalid.eq(rvalid & (count != 0)), bus.rid.eq(q_id[rp[:qb]]),
        bus.rlast.eq(beat == q_len[rp[:qb]]), bus.rdata.eq(h.free(h.data_width, "mem_rdata")),
        bus.rresp.eq(h.free(2, "mem_rresp")),
        bus.ruser.eq(h.free(len(bus.ruser), "mem_ruser")),  # an MMU's fault details
    ]
    if h.okay:
        # every response OKAY (no bus error, no MMU fault): a mutant's configuration whose
        # counterexample needs none, so the search does not branch on each beat's response
        h.assume((bus.rresp == 0) & (bus.bresp == 0) & (bus.ruser == 0) & (bus.buser == 0))
    if h.image:
        # every read returns the image's dwords, repeated every len(image) dwords (a ring of
        # that size at any 256-byte-aligned base holds it): a mutant's counterexample that needs
        # a whole packet parsed is then a search over timing alone, not over its dwords too
        n = len(h.image)  # (a power of two from 2 to 64: CPHarness checks it when given)
        dpb, lb, log2n = h.data_width // 32, (h.data_width // 8).bit_length() - 1, n.bit_length() - 1
        words = Array(Const(w, 32) for w in h.image)
        first = (q_addr[rp[:qb]][lb:] + beat) * dpb  # the beat's first dword
        h.assume(bus.rdata == Cat(*(words[(first + k)[:log2n]] for k in range(dpb))))
    with m.If(bus.rvalid & bus.rready):
        m.d.sync += beat.eq(beat + 1)
        with m.If(bus.rlast):
            m.d.sync += [beat.eq(0), rp.eq(rp + 1)]
    # writes: B once both the AW and the burst's last W beat are in
    aw_n = Signal(3)
    wl_n = Signal(3)
    m.d.comb += [bus.awready.eq(h.free(1, "mem_awready") & (aw_n < 3)),
                 bus.wready.eq(h.free(1, "mem_wready") & (wl_n < 3))]
    aw_hs = bus.awvalid & bus.awready
    wl_hs = bus.wvalid & bus.wready & bus.wlast
    b_hs = bus.bvalid & bus.bready
    can_b = (aw_n != 0) & (wl_n != 0)
    m.d.comb += [bus.bvalid.eq(h.free(1, "mem_bvalid") & can_b), bus.bid.eq(0),
                 bus.bresp.eq(h.free(2, "mem_bresp")), bus.buser.eq(h.free(len(bus.buser), "mem_buser"))]
    m.d.sync += [aw_n.eq(aw_n + aw_hs - b_hs), wl_n.eq(wl_n + wl_hs - b_hs)]
    h.mem = SimpleNamespace(count=count, aw_n=aw_n, wl_n=wl_n, beat=beat, q_len=q_len, q_id=q_id,
                               rp=rp, qb=qb, D=D, waits={})
    if h.latency:
        L = h.latency
        for name, waiting, answer in (
                ("ar", bus.arvalid, bus.arready), ("aw", bus.awvalid, bus.awready),
                ("w", bus.wvalid, bus.wready), ("r", count != 0, bus.rvalid), ("b", can_b, bus.bvalid)):
            t = Signal(range(L + 2), name=f"mem_wait_{name}")
            h.mem.waits[name] = t
            with m.If(waiting & ~answer):
                m.d.sync += t.eq(t + 1)
            with m.Else():
                m.d.sync += t.eq(0)
            with m.If(waiting & (t >= L)):
                h.assume(answer)
