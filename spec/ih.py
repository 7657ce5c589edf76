"""The interrupt-handler (IH) ring entry: the single source of its layout and source ids.

The hardware appends one 32-byte entry (8 dwords) per interrupt to the IH ring; the KMD's
interrupt handler walks the ring from IH_RPTR to IH_WPTR (both in bytes, 32 per entry).
The layout is AMD's soc15 one, as amdgpu's vega10_ih / amdgpu_ih_decode_iv_helper reads
it: dword 0 client, source, ring and VMID; dwords 1-2 the 48-bit timestamp; dword 3 the
PASID; dwords 4-7 the source data (amdkfd reads the context id from dword 4). Client and
source ids are AMD's: the CP is client GRBM_CP (0x14), its end-of-pipe interrupt source
181, its bad-opcode error source 183 (irqsrcs_gfx_9_0.h); a VM fault is client UTCL2
(0x1b), source 0 (UTCL2_1_0__SRCID__FAULT, as gmc_v9_0 registers it), its source data as
gmc_v9_0_process_interrupt reads it (spec/vm.py).

The RTL (rtl/cp/ih.py), the KMD's handler (kmd_model/irq/ih.py) and the reference model all
read this table; docs/hardware.md shows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

ENTRY_DWORDS = 8
ENTRY_BYTES = ENTRY_DWORDS * 4
MIN_LOG2_DWORDS = 3
"""IH_SIZE.LOG2_DWORDS below this (a ring smaller than one entry) acts as this: one entry."""


def ring_bytes(log2_dwords: int) -> int:
    """Bytes of the IH ring for an IH_SIZE.LOG2_DWORDS value."""
    return 4 << max(MIN_LOG2_DWORDS, log2_dwords)


class Client(IntEnum):
    """Who raised it (dword 0, CLIENT_ID): AMD's soc15_ih_clientid values."""

    SDMA0 = 0x08  # the copy engine (SOC15_IH_CLIENTID_SDMA0)
    GRBM_CP = 0x14  # the command processor
    UTCL2 = 0x1B  # the gfx hub's translation cache: VM faults of the CP and its DMA engine


class Source(IntEnum):
    """What raised it (dword 0, SOURCE_ID): AMD's source ids, each of one client (CLIENT)."""

    EOP = 181  # GRBM_CP's CP_EOP_INTERRUPT: a RELEASE_MEM with an interrupt; a fence was written
    CP_ERROR = 183  # GRBM_CP's CP_BAD_OPCODE_ERROR: the CP stopped with an error (CP_ERROR_* hold it)
    VM_FAULT = 0  # UTCL2's FAULT: the CP stopped on a VM fault (VM_FAULT_* hold it)
    SDMA_TRAP = 224  # SDMA0's SDMA_TRAP (irqsrcs_sdma0_4_0.h): a TRAP packet
    SDMA_ERROR = 241  # SDMA0's instruction error (amdgpu's illegal_inst_irq on cik/vi): the queue stopped
    SDMA_POLL_TIMEOUT = 246  # SDMA0's POLL_TIMEOUT: a POLL_REGMEM ran out of retries


CLIENT = {Source.EOP: Client.GRBM_CP, Source.CP_ERROR: Client.GRBM_CP, Source.VM_FAULT: Client.UTCL2,
          Source.SDMA_TRAP: Client.SDMA0, Source.SDMA_ERROR: Client.SDMA0, Source.SDMA_POLL_TIMEOUT: Client.SDMA0}
"""The client each source belongs to (dword 0, CLIENT_ID)."""


def source_of(client: int, source: int) -> Source | None:
    """The Source an entry's (CLIENT_ID, SOURCE_ID) names, or None for one this device never raises."""
    for s, c in CLIENT.items():
        if c == client and s == source:
            return s
    return None


@dataclass(frozen=True)
class IhField:
    name: str
    dword: int
    lsb: int
    width: int
    desc: str

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lsb

    def get(self, dwords) -> int:
        return (int(dwords[self.dword]) >> self.lsb) & ((1 << self.width) - 1)


