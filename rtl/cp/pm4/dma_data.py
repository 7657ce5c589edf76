"""DMA_DATA: hand a copy or fill to the DMA engine (rtl/dma/) and run on; with CP_SYNC
wait for it. The port keeps, per queued transfer, where its packet was (offset, level),
so a transfer's bus error is reported like that packet's, and sums the engine's counters.

`c` is the CP's context (rtl/cp/processor.py): its signals and helpers by name."""

from amaranth.hdl import Mux, Signal
from amaranth.lib import data
from amaranth.lib.memory import Memory

from spec import packets as pk
from spec.vm import Access

from ...bus import RESP_OKAY
from ..packets import field, value

DD = pk.DMA_DATA
META_DEPTH = 8  # transfers whose packet location is kept (≥ the engine's command queue)


def port(c):
    """The engine's side of the CP: transfer bookkeeping, errors and counters."""
    m, csr, dma = c.m, c.csr, c.dma
    rd_bytes = Signal(32, name="dma_rd_bytes")
    wr_bytes = Signal(32, name="dma_wr_bytes")
    cycles = Signal(32, name="dma_cycles")
    if c.cp.has_dma:
        m.d.comb += [c.dma_busy.eq(dma.busy), dma.abort.eq(csr.control_soft_reset | c.q_abort)]
        # (a small memory: LUTRAM on an FPGA)
        m.submodules.dma_meta = meta = Memory(shape=data.StructLayout({"off": 32, "level": 2, "vmid": 4}),
                                              depth=META_DEPTH, init=[])
        meta_w = meta.write_port()
        meta_r = meta.read_port(domain="comb")
        mw = Signal(range(META_DEPTH))
        mr = Signal(range(META_DEPTH))
        m.d.comb += [meta_w.addr.eq(mw), meta_w.en.eq(c.meta_push), meta_w.data.off.eq(c.hdr_off),
                     meta_w.data.level.eq(c.level), meta_w.data.vmid.eq(c.cur_vmid), meta_r.addr.eq(mr)]
        with m.If(c.meta_push):
            m.d.sync += mw.eq(mw + 1)
        with m.If(dma.done):
            m.d.sync += mr.eq(mr + 1)
            with m.If(~c.dma_failed):
                m.d.comb += c.perf_count_dma.eq(1)
                with m.If(dma.resp != RESP_OKAY):
                    m.d.sync += c.dma_failed.eq(1)
                    m.d.comb += c.dma_err.eq(1)
        # (where and what, whatever `done` says: the capture takes them when dma_err fires)
        m.d.comb += [c.dma_err_code.eq(c.bus_code(dma.resp, dma.err_user)), c.dma_err_off.eq(meta_r.data.off),
                     c.dma_err_level.eq(meta_r.data.level), c.dma_err_vmid.eq(meta_r.data.vmid),
                     c.dma_err_user.eq(dma.err_user),
                     c.dma_err_access.eq(Mux(dma.err_write, Access.DMA_WRITE, Access.DMA_READ))]
        with m.If(csr.control_soft_reset | c.q_abort):
            m.d.sync += [mw.eq(0), mr.eq(0)]
        # the engine's pulses a cycle late (as status.py's counters; PERF_CLEAR drops them)
        rd_inc, wr_inc, busy_inc = (Signal.like(v, name=f"dma_{n}_inc") for n, v in (
            ("rd", dma.perf_rd_bytes), ("wr", dma.perf_wr_bytes), ("busy", dma.perf_busy)))
        m.d.sync += [rd_inc.eq(Mux(csr.control_perf_clear, 0, dma.perf_rd_bytes)),
                     wr_inc.eq(Mux(csr.control_perf_clear, 0, dma.perf_wr_bytes)),
                     busy_inc.eq(dma.perf_busy & ~csr.control_perf_clear)]
        with m.If(csr.control_perf_clear):
            m.d.sync += [rd_bytes.eq(0), wr_bytes.eq(0), cycles.eq(0)]
        with m.Else():
            m.d.sync += [rd_bytes.eq(rd_bytes + rd_inc), wr_bytes.eq(wr_bytes + wr_inc),
                         cycles.eq(cycles + busy_inc)]
    if c.cp.has_dma:
        p = c.p
        # The command comes straight from the payload registers, and its VALID from a register
        # set as the packet starts (check_and_start) and cleared once it is taken or the CP
        # stops: the engine's handshake starts from flip-flops.
        fill = field(p, DD, "SRC_SEL") == DD.field("SRC_SEL").values["DATA"]
        m.d.comb += [
            dma.cmd_valid.eq(c.dma_cmd_go & ~c.err_pending_any & ~c.failed & ~c.q_abort),
            dma.cmd_src.eq(value(p, DD, "src", c.aw)),
            dma.cmd_dst.eq(value(p, DD, "dst", c.aw)),
            dma.cmd_bytes.eq(field(p, DD, "BYTE_COUNT")),
            dma.cmd_fill.eq(fill),
            dma.cmd_raw_wait.eq(field(p, DD, "RAW_WAIT")),
            dma.cmd_vmid.eq(c.cur_vmid),
        ]
        with m.If((dma.cmd_valid & dma.cmd_ready) | c.err_pending_any | c.failed | c.stopped | c.q_abort):
            m.d.sync += c.dma_cmd_go.eq(0)
    m.d.comb += [csr.perf_dma_bytes_read.eq(rd_bytes), csr.perf_dma_bytes_written.eq(wr_bytes),
                 csr.perf_dma_busy_cycles.eq(cycles), csr.status_dma_busy.eq(c.dma_busy)]


def states(c):
    """Queue the transfer; wait for it only with CP_SYNC."""
    m, state, p, dma = c.m, c.state, c.p, c.dma
    with state("EXEC_DMA_DATA"):
        if c.cp.has_dma:
            with m.If(c.err_pending_any):
                m.next = "ERR_DRAIN"
            with m.Elif(dma.cmd_ready):
                m.d.comb += c.meta_push.eq(1)
                with m.If(field(p, DD, "CP_SYNC")):
                    m.d.sync += c.dma_sync_new.eq(1)
                    m.next = "DMA_SYNC"
                with m.Else():
                    m.next = "DONE"
            with m.Else():
                m.d.comb += c.stall.eq(1)
        else:
            m.next = "DONE"  # unreachable: the checks refuse DMA_DATA without an engine
    with state("DMA_SYNC"):
        # (the engine's busy a cycle late: the transfer queued last cycle shows from now on)
        m.d.comb += c.stall.eq(1)
        m.d.sync += c.dma_sync_new.eq(0)
        with m.If(c.err_pending_any):
            m.next = "ERR_DRAIN"
        with m.Elif(~c.dma_busy_r & ~c.dma_sync_new):
            m.next = "DONE"
