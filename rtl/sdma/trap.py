"""TRAP: once every earlier packet is done (they all are: packets run to completion), an IH
entry from client SDMA0, source SDMA_TRAP, INT_CONTEXT in DATA0, while
SDMA_CNTL.TRAP_ENABLE; the CP's IH writer appends it (rtl/cp/ih.py) and answers with its
write's response, whose error is the packet's (at the address the IH writer wrote).

`c` is the engine's context (rtl/sdma/engine.py): its signals and helpers by name."""

from spec import ih as ih_spec
from spec.sdma import packets as sp

from ..bus import RESP_OKAY
from . import packets as pk

TR = sp.TRAP


def setup(c):
    pass


def start(c, pkt):
    m = c.m
    c.count_packet(pkt.index)
    with m.If(c.csr.sdma_cntl_trap_enable):
        c.ih_request(ih_spec.Source.SDMA_TRAP, [pk.field(c.hdr, c.p, TR, "INT_CONTEXT"), 0, 0, 0], c.cur_vmid)
        m.next = "IH_WAIT"
    with m.Else():
        m.next = "DONE"


def states(c):
    """IH_WAIT: the CP's answer to an IH request (TRAP, POLL_REGMEM's timeout)."""
    m, state = c.m, c.state
    with state("IH_WAIT"):
        with m.If(c.ih_done):
            with m.If(c.ih_resp != RESP_OKAY):
                c.fail(c.bus_code(c.ih_resp, c.ih_user), c.ih_addr)
            with m.Else():
                m.next = "DONE"