FIELDS: tuple[IhField, ...] = (
    IhField("CLIENT_ID", 0, 0, 8, "Which block raised it (AMD soc15 client id: the CP is GRBM_CP, 0x14; VM faults UTCL2, 0x1b)."),
    IhField("SOURCE_ID", 0, 8, 8, "What raised it (AMD source id; the sources are listed below)."),
    IhField("RING_ID", 0, 16, 8, "Ring the source belongs to (AMD: me, pipe, queue; 0: the gfx ring): the CP queue, 0 (RB_*) or 1 (CP_HQD1_*), for every CP source (EOP, CP_ERROR, VM_FAULT); 0 for the SDMA's."),
    IhField("VMID", 0, 24, 4, "VMID of the work: the IB's for a packet of an IB, the faulting access's for a VM fault; 0 for the kernel ring."),
    IhField("VMID_SRC", 0, 31, 1, "Which hub the VMID belongs to (AMD: 0 gfxhub); 0."),
    IhField("TIMESTAMP_LO", 1, 0, 32, "GPU clock when the entry was written, bits 31:0."),
    IhField("TIMESTAMP_HI", 2, 0, 16, "GPU clock, bits 47:32."),
    IhField("TIMESTAMP_SRC", 2, 31, 1, "Which clock (AMD); 0."),
    IhField("PASID", 3, 0, 16, "Process address space id (AMD); 0: the KMD maps VMIDs to its VMs itself."),
    IhField("DATA0", 4, 0, 32, "Source data 0 (AMD src_data[0], CONTEXT_ID0)."),
    IhField("DATA1", 5, 0, 32, "Source data 1."),
    IhField("DATA2", 6, 0, 32, "Source data 2."),
    IhField("DATA3", 7, 0, 32, "Source data 3."),
)

BY_NAME = {f.name: f for f in FIELDS}

DATA_FIELDS = ("DATA0", "DATA1", "DATA2", "DATA3")
SOURCE_DOC = {
    Source.EOP: "a RELEASE_MEM with INT_SEL SEND_INT or SEND_INT_ON_CONFIRM, after its data write",
    Source.CP_ERROR: "the CP stopped with an error (written once, when the error latches)",
    Source.VM_FAULT: "the CP stopped with CP_ERROR VM_FAULT (written instead of the CP_ERROR entry)",
    Source.SDMA_TRAP: "an SDMA TRAP packet, while SDMA_CNTL.TRAP_ENABLE (amdgpu's sdma fence interrupt)",
    Source.SDMA_ERROR: "the SDMA queue stopped with an error, a VM fault of its own included (written once)",
    Source.SDMA_POLL_TIMEOUT: "an SDMA POLL_REGMEM with a finite RETRY_COUNT gave up; the queue moved on",
}
SOURCE_DATA = {
    Source.EOP: ("the packet's INT_CTXID (amdkfd's context id)", "its DATA_LO", "its DATA_HI",
                 "its ADDR_LO dword, all 32 bits"),
    Source.CP_ERROR: ("the stopped queue's error register (CODE, LEVEL, OPCODE): CP_ERROR for queue 0, "
                      "CP_HQD1_ERROR for queue 1 (RING_ID)", "its ERROR_ADDR_LO (CP_ERROR_ADDR_LO, CP_HQD1_ERROR_ADDR_LO)",
                      "its ERROR_ADDR_HI", "its ERROR_OFFSET"),
    Source.VM_FAULT: ("the faulting address's bits 43:12 (amdgpu's src_data[0])",
                      "bits 3:0: the address's bits 47:44; 0x40 READ, 0x20 WRITE, 0x10 EXE (AMDGPU_GMC9_FAULT_SOURCE_DATA_*)",
                      "this fault's VMID, ACCESS, LEVEL and CAUSE as VM_FAULT_STATUS packs them (the register itself "
                      "shows queue 0's fault while both queues are stopped by one)",
                      "the stopped queue's error register, CP_ERROR or CP_HQD1_ERROR (LEVEL and OPCODE of the packet)"),
    Source.SDMA_TRAP: ("the TRAP's INT_CONTEXT (amdkfd's context_id0 & 0xfffffff)", "0", "0", "0"),
    Source.SDMA_ERROR: ("the SDMA_ERROR register (CODE, LEVEL, OP, SUB_OP)", "SDMA_ERROR_ADDR_LO",
                        "SDMA_ERROR_ADDR_HI", "SDMA_ERROR_OFFSET"),
    Source.SDMA_POLL_TIMEOUT: ("the polled address, bits 31:0", "bits 47:32 (the bits above 47 dropped, 0)", "the dword last read", "0"),
}
"""What each source puts in DATA0..DATA3 (docs/hardware.md shows this table)."""


def encode(**values: int) -> list[int]:
    """An entry's 8 dwords from field values (missing fields are 0)."""
    dw = [0] * ENTRY_DWORDS
    for name, v in values.items():
        f = BY_NAME[name]
        if not 0 <= v < 1 << f.width:
            raise ValueError(f"IH {name}: {v:#x} does not fit in {f.width} bits")
        dw[f.dword] |= v << f.lsb
    return dw


def decode(dwords) -> dict[str, int]:
    """Field values of one entry (8 dwords)."""
    if len(dwords) != ENTRY_DWORDS:
        raise ValueError(f"an IH entry is {ENTRY_DWORDS} dwords, not {len(dwords)}")
    return {f.name: f.get(dwords) for f in FIELDS}
