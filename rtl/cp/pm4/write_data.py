"""WRITE_DATA: the N data dwords to consecutive dwords at addr, collected block by block
(an aligned 32-byte block each), each block requested in the cycle its last dword arrives
and waited for before the next packet (so WR_CONFIRM is always honoured). With ADDR_INCR
= NO_INCREMENT every dword goes to addr itself: each one replaces the last in the block
buffer and only the last is written (memory cannot tell N writes of one address from the
last of them; docs/hardware.md).

`c` is the CP's context (rtl/cp/processor.py): its signals and helpers by name."""

from amaranth.hdl import Mux

from spec import packets as pk

from .. import errors
from ..packets import field, value
from ..writer import BLOCK_DWORDS, WriteSource

WD = pk.WRITE_DATA


def prepare(c, p):
    """In every payload cycle: where the data goes (the last cycle's value counts)."""
    c.m.d.sync += [c.wd_addr.eq(value(p, WD, "addr", c.aw)), c.blk_mask.eq(0),
                   c.blk_user.eq(c.write_user(c.cur_vmid))]  # (the packet's VMID)


def ends(next_pos_last, no_incr, rem):
    """Whether the data dword after the one taken now completes its block: it goes to the
    block's last dword (`next_pos_last`, unless every dword goes to one address), or it is
    the packet's last (`rem` counts the dword taken now). Kept in `wd_ends`, so the collect
    decision reads one register instead of the position, the mode and the count."""
    return (next_pos_last & ~no_incr) | (rem == 2)


def no_increment(p):
    """ADDR_INCR says every data dword goes to the one address (amdgpu's WR_ONE_ADDR)."""
    return field(p, WD, "ADDR_INCR") == WD.field("ADDR_INCR").values["NO_INCREMENT"]


def payload_taken(c):
    """In every payload cycle that takes a dword (the last fixed one counts: the address's
    low dword and the control dword are in p by then): `wd_ends` for the first data dword."""
    no_incr = no_increment(c.p)
    addr_lo = c.p[WD.field("ADDR_LO").dword]
    c.m.d.sync += c.wd_ends.eq(ends(addr_lo[2:5] == BLOCK_DWORDS - 1, no_incr, c.rem))


def start(c, p):
    """Once the checks pass: collecting starts in the next cycle."""
    c.m.next = "WD_COLLECT"


def states(c):
    m, state, writer = c.m, c.state, c.writer
    blk_mask, blk_addr, wd_addr, rem = c.blk_mask, c.blk_addr, c.wd_addr, c.rem
    with state("WD_COLLECT"):
        pos = wd_addr[2:5]
        no_incr = no_increment(c.p)
        # the block's first written address (errors name it): wd_addr until a dword is in
        with m.If(blk_mask == 0):
            m.d.sync += blk_addr.eq(wd_addr)
        # The mask takes the dword's bit whether or not the dword is there yet: `pos` moves
        # only as a dword is taken, so the bit is the one the dword sets when it comes, and a
        # block left without it (a failed check, a reset) is never written (the next packet's
        # first step sets the mask again). `cur_fetch_valid` → `blk_mask` was `cp_32`'s
        # critical path once the take decision was two LUTs (12.28 ns).
        m.d.sync += blk_mask.eq(blk_mask | (1 << pos))
        with m.If(~c.cur_fetch_valid):
            m.d.comb += c.stall.eq(1)
        with m.Else():
            # (the dword is taken: processor.py `pops`.) It goes into the block whatever its
            # response: a bad one stops the CP below, and then the block is never written. The
            # block's address and source are its own from here on.
            m.d.comb += [c.blk_we.eq(1), c.blk_pos.eq(pos), c.blk_wdata.eq(c.cur_fetch_data)]
            m.d.sync += [c.wr_src.eq(WriteSource.BLOCK),
                         wd_addr.eq(Mux(no_incr, wd_addr, wd_addr + 4)), rem.eq(rem - 1),
                         c.rem_is1.eq(rem == 2), c.rem_is0.eq(c.rem_is1), c.wd_ends.eq(ends(pos == BLOCK_DWORDS - 2, no_incr, rem))]
            with m.If(c.cur_fetch_bad), c.gated():  # (raised by parser.py's `err_given_dw_valid`)
                c.fail(errors.BUS)  # at the dword
            with m.Elif(c.wd_ends):
                # the block is complete with this dword (in the block buffer next cycle;
                # `wd_ends`: its position is the block's last, or it is the packet's last)
                with m.If(c.oob):
                    m.next = "WD_WRITE"  # (which answers DECERR)
                with m.Else():
                    m.d.comb += c.wr_set.eq(1)
                    m.next = "WD_WAIT"
    with state("WD_WRITE"):
        c.request_write("WD_WAIT", check_oob=True)
    with state("WD_WAIT"):
        m.d.comb += c.stall.eq(1)
        # the next block starts empty: cleared once the writer has sent this one (it reads
        # the mask no more), not when it is answered
        with m.If(writer.sent):
            m.d.sync += blk_mask.eq(0)
        with m.If(c.wr_bad):
            c.write_failed()  # at the written address
        with m.Elif(c.wr_ok):
            with m.If(c.rem_is0):
                m.next = "DONE"
            with m.Else():
                m.next = "WD_COLLECT"
