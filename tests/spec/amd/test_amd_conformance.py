"""AMD's own encodings, run through every layer: conformance with gfx9.

The dwords, in tests/spec/amd/amd_dwords.py, are what Linux amdgpu and Mesa emit on gfx9 (Vega,
soc15), each quoted with the source that builds it and its arguments. For every one:

- our builder, called with the same arguments, produces exactly these dwords;
- our decoder reads AMD's field values from them, with no reserved bit left over, and the
  disassembler names them;
- the KMD's command-stream checker accepts them in a client IB (addresses moved into the
  client's BO; every control dword stays AMD's);
- the CP, the reference model and the RTL under each simulator (`CHECKS`, run on the RTL
  by tests/cosim/test_rtl_drivers.py), executes them as AMD's CP does: the fence value lands,
  the interrupt arrives as AMD's IH entry, a VALID = 0 IB runs, the header-only NOP is
  one dword.

What this front end deliberately does differently is listed in spec/gfx9.py (docs/
packets.md, "Differences from AMD gfx9"); the last cases of the table pin those differences.
"""

from __future__ import annotations

import errno

import pytest

import kmd_model
from kmd_model import regs
from kmd_model.regs import CpError, IbLevel
from spec import ih, packets, pm4
from testbench.refmodel import RefModel

from tests.difftest.scenarios import settle
from tests.kmd.test_kmd_ioctl import Client, expect
from tests.model.refmodel.refmodel_helpers import IB1, IB1B, IB2, IB2B, IH_RING, OUT, RING, Driver, r32, w32
from .amd_dwords import AMD, NOP_PAD, Amd


def _call_builder(case: Amd) -> list[int]:
    return case.build()  # type: ignore[operator]


@pytest.mark.parametrize("name", [n for n, c in AMD.items() if c.build is not None])
def test_our_builders_produce_amds_dwords(name):
    case = AMD[name]
    assert _call_builder(case) == list(case.dwords), f"{case.source}: {case.call}"


@pytest.mark.parametrize("name", [n for n, c in AMD.items() if c.refused])
def test_our_builders_refuse_what_we_do_not_implement(name):
    """The deliberate differences: the builders refuse, naming the field and value."""
    case = AMD[name]
    item = pm4.decode(list(case.dwords))
    kwargs = {f.lower(): v for f, v in case.fields.items()}
    with pytest.raises(ValueError) as e:
        pm4.BUILDERS[item.name](**{**item.args, **kwargs})
    assert str(e.value) == case.refused


@pytest.mark.parametrize("name", list(AMD))
def test_our_decoder_reads_amds_fields(name):
    case = AMD[name]
    items = list(pm4.decode_stream(list(case.dwords)))
    assert len(items) == 1, [pm4.describe(i) for i in items]  # one packet, AMD's length
    if case.dwords[0] >> 30 == 2:  # type 2: a one-dword filler whatever its PAD
        assert isinstance(items[0], pm4.Filler) and items[0].ok
    else:
        item = items[0]
        assert item.ok and item.length == len(case.dwords)
        assert item.reserved == {}, f"AMD's bits read as reserved: {item.reserved}"
        got = {k: item.fields[k] for k in case.fields}
        assert got == case.fields
    if case.listing:
        assert pm4.describe(items[0]) == case.listing
    assert "RESERVED" not in "\n".join(pm4.disassemble(list(case.dwords)))


def test_every_field_has_an_amd_reference():
    """Every field of the packet table is non-zero in some AMD case above, and every two
    fields of one width in one dword differ in some case. A field moved or swapped in
    spec/packets.py moves builders, decoder, RTL, model and checker alike, so testing them
    against each other cannot see it; AMD's dwords can (test_our_decoder_reads_amds_fields)."""
    cases: dict[str, list[dict]] = {}
    for case in AMD.values():
        if case.dwords[0] >> 30 == 3:
            cases.setdefault(packets.by_opcode[case.dwords[0] >> 8 & 0xFF].name, []).append(case.fields)
    zero, alike = [], []
    for p in packets.PACKETS:
        rows = cases.get(p.name, [])
        zero += [f"{p.name}.{f.name}" for f in p.fields if not any(r.get(f.name) for r in rows)]
        for i, a in enumerate(p.fields):
            for b in p.fields[i + 1:]:
                if (a.dword, a.width) == (b.dword, b.width) and not any(
                        a.name in r and b.name in r and r[a.name] != r[b.name] for r in rows):
                    alike.append(f"{p.name}.{a.name}/{b.name}")
    assert zero == [], "fields no AMD case sets"
    assert alike == [], "fields no AMD case tells apart"


