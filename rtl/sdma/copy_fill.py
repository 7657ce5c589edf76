"""COPY_LINEAR and CONSTANT_FILL: transfers on the engine's own DMA engine (rtl/dma/).

A transfer runs in the background, as the CP's DMA_DATA does: the packet finishes once
its command is queued, and the parser goes on. Only COPY_LINEAR and CONSTANT_FILL start
while transfers run; any other packet waits in RUN until every transfer is answered (so a
FENCE after copies is written after their data, a POLL reads memory they wrote). A copy
whose source range meets the destination range of the transfers in flight waits for them
(the DMA engine's RAW wait), so packets still act in order. A packet that fails its checks
while transfers run waits for them first: an earlier transfer's error is the one reported.

A transfer's error is its packet's: a small memory keeps, per queued transfer, where its
packet was (offset, level, OP, VMID), and the first failing one latches SDMA_ERROR (its
address the DMA engine's report); the transfers queued behind it are cancelled by the
engine. After a transfer's error, SDMA_RB_RPTR, the write-back, PERF_SDMA_DWORDS_FETCHED,
PERF_SDMA_PACKETS and the byte counters depend on timing (packets after it were parsed).

`c` is the engine's context (rtl/sdma/engine.py): its signals and helpers by name."""

from amaranth.hdl import Mux, Signal
from amaranth.lib import data
from amaranth.lib.memory import Memory

from spec.sdma import packets as sp

from ..bus import RESP_OKAY
from . import packets as pk

CL, CF = sp.COPY_LINEAR, sp.CONSTANT_FILL
META_DEPTH = 8  # transfers whose packet is kept (≥ the DMA engine's command queue)


def setup(c):
    m, dma, h, p, aw = c.m, c.dma, c.hdr, c.p, c.aw
    c.dma_go = dma_go = Signal(name="dma_go")
    # What the command needs beyond the payload registers is worked out in registers when
    # the packet starts (start(), in CHECK), so the command and its RAW check reach the DMA
    # engine's queues from registers, not through the byte count's and range's adders.
    c.dma_fill = is_fill = Signal(name="dma_fill")
    c.dma_bytes = nbytes = Signal(dma.cmd_bytes.shape().width, name="dma_bytes")
    c.dma_src_last = src_last = Signal(aw + 1, name="dma_src_last")  # a copy's last source byte
    c.dma_dst_end = dst_end = Signal(aw + 1, name="dma_dst_end")  # the byte after its destination
    src = Signal(aw, name="dma_src")
    dst = Signal(aw, name="dma_dst")
    m.d.comb += [
        src.eq(pk.address(h, p, CL, "src", aw)),
        dst.eq(Mux(is_fill, pk.address(h, p, CF, "dst", aw), pk.address(h, p, CL, "dst", aw))),
    ]
    # the destinations of the transfers in flight, as one range [lo, hi): a copy reading from it
    # waits for them (RAW)
    lo = Signal(aw + 1, name="dma_dst_lo")
    hi = Signal(aw + 1, name="dma_dst_hi")
    raw = Signal(name="dma_raw")
    m.d.comb += raw.eq(~is_fill & dma.busy_r & (src < hi) & (src_last >= lo))
    # the command from the packet's registers; VALID from a register
    m.d.comb += [
        dma.cmd_valid.eq(dma_go & ~c.err_any),
        dma.cmd_src.eq(Mux(is_fill, pk.field(h, p, CF, "SRC_DATA"), src)),
        dma.cmd_dst.eq(dst), dma.cmd_bytes.eq(nbytes),
        dma.cmd_fill.eq(is_fill), dma.cmd_raw_wait.eq(raw), dma.cmd_vmid.eq(c.cur_vmid),
    ]
    taken = Signal(name="dma_taken")
    m.d.comb += taken.eq(dma_go & dma.cmd_ready)
    with m.If(c.err_any):
        m.d.sync += dma_go.eq(0)  # (a queued packet's transfer never starts after an error)
    with m.If(taken):
        m.d.sync += [dma_go.eq(0), lo.eq(Mux(dma.busy_r & (lo < dst), lo, dst)),
                     hi.eq(Mux(dma.busy_r & (hi > dst_end), hi, dst_end))]

    # where each queued transfer's packet was (a small memory: LUTRAM on an FPGA)
    meta = Memory(shape=data.StructLayout({"off": 32, "level": 1, "op": 8, "vmid": 4}), depth=META_DEPTH, init=[])
    m.submodules.dma_meta = meta
    mw_, mr_ = meta.write_port(), meta.read_port(domain="comb")
    mw = Signal(range(META_DEPTH), name="meta_w")
    mr = Signal(range(META_DEPTH), name="meta_r")
    m.d.comb += [mw_.addr.eq(mw), mw_.en.eq(taken), mw_.data.off.eq(c.hdr_off), mw_.data.level.eq(c.in_ib),
                 mw_.data.op.eq(c.cur_op), mw_.data.vmid.eq(c.cur_vmid), mr_.addr.eq(mr)]
    with m.If(taken):
        m.d.sync += mw.eq(mw + 1)
    with m.If(dma.done):
        m.d.sync += mr.eq(mr + 1)
    with m.If(c.reset_pulse):
        m.d.sync += [mw.eq(0), mr.eq(0)]
    # the first failing transfer's error, for the latch (engine.py)
    m.d.comb += [c.x_err.eq(dma.done & (dma.resp != RESP_OKAY)),
                 c.x_code.eq(c.bus_code(dma.resp, dma.err_user)), c.x_addr.eq(dma.err_addr),
                 c.x_off.eq(mr_.data.off), c.x_level.eq(mr_.data.level), c.x_op.eq(mr_.data.op),
                 c.x_vmid.eq(mr_.data.vmid)]
    # transfers queued or running: other packets wait (engine.py, RUN). (`busy_r` is `busy`
    # from a register, here and above: CHECK's wait reads it)
    m.d.comb += c.transfers.eq(dma.busy_r | dma_go)


def start(c, pkt):
    m, h, p, aw = c.m, c.hdr, c.p, c.aw
    c.count_packet(pkt.index)  # (counted as it starts, as the model counts it)
    count = pk.field(h, p, pkt, "COUNT")
    # COUNT + 1 is never 0 in the byte count's width: the DMA engine is built without
    # zero-length commands (rtl/top.py `zero_length=False`)
    assert len(count) < len(c.dma_bytes)
    m.d.sync += [c.dma_go.eq(1), c.dma_fill.eq(pkt is CF), c.dma_bytes.eq(count + 1),
                 c.dma_dst_end.eq(pk.address(h, p, pkt, "dst", aw) + count + 1)]
    if pkt is CL:  # (src + bytes > lo: src + COUNT >= lo)
        m.d.sync += c.dma_src_last.eq(pk.address(h, p, CL, "src", aw) + count)
    c.m.next = "DMA_QUEUE"


def states(c):
    m, state = c.m, c.state
    with state("DMA_QUEUE"):
        with m.If(c.err_any):
            m.next = "ERR_DRAIN"
        with m.Elif(~c.dma_go):  # (taken: the packet is done, its transfer runs on)
            m.next = "DONE"
