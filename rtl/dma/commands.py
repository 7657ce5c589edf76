"""The DMA engine's command side: the command pointers and the three command queues.

Each accepted command is written, with what each stage needs worked out once, into three
small queues (mostly block RAM, queue.py), one per stage that walks the commands in order: qa for
the AR issuer, qx for the R realigner, qw for the AW issuer (read.py, write.py). The
stages' command pointers double as the queues' read pointers; `done_ptr` (completion.py)
frees an entry.

On an error or an abort, `aborting` is set and `abort_ptr` names the first command in
scope: the failing one and every command queued after it (`in_scope`)."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data

from .burst import BurstWalk
from .queue import BramQueue


def command_pointers(m: Module, dma, s) -> None:
    """One pointer per stage, with a wrap bit; `cmd_ready` while the queues have room."""
    AW, D, cpw = s.take("AW D cpw")
    wr_ptr = Signal(cpw)    # commands accepted
    rd_ptr = Signal(cpw)    # AR issuer
    rx_ptr = Signal(cpw)    # R realigner / filler
    aw_ptr = Signal(cpw)    # AW issuer
    done_ptr = Signal(cpw)  # completion

    aborting = Signal()
    abort_ptr = Signal(cpw)
    err_resp = Signal(2)
    err_addr = Signal(AW)

    def dist(p):
        return (p - done_ptr)[:cpw]

    def in_scope(p):
        """The command at p is the failing one or queued after it."""
        return aborting & (dist(p) >= dist(abort_ptr))

    full = Signal()
    m.d.comb += full.eq(dist(wr_ptr) == D)
    m.d.comb += dma.cmd_ready.eq(~full & ~aborting)
    push_cmd = Signal()
    m.d.comb += push_cmd.eq(dma.cmd_valid & dma.cmd_ready)
    with m.If(push_cmd):
        m.d.sync += wr_ptr.eq(wr_ptr + 1)
    s.give(wr_ptr=wr_ptr, rd_ptr=rd_ptr, rx_ptr=rx_ptr, aw_ptr=aw_ptr, done_ptr=done_ptr,
           aborting=aborting, abort_ptr=abort_ptr, err_resp=err_resp, err_addr=err_addr,
           in_scope=in_scope, push_cmd=push_cmd)


def command_queues(m: Module, dma, s) -> None:
    """An accepted command, worked out once into qa, qx and qw."""
    AW, B, D, cw, lb, wr_ptr, rd_ptr, rx_ptr, aw_ptr, push_cmd = s.take("AW B D cw lb wr_ptr rd_ptr rx_ptr aw_ptr push_cmd")
    # The last source beat is (s_off + bytes − 1) >> lb, the last destination beat
    # (d_off + bytes − 1) >> lb: each one carry chain from the command (this logic lies on
    # the path from where the command comes from, the CP's payload registers across the
    # chip, into the queues' block RAMs: burst.py's first burst likewise). The two counts
    # differ only by the carries out of the lanes (`cs`, `cd`), which need only the low
    # bits of bytes − 1.
    s_off = dma.cmd_src[:lb]
    d_off = dma.cmd_dst[:lb]
    nm1_lo = Signal(lb)
    cs = Signal()
    cd = Signal()
    end_lane = Signal(lb)
    m.d.comb += [
        nm1_lo.eq(dma.cmd_bytes[:lb] - 1),
        cs.eq((s_off + nm1_lo)[lb]) if lb else cs.eq(0),
        Cat(end_lane, cd).eq(d_off + nm1_lo),
    ]
    rlast = Signal(cw)  # source beats − 1 (for a zero-length command, whatever it gives: unused)
    m.d.comb += rlast.eq(BurstWalk.last_beat(dma.cmd_bytes, s_off, lb))
    zero = (dma.cmd_bytes == 0) if dma.zero_length else Const(0)
    e = s_off > d_off   # the first source beat only primes the realigner

    vmid_field = {"vmid": 4} if dma.vm else {}
    # (each walk's first burst is worked out here, so loading a command is a copy: burst.py)
    first = BurstWalk.first_layout(s)
    qa_layout = data.StructLayout({"addr": AW - lb} | first | {"skip": 1, "raw": 1, "up": 1, "dn": 1}
                                  | vmid_field)
    qx_layout = data.StructLayout({"src": AW, "last": cw, "sh": lb + 1, "e": 1, "flush": 1, "skip": 1})
    qw_layout = data.StructLayout({"addr": AW - lb} | first | {"zero": 1, "lane": lb, "end_lane": lb,
                                   "fill": 1, "pattern": 32} | vmid_field)
    # (the fields each stage decides on in the cycle it reads them stay in LUTRAM: queue.py)
    # (rows never written hold a valid first burst too, as every written one does: so the
    # formal proof's induction can say so of every row, formal/blocks/dma.py)
    valid = {"short": 1, "n": 1}
    qa = BramQueue(m, "qa", qa_layout, D, wr_ptr, rd_ptr, "skip", fast=("skip", "raw"), init_row=valid)
    qx = BramQueue(m, "qx", qx_layout, D, wr_ptr, rx_ptr, "skip", fast=("skip", "flush", "last"))
    qw = BramQueue(m, "qw", qw_layout, D, wr_ptr, aw_ptr, "zero", fast=("zero",), init_row=valid)
    for q in (qa, qx, qw):
        m.d.comb += q.w.en.eq(push_cmd)
    m.d.comb += [
        qa.w.data.addr.eq(dma.cmd_src[lb:]),
        qa.w.data.skip.eq(dma.cmd_fill | zero), qa.w.data.raw.eq(dma.cmd_raw_wait),
        qa.w.data.up.eq(cd & ~cs), qa.w.data.dn.eq(cs & ~cd),

        qx.w.data.src.eq(dma.cmd_src), qx.w.data.last.eq(rlast),
        qx.w.data.sh.eq(Mux(s_off == d_off, B, (s_off - d_off)[:lb])), qx.w.data.e.eq(e),
        qx.w.data.flush.eq(Mux(e, cd == cs, cd & ~cs)), qx.w.data.skip.eq(dma.cmd_fill | zero),

        qw.w.data.addr.eq(dma.cmd_dst[lb:]), qw.w.data.zero.eq(zero),
        qw.w.data.lane.eq(d_off), qw.w.data.end_lane.eq(end_lane),
        qw.w.data.fill.eq(dma.cmd_fill), qw.w.data.pattern.eq(dma.cmd_src[:32]),
    ]
    for q, addr in ((qa, dma.cmd_src), (qw, dma.cmd_dst)):
        m.d.comb += [q.w.data[k].eq(v) for k, v in BurstWalk.first(s, addr, dma.cmd_bytes, zero).items()]
    if dma.vm:
        m.d.comb += [qa.w.data.vmid.eq(dma.cmd_vmid), qw.w.data.vmid.eq(dma.cmd_vmid)]
    s.give(qa=qa, qx=qx, qw=qw, qx_layout=qx_layout)