def test_amd_header_bits():
    """soc15d.h PACKET3_COMPUTE(op, n) = PACKET3(op, n) | 1 << 1 (SHADER_TYPE), Mesa sid.h
    PKT3(op, count, predicate): PREDICATE in bit 0."""
    item = pm4.decode([0xC0001003, 0])  # PACKET3_COMPUTE(PACKET3_NOP, 0) | PKT3_PREDICATE(1)
    assert (item.name, item.count, item.predicate, item.shader_type, item.reserved) == ("NOP", 0, 1, 1, {})


def test_count_0x3fff_is_a_one_dword_nop_for_nop_only():
    """Mesa amdgpu_cs.cpp: "NOP is the only packet that can have count == -1"."""
    items = list(pm4.decode_stream([NOP_PAD] * 3 + [0xFFFF1001]))  # (PREDICATE is ignored)
    assert [(i.name, i.length) for i in items] == [("NOP", 1)] * 4
    bad = pm4.decode([pm4.header(packets.WRITE_DATA.opcode, 0x3FFF), 0])
    assert not bad.ok and bad.problem == pm4.Problem.TRUNCATED  # 16,386 dwords, not one


def test_amd_ih_entries_decode():
    """vega10_ih.c's decode of worked entries (soc15_ih_clientid.h, irqsrcs_gfx_9_0.h,
    irqsrcs_vmc_1_0.h): the CP end-of-pipe and bad-opcode sources, a UTCL2 page fault."""
    eop = ih.decode([0x0000B514, 0x56789ABC, 0x00001234, 0, 7, 0, 0, 0])
    assert (eop["CLIENT_ID"], eop["SOURCE_ID"], eop["RING_ID"], eop["VMID"]) == (0x14, 181, 0, 0)
    assert eop["TIMESTAMP_LO"] | eop["TIMESTAMP_HI"] << 32 == 0x1234_5678_9ABC
    assert eop["DATA0"] == 7  # amdkfd SOC15_CONTEXT_ID0_FROM_IH_ENTRY
    assert (ih.Client.GRBM_CP, ih.Source.EOP, ih.Source.CP_ERROR) == (0x14, 181, 183)
    assert ih.decode([0x0000B714] + [0] * 7)["SOURCE_ID"] == 183  # CP_BAD_OPCODE_ERROR
    fault = ih.decode([0x0300001B, 0x56789AC0, 0x00001234, 0x00008001, 0xFFF12345, 0x27, 0, 0])
    assert (fault["CLIENT_ID"], fault["SOURCE_ID"], fault["VMID"], fault["PASID"]) == (0x1B, 0, 3, 0x8001)
    assert ih.decode([0x83000012] + [0] * 7)["VMID_SRC"] == 1  # an mmhub fault
    # every field non-zero, at amdgpu_ih_decode_iv_helper's positions: client_id = dw[0] & 0xff,
    # src_id = dw[0] >> 8 & 0xff, ring_id = dw[0] >> 16 & 0xff, vmid = dw[0] >> 24 & 0xf,
    # vmid_src = dw[0] >> 31, timestamp = dw[1] | (dw[2] & 0xffff) << 32, timestamp_src = dw[2] >> 31,
    # pasid = dw[3] & 0xffff, src_data[0..3] = dw[4..7]
    every = [0x8521B514, 0x56789ABC, 0x80001234, 0x00008001, 7, 0x42, 0x17, 0x12345678]
    assert ih.decode(every) == dict(
        CLIENT_ID=0x14, SOURCE_ID=181, RING_ID=0x21, VMID=5, VMID_SRC=1, TIMESTAMP_LO=0x56789ABC,
        TIMESTAMP_HI=0x1234, TIMESTAMP_SRC=1, PASID=0x8001, DATA0=7, DATA1=0x42, DATA2=0x17, DATA3=0x12345678)
    assert ih.encode(**ih.decode(every)) == every
    assert ih.encode(CLIENT_ID=0x14, SOURCE_ID=181, TIMESTAMP_LO=0x56789ABC, TIMESTAMP_HI=0x1234,
                     DATA0=7) == [0x0000B514, 0x56789ABC, 0x00001234, 0, 7, 0, 0, 0]


