"""AMD's own encodings of every packet this front end implements, as gfx9 emits them: the
table tests/spec/amd/test_amd_conformance.py runs through every layer.

The dwords below are what Linux amdgpu and Mesa emit on gfx9 (Vega, soc15), each quoted
with the source that builds it and its arguments (the arithmetic is AMD's macros:
`PACKET3(op, n) = 3 << 30 | (n & 0x3FFF) << 16 | op << 8`). The last cases are the
deliberate differences spec/gfx9.py lists (`refused`).

Sources (repository, path; the stored commits are in /docs/amd-sources of the issue note):
  amdgpu  torvalds/linux drivers/gpu/drm/amd/amdgpu/{gfx_v9_0.c, soc15d.h, amdgpu_ring.c,
          vega10_ih.c}, drivers/gpu/drm/amd/include/ivsrcid/gfx/irqsrcs_gfx_9_0.h,
          drivers/gpu/drm/amd/include/soc15_ih_clientid.h, drivers/gpu/drm/amd/amdkfd/soc15_int.h
  Mesa    src/amd/common/sid.h, src/gallium/winsys/amdgpu/drm/amdgpu_cs.cpp (radeonsi),
          src/amd/vulkan/winsys/amdgpu/radv_amdgpu_cs.c and src/amd/vulkan/radv_cs.c (radv)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spec import pm4


NOP_PAD = 0xFFFF1000  # PACKET3(PACKET3_NOP, 0x3FFF): gfx_v9_0.c `.nop`, Mesa PKT3_NOP_PAD


@dataclass(frozen=True)
class Amd:
    """One packet as AMD's code emits it."""

    source: str  # who emits it, and for which generation
    call: str  # the call and its arguments
    dwords: tuple[int, ...]
    build: object = None  # our builder call that must produce `dwords` (None: see `refused`, or the
    # every-field cases, which set values this device does not implement)
    fields: dict = field(default_factory=dict)  # field values our decoder must read
    listing: str = ""  # what the disassembler must say
    refused: str = ""  # a deliberate difference: why our builders refuse it (spec/gfx9.py)


ADDR = 0x12345678  # the fence/poll address of the worked examples


IB_VA = 0x0000_0012_3456_7800


FENCE_BITS = dict(tcl1_action_en=1, tc_action_en=1, tc_wb_action_en=1, tc_md_action_en=1)


