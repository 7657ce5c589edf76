"""The AXI4-Lite slave (the CSR block's MMIO port): every handshake rule a slave owes.

The real generated CSRBlock, whole; its status inputs are free, the AXI master is free
within AXI's rules for a master (assumed), reset is free (so reset behaviour is proved).
Ghost counters follow the transactions the master has seen accepted and answered.
"""

from amaranth.hdl import Cat, ResetSignal, Signal
from amaranth.lib import wiring

from rtl import csr as csr_mod
from rtl.bus import RESP_OKAY

from ..harness import Harness, WhiteBox


def drive_inputs_free(h, component):
    """Every input port of `component` free (the environment's choice, every cycle)."""
    for path, member, value in component.signature.flatten(component):
        if member.flow == wiring.In:
            h.m.d.comb += value.eq(h.free(len(value)))


class AxilHarness(Harness):
    group = "axil"

    def build(self, m):
        dut = csr_mod.CSRBlock()
        box = WhiteBox(dut, "CSRBlock")
        m.submodules.dut = box.module
        drive_inputs_free(self, dut)
        bus = dut.bus
        rst = ResetSignal()
        was_rst = self.past(rst)
        live = self.started & ~was_rst  # the previous cycle exists and was not a reset

        # ---- the master keeps AXI's rules (assumed)
        for valid, ready, payload in ((bus.awvalid, bus.awready, [bus.awaddr]),
                                      (bus.wvalid, bus.wready, [bus.wdata, bus.wstrb]),
                                      (bus.arvalid, bus.arready, [bus.araddr])):
            waited = self.past(valid & ~ready)
            old = self.past(Cat(*payload))
            with m.If(live & waited & ~rst):
                self.assume(valid & (Cat(*payload) == old))
            with m.If(rst):
                self.assume(~valid)

        # ---- ghost counts of accepted, unanswered requests (cleared by reset)
        aw_n = Signal(2)
        w_n = Signal(2)
        ar_n = Signal(2)
        aw_hs = bus.awvalid & bus.awready
        w_hs = bus.wvalid & bus.wready
        ar_hs = bus.arvalid & bus.arready
        b_hs = bus.bvalid & bus.bready
        r_hs = bus.rvalid & bus.rready
        with m.If(rst):
            m.d.sync += [aw_n.eq(0), w_n.eq(0), ar_n.eq(0)]
        with m.Else():
            m.d.sync += [aw_n.eq(aw_n + aw_hs - b_hs), w_n.eq(w_n + w_hs - b_hs), ar_n.eq(ar_n + ar_hs - r_hs)]

        # ---- responses: held and stable until taken
        for name, valid, ready, payload in (("b", bus.bvalid, bus.bready, Cat(bus.bresp)),
                                            ("r", bus.rvalid, bus.rready, Cat(bus.rdata, bus.rresp))):
            waited = self.past(valid & ~ready)
            old = self.past(payload)
            self.prove(f"{name}_held", ~(live & waited & ~rst) | valid)
            self.prove(f"{name}_stable", ~(live & waited & ~rst) | (payload == old))

        self.prove("b_needs_aw_and_w", ~bus.bvalid | ((aw_n != 0) & (w_n != 0)))
        self.prove("r_needs_ar", ~bus.rvalid | (ar_n != 0))
        self.prove("one_at_a_time", (aw_n <= 1) & (w_n <= 1) & (ar_n <= 1))

        # one register write per AXI write: wr_en pulses exactly in the cycle before B rises
        wr_en = box("wr_en", "bridge")
        b_rose = bus.bvalid & ~self.past(bus.bvalid)
        # (the write happens in the cycle the second of AW and W is accepted: counted with it)
        self.prove("one_reg_write", (~wr_en | (((aw_n + aw_hs)[:3] == 1) & ((w_n + w_hs)[:3] == 1) &
                                               ~bus.bvalid)) &
                   (~live | rst | (b_rose == self.past(wr_en))))

        # liveness with a bound: a complete write or an accepted read is answered next cycle
        self.prove("b_bound", ~(live & self.past((aw_n == 1) & (w_n == 1) & ~bus.bvalid) & ~rst) |
                   bus.bvalid)
        self.prove("r_bound", ~(live & self.past((ar_n == 1) & ~bus.rvalid) & ~rst) | bus.rvalid)
        self.prove("reset_quiet", ~(self.started & was_rst) | (~bus.bvalid & ~bus.rvalid))

        # induction: the bridge's own state is what the ghost counters say
        aw_full = box("aw_full", "bridge")
        w_full = box("w_full", "bridge")
        self.invariant(aw_n == aw_full + bus.bvalid)
        self.invariant(w_n == w_full + bus.bvalid)
        self.invariant(ar_n == bus.rvalid)

        self.cover("write_ok", b_hs & (bus.bresp == RESP_OKAY))
        self.cover("write_decerr", b_hs & (bus.bresp != RESP_OKAY))
        self.cover("read_ok", r_hs & (bus.rresp == RESP_OKAY))
        w_first = Signal()
        with m.If(w_hs & ~aw_hs & (aw_n == 0)):
            m.d.sync += w_first.eq(1)
        with m.If(b_hs | rst):
            m.d.sync += w_first.eq(0)
        self.cover("w_before_aw", w_first & aw_hs)
