"""The GPU front end as one Amaranth component: MMIO slave, memory master, irq.

    s_axil  AXI4-Lite slave, 32-bit: the register file (rtl/csr.py, generated from spec/regs.rdl)
    m_axi   AXI4 master, DATA_WIDTH bits: everything the device reads or writes in memory,
            after the MMU's translation (rtl/mmu.py)
    irq     level interrupt: high while any INT_STATUS bit is set and enabled

`python -m rtl.top --data-width 64 -o gpu_top.v` writes the Verilog.
"""

from __future__ import annotations

import argparse
import sys

from amaranth.back import verilog
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .bus import AXI4LiteSignature, AXI4Signature
from spec import vm as vm_spec

from .axi_mux import AXI4Mux
from .cp import CommandProcessor
from .dma import DMAEngine
from .csr import MMIO_ADDR_WIDTH, CSRBlock
from .mmu import MMU, REQ_USER, RESP_USER
from .sdma import SDMA_BYTES_WIDTH, SdmaEngine

ADDR_WIDTH = 48  # memory addresses, as a GPU virtual address space (amdgpu: 48 bits)
ID_WIDTH = 4
IB_LEVELS = 2  # ring → IB1 → IB2
TIMESTAMP_WIDTH = 48
DMA_MAX_LOG2 = 20  # DMA_DATA moves at most 1 MiB (BYTE_COUNT has room for 2 MiB - 1)
TLB_ENTRIES = 16
MUX_MASTERS = 4  # on the memory mux: the CP, the SDMA engine, the DMA engine, the SDMA's DMA engine
WALK_ID = 7  # the MMU's page-table reads: CP IDs are 0-3, the SDMA's 4-6, the DMA's 8, the SDMA's DMA 12


