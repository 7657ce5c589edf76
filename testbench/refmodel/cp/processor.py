"""The reference model's command processor: the doorbell, error latching, the IH writer and
the PM4 packets (every packet of spec/packets.py has its `_op_*`)."""

from __future__ import annotations


from kmd_model import regs
from kmd_model.regs import CpError, IbLevel
from spec import ih as ih_spec
from spec import packets as pk
from spec import pm4
from spec import vm as vm_spec

from .packets import (
    _COUNT_LSB, _COUNT_MAX, _Fault, _HEADER_CACHE, _IB_BASE, _IB_CHAIN, _IB_SIZE, _IB_VMID, _Kind,
    _NOP_PAD_MASK, _OPCODE_LSB, _OPCODE_MAX, _RM_ADDR, _RM_CTX, _RM_DATA_SEL, _RM_HI, _RM_INT,
    _RM_INTERRUPTS, _RM_LO, _RM_SEL, _TYPE2, _TYPE3, _TYPE_LSB, _TYPE_MAX, _WD_ADDR, _WD_INCR,
    _WD_NO_INCREMENT, _WRM_ADDR, _WRM_COMPARE, _WRM_FUNC, _WRM_MASK, _WRM_POLL, _WRM_REF, _Wait, _addr_of,
    _get, _vm_fault,
)
from ..regmap import ADDR_BITS, M32, _ADDR_MASK, _BUS_ERROR, _FETCH, _READ, _TS_MASK, _WRITE


