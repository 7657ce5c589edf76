"""The DMA test bench's DUT: two DMA engines sharing one AXI4 port through an AXI4Mux.

`dma_design(data_width)` converts `DmaBench` to Verilog (cached under build/rtl/, keyed
by the content of rtl/, spec/ and this file) and wraps it in testbench/sim/hdl/tb_dma.v with the
shared-file memory model and the AXI checker. Engine 0 uses read ID 1 / write ID 2 and
sits on mux port 0; engine 1 uses IDs 0 / 0 on port 1 (so it appears as IDs 8 / 8).

Per engine `d<i>_`: the command inputs, and bookkeeping done in hardware so the cocotb
side needs no Python per cycle: counts of accepted and completed commands and of error
completions, the last completion's resp/err_addr, the cycles of the last accept and
the last completion, and the engine's perf pulses summed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.axi_mux import AXI4Mux
from rtl.bus import AXI4Signature
from rtl.dma import DMAEngine

from ..pipes import write_whole
from .design import _rtl_digest, kick_time_zero, memory_sources
from . import BUILD, HDL_DIR, Design, _locked

ADDR_WIDTH = 48
ID_WIDTH = 4
ENGINE_IDS = ((1, 2), (0, 0))  # (read_id, write_id) per engine


class DmaBench(wiring.Component):
    def __init__(self, data_width: int = 64, **dma_kwargs):
        self.data_width = data_width
        self.dma_kwargs = dma_kwargs
        members = {"m_axi": Out(AXI4Signature(ADDR_WIDTH, data_width, ID_WIDTH)), "cycle": Out(32)}
        for i in range(len(ENGINE_IDS)):
            members.update({
                f"d{i}_cmd_valid": In(1), f"d{i}_cmd_ready": Out(1),
                f"d{i}_cmd_src": In(ADDR_WIDTH), f"d{i}_cmd_dst": In(ADDR_WIDTH),
                f"d{i}_cmd_bytes": In(21), f"d{i}_cmd_fill": In(1), f"d{i}_cmd_raw_wait": In(1),
                f"d{i}_abort": In(1),
                f"d{i}_busy": Out(1),
                f"d{i}_accepted": Out(32), f"d{i}_completed": Out(32), f"d{i}_errors": Out(32),
                f"d{i}_last_resp": Out(2), f"d{i}_last_err_addr": Out(ADDR_WIDTH),
                f"d{i}_accept_cycle": Out(32), f"d{i}_done_cycle": Out(32),
                f"d{i}_rd_bytes": Out(32), f"d{i}_wr_bytes": Out(32), f"d{i}_busy_cycles": Out(32),
            })
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        n = len(ENGINE_IDS)
        m.submodules.mux = mux = AXI4Mux(n, ADDR_WIDTH, self.data_width, ID_WIDTH)
        wiring.connect(m, mux.m, wiring.flipped(self.m_axi))
        m.d.sync += self.cycle.eq(self.cycle + 1)
        for i, (rid, wid) in enumerate(ENGINE_IDS):
            dma = DMAEngine(self.data_width, ADDR_WIDTH, ID_WIDTH, read_id=rid, write_id=wid,
                            **self.dma_kwargs)
            m.submodules[f"dma{i}"] = dma
            wiring.connect(m, dma.bus, mux.s[i])

            def p(name):
                return getattr(self, f"d{i}_{name}")

            m.d.comb += [
                dma.cmd_valid.eq(p("cmd_valid")), p("cmd_ready").eq(dma.cmd_ready),
                dma.cmd_src.eq(p("cmd_src")), dma.cmd_dst.eq(p("cmd_dst")),
                dma.cmd_bytes.eq(p("cmd_bytes")), dma.cmd_fill.eq(p("cmd_fill")),
                dma.cmd_raw_wait.eq(p("cmd_raw_wait")), dma.abort.eq(p("abort")), p("busy").eq(dma.busy),
            ]
            with m.If(dma.cmd_valid & dma.cmd_ready):
                m.d.sync += [p("accepted").eq(p("accepted") + 1), p("accept_cycle").eq(self.cycle)]
            with m.If(dma.done):
                m.d.sync += [
                    p("completed").eq(p("completed") + 1), p("done_cycle").eq(self.cycle),
                    p("last_resp").eq(dma.resp), p("last_err_addr").eq(dma.err_addr),
                ]
                with m.If(dma.resp != 0):
                    m.d.sync += p("errors").eq(p("errors") + 1)
            m.d.sync += [
                p("rd_bytes").eq(p("rd_bytes") + dma.perf_rd_bytes),
                p("wr_bytes").eq(p("wr_bytes") + dma.perf_wr_bytes),
                p("busy_cycles").eq(p("busy_cycles") + dma.perf_busy),
            ]
        return m


def _digest(extra: str) -> str:
    # every file of rtl/ and spec/, as the top's key (the engine is the package rtl/dma/,
    # and spec/vm.py sets its AxUSER): a key from rtl/*.py alone would keep a stale build
    h = hashlib.sha256(extra.encode())
    h.update(Path(__file__).read_bytes())
    h.update(_rtl_digest().encode())
    return h.hexdigest()[:16]


def dma_verilog(data_width: int = 64, **dma_kwargs) -> Path:
    """Verilog of DmaBench (module `dma_bench`), regenerated only when its sources change."""
    cfg = f"dw{data_width}" + "".join(f"-{k}{v}" for k, v in sorted(dma_kwargs.items()))
    out = BUILD / "rtl" / f"dma_bench-{cfg}-{_digest(cfg)}.v"
    with _locked(BUILD / "rtl" / f".lock-dma-{cfg}"):
        if not out.exists():
            text = verilog.convert(DmaBench(data_width, **dma_kwargs), name="dma_bench", emit_src=False)
            write_whole(out, kick_time_zero(text))
    return out


def dma_design(data_width: int = 64, **dma_kwargs) -> Design:
    cfg = f"dw{data_width}" + "".join(f"-{k}{v}" for k, v in sorted(dma_kwargs.items()))
    return Design(
        name=f"dma-{cfg}",
        toplevel="tb_dma",
        sources=(dma_verilog(data_width, **dma_kwargs), HDL_DIR / "axi_mem.v", HDL_DIR / "axi_checker.v",
                 HDL_DIR / "tb_dma.v"),
        parameters={"DATA_WIDTH": data_width},
        **memory_sources(),
    )