def test_amd_register_units():
    """vega10_ih_enable_ring and gfx_v9_0_cp_gfx_resume's values fit our registers."""
    # IH_RB_BASE = addr >> 8, IH_RB_BASE_HI = (addr >> 40) & 0xff for 0x0000_FF12_3456_7800
    a = 0x0000_FF12_3456_7800
    assert (regs.IH_BASE_LO.ADDRESS.put(a >> 8 & 0xFFFF_FFFF), regs.IH_BASE_HI.ADDRESS.put(a >> 40)) == (
        0x12345678, 0xFF)
    assert regs.IH_BASE_HI.ADDRESS.width == regs.RB_BASE_HI.ADDRESS.width == 8
    # 256 KiB rings: IH RB_SIZE = log2(65536 dwords) = 16, CP RB_BUFSZ = log2(32768 qwords) = 15
    dev = RefModel()
    d = Driver(dev, ring_log2=16, ih_log2=13)
    assert (d.read(regs.RB_SIZE), d.read(regs.IH_SIZE)) == (15, 16)
    assert (d.read(regs.RB_BASE_LO), d.read(regs.IH_BASE_LO)) == (0x10000 >> 8, 0x20000 >> 8)


# ------------------------------------------------------------------------------ the CP runs them
# (`CHECKS`: on the reference model here, on the RTL under each simulator in
# tests/cosim/test_rtl_drivers.py)

FENCE = OUT + 0x100


SRC = OUT + 0x400  # 256 bytes of pattern the DMA copies


DST = OUT + 0x600


def _at(dwords: tuple[int, ...], addr: int, lo: int = 0) -> list[int]:
    """An AMD packet with its address dword(s) moved to `addr` (dword `lo`, and `lo + 1`
    for the high half); every other dword, the control dwords above all, stays AMD's."""
    out = list(dwords)
    out[lo:lo + 2] = _lo_hi(addr)
    return out


def _lo_hi(addr: int) -> list[int]:
    """A 64-bit address as the packets carry it: low dword, high dword."""
    return [addr & 0xFFFF_FFFF, addr >> 32]


def _mesa_chain_pad(ib: list[int]) -> list[int]:
    """Old Mesa winsys: `while ((cdw & 7) != 4) OUT_CS(0xffff1000)`, so the chain's four
    dwords end the IB on an 8-dword boundary."""
    return ib + [NOP_PAD] * ((4 - len(ib)) % 8)


