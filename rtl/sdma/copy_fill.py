"""COPY_LINEAR and CONSTANT_FILL: one transfer on the engine's own DMA engine (rtl/dma.py),
waited for before the packet finishes (SDMA packets run in order, each to completion, so
no transfer ever reads what an earlier one still writes). Its bus error or VM fault is
the packet's, at the address the DMA engine reports (docs/hardware.md, "The DMA engine").

`c` is the engine's context (rtl/sdma/engine.py): its signals and helpers by name."""

from amaranth.hdl import Mux, Signal

from spec import sdma_packets as sp

from ..bus import RESP_OKAY
from . import packets as pk

CL, CF = sp.COPY_LINEAR, sp.CONSTANT_FILL


def setup(c):
    m, dma, h, p = c.m, c.dma, c.hdr, c.p
    c.dma_go = dma_go = Signal(name="dma_go")
    is_fill = c.kind == CF.index
    # the command straight from the packet's registers; VALID from a register
    m.d.comb += [
        dma.cmd_valid.eq(dma_go),
        dma.cmd_src.eq(Mux(is_fill, pk.field(h, p, CF, "SRC_DATA"), pk.address(h, p, CL, "src", c.aw))),
        dma.cmd_dst.eq(Mux(is_fill, pk.address(h, p, CF, "dst", c.aw), pk.address(h, p, CL, "dst", c.aw))),
        dma.cmd_bytes.eq(Mux(is_fill, pk.field(h, p, CF, "COUNT"), pk.field(h, p, CL, "COUNT")) + 1),
        dma.cmd_fill.eq(is_fill), dma.cmd_raw_wait.eq(0), dma.cmd_vmid.eq(c.cur_vmid),
    ]
    with m.If(dma.cmd_ready):
        m.d.sync += dma_go.eq(0)


def start(c, pkt):
    c.count_packet(pkt.index)  # (counted as it starts, as the model counts it)
    c.m.d.sync += c.dma_go.eq(1)
    c.m.next = "DMA_WAIT"


def states(c):
    m, dma, state = c.m, c.dma, c.state
    with state("DMA_WAIT"):
        with m.If(dma.done):
            with m.If(dma.resp != RESP_OKAY):
                c.fail(c.bus_code(dma.resp, dma.err_user), dma.err_addr)
            with m.Else():
                m.next = "DONE"
