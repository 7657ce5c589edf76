"""Turning the CP's error latches into a sentence a person can act on.

CP_ERROR (CODE, LEVEL, OPCODE), CP_ERROR_ADDR and CP_ERROR_OFFSET, or the same values
from a CP_ERROR IH entry, become "illegal opcode 0x7b at IB+0x40 (0x201040),
context 3": what went wrong, in which packet (named from spec/packets.py), where (the
ring or an IB level, byte offset of the packet header) and whose work it was.
"""

from __future__ import annotations

from dataclasses import dataclass

from spec import packets
from spec import vm as vm_spec
from spec.sdma import packets as sdma_packets

from .. import regs

CpError = regs.CpError
IbLevel = regs.IbLevel

LEVEL_TEXT = {IbLevel.RING: "ring", IbLevel.IB1: "IB", IbLevel.IB2: "IB2"}


@dataclass(frozen=True)
class CpErrorState:
    """The raw latches."""

    code: int
    level: int
    opcode: int
    addr: int
    offset_dw: int
    vm_status: int | None = 0  # VM_FAULT_STATUS, for CODE = VM_FAULT; None: not latched (SDMA)
    # why vm_status is None, when it is not the SDMA's (CP queue 1's fault while queue 0's held
    # the shared VM_FAULT_STATUS)
    unlatched: str = ""
    # the SDMA's: OPCODE is SDMA_ERROR.OP and names a packet of spec/sdma/packets.py with
    # SUB_OP (it was looked up in the CP's table: "bad COUNT in opcode 0x0" for the SDMA's
    # NOP, "unsupported field value in opcode 0x1" for a COPY_LINEAR, and an illegal OP 0
    # with a SUB_OP called "illegal packet header (type 0/1)", a PM4 header the SDMA has not)
    sdma: bool = False
    sub_op: int = 0

    @classmethod
    def from_regs(cls, value: int, addr: int, offset: int, vm_status: int | None = 0) -> "CpErrorState":
        f = regs.CP_ERROR.decode(value)
        return cls(f["CODE"], f["LEVEL"], f["OPCODE"], addr, offset, vm_status)

    @property
    def code_name(self) -> str:
        try:
            return CpError(self.code).name
        except ValueError:
            return f"CODE_{self.code}"

    @property
    def level_name(self) -> str:
        try:
            return IbLevel(self.level).name
        except ValueError:
            return f"LEVEL_{self.level}"

    @property
    def opcode_name(self) -> str | None:
        if self.sdma:
            if (self.opcode, self.sub_op) == (0, 0) and self.code not in (CpError.BAD_COUNT, CpError.UNSUPPORTED):
                return None  # (OP 0: a NOP, or a header that was not read: a fault, a bus or doorbell error)
            s = sdma_packets.by_op.get((self.opcode, self.sub_op))
            return s.name if s else None
        p = packets.by_opcode.get(self.opcode)
        return p.name if p else None

    def what(self, ib_levels: int | None = None, vmid: int | None = None) -> str:
        """The error itself, without place or owner. `vmid`: the VMID the job in hand ran with,
        for an SDMA VM fault (the engine latches none; the driver wrote it in the job's IB
        packet)."""
        sub = f" SUB_OP {self.sub_op:#x}" if self.sdma and self.sub_op else ""
        name = self.opcode_name or f"opcode {self.opcode:#x}{sub}"
        code = self.code
        if code == CpError.ILLEGAL_OPCODE:
            if self.sdma:
                return f"illegal opcode {self.opcode:#x}{sub}"
            return f"illegal opcode {self.opcode:#x}" if self.opcode else "illegal packet header (type 0/1)"
        if code == CpError.BAD_COUNT:
            return f"bad COUNT in {name}"
        if code == CpError.IB_NESTING:
            if self.sdma:  # (CAPS.IB_LEVELS is the CP's)
                return "INDIRECT_BUFFER inside an SDMA IB (SDMA IBs do not nest)"
            deep = f" {ib_levels}" if ib_levels is not None else ""
            return f"INDIRECT_BUFFER nested deeper than the{deep} IB levels"
        if code == CpError.IB_SIZE_ZERO:
            return "INDIRECT_BUFFER with IB_SIZE 0"
        if code == CpError.IB_MISALIGNED:  # (the SDMA's base: bits 4:0, the CP's: 1:0)
            return f"INDIRECT_BUFFER base not {'32-byte' if self.sdma else 'dword'} aligned"
        if code in (CpError.BUS_SLVERR, CpError.BUS_DECERR):
            # OPCODE is 0 for a bus error at a header not yet read (no packet), the packet's otherwise
            pkt = f" in {self.opcode_name}" if self.opcode_name else ""
            # The CP latches the bus's 48 bits, and an address at or above 2^48 is DECERR at
            # its low 48 bits (docs/hardware.md), which may be a mapped address: say so
            cut = " (its low 48 bits)" if code == CpError.BUS_DECERR else ""
            return f"bus error {self.code_name[4:]} at address {self.addr:#x}{cut}{pkt}"
        if code == CpError.DOORBELL_BACKWARDS:
            return f"doorbell moved wptr backwards to {self.addr:#x}"
        if code == CpError.DOORBELL_OVERFLOW:
            return f"doorbell wptr {self.addr:#x} more than the ring size ahead of rptr"
        if code == CpError.FENCE_MISALIGNED:
            return f"misaligned address in {name}"
        if code == CpError.DMA_BYTE_COUNT:
            return "DMA_DATA byte count over the engine's limit"
        if code == CpError.UNSUPPORTED:
            return f"unsupported field value in {name}"
        if code == CpError.VM_FAULT and self.vm_status is None:  # (a status of 0 would read as a fault of VMID 0)
            pkt = f" in {self.opcode_name}" if self.opcode_name else ""
            if vmid:  # the VMID INFO VM_FAULT reports too
                why = self.unlatched or "the SDMA engine latches no access or cause"
                return f"VM fault at {self.addr:#x}{pkt} (VMID {vmid}, its job's: {why})"
            return f"VM fault at {self.addr:#x}{pkt} (the SDMA engine latches no access, VMID or cause)"
        if code == CpError.VM_FAULT:
            f = regs.VM_FAULT_STATUS.decode(self.vm_status)
            why = {vm_spec.Cause.INVALID: f"no valid entry at page-table level {f['LEVEL']}",
                   vm_spec.Cause.PERMISSION: "permission missing",
                   vm_spec.Cause.RANGE: "beyond the page tables",
                   vm_spec.Cause.WALK_ERROR: f"page-table read failed at level {f['LEVEL']}"}[f["CAUSE"]]
            pkt = f" in {self.opcode_name}" if self.opcode_name else ""
            return (f"VM fault: {vm_spec.Access(f['ACCESS']).name} at {self.addr:#x}{pkt} "
                    f"(VMID {f['VMID']}, {why})")
        return f"CP error {self.code_name} in {name}"

    def where(self) -> str:
        """"IB+0x40 (0x201040)": level, byte offset of the packet header, address."""
        lvl = LEVEL_TEXT.get(self.level, self.level_name)
        doorbell = self.code in (CpError.DOORBELL_BACKWARDS, CpError.DOORBELL_OVERFLOW)
        bus = self.code in (CpError.BUS_SLVERR, CpError.BUS_DECERR, CpError.VM_FAULT)
        s = f"{lvl}+{4 * self.offset_dw:#x}"
        if not (doorbell or bus):
            s += f" ({self.addr:#x})"
        return s
