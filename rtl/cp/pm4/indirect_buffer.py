"""INDIRECT_BUFFER: run IB_SIZE dwords at base one level deeper (ring → IB1 → IB2); with
CHAIN the current IB ends and the new one runs at the same level. The return to the
parent level when an IB is consumed is the parser's (rtl/cp/parser.py, RUN).

`c` is the CP's context (rtl/cp/processor.py): its signals and helpers by name."""

from spec import packets as pk

from ..packets import field, value

IB = pk.INDIRECT_BUFFER


def prepare(c, p):
    """In every payload cycle (the last one counts): the level one deeper is set up and its
    fetcher loaded (stopped; it is idle: the IB it last ran was consumed), so the first step
    is only the level and the fetcher's start."""
    m = c.m
    level = c.level
    # (a CHAIN loads the next level too: that fetcher is idle and is only loaded, not started,
    # and the registers of an unused level are set again by the next IB that uses it)
    with m.If(level < c.cp.ib_levels):
        m.d.comb += [c.load_ib.eq(1), c.load_level.eq(level + 1)]
        m.d.sync += [c.ib_base[level + 1].eq(value(p, IB, "base", c.aw)),
                     c.ib_pos[level + 1].eq(0), c.ib_empty[level + 1].eq(0),
                     c.saved_opcode[level].eq(c.hdr_opcode), c.saved_off[level].eq(c.hdr_off)]
        # IB_SIZE is in the dword on offer, which at level i - 1 is fetcher i - 1's: each
        # level's size is loaded from that fetcher's output register, not through the
        # multiplexer by the level that `cur_fetch_data` is (ib_size is the IB fetcher's `end`,
        # whose bits were among `cp_32`'s endpoints short of 100 MHz)
        size = IB.field("IB_SIZE")
        assert size.dword == IB.fixed - 1 and p[size.dword] is c.cur_fetch_data
        for i in range(1, 1 + c.cp.ib_levels):
            with m.If(level == i - 1):
                m.d.sync += c.ib_size[i].eq(c.fetchers[i - 1].dw_data[size.bits])


def start(c, p):
    """Once the checks pass: a CHAIN waits a cycle (the current IB's fetcher is flushed
    next cycle: its flush gates the dword popped this cycle); otherwise the level prepare()
    set up starts now."""
    m = c.m
    with m.If(field(p, IB, "CHAIN")):
        m.next = "EXEC_INDIRECT_BUFFER"
    with m.Else():
        m.d.comb += [c.start_ib.eq(1), c.start_level.eq(c.level + 1)]
        c.set_level(c.level + 1)
        with m.If(c.lvl[0]):
            # only the kernel ring names the VMID its IBs run with; an IB cannot change it
            # (a failing check stops the CP: SOFT_RESET clears it)
            m.d.sync += c.vmid.eq(field(p, IB, "VMID"))
        m.next = "RUN"


def states(c):
    m, level = c.m, c.level
    with c.state("EXEC_INDIRECT_BUFFER"):
        # CHAIN: the new IB replaces the current one at this level. Drop what the old IB
        # prefetched; load and start in the same cycle redirect its fetcher.
        for i in range(1, 1 + c.cp.ib_levels):
            with m.If(level == i):
                m.d.comb += c.flush_level[i].eq(1)
        m.d.comb += [c.load_ib.eq(1), c.load_level.eq(level), c.start_ib.eq(1), c.start_level.eq(level)]
        m.d.sync += [c.ib_base[level].eq(value(c.p, IB, "base", c.aw)),
                     c.ib_size[level].eq(field(c.p, IB, "IB_SIZE")),
                     c.ib_pos[level].eq(0), c.ib_empty[level].eq(0)]
        # the fetcher's end (IB_SIZE) is read from ib_size next cycle onwards
        m.next = "RUN"
