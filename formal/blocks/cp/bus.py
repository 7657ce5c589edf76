"""cp_bus: the CP's AXI4 master side as memory sees it: the AR slice (rtl/cp/bus_port.py),
the block writer (rtl/cp/writer.py), and a failing packet's writes (none but the CP_ERROR
entry)."""

from amaranth.hdl import Cat, Const, Mux, Signal

from rtl.cp.writer import WriteSource


def build(h, m, b, csr, cp):
    """The CP's AXI master side: the AR slice (rtl/cp/bus_port.py) and the block writer
    (rtl/cp/writer.py) as the memory sees them, and the failing packet's writes."""
    from rtl.cp.bus_port import ID_POLL
    bus = cp.bus
    B = h.data_width // 8
    lb = B.bit_length() - 1
    nbeats = 32 // B
    in_reset = h.state("RESET")

    # ---- AR: VALID held and the payload stable until ARREADY
    ar_payload = Cat(bus.araddr, bus.arlen, bus.arsize, bus.arburst, bus.arid, bus.aruser)
    waited, old = h.held(bus.arvalid, bus.arready, ar_payload)
    h.prove("ar_held", ~waited | bus.arvalid)
    h.prove("ar_stable", ~waited | (ar_payload == old))
    # every AR is a client's request as the slice took it (address, length, the client's ID),
    # one per take: the fetchers' own proofs (fetch.*: window, 4 KiB, lengths) then hold
    # on the CP's AR channel
    takes = [(b("arvalid", f"fetch{i}") & b("arready", f"fetch{i}"), b("araddr", f"fetch{i}"),
              b("arlen", f"fetch{i}"), i) for i in range(1 + cp.ib_levels)]
    poll_addr = b("poll_addr")
    takes.append((b("poll_taken"), Cat(Const(0, lb), poll_addr[lb:]), Const(0, 8), ID_POLL))
    g_full = Signal(name="ghost_ar_full")
    g_addr, g_len, g_id = Signal(48, name="ghost_ar_addr"), Signal(8, name="ghost_ar_len"), \
        Signal(4, name="ghost_ar_id")
    n_takes = sum(t for t, *_ in takes)
    with m.If(bus.arvalid & bus.arready):
        m.d.sync += g_full.eq(0)
    for take, addr, length, cid in takes:
        with m.If(take):
            m.d.sync += [g_full.eq(1), g_addr.eq(addr), g_len.eq(length), g_id.eq(cid)]
    h.prove("ar_from_client", (n_takes <= 1) & ~(g_full & (n_takes != 0)) &
               (bus.arvalid == g_full) &
               (~bus.arvalid | ((bus.araddr == g_addr) & (bus.arlen == g_len) & (bus.arid == g_id))))
    h.prove("ar_legal", ~bus.arvalid | ((bus.arsize == lb) & (bus.arburst == 1) &
                                           ((bus.arid != ID_POLL) | (bus.arlen == 0))))
    routed = Cat(*(b("rvalid", f"fetch{i}") == (bus.rvalid & (bus.rid == i)) for i in range(1 + cp.ib_levels)))
    h.prove("r_routed", routed.all() & (b("poll_rvalid") == (bus.rvalid & (bus.rid == ID_POLL))) &
               bus.rready)

    # ---- AW and W: VALID held and the payload stable until READY
    for ch, valid, ready, payload in (
            ("aw", bus.awvalid, bus.awready,
             Cat(bus.awaddr, bus.awlen, bus.awsize, bus.awburst, bus.awid, bus.awuser)),
            ("w", bus.wvalid, bus.wready, Cat(bus.wdata, bus.wstrb, bus.wlast))):
        waited, old = h.held(valid, ready, payload)
        h.prove(f"{ch}_held", ~waited | valid)
        h.prove(f"{ch}_stable", ~waited | (payload == old))

    # ---- a write is one burst inside one aligned 32-byte block, of legal shape
    h.prove("aw_in_block", ~bus.awvalid | ((bus.awaddr[:lb] == 0) &
                                              (bus.awaddr[5:] == b("req_block", "writer")) &
                                              (bus.awaddr[:5] + (bus.awlen + 1) * B <= 32)))
    h.prove("aw_legal", ~bus.awvalid | ((bus.awsize == lb) & (bus.awburst == 1) & (bus.awlen < nbeats)))

    # ---- W: AWLEN + 1 beats, WLAST on the last; only for the write under way, whose AW is
    # offered or accepted (W may go first: AXI allows it, and the mux holds it for its AW)
    start = h.writer_start()
    len_q = Signal(8, name="ghost_w_len")
    beats_q = Signal(8, name="ghost_w_beats")
    cur_len = Mux(start, bus.awlen, len_q)
    cur_beats = Mux(start, 0, beats_q)
    w_hs = bus.wvalid & bus.wready
    m.d.sync += [len_q.eq(cur_len), beats_q.eq(cur_beats + w_hs)]
    h.prove("wlast_beat", ~bus.wvalid | ((cur_beats <= cur_len) & (bus.wlast == (cur_beats == cur_len))))
    aw_sent = b("aw_sent", "writer")
    h.prove("w_with_aw", ~bus.wvalid | (b("req_valid", "writer") & (bus.awvalid | aw_sent)))
    # one write at a time: no AW and no last W beat before the previous write's B
    h.prove("one_write", (h.mem.aw_n <= 1) & (h.mem.wl_n <= 1))

    # ---- a packet whose check fails writes nothing: from the parser's error on, the only
    # writes requested (until soft reset) are the CP_ERROR IH entry and its IH_WPTR write-back
    failed = Signal(name="ghost_parser_failed")
    with m.If(b("fsm_err") & ~h.state("RESET")):
        m.d.sync += failed.eq(1)
    with m.If(in_reset):
        m.d.sync += failed.eq(0)
    slot = (b("ih_base") + (b("ih_wptr") & (b("ih_bytes") - 1)))[:48]
    wb_addr = Cat(csr.ih_wptr_addr_lo, csr.ih_wptr_addr_hi)
    block = b("req_block", "writer")
    ih_write = (b("wr_src") == WriteSource.IH) & (block == slot[5:]) | \
        (b("wr_src") == WriteSource.VALUE) & (block == wb_addr[5:])
    h.prove("failed_packet_writes_nothing", ~(failed & start) | ih_write)
    # (after a parser error: the cycle of `failed` that undoes the step, then the drain, the
    # CP_ERROR entry and ERROR; the error is captured or latched meanwhile)
    reporting = Cat(*(h.state(st) for st in b.states("cp") if st.startswith("IH_"))).any() & b("ih_err")
    h.invariant(~failed | in_reset | (b("err_any") & (b("failed") | h.state("ERR_DRAIN") |
                                                         h.state("ERROR") | reporting)))

    # ---- induction strengthening: the writer's beat against the ghost count, and its
    # request (block, mask, data source) held from the request until it is sent (AW and
    # the last W beat accepted: the CP may then load the next request's)
    w_started, w_sent = b("w_started", "writer"), b("w_sent", "writer")
    first, last, cur = b("first", "writer"), b("last", "writer"), b("cur", "writer")
    req = b("req_valid", "writer")
    h.invariant(~(req & ~start & ~b("sent", "writer")) | ((len_q == last - first) &
                                      (beats_q == Mux(w_sent, last - first + 1, cur - first)) &
                                      (w_started | (beats_q == 0)) & (w_sent | (cur >= first) & (cur <= last))))
    h.invariant(~(req & ~start & b("sent", "writer")) | (beats_q == len_q + 1))
    h.invariant(g_full == b("ar_valid"))

    # covers
    h.cover("w_before_aw", w_hs & bus.awvalid & ~bus.awready)
    h.cover("whole_block", w_hs & bus.wlast & (cur_len == nbeats - 1))
    h.cover("poll_waits_for_slot", b("poll_req") & bus.arvalid & ~bus.arready)
    h.cover("parser_error_entry", failed & start & ih_write)

