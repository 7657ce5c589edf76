"""Malformed streams whose fault is memory's answer to an access (malformed.py builds the
stream around the faulty packet and holds the faults the CP's parser catches).

- slverr, decerr: the memory model answers SLVERR or DECERR in a window (an `errwin`
  action) where the faulty packet writes, fences, polls, is fetched, or where the CP
  writes back its rptr, an IH entry or the IH wptr (or its DMA engine reads or writes);
  DECERR also at addresses beyond memory and IB bases beyond the bus;
- vm_fault: a packet in an IB reaches a page of layout.VM_FAULT_REGION that the page
  tables leave unmapped, without the permission it needs, behind a failing table read,
  beyond the tables, or unmapped after a first access (vm.py writes the tables).

`AccessFaults` holds these classes' generators; `Malformed` inherits them, with the
placement helpers they call (`pick`, `levels`, `window`, `valid`, `place`, `fault`).
"""

from __future__ import annotations

from kmd_model import regs
from kmd_model.regs import IbLevel
from spec import packets as pk
from spec import pm4
from spec import vm as vm_spec

from . import layout as L
from .gen import M32, Buf, Caps
from .vm import VmFault

# bus-error sites: name -> the (opcode, field class) bins they hit
BUS_SITES = {
    "write": [("WRITE_DATA", "write")], "fence": [("RELEASE_MEM", "fence")], "poll": [("WAIT_REG_MEM", "poll")],
    "poll_later": [("WAIT_REG_MEM", "poll_while_waiting")], "fetch": [("FETCH", "header"), ("FETCH", "payload")],
    "rptr_wb": [("RING", "rptr_writeback")], "ih": [("RELEASE_MEM", "ih")],
    "ih_wptr_wb": [("RELEASE_MEM", "ih_wptr_wb")],
}
DECERR_SITES = {"beyond": [(n, "beyond_memory") for n in ("WRITE_DATA", "RELEASE_MEM", "WAIT_REG_MEM")],
                "ib_beyond": [("INDIRECT_BUFFER", "beyond_memory"), ("INDIRECT_BUFFER", "beyond_bus")]}
DMA_SITES = {"dma_src": [("DMA_DATA", "dma_src")], "dma_dst": [("DMA_DATA", "dma_dst")]}
VM_FAULT_KINDS = ("pte", "pde", "perm", "walk", "range", "invalidated")
VM_FAULT_ACCESSES = {"write": "W", "fence": "W", "poll": "R", "ib": "X", "dma_src": "R", "dma_dst": "W"}


def bus_sites(resp: str, caps: Caps) -> dict[str, list]:
    sites = dict(BUS_SITES)
    if resp == "DECERR":
        sites.update(DECERR_SITES)
    if caps.dma:
        sites.update(DMA_SITES)
    return sites


