"""INDIRECT_BUFFER: run IB_SIZE dwords at base one level deeper (ring → IB1 → IB2); with
CHAIN the current IB ends and the new one runs at the same level. The return to the
parent level when an IB is consumed is the parser's (rtl/cp/processor.py, RUN).

`c` is the CP's context (rtl/cp/processor.py): its signals and helpers by name."""

from amaranth.hdl import Mux

from spec import packets as pk

from .packets import field, value

IB = pk.INDIRECT_BUFFER


def enter(c, p):
    """Push an IB level (or with CHAIN replace the current IB): start its fetcher."""
    m = c.m
    base = value(p, IB, "base", c.aw)
    size = field(p, IB, "IB_SIZE")
    chain = field(p, IB, "CHAIN")
    level = c.level
    new_level = Mux(chain, level, level + 1)
    m.d.comb += [c.start_ib.eq(1), c.start_level.eq(new_level), c.start_base.eq(base)]
    m.d.sync += [c.ib_base[new_level].eq(base), c.ib_size[new_level].eq(size),
                 c.ib_pos[new_level].eq(0), level.eq(new_level)]
    with m.If(~chain):
        m.d.sync += [c.saved_hdr[level].eq(c.hdr), c.saved_off[level].eq(c.hdr_off),
                     c.saved_addr[level].eq(c.hdr_addr)]
    with m.If(level == 0):
        # only the kernel ring names the VMID its IBs run with; an IB cannot change it
        m.d.sync += c.vmid.eq(field(p, IB, "VMID"))
    # the fetcher's end (IB_SIZE) is read from ib_size next cycle onwards
    m.next = "RUN"


def start(c, p):
    """Once the checks pass: a CHAIN waits a cycle (the current IB's fetcher is flushed
    next cycle: its flush gates the dword popped this cycle); otherwise enter now."""
    with c.m.If(field(p, IB, "CHAIN")):
        c.m.next = "EXEC_INDIRECT_BUFFER"
    with c.m.Else():
        enter(c, p)


def states(c):
    with c.state("EXEC_INDIRECT_BUFFER"):
        # drop what the old IB prefetched; start in the same cycle redirects
        for i in range(1, 1 + c.cp.ib_levels):
            with c.m.If(c.level == i):
                c.m.d.comb += c.flush_level[i].eq(1)
        enter(c, c.p)
