"""POLL_REGMEM: read the dword at addr at once, then every max(1, 16 · INTERVAL) cycles
(counted from each read's request; an answer is tested the cycle after it arrives) until
(value & MASK) FUNC VALUE holds; with RETRY_COUNT < 0xFFF give up at the (RETRY_COUNT + 1)-th
failing read, append a SDMA_POLL_TIMEOUT IH entry and move on. SDMA_STATUS.WAITING shows a poll in progress; a
doorbell error stops the queue between reads.

`c` is the engine's context (rtl/sdma/engine.py): its signals and helpers by name."""

from amaranth.hdl import Cat, Const, Mux, Signal
from amaranth.utils import ceil_log2

from spec import ih as ih_spec
from spec.sdma import packets as sp

from ..bus import RESP_OKAY
from . import packets as pk

PR = sp.POLL_REGMEM
UNIT_LOG2 = 4  # INTERVAL counts 16 clocks


def setup(c):
    c.poll_timer = Signal(16 + UNIT_LOG2, name="poll_timer")
    c.poll_retries = Signal(12, name="poll_retries")
    c.poll_word = Signal(32, name="poll_word")  # the read's answer: its dword, response and RUSER
    c.poll_masked = Signal(32, name="poll_masked")  # ... and the dword & MASK
    c.poll_rresp = Signal(2, name="poll_rresp")
    c.poll_ruser = Signal(len(c.bus.ruser), name="poll_ruser")
    # poll_retries is 0 and RETRY_COUNT is not RETRY_FOREVER: the failing read is the last,
    # kept with the count (it moves where the count does) so the test reads one register
    c.poll_out = Signal(name="poll_out")
    c.poll_fsel = Signal(len(PR.field("FUNC").values), name="poll_fsel")  # FUNC, one bit per value


def prepare(c, pkt):
    """In CHECK, whatever its checks say: FUNC decoded into one bit per test, read in
    POLL_TEST only, so the test is an AND-OR of the two compares with registers (FUNC's
    decode after the compares' carry chains was sdma_32's path on seed 1, poll_masked ->
    the test -> ih_valid, 9.99 ns)."""
    fn = pk.field(c.hdr, c.p, PR, "FUNC")
    c.m.d.sync += c.poll_fsel.eq(Cat(*(fn == v for v in PR.field("FUNC").values.values())))


def start(c, pkt):
    m, h, p = c.m, c.hdr, c.p
    c.count_packet(pkt.index)
    m.d.sync += [c.poll_addr.eq(pk.address(h, p, PR, "addr", c.aw)), c.poll_req.eq(1),
                 c.poll_retries.eq(pk.field(h, p, PR, "RETRY_COUNT")),
                 c.poll_out.eq(pk.field(h, p, PR, "RETRY_COUNT") == 0)]  # (0 is not RETRY_FOREVER)
    m.next = "POLL_READ"


def states(c):
    m, state, bus, h, p = c.m, c.state, c.bus, c.hdr, c.p
    interval = Cat(Const(0, UNIT_LOG2), pk.field(h, p, PR, "INTERVAL"))
    with state("POLL_READ"):
        m.d.comb += c.waiting.eq(1)
        # the next read is due max(1, interval) cycles after this one is requested
        m.d.sync += c.poll_timer.eq(Mux(interval == 0, 0, interval - 1))
        with m.If(c.poll_taken):
            m.next = "POLL_RESP"
    with state("POLL_RESP"):
        m.d.comb += c.waiting.eq(1)
        with m.If(c.poll_timer != 0):
            m.d.sync += c.poll_timer.eq(c.poll_timer - 1)
        dpb = c.data_width // 32
        word = bus.rdata.word_select(c.poll_addr[2:2 + ceil_log2(dpb)], 32) if dpb > 1 else bus.rdata
        # the answer goes into registers and is tested in the next cycle (POLL_TEST), so the
        # test and the next state start from flip-flops, not from the memory port's R channel
        with m.If(c.poll_rvalid):
            m.d.sync += [c.poll_word.eq(word), c.poll_masked.eq(word & pk.field(h, p, PR, "MASK")),
                         c.poll_rresp.eq(bus.rresp), c.poll_ruser.eq(bus.ruser)]
            m.next = "POLL_TEST"
    with state("POLL_TEST"):
        m.d.comb += c.waiting.eq(1)
        with m.If(c.poll_timer != 0):
            m.d.sync += c.poll_timer.eq(c.poll_timer - 1)
        word, masked = c.poll_word, c.poll_masked
        # the timeout's IH entry is loaded whatever the test says (no request is pending in
        # this state: TRAP's and an earlier timeout's were answered), so only `ih_valid`
        # waits for the test
        c.ih_request(ih_spec.Source.SDMA_POLL_TIMEOUT, [c.poll_addr[:32], c.poll_addr[32:], word, 0], c.cur_vmid)
        m.d.sync += c.ih_valid.eq(0)
        ref = pk.field(h, p, PR, "VALUE")
        ok = Signal()
        # every test from two carry chains side by side, `<` each way (the six compares were
        # chains and an equality's LUT tree into the test's choice: sdma_32's path on seed 3,
        # VALUE's register -> the compare -> ih_valid, 10.14 ns)
        lt, gt = Signal(), Signal()
        m.d.comb += [lt.eq(masked < ref), gt.eq(ref < masked)]
        tests = {"ALWAYS": Const(1), "LT": lt, "LE": ~gt, "EQ": ~lt & ~gt, "NE": lt | gt, "GE": ~lt, "GT": gt}
        m.d.comb += ok.eq(Cat(*(c.poll_fsel[i] & tests[name]
                                for i, name in enumerate(PR.field("FUNC").values))).any())
        with m.If(c.poll_rresp != RESP_OKAY):
            c.fail(c.bus_code(c.poll_rresp, c.poll_ruser), c.poll_addr)
        with m.Elif(ok):
            m.next = "DONE"
        with m.Elif(c.poll_out):
            # the retries ran out: AMD's engine raises POLL_TIMEOUT and moves on
            m.d.sync += c.ih_valid.eq(1)
            m.next = "IH_WAIT"
        with m.Else():
            m.next = "POLL_SLEEP"
        # the count goes down whatever the test says: only a failing read that is not the
        # last goes on to a POLL_TEST that reads it again (any other outcome leaves the
        # packet, and start() loads it anew), so its enable waits for no compare (sdma_64's
        # path was poll_masked -> the test -> the next state -> poll_retries' enable, 11.49 ns)
        with m.If((c.poll_retries != 0) & (pk.field(h, p, PR, "RETRY_COUNT") != sp.RETRY_FOREVER)):
            m.d.sync += [c.poll_retries.eq(c.poll_retries - 1), c.poll_out.eq(c.poll_retries == 1)]
    with state("POLL_SLEEP"):
        m.d.comb += c.waiting.eq(1)
        m.d.sync += c.poll_timer.eq(c.poll_timer - 1)
        with m.If(c.err_any):
            m.next = "ERR_DRAIN"  # a doorbell error stops the queue between reads
        with m.Elif(c.poll_timer <= 1):
            m.d.sync += c.poll_req.eq(1)
            m.next = "POLL_READ"
