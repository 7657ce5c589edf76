"""AXI4 and AXI4-Lite interface signatures, and the AXI4-Lite slave front of the CSR block.

Signatures are declared from the master's point of view (the master drives `Out` members),
as amaranth-soc does; a slave port is `In(signature)`. Amaranth names the ports
`<port>__<member>` (e.g. `s_axil__awaddr`), which cocotbext-axi finds with
`AxiLiteBus.from_prefix(dut, "s_axil", bus_separator="__")`-style prefixes.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

# AXI response codes (AMBA AXI spec, xRESP).
RESP_OKAY = 0b00
RESP_EXOKAY = 0b01
RESP_SLVERR = 0b10
RESP_DECERR = 0b11

BURST_INCR = 0b01


def mux_tree(index: Value, table: list) -> Value:
    """`table[index]` as a balanced tree of 2:1 multiplexers, one level per index bit, the
    top bit at the root; `None` entries read 0, and halves that read the same (the same
    Value, or both 0) collapse into one. An `Array` indexed by a signal becomes a case
    statement, which yosys turns into a decoder of every index and a wide OR (the CSR
    read multiplexer: 2,900 LUT4 that way, against about half as a tree)."""
    n = len(table)
    if n & (n - 1) or n > 1 << len(index):
        raise ValueError(f"mux_tree: {n} entries for a {len(index)}-bit index (a power of two, at most 2**bits)")

    def build(entries: list, bit: int):
        if len(entries) == 1:
            return entries[0]
        half = len(entries) // 2
        lo, hi = build(entries[:half], bit - 1), build(entries[half:], bit - 1)
        if lo is hi:
            return lo
        return Mux(index[bit], 0 if hi is None else hi, 0 if lo is None else lo)

    out = build(list(table), n.bit_length() - 2)
    return Const(0, 32) if out is None else out


def one_hot_or(index: Value, table: list) -> Value:
    """`table[index]` as an OR of every distinct entry ANDed with its own decode, the OR a
    balanced tree; `None` entries read 0, and an entry that is the same Value at several
    indices is decoded once (by aligned blocks: `index[k:] == base >> k`). `index` may be
    wider than the table needs (its other bits must be 0 for a hit). On the ECP5 this takes
    fewer LUT4 than mux_tree for the CSR read multiplexer (each LUT4 takes two entries' bits
    with their decodes, where a 2:1 multiplexer takes one: rtl/csr.py 2,044 → 1,887 LUT4, 1,812
    with its redundant rd_inside gate dropped as well)."""
    n = len(table)
    if n & (n - 1) or n > 1 << len(index):
        raise ValueError(f"one_hot_or: {n} entries for a {len(index)}-bit index (a power of two, at most 2**bits)")
    where: dict[int, tuple[Value, list[int]]] = {}
    for i, e in enumerate(table):
        if e is not None:
            where.setdefault(id(e), (e, []))[1].append(i)

    def blocks(idxs: list[int]):
        """Maximal aligned power-of-two runs of the sorted indices `idxs`: (base, log2 size)."""
        out, i = [], 0
        while i < len(idxs):
            k = 0
            while (idxs[i] % (2 << k) == 0 and i + (2 << k) <= len(idxs)
                   and idxs[i + (2 << k) - 1] == idxs[i] + (2 << k) - 1):
                k += 1
            out.append((idxs[i], k))
            i += 1 << k
        return out

    terms = []
    for e, idxs in where.values():
        hit = [index[k:] == base >> k for base, k in blocks(idxs)]
        sel = hit[0] if len(hit) == 1 else Cat(*hit).any()
        terms.append(Mux(sel, e, 0))
    if not terms:
        return Const(0, 32)
    while len(terms) > 1:
        terms = [terms[i] | terms[i + 1] if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
    return terms[0]


class AXI4LiteSignature(wiring.Signature):
    """AXI4-Lite, without AxPROT (the device ignores protection attributes)."""

    def __init__(self, addr_width: int, data_width: int = 32):
        if data_width not in (32, 64):
            raise ValueError(f"AXI4-Lite data width must be 32 or 64, not {data_width!r}")
        self.addr_width = addr_width
        self.data_width = data_width
        super().__init__({
            "awaddr": Out(addr_width), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wvalid": Out(1), "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_width), "arvalid": Out(1), "arready": In(1),
            "rdata": In(data_width), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        })


class AXI4Signature(wiring.Signature):
    """AXI4 full, the subset the GPU's memory master uses (no LOCK/CACHE/PROT/QOS).

    `req_user`/`resp_user`: widths of AxUSER (AR and AW) and of RUSER/BUSER, 0 for none.
    Inside the device they carry the MMU's sideband (rtl/mmu.py): the VMID and access kind
    of each request, and a fault's cause and level with its response."""

    def __init__(self, addr_width: int = 48, data_width: int = 64, id_width: int = 4,
                 req_user: int = 0, resp_user: int = 0):
        if data_width not in (32, 64, 128, 256):
            raise ValueError(f"AXI4 data width must be 32, 64, 128 or 256, not {data_width!r}")
        self.addr_width = addr_width
        self.data_width = data_width
        self.id_width = id_width
        self.req_user = req_user
        self.resp_user = resp_user
        user = {}
        if req_user:
            user.update(aruser=Out(req_user), awuser=Out(req_user))
        if resp_user:
            user.update(ruser=In(resp_user), buser=In(resp_user))
        super().__init__(user | {
            "awid": Out(id_width), "awaddr": Out(addr_width), "awlen": Out(8), "awsize": Out(3),
            "awburst": Out(2), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wlast": Out(1),
            "wvalid": Out(1), "wready": In(1),
            "bid": In(id_width), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "arid": Out(id_width), "araddr": Out(addr_width), "arlen": Out(8), "arsize": Out(3),
            "arburst": Out(2), "arvalid": Out(1), "arready": In(1),
            "rid": In(id_width), "rdata": In(data_width), "rresp": In(2), "rlast": In(1),
            "rvalid": In(1), "rready": Out(1),
        })