class CommandProcessor:
    """RefModel's CP (a mixin: the state lives in RefModel)."""

    def _doorbell(self, v: int) -> None:
        if not self._rb_enable or self._err_code:
            return
        if (v - self._wptr) & 0x8000_0000:
            self._latch(CpError.DOORBELL_BACKWARDS, IbLevel.RING, 0, v, self._rptr & self._rb_mask, None, 0)
        elif ((v - self._rptr) & M32) > self._rb_size:
            self._latch(CpError.DOORBELL_OVERFLOW, IbLevel.RING, 0, v, self._rptr & self._rb_mask, None, 0)
        else:
            self._wptr = v

    def _latch(self, code: int, level: int, opcode: int, addr: int, offset: int, vm: tuple | None,
               vmid: int) -> None:
        """The first error stops the CP: latch it, raise INT_STATUS.CP_ERROR, write an entry
        (a VM fault's: AMD's UTCL2 fault with gmc_v9's source data). `vm`: a VM fault's
        (access, cause, level, vmid); `vmid`: the VMID of the work that failed."""
        if self._err_code:
            return
        self._err_code, self._err_level, self._err_opcode = int(code), int(level), opcode
        self._err_addr, self._err_offset = addr & _ADDR_MASK, offset & M32
        self._err_vm = vm or (0, 0, 0, 0)
        self._err_vmid = vmid
        self._wait = None
        self._store[self._off["INT_STATUS"]] |= regs.INT_STATUS.CP_ERROR.mask
        try:
            if code == CpError.VM_FAULT:
                d0, d1 = vm_spec.fault_src_data(self._err_addr, vm[0])
                self._ih_append(ih_spec.Source.VM_FAULT, d0, d1, self._vm_fault_status(0), self._cp_error(0),
                                client=ih_spec.Client.UTCL2, vmid=vmid)
            else:
                self._ih_append(ih_spec.Source.CP_ERROR, self._cp_error(0), self._err_addr & M32,
                                self._err_addr >> 32, self._err_offset, vmid=vmid)
        except _Fault:
            pass  # the error entry itself could not be written; the CP is stopped already

    def _ih_append(self, source: int, d0: int, d1: int, d2: int, d3: int,
                   client: int = ih_spec.Client.GRBM_CP, vmid: int = 0, event: int = 0) -> None:
        """One interrupt's IH entry; raises _Fault when its write (or the wptr write-back) fails.
        `event`: INT_STATUS bits set once the entry is in the ring, before the wptr write-back
        (as the RTL sets EOP with IH_PENDING: rtl/cp/ih.py)."""
        if not self._ih_enable:
            return
        wptr, size = self._ih_wptr, self._ih_bytes
        if ((wptr - self._store[self._off["IH_RPTR"]]) & M32) >= size:
            self._store[self._off["INT_STATUS"]] |= regs.INT_STATUS.IH_OVERFLOW.mask
            return
        ts = self._t & _TS_MASK
        ring = self._ring_id if client != ih_spec.Client.SDMA0 else 0
        entry = ih_spec.encode(CLIENT_ID=int(client), SOURCE_ID=int(source), RING_ID=ring, VMID=vmid,
                               TIMESTAMP_LO=ts & M32,
                               TIMESTAMP_HI=ts >> 32, DATA0=d0, DATA1=d1, DATA2=d2, DATA3=d3)
        self._cp_write(self._ih_base + (wptr & (size - 1)), entry, 0)
        self._ih_wptr = (wptr + ih_spec.ENTRY_BYTES) & M32
        self._store[self._off["INT_STATUS"]] |= event
        if self._ih_wptr_wb:
            self._cp_write(self._ih_wptr_addr, [self._ih_wptr], 0)

    # ------------------------------------------------------------------ the command processor

    def _run(self) -> None:
        """Run the engines: the CP, then the SDMA queue (each until it is empty, halted,
        stopped by an error or waiting)."""
        self._run_cp()
        if self.sdma is not None:
            self.sdma.run()

    def _run_cp(self) -> None:
        """Execute packets until the ring is empty, or the CP is halted, stopped by an
        error, or waiting in a WAIT_REG_MEM, or out of packets for now (`_cp_budget`);
        with queue 1 in use, the arbiter picks the queue of each packet (queues.py)."""
        left = self._cp_budget()
        h = self._hq1
        if h is not None and (h.s["_rb_enable"] or h.s["_frames"]):
            runnable = h.runnable
            while True:
                q = h.pick(runnable(self), h.runnable1())
                if q is None or not (runnable(self) or h.runnable1()):
                    break
                if not left:
                    self._cp_starved = True
                    break
                left -= 1
                h.last = q
                if q:
                    with h.active():
                        try:
                            self._step()
                        except _Fault as e:
                            self._fail(e)
                else:
                    try:
                        self._step()
                    except _Fault as e:
                        self._fail(e)
            self._cp_left = left
            return
        while not self._err_code and self._wait is None and not self._halt:
            if not self._frames and (not self._rb_enable or self._rptr == self._wptr):
                break
            if not left:
                self._cp_starved = True
                break
            left -= 1
            try:
                self._step()
            except _Fault as e:
                self._fail(e)
        self._cp_left = left

    def _cp_budget(self) -> int:
        """The packets the CP may run now: a burst of `cp_burst` at most, refilled at one
        packet per model cycle (no faster than the RTL's CP). Finite work runs at once as
        before; a CHAIN to itself (checker off) stops here, with the CP busy, and goes on
        as time passes (device.py's `_advance` runs it again when its burst is full, and at
        the end of a call), so the call that rang the doorbell returns and the driver's job
        timer runs, as on the RTL."""
        self._cp_starved = False
        dt = self._t - self._cp_fill_t
        if dt:
            self._cp_fill_t = self._t
            self._cp_left = min(self.cp_burst, self._cp_left + dt)
        return self._cp_left

    def _fail(self, e: _Fault) -> None:
        """Latch a fault of the packet in hand (self._cur_*)."""
        vmid = e.vm[3] if e.vm is not None else (self._vmid if self._cur_level else 0)
        self._latch(e.code, self._cur_level, self._cur_opcode if e.opcode is None else e.opcode,
                    e.addr, self._cur_offset, e.vm, vmid)

    def _step(self) -> None:
        """Fetch, check and execute the next packet."""
        frames = self._frames
        level = len(frames)
        if level:
            base, size, pos = frames[-1]
            mask = None
            avail = size - pos
            off = pos
        else:
            base, mask, pos = self._rb_base, self._rb_mask, self._rptr
            avail = (self._wptr - pos) & M32
            off = pos & mask
        self._cur_level, self._cur_offset, self._cur_opcode = level, off, 0
        ha = base + 4 * off
        self._fetched += 1  # the header, even when its read faults
        pa = ha
        if self._vm_on[self._vmid if level else 0]:
            vmid = self._vmid if level else 0
            pa, why = self._mmu.translate(vmid, ha, _FETCH)
            if why is not None:
                raise _vm_fault(ha, _FETCH, vmid, why, 0)
        if not (pa + 4 <= self._size and (pa + 4 <= self._wb or pa >= self._wl)):
            _, resp = self._first_fault(pa, 1)
            if resp:
                raise _Fault(_BUS_ERROR[resp], ha, 0)
        h = self._mv[pa >> 2]
        known = self._headers.get(h)
        if known is None:
            known = self._header(h, ha)
        op, n, run, kind = known
        if n > avail:
            self._cur_opcode = op
            raise _Fault(CpError.BAD_COUNT, ha)
        self._cur_opcode = op
        if self.trace is not None:
            self._trace(level, base, mask, pos, off, n)
        run(kind, level, base, mask, pos, ha, n)

    def _header(self, h: int, ha: int) -> tuple:
        """Decode and check a header dword on its own (type, opcode, COUNT range):
        (opcode, packet dwords, executor, kind), remembered for the next packet with
        the same header; raises the fault of a bad one. A type-2 dword and the header-only
        NOP (NOP_PAD) are one-dword NOPs."""
        t = (h >> _TYPE_LSB) & _TYPE_MAX
        if t == _TYPE2 or (t == _TYPE3 and h & _NOP_PAD_MASK == pk.NOP_PAD):  # (header flags ignored)
            known = (0 if t == _TYPE2 else pk.NOP.opcode, 1, self._op_filler, None)
        else:
            op = (h >> _OPCODE_LSB) & _OPCODE_MAX
            kind = self._kinds.get(op)
            if (h >> _TYPE_LSB) & _TYPE_MAX != _TYPE3:
                raise _Fault(CpError.ILLEGAL_OPCODE, ha, 0)  # type 0 or 1
            if kind is None:
                raise _Fault(CpError.ILLEGAL_OPCODE, ha, op)
            count = (h >> _COUNT_LSB) & _COUNT_MAX
            if not kind.min_count <= count <= kind.max_count:
                raise _Fault(CpError.BAD_COUNT, ha, op)
            known = (op, count + 2, self._exec[op], kind)
        if len(self._headers) >= _HEADER_CACHE:
            self._headers.clear()  # random streams: keep the cache bounded
        self._headers[h] = known
        return known

    def _op_filler(self, kind, level, base, mask, pos, ha, n) -> None:
        self._packets[pk.NOP.index] += 1  # a filler counts as a NOP
        self._complete(level, 1)

    def _trace(self, level: int, base: int, mask: int | None, pos: int, off: int, n: int) -> None:
        words, _ = self._fetch(base, mask, pos, n)  # a faulting packet is shown cut short
        where = ("HQD1 " if self._ring_id else "") + IbLevel(level).name  # which CP queue
        self.trace(f"{where}+{4 * off:#06x}: {pm4.describe(pm4.decode(words.tolist(), 0))}")

    def _check(self, kind: _Kind, p: list[int], ha: int) -> None:
        """The field checks of spec/packets.py: UNSUPPORTED values, then alignment."""
        for dw, lsb, mx, ok in kind.supported:
            if (p[dw] >> lsb) & mx not in ok:
                raise _Fault(CpError.UNSUPPORTED, ha)
        self._check_align(kind, p, ha, CpError.FENCE_MISALIGNED)
        self._packets[kind.index] += 1  # the packet starts executing

    @staticmethod
    def _check_align(kind: _Kind, p: list[int], ha: int, code: int) -> None:
        for dw, low, when in kind.aligns:
            if p[dw] & low and (when is None or (p[when[0]] >> when[1]) & when[2] in when[3]):
                raise _Fault(code, ha)

    def _complete(self, level: int, n: int) -> None:
        """The packet of n dwords at the current position has finished executing."""
        if level:
            fr = self._frames[-1]
            fr[2] += n
            if fr[2] >= fr[1]:
                self._retire()
        else:
            self._ring_advance(n)

    def _retire(self) -> None:
        """Pop IBs that have run to their end; the ring packet that started IB1 is done then."""
        frames = self._frames
        while frames and frames[-1][2] >= frames[-1][1]:
            frames.pop()
            if not frames:
                # a write-back fault belongs to the ring's INDIRECT_BUFFER packet
                self._cur_level, self._cur_offset = IbLevel.RING, self._rptr & self._rb_mask
                self._cur_opcode = pk.INDIRECT_BUFFER.opcode
                self._ring_advance(self._ring_ib_len)

    def _ring_advance(self, n: int) -> None:
        self._rptr = (self._rptr + n) & M32
        if self._rptr_wb:
            self._cp_write(self._rptr_addr, [self._rptr], 0)

    # -- packets (kind, level, buffer base, ring mask or None, header index, header address, length)

    def _op_nop(self, kind, level, base, mask, pos, ha, n) -> None:
        if self._span(base, mask, pos + 1, n - 1) >= 0:
            self._fetched += n - 1
        else:
            words, f = self._fetch(base, mask, pos + 1, n - 1)
            self._fetched += len(words) + (f is not None)
            if f is not None:
                raise f
        self._packets[kind.index] += 1
        self._complete(level, n)

    def _op_write_data(self, kind, level, base, mask, pos, ha, n) -> None:
        fixed = kind.fixed
        p = self._read(base, mask, pos + 1, fixed)
        self._check(kind, p, ha)
        addr = _addr_of(p, _WD_ADDR)
        count = n - 1 - fixed
        vmid = self._vmid if level else 0
        if _get(p, _WD_INCR) == _WD_NO_INCREMENT:
            # every dword to addr: the last one stays, and only it is written (rtl/cp/pm4/write_data.py)
            data, f = self._fetch(base, mask, pos + 1 + fixed, count)
            self._fetched += len(data) + (f is not None)
            if f is not None:
                raise f
            self._cp_write(addr, [int(data[-1])], vmid)
            self._complete(level, n)
            return
        src = self._span(base, mask, pos + 1 + fixed, count)
        dst = self._phys_span(vmid, addr, 4 * count, _WRITE) if src >= 0 else -1
        if dst >= 0:
            i, j = src >> 2, dst >> 2
            self._mv[j:j + count] = self._mv[i:i + count]
            self._fetched += count
            self._complete(level, n)
            return
        # The data streams through in 32-byte destination blocks: a fetch error stops
        # before the block holding the faulting dword, a write error inside its block.
        data, f = self._fetch(base, mask, pos + 1 + fixed, count)
        if f is not None:
            kf = len(data)
            self._fetched += kf + 1
            self._cp_write(addr, data[:max(0, (((addr + 4 * kf) & ~31) - addr) >> 2)], vmid)
            raise f
        try:
            self._cp_write(addr, data, vmid)
        except _Fault as e:
            self._fetched += e.done
            raise
        self._fetched += count
        self._complete(level, n)

    def _op_indirect_buffer(self, kind, level, base, mask, pos, ha, n) -> None:
        # docs/hardware.md's order: UNSUPPORTED (fields, CHAIN in the ring), IB_MISALIGNED,
        # IB_SIZE_ZERO, IB_NESTING, BUS_DECERR (a base beyond the bus)
        p = self._read(base, mask, pos + 1, n - 1)
        chain = _get(p, _IB_CHAIN)
        if chain and level == IbLevel.RING:
            raise _Fault(CpError.UNSUPPORTED, ha)
        for dw, lsb, mx, ok in kind.supported:
            if (p[dw] >> lsb) & mx not in ok:
                raise _Fault(CpError.UNSUPPORTED, ha)
        self._check_align(kind, p, ha, CpError.IB_MISALIGNED)
        size = _get(p, _IB_SIZE)
        if not size:
            raise _Fault(CpError.IB_SIZE_ZERO, ha)
        if not chain and level + 1 > self.ib_levels:
            raise _Fault(CpError.IB_NESTING, ha)
        ib = _addr_of(p, _IB_BASE)
        if ib >> ADDR_BITS:
            raise _Fault(CpError.BUS_DECERR, ib)  # (reported as its low 48 bits)
        self._packets[kind.index] += 1
        frame = [ib, size, 0]
        if chain:
            self._frames[-1] = frame  # the current IB ends here; the new one runs at its level
        else:
            if level:
                self._frames[-1][2] += n
            else:
                self._ring_ib_len = n  # rptr moves past it when the whole IB has run
                self._vmid = _get(p, _IB_VMID)  # only the kernel ring names the VMID
            self._frames.append(frame)

    def _op_wait_reg_mem(self, kind, level, base, mask, pos, ha, n) -> None:
        p = self._read(base, mask, pos + 1, n - 1)
        self._check(kind, p, ha)
        addr, ref, msk = _addr_of(p, _WRM_ADDR), _get(p, _WRM_REF), _get(p, _WRM_MASK)
        compare = _WRM_COMPARE[_get(p, _WRM_FUNC)]
        vmid = self._vmid if level else 0
        pa = self._phys_span(vmid, addr, 4, _READ)
        if pa >= 0 and compare(self._mv[pa >> 2] & msk, ref):
            self._polls += 1  # (its one read: PERF_Q0/Q1_POLLS)
            self._complete(level, n)  # the first poll, at once, holds
            return
        self._wait = _Wait(addr, ref, msk, compare, max(1, _get(p, _WRM_POLL)), self._t, level,
                           self._cur_offset, n, vmid)
        self._poll()

    def _poll(self) -> None:
        """One read of the pending WAIT_REG_MEM at the current time; it finishes when the
        condition holds, else the next read is due one interval later."""
        w = self._wait
        self._cur_level, self._cur_offset, self._cur_opcode = w.level, w.offset, pk.WAIT_REG_MEM.opcode
        # every poll is translated, but for an address beyond the bus's 48 bits: the CP
        # answers that BUS_DECERR itself, translated or not (rtl/cp/pm4/wait_reg_mem.py)
        pa, why = (w.addr, None) if w.addr >> ADDR_BITS else self._mmu.translate(w.vmid, w.addr, _READ)
        if not w.addr >> ADDR_BITS:
            self._polls += 1  # PERF_Q0/Q1_POLLS: a read the bus takes (one beyond it is none)
        if why is not None:
            self._wait = None
            raise _vm_fault(w.addr, _READ, w.vmid, why)
        _, resp = self._first_fault(pa, 1)
        if resp:
            self._wait = None
            raise _Fault(_BUS_ERROR[resp], w.addr)
        if not w.compare(self._mv[pa >> 2] & w.mask, w.ref):
            w.next_poll = self._t + w.interval
            return
        self._wait = None
        self._complete(w.level, w.length)

    def _op_release_mem(self, kind, level, base, mask, pos, ha, n) -> None:
        p = self._read(base, mask, pos + 1, n - 1)
        self._check(kind, p, ha)
        addr = _addr_of(p, _RM_ADDR)
        sel = _get(p, _RM_DATA_SEL)
        lo, hi = _get(p, _RM_LO), _get(p, _RM_HI)
        vmid = self._vmid if level else 0
        if sel == _RM_SEL["DATA_32"]:
            self._cp_write(addr, [lo], vmid)
        elif sel == _RM_SEL["DATA_64"]:
            self._cp_write(addr, [lo, hi], vmid)
        elif sel == _RM_SEL["TIMESTAMP"]:
            ts = self._t & _TS_MASK
            self._cp_write(addr, [ts & M32, ts >> 32], vmid)
        if _get(p, _RM_INT) in _RM_INTERRUPTS:
            eop = regs.INT_STATUS.EOP.mask
            self._ih_append(ih_spec.Source.EOP, _get(p, _RM_CTX), lo, hi, p[_RM_ADDR[0]], vmid=vmid, event=eop)
            self._store[self._off["INT_STATUS"]] |= eop  # (also with no entry: IH off, or full)
        self._complete(level, n)