class GpuTop(wiring.Component):
    def __init__(self, data_width: int = 64, fetch_depth: int = 8, mmu: bool = True,
                 tlb_entries: int = TLB_ENTRIES):
        """`fetch_depth`: beats each CP fetcher reads ahead (rtl/cp/fetch.py). `mmu`: translate
        through rtl/mmu.py (off: addresses are physical, CAPS.VM = 0; for `make fpga`'s
        comparison), with a TLB of `tlb_entries`."""
        if data_width not in (32, 64, 128, 256):
            raise ValueError(f"data_width must be 32, 64, 128 or 256, not {data_width!r}")
        self.data_width = data_width
        self.fetch_depth = fetch_depth
        self.mmu = mmu
        self.tlb_entries = tlb_entries
        # Without the MMU the masters' sideband (each request's VMID and access kind, a
        # response's fault bits) has no reader inside, so it leaves on the memory port: unread,
        # yosys removed the VMID bits of the DMA command queues' read registers, could then
        # no longer merge those registers into the queues' block RAM, and `top_nommu_32`
        # did not synthesise ("no valid mapping found for memory gpu_top.dma.qa").
        user = (REQ_USER.size, RESP_USER.size) if not mmu else (0, 0)
        super().__init__({
            "s_axil": In(AXI4LiteSignature(MMIO_ADDR_WIDTH, 32)),
            "m_axi": Out(AXI4Signature(ADDR_WIDTH, data_width, ID_WIDTH, *user)),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.csr = csr = CSRBlock()
        wiring.connect(m, wiring.flipped(self.s_axil), csr.bus)

        # What this instance was built with, so one driver serves every configuration.
        m.d.comb += [
            csr.caps_bus_bytes_log2.eq((self.data_width // 8).bit_length() - 1),
            csr.caps_addr_bits.eq(ADDR_WIDTH),
            csr.caps_ib_levels.eq(IB_LEVELS),
            csr.caps_dma.eq(1),
            csr.caps_dma_max_log2.eq(DMA_MAX_LOG2),
            csr.caps_ih.eq(1),
            csr.caps_vm.eq(int(self.mmu)),
            csr.queue_caps_sdma.eq(1), csr.queue_caps_cp_queues.eq(2),
        ]

        # The GPU clock: stamps RELEASE_MEM timestamps and IH entries.
        timestamp = Signal(TIMESTAMP_WIDTH)
        m.d.sync += timestamp.eq(timestamp + 1)
        m.d.comb += [csr.timestamp_lo.eq(timestamp[:32]), csr.timestamp_hi.eq(timestamp[32:])]

        # The CP, the DMA engine and the SDMA (below) share the memory master through a mux,
        # which puts the master's index in the top AXI ID bits.
        m.submodules.dma = dma = DMAEngine(self.data_width, ADDR_WIDTH, ID_WIDTH, vm=True)
        m.submodules.cp = cp = CommandProcessor(csr, self.data_width, ADDR_WIDTH, IB_LEVELS,
                                                TIMESTAMP_WIDTH, dma=dma, dma_max_log2=DMA_MAX_LOG2,
                                                fetch_depth=self.fetch_depth)
        # The SDMA copy engine (rtl/sdma/) with a DMA engine of its own (docs/hardware.md says
        # why it does not share the CP's); its IH entries go through the CP's IH writer. On the
        # mux: CP 0-3, SDMA 4-6, DMA 8 (as before), the SDMA's DMA 12 (parked: the last master).
        m.submodules.sdma_dma = sdma_dma = DMAEngine(self.data_width, ADDR_WIDTH, ID_WIDTH, vm=True,
                                                     bytes_width=SDMA_BYTES_WIDTH, zero_length=False)
        m.submodules.sdma = sdma = SdmaEngine(csr, sdma_dma, self.data_width, ADDR_WIDTH)
        m.d.comb += [
            cp.ext_ih_valid.eq(sdma.ih_valid), cp.ext_ih_src.eq(sdma.ih_src), cp.ext_ih_client.eq(sdma.ih_client),
            cp.ext_ih_vmid.eq(sdma.ih_vmid), cp.ext_ih_data.eq(sdma.ih_data),
            sdma.ih_done.eq(cp.ext_ih_done), sdma.ih_resp.eq(cp.ext_ih_resp), sdma.ih_user.eq(cp.ext_ih_user),
            sdma.ih_addr.eq(cp.ext_ih_addr),
        ]
        # With the MMU, AxUSER carries one bit more through the mux: whether the request's
        # VMID goes untranslated, worked out from each master's own VMID (a register) before
        # the mux picks one, so the MMU's holding register takes it without the mux's pick and
        # a 16-way select of the enables in series (issue 14: the top's critical path)
        hint = 1 if self.mmu else 0
        m.submodules.mux = mux = AXI4Mux(MUX_MASTERS, ADDR_WIDTH, self.data_width, ID_WIDTH,
                                         req_user=REQ_USER.size + hint, resp_user=RESP_USER.size)
        ctx_enable = Signal(vm_spec.VMIDS)
        m.d.comb += ctx_enable.eq(Cat(getattr(csr, f"vm_context_cntl_{i}") for i in range(vm_spec.VMIDS)))
        for i, master in enumerate((cp.bus, sdma.bus, dma.bus, sdma_dma.bus)):
            if self.mmu:
                _connect_with_phys(m, master, mux.s[i], ctx_enable)
            else:
                wiring.connect(m, master, mux.s[i])
        if self.mmu:
            self._mmu(m, csr, mux, ctx_enable)
        else:
            # no translation: the mux's port is the memory port (its sideband unused)
            for name, member in self.m_axi.signature.members.items():
                if member.flow == Out:
                    m.d.comb += getattr(self.m_axi, name).eq(getattr(mux.m, name))
                else:
                    m.d.comb += getattr(mux.m, name).eq(getattr(self.m_axi, name))
        m.d.comb += cp.timestamp.eq(timestamp)
        pending = Cat(csr.int_status_ih_pending, csr.int_status_eop, csr.int_status_cp_error,
                      csr.int_status_ih_overflow)
        enabled = Cat(csr.int_enable_ih_pending, csr.int_enable_eop, csr.int_enable_cp_error,
                      csr.int_enable_ih_overflow)
        m.d.comb += self.irq.eq((pending & enabled).any())
        return m

    def _mmu(self, m: Module, csr: CSRBlock, mux: AXI4Mux, ctx_enable: Signal) -> None:
        """The MMU between the mux and the memory port, its configuration from the CSR block
        (VM_CONTEXT_*, VM_INVALIDATE_*) and its counters."""
        m.submodules.mmu = mmu = MMU(self.data_width, ADDR_WIDTH, ID_WIDTH, tlb_entries=self.tlb_entries,
                                     walk_id=WALK_ID, phys_in=True)
        # the mux's port is the MMU's, but for the untranslated bit on top of AxUSER
        for name, member in mux.m.signature.members.items():
            if name in ("aruser", "awuser"):
                continue
            if member.flow == Out:
                m.d.comb += getattr(mmu.s, name).eq(getattr(mux.m, name))
            else:
                m.d.comb += getattr(mux.m, name).eq(getattr(mmu.s, name))
        m.d.comb += [
            mmu.s.aruser.eq(mux.m.aruser[:REQ_USER.size]), mmu.s_arphys.eq(mux.m.aruser[REQ_USER.size]),
            mmu.s.awuser.eq(mux.m.awuser[:REQ_USER.size]), mmu.s_awphys.eq(mux.m.awuser[REQ_USER.size]),
        ]
        wiring.connect(m, mmu.m, wiring.flipped(self.m_axi))
        m.d.comb += [
            csr.vm_caps_levels.eq(mmu.levels), csr.vm_caps_vmids.eq(vm_spec.VMIDS),
            csr.vm_caps_tlb_log2.eq(self.tlb_entries.bit_length() - 1),
            mmu.ctx_enable.eq(ctx_enable),
            mmu.inv_req.eq(csr.vm_invalidate_req_per_vmid_swmod),
            mmu.inv_vmids.eq(csr.vm_invalidate_req_per_vmid), mmu.inv_all.eq(csr.vm_invalidate_req_all_addr),
            mmu.inv_page.eq(Cat(csr.vm_invalidate_addr_lo, csr.vm_invalidate_addr_hi)),
            csr.vm_invalidate_ack.eq(mmu.inv_ack),
        ]
        # (the page-table bases are a memory in the CSR block: the MMU reads its VMID's)
        m.d.comb += [csr.vm_context_pt_base_lo_index.eq(mmu.ctx_vmid), csr.vm_context_pt_base_hi_index.eq(mmu.ctx_vmid),
                     mmu.ctx_base.eq(Cat(csr.vm_context_pt_base_lo, csr.vm_context_pt_base_hi))]
        # (each pulse counted a cycle late, from a flip-flop, as the CP's and the SDMA's byte
        # counts are: `perf_hit` comes from the end of the MMU's lookup and release, and
        # through the adder `csr.perf_tlb_hits` was among the top's worst endpoints, 31-32
        # bits at 11.4-12.3 ns. PERF_CLEAR drops a pulse of its own cycle, as before.)
        for pulse, port in ((mmu.perf_hit, csr.perf_tlb_hits), (mmu.perf_miss, csr.perf_tlb_misses),
                            (mmu.perf_walk, csr.perf_walk_cycles)):
            count = Signal(32, name=port.name + "_count")
            late = Signal(name=port.name + "_pulse")
            m.d.sync += [late.eq(pulse & ~csr.control_perf_clear),
                         count.eq(Mux(csr.control_perf_clear, 0, count + late))]
            m.d.comb += port.eq(count)


def _connect_with_phys(m: Module, master, port, ctx_enable: Signal) -> None:
    """Connect `master`'s AXI4 port to the mux's `port`, whose AxUSER has one bit more on top
    of the master's: whether the VMID the master offers goes untranslated."""
    for name, member in master.signature.members.items():
        if name in ("aruser", "awuser"):
            vmid = data.View(REQ_USER, getattr(master, name)).vmid
            m.d.comb += getattr(port, name).eq(Cat(getattr(master, name), ~ctx_enable.bit_select(vmid, 1)))
        elif member.flow == Out:
            m.d.comb += getattr(port, name).eq(getattr(master, name))
        else:
            m.d.comb += getattr(master, name).eq(getattr(port, name))


def to_verilog(data_width: int = 64, name: str = "gpu_top", fetch_depth: int = 8, mmu: bool = True) -> str:
    return verilog.convert(GpuTop(data_width, fetch_depth, mmu), name=name, emit_src=False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Write the GPU front end as Verilog.")
    ap.add_argument("--data-width", type=int, default=64, choices=(32, 64, 128, 256))
    ap.add_argument("-o", "--output", default="-")
    args = ap.parse_args(argv)
    text = to_verilog(args.data_width)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