AMD: dict[str, Amd] = {
    # ---- NOP and type-2
    "ring_nop": Amd(
        "amdgpu gfx_v9_0.c gfx ring `.nop = PACKET3(PACKET3_NOP, 0x3FFF)` (gfx9); Mesa sid.h PKT3_NOP_PAD",
        "amdgpu_ring_insert_nop(ring, 1)", (NOP_PAD,),
        lambda: pm4.nop(0), {}, "NOP  n_payload=0"),
    "insert_nop_5": Amd(
        "amdgpu gfx_v9_ring_insert_nop (gfx9, 2024): a counted NOP whose body is ring nops",
        "gfx_v9_ring_insert_nop(ring, 5)", (0xC0031000,) + (NOP_PAD,) * 4,
        lambda: pm4.encode_fields("NOP", {}, [NOP_PAD] * 4), {}, "NOP  n_payload=4"),
    "mesa_pad_1": Amd(
        "Mesa amdgpu_cs.cpp amdgpu_pad_gfx_compute_ib, remaining == 1 (gfx9: no type-2)",
        "PKT3(PKT3_NOP, -1, 0)", (NOP_PAD,), lambda: pm4.pad(1), {}, "NOP  n_payload=0"),
    "mesa_pad_3": Amd(
        "Mesa amdgpu_cs.cpp amdgpu_pad_gfx_compute_ib, remaining == 3",
        "PKT3(PKT3_NOP, 1, 0) + 2 body dwords", (0xC0011000, 0, 0), lambda: pm4.pad(3), {}, "NOP  n_payload=2"),
    "packet2": Amd(
        "amdgpu soc15d.h PACKET2(v) = CP_PACKET2 | PACKET2_PAD (bits 29:0)",
        "PACKET2(0x1234)", (0x80001234,), None, {}, "TYPE2 FILLER pad=0x1234"),
    # ---- RELEASE_MEM: the fence
    "fence_int": Amd(
        "amdgpu gfx_v9_0_ring_emit_fence (gfx9), flags AMDGPU_FENCE_FLAG_INT (the kernel fence)",
        "emit_fence(addr=0x12345678, seq=0x42, INT)",
        (0xC0064900, 0x00238514, 0x22000000, ADDR, 0, 0x42, 0, 0),
        lambda: pm4.release_mem(ADDR, 0x42, int_sel="SEND_INT_ON_CONFIRM", **FENCE_BITS),
        {"EVENT_TYPE": 0x14, "EVENT_INDEX": 5, "TCL1_VOL_ACTION_EN": 0, "TC_VOL_ACTION_EN": 0, "TC_WB_ACTION_EN": 1,
         "TCL1_ACTION_EN": 1, "TC_ACTION_EN": 1, "TC_NC_ACTION_EN": 0, "TC_WC_ACTION_EN": 0, "TC_MD_ACTION_EN": 1,
         "EXEC": 0, "DATA_SEL": 1, "INT_SEL": 2, "ADDR_LO": ADDR >> 2, "DATA_LO": 0x42},
        "RELEASE_MEM  tc_wb_action_en=1 tcl1_action_en=1 tc_action_en=1 tc_md_action_en=1 "
        "int_sel=SEND_INT_ON_CONFIRM addr=0x12345678 data=0x00000042"),
    "fence_int_64": Amd(
        "amdgpu gfx_v9_0_ring_emit_fence (gfx9), flags INT | 64BIT",
        "emit_fence(addr=0x12345678, seq=0x42, INT | 64BIT)",
        (0xC0064900, 0x00238514, 0x42000000, ADDR, 0, 0x42, 0, 0),
        lambda: pm4.release_mem(ADDR, 0x42, data_sel="DATA_64", int_sel="SEND_INT_ON_CONFIRM", **FENCE_BITS),
        {"DATA_SEL": 2, "INT_SEL": 2}),
    "fence_none": Amd(
        "amdgpu gfx_v9_0_ring_emit_fence (gfx9), no flags",
        "emit_fence(addr=0x12345678, seq=0x42, 0)",
        (0xC0064900, 0x00238514, 0x20000000, ADDR, 0, 0x42, 0, 0),
        lambda: pm4.release_mem(ADDR, 0x42, **FENCE_BITS), {"DATA_SEL": 1, "INT_SEL": 0}),
    "fence_tc_wb_only": Amd(
        "amdgpu gfx_v9_0_ring_emit_fence (gfx9), flags INT | TC_WB_ONLY",
        "emit_fence(addr=0x12345678, seq=0x42, INT | TC_WB_ONLY)",
        (0xC0064900, 0x00088514, 0x22000000, ADDR, 0, 0x42, 0, 0),
        lambda: pm4.release_mem(ADDR, 0x42, int_sel="SEND_INT_ON_CONFIRM", tc_wb_action_en=1, tc_nc_action_en=1),
        {"TC_WB_ACTION_EN": 1, "TC_NC_ACTION_EN": 1, "TC_WC_ACTION_EN": 0, "TC_MD_ACTION_EN": 0}),
    "fence_exec": Amd(
        "amdgpu gfx_v9_0_ring_emit_fence (gfx9, later kernels), flags INT | EXEC (trailing fence)",
        "emit_fence(addr=0x12345678, seq=0x42, INT | EXEC)",
        (0xC0064900, 0x10238514, 0x22000000, ADDR, 0, 0x42, 0, 0),
        lambda: pm4.release_mem(ADDR, 0x42, int_sel="SEND_INT_ON_CONFIRM", exec=1, **FENCE_BITS),
        {"EXEC": 1, "TCL1_VOL_ACTION_EN": 0, "TC_VOL_ACTION_EN": 0, "TC_NC_ACTION_EN": 0, "TC_WC_ACTION_EN": 0}),
    "radv_eop": Amd(
        "Mesa radv_cs.c radv_cs_emit_write_event_eop (GFX9): data with write confirm, no interrupt",
        "BOTTOM_OF_PIPE_TS, EOP_DATA_SEL_VALUE_32BIT, va=0x800000001000, fence=7",
        (0xC0064900, 0x00000528, 0x23000000, 0x00001000, 0x00008000, 7, 0, 0),
        lambda: pm4.release_mem(0x8000_0000_1000, 7, event_type="BOTTOM_OF_PIPE_TS",
                                int_sel="SEND_DATA_ON_CONFIRM"),
        {"EVENT_TYPE": 0x28, "INT_SEL": 3, "ADDR_HI": 0x8000},
        "RELEASE_MEM  event_type=BOTTOM_OF_PIPE_TS int_sel=SEND_DATA_ON_CONFIRM addr=0x800000001000 "
        "data=0x00000007"),
    # ---- INDIRECT_BUFFER
    "ib_gfx": Amd(
        "amdgpu gfx_v9_0_ring_emit_ib_gfx (gfx9): control = length_dw | vmid << 24, VALID left 0",
        "emit_ib_gfx(gpu_addr=0x1234567800, length_dw=0x40, vmid=3)",
        (0xC0023F00, 0x34567800, 0x00000012, 0x03000040),
        lambda: pm4.indirect_buffer(IB_VA, 0x40, vmid=3), {"VALID": 0, "VMID": 3, "IB_SIZE": 0x40, "IB_BASE_HI": 0x12},
        "INDIRECT_BUFFER  base=0x1234567800 size_dw=64 vmid=3"),
    "ib_gfx_preempt": Amd(
        "amdgpu gfx_v9_0_ring_emit_ib_gfx (gfx9, SR-IOV with AMDGPU_IB_FLAG_PREEMPT): PRE_ENB",
        "emit_ib_gfx(gpu_addr=0x1234567800, length_dw=0x40, vmid=3, PREEMPT)",
        (0xC0023F00, 0x34567800, 0x00000012, 0x03200040),
        lambda: pm4.indirect_buffer(IB_VA, 0x40, vmid=3, pre_enb=1), {"PRE_ENB": 1, "VALID": 0, "PRE_RESUME": 0}),
    "ib_compute": Amd(
        "amdgpu gfx_v9_0_ring_emit_ib_compute (gfx9): INDIRECT_BUFFER_VALID | length_dw | vmid << 24",
        "emit_ib_compute(gpu_addr=0x1234567800, length_dw=0x40, vmid=3)",
        (0xC0023F00, 0x34567800, 0x00000012, 0x03800040),
        lambda: pm4.indirect_buffer(IB_VA, 0x40, vmid=3, valid=1), {"CHAIN": 0, "VALID": 1, "VMID": 3, "PRIV": 0},
        "INDIRECT_BUFFER  base=0x1234567800 size_dw=64 valid=1 vmid=3"),
    "mesa_chain": Amd(
        "Mesa amdgpu_cs.cpp / radv_amdgpu_cs.c: S_3F2_CHAIN(1) | S_3F2_VALID(1) | size",
        "chain to va=0x1234567800, 0x100 dwords", (0xC0023F00, 0x34567800, 0x00000012, 0x00900100),
        lambda: pm4.indirect_buffer(IB_VA, 0x100, chain=1, valid=1),
        {"CHAIN": 1, "VALID": 1, "IB_SIZE": 0x100, "PRIV": 0},
        "INDIRECT_BUFFER  base=0x1234567800 size_dw=256 chain=1 valid=1"),
    "radv_ib2": Amd(
        "Mesa radv_amdgpu_cs.c radv_amdgpu_cs_execute_secondary: an IB2, control = size (VALID 0)",
        "IB2 at va=0x1234567800, 0x100 dwords", (0xC0023F00, 0x34567800, 0x00000012, 0x00000100),
        lambda: pm4.indirect_buffer(IB_VA, 0x100), {"CHAIN": 0, "VALID": 0}),
    # ---- WAIT_REG_MEM
    "pipeline_sync_gfx": Amd(
        "amdgpu gfx_v9_0_ring_emit_pipeline_sync, gfx ring (gfx9): ENGINE = PFP, memory, ==",
        "wait_reg_mem(usepfp=1, mem_space=1, addr=0x12345678, seq=0x42, mask=~0, inv=4)",
        (0xC0053C00, 0x00000113, ADDR, 0, 0x42, 0xFFFFFFFF, 4),
        lambda: pm4.wait_reg_mem(ADDR, 0x42, 0xFFFFFFFF, "EQ", engine="PFP", poll_interval=4),
        {"FUNCTION": 3, "MEM_SPACE": 1, "OPERATION": 0, "ENGINE": 1, "POLL_INTERVAL": 4},
        "WAIT_REG_MEM  function=EQ engine=PFP addr=0x12345678 ref=0x42 mask=0xffffffff poll_interval=4"),
    "pipeline_sync_compute": Amd(
        "amdgpu gfx_v9_0_ring_emit_pipeline_sync, compute ring (gfx9): ENGINE = ME",
        "wait_reg_mem(usepfp=0, mem_space=1, addr=0x12345678, seq=0x42, mask=~0, inv=4)",
        (0xC0053C00, 0x00000013, ADDR, 0, 0x42, 0xFFFFFFFF, 4),
        lambda: pm4.wait_reg_mem(ADDR, 0x42, 0xFFFFFFFF, "EQ", poll_interval=4), {"MEM_SPACE": 1, "ENGINE": 0}),
    # ---- WRITE_DATA
    "test_ib": Amd(
        "amdgpu gfx_v9_0_ring_test_ib (gfx9): WRITE_DATA_DST_SEL(5) | WR_CONFIRM",
        "test_ib(gpu_addr=0x12345678)", (0xC0033700, 0x00100500, ADDR, 0, 0xDEADBEEF),
        lambda: pm4.write_data(ADDR, [0xDEADBEEF], wr_confirm=1),
        {"DST_SEL": 5, "ADDR_INCR": 0, "WR_CONFIRM": 1, "CACHE_POLICY": 0, "ENGINE_SEL": 0},
        "WRITE_DATA  wr_confirm=1 addr=0x12345678 data=[0xdeadbeef]"),
    "wreg_gfx_to_memory": Amd(
        "amdgpu gfx_v9_0_ring_emit_wreg control for the gfx ring: WRITE_DATA_ENGINE_SEL(1) | WR_CONFIRM "
        "(DST_SEL 5, memory, in place of the register)",
        "WRITE_DATA, PFP, write confirm, memory", (0xC0033700, 0x40100500, ADDR, 0, 0xCAFE),
        lambda: pm4.write_data(ADDR, [0xCAFE], wr_confirm=1, engine_sel="PFP"), {"CACHE_POLICY": 0, "ENGINE_SEL": 1}),
    "wr_one_addr": Amd(
        "amdgpu soc15d.h WR_ONE_ADDR (1 << 16) / ADDR_INCR__DO_NOT_INCREMENT_ADDRESS, to memory",
        "WRITE_DATA of 3 dwords to one address", (0xC0053700, 0x00110500, ADDR, 0, 1, 2, 3),
        lambda: pm4.write_data(ADDR, [1, 2, 3], wr_confirm=1, addr_incr="NO_INCREMENT"), {"ADDR_INCR": 1},
        "WRITE_DATA  addr_incr=NO_INCREMENT wr_confirm=1 addr=0x12345678 data=[0x00000001, 0x00000002, "
        "0x00000003]"),
    # ---- DMA_DATA (gfx9 command dword: BYTE_COUNT 25:0, DIS_WC 31)
    "cp_dma_copy": Amd(
        "Mesa si_emit_cp_dma (GFX9), not the last packet: S_414_BYTE_COUNT_GFX9 | DISABLE_WR_CONFIRM_GFX9",
        "copy 4 KiB 0x100001000 -> 0x100002000", (0xC0055000, 0, 0x1000, 1, 0x2000, 1, 0x80001000),
        lambda: pm4.dma_data(0x1_0000_2000, 0x1_0000_1000, 0x1000, dis_wc=1),
        {"BYTE_COUNT": 0x1000, "DAIC": 0, "RAW_WAIT": 0, "DIS_WC": 1},
        "DMA_DATA  src=0x100001000 dst=0x100002000 byte_count=4096 dis_wc=1"),
    "cp_dma_copy_last": Amd(
        "Mesa si_emit_cp_dma (GFX9), the last packet: CP_SYNC",
        "copy 4 KiB, CP_SYNC", (0xC0055000, 0x80000000, 0x1000, 1, 0x2000, 1, 0x1000),
        lambda: pm4.dma_data(0x1_0000_2000, 0x1_0000_1000, 0x1000, cp_sync=1),
        {"ENGINE": 0, "CP_SYNC": 1, "DIS_WC": 0}),
    "cp_dma_fill": Amd(
        "Mesa si_emit_cp_dma (GFX9) clear: SRC_SEL DATA, 4 MiB (needs BYTE_COUNT 25:0)",
        "fill 4 MiB at 0x100400000 with 0xDEADBEEF", (0xC0055000, 0xC0000000, 0xDEADBEEF, 0, 0x00400000, 1,
                                                      0x00400000),
        lambda: pm4.dma_data(0x1_0040_0000, 0xDEADBEEF, 0x400000, src_sel="DATA", cp_sync=1),
        {"BYTE_COUNT": 0x400000, "DST_SEL": 0, "SRC_SEL": 2}),
    # ---- deliberate differences (spec/gfx9.py): decoded as AMD means them, refused
    "wreg_register": Amd(
        "amdgpu gfx_v9_0_write_data_to_reg (gfx9): DST_SEL(0), a register",
        "write_data_to_reg(eng_sel=0, wc=false, reg=0x1234, val=0xCAFE)",
        (0xC0033700, 0x00000000, 0x00001234, 0, 0xCAFE), None, {"DST_SEL": 0},
        refused="WRITE_DATA: dst_sel=REGISTER is not supported by this device"),
    "reg_wait": Amd(
        "amdgpu gfx_v9_0_ring_emit_reg_wait (gfx9): MEM_SPACE 0, a register",
        "wait_reg_mem(0, 0, 0, reg=0x1234, val=1, mask=1, inv=0x20)",
        (0xC0053C00, 0x00000003, 0x00001234, 0, 1, 1, 0x20), None, {"MEM_SPACE": 0},
        refused="WAIT_REG_MEM: mem_space=REGISTER is not supported by this device"),
    "gds_clear": Amd(
        "amdgpu gfx_v9_0_do_edc_gds_workarounds (gfx9): DMA_DATA into GDS",
        "CP_SYNC | DST_SEL(1) | SRC_SEL(2), RAW_WAIT | 0x10000", (0xC0055000, 0xC0100000, 0, 0, 0, 0, 0x40010000),
        None, {"DST_SEL": 1, "DAIC": 0, "RAW_WAIT": 1, "BYTE_COUNT": 0x10000},
        refused="DMA_DATA: dst_sel=GDS is not supported by this device"),
    # ---- every field non-zero: AMD's field macros with values of our choosing, so that a
    # field moved in spec/packets.py (which moves builders, decoder, RTL, model and checker
    # alike) reads wrong here; with the cases above, every two fields of one dword differ
    # in some case, so two fields swapped read wrong too (test_every_field_has_an_amd_reference)
    "every_field_write_data": Amd(
        "amdgpu soc15d.h WRITE_DATA_DST_SEL(5) | WR_ONE_ADDR | WR_CONFIRM | WRITE_DATA_CACHE_POLICY(1) | "
        "WRITE_DATA_ENGINE_SEL(1); PACKET3_WRITE_DATA__DST_MEM_ADDR_LO/HI",
        "WRITE_DATA of 0xCAFE to 0x9A12345678", (0xC0033700, 0x42110500, ADDR, 0x9A, 0xCAFE),
        lambda: pm4.write_data(0x9A_0000_0000 | ADDR, [0xCAFE], addr_incr="NO_INCREMENT", wr_confirm=1,
                               cache_policy=1, engine_sel="PFP"),
        {"DST_SEL": 5, "ADDR_INCR": 1, "WR_CONFIRM": 1, "CACHE_POLICY": 1, "ENGINE_SEL": 1,
         "ADDR_LO": ADDR >> 2, "ADDR_HI": 0x9A}),
    "every_field_ib": Amd(
        "amdgpu soc15d.h PACKET3_INDIRECT_BUFFER__IB_SIZE(0x40) | __CHAIN(1) | INDIRECT_BUFFER_PRE_ENB(1) | "
        "INDIRECT_BUFFER_VALID | __VMID(3) | INDIRECT_BUFFER_CACHE_POLICY(2) | INDIRECT_BUFFER_PRE_RESUME(1) | "
        "__PRIV(1)",
        "IB at 0x1234567800, 0x40 dwords", (0xC0023F00, 0x34567800, 0x00000012, 0xE3B00040),
        lambda: pm4.indirect_buffer(IB_VA, 0x40, chain=1, pre_enb=1, valid=1, vmid=3, cache_policy=2,
                                    pre_resume=1, priv=1),
        {"IB_BASE_LO": 0x34567800 >> 2, "IB_BASE_HI": 0x12, "IB_SIZE": 0x40, "CHAIN": 1, "PRE_ENB": 1, "VALID": 1,
         "VMID": 3, "CACHE_POLICY": 2, "PRE_RESUME": 1, "PRIV": 1}),
    "ib_gfx_resume": Amd(
        "amdgpu gfx_v9_0_ring_emit_ib_gfx (gfx9, MCBP), AMDGPU_IB_FLAG_PREEMPT on a preempted IB: "
        "PRE_ENB(1) | PRE_RESUME(1)",
        "emit_ib_gfx(gpu_addr=0x1234567800, length_dw=0x40, vmid=3, PREEMPT, PREEMPTED)",
        (0xC0023F00, 0x34567800, 0x00000012, 0x43200040),
        lambda: pm4.indirect_buffer(IB_VA, 0x40, vmid=3, pre_enb=1, pre_resume=1),
        {"IB_BASE_LO": 0x34567800 >> 2, "IB_BASE_HI": 0x12, "IB_SIZE": 0x40, "CHAIN": 0, "PRE_ENB": 1, "VALID": 0,
         "VMID": 3, "CACHE_POLICY": 0, "PRE_RESUME": 1, "PRIV": 0}),
    "every_field_wait_reg_mem": Amd(
        "amdgpu soc15d.h WAIT_REG_MEM_FUNCTION(3) | _MEM_SPACE(1) | _OPERATION(1) | _ENGINE(1) | "
        "PACKET3_WAIT_REG_MEM__CACHE_POLICY(2); __POLL_INTERVAL(4) | __OPTIMIZE_ACE_OFFLOAD_MODE(1)",
        "poll 0x9A12345678 for 0x42 under 0xFFFF00FF (OPERATION 1: not implemented here)",
        (0xC0053C00, 0x04000153, ADDR, 0x9A, 0x42, 0xFFFF00FF, 0x80000004), None,
        {"FUNCTION": 3, "MEM_SPACE": 1, "OPERATION": 1, "ENGINE": 1, "CACHE_POLICY": 2, "ADDR_LO": ADDR >> 2,
         "ADDR_HI": 0x9A, "REFERENCE": 0x42, "MASK": 0xFFFF00FF, "POLL_INTERVAL": 4, "OPTIMIZE_ACE_OFFLOAD_MODE": 1}),
    "every_field_release_mem": Amd(
        "amdgpu soc15d.h EVENT_TYPE(0x14) | EVENT_INDEX(5) | EOP_TCL1_VOL/TC_VOL/TC_WB/TCL1/TC/TC_NC/TC_MD_ACTION_EN | "
        "EOP_EXEC, DST_SEL(1) | INT_SEL(2) | DATA_SEL(2); kfd_pm4_headers_ai.h pm4_mec_release_mem: "
        "tc_wc_action_ena (bit 20), cache_policy (25), data_hi (ordinal 7), int_ctxid (ordinal 8)",
        "a 64-bit fence 0x1700000042 at 0x9A12345678 with interrupt, context id 7",
        (0xC0064900, 0x143BB514, 0x42010000, ADDR, 0x9A, 0x42, 0x17, 7),
        lambda: pm4.release_mem(0x9A_0000_0000 | ADDR, 0x17_0000_0042, data_sel="DATA_64", dst_sel="TC_L2",
                                int_sel="SEND_INT_ON_CONFIRM", int_ctxid=7, exec=1, cache_policy=2,
                                tcl1_vol_action_en=1, tc_vol_action_en=1, tc_wc_action_en=1, tc_nc_action_en=1,
                                **FENCE_BITS),
        {"EVENT_TYPE": 0x14, "EVENT_INDEX": 5, "TCL1_VOL_ACTION_EN": 1, "TC_VOL_ACTION_EN": 1, "TC_WB_ACTION_EN": 1,
         "TCL1_ACTION_EN": 1, "TC_ACTION_EN": 1, "TC_NC_ACTION_EN": 1, "TC_WC_ACTION_EN": 1, "TC_MD_ACTION_EN": 1,
         "CACHE_POLICY": 2, "EXEC": 1, "DST_SEL": 1, "INT_SEL": 2, "DATA_SEL": 2, "ADDR_LO": ADDR >> 2,
         "ADDR_HI": 0x9A, "DATA_LO": 0x42, "DATA_HI": 0x17, "INT_CTXID": 7}),
    "release_mem_l1": Amd(
        "Mesa sid.h EVENT_TCL1_VOL_ACTION_ENA | EVENT_TCL1_ACTION_ENA, DATA_SEL(1): the L1 actions alone",
        "fence 0x42 at 0x12345678", (0xC0064900, 0x00011514, 0x20000000, ADDR, 0, 0x42, 0, 0),
        lambda: pm4.release_mem(ADDR, 0x42, tcl1_vol_action_en=1, tcl1_action_en=1),
        {"TCL1_VOL_ACTION_EN": 1, "TC_VOL_ACTION_EN": 0, "TC_WB_ACTION_EN": 0, "TCL1_ACTION_EN": 1, "TC_ACTION_EN": 0,
         "TC_NC_ACTION_EN": 0, "TC_WC_ACTION_EN": 0, "TC_MD_ACTION_EN": 0}),
    "release_mem_l2": Amd(
        "Mesa sid.h EVENT_TC_VOL_ACTION_ENA | EVENT_TC_ACTION_ENA, DATA_SEL(1): the L2 actions alone",
        "fence 0x42 at 0x12345678", (0xC0064900, 0x00022514, 0x20000000, ADDR, 0, 0x42, 0, 0),
        lambda: pm4.release_mem(ADDR, 0x42, tc_vol_action_en=1, tc_action_en=1),
        {"TCL1_VOL_ACTION_EN": 0, "TC_VOL_ACTION_EN": 1, "TC_WB_ACTION_EN": 0, "TCL1_ACTION_EN": 0, "TC_ACTION_EN": 1,
         "TC_NC_ACTION_EN": 0, "TC_WC_ACTION_EN": 0, "TC_MD_ACTION_EN": 0}),
    "every_field_dma_data": Amd(
        "amdgpu soc15d.h PACKET3_DMA_DATA_ENGINE(1) | _SRC_CACHE_POLICY(1) | _DST_SEL(3) | _DST_CACHE_POLICY(2) | "
        "_SRC_SEL(3) | _CP_SYNC; command BYTE_COUNT | _CMD_SAS | _DAS | _SAIC | _DAIC | _RAW_WAIT | "
        "DIS_WC (Mesa sid.h S_415_DISABLE_WR_CONFIRM_GFX9)",
        "64 bytes 0x100001000 -> 0x100002000 through L2, register spaces (not implemented here)",
        (0xC0055000, 0xE4302001, 0x1000, 1, 0x2000, 1, 0xFC000040), None,
        {"ENGINE": 1, "SRC_CACHE_POLICY": 1, "DST_SEL": 3, "DST_CACHE_POLICY": 2, "SRC_SEL": 3, "CP_SYNC": 1,
         "SRC_ADDR_LO": 0x1000, "SRC_ADDR_HI": 1, "DST_ADDR_LO": 0x2000, "DST_ADDR_HI": 1, "BYTE_COUNT": 0x40,
         "SAS": 1, "DAS": 1, "SAIC": 1, "DAIC": 1, "RAW_WAIT": 1, "DIS_WC": 1}),
    "dma_data_source_side": Amd(
        "amdgpu soc15d.h PACKET3_DMA_DATA_CMD_SAS | PACKET3_DMA_DATA_CMD_SAIC: the source's bits alone",
        "64 bytes from one register", (0xC0055000, 0, 0x1000, 0, 0x2000, 0, 0x14000040), None,
        {"SAS": 1, "DAS": 0, "SAIC": 1, "DAIC": 0, "RAW_WAIT": 0, "DIS_WC": 0, "BYTE_COUNT": 0x40}),
    "dma_data_address_spaces": Amd(
        "amdgpu soc15d.h PACKET3_DMA_DATA_CMD_SAS | PACKET3_DMA_DATA_CMD_DAS: both register spaces",
        "64 bytes register to register", (0xC0055000, 0, 0x1000, 0, 0x2000, 0, 0x0C000040), None,
        {"SAS": 1, "DAS": 1, "SAIC": 0, "DAIC": 0, "RAW_WAIT": 0, "DIS_WC": 0, "BYTE_COUNT": 0x40}),
}