def check_amd_streams_run(dev):
    """A ring and IBs made of AMD's packets run as they do on gfx9."""
    d = Driver(dev)
    a = AMD
    w32(d.dev, SRC, list(range(0x100, 0x140)))
    assert d.fields(regs.CAPS)["DMA"] == 1, "the default build has a DMA engine"
    # Mesa's si_emit_cp_dma on gfx9: a copy split in two (DIS_WC on all but the last, which
    # has CP_SYNC), then a clear
    ib2 = ([0xC0055000, 0x00000000, SRC, 0, DST, 0, 0x80000000 | 0x80]
           + [0xC0055000, 0x80000000, SRC + 0x80, 0, DST + 0x80, 0, 0x80]
           + [0xC0055000, 0xC0000000, 0xDEADBEEF, 0, DST + 0x100, 0, 0x40])
    ib2 += [NOP_PAD] * (-len(ib2) % 8)  # amdgpu_ring_generic_pad_ib
    ib1c = _at(a["wreg_gfx_to_memory"].dwords, OUT + 0x30, 2) + [NOP_PAD] * 3
    ib1 = _at(a["wr_one_addr"].dwords, OUT + 4, 2) + _at(a["radv_ib2"].dwords, IB2, 1)[:3] + [len(ib2)]
    ib1 = _mesa_chain_pad(ib1) + _at(a["mesa_chain"].dwords, IB2B, 1)[:3] + [0x00900000 | len(ib1c)]
    ib1b = _at(a["pipeline_sync_compute"].dwords, FENCE, 2)
    ib1b[4] = 0x41
    ib1b += [NOP_PAD]
    for addr, ib in ((IB1, ib1), (IB1B, ib1b), (IB2, ib2), (IB2B, ib1c)):
        w32(d.dev, addr, ib)
    fence = _at(a["fence_int"].dwords, FENCE, 3)
    ring = (_at(a["test_ib"].dwords, OUT, 2)
            + list(a["insert_nop_5"].dwords) + [0x80001234]
            + _at(a["fence_none"].dwords, FENCE, 3)[:5] + [0x41, 0, 0]  # seq 0x41, no interrupt
            + _at(a["pipeline_sync_gfx"].dwords, FENCE, 2)[:4] + [0x41, 0xFFFFFFFF, 4]
            + [0xC0023F00, IB1, 0, 0x03000000 | len(ib1)]  # emit_ib_gfx: VALID 0, VMID 3
            + [0xC0023F00, IB1B, 0, 0x03800000 | len(ib1b)]  # emit_ib_compute: VALID 1
            + fence  # the kernel fence: seq 0x42, EOP interrupt
            + _at(a["fence_int_64"].dwords, FENCE + 8, 3)  # INT | 64BIT
            + _at(a["radv_eop"].dwords, OUT + 0x20, 3)  # INT_SEL 3: data, no interrupt
            + [0xC0064900, 0x10238514, 0x22000000, FENCE + 0x10, 0, 0x43, 0, 7])  # EXEC, amdkfd ctx id 7
    d.submit(ring)
    assert settle(d)
    assert d.error() == (0, 0, 0, 0, 0), d.error()
    assert r32(d.dev, OUT) == 0xDEADBEEF  # amdgpu's IB test value
    assert r32(d.dev, OUT + 4, 3) == [3, 0, 0], "WR_ONE_ADDR: every dword to the one address, the last stays"
    assert r32(d.dev, OUT + 0x30) == 0xCAFE and r32(d.dev, OUT + 0x20) == 7
    assert r32(d.dev, FENCE, 5) == [0x42, 0, 0x42, 0, 0x43]
    assert r32(d.dev, DST, 0x40) == list(range(0x100, 0x140))
    assert r32(d.dev, DST + 0x100, 16) == [0xDEADBEEF] * 16
    assert d.read(regs.RB_RPTR) == len(ring) and d.read(regs.IH_WPTR) == 3 * ih.ENTRY_BYTES
    entries = d.ih_entries()
    for e in entries:
        e["TIMESTAMP_LO"] = e["TIMESTAMP_HI"] = 0
    eop = dict(CLIENT_ID=0x14, SOURCE_ID=181, RING_ID=0, VMID=0, VMID_SRC=0, TIMESTAMP_LO=0, TIMESTAMP_HI=0,
               TIMESTAMP_SRC=0, PASID=0)
    assert entries == [
        {**eop, "DATA0": 0, "DATA1": 0x42, "DATA2": 0, "DATA3": FENCE},
        {**eop, "DATA0": 0, "DATA1": 0x42, "DATA2": 0, "DATA3": FENCE + 8},
        {**eop, "DATA0": 7, "DATA1": 0x43, "DATA2": 0, "DATA3": FENCE + 0x10},
    ]
    assert r32(d.dev, IH_RING) == 0x0000B514  # dword 0 as vega10_ih reads it
    got = {p.name: d.perf(p.index) for p in packets.PACKETS}
    pads = sum(1 for buf in (ring, ib1, ib1b, ib2, ib1c) for i in pm4.decode_stream(buf)
               if isinstance(i, pm4.Filler) or i.name == "NOP")  # every one-dword pad is a NOP
    assert got == {"NOP": pads, "WRITE_DATA": 3, "INDIRECT_BUFFER": 4, "WAIT_REG_MEM": 2, "RELEASE_MEM": 5,
                   "DMA_DATA": 3}


