"""The reference model's SDMA copy engine: one queue with its own ring, doorbell, rptr
write-back, trap interrupt, error state and reset (docs/hardware.md, "The SDMA copy engine").

It runs inside testbench/refmodel/'s RefModel, whose memory, MMU, DMA datapath and IH
writer it uses (the engine owns none of them, as AMD's SDMA shares the memory hub and the
IH). Packets come from spec/sdma/packets.py; the checks, in the engine's order:

 1. ILLEGAL_OPCODE   (OP, SUB_OP) not in the table
 2. BAD_COUNT        the packet (its length from the table, NOP's or WRITE_LINEAR's COUNT)
                     runs past the ring's written space or the IB's end
 3. UNSUPPORTED      a closed-enum field holds a value the engine does not implement
 4. *_MISALIGNED     bits below an `*_LO` address field (IB_MISALIGNED for INDIRECT_BUFFER,
                     FENCE_MISALIGNED otherwise)
 5. IB_SIZE_ZERO, IB_NESTING (an INDIRECT_BUFFER inside an IB)

then bus errors and VM faults as the CP's. Time is the model's: work runs at once; a
POLL_REGMEM that fails is re-read on its grid (every max(1, 16 × INTERVAL) cycles) as time
passes, and with a finite RETRY_COUNT gives up at its (RETRY_COUNT + 1)-th failing read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from kmd_model import regs
from kmd_model.regs import CpError, IbLevel
from spec import ih as ih_spec
from spec import sdma as sdma_codec
from spec.sdma import packets as sp
from spec import vm as vm_spec

if TYPE_CHECKING:
    from .device import RefModel

M32 = 0xFFFF_FFFF
_ADDR_MASK = (1 << 48) - 1
_FETCH, _READ = vm_spec.Access.FETCH, vm_spec.Access.READ
_OP, _SUB = sp.SDMA_OP, sp.SDMA_SUB_OP
_POLL_UNIT = 16  # clocks per INTERVAL unit (Mesa: SDMA_POLL_INTERVAL_160_CLK is 0xA)
_CONFIG = frozenset({"SDMA_RB_BASE_LO", "SDMA_RB_BASE_HI", "SDMA_RB_CNTL", "SDMA_RB_RPTR_ADDR_LO",
                     "SDMA_RB_RPTR_ADDR_HI", "SDMA_CNTL"})

_COMPARE: dict[int, Callable[[int, int], bool]] = {
    v: {"ALWAYS": lambda a, b: True, "LT": int.__lt__, "LE": int.__le__, "EQ": int.__eq__,
        "NE": int.__ne__, "GE": int.__ge__, "GT": int.__gt__}[name]
    for name, v in sp.POLL_REGMEM.field("FUNC").values.items()
}


@dataclass(frozen=True)
class _Kind:
    """A packet's checks, precomputed from the table."""

    defn: sp.SdmaPacketDef
    # (dword, lsb, max, supported values) of every closed-enum field; dword -1: the header
    supported: tuple[tuple[int, int, int, frozenset], ...]
    # (dword, low-bit mask) of every address whose low field starts above bit 0
    aligns: tuple[tuple[int, int], ...]


def _kind(p: sp.SdmaPacketDef) -> _Kind:
    sup = tuple((f.dword, f.lsb, f.max, frozenset(e.value for e in f.enum if e.supported))
                for f in p.fields if f.enum and not f.open_enum)
    aligns = []
    for v in p.values:
        lo = p.field(v.fields[0])
        if lo.lsb:
            aligns.append((lo.dword, (1 << lo.lsb) - 1))
    return _Kind(p, sup, tuple(aligns))


_KINDS = {(p.op, p.sub_op): _kind(p) for p in sp.SDMA_PACKETS}


