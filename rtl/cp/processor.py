"""The command processor: ring and doorbell, PM4 parser, packet execution, IH writer.

docs/hardware.md is the contract this implements. The pieces:

- three Fetchers (fetch.py: ring, IB1, IB2) read ahead; the parser pops one dword per
  cycle from the fetcher of the current level;
- the parser FSM (here) reads a header, checks it, collects the fixed payload into
  registers, checks fields (packets.py: every check derives from spec/packets.py) in the
  cycle the last fixed dword arrives, and starts executing in that same cycle; each
  packet's own states are in its module (write_data, indirect_buffer, wait_reg_mem,
  release_mem, dma_data), IH entries in ih.py, which see this FSM's signals through
  `_Context`;
- one BlockWriter (writer.py) performs every memory write (WRITE_DATA, fences, rptr/wptr write-back,
  IH entries), one aligned 32-byte block at a time, each waited for; a block formed in a
  cycle goes to the writer in that cycle, and the writer takes it in the cycle the
  previous write is answered (doorbell to EOP irq of a one-packet IB: 32 cycles at the
  memory model's minimum latency, `make bench` cp_submit_to_irq_cycles);
- reads of the ring/IB fetchers and WAIT_REG_MEM polls share the AR channel through a
  register slice (AXI payload stays stable until accepted) and R beats are routed by ID
  (bus_port.py); status.py drives STATUS, CP_ERROR and the counters.

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

from contextlib import contextmanager

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from spec import ih as ih_spec
from spec import packets as pk
from spec import vm as vm_spec

from ..bus import AXI4Signature, BURST_INCR, RESP_OKAY
from ..mmu import REQ_USER, RESP_USER, req_user
from ..csr import REG_FIELDS, CpError, IbLevel
from . import bus_port, dma_data, ih, indirect_buffer, release_mem, status, wait_reg_mem, write_data
from . import packets as checks
from .bus_port import ID_IB1, ID_IB2, ID_POLL, ID_RING, ID_WRITE  # noqa: F401 (re-exported)
from .fetch import Fetcher
from .packets import beyond_bus, field, value
from .writer import BLOCK_DWORDS, BlockWriter

_TYPE = pk.HEADER.field("TYPE")
_OPCODE = pk.HEADER.field("OPCODE")
_COUNT = pk.HEADER.field("COUNT")

MAX_FIXED = max(p.fixed for p in pk.PACKETS)


class _Context:
    """The CP's signals and helpers by name, for the modules that hold each packet's
    states (write_data, indirect_buffer, wait_reg_mem, release_mem, dma_data, ih)."""

    def __init__(self, cp, names: dict):
        self.cp = cp
        self.update(names)

    def update(self, names: dict) -> None:
        self.__dict__.update((k, v) for k, v in names.items() if k not in ("self", "c"))


def pack_fields(layout, **values):
    """A 32-bit word from field values at the positions `layout` gives ({name: (lsb, width)})."""
    word = Const(0, 32)
    for name, v in values.items():
        lsb, width = layout[name]
        word = word | (v[:width] << lsb)
    return word[:32]


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
        })

    def elaborate(self, platform):
        m = Module()
        csr = self.csr
        bus = self.bus
        aw = self.addr_width
        dpb = self.data_width // 32

        # ---------------------------------------------------------------- sub-units
        fetchers = [Fetcher(self.data_width, aw, depth_beats=self.fetch_depth,
                            max_burst_beats=min(8, self.fetch_depth), user_width=RESP_USER.size)
                    for _ in range(1 + self.ib_levels)]
        for i, f in enumerate(fetchers):
            m.submodules[f"fetch{i}"] = f
        m.submodules.writer = writer = BlockWriter(self.data_width, aw, REQ_USER.size, RESP_USER.size)

        level = Signal(2)
        vmid = Signal(4)  # the VMID of the job the ring's INDIRECT_BUFFER started
        cur_vmid = Signal(4)  # the VMID of the packet in hand: 0 in the ring
        m.d.comb += cur_vmid.eq(Mux(level == 0, 0, vmid))

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
        ring_mask = Signal(32)
        # AMD's units: RB_SIZE counts qwords (log2), RB_BASE holds the address >> 8
        m.d.comb += ring_mask.eq((Const(1, 34) << (csr.rb_size + 1)) - 1)
        ring_base = Signal(aw)
        m.d.comb += ring_base.eq(Cat(Const(0, 8), csr.rb_base_lo, csr.rb_base_hi))

        ring_pos = Signal(32)  # dwords of the ring the parser has consumed
        rptr = Signal(32)  # ring packets finished
        wptr = Signal(32)
        ib_base = Array(Signal(aw, name=f"ib_base{i}") for i in range(1 + self.ib_levels))
        ib_size = Array(Signal(20, name=f"ib_size{i}") for i in range(1 + self.ib_levels))
        ib_pos = Array(Signal(20, name=f"ib_pos{i}") for i in range(1 + self.ib_levels))

        hdr = Signal(32)
        hdr_off = Signal(32)
        hdr_addr = Signal(aw)
        # the INDIRECT_BUFFER packet of each parent level: an error after an IB returns
        # (its rptr write-back) belongs to that packet
        saved_hdr = Array(Signal(32, name=f"saved_hdr{i}") for i in range(self.ib_levels))
        saved_off = Array(Signal(32, name=f"saved_off{i}") for i in range(self.ib_levels))
        saved_addr = Array(Signal(aw, name=f"saved_addr{i}") for i in range(self.ib_levels))
        oob = Signal()  # the packet's address has bits above the bus's 48: it answers DECERR
        kind = Signal(range(len(pk.PACKETS)))
        p = [Signal(32, name=f"p{i}") for i in range(MAX_FIXED)]
        p_arr = Array(p)
        pidx = Signal(range(MAX_FIXED + 1))
        rem = Signal(15)  # payload dwords still to pop

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
        blk = Array(Signal(32, name=f"blk{i}") for i in range(BLOCK_DWORDS))
        blk_mask = Signal(BLOCK_DWORDS)
        blk_addr = Signal(aw)  # byte address of the first dword being written (for errors)
        wd_addr = Signal(aw)
        poll_timer = Signal(16)

        # IH
        ih_wptr = Signal(32)
        ih_src = Signal(8)
        ih_data = [Signal(32, name=f"ih_data{i}") for i in range(4)]
        ih_ts = Signal(self.ts_width)
        ih_client = Signal(8)
        ih_vmid = Signal(4)
        ih_err = Signal()  # the entry reports the error that stopped the CP
        wr_ih = Signal()  # the block to write is the IH entry (rtl/cp/ih.py), not the block buffer

        # ---------------------------------------------------------------- the current level
        cur_fetch_valid = Signal()
        cur_fetch_data = Signal(32)
        cur_fetch_resp = Signal(2)
        cur_fetch_user = Signal(RESP_USER)
        pop = Signal()
        for i, f in enumerate(fetchers):
            with m.If(level == i):
                m.d.comb += [cur_fetch_valid.eq(f.dw_valid), cur_fetch_data.eq(f.dw_data),
                             cur_fetch_resp.eq(f.dw_resp), cur_fetch_user.eq(f.dw_user), f.dw_ready.eq(pop)]
        cur_off = Signal(32)
        cur_addr = Signal(aw)
        cur_avail = Signal(32)  # dwords left in the current buffer (wrapping difference)
        with m.If(level == 0):
            m.d.comb += [
                cur_off.eq(ring_pos & ring_mask),
                cur_addr.eq(ring_base + Cat(Const(0, 2), ring_pos & ring_mask)),
                cur_avail.eq(wptr - ring_pos),
            ]
        with m.Else():
            m.d.comb += [
                cur_off.eq(ib_pos[level]),
                cur_addr.eq(ib_base[level] + Cat(Const(0, 2), ib_pos[level])),
                cur_avail.eq(ib_size[level] - ib_pos[level]),
            ]
        with m.If(pop):
            with m.If(level == 0):
                m.d.sync += ring_pos.eq(ring_pos + 1)
            with m.Else():
                m.d.sync += ib_pos[level].eq(ib_pos[level] + 1)

        # ---------------------------------------------------------------- error raising
        fsm_err = Signal()
        fsm_err_code = Signal(8)
        fsm_err_addr = Signal(aw)
        fsm_err_off = Signal(32)
        fsm_err_opcode = Signal(8)
        fsm_err_vmid = Signal(4)
        fsm_err_user = Signal(RESP_USER)
        fsm_err_access = Signal(3)

        def fail(code, addr=None, off=None, opcode=None, vmid=None):
            """Raise a packet/bus error from the FSM (defaults: the current packet)."""
            m.d.comb += [
                fsm_err.eq(1), fsm_err_code.eq(code),
                fsm_err_addr.eq(hdr_addr if addr is None else addr),
                fsm_err_off.eq(hdr_off if off is None else off),
                fsm_err_opcode.eq(hdr[_OPCODE.bits] if opcode is None else opcode),
                fsm_err_vmid.eq(cur_vmid if vmid is None else vmid),
            ]
            m.next = "ERR_DRAIN"

        def bus_code(resp, user=None):
            """CP_ERROR's code for an error response: VM_FAULT when the MMU tagged it."""
            code = Mux(resp == 0b11, CpError.BUS_DECERR, CpError.BUS_SLVERR)
            return code if user is None else Mux(RESP_USER(Value.cast(user)).fault, CpError.VM_FAULT, code)

        def bus_fail(resp, user, addr, access, vmid=None, off=None, opcode=None):
            """An access answered an error (`resp`, `user` its RUSER/BUSER): stop with the bus
            error, or with VM_FAULT and the fault's details (`vmid`: the access's VMID, default
            the packet's; a bus error names the packet's VMID, the work's)."""
            fault = RESP_USER(Value.cast(user)).fault
            fail(bus_code(resp, user), addr, off, opcode,
                 cur_vmid if vmid is None else Mux(fault, vmid, cur_vmid))
            m.d.comb += [fsm_err_user.eq(Value.cast(user)), fsm_err_access.eq(access)]

        # doorbell (runs beside the FSM)
        db_err = Signal()
        db_code = Signal(8)
        db_value = csr.rb_doorbell
        stopped = Signal()  # error latched or being reset: doorbells are ignored
        with m.If(csr.rb_doorbell_swmod & csr.rb_cntl_enable & ~stopped & ~err):
            ahead = Signal(32)
            used = Signal(32)
            m.d.comb += [ahead.eq(db_value - wptr), used.eq(db_value - rptr)]
            with m.If(ahead[31]):
                m.d.comb += [db_err.eq(1), db_code.eq(CpError.DOORBELL_BACKWARDS)]
            with m.Elif(used > (ring_mask + 1)):
                m.d.comb += [db_err.eq(1), db_code.eq(CpError.DOORBELL_OVERFLOW)]
            with m.Else():
                m.d.sync += wptr.eq(db_value)
        err_pending = Signal()  # a doorbell or DMA error waits for the parser's next packet boundary
        dma_err = Signal()
        dma_err_code = Signal(8)
        dma_err_off = Signal(32)
        dma_err_level = Signal(2)
        dma_err_vmid = Signal(4)
        dma_err_user = Signal(RESP_USER)
        dma_err_access = Signal(3)
        perf_count_dma = Signal()

        with m.If(~err & fsm_err):
            m.d.sync += [
                err.eq(1), err_code.eq(fsm_err_code), err_level.eq(level), err_opcode.eq(fsm_err_opcode),
                err_addr.eq(fsm_err_addr), err_offset.eq(fsm_err_off), err_vmid.eq(fsm_err_vmid),
                err_user.eq(fsm_err_user), err_access.eq(fsm_err_access),
            ]
        with m.Elif(~err & dma_err):
            m.d.sync += [
                err.eq(1), err_pending.eq(1), err_code.eq(dma_err_code), err_level.eq(dma_err_level),
                err_opcode.eq(pk.DMA_DATA.opcode), err_addr.eq(self.dma.err_addr if self.has_dma else 0),
                err_offset.eq(dma_err_off), err_vmid.eq(dma_err_vmid), err_user.eq(dma_err_user),
                err_access.eq(dma_err_access),
            ]
        with m.Elif(~err & db_err):
            m.d.sync += [
                err.eq(1), err_pending.eq(1), err_code.eq(db_code), err_level.eq(IbLevel.RING),
                err_opcode.eq(0), err_addr.eq(db_value), err_offset.eq(rptr & ring_mask), err_vmid.eq(0),
                err_user.eq(0), err_access.eq(0),
            ]

        # ---------------------------------------------------------------- write requests
        # A *_WRITE state requests the block buffer (wr_req); write_block requests a block
        # formed this cycle straight away (now_*), saving the *_WRITE cycle.
        wr_req = Signal()
        now_req = Signal()
        now_block = Signal(aw - 5)
        now_mask = Signal(BLOCK_DWORDS)
        now_user = Signal(REQ_USER)
        blk_user = Signal(REQ_USER)  # AxUSER of the block in the block buffer
        m.d.comb += [
            writer.req_valid.eq(wr_req | now_req),
            writer.req_block.eq(Mux(now_req, now_block, blk_addr[5:])),
            writer.req_mask.eq(Mux(now_req, now_mask, blk_mask)),
            writer.req_user.eq(Mux(now_req, now_user, blk_user)),
            # the writer reads the data while it writes, from the block buffer or the IH entry's
            # registers (both hold the block from the cycle after the request until the response)
            writer.req_data.eq(Mux(wr_ih, ih.entry(ih_client, ih_src, ih_vmid, ih_ts, ih_data),
                                   Cat(*[blk[i] for i in range(BLOCK_DWORDS)]))),
        ]

        def dword(v):
            """`v` as exactly 32 bits (zero-extended or cut), to Cat into a block."""
            v = Value.cast(v)
            return Cat(v, Const(0, 32 - len(v))) if len(v) < 32 else v[:32]

        def write_block(addr, mask, dwords, write_state, wait_state, defer=Const(0), vmid=None):
            """Write the block `dwords` (8 Values; None: the IH entry registers) under `mask`;
            `addr` is the byte address of its first written dword (errors name it), `vmid`
            the VMID it is written with (default: the packet's). It goes to
            the writer in this cycle and the FSM to `wait_state`; with `defer` (or the writer
            busy) it waits in the block buffer for `write_state`, which requests it (and
            answers `defer`'s error)."""
            user = req_user(cur_vmid if vmid is None else vmid, vm_spec.Access.WRITE)
            m.d.sync += [blk_addr.eq(addr), blk_mask.eq(mask), wr_ih.eq(dwords is None), blk_user.eq(user)]
            if dwords is not None:
                m.d.sync += [blk[i].eq(dword(d)) for i, d in enumerate(dwords)]
            with m.If(~defer):
                m.d.comb += [now_req.eq(1), now_block.eq(addr[5:]), now_mask.eq(mask), now_user.eq(user)]
            with m.If(~defer & writer.req_ready):
                m.next = wait_state
            with m.Else():
                m.next = write_state

        def write_dwords(addr, first, second, write_state, wait_state, defer=Const(0), vmid=None):
            """write_block of one dword at `addr`, or two (`second` not None: addr 8-aligned)."""
            pos = addr[2:5]
            # (every slot gets a value and the mask picks: two dwords start 8-aligned, so the
            # first is in an even slot and the second in the odd one after it)
            dwords = [first if second is None or i % 2 == 0 else second for i in range(BLOCK_DWORDS)]
            mask = Const(1 if second is None else 3, BLOCK_DWORDS) << pos
            write_block(addr, mask, dwords, write_state, wait_state, defer, vmid)

        # ---------------------------------------------------------------- packet decode helpers
        opcode = cur_fetch_data[_OPCODE.bits]
        count = cur_fetch_data[_COUNT.bits]
        known = Signal()
        count_ok = Signal()
        # the header-only NOP (COUNT all ones; PREDICATE and SHADER_TYPE ignored as ever)
        nop_pad = Signal()
        m.d.comb += nop_pad.eq((cur_fetch_data[_TYPE.bits] == pk.PACKET_TYPE3) & (opcode == pk.NOP.opcode) &
                               (count == _COUNT.max))
        new_kind = Signal(range(len(pk.PACKETS)))
        for pkt in pk.PACKETS:
            with m.If(opcode == pkt.opcode):
                ok = Const(1)
                if pkt.min_count > 0:
                    ok = ok & (count >= pkt.min_count)
                if pkt.max_count < _COUNT.max:
                    ok = ok & (count <= pkt.max_count)
                m.d.comb += [known.eq(1), new_kind.eq(pkt.index), count_ok.eq(ok)]

        perf_count_kind = Signal()  # count a packet of `kind` this cycle
        perf_count_nop = Signal()

        resetting = Signal()
        with m.If(csr.control_soft_reset):
            m.d.sync += resetting.eq(1)
        m.d.comb += stopped.eq(resetting | csr.control_soft_reset)
        m.d.comb += fetchers[0].end.eq(wptr)

        start_ib = Signal()
        start_level = Signal(2)
        start_base = Signal(aw)
        start_size = Signal(20)
        for i, f in enumerate(fetchers[1:], start=1):
            m.d.comb += [
                f.start.eq(start_ib & (start_level == i)),
                f.base.eq(start_base), f.mask.eq(0xFFFF_FFFF), f.ptr.eq(0), f.end.eq(ib_size[i]),
            ]
        ring_start = Signal()
        m.d.comb += [
            fetchers[0].start.eq(ring_start), fetchers[0].base.eq(ring_base),
            fetchers[0].mask.eq(ring_mask), fetchers[0].ptr.eq(ring_pos),
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
        with m.Elif(~ring_running & csr.rb_cntl_enable & ~err & ~resetting):
            m.d.comb += ring_start.eq(1)
            m.d.sync += ring_running.eq(1)
        with m.If(~csr.rb_cntl_enable & ring_running):
            m.d.comb += flush_level[0].eq(1)
            m.d.sync += ring_running.eq(0)

        waiting = Signal()
        halted = Signal()
        stall = Signal()

        # AMD's units: IH_SIZE counts dwords (log2; below one entry it is one entry), the IH
        # pointers count bytes, IH_BASE holds the address >> 8
        ih_entry_full = Signal()
        ih_log2_bytes = Signal(6)
        m.d.comb += ih_log2_bytes.eq(Mux(csr.ih_size < ih_spec.MIN_LOG2_DWORDS,
                                         ih_spec.MIN_LOG2_DWORDS, csr.ih_size) + 2)
        ih_bytes = Signal(35)
        m.d.comb += ih_bytes.eq(Const(1, 35) << ih_log2_bytes)
        ih_used = Signal(32)
        m.d.comb += [ih_used.eq(ih_wptr - csr.ih_rptr), ih_entry_full.eq(ih_used >= ih_bytes)]
        ih_base = Signal(aw)
        m.d.comb += ih_base.eq(Cat(Const(0, 8), csr.ih_base_lo, csr.ih_base_hi))
        ih_entry_addr = Signal(aw)
        m.d.comb += ih_entry_addr.eq(ih_base + (ih_wptr & (ih_bytes - 1)))

        eop_set = Signal()
        cperr_set = Signal()
        ovf_set = Signal()

        # ---------------------------------------------------------------- the DMA engine
        dma = self.dma
        dma_busy = Signal()
        dma_failed = Signal()  # a transfer answered an error: later ones are cancelled
        meta_push = Signal()
        hdr_is_dma = Signal()
        m.d.comb += hdr_is_dma.eq((cur_fetch_data[_TYPE.bits] == pk.PACKET_TYPE3) &
                                  (opcode == pk.DMA_DATA.opcode))
        def vm_status_word():
            """VM_FAULT_STATUS's value for the latched error."""
            return pack_fields(REG_FIELDS["VM_FAULT_STATUS"], VMID=err_vmid, ACCESS=err_access,
                               LEVEL=err_user.level, CAUSE=err_user.cause)

        c = _Context(self, locals())
        dma_data.port(c)

        # ---------------------------------------------------------------- the parser FSM
        wd = pk.WRITE_DATA
        ib = pk.INDIRECT_BUFFER
        wrm = pk.WAIT_REG_MEM
        rm = pk.RELEASE_MEM

        @contextmanager
        def state(name):
            """An FSM state that SOFT_RESET preempts: RESET waits for the bus to go quiet."""
            with m.State(name):
                yield
                if name != "RESET":
                    with m.If(stopped):
                        m.next = "RESET"

        def request_write(wait_state, check_oob=False):
            """A *_WRITE state: hand the block to the writer (DECERR first when the packet's
            address is beyond the bus), then wait for its response in `wait_state`."""
            def body():
                m.d.comb += wr_req.eq(1)
                with m.If(writer.req_ready):
                    m.next = wait_state
            if check_oob:
                with m.If(oob):
                    fail(CpError.BUS_DECERR, blk_addr)
                with m.Else():
                    body()
            else:
                body()

        @contextmanager
        def write_answered():
            """A *_WAIT state: stall until the write response; an error response stops the
            CP at the written address; the body runs when the write went through."""
            m.d.comb += stall.eq(1)
            with m.If(writer.done):
                with m.If(writer.resp != RESP_OKAY):
                    write_failed()
                with m.Else():
                    yield

        def write_failed():
            """The block writer's response was an error: stop, naming the written address."""
            bus_fail(writer.resp, writer.user, blk_addr, vm_spec.Access.WRITE, blk_user.vmid)

        def check_and_start():
            """The packet's field checks (spec/packets.py) in the cycle its last fixed payload
            dword arrives, then its first step: the checks read that dword straight from the
            fetcher, so no CHECK cycle is spent. A fence goes straight to its write, a
            WRITE_DATA to its data and a non-CHAIN IB starts its fetcher now; the other
            packets have an EXEC state."""
            for pkt in pk.PACKETS:
                if pkt is pk.NOP:
                    continue
                # the payload as it stands this cycle: dwords 0..fixed-2 are in p already
                p_now = p[:pkt.fixed - 1] + [cur_fetch_data]
                with m.If(kind == pkt.index):
                    if pkt is pk.DMA_DATA and not self.has_dma:
                        fail(CpError.UNSUPPORTED)  # no DMA engine in this build
                        continue
                    unsupported = checks.unsupported(p_now, pkt)
                    if pkt is ib:
                        unsupported = unsupported | ((level == 0) & field(p_now, ib, "CHAIN"))
                    misaligned = checks.misaligned(p_now, pkt)
                    with m.If(unsupported):
                        fail(CpError.UNSUPPORTED)
                    if not isinstance(misaligned, Const):  # DMA_DATA has no alignment rule
                        with m.Elif(misaligned):
                            fail(CpError.IB_MISALIGNED if pkt is ib else CpError.FENCE_MISALIGNED)
                    if pkt is ib:
                        chain = field(p_now, ib, "CHAIN")
                        with m.Elif(field(p_now, ib, "IB_SIZE") == 0):
                            fail(CpError.IB_SIZE_ZERO)
                        with m.Elif(~chain & (level == self.ib_levels)):
                            fail(CpError.IB_NESTING)
                        with m.Elif(checks.ib_beyond_bus(p_now, aw)):
                            fail(CpError.BUS_DECERR, value(p_now, ib, "base", aw))
                    if pkt is pk.DMA_DATA:
                        with m.Elif(field(p_now, pkt, "BYTE_COUNT") > (1 << self.dma_max_log2)):
                            fail(CpError.DMA_BYTE_COUNT)
                    with m.Else():
                        if pkt is not pk.DMA_DATA:  # a transfer counts when it is answered
                            m.d.comb += perf_count_kind.eq(1)
                        if pkt is wd:
                            write_data.start(c, p_now)
                        elif pkt is rm:
                            release_mem.start(c, p_now)  # straight to the fence write
                        elif pkt is ib:
                            indirect_buffer.start(c, p_now)
                        else:
                            m.next = f"EXEC_{pkt.name}"
                    m.d.sync += oob.eq(beyond_bus(p_now, pkt, aw))

        c.update(locals())
        with m.FSM(name="cp") as fsm:
            with state("RUN"):
                ib_done = (level != 0) & (ib_pos[level] == ib_size[level])
                with m.If(err_pending):
                    m.next = "ERR_DRAIN"
                with m.Elif(ib_done):
                    # back to the level that issued the IB; a ring packet finishes with it
                    m.d.sync += [level.eq(level - 1), hdr.eq(saved_hdr[level - 1]),
                                 hdr_off.eq(saved_off[level - 1]), hdr_addr.eq(saved_addr[level - 1])]
                    with m.If(level == 1):
                        m.next = "RING_DONE"
                with m.Elif(csr.control_halt):
                    m.d.comb += halted.eq(1)
                with m.Elif((level == 0) & (cur_avail == 0)):
                    pass  # ring empty
                with m.Elif(~cur_fetch_valid):
                    m.d.comb += stall.eq(1)
                with m.Elif(dma_busy & ~hdr_is_dma):
                    # only DMA_DATA overlaps the DMA engine: any other packet (a RELEASE_MEM
                    # above all) waits until every earlier transfer is answered
                    m.d.comb += stall.eq(1)
                with m.Else():
                    m.d.comb += pop.eq(1)
                    m.d.sync += [hdr.eq(cur_fetch_data), hdr_off.eq(cur_off), hdr_addr.eq(cur_addr),
                                 kind.eq(new_kind), pidx.eq(0), rem.eq(count + 1)]
                    with m.If(cur_fetch_resp != RESP_OKAY):
                        bus_fail(cur_fetch_resp, cur_fetch_user, cur_addr, vm_spec.Access.FETCH, off=cur_off, opcode=0)
                    with m.Elif((cur_fetch_data[_TYPE.bits] == pk.PACKET_TYPE2) | nop_pad):
                        # one-dword packets: any type-2 dword, and AMD's header-only NOP
                        m.d.comb += perf_count_nop.eq(1)
                        with m.If(level == 0):
                            m.next = "RING_DONE"
                    with m.Elif((cur_fetch_data[_TYPE.bits] != pk.PACKET_TYPE3) | ~known):
                        fail(CpError.ILLEGAL_OPCODE, cur_addr, cur_off,
                             Mux(cur_fetch_data[_TYPE.bits] == pk.PACKET_TYPE3, opcode, 0))
                    with m.Elif(~count_ok | (count + 2 > cur_avail)):
                        fail(CpError.BAD_COUNT, cur_addr, cur_off, opcode)
                    with m.Else():
                        m.next = "PAYLOAD"

            with state("PAYLOAD"):
                is_nop = kind == pk.NOP.index
                fixed = Signal(range(MAX_FIXED + 1))
                for pkt in pk.PACKETS:
                    with m.If(kind == pkt.index):
                        m.d.comb += fixed.eq(pkt.fixed)
                with m.If(~cur_fetch_valid):
                    m.d.comb += stall.eq(1)
                with m.Else():
                    m.d.comb += pop.eq(1)
                    m.d.sync += [rem.eq(rem - 1), pidx.eq(pidx + 1), p_arr[pidx].eq(cur_fetch_data)]
                    with m.If(cur_fetch_resp != RESP_OKAY):
                        bus_fail(cur_fetch_resp, cur_fetch_user, cur_addr, vm_spec.Access.FETCH)
                    with m.Elif(is_nop):
                        with m.If(rem == 1):
                            m.d.comb += perf_count_kind.eq(1)
                            m.next = "DONE"
                    with m.Elif(pidx == fixed - 1):
                        check_and_start()

            # ---- the packets' own states, one module each (no EXEC state for WRITE_DATA,
            # RELEASE_MEM and a non-CHAIN INDIRECT_BUFFER: see check_and_start)
            for executor in (write_data, indirect_buffer, wait_reg_mem, release_mem, dma_data):
                executor.states(c)

            # ---- a packet finished
            with state("DONE"):
                with m.If(level == 0):
                    m.next = "RING_DONE"
                with m.Else():
                    m.next = "RUN"
            with state("RING_DONE"):
                m.d.sync += rptr.eq(ring_pos)
                with m.If(csr.rb_cntl_rptr_wb):
                    addr = Cat(Const(0, 2), csr.rb_rptr_addr_lo[2:], csr.rb_rptr_addr_hi)
                    write_dwords(addr, ring_pos, None, "RPTR_WRITE", "RPTR_WAIT", vmid=0)
                with m.Else():
                    m.next = "RUN"
            with state("RPTR_WRITE"):
                request_write("RPTR_WAIT")
            with state("RPTR_WAIT"), write_answered():
                m.next = "RUN"

            ih.states(c)

            # ---- errors: stop, drain, report
            with state("ERR_DRAIN"):
                m.d.comb += flush_all.eq(1)
                # transfers already queued finish (or are cancelled by the DMA's own error)
                with m.If(~writer.busy & ~poll_pending & ~dma_busy):
                    m.d.comb += cperr_set.eq(1)
                    # a VM fault is reported as AMD's UTCL2 fault (src_data as gmc_v9_0 reads it)
                    vmf = err_code == CpError.VM_FAULT
                    cp_error = pack_fields(REG_FIELDS["CP_ERROR"], CODE=err_code, LEVEL=err_level, OPCODE=err_opcode)
                    hint = Signal(8)
                    for a, h in vm_spec.HINTS.items():
                        with m.If(err_access == a):
                            m.d.comb += hint.eq(h)
                    ih.start(c, Mux(vmf, ih_spec.Source.VM_FAULT, ih_spec.Source.CP_ERROR), [
                        Mux(vmf, err_addr[vm_spec.PAGE_SHIFT:44], cp_error),
                        Mux(vmf, Cat(err_addr[44:48], Const(0, 4)) | hint, err_addr[:32]),
                        Mux(vmf, vm_status_word(), err_addr[32:]),
                        Mux(vmf, cp_error, err_offset)],
                        client=Mux(vmf, ih_spec.Client.UTCL2, ih_spec.Client.GRBM_CP), vmid=err_vmid, err=True)
            with state("ERROR"):
                pass

            # ---- soft reset: let the bus go quiet, then clear everything
            with state("RESET"):
                m.d.comb += flush_all.eq(1)  # (the DMA engine was aborted by the reset pulse)
                with m.If(~writer.busy & ~poll_pending & ~dma_busy & ~csr.control_soft_reset):
                    m.d.sync += [
                        resetting.eq(0), err.eq(0), err_pending.eq(0), err_code.eq(0), err_level.eq(0),
                        err_opcode.eq(0), err_addr.eq(0), err_offset.eq(0),
                        level.eq(0), ring_pos.eq(0), rptr.eq(0), wptr.eq(0), ih_wptr.eq(0),
                        blk_mask.eq(0), dma_failed.eq(0), vmid.eq(0), err_vmid.eq(0), err_user.eq(0),
                        err_access.eq(0),
                    ]
                    m.next = "RUN"

        # ---------------------------------------------------------------- status, counters, interrupts
        c.update(locals())
        status.drive(c)
        return m