def _soft_reset(d):
    """SOFT_RESET, as the KMD recovers: the CP is clean once the bus is quiet (on the RTL
    that takes cycles), then the ring starts at 0 again."""
    d.io.write_fields(regs.CONTROL, SOFT_RESET=1)
    for _ in range(100):
        if d.error() == (0, 0, 0, 0, 0) and d.fields(regs.STATUS)["IDLE"]:
            break
        d.dev.delay(20)
    assert d.error() == (0, 0, 0, 0, 0) and d.read(regs.RB_RPTR) == d.read(regs.IH_WPTR) == 0
    d.io.write(regs.INT_STATUS, 0xFFFF_FFFF)
    d.io.write(regs.IH_RPTR, 0)
    d.wptr = 0


def check_amd_differences_refused(dev):
    """What spec/gfx9.py lists as refused stops the CP with the documented error."""
    d = Driver(dev)
    big_fill = list(AMD["cp_dma_fill"].dwords)  # 4 MiB: over this engine's 2^CAPS.DMA_MAX_LOG2
    big_fill[4:6] = [OUT, 0]
    too_big = CpError.DMA_BYTE_COUNT if d.fields(regs.CAPS)["DMA"] else CpError.UNSUPPORTED
    for case, code in (("wreg_register", CpError.UNSUPPORTED), ("reg_wait", CpError.UNSUPPORTED),
                       ("gds_clear", CpError.UNSUPPORTED), (big_fill, too_big)):
        dwords = list(AMD[case].dwords) if isinstance(case, str) else case
        d.submit(dwords)
        assert settle(d)
        d.expect_error(code, IbLevel.RING, dwords[0] >> 8 & 0xFF, RING, 0)
        _soft_reset(d)
    # an IB whose 32-bit IB_BASE_HI reaches beyond the bus's 48 bits: BUS_DECERR at the IB
    far = 0x0001_0000_0000_0000 | IB1
    d.submit([0xC0023F00, far & 0xFFFF_FFFF, far >> 32, 8])
    assert settle(d)
    d.expect_error(CpError.BUS_DECERR, IbLevel.RING, packets.INDIRECT_BUFFER.opcode, IB1, 0)


def check_kmd_programs_like_amdgpu(dev):
    """The KMD's ring, IH ring, fences and IBs, dword for dword as amdgpu's gfx9 code."""
    kmd = kmd_model.bind(dev)
    # the bring-up's IB test: gfx_v9_0_ring_test_ib's WRITE_DATA (DST_SEL 5, WR_CONFIRM: the
    # CP waits for the write before the fence after it) of the KMD's magic to its wb slot
    from kmd_model.core.kmd import IB_TEST_MAGIC, Wb

    dst = kmd.wb_addr(Wb.IB_TEST)
    assert kmd.mem32[kmd.ib_test_bo.gpu_addr // 4:][:5].tolist() == [
        *AMD["test_ib"].dwords[:2], dst & 0xFFFF_FFFF, dst >> 32, IB_TEST_MAGIC]
    m = kmd.mmio
    assert m.read(regs.RB_BASE_LO) == kmd.ring.gpu_addr >> 8  # gfx_v9_0_cp_gfx_resume
    assert 2 << m.read(regs.RB_SIZE) == kmd.ring.size_dw  # RB_BUFSZ: log2 qwords
    assert m.read(regs.IH_BASE_LO) == kmd.ih.gpu_addr >> 8  # vega10_ih_enable_ring
    assert 4 << m.read(regs.IH_SIZE) == 4 * kmd.ih.size_dw  # RB_SIZE: log2 dwords
    c = Client()
    bo = c.bo(0x4000)
    seq = c.run(bo, pm4.write_data(bo.addr, [1]))
    assert seq and bo.u32[0] == 1
    ring = kmd.ring.ring32.tolist()
    items = [i for i in pm4.decode_stream(ring[:kmd.ring.wptr]) if i.ok]
    fences = [i.dwords for i in items if i.name == "RELEASE_MEM"]
    assert fences and all(f[:3] == [0xC0064900, 0x00238514, 0x22000000] and f[7] == 0 for f in fences)
    ibs = [i for i in items if i.name == "INDIRECT_BUFFER"]
    # emit_ib_gfx: control = length | vmid << 24, VALID 0; the IB test's IB runs as VMID 0, the
    # client's with the VMID its VM was given
    assert ibs and all(i.dwords[3] == i.fields["IB_SIZE"] | i.fields["VMID"] << 24 for i in ibs)
    assert [i.fields["VMID"] for i in ibs] == [0, c.f.vm.vmid] and c.f.vm.vmid >= 1
    nops = [i for i in items if i.name == "NOP"]
    assert all(i.dwords[1:] == [NOP_PAD] * (i.length - 1) for i in nops)  # gfx_v9_ring_insert_nop
    assert m.read(regs.IH_WPTR) % ih.ENTRY_BYTES == 0 and m.read(regs.IH_WPTR) >= ih.ENTRY_BYTES
    assert kmd.ih.by_source.get("EOP", 0) >= 2  # the IB test's fence and ours, by AMD's source id 181


