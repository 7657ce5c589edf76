"""The CP's parser: the state machine that takes a header, collects the fixed payload,
checks it and starts the packet in one cycle, and the states between packets (a packet or
ring packet finished, the rptr write-back, the error drain, the queue switch and reset,
SOFT_RESET); each packet's own states are in its module (pm4/: write_data, indirect_buffer,
wait_reg_mem, release_mem, dma_data), IH entries in ih.py. And which dword each fetcher
gives up this cycle (`pops`), from registers, beside the state machine.

`c` is the CP's context (rtl/cp/processor.py): its signals and helpers by name."""

from contextlib import contextmanager

from amaranth.hdl import Array, Cat, Const, Mux, Signal

from spec import ih as ih_spec
from spec import packets as pk
from spec import vm as vm_spec

from ..csr import REG_FIELDS, CpError
from . import errors, ih, queues
from .pm4 import dma_data, indirect_buffer, release_mem, wait_reg_mem, write_data
from . import packets as checks
from .packets import MAX_FIXED, beyond_bus, field, pack_fields

wd, ib, rm = pk.WRITE_DATA, pk.INDIRECT_BUFFER, pk.RELEASE_MEM


def build(c):
    """The parser's states and the packets' (each executor module adds its own), and which
    dword each level gives up this cycle; returns the FSM (status.py and errors.locate read
    its states)."""
    m, cp, csr, writer, dtag, cur_tag = c.m, c.cp, c.csr, c.writer, c.dtag, c.cur_tag
    kind, pidx, p, level, lvl, fail = c.kind, c.pidx, c.p, c.level, c.lvl, c.fail
    flag = c.flag

    @contextmanager
    def state(name):
        """An FSM state that SOFT_RESET preempts (RESET waits for the bus to go quiet), and
        that does nothing in the cycle after a failed check but stop: the speculative first
        step is undone (fetchers flushed, the level it left; it asked for no write) and
        the CP drains."""
        with m.State(name):
            if name == "RESET":
                yield
            else:
                with m.If(~c.failed):
                    yield
                with m.Else():
                    c.set_level(c.level_d)  # (and the fetchers are flushed: flush_all)
                    m.next = "ERR_DRAIN"
                with m.If(c.stopped):
                    m.next = "RESET"
                if not name.startswith("IH_") and name not in ("SWAP", "QRESET"):
                    # the active queue's reset (an IH entry in hand is finished first)
                    with m.Elif(Mux(c.q, c.qr_pend_q[1], c.qr_pend_q[0])):
                        m.next = "QRESET"

    def request_write(wait_state, check_oob=False):
        """A *_WRITE state: hand the block to the writer (DECERR first when the packet's
        address is beyond the bus), then wait for its response in `wait_state`."""
        def body():
            m.d.comb += c.wr_set.eq(1)
            m.next = wait_state
        if check_oob:
            with m.If(c.oob):
                fail(CpError.BUS_DECERR)  # at blk_addr
            with m.Else():
                body()
        else:
            body()

    @contextmanager
    def write_answered():
        """A *_WAIT state: stall until the write response; an error response stops the
        CP at the written address; the body runs when the write went through."""
        m.d.comb += c.stall.eq(1)
        with m.If(c.wr_bad):
            c.write_failed()  # at the written address
        with m.Elif(c.wr_ok):
            yield

    def payload_checks(pkt, p_now):
        """The packet's field checks in the cycle its last fixed payload dword arrives, in
        their order: (condition, code, at_ib_base). They read flags gathered dword by dword
        (accumulate_checks) and the last dword's tag."""
        if pkt is pk.DMA_DATA and not cp.has_dma:
            return [(Const(1), CpError.UNSUPPORTED, False)]  # no DMA engine in this build
        unsupported = c.acc_unsup | dtag.check(cur_tag, "unsupported", pkt)
        if pkt is ib:
            unsupported = unsupported | (lvl[0] & field(p_now, ib, "CHAIN"))
        misaligned = dtag.check(cur_tag, "misaligned", pkt)
        earlier = range(pkt.fixed - 1)  # dwords in p; the last one's checks are in its tag
        if any(not isinstance(checks.checks_at(p, pkt, k, c.aw)[1], Const) for k in earlier):
            misaligned = misaligned | c.acc_misal
        found = [(unsupported, CpError.UNSUPPORTED, False)]
        if not isinstance(misaligned, Const):  # DMA_DATA has no alignment rule
            found.append((misaligned, CpError.IB_MISALIGNED if pkt is ib else CpError.FENCE_MISALIGNED, False))
        if pkt is ib:
            chain = field(p_now, ib, "CHAIN")
            found += [(dtag.check(cur_tag, "ib_size_zero"), CpError.IB_SIZE_ZERO, False),
                      (~chain & lvl[cp.ib_levels], CpError.IB_NESTING, False),
                      (c.acc_beyond, CpError.BUS_DECERR, True)]
        if pkt is pk.DMA_DATA:
            found.append((dtag.check(cur_tag, "dma_too_big"), CpError.DMA_BYTE_COUNT, False))
        return found

    def check_and_start():
        """The packet's field checks (payload_checks) in the cycle its last fixed payload
        dword arrives, beside its first step, which starts whatever they say (a failing
        check stops it next cycle: `failed`): a fence goes straight to its write, a
        WRITE_DATA to its data and a non-CHAIN IB starts its fetcher now; the other
        packets have an EXEC state. So no CHECK cycle is spent."""
        for pkt in pk.PACKETS:
            if pkt is pk.NOP:
                continue
            p_now = payload_now(pkt)
            with m.If(kind == pkt.index):
                found = payload_checks(pkt, p_now)
                if pkt is pk.DMA_DATA and not cp.has_dma:
                    fail(found[0][1])  # no DMA engine in this build
                    continue
                # (a bad response of the dword itself: PAYLOAD raised it already)
                with m.If(c.cur_fetch_bad):
                    pass
                for cond, code, at_ib_base in found:
                    with m.Elif(cond):
                        flag(code, at_ib_base=at_ib_base)
                # the first step, whatever the checks say
                if pkt is not pk.DMA_DATA:  # a transfer counts when it is answered
                    m.d.comb += c.perf_count_kind.eq(1)  # (status.py drops it if `failed`)
                if pkt is wd:
                    write_data.start(c, p_now)
                elif pkt is rm:
                    # straight to the fence write, asked for only if the checks pass
                    # (they are all flags: RELEASE_MEM has none on its last dword)
                    assert isinstance(dtag.check(cur_tag, "unsupported", pkt), Const)
                    assert isinstance(dtag.check(cur_tag, "misaligned", pkt), Const)
                    rm_ok = ~(Cat(*(cond for cond, _, _ in found)).any() | c.cur_fetch_bad)
                    release_mem.start(c, p_now, ok=rm_ok)
                elif pkt is ib:
                    indirect_buffer.start(c, p_now)
                else:
                    if pkt is pk.DMA_DATA:
                        m.d.sync += c.dma_cmd_go.eq(1)
                    m.next = f"EXEC_{pkt.name}"

    def accumulate_checks():
        """OR the checks that the dword taken now completes into acc_* (a bad dword stops
        the CP, so what this adds then does not matter)."""
        found = {"unsup": Const(0), "misal": Const(0), "beyond": Const(0)}
        for pkt in pk.PACKETS:
            for k in range(pkt.fixed - 1):
                now = p[:k] + [c.cur_fetch_data]
                here = (kind == pkt.index) & (pidx == k)
                for name, v in zip(found, checks.checks_at(now, pkt, k, c.aw)):
                    if not isinstance(v, Const):
                        found[name] = found[name] | (here & v)
        m.d.sync += [c.acc_unsup.eq(c.acc_unsup | found["unsup"]), c.acc_misal.eq(c.acc_misal | found["misal"]),
                     c.acc_beyond.eq(c.acc_beyond | found["beyond"])]

    def payload_now(pkt):
        """The payload as it stands in the cycle its last fixed dword arrives: dwords
        0..fixed-2 are in p already, the last is the fetcher's."""
        return p[:pkt.fixed - 1] + [c.cur_fetch_data]

    def prepare():
        """What the packet's first step loads that does not depend on its checks, loaded in
        every payload cycle (the last one counts), so it waits for none of them."""
        for pkt in pk.PACKETS:
            if pkt is pk.NOP:
                continue
            with m.If(kind == pkt.index):
                p_now = payload_now(pkt)
                m.d.sync += c.oob.eq(beyond_bus(p_now, pkt, c.aw, tag=cur_tag))
                if pkt is wd:
                    write_data.prepare(c, p_now)
                elif pkt is rm:
                    release_mem.prepare(c, p_now)
                elif pkt is ib:
                    indirect_buffer.prepare(c, p_now)

    @contextmanager
    def gated():
        """Errors raised here are on the dword on offer, under its valid: the state machine
        names their code and next state; `err_given_dw_valid` and `err_given_hdr_valid`
        (below) raise them."""
        c.err_gated[0] = True
        try:
            yield
        finally:
            c.err_gated[0] = False

    c.update(dict(state=state, request_write=request_write, write_answered=write_answered, gated=gated))
    with m.FSM(name="cp") as fsm:
        with state("RUN"):
            # the header's registers follow the dword on offer (the popped one stays);
            # returning from an IB (below) restores its packet's instead
            new_fixed = Array(Const(pkt.fixed, range(MAX_FIXED + 1)) for pkt in pk.PACKETS)[cur_tag.kind]
            m.d.sync += [c.hdr_opcode.eq(c.opcode), c.hdr_off.eq(c.cur_off),
                         kind.eq(cur_tag.kind), c.kind_ib.eq(cur_tag.kind == ib.index), pidx.eq(0),
                         c.rem.eq(c.count + 1),
                         c.fixed.eq(new_fixed), c.last_fixed.eq(new_fixed == 1), c.rem_is1.eq(cur_tag.count0),
                         c.bad_count.eq(~cur_tag.count_ok | c.cur_short),
                         c.acc_unsup.eq(0), c.acc_misal.eq(0), c.acc_beyond.eq(0)]
            ib_done = Cat(*(lvl[i] & c.ib_empty[i] for i in range(1, 1 + cp.ib_levels))).any()
            with m.If(c.err_pending_any):
                m.next = "ERR_DRAIN"
            with m.Elif(ib_done):
                # back to the level that issued the IB; a ring packet finishes with it
                c.set_level(level - 1)
                m.d.sync += [c.hdr_opcode.eq(c.saved_opcode[level - 1]), c.hdr_off.eq(c.saved_off[level - 1])]
                with m.If(level == 1):
                    m.next = "RING_DONE"
            with m.Elif(cp.ext_ih_valid):
                with m.If(~c.ih_stale):  # (the first cycle out of a soft reset: the slot is stale)
                    ih.start_ext(c, ih.RET_RUN)  # (no header is taken: take_hdr)
            with m.Elif(csr.control_halt):
                m.d.comb += c.halted.eq(1)
                # a doorbell error of the other queue latches while halted as while running
                # (its queue is swapped in for it, no packet starts): else it waited for the
                # halt's end, its queue neither idle nor stopped meanwhile
                with m.If(Mux(c.q, c.dbpend_q[0], c.dbpend_q[1]) & ~c.dma_busy_r & ~c.db_write_active):
                    m.next = "SWAP"
            with m.Elif(c.sw_due):
                # a packet boundary: the other queue's turn (queues.py), a cycle later if the
                # running queue's doorbell is written now (its error latches first), once the
                # DMA engine has answered every transfer. Meanwhile no header is taken, not
                # even a DMA_DATA's: one overlapping the transfers gave the running queue a
                # turn more for each, out of the documented order, and a queue whose DMA_DATAs
                # kept the engine busy held the CP for as long against a higher priority
                with m.If(c.dma_busy_r):
                    m.d.comb += c.stall.eq(1)
                with m.Elif(~c.db_write_active):
                    m.next = "SWAP"
            with m.Elif(~c.cur_hdr_valid):
                m.d.comb += c.stall.eq(~(lvl[0] & c.ring_empty))  # (an empty ring is no stall)
            with m.Elif(c.dma_busy_r & ~cur_tag.is_dma):
                # only DMA_DATA overlaps the DMA engine: any other packet (a RELEASE_MEM
                # above all) waits until every earlier transfer is answered
                m.d.comb += c.stall.eq(1)
            with m.Else(), gated():
                # (the header is taken: `pops`, below; its errors: `err_given_hdr_valid`)
                with m.If(c.cur_fetch_bad):
                    fail(errors.BUS)
                with m.Elif(cur_tag.filler):
                    m.d.comb += c.perf_count_nop.eq(1)
                    with m.If(level == 0):
                        m.next = "RING_DONE"
                with m.Elif(cur_tag.illegal):
                    fail(CpError.ILLEGAL_OPCODE)
                with m.Else():
                    m.next = "PAYLOAD"  # (which answers BAD_COUNT first)

        with state("PAYLOAD"):
            prepare()
            with m.If(c.bad_count):
                # the header's COUNT, checked a cycle after the header was taken: nothing
                # else is taken meanwhile, so the error is the same
                fail(CpError.BAD_COUNT)
            with m.Elif(~c.cur_fetch_valid):
                m.d.comb += c.stall.eq(1)
            with m.Else(), gated():
                # (the dword is taken: `pops`, below; its errors: `err_given_dw_valid`)
                m.d.sync += [c.rem.eq(c.rem - 1), pidx.eq(pidx + 1), c.p_arr[pidx].eq(c.cur_fetch_data),
                             c.rem_is1.eq(c.rem == 2), c.last_fixed.eq(pidx + 2 == c.fixed)]
                write_data.payload_taken(c)
                accumulate_checks()
                with m.If(c.last_fixed & (kind != pk.NOP.index)):
                    # (a bad response of the last fixed dword: raised here, and its packet's
                    # first step is stopped next cycle like a failed check's)
                    with m.If(c.cur_fetch_bad):
                        flag(errors.BUS)  # at the dword
                    check_and_start()
                with m.Elif(c.cur_fetch_bad):
                    fail(errors.BUS)  # at the dword
                with m.Elif(kind == pk.NOP.index):
                    with m.If(c.rem_is1):
                        m.d.comb += c.perf_count_kind.eq(1)
                        m.next = "DONE"

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
            m.d.sync += Array(c.rptr_q)[c.q].eq(c.ring_pos)
            m.d.comb += Array(c.lim_pos)[c.q].eq(1)  # (limit_q: ring_pos + ring_size, queues.pointers)
            with m.If(c.qc.rptr_wb):
                addr = Cat(Const(0, 2), c.qc.rptr_addr_lo[2:], c.qc.rptr_addr_hi)
                c.write_dwords(addr, c.ring_pos, None, "RPTR_WRITE", "RPTR_WAIT", vmid=0)
            with m.Else():
                m.next = "RUN"
        with state("RPTR_WRITE"):
            request_write("RPTR_WAIT")
        with state("RPTR_WAIT"), write_answered():
            m.next = "RUN"

        ih.states(c)

        # ---- errors: stop, drain, report
        with state("ERR_DRAIN"):
            # transfers already queued finish (or are cancelled by the DMA's own error);
            # CP_ERROR is latched the cycle after its capture (errors.py)
            with m.If(c.err & ~writer.busy & ~c.poll_pending & ~c.dma_busy_r):
                m.d.comb += c.cperr_set.eq(1)
                # (every transfer is answered: the other queue's DMA_DATA may run, queues.py)
                m.d.sync += c.dma_failed.eq(0)
                # a VM fault is reported as AMD's UTCL2 fault (src_data as gmc_v9_0 reads it)
                vmf = c.err_code == CpError.VM_FAULT
                cp_error = pack_fields(REG_FIELDS["CP_ERROR"], CODE=c.err_code, LEVEL=c.err_level, OPCODE=c.err_opcode)
                hint = Signal(8)
                for a, h in vm_spec.HINTS.items():
                    with m.If(c.err_access == a):
                        m.d.comb += hint.eq(h)
                vm_status = pack_fields(REG_FIELDS["VM_FAULT_STATUS"], VMID=c.err_vmid, ACCESS=c.err_access,
                                        LEVEL=c.err_user.level, CAUSE=c.err_user.cause)
                ih.start(c, Mux(vmf, ih_spec.Source.VM_FAULT, ih_spec.Source.CP_ERROR), [
                    Mux(vmf, c.err_addr[vm_spec.PAGE_SHIFT:44], cp_error),
                    Mux(vmf, Cat(c.err_addr[44:48], Const(0, 4)) | hint, c.err_addr[:32]),
                    Mux(vmf, vm_status, c.err_addr[32:]),
                    Mux(vmf, cp_error, c.err_offset)],
                    client=Mux(vmf, ih_spec.Client.UTCL2, ih_spec.Client.GRBM_CP), vmid=c.err_vmid, err=True)
        with state("ERROR"):
            with m.If(cp.ext_ih_valid):
                ih.start_ext(c, ih.RET_ERROR)
            with m.Elif(c.want_switch & ~c.dma_busy_r):
                m.next = "SWAP"  # this queue is stopped; the other runs on
            with m.Elif(csr.control_halt & c.q):
                # queue 1 stopped, queue 0 with nothing to run: the CP has stopped for the
                # halt (STATUS is queue 0's: its own error shows ERROR instead)
                m.d.comb += c.halted.eq(1)

        # ---- the queues (queues.py): switch at a packet boundary, reset one queue
        with state("SWAP"):
            queues.swap(c)
            m.next = "SWAP1"
        with state("SWAP1"):
            # (the ring's fetcher restarts by itself: the flush stopped it)
            m.d.comb += c.resume.eq(1)
            queues.resume(c)
            m.next = "RUN"
        with state("QRESET"):
            # abort the DMA engine's transfers, let the bus go quiet (two cycles for the
            # engine's busy to show), then clear the active queue alone
            m.d.sync += c.qr_wait.eq(Mux(c.qr_wait == 3, 3, c.qr_wait + 1))
            m.d.comb += c.q_abort.eq(c.qr_wait == 0)
            with m.If((c.qr_wait == 3) & ~writer.busy & ~c.poll_pending & ~c.dma_busy_r):
                m.d.sync += [
                    c.qr_wait.eq(0), c.err.eq(0), c.err_pending.eq(0), c.err_code.eq(0), c.err_level.eq(0),
                    c.err_opcode.eq(0), c.err_addr.eq(0), c.err_offset.eq(0), c.vmid.eq(0), c.err_vmid.eq(0),
                    c.err_user.eq(0), c.err_access.eq(0), c.ring_pos.eq(0), c.dma_failed.eq(0),
                    Array(c.rptr_q)[c.q].eq(0), Array(c.wptr_q)[c.q].eq(0),
                ]
                m.d.comb += Array(c.lim_zero)[c.q].eq(1)  # (limit_q: the ring's size)
                m.d.comb += c.ring_clear.eq(1)
                for i in range(queues.N):
                    with m.If(c.q == i):
                        queues.clear_queue_flags(c, i)
                m.d.sync += [v.eq(0) for v in c.captures]
                c.set_level(0)
                m.next = "RUN"

        # ---- soft reset: let the bus go quiet, then clear everything
        with state("RESET"):
            # (flush_all; the DMA engine was aborted by the reset pulse)
            with m.If(~writer.busy & ~c.poll_pending & ~c.dma_busy_r & ~csr.control_soft_reset):
                m.d.sync += [
                    c.resetting.eq(0), c.err.eq(0), c.err_pending.eq(0), c.err_code.eq(0), c.err_level.eq(0),
                    c.err_opcode.eq(0), c.err_addr.eq(0), c.err_offset.eq(0), c.vmid.eq(0), c.err_vmid.eq(0),
                    c.err_user.eq(0), c.err_access.eq(0),
                    c.ring_pos.eq(0), c.ih_wptr.eq(0),
                    c.blk_mask.eq(0), c.dma_failed.eq(0), c.ih_ext.eq(0),
                    c.q.eq(0), c.q_ring.eq(0), c.qr_wait.eq(0),
                ]
                m.d.comb += [c.ring_clear.eq(1), c.took_next.eq(1)]
                for i in range(queues.N):  # both queues
                    m.d.sync += [c.rptr_q[i].eq(0), c.wptr_q[i].eq(0)]
                    m.d.comb += c.lim_zero[i].eq(1)
                    queues.clear_queue_flags(c, i)
                queues.clear_shadow(c)
                m.d.comb += c.ih_clear.eq(1)
                m.d.sync += [v.eq(0) for v in c.captures]
                c.set_level(0)
                m.next = "RUN"

    with m.If(c.poll_taken | c.stopped | fsm.ongoing("QRESET")):
        m.d.sync += c.poll_req.eq(0)
    m.d.comb += c.swapping.eq(fsm.ongoing("SWAP"))
    queues.queue_resets(c)

    # the fetchers are flushed while the CP drains or resets, and in the cycle after a
    # failed check (from the state bits and `failed`, outside the state machine)
    m.d.comb += c.flush_all.eq(fsm.ongoing("ERR_DRAIN") | fsm.ongoing("RESET") | fsm.ongoing("SWAP") |
                               fsm.ongoing("QRESET") | c.failed)

    # ---------------------------------------------------------------- which dword is taken
    # The FSM's own conditions, as one flat expression per level from registers, so the
    # fetchers see their `dw_ready` a few LUTs after the clock: a header in RUN unless an
    # error waits, HALT holds or DMA transfers run (the fetcher's own tag says whether its
    # dword is a DMA_DATA); every payload dword unless the header's COUNT was wrong; every
    # WRITE_DATA data dword. (A consumed IB or an empty ring has no dword on offer.)
    # Two LUTs from flip-flops, in a form synthesis keeps (the terms are kept wires: it made
    # four LUTs of the same expression, `cp_32`'s critical path into the fetchers): per level
    # `mine` (its dword on offer, its level, no reset or failed check), the header side `hdr_ok`
    # (RUN, nothing in the way of a header) and `kind_ok` (which headers: none while a switch
    # is due; only DMA_DATA while transfers run: `sw_due` is `want_switch | turn_due` in a
    # register of its own, queues.arbiter), and the payload side `any_ok`.
    def kept(name, v):
        s = Signal(name=name, attrs={"keep": 1})
        m.d.comb += s.eq(v)
        return s
    hdr_ok = kept("take_hdr_ok", fsm.ongoing("RUN") & ~c.err_pending_any & ~csr.control_halt &
                  ~cp.ext_ih_valid)
    any_ok = kept("take_any_ok", (fsm.ongoing("PAYLOAD") & ~c.bad_count) | fsm.ongoing("WD_COLLECT"))
    # (the ring's ENABLE pauses it in RUN alone: `ring_paused` withholds its headers)
    ring_on = kept("take_ring_on", Mux(c.q_ring, c.ports[1].enable, c.ports[0].enable))
    for i, f in enumerate(c.fetchers):
        mine = kept(f"take_mine{i}", lvl[i] & f.dw_valid & ~csr.control_soft_reset & ~c.failed)
        kind_ok = kept(f"take_kind_ok{i}", ~c.sw_due & (~c.dma_busy_r | f.dw_tag.is_dma))
        hdr = hdr_ok & kind_ok & (ring_on if i == 0 else 1)
        m.d.comb += c.pops[i].eq(mine & (hdr | any_ok))
        m.d.comb += f.dw_ready.eq(c.pops[i])
    m.d.comb += c.pop.eq(c.pops.any())

    # ---------------------------------------------------------------- the IB fetchers' load and start
    # What pm4/indirect_buffer.py asks for (`load_ib`, `start_ib` and their levels) and SWAP1's
    # restart, as flat expressions of registers and the dword on offer: an IB packet's payload
    # loads the next level's fetcher (prepare), its last fixed dword, not CHAIN, starts it
    # (start; the level's own fetcher is the one on offer in PAYLOAD), EXEC_INDIRECT_BUFFER
    # (CHAIN) loads and starts the level's own, SWAP1 every level the queue is in. Through
    # `kind`, `level` and the FSM's conditions it was five LUTs to the fetcher's `load` (51
    # enables) and `n_ok`: `cp_32`'s critical path on two seeds (`cp.kind` → `fetch1.n_ok`,
    # 12.30 ns). (formal/blocks/cp/harness.py checks these against `load_ib`, `start_ib`.)
    pay_ib = fsm.ongoing("PAYLOAD") & c.kind_ib & ~c.failed
    chain_at = ib.field("CHAIN")
    assert chain_at.dword == ib.fixed - 1  # (the last fixed dword: the one on offer)
    for i in range(1, 1 + cp.ib_levels):
        again = ~c.failed & (fsm.ongoing("EXEC_INDIRECT_BUFFER") & lvl[i] |
                             fsm.ongoing("SWAP1") & Cat(*(lvl[j] for j in range(i, 1 + cp.ib_levels))).any())
        f = c.fetchers[i - 1]  # the level below, whose dword is on offer
        m.d.comb += [
            c.ib_load[i].eq((pay_ib & lvl[i - 1]) | again),
            c.ib_start[i].eq((pay_ib & lvl[i - 1] & ~c.bad_count & c.last_fixed & f.dw_valid &
                              ~f.dw_data[chain_at.bits][0]) | again),
        ]

    # ---------------------------------------------------------------- the errors on the dword on offer
    # What the state machine raises under `gated()`, given the dword on offer (its tag, its
    # response and the registers), in a kept wire per valid, so that valid is the last term
    # in front of `fsm_err` (processor.py): RUN's header errors (a bad response, an illegal
    # opcode) where RUN would take the header; PAYLOAD's bad response and its packet's checks
    # with the last fixed dword (the same conditions `check_and_start` flags); WD_COLLECT's bad
    # response. (formal/blocks/cp and the error tests hold them to what the states raise.)
    not_failed = ~c.failed
    ib_done = Cat(*(lvl[i] & c.ib_empty[i] for i in range(1, 1 + cp.ib_levels))).any()
    run_gv = kept("err_given_hdr_valid",
                  fsm.ongoing("RUN") & not_failed & ~c.err_pending_any & ~ib_done & ~cp.ext_ih_valid &
                  ~csr.control_halt & ~c.sw_due & ~(c.dma_busy_r & ~cur_tag.is_dma) &
                  (c.cur_fetch_bad | (~cur_tag.filler & cur_tag.illegal)))
    checks_fail = Const(0)
    for pkt in pk.PACKETS:
        if pkt is pk.NOP:
            continue
        conds = [cond for cond, _, _ in payload_checks(pkt, payload_now(pkt))]
        checks_fail = checks_fail | ((kind == pkt.index) & Cat(*conds).any())
    pay_gv = (fsm.ongoing("PAYLOAD") & not_failed & ~c.bad_count &
              (c.cur_fetch_bad | (c.last_fixed & (kind != pk.NOP.index) & checks_fail)))
    wd_gv = fsm.ongoing("WD_COLLECT") & not_failed & c.cur_fetch_bad
    dw_gv = kept("err_given_dw_valid", pay_gv | wd_gv)
    fsm_own = kept("fsm_err_own", c.fsm_err_fsm)
    m.d.comb += c.fsm_err.eq(fsm_own | (dw_gv & c.cur_fetch_valid) | (run_gv & c.cur_hdr_valid))
    return fsm