class AXI4LiteRegBridge(wiring.Component):
    """AXI4-Lite slave → a simple register port, one transaction at a time.

    The register side sees `wr_en` for one cycle with `addr`, `wr_data`, `wr_strb` (in the
    cycle the transaction's AW and W have both been accepted), and
    answers `wr_hit` combinationally; reads present `rd_addr` and take `rd_data`/`rd_hit`
    combinationally. Misses answer DECERR (reads return 0). MMIO is not on a hot path,
    so the bridge favours clarity over back-to-back throughput.

    A registered read (a block RAM's read port) takes `rd_en`, high in the cycle a read is
    accepted (with `rd_addr`), and answers `rd_late` from the next cycle on, held until the
    next `rd_en`; the bridge ORs it into RDATA, so such a read answers in the same cycle
    as the others. `rd_late` is 0 for a miss and for the bits `rd_data` answers. While
    `rd_wait` is high no read is accepted (the RAM is taking a write).
    """

    def __init__(self, addr_width: int):
        self.addr_width = addr_width
        super().__init__({
            "axil": In(AXI4LiteSignature(addr_width, 32)),
            "wr_en": Out(1), "wr_addr": Out(addr_width), "wr_data": Out(32), "wr_strb": Out(4),
            "wr_hit": In(1),
            "rd_addr": Out(addr_width), "rd_data": In(32), "rd_hit": In(1),
            "rd_en": Out(1), "rd_late": In(32), "rd_wait": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        bus = self.axil

        aw_full = Signal()
        w_full = Signal()
        aw_addr = Signal(self.addr_width)
        w_data = Signal(32)
        w_strb = Signal(4)
        b_valid = Signal()
        b_resp = Signal(2)

        # Accept address and data independently; AXI allows either to come first.
        m.d.comb += [
            bus.awready.eq(~aw_full & ~b_valid),
            bus.wready.eq(~w_full & ~b_valid),
            bus.bvalid.eq(b_valid),
            bus.bresp.eq(b_resp),
        ]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += [aw_full.eq(1), aw_addr.eq(bus.awaddr)]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += [w_full.eq(1), w_data.eq(bus.wdata), w_strb.eq(bus.wstrb)]

        # The write happens in the cycle the second of AW and W is accepted (from the bus, or
        # from the register that holds the one accepted first): a doorbell reaches the CP a
        # cycle sooner than from registers alone.
        m.d.comb += [
            self.wr_addr.eq(Mux(aw_full, aw_addr, bus.awaddr)),
            self.wr_data.eq(Mux(w_full, w_data, bus.wdata)),
            self.wr_strb.eq(Mux(w_full, w_strb, bus.wstrb)),
            self.wr_en.eq((aw_full | bus.awvalid) & (w_full | bus.wvalid) & ~b_valid),
        ]
        with m.If(self.wr_en):
            m.d.sync += [
                aw_full.eq(0), w_full.eq(0), b_valid.eq(1),
                b_resp.eq(RESP_OKAY),
            ]
            with m.If(~self.wr_hit):
                m.d.sync += b_resp.eq(RESP_DECERR)
        with m.If(b_valid & bus.bready):
            m.d.sync += b_valid.eq(0)

        r_valid = Signal()
        r_data = Signal(32)
        r_resp = Signal(2)
        m.d.comb += [
            bus.arready.eq(~r_valid & ~self.rd_wait),
            bus.rvalid.eq(r_valid),
            bus.rdata.eq(r_data | self.rd_late),
            bus.rresp.eq(r_resp),
            self.rd_addr.eq(bus.araddr),
            self.rd_en.eq(bus.arvalid & bus.arready),
        ]
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [
                r_valid.eq(1),
                r_data.eq(self.rd_data),
                r_resp.eq(RESP_OKAY),
            ]
            with m.If(~self.rd_hit):
                m.d.sync += [r_resp.eq(RESP_DECERR), r_data.eq(0)]
        with m.If(r_valid & bus.rready):
            m.d.sync += r_valid.eq(0)
        return m
