"""The Amaranth CSR block (rtl/csr.py) from what spec/gen/generate.py collects from
spec/regs.rdl: an AXI4-Lite slave (rtl/bus.py AXI4LiteRegBridge) with every register's
exact access semantics, a port per field for the hardware, and the MMIO read path: the
read multiplexer (an AND-OR, bus.one_hot_or) over what the hardware drives, register arrays in
LUTRAM (in_lutram) or kept by the hardware (read_through), and the shadow RAM that
answers the reads of what software writes (shadow_lanes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spec.gen.generate import FieldInfo, RegInfo

RD_GROUP = 64  # the read multiplexer's answer is registered by groups of this many registers
LUTRAM_MIN = 8  # register arrays at least this long, with wide entries, are kept in a memory


def in_lutram(r: RegInfo) -> bool:
    """A register array kept in a small memory (LUTRAM on an FPGA) instead of flip-flops:
    long (LUTRAM_MIN entries or more) and wide (8 bits or more per entry), its fields plain
    storage the hardware reads one entry at a time (sw=rw, hw=r, no side effects), aligned so
    that its index is address bits. The CSR read multiplexer then sees one memory read instead
    of every entry, and the hardware gets an `<reg>_index` input and the entry at that index
    (e.g. the MMU's page-table base of the VMID it walks for). A memory has no reset, so a
    valid bit per entry (a flip-flop, reset with the block) tells the entries written since
    the reset: one that was not reads its reset value, as a register would."""
    return (r.count >= LUTRAM_MIN and r.stride == 4 and r.count & (r.count - 1) == 0
            and r.addr % (4 * r.count) == 0 and sum(f.width for f in r.fields) >= 8
            and all((f.sw, f.hw) == ("rw", "r") and not (f.swmod or f.singlepulse or f.onwrite)
                    for f in r.fields))


def read_through(r: RegInfo) -> bool:
    """A register array the hardware keeps itself and answers by index (e.g. the packet
    counters, a memory in the engine that counts): long (LUTRAM_MIN entries or more, a
    power of two, aligned so that its index is address bits) and read-only (sw=r, hw=w).
    The CSR block stores nothing: it gives the hardware the MMIO read's index
    (`<reg>_index`, an Out) and reads the entry there (the fields' ports, In), so the read
    multiplexer sees one entry instead of every one."""
    return (r.count >= LUTRAM_MIN and r.stride == 4 and r.count & (r.count - 1) == 0
            and r.addr % (4 * r.count) == 0
            and all((f.sw, f.hw) == ("r", "w") and not (f.swmod or f.singlepulse or f.onwrite or f.hwset)
                    for f in r.fields))


def _storage(f: FieldInfo) -> bool:
    """A field that is plain storage software writes and reads back (sw=rw, no side effect
    on write): its value is whatever software last wrote, or its reset value."""
    return f.sw == "rw" and f.onwrite is None and not f.singlepulse


def shadow_lanes(r: RegInfo) -> list[int]:
    """The byte lanes of a register read back from the shadow RAM instead of the read
    multiplexer: every bit of the lane is a storage field's (_storage) and resets to 0. A
    whole lane, so the RAM's byte enables keep every other bit 0 (no mask per register),
    and reset 0, so a register not written since the reset reads 0 without a table of
    reset values; every register that has a lane so qualifies resets to 0 in it."""
    bits = [None] * 32
    for f in r.fields:
        for b in range(f.lsb, f.lsb + f.width):
            bits[b] = f
    return [b for b in range(4)
            if all(bits[i] is not None and _storage(bits[i]) for i in range(8 * b, 8 * b + 8))
            and (r.reset >> 8 * b) & 0xFF == 0]


def constant(r: RegInfo) -> bool:
    """A register of constant fields only (sw=r, hw=na: ID, VERSION): its value is in the
    shadow RAM's initial contents, which no write changes, so it costs the multiplexer
    nothing."""
    return all((f.sw, f.hw) == ("r", "na") for f in r.fields)


def _outside(f: FieldInfo, lanes: list[int]) -> list[tuple[int, int]]:
    """The bit ranges (register bits, [lo, hi)) of field `f` outside the byte `lanes`."""
    out: list[tuple[int, int]] = []
    for b in range(f.lsb, f.lsb + f.width):
        if b // 8 in lanes:
            continue
        if out and out[-1][1] == b:
            out[-1] = (out[-1][0], b + 1)
        else:
            out.append((b, b + 1))
    return out


def hw_port(r: RegInfo, f: FieldInfo) -> str:
    """The hardware's port of field `f` of a register array kept in LUTRAM (in_lutram)."""
    base = r.name.lower()
    return base if len(r.fields) == 1 else f"{base}_{f.name.lower()}"


def render_amaranth(regs: list[RegInfo], enums, header: str, mmio_addr_width: int) -> str:
    regs = [r for r in regs if not r.model_only]  # not in the RTL yet: their offsets answer DECERR
    ports: list[str] = []
    body: list[str] = []
    reads: list[tuple[int, str]] = []  # (address, expression of the 32-bit read value)
    shadowed: list[tuple[int, list[int]]] = []  # (address, byte lanes) read from the shadow RAM
    constants: dict[int, int] = {}  # address: value, of the registers the RAM's contents hold

    def emit(line: str = "") -> None:
        body.append("        " + line if line else "")

    def lock_of(f: FieldInfo) -> str:
        """The write-enable term of a field's swwel lock: the locking field's port (the
        enable before this write), or "" for an unlocked field."""
        if not f.swwel:
            return ""
        lreg, _, lname = f.swwel.partition(".")
        lr = next(x for x in regs if x.name == lreg)
        return f" & ~self.{lr.port(next(x for x in lr.fields if x.name == lname))}"

    def reg_lock_of(r: RegInfo) -> str:
        """The swwel lock every field software writes shares, or ""."""
        locks = {lock_of(f) for f in r.fields if f.sw != "r"}
        return locks.pop() if len(locks) == 1 else ""

    # A register whose every written field has one swwel lock: its write decode has the lock
    # as one more term, for its flip-flops and its shadow_valid bit. The shadow RAM's lanes
    # and first-write fill take the decode without it (functions of the address alone, which
    # yosys shares across registers) and its write enable one `~wr_drop` (the writes a set
    # lock drops) beside them. Measured on the csr block (yosys, ECP5, 32 bits, seeds 1-3):
    # 1,967 LUT4 without locks; the lock in every shadow decode too 2,073; `wr_drop` in the
    # decode of every register 2,013 but 96 MHz (a logic level before the shadow RAM's data);
    # this 2,010 at 102.6 MHz (107.5 without, within the seeds' spread).
    by_lock: dict[str, list[int]] = {}
    for r in regs:
        if reg_lock_of(r) and r.count == 1:
            by_lock.setdefault(reg_lock_of(r), []).append(r.addr >> 2)
    drop = " | ".join(f"(({' | '.join(f'(bridge.wr_addr[2:] == {a:#x})' for a in addrs)}){lock.replace('~', '')})"
                      for lock, addrs in by_lock.items())
    emit("# the writes a set swwel lock drops (a ring's base, size and pointer write-back address while the ring is enabled)")
    emit("wr_drop = Signal()")
    emit(f"m.d.comb += wr_drop.eq({drop or 0})")

    emit()

    for r in regs:
        if in_lutram(r):
            _render_lutram(r, emit, ports, reads)
            continue
        if read_through(r):
            _render_read_through(r, emit, ports, reads)
            continue
        for idx in range(r.count) if r.count > 1 else [None]:
            addr = r.addr + (idx or 0) * r.stride
            label = r.name if idx is None else f"{r.name}[{idx}]"
            emit(f"# {label} @ {addr:#05x}: {r.title}")
            # a swwel lock shared by every field software writes is a term of the register's
            # decode (above); a lock of some fields only is a term of theirs
            reg_lock = reg_lock_of(r)
            if any(f.sw != "r" for f in r.fields):
                if reg_lock:
                    emit(f"# written only while {next(f.swwel for f in r.fields if f.swwel)} is clear")
                emit(f"wr = bridge.wr_en & (bridge.wr_addr[2:] == {addr >> 2:#x}){reg_lock}")
            lanes = shadow_lanes(r)
            if lanes:
                # (a lock on the shadowed lanes' fields gates the RAM's copy with the flip-flops)
                locks = {lock_of(f) for f in r.fields if any(b // 8 in lanes for b in range(f.lsb, f.lsb + f.width))}
                if len(locks) > 1:
                    raise ValueError(f"{r.name}: its shadowed lanes' fields have different swwel locks")
                lock = locks.pop()
                lock = "" if lock == reg_lock else lock
                emit(f"# lanes {lanes} read back from the shadow RAM (written with the register)")
                emit(f"with m.If(wr{lock}):")
                emit(f"    m.d.sync += shadow_valid[{len(shadowed)}].eq(1)")
                # (a register lock is in shadow_we: wr_drop)
                emit(f"shadow_wr.append(bridge.wr_en & (bridge.wr_addr[2:] == {addr >> 2:#x}){lock})")
                shadowed.append((addr, lanes))
            elif constant(r):
                emit("# (constant: in the shadow RAM's initial contents)")
                constants[addr] = r.reset
            parts: list[tuple[int, int, str]] = []  # (lsb, width, read expr)
            for f in r.fields:
                p = r.port(f, idx)
                sl = f"[{f.lsb}:{f.lsb + f.width}]"
                wd = f"bridge.wr_data{sl}"
                wm = f"wmask{sl}"
                outside = _outside(f, lanes)
                if f.hw_next and ((f.sw, f.hw) != ("rw", "r") or f.onwrite or f.singlepulse or r.count > 1):
                    raise ValueError(f"{r.name}.{f.name}: hw_next is only supported on plain sw=rw hw=r "
                                     "storage outside arrays")
                if (f.sw, f.hw) == ("r", "na"):
                    if not constant(r):
                        parts.append((f.lsb, f.width, f"C({f.reset:#x}, {f.width})"))
                elif (f.sw, f.hw) == ("r", "w"):
                    ports.append(f'"{p}": In({f.width}),')
                    parts.append((f.lsb, f.width, f"self.{p}"))
                elif f.onwrite == "woclr":
                    ports.append(f'"{p}": Out({f.width}),')
                    ports.append(f'"{p}_set": In({f.width}),')
                    emit(f"{p} = Signal({f.width}, init={f.reset or 0:#x})")
                    emit("# write 1 to clear; a hardware set in the same cycle wins, so no event is lost")
                    emit("with m.If(wr):")
                    emit(f"    m.d.sync += {p}.eq(({p} & ~({wd} & {wm})) | self.{p}_set)")
                    emit("with m.Else():")
                    emit(f"    m.d.sync += {p}.eq({p} | self.{p}_set)")
                    emit(f"m.d.comb += self.{p}.eq({p})")
                    parts.append((f.lsb, f.width, p))
                elif f.sw == "w" and f.singlepulse:
                    ports.append(f'"{p}": Out({f.width}),')
                    emit(f"{p} = Signal({f.width})")
                    emit(f"m.d.sync += {p}.eq(Mux(wr, {wd} & {wm}, 0))  # one-cycle pulse")
                    emit(f"m.d.comb += self.{p}.eq({p})")
                elif f.hw == "na" and not outside and not f.swmod:
                    emit(f"# {p}: the shadow RAM's copy is its only one (no hardware reads it)")
                else:  # storage: sw=rw (hw=r or na) or sw=w (hw=r)
                    if f.hw == "r":
                        ports.append(f'"{p}": Out({f.width}),')
                    emit(f"{p} = Signal({f.width}, init={f.reset or 0:#x})")
                    # one write enable per byte lane: the flip-flops take the data as it is
                    # (their enable does the masking; no logic per bit); a swwel lock is one
                    # more term of it (the write is ignored while the lock is set)
                    lock = "" if lock_of(f) == reg_lock else lock_of(f)
                    if lock:
                        emit(f"# ignored while {f.swwel} is set")
                    if f.hw_next:  # the value at the next edge: the write's bytes, or the register's
                        ports.append(f'"{p}_next": Out({f.width}),')
                        emit(f"m.d.comb += self.{p}_next.eq({p})")
                    for b in range(f.lsb // 8, (f.lsb + f.width - 1) // 8 + 1):
                        lo, hi = max(f.lsb, 8 * b), min(f.lsb + f.width, 8 * b + 8)
                        emit(f"with m.If(wr & bridge.wr_strb[{b}]{lock}):")
                        emit(f"    m.d.sync += {p}[{lo - f.lsb}:{hi - f.lsb}].eq(bridge.wr_data[{lo}:{hi}])")
                        if f.hw_next:
                            emit(f"    m.d.comb += self.{p}_next[{lo - f.lsb}:{hi - f.lsb}]"
                                 f".eq(bridge.wr_data[{lo}:{hi}])")
                    if f.hw == "r":
                        emit(f"m.d.comb += self.{p}.eq({p})")
                    if f.swmod:
                        ports.append(f'"{p}_swmod": Out(1),')
                        emit(f"{p}_swmod = Signal()")
                        emit(f"m.d.sync += {p}_swmod.eq(wr & {wm}.any())  # with the new value")
                        emit(f"m.d.comb += self.{p}_swmod.eq({p}_swmod)")
                    if f.sw == "rw":  # (the bits the shadow RAM does not answer)
                        parts += [(lo, hi - lo, p if (lo, hi - lo) == (f.lsb, f.width) else
                                   f"{p}[{lo - f.lsb}:{hi - f.lsb}]") for lo, hi in outside]
            emit(f"wr_hits.append({addr:#05x})")
            emit()
            value = _cat_expr(parts)
            reads.append((addr, value))

    emit("# address decode: a miss answers DECERR")
    emit("with m.Switch(bridge.wr_addr[2:]):")
    emit("    with m.Case(*[a >> 2 for a in wr_hits]):")
    emit("        m.d.comb += bridge.wr_hit.eq(1)")
    emit("    with m.Default():")
    emit("        m.d.comb += bridge.wr_hit.eq(0)")
    # Reads: a table indexed by the address bits that name a register, read as an OR of the
    # entries each ANDed with its decode (bus.one_hot_or: 1,812 LUT4 for the block, against
    # 2,044 with a balanced tree of 2:1 multiplexers, bus.mux_tree, and more with an Array,
    # a case statement); holes (None) and registers that read 0 miss or read 0. An address
    # outside the table is a miss (rd_hit), which the bridge answers with 0 whatever
    # rd_data says, so rd_data needs no rd_inside of its own.
    top = max(a for a, _ in reads) >> 2
    sel_bits = max(1, top.bit_length())
    table = {a >> 2: v for a, v in reads}
    emit(f"rd_index = bridge.rd_addr[2:{2 + sel_bits}]")
    emit(f"rd_inside = bridge.rd_addr[{2 + sel_bits}:] == 0")
    emit("rd_table = [")
    for i in range(1 << sel_bits):
        v = table.get(i)
        emit(f"    {'None' if v in (None, '0', 'C(0, 32)') else v},  # {4 * i:#05x}")
    emit("]")
    hits = sum(1 << i for i in table)
    emit(f"rd_hits = C({hits:#x}, {1 << sel_bits})")
    emit("m.d.comb += bridge.rd_hit.eq(rd_inside & rd_hits.bit_select(rd_index, 1))")
    # The answer is taken apart by groups of 64 registers (256 bytes: the CP's, its counters',
    # the MMU's, the VMIDs', the SDMA's and the queues'), each group's AND-OR into a register
    # of its own at the read's acceptance, held until the next, as the bridge's own `r_data`
    # was; the bridge ORs them into RDATA with the shadow RAM's word (rd_late), so a read
    # answers in the same cycle and samples the same cycle's values. The hardware's values
    # then cross the die into a smaller AND-OR whose register the placer can put near them
    # (issue 14: the top's `csr.bridge.r_data` from `sdma.wdw` through the whole multiplexer,
    # 11.49 ns).
    emit("rd_parts = []  # each group's answer, 0 for a read outside it")
    emit(f"for g in range(0, {1 << sel_bits}, {RD_GROUP}):")
    emit(f"    group = [e if g <= i < g + {RD_GROUP} else None for i, e in enumerate(rd_table)]")
    emit("    if all(e is None for e in group):")
    emit("        continue")
    emit(f"    part = Signal(32, name=f\"rd_part{{g // {RD_GROUP}}}\")")
    emit("    with m.If(bridge.rd_en):")
    emit("        m.d.sync += part.eq(Mux(rd_inside, one_hot_or(rd_index, group), 0))")
    emit("    rd_parts.append(part)")
    emit("m.d.comb += bridge.rd_data.eq(0)  # (every answer is in rd_parts)")
    _render_shadow(emit, shadowed, constants, sel_bits)

    src = [
        '"""The CSR block: every register of spec/regs.rdl behind an AXI4-Lite slave.',
        "",
        header,
        "",
        "Ports, one per field, named <register>_<field>: `Out` for fields the hardware reads",
        "(sw=rw/w, hw=r), `In` for fields it drives (sw=r, hw=w). Write-1-to-clear fields",
        "take a `<port>_set` input (hwset); singlepulse fields are one-cycle `Out` pulses;",
        "swmod fields add a `<port>_swmod` pulse in the cycle the new value appears; hw_next",
        "fields a `<port>_next` output, the value at the next edge (an MMIO write's bytes bypassed).",
        '"""',
        "",
        "from enum import IntEnum",
        "",
        "from amaranth.hdl import C, Cat, Module, Mux, Signal",
        "from amaranth.lib import wiring",
        "from amaranth.lib.memory import Memory",
        "from amaranth.lib.wiring import In, Out",
        "",
        "from .bus import AXI4LiteRegBridge, AXI4LiteSignature, mux_tree, one_hot_or",
        "",
        f"MMIO_ADDR_WIDTH = {mmio_addr_width}",
        "",
        *_render_enums(enums),
        "# Register arrays kept in a memory (LUTRAM): the register bit an entry's bit 0 holds,",
        "# the memory's name (a submodule of the CSR block) and its valid bits' (an entry whose",
        "# bit is clear reads its reset value), for tools that read them.",
        "LUTRAM_ARRAYS = {",
        *[f"    {r.name!r}: ({8 * (min(f.lsb for f in r.fields) // 8)}, {r.name.lower() + '_mem'!r}, "
          f"{r.name.lower() + '_valid'!r})," for r in regs if in_lutram(r)],
        "}",
        "",
        "# Field positions, for logic that packs a register value (e.g. into an IH entry).",
        "REG_FIELDS = {",
        *[f"    {r.name!r}: {{{', '.join(f'{f.name!r}: ({f.lsb}, {f.width})' for f in r.fields)}}}," for r in regs],
        "}",
        "",
        "",
        "class CSRBlock(wiring.Component):",
        "    def __init__(self):",
        "        super().__init__({",
        '            "bus": In(AXI4LiteSignature(MMIO_ADDR_WIDTH, 32)),',
        *["            " + p for p in ports],
        "        })",
        "",
        "    def elaborate(self, platform):",
        "        m = Module()",
        "        m.submodules.bridge = bridge = AXI4LiteRegBridge(MMIO_ADDR_WIDTH)",
        "        wiring.connect(m, wiring.flipped(self.bus), bridge.axil)",
        "        wmask = Signal(32)  # byte strobes as a bit mask",
        "        m.d.comb += wmask.eq(Cat(s.replicate(8) for s in bridge.wr_strb))",
        "        wr_hits = []",
        f"        shadow_valid = Signal({len(shadowed)})  # a shadowed register written since the reset",
        "        shadow_wr = []  # each shadowed register's write decode (wr_drop aside), in shadow_valid's order",
        "",
        *body,
        "        return m",
        "",
    ]
    return "\n".join(src)


def _render_shadow(emit, shadowed: list[tuple[int, list[int]]], constants: dict[int, int],
                   sel_bits: int) -> None:
    """The shadow RAM (a block RAM on an FPGA): a word per register index, written with the
    shadowed lanes (shadow_lanes) of every MMIO write to a shadowed register and read at
    every accepted MMIO read; the bridge ORs its word into the answer a cycle later, when
    the read port has it (rd_late), so a read takes as many cycles as before (but one
    that arrives in the cycle the RAM takes a write waits a cycle: rd_wait). The
    registers' flip-flops stay for the hardware; the read multiplexer no longer sees the
    shadowed lanes. A RAM keeps its contents through a reset, so a valid bit per register
    (reset with the block) tells the registers written since: one that was not reads 0
    (its reset value), and its first write fills the lanes it does not strobe with 0."""
    depth = 1 << sel_bits
    emit()
    emit("# Shadow RAM: read-back of the software-written lanes (and the constant registers)")
    init = ", ".join(f"{a >> 2:#x}: {v:#x}" for a, v in sorted(constants.items()))
    emit(f"m.submodules.shadow = shadow = Memory(shape=32, depth={depth},")
    emit(f"                                     init=[{{{init}}}.get(i, 0) for i in range({depth})])")
    emit("shadow_w = shadow.write_port(granularity=8)")
    emit("shadow_r = shadow.read_port(transparent_for=())  # (never in a write's cycle: rd_wait)")
    emit("shadow_first = Signal()  # the write is its register's first since the reset")
    emit("m.d.comb += shadow_first.eq((Cat(shadow_wr) & ~shadow_valid).any())")
    lane_regs = [tuple(k for k, (_, ls) in enumerate(shadowed) if b in ls) for b in range(4)]
    emit("shadow_lane_regs = [  # per byte lane, the shadowed registers that have it")
    for ks in lane_regs:
        emit(f"    {ks!r},")
    emit("]")
    emit("# The RAM takes the write a cycle after the register, from registers (a block RAM's")
    emit("# inputs are slow to set up, and the write's decode comes late in its cycle), and the")
    emit("# bridge accepts no read in that cycle (rd_wait), so a read never meets the write: it")
    emit("# reads the RAM before the write or after it, as the register, with no bypass.")
    emit(f"shadow_wa = Signal({sel_bits})")
    emit("shadow_wd = Signal(32)")
    emit("shadow_we = Signal(4)")
    emit(f"m.d.sync += [shadow_wa.eq(bridge.wr_addr[2:{2 + sel_bits}]),")
    emit("             shadow_we.eq(Cat(Cat(C(0, 1), *(shadow_wr[k] for k in ks)).any() & ~wr_drop &")
    emit("                              (bridge.wr_strb[b] | shadow_first) for b, ks in enumerate(shadow_lane_regs))),")
    emit("             # (a lane the write leaves out is written only on its register's first write, as")
    emit("             # 0: its data is the strobed byte or 0, without the first-write decode, which")
    emit("             # came late: issue 14, the top's `csr.shadow_w__data`, 32 bits at 10.4-10.8 ns)")
    emit("             shadow_wd.eq(Cat(Mux(bridge.wr_strb[b], bridge.wr_data[8 * b:8 * b + 8], 0)")
    emit("                              for b in range(4)))]")
    emit("m.d.comb += [shadow_w.addr.eq(shadow_wa), shadow_w.data.eq(shadow_wd), shadow_w.en.eq(shadow_we),")
    emit("             bridge.rd_wait.eq(shadow_we.any()),")
    emit("             shadow_r.addr.eq(rd_index), shadow_r.en.eq(bridge.rd_en)]")
    table = {a >> 2: f"shadow_valid[{k}]" for k, (a, _) in enumerate(shadowed)}
    table.update({a >> 2: "C(1, 1)" for a in constants})
    emit("shadow_valid_table = [{")
    for i, v in sorted(table.items()):
        emit(f"    {i:#x}: {v},  # {4 * i:#05x}")
    emit(f"}}.get(i) for i in range({depth})]")
    emit("shadow_ok = Signal()  # the RAM's word is the read's answer (else it reads 0)")
    emit("with m.If(bridge.rd_en):")
    emit("    m.d.sync += shadow_ok.eq(rd_inside & mux_tree(rd_index, shadow_valid_table))")
    emit("rd_late = Mux(shadow_ok, shadow_r.data, 0)")
    emit("for part in rd_parts:  # (the groups' answers: 0 but the one the read was in)")
    emit("    rd_late = rd_late | part")
    emit("m.d.comb += bridge.rd_late.eq(rd_late)")


def _render_read_through(r: RegInfo, emit, ports: list[str], reads: list[tuple[int, str]]) -> None:
    """A register array the hardware answers by index (read_through): the MMIO read's index
    out, the entry at that index in (one Value for every entry: one_hot_or decodes it once)."""
    name = r.name.lower()
    k = (r.count - 1).bit_length()
    emit(f"# {r.name}[0..{r.count - 1}] @ {r.addr:#05x}: {r.title} (kept by the hardware, which")
    emit(f"# answers the entry at {name}_index)")
    ports.append(f'"{name}_index": Out({k}),')
    emit(f"m.d.comb += self.{name}_index.eq(bridge.rd_addr[2:{2 + k}])")
    parts: list[tuple[int, int, str]] = []
    for f in r.fields:
        p = hw_port(r, f)
        ports.append(f'"{p}": In({f.width}),')
        parts.append((f.lsb, f.width, f"self.{p}"))
    _array_reads(r, parts, emit, reads, "  # (read-only: a write is ignored, as any register's)")


def _render_lutram(r: RegInfo, emit, ports: list[str], reads: list[tuple[int, str]]) -> None:
    """A register array in a memory (in_lutram): one write port with a byte lane per enable,
    a read port for MMIO reads and one for the hardware (`<reg>_index`), and a valid bit
    per entry, reset with the block: an entry not written since the reset reads its reset
    value, and its first write fills the lanes it does not strobe with theirs."""
    name = r.name.lower()
    k = (r.count - 1).bit_length()
    lo_b = min(f.lsb for f in r.fields) // 8
    hi_b = (max(f.lsb + f.width for f in r.fields) - 1) // 8
    lanes = hi_b - lo_b + 1
    width = 8 * lanes  # whole byte lanes, so each byte strobe enables its lane
    base = 8 * lo_b
    init = (r.reset >> base) & ((1 << width) - 1)
    emit(f"# {r.name}[0..{r.count - 1}] @ {r.addr:#05x}: {r.title} (a small memory: LUTRAM on an")
    emit("# FPGA; a memory has no reset, so a valid bit per entry, reset with the block, tells")
    emit("# the entries written since: one that was not reads its reset value)")
    emit(f"m.submodules.{name}_mem = {name}_mem = Memory(shape={width}, depth={r.count}, init={[init] * r.count!r})")
    emit(f"{name}_w = {name}_mem.write_port(granularity=8)")
    emit(f"{name}_r = {name}_mem.read_port(domain=\"comb\")  # MMIO reads")
    emit(f"{name}_h = {name}_mem.read_port(domain=\"comb\")  # the hardware's")
    emit(f"{name}_valid = Signal({r.count})")
    emit(f"wr = bridge.wr_en & (bridge.wr_addr[{2 + k}:] == {r.addr >> (2 + k):#x})")
    emit(f"{name}_first = ~{name}_valid.bit_select(bridge.wr_addr[2:{2 + k}], 1)  # its first write")
    first_data = ", ".join(
        f"Mux(bridge.wr_strb[{b}], bridge.wr_data[{8 * b}:{8 * b + 8}], C({(init >> (8 * (b - lo_b))) & 0xFF:#x}, 8))"
        for b in range(lo_b, hi_b + 1))
    emit(f"m.d.comb += [{name}_w.addr.eq(bridge.wr_addr[2:{2 + k}]),")
    emit(f"             {name}_w.data.eq(Mux({name}_first, Cat({first_data}),")
    emit(f"                                  bridge.wr_data[{base}:{base + width}])),")
    emit(f"             {name}_w.en.eq(Mux(wr, bridge.wr_strb[{lo_b}:{hi_b + 1}] | {name}_first.replicate({lanes}), 0)),")
    emit(f"             {name}_r.addr.eq(bridge.rd_addr[2:{2 + k}]), {name}_h.addr.eq(self.{name}_index)]")
    emit("with m.If(wr):")
    emit(f"    m.d.sync += {name}_valid.bit_select(bridge.wr_addr[2:{2 + k}], 1).eq(1)")
    emit(f"{name}_hd = Mux({name}_valid.bit_select(self.{name}_index, 1), {name}_h.data, C({init:#x}, {width}))")
    emit(f"{name}_rdd = Mux({name}_valid.bit_select(bridge.rd_addr[2:{2 + k}], 1), {name}_r.data, C({init:#x}, {width}))")
    ports.append(f'"{name}_index": In({k}),')
    parts: list[tuple[int, int, str]] = []
    for f in r.fields:
        p = hw_port(r, f)
        ports.append(f'"{p}": Out({f.width}),')
        sl = f"[{f.lsb - base}:{f.lsb - base + f.width}]"
        emit(f"m.d.comb += self.{p}.eq({name}_hd{sl})")
        parts.append((f.lsb, f.width, f"{name}_rdd{sl}"))
    _array_reads(r, parts, emit, reads)


def _array_reads(r: RegInfo, parts: list[tuple[int, int, str]], emit, reads: list[tuple[int, str]],
                 note: str = "") -> None:
    """An array's read value (one Signal for every entry, so one_hot_or decodes it once), and its
    entries' addresses as hits."""
    name = r.name.lower()
    emit(f"{name}_rd = Signal(32)")
    emit(f"m.d.comb += {name}_rd.eq({_cat_expr(parts)})")
    for idx in range(r.count):
        addr = r.addr + idx * r.stride
        emit(f"wr_hits.append({addr:#05x}){note}")
        reads.append((addr, f"{name}_rd"))
    emit()


def _render_enums(enums) -> list[str]:
    from spec.gen.generate import _camel

    out = []
    for ename, members in enums.items():
        out += ["", f"class {_camel(ename)}(IntEnum):"]
        out += [f"    {name} = {value}" for name, value, _ in members]
        out.append("")
    return out


def _cat_expr(parts: list[tuple[int, int, str]]) -> str:
    """Cat(...) of field read values with zero padding, LSB first."""
    items, pos = [], 0
    for lsb, width, expr in sorted(parts):
        if lsb > pos:
            items.append(f"C(0, {lsb - pos})")
        items.append(expr)
        pos = lsb + width
    if not items:
        return "0"
    if pos < 32:
        items.append(f"C(0, {32 - pos})")
    return items[0] if len(items) == 1 else f"Cat({', '.join(items)})"