class AccessFaults:
    """The bus-error and VM-fault classes, mixed into `Malformed` (malformed.py)."""

    def bus_error(self, resp: str) -> None:
        b, r = self.b, self.r
        c = b.s.config
        site = self.pick(bus_sites(resp, b.caps))
        lvl = r.choice(self.levels())
        win = self.window(r.randint(1, 2))
        act = b.actions

        def errwin(w):
            act.append(("errwin", w[0], w[1], resp))

        if site == "write":
            def make(buf, i):
                n = r.randint(1, 24)
                a = win[0] - 4 * r.randint(0, min(8, n - 1))
                dw = pm4.write_data(a, [r.getrandbits(32) for _ in range(n)])
                return self.fault(buf, i, dw, "WRITE_DATA", "write", [(a, a + 4 * n)])
            errwin(win)
            self.place(lvl, make)
        elif site == "fence":
            def make(buf, i):
                sel = r.choice(["DATA_32", "DATA_64", "TIMESTAMP"])
                a = win[0] + 8 * r.randrange((win[1] - win[0]) // 8)
                dw = pm4.release_mem(a, r.getrandbits(32), data_sel=sel,
                                     int_sel=r.choice(["NONE", "SEND_INT", "SEND_INT_ON_CONFIRM"]))
                return self.fault(buf, i, dw, "RELEASE_MEM", "fence", [(a, a + 8)])
            errwin(win)
            self.place(lvl, make)
        elif site == "poll":
            def make(buf, i):
                a = win[0] + 4 * r.randrange((win[1] - win[0]) // 4)
                fn = r.choice(list(pk.WAIT_REG_MEM.field("FUNCTION").values))
                dw = pm4.wait_reg_mem(a, r.getrandbits(32), r.getrandbits(32), fn, poll_interval=r.randint(0, 50))
                return self.fault(buf, i, dw, "WAIT_REG_MEM", "poll")
            errwin(win)
            self.place(lvl, make)
        elif site == "poll_later":
            # The window appears while the CP polls: the next poll faults.
            sem = b.sem(0)
            w = (sem & ~31, (sem & ~31) + 32)

            def make(buf, i):
                dw = pm4.wait_reg_mem(sem, 1, M32, "EQ", poll_interval=r.randint(0, 60))
                return self.fault(buf, i, dw, "WAIT_REG_MEM", "poll_while_waiting")
            self.place(lvl, make)
            act += [("stuck",), ("errwin", w[0], w[1], resp)]
        elif site == "fetch":
            holder: dict = {}
            at_header = self.pick([True, False])

            def make(buf, i):
                # a packet of >= 9 dwords has a 32-byte boundary inside; the window starts
                # there, or at its header, which padding moves to a 32-byte boundary
                pad: list[int] = []
                if at_header:
                    k = (-(buf.pos(i)[0] >> 2)) % 8
                    pad = pm4.pad(k)
                    for item in pm4.decode_stream(pad):
                        b.info(buf, i + item.offset, pad[item.offset:item.offset + item.length])
                    i += len(pad)
                n = r.randint(9, 16)
                if r.random() < 0.5:
                    a = b.data_addr(4 * (n - 4))
                    dw = pm4.write_data(a, [r.getrandbits(32) for _ in range(n - 4)])
                    writes = [(a, a + 4 * (n - 4))]
                else:
                    dw, writes = pm4.nop(n - 1), []
                aligned = [k for k in range(n) if (buf.pos(i + k)[0] & 31) == 0]
                k0 = 0 if at_header else r.choice([k for k in aligned if k] or aligned)
                holder["w"] = buf.pos(i + k0)[0]
                holder["before"] = [buf.pos(j)[0] for j in range(i)]
                return pad + self.fault(buf, i, dw, "FETCH", "header" if k0 == 0 else "payload", writes)
            self.place(lvl, make, prefix=lvl > 0)
            w = holder["w"]
            if any(w <= a < w + 32 for a in holder["before"]):  # pragma: no cover - the ring is empty before
                raise AssertionError("fetch window covers earlier dwords")
            act.insert(len(act) - 1, ("errwin", w, w + 32, resp))
        elif site == "rptr_wb":
            c.rptr_wb = True
            if (L.RPTR_WB, L.RPTR_WB + 4) not in b.s.infra:
                b.s.infra.append((L.RPTR_WB, L.RPTR_WB + 4))
            errwin((L.RPTR_WB, L.RPTR_WB + 32))

            def make(buf, i):
                dw = self.valid(r.choice(["NOP", "WRITE_DATA", "RELEASE_MEM"]))
                self.fault(buf, i, dw, "RING", "rptr_writeback", [(L.FAULT_REGION[0], L.FAULT_REGION[1])])
                return dw
            self.place(0, make, prefix=False)
        elif site in ("ih", "ih_wptr_wb"):
            c.ih_enable = True
            if site == "ih":
                errwin((c.ih_base, c.ih_base + (32 << c.ih_log2)))
            else:
                c.ih_wptr_wb = True
                b.s.infra.append((L.IH_WPTR_WB, L.IH_WPTR_WB + 4))
                errwin((L.IH_WPTR_WB, L.IH_WPTR_WB + 32))

            def make(buf, i):
                a = L.FAULT_REGION[0] + 8 * r.randrange(0x100)
                dw = pm4.release_mem(a, r.getrandbits(32), data_sel=r.choice(["NONE", "DATA_32", "DATA_64"]),
                                     int_sel=r.choice(["SEND_INT", "SEND_INT_ON_CONFIRM"]))
                return self.fault(buf, i, dw, "RELEASE_MEM", site, [(a, a + 8)])
            self.place(lvl, make, prefix=False)
        elif site == "beyond":
            name = self.pick(["WRITE_DATA", "RELEASE_MEM", "WAIT_REG_MEM"])

            def make(buf, i):
                a = r.choice([L.MEM_SIZE + 8 * r.randrange(1 << 12), 8 * r.randrange(L.MEM_SIZE // 8, 1 << 45),
                              8 * r.randrange(1 << 45, 1 << 61)])  # (the last: beyond the bus's 48 bits)
                if name == "WRITE_DATA":
                    dw = pm4.write_data(a, [r.getrandbits(32) for _ in range(r.randint(1, 4))])
                elif name == "RELEASE_MEM":
                    dw = pm4.release_mem(a, 1, data_sel=r.choice(["DATA_32", "DATA_64"]))
                else:
                    dw = pm4.wait_reg_mem(a, 0, 0, "ALWAYS")
                return self.fault(buf, i, dw, name, "beyond_memory")
            self.place(lvl, make)
        elif site == "ib_beyond":
            def make(buf, i):
                bus = r.random() < 0.4  # IB_BASE_HI is 32 bits (gfx9): a base beyond the bus
                a = (4 * r.randrange(1 << 46, 1 << 62) if bus else
                     r.choice([L.MEM_SIZE + 4 * r.randrange(1 << 12), 4 * r.randrange(L.MEM_SIZE // 4, 1 << 46)]))
                dw = pm4.indirect_buffer(a, r.randint(1, 64), chain=int(buf.level > 0 and r.random() < 0.3))
                return self.fault(buf, i, dw, "INDIRECT_BUFFER", "beyond_bus" if bus else "beyond_memory")
            self.place(lvl if lvl < b.caps.ib_levels else 0, make)
        else:  # dma_src, dma_dst
            _dma_error_timing(b)

            def make(buf, i):
                n = r.randint(1, 300)
                inside = win[0] + r.randrange(win[1] - win[0])
                start = max(win[0] - 200, inside - r.randrange(n))
                if site == "dma_src":
                    dst = b.dma_dst(n) or L.DMA_DST_REGION[0]
                    dw = pm4.dma_data(dst, start, n)
                    writes = [(dst, dst + n)]
                else:
                    dw = pm4.dma_data(start, L.SRC_REGION[0], n)
                    writes = [(start, start + n)]
                b.s.undefined.append(writes[0])
                return self.fault(buf, i, dw, "DMA_DATA", site, writes)
            errwin(win)
            self.place(lvl, make)

    def slverr(self) -> None:
        self.bus_error("SLVERR")

    def decerr(self) -> None:
        self.bus_error("DECERR")

    def vm_fault(self) -> None:
        """A packet in an IB reaches a page of layout.VM_FAULT_REGION that the page tables
        leave unmapped (no PTE, no table), without the permission it needs, behind a
        table read that fails, beyond the tables, or unmapped (and invalidated) after a
        first access went through."""
        b, r = self.b, self.r
        kind = self.pick(VM_FAULT_KINDS)
        accesses = [a for a in VM_FAULT_ACCESSES if b.caps.dma or not a.startswith("dma")]
        access = self.pick(accesses)
        level = self.pick(self.levels(1))
        lo, hi = L.VM_FAULT_REGION
        page = r.randrange((hi - lo) // 4096)
        bit = {"R": vm_spec.READABLE, "W": vm_spec.WRITEABLE, "X": vm_spec.EXECUTABLE}[VM_FAULT_ACCESSES[access]]
        self.vm_fault_plan = VmFault(kind, page, missing=bit if kind == "perm" else 0)
        target = lo + 4096 * page + 8 * r.randrange(0, 500)
        if kind == "walk":
            b.actions.append(("vm_errwin",))  # (vm.to_vm puts the window on the region's table)
        if kind == "invalidated":
            # a first access goes through (and fills the TLB), then the page goes
            base = b.new_ib()
            first = pm4.write_data(target, [r.getrandbits(32)])
            me = b.info(b.ring_buf(), 0, [])
            b.info(Buf(IbLevel.IB1, base), 0, first, [(target, target + 4)])
            b.s.buffers[base] = first
            b.preload(base, first)
            me.dwords = pm4.indirect_buffer(base, len(first))
            b.submit(me.dwords)
            b.settle()
            b.actions.append(("vm_unmap",))
        if access.startswith("dma"):
            _dma_error_timing(b)

        def make(buf, i):
            if access == "write":
                n = r.randint(1, 8)
                dw = pm4.write_data(target, [r.getrandbits(32) for _ in range(n)])
                writes = [(target, target + 4 * n)]
            elif access == "fence":
                dw = pm4.release_mem(target, r.getrandbits(32), data_sel=r.choice(["DATA_32", "DATA_64", "TIMESTAMP"]),
                                     int_sel=r.choice(["NONE", "SEND_INT"]))
                writes = [(target, target + 8)]
            elif access == "poll":
                dw = pm4.wait_reg_mem(target, 0, 0, "ALWAYS", poll_interval=r.randint(0, 20))
                writes = []
            elif access == "ib":
                body = b.canary(r.randint(1, 3))
                b.preload(target, body)
                # (from the deepest IB only a CHAIN may go there)
                chain = buf.level == b.caps.ib_levels or r.random() < 0.3
                dw = pm4.indirect_buffer(target, len(body), chain=int(chain))
                writes = []
            else:
                n = r.randint(1, 600)
                if access == "dma_src":
                    dst = b.dma_dst(n) or L.DMA_DST_REGION[0]
                    dw, writes = pm4.dma_data(dst, target, n), [(dst, dst + n)]
                else:
                    dw, writes = pm4.dma_data(target, L.SRC_REGION[0], n), [(target, target + n)]
                    b.load_src()
                b.s.undefined.append(writes[0])
            return self.fault(buf, i, dw, "VM", f"{kind}_{access}", writes)

        self.place(level, make)
        b.s.variant += f" ({kind})"


def _dma_error_timing(b) -> None:
    """docs/hardware.md: after a DMA bus error (or fault) the failing transfer's destination
    is undefined, and how far the CP parsed ahead (rptr, counters) depends on timing."""
    dma = pk.DMA_DATA.index
    st = regs.STATUS
    b.s.timing_regs.update({"RB_RPTR": M32, "PERF_DWORDS_FETCHED": M32, "PERF_Q0_DWORDS_FETCHED": M32,
                            "PERF_DMA_BYTES_READ": M32,
                            "PERF_DMA_BYTES_WRITTEN": M32, f"PERF_PACKETS[{dma}]": M32,
                            "STATUS": st.RB_EMPTY.mask | st.LEVEL.mask})
    b.s.undefined.append((L.RPTR_WB, L.RPTR_WB + 4))
