"""The command processor: ring and doorbell, PM4 parser, packet execution, IH writer.

docs/hardware.md is the contract this implements. The pieces:

- three Fetchers (fetch.py: ring, IB1, IB2) read ahead; each offers one dword at a time
  from a register, with what the parser needs to know of it as a header (packets.py
  `header_tag`), and the parser pops one dword per cycle from the fetcher of the current
  level;
- the parser FSM (parser.py) reads a header, checks it, collects the fixed payload into
  registers, checks fields (packets.py: every check derives from spec/packets.py) in the
  cycle the last fixed dword arrives, and starts executing in that same cycle; each
  packet's own states are in its module (pm4/: write_data, indirect_buffer, wait_reg_mem,
  release_mem, dma_data), IH entries in ih.py, which see the CP's signals (declared here)
  through `_Context`; where an error happened and the error latch are errors.py's;
- one BlockWriter (writer.py) performs every memory write (WRITE_DATA, fences, rptr/wptr
  write-back, IH entries), one aligned 32-byte block at a time, each waited for; a block
  formed in a cycle is requested from registers (the block buffer, a 64-bit value
  replicated over the block, or the IH entry) and goes out the next cycle;
- reads of the ring/IB fetchers and WAIT_REG_MEM polls share the AR channel through a
  register slice (AXI payload stays stable until accepted) and R beats are routed by ID
  (bus_port.py); status.py drives STATUS, CP_ERROR and the counters.

For the clock (issue 14) the parser decides from registers: the header's decode comes with
the dword, the dwords left at each level, whether an IB is consumed, whether the IH ring
is full and where its next entry goes are kept in registers a cycle ahead, and errors
reach CP_ERROR through a capture register (errors.py).

Errors latch CP_ERROR_* once, stop the parser, drain the bus, then append a CP_ERROR IH
entry (a VM_FAULT entry for CP_ERROR VM_FAULT). SOFT_RESET waits for the bus to go quiet
and returns everything to idle.

The VMID sideband (rtl/mmu.py): every request carries its VMID and access kind in AxUSER.
Ring fetches, the rptr write-back and IH entries are VMID 0; a ring INDIRECT_BUFFER sets
`vmid` from its VMID field, and the IBs it runs (IB2s and CHAINs included: an IB cannot
change it) fetch, read and write with it. A response the MMU tagged as a fault stops the
CP with VM_FAULT (instead of BUS_SLVERR) when the CP uses it, latching the fault's
cause, level, access kind and VMID (VM_FAULT_STATUS).
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from spec import ih as ih_spec
from spec import packets as pk
from spec import vm as vm_spec

from ..bus import AXI4Signature, BURST_INCR
from ..mmu import REQ_USER, RESP_USER, req_user
from ..csr import CpError
from . import bus_port, errors, ih, parser, queues, status
from .pm4 import dma_data
from . import packets as checks
from .bus_port import ID_IB1, ID_IB2, ID_POLL, ID_RING, ID_WRITE  # noqa: F401 (re-exported)
from .fetch import Fetcher
from .packets import MAX_FIXED, pack_fields, value  # noqa: F401 (pack_fields: re-exported)
from .writer import BLOCK_DWORDS, BlockWriter, WriteSource

_OPCODE = pk.HEADER.field("OPCODE")
_COUNT = pk.HEADER.field("COUNT")

ib = pk.INDIRECT_BUFFER
AVAIL_BITS = _COUNT.width + 2  # dwords left in a buffer, saturated: more than any packet needs


# an IB's dword indices: IB_SIZE's bits (its fetcher's `end`, so its `ptr` is never more)
IB_INDEX_BITS = 20


class _Context:
    """The CP's signals and helpers by name, for the modules that hold each packet's
    states (write_data, indirect_buffer, wait_reg_mem, release_mem, dma_data, ih)."""

    def __init__(self, cp, names: dict):
        self.cp = cp
        self.update(names)

    def update(self, names: dict) -> None:
        self.__dict__.update((k, v) for k, v in names.items() if k not in ("self", "c"))


def _one_hot_mux(sel, values):
    """values[i] where sel is one-hot (an AND-OR: no priority between the inputs)."""
    out = 0
    for i, v in enumerate(values):
        out = out | Mux(sel[i], v, 0)
    return out


class CommandProcessor(wiring.Component):
    """`csr` is the CSR block: the CP reads its configuration ports and drives its status."""

    def __init__(self, csr, data_width: int = 64, addr_width: int = 48, ib_levels: int = 2,
                 ts_width: int = 48, dma=None, dma_max_log2: int = 20, fetch_depth: int = 8):
        """`dma`: the DMAEngine that executes DMA_DATA (None: DMA_DATA is UNSUPPORTED).
        `fetch_depth`: beats each fetcher reads ahead (a power of two; bursts of up to 8)."""
        if fetch_depth not in (2, 4, 8, 16, 32, 64):
            self._MustUse__used = True
            raise ValueError(f"fetch_depth must be a power of two from 2 to 64, not {fetch_depth!r}")
        self.fetch_depth = fetch_depth
        self.csr = csr
        self.dma = dma
        self.has_dma = dma is not None
        self.dma_max_log2 = dma_max_log2
        self.data_width = data_width
        self.addr_width = addr_width
        self.ib_levels = ib_levels
        self.ts_width = ts_width
        super().__init__({
            "bus": Out(AXI4Signature(addr_width, data_width, 4, REQ_USER.size, RESP_USER.size)),
            "timestamp": In(ts_width),
            "idle": Out(1),
            # IH entries of another engine (the SDMA, rtl/sdma/): appended between packets, while
            # stopped by an error and between WAIT_REG_MEM polls; the request holds until `done`
            "ext_ih_valid": In(1), "ext_ih_src": In(8), "ext_ih_client": In(8), "ext_ih_vmid": In(4),
            "ext_ih_data": In(128),
            "ext_ih_done": Out(1), "ext_ih_resp": Out(2), "ext_ih_user": Out(RESP_USER.size),
            "ext_ih_addr": Out(addr_width),
        })

    def elaborate(self, platform):
        m = Module()
        csr = self.csr
        bus = self.bus
        aw = self.addr_width
        dpb = self.data_width // 32

        # ---------------------------------------------------------------- sub-units
        dtag = checks.DwordTag(self.dma_max_log2, aw)
        fetchers = [Fetcher(self.data_width, aw, depth_beats=self.fetch_depth,
                            max_burst_beats=min(8, self.fetch_depth), tag=(dtag.layout, dtag), wraps=i == 0,
                            user_width=RESP_USER.size, index_width=32 if i == 0 else IB_INDEX_BITS)
                    for i in range(1 + self.ib_levels)]
        for i, f in enumerate(fetchers):
            m.submodules[f"fetch{i}"] = f
        m.submodules.writer = writer = BlockWriter(self.data_width, aw, REQ_USER.size, RESP_USER.size)

        level = Signal(2)
        lvl = Signal(1 + self.ib_levels, init=1)  # the same, one-hot (for the multiplexers on fast paths)
        vmid = Signal(4)  # the VMID of the job the ring's INDIRECT_BUFFER started
        cur_vmid = Signal(4)  # the VMID of the packet in hand: 0 in the ring
        m.d.comb += cur_vmid.eq(Mux(lvl[0], 0, vmid))

        # ---------------------------------------------------------------- AR slice + R routing
        ar_valid, poll_req, poll_addr, poll_pending, poll_taken, poll_rvalid = bus_port.reads(
            m, bus, fetchers, self.data_width, aw,
            fetch_users=[req_user(0, vm_spec.Access.FETCH)] + [req_user(vmid, vm_spec.Access.FETCH)] * self.ib_levels,
            poll_user=req_user(cur_vmid, vm_spec.Access.READ))

        # writes: the block writer owns AW/W/B
        m.d.comb += [
            bus.awvalid.eq(writer.awvalid), writer.awready.eq(bus.awready),
            bus.awaddr.eq(writer.awaddr), bus.awlen.eq(writer.awlen), bus.awid.eq(ID_WRITE),
            bus.awsize.eq(ceil_log2(self.data_width // 8)), bus.awburst.eq(BURST_INCR),
            bus.wvalid.eq(writer.wvalid), writer.wready.eq(bus.wready),
            bus.wdata.eq(writer.wdata), bus.wstrb.eq(writer.wstrb), bus.wlast.eq(writer.wlast),
            writer.bvalid.eq(bus.bvalid), writer.bresp.eq(bus.bresp), bus.bready.eq(1),
            bus.awuser.eq(writer.awuser), writer.buser.eq(bus.buser),
        ]

        # ---------------------------------------------------------------- state
        # The two hardware queues (queues.py): `q` is the one the parser runs; its ring's
        # configuration is `qc`, and rptr, wptr, limit, ring_size and ring_mask are its view
        # of the per-queue registers (rptr_q, ...).
        q = Signal()
        qd = queues.pointers(m, csr, q)
        ports, qc = qd["ports"], qd["qc"]
        rptr_q, wptr_q, limit_q, ring_size_q, ring_huge_q = (qd[n] for n in ("rptr_q", "wptr_q", "limit_q",
                                                                               "ring_size_q", "ring_huge_q"))
        rptr, wptr, limit, ring_size, ring_mask = (qd[n] for n in ("rptr", "wptr", "limit", "ring_size", "ring_mask"))
        ring_end = qd["ring_end"]
        lim_zero, lim_pos, lim_pos_sum = qd["lim_zero"], qd["lim_pos"], qd["lim_pos_sum"]
        qf = queues.flags(m)
        park_q, park_timer_q, reparse_q, dbpend_q, dbpend_back_q, dbpend_val_q, qr_pend_q = (
            qf[n] for n in ("park_q", "park_timer_q", "reparse_q", "dbpend_q", "dbpend_back_q", "dbpend_val_q",
                            "qr_pend_q"))
        # `ring_end` is a register (queues.active_wptr), which these flags keep equal to wptr_q[q]
        db_move = [Signal(name=f"db_move{i}") for i in range(queues.N)]  # a doorbell moves wptr_q[i]
        swap_now = Signal()  # SWAP flips `q`
        ring_clear = Signal()  # the active queue's reset, or SOFT_RESET, clears its wptr
        # a copy of `q` for the ring's ENABLE alone: the pause withholds the ring's dwords, on
        # the parser's take decision (`cp_64`'s critical path started at `q`, 2.19 ns of route)
        q_ring = Signal()
        reparse = Signal()  # the active queue parses a parked WAIT_REG_MEM again (not counted twice)
        m.d.comb += reparse.eq(Mux(q, reparse_q[1], reparse_q[0]))
        want_switch = Signal()  # (queues.arbiter)
        turn_due = Signal()  # the turn ends now: a header taken since the switch (queues.arbiter)
        prio_eq = Signal()  # other_can, and both queues at the same priority (queues.arbiter)
        other_can = Signal()
        took = Signal(init=1)  # a header was taken since the last switch (turns at equal priority; queue 0
        # has had its turn after a reset, as the model's arbiter starts)
        took_next = Signal()  # (took's next value: a header taken, SWAP, SOFT_RESET)
        m.d.comb += took_next.eq(took)
        m.d.sync += took.eq(took_next)
        sw_due = Signal()  # want_switch | turn_due, a register (queues.arbiter)
        swapping = Signal()  # in SWAP
        # AMD's units: RB_BASE holds the address >> 8.
        ring_base = Signal(aw)
        m.d.comb += ring_base.eq(Cat(Const(0, 8), qc.base_lo, qc.base_hi))

        def set_level(v):
            m.d.sync += [level.eq(v)] + [lvl[i].eq(v == i) for i in range(1 + self.ib_levels)]
        ring_pos = Signal(32)  # dwords of the ring the parser has consumed (rptr: ring packets finished)
        m.d.comb += lim_pos_sum.eq(ring_pos + ring_size)  # (RING_DONE's limit_q, queues.pointers)
        ib_base = Array(Signal(aw, name=f"ib_base{i}") for i in range(1 + self.ib_levels))
        ib_size = Array(Signal(IB_INDEX_BITS, name=f"ib_size{i}") for i in range(1 + self.ib_levels))
        ib_pos = Array(Signal(IB_INDEX_BITS, name=f"ib_pos{i}") for i in range(1 + self.ib_levels))

        # the packet being parsed, for CP_ERROR: its header's opcode and its offset in its
        # buffer (its address is worked out from the offset when an error is latched)
        hdr_opcode = Signal(8)
        # for the simulators' monitors only (gpucosim/trace/hwtrace.py: the timeline, crash reports;
        # nothing reads them, so synthesis drops them): the last header taken, its offset and
        # its address (hdr_off follows the dword on offer, taken or not)
        hdr = Signal(32)
        hdr_taken_off = Signal(32)
        hdr_addr = Signal(aw)
        hdr_off = Signal(32)
        # the INDIRECT_BUFFER packet of each parent level: an error after an IB returns
        # (its rptr write-back) belongs to that packet
        saved_opcode = Array(Signal(8, name=f"saved_opcode{i}") for i in range(self.ib_levels))
        saved_off = Array(Signal(32, name=f"saved_off{i}") for i in range(self.ib_levels))
        oob = Signal()  # the packet's address has bits above the bus's 48: it answers DECERR
        kind = Signal(range(len(pk.PACKETS)))
        p = [Signal(32, name=f"p{i}") for i in range(MAX_FIXED)]
        p_arr = Array(p)
        pidx = Signal(range(MAX_FIXED + 1))
        rem = Signal(15)  # payload dwords still to pop
        # a cycle ahead: rem == 1, pidx == the last fixed dword, and the packet's fixed dwords
        rem_is1 = Signal()
        rem_is0 = Signal()  # (WRITE_DATA: its last data dword is in)
        last_fixed = Signal()
        fixed = Signal(range(MAX_FIXED + 1))
        bad_count = Signal()  # the header's COUNT is wrong for its packet or runs past the buffer
        # the checks of the payload's dwords so far (all but the last fixed one, whose checks
        # come with its tag): UNSUPPORTED, misaligned, an IB beyond the bus
        acc_unsup = Signal()
        acc_misal = Signal()
        acc_beyond = Signal()

        # error latch
        err = Signal()  # an error is latched (CP stops)
        err_code = Signal(8)
        err_level = Signal(2)
        err_opcode = Signal(8)
        err_addr = Signal(aw)
        err_offset = Signal(32)
        err_vmid = Signal(4)  # the VMID of the work that failed
        err_user = Signal(RESP_USER)  # a VM fault's cause and level
        err_access = Signal(3)  # a VM fault's access kind (spec/vm.py Access)

        # block to write
        # WRITE_DATA's block buffer: a small memory per dword lane of a beat (LUTRAM on an FPGA),
        # written a dword at a time as they arrive, read a beat at a time by the writer
        blk_banks = []
        dpb_ = self.data_width // 32
        for i in range(min(dpb_, BLOCK_DWORDS)):
            bank = Memory(shape=32, depth=max(2, BLOCK_DWORDS // dpb_), init=[])
            m.submodules[f"blk{i}"] = bank
            blk_banks.append((bank.write_port(), bank.read_port(domain="comb")))
        blk_we = Signal()  # write the block's dword blk_pos
        blk_pos = Signal(3)
        blk_wdata = Signal(32)
        for i, (w, _) in enumerate(blk_banks):
            m.d.comb += [w.addr.eq(blk_pos // len(blk_banks)), w.data.eq(blk_wdata),
                         w.en.eq(blk_we & (blk_pos % len(blk_banks) == i))]
        blk_mask = Signal(BLOCK_DWORDS)
        blk_addr = Signal(aw)  # byte address of the first dword being written (for errors)
        blk_user = Signal(REQ_USER)  # AxUSER of the block to write
        wd_addr = Signal(aw)
        wd_ends = Signal()  # WRITE_DATA: the next data dword completes a block (a cycle ahead)
        poll_timer = Signal(16)

        # IH
        ih_wptr = Signal(32)
        ih_advance = Signal()  # IH_WPTR moves past an entry this cycle
        ih_clear = Signal()  # ... or to 0 (the end of a soft reset)
        ih_stale = Signal()  # the cycle after ih_clear: the IH slot registers follow a cycle late
        ih_src = Signal(8)
        ih_data = [Signal(32, name=f"ih_data{i}") for i in range(4)]
        ih_ts = Signal(self.ts_width)
        ih_client = Signal(8)
        ih_ring = Signal()  # RING_ID: the CP queue the entry is of (0 for another engine's)
        ih_vmid = Signal(4)
        ih_err = Signal()  # the entry reports the error that stopped the CP
        ih_ext = Signal()  # the entry is another engine's (ext_ih_*): IH_DONE returns to ih_ret
        ih_ret = Signal(2)  # ih.RET_*: the state that entry interrupted
        ih_written = Signal()  # the entry in hand is in the IH ring (its EOP was set with IH_WPTR)
        wr_src = Signal(2)  # WriteSource of the block to write
        wval = [Signal(32, name=f"wval{i}") for i in range(2)]

        # ---------------------------------------------------------------- the current level
        cur_fetch_valid = Signal()
        cur_fetch_data = Signal(32)
        cur_fetch_resp = Signal(2)
        cur_fetch_bad = Signal()  # cur_fetch_resp is not OKAY (from one register bit per fetcher)
        cur_fetch_user = Signal(RESP_USER)
        cur_tag = Signal(dtag.layout)
        cur_short = Signal()  # the header's packet runs past the end of its buffer
        pop = Signal()  # the parser takes the current level's dword (driven after the FSM)
        pops = Signal(1 + self.ib_levels)  # ... one bit per level
        # dwords left at each level from its next dword on (saturated), a cycle ahead, and
        # whether each IB level is consumed
        avail = [Signal(AVAIL_BITS, name=f"avail{i}") for i in range(1 + self.ib_levels)]
        ib_empty = Array(Signal(name=f"ib_empty{i}") for i in range(1 + self.ib_levels))  # ([0]: unused)
        ring_empty = Signal()  # avail[0] == 0, or the ring paused (for STALL_CYCLES only)
        # A cleared ENABLE pauses the ring at a packet boundary: the ring's dwords are withheld
        # (its fetcher flushed, below) only in RUN, where a header would be taken, so the
        # packet in hand is fetched to its end. (The IB fetchers are flushed only in states
        # that take no dword.)
        at_boundary = Signal()  # the parser is in RUN (driven once the FSM is built)
        ring_paused = Signal()
        m.d.comb += ring_paused.eq(~Mux(q_ring, ports[1].enable, ports[0].enable) & at_boundary)
        offered = [f.dw_valid & (~ring_paused if i == 0 else 1) for i, f in enumerate(fetchers)]
        # (the pause matters in RUN alone, which reads `cur_hdr_valid`: the payload states'
        # `cur_fetch_valid` is without it, a LUT less on their paths into the block buffer)
        cur_hdr_valid = Signal()
        m.d.comb += [
            cur_hdr_valid.eq(Cat(*(lvl[i] & offered[i] for i in range(len(fetchers)))).any()),
            cur_fetch_valid.eq(Cat(*(lvl[i] & f.dw_valid for i, f in enumerate(fetchers))).any()),
            cur_fetch_data.eq(_one_hot_mux(lvl, [f.dw_data for f in fetchers])),
            cur_fetch_resp.eq(_one_hot_mux(lvl, [f.dw_resp for f in fetchers])),
            cur_fetch_bad.eq(Cat(*(lvl[i] & f.dw_bad for i, f in enumerate(fetchers))).any()),
            cur_fetch_user.eq(_one_hot_mux(lvl, [f.dw_user for f in fetchers])),
            cur_tag.eq(_one_hot_mux(lvl, [f.dw_tag.as_value() for f in fetchers])),
            cur_short.eq(_one_hot_mux(lvl, [f.dw_tag.need > avail[i] for i, f in enumerate(fetchers)])),
        ]
        # (a ring paused with dwords left is no stall either: nothing waits for memory)
        m.d.comb += ring_empty.eq((avail[0] == 0) | ring_paused)
        cur_off = Signal(32)  # the current dword's offset in its buffer
        m.d.comb += cur_off.eq(_one_hot_mux(lvl, [ring_pos & ring_mask] + [ib_pos[i] for i in range(1, 1 + self.ib_levels)]))
        # (each level's position moves by one as its dword is taken: written after the state
        # machine, below, so the take decision is the last multiplexer in front of them)

        def saturate(v):
            return Mux(v[AVAIL_BITS:] != 0, (1 << AVAIL_BITS) - 1, v[:AVAIL_BITS])

        for i in range(1 + self.ib_levels):
            # (the ring's end is `ring_end`, the register kept equal to the active queue's
            # wptr (queues.active_wptr), not the multiplexer by `q` that `wptr` is: `q` drives
            # some 400 loads, and its route was in front of these carry chains)
            end, pos = (ring_end, ring_pos) if i == 0 else (ib_size[i], ib_pos[i])
            end32, pos32 = Signal(32, name=f"end{i}"), Signal(32, name=f"pos{i}")
            left = Signal(32, name=f"left{i}")
            left_m1 = Signal(32, name=f"left_m1_{i}")  # (both subtractions at once: pop comes late)
            m.d.comb += [end32.eq(end), pos32.eq(pos), left.eq(end32 - pos32), left_m1.eq(end32 + ~pos32)]
            # (the ring's wptr as it was a cycle ago: a doorbell counts from the next cycle on)
            m.d.sync += avail[i].eq(Mux(pops[i], saturate(left_m1), saturate(left)))
            if i:
                m.d.sync += ib_empty[i].eq(Mux(pops[i], pos + 1 == end, pos == end))

        # ---------------------------------------------------------------- error raising
        fsm_err = Signal()
        fsm_err_code = Signal(8)
        fsm_err_bus = Signal()  # ... is a bus response's (errors.BUS): fsm_err_code is not read
        fsm_err_resp = Signal(2)  # the response `where` names (errors.locate)
        fsm_err_where = Signal(errors.Where)
        fsm_err_opz = Signal()  # the error's opcode is 0 (a header that is not type 3, or unread)
        fsm_err_cur = Signal(aw)  # the address of the dword in hand (a header in RUN)
        fsm_err_hdr = Signal(aw)  # ... and of the packet being parsed
        fsm_err_at_ib_base = Signal()
        fsm_err_user = Signal(RESP_USER)
        fsm_err_access = Signal(3)

        # a packet's first step starts in the cycle its checks run (check_and_start): a check
        # that fails stops the CP in the next cycle (`failed`), before anything the step
        # started reaches the bus, and that cycle's state does nothing (state(), below)
        failed = Signal()
        m.d.sync += failed.eq(fsm_err)
        level_d = Signal(2)  # the level a cycle ago: where a failed check happened
        m.d.sync += level_d.eq(level)

        # `fsm_err` is the state machine's own errors (`fsm_err_fsm`) and those raised on the
        # dword on offer, written as "the error given the dword" AND its valid (parser.py,
        # `err_given_dw_valid`, `err_given_hdr_valid`): the fetcher's valid, which comes
        # from the far end of the CP, is then the last term in front of the capture, not the
        # first beneath every state's conditions (`cp_32`'s critical path: an IB fetcher's
        # output valid copy → the payload's conditions → `fsm_err_valid`, 9.98 ns). Where
        # the state machine raises such an error (`err_gated` set while it is built), it
        # names the code and the next state as before, but not `fsm_err_fsm`.
        fsm_err_fsm = Signal()
        err_gated = [False]

        def raise_code(code):
            """`code`: a CpError, or errors.BUS: the code of the bus response the error's
            `where` names (errors.py works it out after the capture)."""
            if not err_gated[0]:
                m.d.comb += fsm_err_fsm.eq(1)
            if code is errors.BUS:
                m.d.comb += fsm_err_bus.eq(1)
            else:
                m.d.comb += [fsm_err_bus.eq(0), fsm_err_code.eq(code)]

        def flag(code, at_ib_base=False):
            """A failing check beside a speculative first step: CP_ERROR as fail() would
            latch it, and the state machine stops next cycle."""
            raise_code(code)
            if at_ib_base:
                m.d.comb += fsm_err_at_ib_base.eq(1)

        def fail(code, at_ib_base=False):
            """Raise a packet or bus error from the FSM. Where it happened (which address,
            the opcode) follows from the state ("where an error happened", below) and is
            captured as a few bits (errors.py); `at_ib_base`: the address is the IB packet's
            base (an IB beyond the bus), which the payload registers still hold when CP_ERROR
            is latched. `code` as for raise_code."""
            raise_code(code)
            if at_ib_base:
                m.d.comb += fsm_err_at_ib_base.eq(1)
            m.next = "ERR_DRAIN"

        def bus_code(resp, user):
            """CP_ERROR's code for an error response: VM_FAULT when the MMU tagged it."""
            code = Mux(resp == 0b11, CpError.BUS_DECERR, CpError.BUS_SLVERR)
            return Mux(RESP_USER(Value.cast(user)).fault, CpError.VM_FAULT, code)

        def write_failed():
            """The block writer's response was an error: stop, naming the written address."""
            fail(errors.BUS)  # at blk_addr (the write's response: `where` is WRITE)

        def write_user(v):
            """AxUSER of a CP write with VMID `v`."""
            return req_user(v, vm_spec.Access.WRITE)

        err_any = Signal()  # an error is latched, or captured to latch next cycle (errors.py)
        err_pending = Signal()  # a doorbell or DMA error waits for the parser's next packet boundary
        err_pending_any = Signal()  # ... or is captured to
        dma_err = Signal()
        dma_err_code = Signal(8)
        dma_err_off = Signal(32)
        dma_err_level = Signal(2)
        dma_err_vmid = Signal(4)
        dma_err_user = Signal(RESP_USER)
        dma_err_access = Signal(3)
        perf_count_dma = Signal()

        # doorbells (queues.py, beside the FSM): an error of the active queue is `db_err`
        db_err = Signal()
        db_code = Signal(8)
        # a doorbell write of the running queue this cycle: no switch now (see queues.doorbells)
        db_write_active = Signal()
        db_value = Signal(32)  # the doorbell value an error names (a register: errors.py latches it)
        stopped = Signal()  # being reset: doorbells are ignored (as after an error)

        # ---------------------------------------------------------------- write requests
        # The block to write is in registers (WriteSource) and `wr_req` asks for it: write_block
        # raises it and it holds until the write is answered; the writer puts AW and the first
        # W beat out in the next cycle, and reads each beat's dwords as it writes them.
        #
        # The answer (`done` with `resp`: the B channel, which reaches the CP through the MMU
        # and the memory mux in the same cycle) is decoded once, into `wr_ok` and `wr_bad`,
        # kept as wires so synthesis starts every decision on it from one LUT; `wr_req`'s next
        # value is one expression of it: the requests raised whatever the answer (`wr_set`,
        # from the FSM), the request held until its answer, and the next write a *_WAIT state
        # asks for when its write went through (`wr_again`, from registers).
        wr_req = Signal()
        wr_ok = Signal(attrs={"keep": 1})  # the write is answered OKAY now
        wr_bad = Signal(attrs={"keep": 1})  # ... with an error
        m.d.comb += [wr_ok.eq(writer.done & (writer.resp == 0)), wr_bad.eq(writer.done & (writer.resp != 0))]
        wr_set = Signal(attrs={"keep": 1})  # a request raised now (any answer)
        wr_again = Signal(attrs={"keep": 1})  # a request raised now if the write in hand is answered OKAY
        m.d.sync += wr_req.eq(wr_set | (wr_req & ~writer.done) | (wr_ok & wr_again))
        DW = self.data_width
        nbeats = BLOCK_DWORDS * 32 // DW
        beat = writer.beat
        for _, r in blk_banks:
            m.d.comb += r.addr.eq(beat if nbeats > 1 else 0)
        blk_beat = Cat(*(r.data for _, r in blk_banks))
        ih_entry = ih.entry(ih_client, ih_src, ih_vmid, ih_ts, ih_data, ih_ring)
        ih_beat = ih_entry.word_select(beat, DW) if nbeats > 1 else ih_entry
        # two dwords start 8-aligned: the first in an even slot, the second in the odd one after
        val_beat = Mux(beat[0], wval[1], wval[0]) if dpb == 1 else Cat(*wval).replicate(dpb // 2)
        m.d.comb += [
            writer.req_valid.eq(wr_req),
            writer.req_block.eq(blk_addr[5:]),
            writer.req_mask.eq(blk_mask),
            writer.req_user.eq(blk_user),
            writer.beat_data.eq(Mux(wr_src == WriteSource.IH, ih_beat,
                                    Mux(wr_src == WriteSource.VALUE, val_beat, blk_beat))),
        ]

        def load_block(addr, mask, source, vmid=None):
            """The block request's registers: the block held in `source` (a WriteSource) under
            `mask`; `addr` is the byte address of its first written dword (errors name it),
            `vmid` the VMID it is written with (default: the packet's)."""
            m.d.sync += [blk_addr.eq(addr), blk_mask.eq(mask), wr_src.eq(source),
                         blk_user.eq(write_user(cur_vmid if vmid is None else vmid))]

        def load_dwords(addr, first, second=None, vmid=None):
            """load_block of one dword at `addr`, or two (`second` not None: addr 8-aligned),
            from the value registers."""
            m.d.sync += [wval[0].eq(first), wval[1].eq(first if second is None else second)]
            load_block(addr, Const(1 if second is None else 3, BLOCK_DWORDS) << addr[2:5], WriteSource.VALUE, vmid)

        def request_block(write_state, wait_state, defer=Const(0)):
            """Ask for the block loaded now or before: the request is raised now and the FSM
            goes to `wait_state`; with `defer` it waits for `write_state`, which answers
            `defer`'s error."""
            with m.If(~defer):
                m.d.comb += wr_set.eq(1)
                m.next = wait_state
            with m.Else():
                m.next = write_state

        def write_block(addr, mask, source, write_state, wait_state, defer=Const(0), vmid=None):
            """Write the block held in `source` under `mask` (load_block, then request)."""
            load_block(addr, mask, source, vmid)
            request_block(write_state, wait_state, defer)

        def write_dwords(addr, first, second, write_state, wait_state, defer=Const(0), vmid=None):
            """write_block of one dword at `addr`, or two (`second` not None: addr 8-aligned)."""
            load_dwords(addr, first, second, vmid)
            request_block(write_state, wait_state, defer)

        # The write under way's address and VMID, for a failed write's error (errors.py) and
        # `ext_ih_addr`: `blk_addr` and `blk_user` as they were when the writer had sent the
        # write. A *_WAIT state loads the next write's registers once the writer has sent the
        # current one (`sent`), not when it is answered: the answer (`done`, the B channel
        # through the MMU and the memory mux in the same cycle) then reaches only the
        # decisions that depend on it (top_32's worst paths ran from it into ~370 flip-flops).
        wr_addr = Signal(aw)
        wr_vmid = Signal(4)
        with m.If(~writer.sent):
            m.d.sync += [wr_addr.eq(blk_addr), wr_vmid.eq(blk_user.vmid)]

        # ---------------------------------------------------------------- packet decode helpers
        opcode = cur_fetch_data[_OPCODE.bits]
        count = cur_fetch_data[_COUNT.bits]

        perf_count_kind = Signal()  # count a packet of `kind` this cycle
        perf_count_nop = Signal()

        resetting = Signal()
        with m.If(csr.control_soft_reset):
            m.d.sync += resetting.eq(1)
        m.d.comb += stopped.eq(resetting | csr.control_soft_reset)
        resume = Signal()  # SWAP1: the new queue's IB fetchers restart where it stands

        # an IB level's fetcher is loaded (base, from dword 0) while its packet is parsed and
        # started once the packet's checks pass (pm4/indirect_buffer.py)
        load_ib = Signal()
        load_level = Signal(2)
        start_ib = Signal()
        start_level = Signal(2)
        # (each IB fetcher's load and start are `load_ib & (load_level == i)` and `start_ib &
        # (start_level == i)`, or `level >= i` in SWAP1, worked out flat from registers in
        # parser.py: `ib_load`, `ib_start`)
        ib_load = [None] + [Signal(name=f"ib_load{i}") for i in range(1, 1 + self.ib_levels)]
        ib_start = [None] + [Signal(name=f"ib_start{i}") for i in range(1, 1 + self.ib_levels)]
        kind_ib = Signal()  # kind == INDIRECT_BUFFER (a register of its own, loaded with kind)
        for i, f in enumerate(fetchers[1:], start=1):
            m.d.comb += [
                f.load.eq(ib_load[i]), f.start.eq(ib_start[i]),
                f.base.eq(value(p, ib, "base", aw)), f.mask.eq(0xFFFF_FFFF), f.ptr.eq(0), f.end.eq(ib_size[i]),
            ]
            with m.If(resume):
                m.d.comb += [f.base.eq(ib_base[i]), f.ptr.eq(ib_pos[i])]
        ring_start = Signal()
        m.d.comb += [
            fetchers[0].load.eq(ring_start), fetchers[0].start.eq(ring_start), fetchers[0].base.eq(ring_base),
            fetchers[0].mask.eq(ring_mask), fetchers[0].ptr.eq(ring_pos), fetchers[0].end.eq(ring_end),
        ]
        flush_all = Signal()
        flush_level = Signal(1 + self.ib_levels)  # one bit per fetcher
        for i, f in enumerate(fetchers):
            m.d.comb += f.flush.eq(flush_all | flush_level[i] | csr.control_soft_reset)

        # The ring fetcher follows the ring registers: (re)start it whenever it is not running
        # the current configuration (after reset, soft reset, or an enable).
        ring_running = Signal()
        with m.If(csr.control_soft_reset | flush_all):
            m.d.sync += ring_running.eq(0)
        with m.Elif(~ring_running & qc.enable & ~err_any & ~resetting):
            m.d.comb += ring_start.eq(1)
            m.d.sync += ring_running.eq(1)
        with m.If(ring_paused & ring_running):
            m.d.comb += flush_level[0].eq(1)
            m.d.sync += ring_running.eq(0)

        waiting = Signal()
        halted = Signal()
        stall = Signal()

        # AMD's units: IH_SIZE counts dwords (log2; below one entry it is one entry), the IH
        # pointers count bytes, IH_BASE holds the address >> 8. Whether the IH ring is full and
        # where its next entry goes are kept a cycle ahead: IH_WPTR moves only when an entry
        # is written, several cycles before the next one can start.
        ih_entry_full = Signal()
        ih_log2_bytes = Signal(6)
        m.d.sync += ih_log2_bytes.eq(Mux(csr.ih_size < ih_spec.MIN_LOG2_DWORDS,
                                         ih_spec.MIN_LOG2_DWORDS, csr.ih_size) + 2)
        ih_bytes = Signal(35)  # (from IH_SIZE a cycle late, like the ring's mask)
        ih_bytes_m1 = Signal(35)
        m.d.sync += [ih_bytes.eq(Const(1, 35) << ih_log2_bytes), ih_bytes_m1.eq((Const(1, 35) << ih_log2_bytes) - 1)]
        ih_used = Signal(32)
        m.d.comb += ih_used.eq(ih_wptr - csr.ih_rptr)
        ih_base = Signal(aw)
        m.d.comb += ih_base.eq(Cat(Const(0, 8), csr.ih_base_lo, csr.ih_base_hi))
        ih_entry_addr = Signal(aw)
        m.d.sync += [ih_entry_full.eq(ih_used >= ih_bytes),
                     ih_entry_addr.eq(ih_base + (ih_wptr & ih_bytes_m1))]
        # ... so in the first cycle out of a soft reset (IH_WPTR just set to 0) they are a cycle
        # stale: RUN takes no other engine's entry in that cycle (a register, not the reset's
        # end fed into the subtraction, which was top_32's critical path)
        m.d.sync += ih_stale.eq(ih_clear)

        eop_set = Signal()
        cperr_set = Signal()
        ovf_set = Signal()

        # ---------------------------------------------------------------- the DMA engine
        dma = self.dma
        dma_busy = Signal()
        dma_failed = Signal()  # a transfer answered an error: later ones are cancelled
        # the engine's busy a cycle late (a compare of its pointers: kept off the parser's
        # paths). A DMA_DATA queued its transfer at least two cycles before the next header is
        # looked at (EXEC_DMA_DATA, DONE) or an error drains (the parser goes through RUN
        # first); DMA_SYNC waits a cycle before it looks (dma_sync_new).
        dma_busy_r = Signal()
        m.d.sync += dma_busy_r.eq(dma_busy)
        dma_sync_new = Signal()
        dma_cmd_go = Signal()  # in EXEC_DMA_DATA until its command is taken (pm4/dma_data.py)
        meta_push = Signal()
        q_abort = Signal()  # the active queue's reset aborts the DMA engine's transfers (QRESET)
        qr_wait = Signal(2)  # QRESET's cycles (the engine's busy shows two cycles after the abort)
        c = _Context(self, locals())
        dma_data.port(c)
        captures = errors.latch(c)
        sh = queues.shadows(c)  # the inactive queue's copy of the parser's registers
        c.update(locals())
        queues.doorbells(c)
        queues.arbiter(c)

        # ---------------------------------------------------------------- the parser FSM
        fsm = parser.build(c)  # (parser.py; it also decides which dword each level gives up)
        # Each level's position moves by one as its dword is taken. Written after the state
        # machine, so the take (`pops`, which comes late) is the last choice in front of the
        # register, not the first beneath every state's own assignment: no state that sets a
        # position (SWAP, QRESET, RESET, a yielding poll, an IB's prepare and CHAIN, each at
        # a level not taking a dword) takes a dword of that level in the same cycle (`pops`
        # is RUN's, PAYLOAD's and WD_COLLECT's, at the current level), so the order changes
        # nothing. (`ib_pos2`, `ib_pos1`: 16-19 bits of each 10.9-11.2 ns in `top_32`)
        with m.If(pops[0]):
            m.d.sync += ring_pos.eq(ring_pos + 1)
        for i in range(1, 1 + self.ib_levels):
            with m.If(pops[i]):
                m.d.sync += ib_pos[i].eq(ib_pos[i] + 1)
        queues.active_wptr(c)
        m.d.comb += at_boundary.eq(fsm.ongoing("RUN"))

        # ---------------------------------------------------------------- where an error happened
        errors.locate(c, fsm)

        # ---------------------------------------------------------------- status, counters, interrupts
        c.update(locals())
        status.drive(c)
        # One flip-flop per state on an FPGA (Yosys recodes the FSM): "which state" is then a
        # register, not a compare, on every path that starts from the state. (Yosys takes the
        # state after reset from the reset; the simulators ignore the attribute.)
        fsm.state.attrs["fsm_encoding"] = "one-hot"
        return m
