"""cp_live: a doorbell's work done or errored within a bound (BMC, a 2-dword ring)."""

from amaranth.hdl import Signal


def build(h, m, b, csr, cp):
    """Liveness with a bound, for a small configuration, by BMC: with a memory that answers
    within `latency` cycles and a ring of two dwords (so a doorbell's work is at most two
    dwords: fillers, a two-dword NOP, or a packet the parser refuses), the driver neither
    halting, disabling nor resetting the CP and ringing no other doorbell meanwhile, a doorbell's work is done (STATUS.IDLE with
    RB_RPTR at its wptr) or an error is latched within `bound` cycles of the doorbell."""
    assert h.latency, "cp_live needs a memory latency"
    bound = h.live_bound
    h.assume(~csr.control_halt & csr.rb_cntl_enable & ~csr.control_soft_reset)
    look, v = h.doorbell()
    ok = look & ~(v - b("wptr"))[31] & ((v - b("rptr"))[:32] <= b("ring_mask") + 1)
    tracked = Signal(name="live_tracked")
    target = Signal(32, name="live_target")
    r0 = Signal(32, name="live_rptr0")
    age = Signal(range(bound + 2), name="live_age")
    with m.If(~tracked & ok):
        m.d.sync += [tracked.eq(1), target.eq(v), r0.eq(b("rptr")), age.eq(1)]
    with m.Elif(tracked & (age <= bound)):
        m.d.sync += age.eq(age + 1)
    # (later doorbells may add work: RB_RPTR reaching the doorbell's wptr, or passing it
    # with a packet that a later doorbell completed, is this doorbell's work done)
    reached = (b("rptr") - r0)[:32] >= (target - r0)[:32]
    # the driver rings once and waits: no later doorbell adds to the work meanwhile (a
    # header before the doorbell's wptr whose packet a later doorbell completes would make
    # its work depend on that doorbell)
    h.assume(~(tracked & ~reached & ~b("err") & csr.rb_doorbell_swmod))
    h.prove("doorbell_finishes", ~(tracked & (age > bound)) | reached | b("err"))
    h.cover("doorbell_work_done", tracked & reached & ~b("err") & (target != r0))
