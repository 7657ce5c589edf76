"""WRITE_LINEAR and FENCE: memory writes through the engine's BlockWriter.

WRITE_LINEAR collects its data dwords block by block (an aligned 32-byte block each), each
block written in the cycle after its last dword arrives and answered before the next is
collected; FENCE writes its one dword. A write's error response is the packet's, at the
block's first written address.

`c` is the engine's context (rtl/sdma/engine.py): its signals and helpers by name."""

from amaranth.hdl import Array, Const, Signal

from spec.sdma import packets as sp

from ..bus import RESP_OKAY
from ..cp.writer import BLOCK_DWORDS
from . import packets as pk

WL, FE = sp.WRITE_LINEAR, sp.FENCE


def setup(c):
    c.wl_addr = Signal(c.aw, name="wl_addr")


def start(c, pkt):
    m, h, p = c.m, c.hdr, c.p
    if pkt is FE:
        c.count_packet(pkt.index)
        # (the block, its address and AWUSER: prepare())
        m.d.sync += [c.blk_mask.eq(Const(1, BLOCK_DWORDS) << pk.address(h, p, FE, "addr", c.aw)[2:5]),
                     c.wr_req.eq(1)]
        m.next = "WRITE_WAIT"
    else:
        m.d.sync += c.blk_mask.eq(0)
        m.next = "WL_COLLECT"


def prepare(c, pkt):
    """In CHECK, whatever its checks say: `wl_addr` is read in WL_COLLECT only, and `rem`
    (the data dwords left; 0 for a FENCE) in WL_COLLECT and WRITE_WAIT only, before which
    a packet that does not start goes through RUN, which loads `rem` anew; so both load
    in every CHECK of their packet and their enables wait for none of the checks (they
    were sdma_32's critical paths after issue 14's counter bank: the payload's checks'
    carry chains -> the start -> wl_addr's and then rem's enables, 11.3-12.6 ns)."""
    m, h, p = c.m, c.hdr, c.p
    if pkt is WL:
        m.d.sync += [c.wl_addr.eq(pk.address(h, p, WL, "dst", c.aw)), c.rem.eq(pk.field(h, p, WL, "COUNT") + 1)]
    else:
        m.d.sync += c.rem.eq(0)
        # FENCE's block: the writer reads the block registers only with `wr_req`, which only
        # the start sets, and an error names `blk_addr` only from the states that write, so
        # they load in every CHECK of a FENCE (the block's 256 enables waited for the
        # checks: sdma_32's path on seed 3, kind -> the verdict -> blk7's enable, 10.34 ns)
        addr = pk.address(h, p, FE, "addr", c.aw)
        m.d.sync += [b.eq(pk.field(h, p, FE, "DATA")) for b in c.blk]
        m.d.sync += [c.blk_addr.eq(addr), c.blk_user.eq(c.write_user(c.cur_vmid))]


def states(c):
    m, state, writer = c.m, c.state, c.writer
    with state("WL_COLLECT"):
        pos = c.wl_addr[2:5]
        with m.If(c.blk_mask == 0):
            m.d.sync += c.blk_addr.eq(c.wl_addr)
        with m.If(c.cur_valid):
            m.d.comb += c.pop.eq(1)
            m.d.sync += [Array(c.blk)[pos].eq(c.cur_data), c.blk_mask.eq(c.blk_mask | (1 << pos)),
                         c.wl_addr.eq(c.wl_addr + 4), c.rem.eq(c.rem - 1),
                         c.blk_user.eq(c.write_user(c.cur_vmid))]
            with m.If(c.cur_resp != RESP_OKAY):
                c.fail(c.bus_code(c.cur_resp, c.cur_user), c.cur_addr)
            with m.Elif((pos == BLOCK_DWORDS - 1) | (c.rem == 1)):
                with m.If(c.rem == 1):
                    c.count_packet(WL.index)  # (the model counts it once its data is read)
                m.d.sync += c.wr_req.eq(1)
                m.next = "WRITE_WAIT"
    with state("WRITE_WAIT"):
        with m.If(writer.done):
            m.d.sync += c.blk_mask.eq(0)
            with m.If(writer.resp != RESP_OKAY):
                c.fail(c.bus_code(writer.resp, writer.user), c.blk_addr)
            with m.Elif(c.rem == 0):
                m.next = "DONE"
            with m.Else():
                m.next = "WL_COLLECT"
