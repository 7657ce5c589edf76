"""The SDMA engine: its ring and doorbell, the parser, errors, queue reset, status.

docs/hardware.md ("The SDMA copy engine") is the contract; testbench/refmodel/sdma.py is the
reference model this follows check by check. The pieces:

- two Fetchers (rtl/cp/fetch.py: the ring's, wrapping, and the IB's) read ahead; the parser
  pops one dword per cycle from the current level's (an SDMA IB does not nest);
- the parser FSM (here) reads a header, looks its (OP, SUB_OP) up (packets.py), checks that
  the packet lies inside its buffer, collects the fixed payload into registers, checking
  each dword's fields as it arrives (into verdict registers), and in a CHECK cycle reads
  the verdict and starts the packet's executor (one module per family);
- one BlockWriter (rtl/cp/writer.py) makes every memory write of the engine (WRITE_LINEAR,
  FENCE, the rptr write-back), one aligned 32-byte block at a time, each waited for;
- COPY_LINEAR and CONSTANT_FILL run on the engine's own DMA engine (rtl/dma/, given as
  `dma`), one transfer at a time: a packet finishes when its transfer is answered;
- IH entries (TRAP, POLL_REGMEM's timeout, the error entry) are requested from the CP,
  whose IH writer owns the IH ring (rtl/cp/ih.py: it appends them between packets, while
  stopped by an error and between WAIT_REG_MEM polls), and answered with the write's
  response.

Pointers: the registers count bytes (AMD's units); inside, `rdw` (ring packets finished),
`rpos` (ring dwords consumed) and `wdw` (the doorbell's write pointer) count dwords, 32
bits free running, so the byte pointers are these << 2.

The VMID sideband (rtl/mmu.py): the ring's fetches and the rptr write-back are VMID 0; an
IB fetches with the VMID its ring INDIRECT_BUFFER names, and its packets read and write
with it.

Errors (errors.py: the latch and its captures, `fail()`, the reset request) latch
SDMA_ERROR* once (a transfer's, the parser's first, or a doorbell's), stop the parser at
its next step, drain the engine's bus traffic (a transfer under way completes), then
request an SDMA_ERROR IH entry and wait in ERROR. SDMA_CNTL.QUEUE_RESET (and
CONTROL.SOFT_RESET) drains the same way (transfers are aborted) and returns the queue to
idle; the CP is not involved.
"""

from contextlib import contextmanager

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from spec import ih as ih_spec
from spec.sdma import packets as sp
from spec import vm as vm_spec

from ..bus import AXI4Signature, BURST_INCR, RESP_OKAY
from ..cp.fetch import Fetcher
from ..cp.packets import pack_fields
from ..cp.writer import BLOCK_DWORDS, BlockWriter
from ..csr import REG_FIELDS, CpError
from ..mmu import REQ_USER, RESP_USER, req_user
from ..perf import CounterBank
from . import copy_fill, indirect_buffer, poll_regmem, read_port, trap, write
from . import packets as pk
from .errors import error_latch

SDMA_BYTES_WIDTH = 23  # COPY_LINEAR / CONSTANT_FILL move up to 4 MiB (COUNT + 1)
MIN_LOG2, MAX_LOG2 = 4, 20  # SDMA_RB_CNTL.RB_SIZE range (the model clamps to it)
AVAIL_BITS = 23  # the dwords left in a buffer, saturated: more than a packet can need
assert 1 << AVAIL_BITS > (1 << sp.WRITE_LINEAR.field("COUNT").width) + sp.WRITE_LINEAR.fixed + 1


class _Context:
    """The engine's signals and helpers by name, for the modules that build parts of it
    (errors.py, status.py and the executors)."""

    def __init__(self, names: dict):
        self.update(names)

    def update(self, names: dict) -> None:
        self.__dict__.update((k, v) for k, v in names.items() if k not in ("self", "c"))

    def take(self, names: str) -> tuple:
        return tuple(getattr(self, n) for n in names.split())