def check_kmd_accepts_amd_streams(dev):
    """The CS checker takes a client IB of AMD's packets (addresses in the client's BO),
    runs it, and refuses AMD's register writes with a precise message."""
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo(0x4000)
    m = bo.addr
    a = AMD
    # the dwords as AMD's code emits them, addresses (both halves: a BO may lie above 4 GiB) in the BO
    chained = [0xC0033700, 0x40100500, *_lo_hi(m + 0x230), 0xCAFE] + [NOP_PAD] * 3
    bo.u32[0x800 // 4:0x800 // 4 + len(chained)] = chained
    ib = (list(a["insert_nop_5"].dwords) + [0x80001234, NOP_PAD]
          + [0xC0033700, 0x00100500, *_lo_hi(m + 0x200), 0xDEADBEEF]  # test_ib
          + [0xC0053700, 0x00110500, *_lo_hi(m + 0x204), 1, 2, 3]  # WR_ONE_ADDR
          + [0xC0064900, 0x00238514, 0x20000000, *_lo_hi(m + 0x208), 0x41, 0, 0]  # the fence's cache bits
          + [0xC0053C00, 0x00000113, *_lo_hi(m + 0x208), 0x41, 0xFFFFFFFF, 4]  # pipeline sync, PFP
          + [0xC0064900, 0x00000528, 0x23000000, *_lo_hi(m + 0x210), 7, 0, 0])  # radv EOP, INT_SEL 3
    ib = _mesa_chain_pad(ib) + [0xC0023F00, *_lo_hi(m + 0x800), 0x00900000 | len(chained)]  # Mesa chain, VALID
    c.run(bo, ib)
    assert bo.u32[0x200 // 4:0x214 // 4].tolist() == [0xDEADBEEF, 3, 0x41, 0, 7]
    assert bo.u32[0x230 // 4] == 0xCAFE
    if kmd.info.has_dma:
        w = [0xC0055000, 0, *_lo_hi(m + 0x300), *_lo_hi(m + 0x380), 0x80000000 | 0x40]  # DIS_WC, gfx9's bit 31
        bo.u32[0x300 // 4:0x340 // 4] = list(range(16))
        c.run(bo, w)
        assert bo.u32[0x380 // 4:0x3C0 // 4].tolist() == list(range(16))
    expect(errno.EINVAL, f"CS: WRITE_DATA at IB+0x0 ({m:#x}): DST_SEL=REGISTER is not supported by this device",
           c.submit, c.ib(bo, list(a["wreg_register"].dwords)))
    expect(errno.EINVAL, f"CS: WAIT_REG_MEM at IB+0x0 ({m:#x}): MEM_SPACE=REGISTER is not supported by this "
           "device", c.submit, c.ib(bo, list(a["reg_wait"].dwords)))


CHECKS = [check_amd_streams_run, check_amd_differences_refused, check_kmd_programs_like_amdgpu,
          check_kmd_accepts_amd_streams]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())
