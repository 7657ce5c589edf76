"""Where this front end deliberately differs from AMD gfx9: the single list, with reasons.

The packet table (spec/packets.py), the register map (spec/regs.rdl) and the IH entry
(spec/ih.py) follow gfx9 (Vega, soc15) field for field: the encodings amdgpu's
gfx_v9_0.c, vega10_ih.c and Mesa's winsys emit run here as they do on AMD's CP
(tests/spec/amd/amd_dwords.py holds those dwords, tests/spec/amd/test_amd_conformance.py runs them). What remains different is listed
here, once; docs/packets.md and docs/hardware.md show this table (`make gen`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Difference:
    what: str  # the packet, field or register
    gfx9: str  # what AMD's gfx9 CP does
    here: str  # what this front end does
    why: str


DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        "SDMA queue reset (SDMA_CNTL.QUEUE_RESET)",
        "vega10's SDMA has no per-queue reset: sdma_v4_0 has no ring reset and its soft reset is "
        "a todo, so an SDMA hang is a full GPU reset; per-queue SDMA reset arrives with SDMA 4.4.2 "
        "(MI300) and 5.x, through the SMU.",
        "One register bit resets the SDMA queue alone; the CP keeps running.",
        "Issue 16 asks for recovery that does not take the whole device down; one bit is the "
        "smallest hardware that gives the driver that ladder step."),
    Difference(
        "CP hardware queues (CP_HQD1_*, CP_QUEUE_PRIORITY, CP_QUEUE_RESET)",
        "Many HQDs per pipe, programmed through CP_HQD_* registers behind an SRBM queue select "
        "(or mapped by the KIQ/MES), with CP_HQD_PIPE_PRIORITY / QUEUE_PRIORITY and mid-IB "
        "preemption (PREEMPT, CE/DE save areas); a queue reset through CP_HQD_DEQUEUE_REQUEST.",
        "Two queues with fixed register blocks; the CP switches between them at packet boundaries "
        "by CP_QUEUE_PRIORITY; CP_QUEUE_RESET.Qn resets one queue.",
        "The smallest form that gives a high-priority queue (and a per-queue reset) real meaning; "
        "a packet boundary is this CP's only point where no state is half done."),
    Difference(
        "A ring's base, size and pointer write-back address written while it runs (RB_BASE_*, "
        "RB_SIZE, RB_RPTR_ADDR_*, CP_HQD1_RB_*, SDMA_RB_BASE_*, SDMA_RB_CNTL.RB_SIZE, "
        "SDMA_RB_RPTR_ADDR_*, IH_BASE_*, IH_SIZE, IH_WPTR_ADDR_*)",
        "amdgpu programs them with the ring inactive (gfx_v9_0_cp_gfx_resume, "
        "sdma_v4_0_gfx_resume, vega10_ih_enable_ring); what the hardware does with such a write "
        "while the ring runs is not documented.",
        "Ignored while the ring's enable is set (as it was before the write): the register keeps "
        "and reads back its value.",
        "A behaviour contract with no undefined corner a careless driver can fall into; of the "
        "well-defined rules the cheapest (one term in each register's write enable, no copy of "
        "the registers latched at enable), and it keeps the registers naming the ring run."),
    Difference(
        "SDMA errors and their IH entries",
        "Separate sources per cause (illegal instruction, page fault 221, VM hole 242, doorbell "
        "invalid 244, poll timeout 246 ...), details in SDMA status registers; an illegal "
        "instruction leaves the engine to the driver's timeout.",
        "One source, SDMA_ERROR = 241, for every error that stops the queue; SDMA_ERROR, "
        "SDMA_ERROR_ADDR and SDMA_ERROR_OFFSET say which, with the CP's error codes; POLL_TIMEOUT "
        "is 246 as AMD's.",
        "The same precise stop the CP gives; AMD's illegal-instruction source id on vega10 is not "
        "documented (241 is the one cik/vi register for it)."),
    Difference(
        "SDMA pointers and registers",
        "64-bit rptr/wptr (bytes), RB_CNTL with swap and timer fields, a wptr poll address, "
        "doorbell offsets in the BIF aperture, a page queue and RLC queues.",
        "32-bit free-running byte pointers, one queue, its doorbell a register (SDMA_DOORBELL).",
        "The units are AMD's so amdgpu's ring code carries over; one queue is what the copy "
        "engine's users (the KMD's DMA ring) need."),

    Difference(
        "Register destinations: WRITE_DATA DST_SEL REGISTER, WAIT_REG_MEM MEM_SPACE REGISTER and "
        "OPERATION WR_WAIT_WR_REG",
        "Write or poll a GPU register by its dword offset (amdgpu's emit_wreg, emit_reg_wait, "
        "HDP flush).",
        "Refused: UNSUPPORTED.",
        "The CP is the only block here and its registers belong to the driver's MMIO path; "
        "a ring that could write them could reprogram its own ring. Memory writes and polls "
        "are what a user's command stream needs."),
    Difference(
        "Other engines and destinations: ENGINE_SEL CE/DE, DST_SEL GDS, DMA_DATA DST_SEL "
        "NOWHERE, SAS/DAS REGISTER, SRC_SEL GDS; RELEASE_MEM DATA_SEL SYS_COUNTER/GDS, "
        "INT_SEL 4-6, DST_SEL queue pointers, EVENT_INDEX SHADER_DONE",
        "The constant and draw engines, the global data share, MEC queue registers, shaders.",
        "Refused: UNSUPPORTED.",
        "None of these blocks exists in this front end; refusing is precise where accepting "
        "would silently do something else."),
    Difference(
        "Cache controls: RELEASE_MEM's *_ACTION_EN bits, every CACHE_POLICY, WRITE_DATA "
        "DST_SEL MEMORY_SYNC / TC_L2, RELEASE_MEM DST_SEL TC_L2, DMA_DATA *_TC_L2, DIS_WC",
        "Flush, invalidate or write back caches; route through L2; skip a write confirm.",
        "Accepted and named; no effect.",
        "There is no cache: every write goes to memory and is confirmed before the packet "
        "ends, which is what the flushes and confirms exist to achieve."),
    Difference(
        "ENGINE / ENGINE_SEL = PFP",
        "The prefetch parser executes the packet, so nothing after it is fetched until it "
        "completes.",
        "The same as ME.",
        "One engine fetches, parses and executes in order; it never runs ahead of a wait."),
    Difference(
        "INDIRECT_BUFFER VALID, PRE_ENB, PRE_RESUME, PRIV",
        "VALID is set by compute rings and Mesa's chains and left 0 by the gfx ring; the "
        "others control preemption and privilege.",
        "Accepted and ignored: the IB runs either way.",
        "No source says the CP skips a VALID = 0 IB (amdgpu's gfx ring relies on it running); "
        "this CP has no preemption and no privileged IBs."),
    Difference(
        "INDIRECT_BUFFER VMID",
        "The ring's IB packet names the VMID its IB runs with (amdgpu's emit_ib: vmid << 24).",
        "The same from the kernel ring; in an IB (IB2, CHAIN) the field is ignored: the IB "
        "keeps the VMID its ring packet named.",
        "Only the kernel may choose page tables: a client's IB naming another VMID would "
        "reach another client's memory."),
    Difference(
        "IB_BASE_LO bits 1:0",
        "A byte-swap code (amdgpu sets 2 on big-endian hosts).",
        "Alignment bits: non-zero is IB_MISALIGNED.",
        "This front end is little-endian only; a set bit is a driver bug worth reporting."),
    Difference(
        "WRITE_DATA ADDR_INCR = NO_INCREMENT",
        "Each data dword is written to addr in turn.",
        "Only the last data dword is written to addr.",
        "Memory cannot tell N writes of one address from the last of them; one write costs "
        "one bus transaction instead of N."),
    Difference(
        "DMA_DATA BYTE_COUNT",
        "Up to 2^26 - 1 bytes.",
        "Up to 2^CAPS.DMA_MAX_LOG2 bytes (2^20 in the default build); more is DMA_BYTE_COUNT.",
        "The engine's byte counter is sized for the FPGA build; Mesa splits copies into "
        "packets of at most 2 MiB anyway."),
    Difference(
        "Addresses",
        "40-bit ring and IH bases, 48-bit virtual addresses.",
        "48-bit addresses, virtual under a translated VMID (12 + 9 × VM_CAPS.LEVELS bits: 1 GiB "
        "in the default build), physical otherwise; address bits above 47 answer BUS_DECERR "
        "(an IB_BASE_HI beyond the bus too), the DMA engine drops them.",
        "The bus has 48 address bits; two levels of tables map more than the memory a "
        "simulation has, and every level is one more read per TLB miss."),
    Difference(
        "Page tables",
        "Four levels (PDB2, PDB1, PDB0, PTB), block and fragment sizes (PDE BFS, PTE FRAG), "
        "MTYPE, PRT, translate-further; VM_CONTEXT*_PAGE_TABLE_START/END_ADDR bound the range.",
        "VM_CAPS.LEVELS levels of 512 entries (2), 4 KiB pages; a directory entry with "
        "PDE_PTE is a huge page (2 MiB); FRAG, MTYPE, PRT, TF, SYSTEM and SNOOPED are ignored; "
        "the range is what the tables reach.",
        "The entries are amdgpu's (bits 0-6, 47:12, PDE_PTE 54) so its page-table code reads "
        "right; the rest tunes caches and the L2 TLB this MMU does not have."),
    Difference(
        "VM faults",
        "UTCL2 reports the fault (client 0x1b, source 0) and VM_L2_PROTECTION_FAULT_STATUS "
        "holds it; the access is retried or goes to a dummy page, and the job runs on unless "
        "amdgpu's vm_fault_stop is set.",
        "The same IH entry (gmc_v9's src_data), and the job stops: CP_ERROR VM_FAULT at the "
        "access that faulted, VM_FAULT_STATUS/ADDR; the KMD resets as after any CP error.",
        "A precise stop names the packet and address, and nothing a faulting job does "
        "afterwards can matter."),
    Difference(
        "TLB invalidation",
        "18 invalidation engines (VM_INVALIDATE_ENG*_REQ/ACK, flush types, address ranges), "
        "often from the ring (emit_vm_flush writes them with WRITE_DATA).",
        "One: VM_INVALIDATE_REQ (a VMID mask, one page or all), VM_INVALIDATE_ACK; from the "
        "driver's MMIO only.",
        "The ring cannot write registers here (see the first row); the KMD orders its "
        "flushes with fences itself."),
    Difference(
        "VMID 0",
        "The kernel's context: the GART and the system aperture, translated like the others.",
        "A VMID whose VM_CONTEXT_CNTL.ENABLE is clear is not translated; the KMD leaves VMID 0 "
        "so (ring, IH ring, fences, write-back are physical).",
        "The kernel's own memory needs no protection from itself, and its fetches and "
        "writes then cost no walk."),
    Difference(
        "Errors and their IH entries",
        "Several sources: bad opcode 183, reserved bits 180, privileged register 184, "
        "WAIT_REG_MEM poll timeout 192; the details in CP status registers.",
        "One source, CP_ERROR = 183 (AMD's CP_BAD_OPCODE_ERROR), for every error; CP_ERROR, "
        "CP_ERROR_ADDR and CP_ERROR_OFFSET say which, and DATA0-3 carry them. The CP ignores "
        "reserved bits (the KMD's checker refuses them); a wait never times out (the KMD's "
        "job timeout catches it).",
        "One precise error register is easier to read than AMD's scattered status; the "
        "source id a driver dispatches on is AMD's."),
    Difference(
        "The EOP IH entry's source data",
        "src_data[0] is the context id; what the other dwords hold is not documented.",
        "DATA0 INT_CTXID, DATA1 DATA_LO, DATA2 DATA_HI, DATA3 the ADDR_LO dword.",
        "The fence value and address in the entry let a handler (and a learner) see which "
        "fence fired without reading memory."),
    Difference(
        "IH_WPTR bit 0, IH ring pointer width",
        "IH_RB_WPTR bit 0 flags an overflow; offsets are 18 bits (at most 256 KiB).",
        "IH_WPTR is a free-running 32-bit byte count; an overflow sets "
        "INT_STATUS.IH_OVERFLOW and drops the entry.",
        "Free-running pointers as the command ring has; the overflow is an interrupt "
        "status bit like the others."),
    Difference(
        "Ring control registers",
        "CP_RB0_CNTL holds RB_BUFSZ with RB_BLKSZ and other fields; wptr is 64 bits, written "
        "by a 64-bit doorbell.",
        "RB_SIZE.LOG2_QWORDS is RB_BUFSZ alone; RB_CNTL holds ENABLE and RPTR_WB; wptr and "
        "the doorbell are 32 bits, free running.",
        "Only the fields this front end acts on; the units (base >> 8, log2 qwords, dword "
        "pointers) are AMD's."),
    Difference(
        "Packets",
        "Hundreds of opcodes (SET_*_REG, DRAW_*, DISPATCH_*, EVENT_WRITE, ...).",
        "NOP, WRITE_DATA, INDIRECT_BUFFER, WAIT_REG_MEM, RELEASE_MEM, DMA_DATA; any other "
        "opcode is ILLEGAL_OPCODE.",
        "A command-processor front end without shaders: the packets a driver needs to move "
        "data, wait and signal."),
)

BEGIN = "<!-- BEGIN generated from spec/gfx9.py by `make gen`: do not edit -->"
END = "<!-- END generated from spec/gfx9.py -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_table() -> str:
    """The differences as one markdown table, between its markers."""
    out = [BEGIN, "", "| what | gfx9 | here | why |", "|---|---|---|---|"]
    out += [f"| {_cell(d.what)} | {_cell(d.gfx9)} | {_cell(d.here)} | {_cell(d.why)} |" for d in DIFFERENCES]
    out += ["", END]
    return "\n".join(out)