class SdmaEngine(wiring.Component):
    """`csr`: the CSR block (SDMA_* configuration in, status and counters out). `dma`: the
    engine's own DMAEngine (bytes_width ≥ SDMA_BYTES_WIDTH, vm=True), whose bus the top
    connects to the memory mux beside `bus`."""

    def __init__(self, csr, dma, data_width: int = 64, addr_width: int = 48, fetch_depth: int = 8):
        self.csr = csr
        self.dma = dma
        self.data_width = data_width
        self.addr_width = addr_width
        self.fetch_depth = fetch_depth
        super().__init__({
            "bus": Out(AXI4Signature(addr_width, data_width, 4, REQ_USER.size, RESP_USER.size)),
            # IH entries, appended by the CP's IH writer: the request holds until `ih_done`
            "ih_valid": Out(1), "ih_src": Out(8), "ih_client": Out(8), "ih_vmid": Out(4),
            "ih_data": Out(128),
            "ih_done": In(1), "ih_resp": In(2), "ih_user": In(RESP_USER), "ih_addr": In(addr_width),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        csr, dma, bus = self.csr, self.dma, self.bus
        aw = self.addr_width
        DW = self.data_width
        dpb = DW // 32

        # ---------------------------------------------------------------- configuration
        ring_base = Signal(aw)
        m.d.comb += ring_base.eq(Cat(Const(0, 8), csr.sdma_rb_base_lo, csr.sdma_rb_base_hi))
        log2 = Signal(5)
        rs = csr.sdma_rb_cntl_rb_size
        m.d.comb += log2.eq(Mux(rs < MIN_LOG2, MIN_LOG2, Mux(rs > MAX_LOG2, MAX_LOG2, rs)))
        # (from RB_SIZE at once: amdgpu writes it with RB_ENABLE, and the ring fetcher takes the
        # mask when it starts, in the cycle after that write)
        mask = Signal(32)  # ring size in dwords − 1
        size_bytes = Signal(MAX_LOG2 + 3)
        m.d.comb += [mask.eq((Const(1, 33) << log2) - 1), size_bytes.eq(Const(4, MAX_LOG2 + 3) << log2)]
        enable = csr.sdma_rb_cntl_rb_enable

        # ---------------------------------------------------------------- state
        wdw = Signal(32)  # write pointer (dwords)
        rdw = Signal(32)  # read pointer: ring packets finished (dwords)
        rpos = Signal(32)  # ring dwords consumed by the parser
        in_ib = Signal()
        ib_base = Signal(aw)
        ib_size = Signal(20)
        ib_pos = Signal(20)
        ib_vmid = Signal(4)
        ib_hdr_off = Signal(32)  # the ring offset of the INDIRECT_BUFFER whose IB runs
        cur_vmid = Signal(4)
        m.d.comb += cur_vmid.eq(Mux(in_ib, ib_vmid, 0))

        # the packet in hand
        hdr = Signal(32)
        hdr_off = Signal(32)
        hdr_addr = Signal(aw)
        cur_op = Signal(8)
        cur_sub = Signal(8)
        kind = Signal(range(len(pk.PACKETS)))
        # dwords after the header in its buffer (saturated: `avail` − 1 at its width), less
        # what a WRITE_LINEAR's COUNT must stay within: its fixed dwords and COUNT's bias
        wl_room = Signal(signed(AVAIL_BITS + 1))
        p = [Signal(32, name=f"p{i}") for i in range(pk.MAX_FIXED)]
        p_arr = Array(p)
        pidx = Signal(range(pk.MAX_FIXED + 1))
        rem = Signal(22)  # dwords still to pop (payload, NOP's skip, WRITE_LINEAR's data)
        # the packet's field checks, worked out as its payload dwords arrive (PAYLOAD), so
        # that CHECK reads a verdict from registers: its tail runs past its buffer
        # (BAD_COUNT), an unsupported value (UNSUPPORTED), a misaligned address
        v_count = Signal()
        v_unsup = Signal()
        v_misal = Signal()

        # error latch
        err = Signal()
        err_code = Signal(8)
        err_level = Signal(2)
        err_op = Signal(8)
        err_sub = Signal(8)
        err_addr = Signal(aw)
        err_offset = Signal(32)
        err_vmid = Signal(4)

        # ---------------------------------------------------------------- fetchers and the bus
        fr = Fetcher(DW, aw, depth_beats=self.fetch_depth, max_burst_beats=min(8, self.fetch_depth),
                     tag=(pk.TAG, pk.header_tag), wraps=True, user_width=RESP_USER.size)
        fi = Fetcher(DW, aw, depth_beats=self.fetch_depth, max_burst_beats=min(8, self.fetch_depth),
                     tag=(pk.TAG, pk.header_tag), wraps=False, user_width=RESP_USER.size)
        m.submodules.fetch_ring = fr
        m.submodules.fetch_ib = fi
        poll_req, poll_addr, poll_taken, poll_pending, poll_rvalid, ar_valid = read_port.reads(
            m, bus, fr, fi, DW, req_user(0, vm_spec.Access.FETCH), req_user(ib_vmid, vm_spec.Access.FETCH),
            req_user(cur_vmid, vm_spec.Access.READ))

        m.submodules.writer = writer = BlockWriter(DW, aw, REQ_USER.size, RESP_USER.size)
        m.d.comb += [
            bus.awvalid.eq(writer.awvalid), writer.awready.eq(bus.awready),
            bus.awaddr.eq(writer.awaddr), bus.awlen.eq(writer.awlen), bus.awid.eq(0),
            bus.awsize.eq(ceil_log2(DW // 8)), bus.awburst.eq(BURST_INCR),
            bus.wvalid.eq(writer.wvalid), writer.wready.eq(bus.wready),
            bus.wdata.eq(writer.wdata), bus.wstrb.eq(writer.wstrb), bus.wlast.eq(writer.wlast),
            writer.bvalid.eq(bus.bvalid), writer.bresp.eq(bus.bresp), bus.bready.eq(1),
            bus.awuser.eq(writer.awuser), writer.buser.eq(bus.buser),
        ]
        blk = [Signal(32, name=f"blk{i}") for i in range(BLOCK_DWORDS)]
        blk_mask = Signal(BLOCK_DWORDS)
        blk_addr = Signal(aw)  # the first written dword's address (errors name it)
        blk_user = Signal(REQ_USER)
        wr_req = Signal()
        with m.If(writer.done):
            m.d.sync += wr_req.eq(0)
        nbeats = BLOCK_DWORDS // dpb
        block = Cat(*blk)
        m.d.comb += [
            writer.req_valid.eq(wr_req), writer.req_block.eq(blk_addr[5:]), writer.req_mask.eq(blk_mask),
            writer.req_user.eq(blk_user),
            writer.beat_data.eq(block.word_select(writer.beat, DW) if nbeats > 1 else block),
        ]

        # ---------------------------------------------------------------- the current dword
        cur_valid = Signal()
        cur_data = Signal(32)
        cur_resp = Signal(2)
        cur_user = Signal(RESP_USER)
        cur_bad = Signal()  # cur_resp is not OKAY (one register bit per fetcher)
        cur_tag = Signal(pk.TAG)  # the dword's decode as a header (packets.py header_tag)
        m.d.comb += [
            cur_valid.eq(Mux(in_ib, fi.dw_valid, fr.dw_valid)),
            cur_data.eq(Mux(in_ib, fi.dw_data, fr.dw_data)),
            cur_resp.eq(Mux(in_ib, fi.dw_resp, fr.dw_resp)),
            cur_user.eq(Mux(in_ib, fi.dw_user, fr.dw_user)),
            cur_bad.eq(Mux(in_ib, fi.dw_bad, fr.dw_bad)),
            cur_tag.eq(Mux(in_ib, fi.dw_tag.as_value(), fr.dw_tag.as_value())),
        ]
        cur_off = Signal(32)  # the offset of the dword on offer in its buffer
        m.d.comb += cur_off.eq(Mux(in_ib, ib_pos, rpos & mask))
        cur_base = Signal(aw)
        cur_addr = Signal(aw)
        m.d.comb += [cur_base.eq(Mux(in_ib, ib_base, ring_base)), cur_addr.eq(cur_base + Cat(Const(0, 2), cur_off))]
        # (an offset fits 20 bits: ib_pos's width, and the ring's mask at RB_SIZE's largest)
        assert len(ib_pos) == 20 and MAX_LOG2 == 20
        pop = Signal()
        m.d.comb += [fr.dw_ready.eq(pop & ~in_ib), fi.dw_ready.eq(pop & in_ib)]
        with m.If(pop):
            with m.If(in_ib):
                m.d.sync += ib_pos.eq(ib_pos + 1)
            with m.Else():
                m.d.sync += rpos.eq(rpos + 1)
        # Dwords from the one on offer to the end of its buffer (the IB's end, the ring's
        # written space), saturated, kept in a register per level and worked out a cycle
        # ahead (both outcomes of the late `pop` at once), so the header's BAD_COUNT check is
        # one compare of two registers. They lag a cycle behind a change that is not a pop: a
        # doorbell's wptr counts from the cycle after (a ring dword it brings cannot be on
        # offer sooner), an IB's start sets ib_size and ib_pos (its first dword comes later
        # still), and `ib_empty` is set by the IB's start itself (indirect_buffer.py).
        avail_ring = Signal(AVAIL_BITS)
        avail_ib = Signal(AVAIL_BITS)
        ib_empty = Signal()  # ib_pos == ib_size
        # With each, whether it is beyond any packet's need (`need` < 2^NEED_BITS), so the
        # compare is as wide as `need`, not as `avail` (it is the header's decision in RUN:
        # sdma_32's path after the payload's checks, dw_tag -> the compare -> the state)
        NEED_BITS = len(fr.dw_tag.need)
        avail_ring_far = Signal()
        avail_ib_far = Signal()
        # Each of end − pos (n0) and end − pos − 1 (n1), 32 bits, is one carry chain over the
        # low AVAIL_BITS and, for its high bits (whether it saturates), a choice by the chain's
        # borrow between two compares of the high bits made from the registers beside it
        # (n0's high bits are end_hi − pos_hi − borrow: not 0 iff end_hi ≠ pos_hi + borrow;
        # n1's are end_hi − pos_hi − 1 + carry). As 32-bit chains and an OR of their top bits
        # it was sdma_32's path on seed 1, rpos -> avail_ring, 10.33 ns.
        A = AVAIL_BITS
        for av, far, end, pos, popped in ((avail_ring, avail_ring_far, wdw, rpos, pop & ~in_ib),
                                          (avail_ib, avail_ib_far, ib_size, ib_pos, pop & in_ib)):
            end32, pos32 = Signal(32, name=f"{av.name}_end"), Signal(32, name=f"{av.name}_pos")
            lo0, lo1 = Signal(A + 1, name=f"{av.name}_lo0"), Signal(A + 1, name=f"{av.name}_lo1")
            e0, e1 = Signal(name=f"{av.name}_e0"), Signal(name=f"{av.name}_e1")
            m.d.comb += [end32.eq(end), pos32.eq(pos),
                         # bit A: lo0's borrow (end_lo < pos_lo), lo1's carry (end_lo > pos_lo)
                         lo0.eq(end32[:A] - pos32[:A]), lo1.eq(end32[:A] + (~pos32[:A])[:A]),
                         e0.eq(end32[A:] != pos32[A:]), e1.eq(end32[A:] != (pos32[A:] + 1)[:32 - A])]
            hz0, hz1 = Mux(lo0[A], e1, e0), Mux(lo1[A], e0, e1)  # n0's, n1's high bits are not 0
            sat0, sat1 = Mux(hz0, (1 << A) - 1, lo0[:A]), Mux(hz1, (1 << A) - 1, lo1[:A])
            m.d.sync += [av.eq(Mux(popped, sat1, sat0)),
                         far.eq(Mux(popped, hz1 | lo1[NEED_BITS:A].any(), hz0 | lo0[NEED_BITS:A].any()))]
        m.d.sync += ib_empty.eq(Mux(pop & in_ib, ib_pos + 1 == ib_size, ib_pos == ib_size))
        avail = Signal(AVAIL_BITS)
        m.d.comb += avail.eq(Mux(in_ib, avail_ib, avail_ring))
        short = Signal()  # the header on offer's packet runs past its buffer's end (BAD_COUNT)
        m.d.comb += short.eq(Mux(in_ib, ~avail_ib_far & (fi.dw_tag.need >= avail_ib[:NEED_BITS]),
                                 ~avail_ring_far & (fr.dw_tag.need >= avail_ring[:NEED_BITS])))

        # ---------------------------------------------------------------- errors (errors.py)
        c = _Context(locals())
        error_latch(m, self, c)
        err_any, db_err, db_code, fail, bus_code = c.take("err_any db_err db_code fail bus_code")
        reset_pulse, resetting, soft, transfers, transfers_d = c.take(
            "reset_pulse resetting soft transfers transfers_d")
        fc_base, fc_off = c.fc_base, c.fc_off

        # ---------------------------------------------------------------- doorbell
        # (int32)(v − wptr) < 0 → BACKWARDS; (uint32)(v − rptr) > 4·size → OVERFLOW; bits 1:0
        # of v are ignored. Ignored while RB_ENABLE is clear, after an error, during a reset.
        dbv = Signal(32)
        m.d.comb += dbv.eq(Cat(Const(0, 2), csr.sdma_doorbell[2:]))
        ahead = Signal(32)
        m.d.comb += ahead.eq(dbv - Cat(Const(0, 2), wdw[:30]))
        # (uint32)(v − rptr) ≤ 4·size: v lies in [rptr, rptr + 4·size] modulo 2^32, two compares
        # side by side against a bound kept in a register (the subtraction and then the compare
        # were two carry chains in a row into wdw's enable: sdma_32's path on seed 2, rdw ->
        # sdma_rb_wptr, 10.39 ns). The bound follows rdw (loaded where rdw is, below) and
        # RB_SIZE a cycle later, which no doorbell sees: RB_SIZE changes only while RB_ENABLE
        # is clear (doorbells ignored) or with the write that sets it, and the bridge answers
        # that write's B before it takes the doorbell's, whose swmod pulse comes two cycles
        # after RB_SIZE's change (tests/rtl/amaranth_sim/test_rtl_ring_locks.py: a bound three behind fails).
        rptr_bytes = Signal(32)
        m.d.comb += rptr_bytes.eq(Cat(Const(0, 2), rdw[:30]))
        db_lim = Signal(33)  # rptr + 4·size (bit 32: the range wraps)
        m.d.sync += db_lim.eq(rptr_bytes + size_bytes)
        above, below = Signal(), Signal()
        m.d.comb += [above.eq(dbv >= rptr_bytes), below.eq(dbv <= db_lim[:32])]
        within = Signal()
        m.d.comb += within.eq(Mux(db_lim[32], above | below, above & below))
        with m.If(csr.sdma_doorbell_swmod & enable & ~err_any & ~resetting):
            with m.If(ahead[31]):
                m.d.comb += [db_err.eq(1), db_code.eq(CpError.DOORBELL_BACKWARDS)]
            with m.Elif(~within):
                m.d.comb += [db_err.eq(1), db_code.eq(CpError.DOORBELL_OVERFLOW)]
            with m.Else():
                m.d.sync += wdw.eq(wdw + ahead[2:])

        # ---------------------------------------------------------------- the fetchers' control
        # A cleared RB_ENABLE pauses the ring at a ring packet boundary: the ring fetcher is
        # stopped only in RUN (where RUN takes no ring header while RB_ENABLE is clear), so the
        # packet in hand, an INDIRECT_BUFFER with its whole IB, is fetched to its end.
        flush_all = Signal()
        ring_running = Signal()
        ring_start = Signal()
        in_run = Signal()  # the FSM is in RUN (driven once it is built)
        ring_paused = Signal()
        m.d.comb += ring_paused.eq(~enable & in_run)
        m.d.comb += [fr.load.eq(ring_start), fr.start.eq(ring_start), fr.base.eq(ring_base),
                     fr.mask.eq(mask), fr.ptr.eq(rpos), fr.end.eq(wdw),
                     fr.flush.eq(flush_all | (ring_running & ring_paused))]
        with m.If(flush_all):
            m.d.sync += ring_running.eq(0)
        with m.Elif(~ring_running & enable & ~err_any & ~resetting):
            m.d.comb += ring_start.eq(1)
            m.d.sync += ring_running.eq(1)
        with m.Elif(ring_paused):
            m.d.sync += ring_running.eq(0)
        ib_start = Signal()
        m.d.comb += [fi.load.eq(ib_start), fi.start.eq(ib_start), fi.mask.eq(0xFFFF_FFFF), fi.ptr.eq(0),
                     fi.flush.eq(flush_all | ib_start)]

        # ---------------------------------------------------------------- IH requests to the CP
        ih_valid = Signal()
        ih_src = Signal(8)
        ih_vmid = Signal(4)
        ih_data = [Signal(32, name=f"ih_data{i}") for i in range(4)]
        m.d.comb += [self.ih_valid.eq(ih_valid), self.ih_src.eq(ih_src), self.ih_client.eq(ih_spec.Client.SDMA0),
                     self.ih_vmid.eq(ih_vmid), self.ih_data.eq(Cat(*ih_data))]
        with m.If(self.ih_done):
            m.d.sync += ih_valid.eq(0)
        # (CONTROL.SOFT_RESET drops a request: below, after the state machine's sets)

        def ih_request(src, data, vmid):
            m.d.sync += [ih_valid.eq(1), ih_src.eq(src), ih_vmid.eq(vmid)]
            m.d.sync += [d.eq(v) for d, v in zip(ih_data, data)]

        # ---------------------------------------------------------------- counters' pulses
        count = Signal()  # a packet of kind `count_kind` starts executing
        count_kind = Signal(range(len(pk.PACKETS)))

        def count_packet(k):
            m.d.comb += [count.eq(1), count_kind.eq(k)]

        def write_user(vmid):
            return req_user(vmid, vm_spec.Access.WRITE)
        waiting = Signal()
        halted = Signal()
        m.d.comb += halted.eq(csr.sdma_cntl_halt & ~err)

        # ---------------------------------------------------------------- the parser FSM
        @contextmanager
        def state(name):
            """A state that a reset preempts (RESET itself drains the bus first)."""
            with m.State(name):
                yield
                if name != "RESET":
                    with m.If(reset_pulse):
                        m.next = "RESET"

        ih_done, ih_resp, ih_user, ih_addr = self.ih_done, self.ih_resp, self.ih_user, self.ih_addr
        data_width = DW
        c.update(locals())
        for mod in (copy_fill, write, poll_regmem, indirect_buffer, trap):
            mod.setup(c)

        def collect_checks(w):
            """The checks of the payload dword `w` (the pidx-th) into the verdict registers:
            set at the packet's first (with its header's), OR'ed in at the others (v_count:
            below); CHECK reads them (sdma_32's critical path was these checks from the payload registers
            in CHECK: `dma.cmd_src` -> the checks -> `f_code_r`, 11.1-11.4 ns)."""
            for x in pk.PACKETS:
                if x is sp.NOP:
                    continue
                collect = getattr(EXECUTORS[x.name], "collect", None)
                with m.If(kind == x.index):
                    for d in range(x.fixed):
                        with m.If(pidx == d):
                            unsup = pk.unsupported_in(x, d, w)
                            misal = pk.misaligned_in(x, d, w)
                            if d == 0:
                                unsup = unsup | pk.unsupported_in(x, -1, hdr)
                                misal = misal | pk.misaligned_in(x, -1, hdr)
                                m.d.sync += [v_unsup.eq(unsup), v_misal.eq(misal)]
                            else:
                                m.d.sync += [v_unsup.eq(v_unsup | unsup), v_misal.eq(v_misal | misal)]
                            if collect is not None:
                                collect(c, x, d, w)

        # WRITE_LINEAR: its data must lie in the buffer too. Its COUNT is in its last payload
        # dword, which PAYLOAD pops in its last cycle, before CHECK: so the verdict loads in
        # every cycle, from the dword on offer, without enables (they took four LUTs after the
        # compare's carry chain: sdma_64's path, in_ib -> the dword -> v_count, 11.74 ns)
        (wl,) = (x for x in pk.PACKETS if x.tail is not None and x is not sp.NOP)
        wl_count = wl.field(wl.length_field)
        assert wl_count.dword == wl.fixed - 1
        # COUNT + bias > left − fixed, as COUNT > wl_room (left − fixed − bias, in a register
        # since the header's cycle) and that as the sign of one subtraction: one carry chain
        # from the dword (as COUNT + bias and a compare it was a chain and four LUTs after it:
        # sdma_32's path on seed 2, in_ib -> the dword -> v_count, 10.59 ns)
        v_count_d = Signal(signed(AVAIL_BITS + 2))
        m.d.comb += v_count_d.eq(wl_room - cur_data[wl_count.lsb:wl_count.lsb + wl_count.width])
        m.d.sync += v_count.eq(v_count_d[-1])

        with m.FSM(name="sdma") as fsm:
            c.fsm = fsm
            m.d.comb += in_run.eq(fsm.ongoing("RUN"))
            with state("RUN"):
                # (the header's decode comes with the dword: packets.py header_tag)
                known, knd, need = cur_tag.known, cur_tag.kind, cur_tag.need
                with m.If(err_any):
                    m.next = "ERR_DRAIN"
                with m.Elif(in_ib & ib_empty):
                    # the IB is done: so is its ring packet
                    m.d.sync += [in_ib.eq(0), hdr_off.eq(ib_hdr_off), cur_op.eq(sp.INDIRECT_BUFFER.op),
                                 cur_sub.eq(sp.INDIRECT_BUFFER.sub_op)]
                    m.next = "RING_DONE"
                with m.Elif(csr.sdma_cntl_halt | (~enable & ~in_ib)):
                    pass
                with m.Elif(transfers_d & ~(cur_tag.xfer & ~cur_bad)):
                    pass  # only a COPY_LINEAR or CONSTANT_FILL starts while transfers run
                with m.Elif(cur_valid):
                    m.d.comb += pop.eq(1)
                    m.d.sync += [hdr.eq(cur_data), hdr_off.eq(cur_off), hdr_addr.eq(cur_addr),
                                 cur_op.eq(cur_data[:8]), cur_sub.eq(cur_data[8:16]), kind.eq(knd),
                                 wl_room.eq((avail - 1)[:AVAIL_BITS] - (wl.fixed + wl.length_bias)), pidx.eq(0), rem.eq(need)]
                    with m.If(cur_bad):
                        fail(bus_code(cur_resp, cur_user), cur_addr, opz=True)
                    with m.Elif(~known):
                        fail(CpError.ILLEGAL_OPCODE, cur_addr)
                    with m.Elif(short):
                        fail(CpError.BAD_COUNT, cur_addr)
                    with m.Elif(need == 0):  # a one-dword NOP
                        count_packet(sp.NOP.index)
                        m.next = "DONE"
                    with m.Else():
                        m.next = "PAYLOAD"

            with state("PAYLOAD"):
                with m.If(cur_valid):
                    m.d.comb += pop.eq(1)
                    m.d.sync += [rem.eq(rem - 1), pidx.eq(pidx + 1)]
                    with m.If(kind != sp.NOP.index):
                        m.d.sync += p_arr[pidx].eq(cur_data)
                    collect_checks(cur_data)
                    with m.If(cur_bad):
                        fail(bus_code(cur_resp, cur_user), cur_addr)
                    with m.Elif(rem == 1):
                        with m.If(kind == sp.NOP.index):
                            count_packet(sp.NOP.index)
                            m.next = "DONE"
                        with m.Else():
                            m.next = "CHECK"

            with state("CHECK"):
                # the packet's fixed dwords are in p: the field checks, then its first step
                for x in pk.PACKETS:
                    if x is sp.NOP:
                        continue
                    with m.If(kind == x.index):
                        # what the first step loads that nothing reads before it: loaded
                        # whatever the checks say, so its enables wait for none of them
                        prepare = getattr(EXECUTORS[x.name], "prepare", None)
                        if prepare is not None:
                            prepare(c, x)
                        # (condition, error), the first failing one wins: the verdicts of
                        # the payload's checks (collect_checks())
                        checks = []
                        if x is wl:
                            checks.append((v_count, CpError.BAD_COUNT))
                        checks.append((v_unsup, CpError.UNSUPPORTED))
                        if pk.has_alignment(x):
                            checks.append((v_misal, CpError.IB_MISALIGNED
                                           if x is sp.INDIRECT_BUFFER else CpError.FENCE_MISALIGNED))
                        if x in (sp.COPY_LINEAR, sp.CONSTANT_FILL):
                            # a failing check waits for the transfers in flight: an earlier
                            # packet's error comes first
                            bad = Cat(*(cond for cond, _ in checks)).any()
                            checks = [(err_any, None), (bad & transfers, None)] + checks
                        for i, (cond, code) in enumerate(checks):
                            with (m.Elif if i else m.If)(cond):
                                if code is not None:
                                    fail(code, hdr_addr)
                                elif cond is err_any:
                                    m.next = "ERR_DRAIN"
                        with m.Else():
                            EXECUTORS[x.name].start(c, x)

            for mod in (copy_fill, write, poll_regmem, indirect_buffer, trap):
                mod.states(c)

            with state("DONE"):
                with m.If(in_ib):
                    m.next = "RUN"
                with m.Else():
                    m.next = "RING_DONE"
            with state("RING_DONE"):
                m.d.sync += [rdw.eq(rpos), db_lim.eq(Cat(Const(0, 2), rpos[:30]) + size_bytes)]
                # the write-back's block, address, mask and AWUSER load whether it is enabled
                # or not: the writer reads them only with `wr_req`, an error names `blk_addr`
                # only from the states that write, and every write loads what it writes
                # before (so the block's 256 enables do not wait for the enable bit: sdma_32's
                # path, sdma_state -> RING_DONE's decode and RPTR_WRITEBACK_ENABLE -> blk4's
                # enable, 10.76 ns)
                addr = Cat(Const(0, 2), csr.sdma_rb_rptr_addr_lo[2:], csr.sdma_rb_rptr_addr_hi)
                m.d.sync += [b.eq(Cat(Const(0, 2), rpos[:30])) for b in blk]
                m.d.sync += [blk_addr.eq(addr), blk_mask.eq(Const(1, BLOCK_DWORDS) << addr[2:5]),
                             blk_user.eq(req_user(0, vm_spec.Access.WRITE))]
                with m.If(csr.sdma_rb_cntl_rptr_writeback_enable):
                    m.d.sync += wr_req.eq(1)
                    m.next = "RPTR_WAIT"
                with m.Else():
                    m.next = "RUN"
            with state("RPTR_WAIT"):
                with m.If(writer.done):
                    with m.If(writer.resp != RESP_OKAY):
                        fail(bus_code(writer.resp, writer.user), blk_addr)
                    with m.Else():
                        m.next = "RUN"

            # ---- errors: stop, drain, report
            with state("ERR_DRAIN"):
                m.d.comb += flush_all.eq(1)
                # (`err`: a parser's error is latched a cycle after it stopped the parser)
                # the error's IH entry is loaded in every cycle no request is pending (the CP
                # reads it only with `ih_valid`), so only `ih_valid` waits for the quiet bus:
                # the entry's 140 enables took DMA's `busy` (done_ptr != wr_ptr), sdma_32's
                # critical path (dma.done_ptr -> ih_data, 12.0 ns)
                with m.If(~ih_valid):
                    e = pack_fields(REG_FIELDS["SDMA_ERROR"], CODE=err_code, LEVEL=err_level, OP=err_op,
                                    SUB_OP=err_sub)
                    ih_request(ih_spec.Source.SDMA_ERROR, [e, err_addr[:32], err_addr[32:], err_offset], err_vmid)
                    m.d.sync += ih_valid.eq(0)
                with m.If(err & ~wr_req & ~poll_pending & ~ar_valid & ~fr.busy & ~fi.busy & ~dma.busy_r & ~ih_valid):
                    m.d.sync += ih_valid.eq(1)
                    m.next = "ERR_IH"
            with state("ERR_IH"):
                with m.If(~ih_valid):  # (answered: whatever the answer, the queue is stopped)
                    m.next = "ERROR"
            with state("ERROR"):
                pass

            # ---- queue reset: let the engine's traffic end, then clear everything
            with m.State("RESET"):
                m.d.comb += flush_all.eq(1)
                with m.If(~wr_req & ~poll_pending & ~ar_valid & ~fr.busy & ~fi.busy & ~dma.busy_r & ~ih_valid
                          & ~reset_pulse):
                    m.d.sync += [resetting.eq(0), soft.eq(0), err.eq(0), err_code.eq(0), err_level.eq(0),
                                 err_op.eq(0), err_sub.eq(0), err_addr.eq(0), err_offset.eq(0), err_vmid.eq(0),
                                 wdw.eq(0), rdw.eq(0), db_lim.eq(size_bytes), rpos.eq(0), in_ib.eq(0), ib_vmid.eq(0), poll_req.eq(0),
                                 c.dma_go.eq(0)]
                    m.next = "RUN"

        with m.If(poll_taken | resetting):
            m.d.sync += poll_req.eq(0)
        with m.If(~err_any):
            # the address a parser's error in this cycle names, if it is not in a register
            ih_wait = fsm.ongoing("IH_WAIT")
            m.d.sync += [fc_base.eq(Mux(ih_wait, self.ih_addr, cur_base)), fc_off.eq(Mux(ih_wait, 0, cur_off))]
        m.d.comb += dma.abort.eq(reset_pulse)

        # ---------------------------------------------------------------- status and counters
        idle = Signal(init=1)
        m.d.sync += idle.eq(fsm.ongoing("ERROR") |
                            (fsm.ongoing("RUN") & ~in_ib & (rpos == wdw) & ~err_any & ~csr.sdma_doorbell_swmod
                             & ~resetting & ~transfers))
        m.d.comb += self.idle.eq(idle)
        st_halted = Signal()
        st_waiting = Signal()
        m.d.sync += [st_halted.eq(halted & ~waiting), st_waiting.eq(waiting)]
        m.d.comb += [
            csr.sdma_rb_rptr.eq(Cat(Const(0, 2), rdw[:30])), csr.sdma_rb_wptr.eq(Cat(Const(0, 2), wdw[:30])),
            csr.sdma_status_idle.eq(idle), csr.sdma_status_halted.eq(st_halted), csr.sdma_status_error.eq(err),
            csr.sdma_status_rb_empty.eq(rdw == wdw), csr.sdma_status_waiting.eq(st_waiting),
            csr.sdma_status_level.eq(in_ib),
            csr.sdma_error_code.eq(err_code), csr.sdma_error_level.eq(err_level),
            csr.sdma_error_op.eq(err_op), csr.sdma_error_sub_op.eq(err_sub),
            csr.sdma_error_addr_lo.eq(err_addr[:32]), csr.sdma_error_addr_hi.eq(err_addr[32:48]),
            csr.sdma_error_offset.eq(err_offset),
        ]
        clear = csr.control_perf_clear
        busy_cycles = Signal(32)
        fetched = Signal(32)
        rd_bytes = Signal(32)
        wr_bytes = Signal(32)
        # the DMA engine's byte pulses a cycle late, as the CP's (pm4/dma_data.py; PERF_CLEAR
        # drops them): `perf_wr_bytes` (a burst's bytes once its B answers OKAY) was the W
        # handshake's strobe count, and through the adder it was `sdma_32`'s critical path (the R address -> the strobes ->
        # `perf_sdma_bytes_written`, 10.10 ns, its 4 endpoints short of 100 MHz)
        # (and the parser's pop too: `perf_sdma_dwords_fetched` behind it was 20-31 bits of
        # the top's failing endpoints, 10.7-11.5 ns)
        rd_inc, wr_inc = (Signal.like(v, name=f"sdma_{n}_inc") for n, v in (
            ("rd", dma.perf_rd_bytes), ("wr", dma.perf_wr_bytes)))
        pop_inc = Signal(name="sdma_pop_inc")
        m.d.sync += [rd_inc.eq(Mux(clear, 0, dma.perf_rd_bytes)), wr_inc.eq(Mux(clear, 0, dma.perf_wr_bytes)),
                     pop_inc.eq(pop & ~clear)]
        with m.If(clear):
            m.d.sync += [busy_cycles.eq(0), fetched.eq(0), rd_bytes.eq(0), wr_bytes.eq(0)]
        with m.Else():
            m.d.sync += [busy_cycles.eq(busy_cycles + ~idle), fetched.eq(fetched + pop_inc),
                         rd_bytes.eq(rd_bytes + rd_inc), wr_bytes.eq(wr_bytes + wr_inc)]
        m.d.comb += [csr.perf_sdma_busy_cycles.eq(busy_cycles), csr.perf_sdma_dwords_fetched.eq(fetched),
                     csr.perf_sdma_bytes_read.eq(rd_bytes), csr.perf_sdma_bytes_written.eq(wr_bytes)]
        # PERF_SDMA_PACKETS: one packet starts in a cycle at most, so the counters are a bank
        # in LUTRAM with one incrementer (rtl/perf.py), counting a cycle late as the CP's
        # (status.py): `count_kind` comes from the state machine's decision, and through the
        # bank's read, increment and write it was the top's worst path (14.82 ns)
        m.submodules.perf_packets = bank = CounterBank(1 << (len(pk.PACKETS) - 1).bit_length())
        count_d = Signal()
        count_kind_d = Signal.like(count_kind)
        m.d.sync += [count_d.eq(count & ~clear), count_kind_d.eq(count_kind)]
        m.d.comb += [bank.inc.eq(count_d), bank.idx.eq(count_kind_d), bank.clear.eq(clear),
                     bank.rd_idx.eq(csr.perf_sdma_packets_index), csr.perf_sdma_packets.eq(bank.rd_data)]
        # CONTROL.SOFT_RESET drops an IH request (the CP's IH writer is being reset too), the
        # one the state machine makes in the reset's own cycle as well (an error's drain, a
        # TRAP, a POLL_REGMEM's timeout): here, after every set, so it wins. Placed before the
        # state machine it lost to them, and the entry was written after the reset, at
        # IH_WPTR 0, for an error the reset had cleared (driver-writer-4).
        with m.If(csr.control_soft_reset):
            m.d.sync += ih_valid.eq(0)
        return m


EXECUTORS = {
    "COPY_LINEAR": copy_fill, "CONSTANT_FILL": copy_fill, "WRITE_LINEAR": write, "FENCE": write,
    "POLL_REGMEM": poll_regmem, "INDIRECT_BUFFER": indirect_buffer, "TRAP": trap,
}