@dataclass
class _Poll:
    addr: int
    value: int
    mask: int
    compare: Callable[[int, int], bool]
    interval: int
    next_poll: int
    deadline: int | None  # the time of the last read (None: forever)
    level: int
    offset: int
    length: int
    vmid: int
    failed_in: object = None  # the RefModel._advance call in which a read failed


class SdmaEngine:
    """One SDMA queue of a RefModel (see the module docstring)."""

    def __init__(self, model: "RefModel"):
        self.m = model
        self.packets = [0] * regs.PERF_SDMA_PACKETS.ARRAY_LEN
        self.perf_clear()
        self.reset()
        self.sync()

    # ------------------------------------------------------------------ state

    def reset(self) -> None:
        """SDMA_CNTL.QUEUE_RESET (and CONTROL.SOFT_RESET): pointers, IB, poll and error."""
        self.rptr = self.wptr = 0  # bytes, free running
        self.ib: list[int] | None = None  # [base, size_dw, pos, vmid, ring packet length]
        self.wait: _Poll | None = None
        self.err = self.err_level = self.err_op = self.err_sub = 0
        self.err_addr = self.err_offset = 0
        self.cur = (0, 0, 0, 0)  # level, offset, op, sub_op of the packet in hand

    def perf_clear(self) -> None:
        self.busy = self.fetched = self.bytes_read = self.bytes_written = 0
        self.packets[:] = [0] * len(self.packets)

    def sync(self) -> None:
        st, R = self.m._store, regs
        cntl = st[R.SDMA_RB_CNTL.addr()]
        self.enable = bool(R.SDMA_RB_CNTL.RB_ENABLE.get(cntl))
        self.rptr_wb = bool(R.SDMA_RB_CNTL.RPTR_WRITEBACK_ENABLE.get(cntl))
        log2 = min(20, max(4, R.SDMA_RB_CNTL.RB_SIZE.get(cntl)))
        self.size_dw = 1 << log2
        self.base = (st[R.SDMA_RB_BASE_HI.addr()] << 32 | st[R.SDMA_RB_BASE_LO.addr()]) << 8
        self.rptr_addr = (st[R.SDMA_RB_RPTR_ADDR_HI.addr()] << 32 | st[R.SDMA_RB_RPTR_ADDR_LO.addr()]) & ~3
        c = st[R.SDMA_CNTL.addr()]
        self.trap_enable = bool(R.SDMA_CNTL.TRAP_ENABLE.get(c))
        self.halt = bool(R.SDMA_CNTL.HALT.get(c))

    def idle(self) -> bool:
        return bool(self.err) or (self.wait is None and self.ib is None and self.rptr == self.wptr)

    # ------------------------------------------------------------------ registers

    def status(self, i: int = 0) -> int:
        s = regs.SDMA_STATUS
        return (s.IDLE.put(int(self.idle())) | s.HALTED.put(int(self.halt and self.wait is None and not self.err))
                | s.ERROR.put(int(bool(self.err))) | s.RB_EMPTY.put(int(self.rptr == self.wptr))
                | s.WAITING.put(int(self.wait is not None)) | s.LEVEL.put(int(self.ib is not None)))

    def error(self, i: int = 0) -> int:
        e = regs.SDMA_ERROR
        return e.CODE.put(self.err) | e.LEVEL.put(self.err_level) | e.OP.put(self.err_op) | e.SUB_OP.put(self.err_sub)

    def hw_read(self) -> dict[str, Callable[[int], int]]:
        return {
            "SDMA_RB_RPTR": lambda i: self.rptr, "SDMA_RB_WPTR": lambda i: self.wptr,
            "SDMA_STATUS": self.status, "SDMA_ERROR": self.error,
            "SDMA_ERROR_ADDR_LO": lambda i: self.err_addr & M32, "SDMA_ERROR_ADDR_HI": lambda i: self.err_addr >> 32,
            "SDMA_ERROR_OFFSET": lambda i: self.err_offset,
            "PERF_SDMA_BUSY_CYCLES": lambda i: self.busy & M32,
            "PERF_SDMA_DWORDS_FETCHED": lambda i: self.fetched & M32,
            "PERF_SDMA_BYTES_READ": lambda i: self.bytes_read & M32,
            "PERF_SDMA_BYTES_WRITTEN": lambda i: self.bytes_written & M32,
            "PERF_SDMA_PACKETS": lambda i: self.packets[i] & M32,
        }

    def doorbell(self, v: int) -> None:
        v &= ~3  # the ring holds whole dwords: bits 1:0 are ignored
        if not self.enable or self.err:
            return
        off = (self.rptr >> 2) & (self.size_dw - 1)
        # (a doorbell error is the ring's: its entry's VMID is 0, as the CP's, whatever IB is in hand)
        if (v - self.wptr) & 0x8000_0000:
            self._latch(CpError.DOORBELL_BACKWARDS, IbLevel.RING, 0, 0, v, off, vmid=0)
        elif ((v - self.rptr) & M32) > 4 * self.size_dw:
            self._latch(CpError.DOORBELL_OVERFLOW, IbLevel.RING, 0, 0, v, off, vmid=0)
        else:
            self.wptr = v

    # ------------------------------------------------------------------ errors

    def _latch(self, code: int, level: int, op: int, sub: int, addr: int, offset: int,
               vmid: int | None = None) -> None:
        """The first error stops the queue; its SDMA_ERROR entry carries `vmid`, the VMID of
        the work that failed (None: the IB's in hand, 0 in the ring)."""
        if self.err:
            return
        self.err, self.err_level, self.err_op, self.err_sub = int(code), int(level), op, sub
        self.err_addr, self.err_offset = addr & _ADDR_MASK, offset & M32
        self.wait = None
        try:
            self.m._ih_append(ih_spec.Source.SDMA_ERROR, self.error(), self.err_addr & M32, self.err_addr >> 32,
                              self.err_offset, client=ih_spec.Client.SDMA0,
                              vmid=self._vmid() if vmid is None else vmid)
        except self.m._fault_type:
            pass  # the error entry itself could not be written; the queue is stopped already

    def _fail(self, e) -> None:
        level, offset, op, sub = self.cur
        self._latch(e.code, level, op if e.opcode is None else e.opcode, sub if e.opcode is None else 0,
                    e.addr, offset)

    def _vmid(self) -> int:
        return self.ib[3] if self.ib is not None else 0

    # ------------------------------------------------------------------ execution

    def runnable(self) -> bool:
        # (a cleared RB_ENABLE pauses before the next ring packet: an IB in hand runs to its end)
        return (not self.err and self.wait is None and not self.halt and (self.enable or self.ib is not None)
                and (self.ib is not None or self.rptr != self.wptr))

    def run(self) -> bool:
        """Execute packets until the queue is empty, halted, stopped or polling; True if any ran."""
        did = False
        fault = self.m._fault_type
        while self.runnable():
            did = True
            try:
                self._step()
            except fault as e:
                self._fail(e)
        return did

    def _read(self, level: int, base: int, start: int, k: int) -> list[int]:
        """k dwords from dword `start` of the ring (level 0, wrapping) or the IB, counted as fetched."""
        m = self.m
        out: list[int] = []
        if level:
            segs = ((base + 4 * start, k),)
            vmid = self.ib[3]  # type: ignore[index]
        else:
            mask = self.size_dw - 1
            i0 = start & mask
            first = mask + 1 - i0
            segs = ((base + 4 * i0, k),) if k <= first else ((base + 4 * i0, first), (base, k - first))
            vmid = 0
        for a, n in segs:
            words, f = m._read32(vmid, a, n, _FETCH)
            out += words.tolist()
            self.fetched += len(words) + (f is not None)
            if f is not None:
                raise f
        return out

    def _step(self) -> None:
        m = self.m
        if self.ib is not None:
            base, size, pos = self.ib[0], self.ib[1], self.ib[2]
            level, avail, off = 1, size - pos, pos
        else:
            base, pos = self.base, self.rptr >> 2
            level, avail, off = 0, ((self.wptr - self.rptr) & M32) >> 2, pos & (self.size_dw - 1)
        self.cur = (level, off, 0, 0)
        ha = base + 4 * off
        h = self._read(level, base, pos, 1)[0]
        op, sub = _OP.get(h), _SUB.get(h)
        self.cur = (level, off, op, sub)
        kind = _KINDS.get((op, sub))
        if kind is None:
            raise m._fault_type(CpError.ILLEGAL_OPCODE, ha)
        p = kind.defn
        if p.fixed + 1 > avail:
            raise m._fault_type(CpError.BAD_COUNT, ha)
        fixed = self._read(level, base, pos + 1, p.fixed) if p.fixed else []
        n = sdma_codec.packet_length(p, h, [h, *fixed], 0)
        assert n is not None
        if n > avail:
            raise m._fault_type(CpError.BAD_COUNT, ha)
        words = [h, *fixed]
        for dw, lsb, mx, ok in kind.supported:
            if (words[dw + 1] >> lsb) & mx not in ok:
                raise m._fault_type(CpError.UNSUPPORTED, ha)
        for dw, low in kind.aligns:
            if words[dw + 1] & low:
                code = CpError.IB_MISALIGNED if p is sp.INDIRECT_BUFFER else CpError.FENCE_MISALIGNED
                raise m._fault_type(code, ha)
        if m.trace is not None:
            tail = self._peek_tail(level, base, pos, p, n)
            where = "SDMA " + ("IB1" if level else "RING")
            m.trace(f"{where}+{4 * off:#06x}: {sdma_codec.describe(sdma_codec.decode(words + tail, 0))}")
        getattr(self, f"_op_{p.name.lower()}")(p, words, level, base, pos, n, ha)

    def _peek_tail(self, level, base, pos, p, n) -> list[int]:
        fetched = self.fetched
        try:
            return self._read(level, base, pos + 1 + p.fixed, n - 1 - p.fixed)
        except self.m._fault_type:
            return []
        finally:
            self.fetched = fetched

    def _complete(self, level: int, n: int) -> None:
        if level:
            ib = self.ib
            ib[2] += n  # type: ignore[index]
            if ib[2] >= ib[1]:  # type: ignore[index]
                self.ib = None
                self.cur = (IbLevel.RING, (self.rptr >> 2) & (self.size_dw - 1), sp.INDIRECT_BUFFER.op, 0)
                self._ring_advance(ib[4])  # type: ignore[index]
        else:
            self._ring_advance(n)

    def _ring_advance(self, n: int) -> None:
        self.rptr = (self.rptr + 4 * n) & M32
        if self.rptr_wb:
            self.m._cp_write(self.rptr_addr, [self.rptr], 0)

    # -- packets

    def _op_nop(self, p, w, level, base, pos, n, ha) -> None:
        if n > 1:
            self._read(level, base, pos + 1, n - 1)
        self.packets[p.index] += 1
        self._complete(level, n)

    def _op_copy_linear(self, p, w, level, base, pos, n, ha) -> None:
        self.packets[p.index] += 1
        src = (w[4] << 32 | w[3]) & _ADDR_MASK
        dst = (w[6] << 32 | w[5]) & _ADDR_MASK
        self.m._dma(dst, src, p.field("COUNT").get(w[1]) + 1, False, self._vmid(), acct=self)
        self._complete(level, n)

    def _op_constant_fill(self, p, w, level, base, pos, n, ha) -> None:
        self.packets[p.index] += 1
        dst = (w[2] << 32 | w[1]) & _ADDR_MASK
        self.m._dma(dst, w[3], p.field("COUNT").get(w[4]) + 1, True, self._vmid(), acct=self)
        self._complete(level, n)

    def _op_write_linear(self, p, w, level, base, pos, n, ha) -> None:
        # PERF_SDMA_PACKETS counts it as the RTL does (rtl/sdma/write.py): once its last data
        # dword is read, which there comes after every earlier block's write was answered, so
        # a write error in a block before the one holding the last dword leaves it uncounted
        # (a fetch error of its data too: _read raises first). `done` is the dwords through
        # the failing block's end (memory.py).
        data = self._read(level, base, pos + 1 + p.fixed, n - 1 - p.fixed)
        try:
            self.m._cp_write((w[2] << 32 | w[1]) & _ADDR_MASK, data, self._vmid())
        except self.m._fault_type as e:
            if e.done >= len(data):
                self.packets[p.index] += 1
            raise
        self.packets[p.index] += 1
        self._complete(level, n)

    def _op_fence(self, p, w, level, base, pos, n, ha) -> None:
        self.packets[p.index] += 1
        self.m._cp_write((w[2] << 32 | w[1]) & _ADDR_MASK, [w[3]], self._vmid())
        self._complete(level, n)

    def _op_trap(self, p, w, level, base, pos, n, ha) -> None:
        self.packets[p.index] += 1
        if self.trap_enable:
            ctx = p.field("INT_CONTEXT").get(w[1])
            self.m._ih_append(ih_spec.Source.SDMA_TRAP, ctx, 0, 0, 0, client=ih_spec.Client.SDMA0,
                              vmid=self._vmid())
        self._complete(level, n)

    def _op_indirect_buffer(self, p, w, level, base, pos, n, ha) -> None:
        f = self.m._fault_type
        size = p.field("IB_SIZE").get(w[3])
        if not size:
            raise f(CpError.IB_SIZE_ZERO, ha)
        if level:
            raise f(CpError.IB_NESTING, ha)
        ib = w[2] << 32 | w[1]
        if ib >> 48:
            raise f(CpError.BUS_DECERR, ib)
        self.packets[p.index] += 1
        self.ib = [ib, size, 0, p.field("VMID").get(w[0]), n]

    def _op_poll_regmem(self, p, w, level, base, pos, n, ha) -> None:
        self.packets[p.index] += 1
        fld = p.field
        retries = fld("RETRY_COUNT").get(w[5])
        interval = max(1, _POLL_UNIT * fld("INTERVAL").get(w[5]))
        now = self.m._t
        self.wait = _Poll((w[2] << 32 | w[1]) & _ADDR_MASK, w[3], w[4], _COMPARE[fld("FUNC").get(w[0])], interval,
                          now, None if retries == sp.RETRY_FOREVER else now + retries * interval,
                          level, self.cur[1], n, self._vmid())
        self.poll()

    def poll(self) -> bool:
        """One read of the pending POLL_REGMEM now; True when the queue moved on (the condition
        held, or the retries ran out)."""
        w = self.wait
        assert w is not None
        self.cur = (w.level, w.offset, sp.POLL_REGMEM.op, 0)
        try:
            words, f = self.m._read32(w.vmid, w.addr, 1, _READ)
            if f is not None:
                self.wait = None
                raise f
        except self.m._fault_type as e:
            self.wait = None
            self._fail(e)
            return True
        v = int(words[0])
        held = w.compare(v & w.mask, w.value)
        if not held and (w.deadline is None or self.m._t < w.deadline):
            w.next_poll = self.m._t + w.interval
            if w.deadline is not None:
                w.next_poll = min(w.next_poll, w.deadline)
            return False
        self.wait = None
        try:
            if not held:  # the retries ran out: AMD's engine raises POLL_TIMEOUT and moves on
                self.m._ih_append(ih_spec.Source.SDMA_POLL_TIMEOUT, w.addr & M32, w.addr >> 32, v, 0,
                                  client=ih_spec.Client.SDMA0, vmid=w.vmid)
            self._complete(w.level, w.length)
        except self.m._fault_type as e:
            self._fail(e)
        return True
