"""The blocks `make fpga` measures, each as Verilog with its ports as a standalone module.

The CP reads the CSR block's ports and drives the DMA engine's, so alone it is wrapped
in `CpBlock`, whose ports stand in for both (they become module ports, so nothing is
optimised away as a constant).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from amaranth.back import verilog
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl import top as rtl_top
from rtl.axi_mux import AXI4Mux
from rtl.bus import AXI4Signature
from rtl.cp import CommandProcessor
from rtl.csr import CSRBlock
from rtl.dma import DMAEngine
from rtl.mmu import MMU, REQ_USER, RESP_USER
from rtl.sdma import SDMA_BYTES_WIDTH, SdmaEngine

WIDTHS = (32, 64)


def _flipped_members(sig: wiring.Signature, skip=()) -> dict:
    """The members of `sig` with directions swapped (what a component drives becomes an input)."""
    out = {}
    for name, member in sig.members.items():
        if name in skip:
            continue
        out[name] = In(member.shape) if member.flow == wiring.Out else Out(member.shape)
    return out


def _signature_of(component: wiring.Component) -> wiring.Signature:
    component._MustUse__used = True  # made only for its signature, never elaborated
    return component.signature


class CpBlock(wiring.Component):
    """The command processor alone: the CSR fields and the DMA command port are ports."""

    def __init__(self, data_width: int, fetch_depth: int = 8):
        self.data_width = data_width
        self.fetch_depth = fetch_depth
        csr_sig, dma_sig = (_signature_of(c) for c in (
            CSRBlock(), DMAEngine(data_width, rtl_top.ADDR_WIDTH, rtl_top.ID_WIDTH, vm=True)))
        members = _flipped_members(csr_sig, skip=("bus",))
        members.update({f"dma_{k}": v for k, v in _flipped_members(dma_sig, skip=("bus",)).items()})
        members.update({"bus": Out(AXI4Signature(rtl_top.ADDR_WIDTH, data_width, rtl_top.ID_WIDTH,
                                                 REQ_USER.size, RESP_USER.size)),
                        "timestamp": In(rtl_top.TIMESTAMP_WIDTH), "idle": Out(1)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        block = self

        class Dma:
            """The DMA engine's ports, as the CP sees them."""
            def __getattr__(self, name):
                return getattr(block, f"dma_{name}")

        m.submodules.cp = cp = CommandProcessor(self, self.data_width, rtl_top.ADDR_WIDTH, rtl_top.IB_LEVELS,
                                                rtl_top.TIMESTAMP_WIDTH, dma=Dma(),
                                                dma_max_log2=rtl_top.DMA_MAX_LOG2, fetch_depth=self.fetch_depth)
        wiring.connect(m, cp.bus, wiring.flipped(self.bus))
        m.d.comb += [cp.timestamp.eq(self.timestamp), self.idle.eq(cp.idle)]
        return m


class SdmaBlock(wiring.Component):
    """The SDMA engine with its own DMA engine (what the copy engine adds to the top): its
    CSR fields and the CP's IH port are ports, and its two memory ports."""

    def __init__(self, data_width: int):
        self.data_width = data_width
        sdma_fields = ("sdma_", "perf_sdma_", "control_soft_reset", "control_perf_clear")
        csr_sig = _signature_of(CSRBlock())
        members = {k: v for k, v in _flipped_members(csr_sig, skip=("bus",)).items() if k.startswith(sdma_fields)}
        bus = AXI4Signature(rtl_top.ADDR_WIDTH, data_width, rtl_top.ID_WIDTH, REQ_USER.size, RESP_USER.size)
        members.update({"bus": Out(bus), "dma_bus": Out(bus), "ih_valid": Out(1), "ih_src": Out(8),
                        "ih_vmid": Out(4), "ih_data": Out(128), "ih_done": In(1), "ih_resp": In(2),
                        "ih_user": In(RESP_USER.size), "ih_addr": In(rtl_top.ADDR_WIDTH)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dma = dma = DMAEngine(self.data_width, rtl_top.ADDR_WIDTH, rtl_top.ID_WIDTH, vm=True,
                                           bytes_width=SDMA_BYTES_WIDTH, zero_length=False)
        m.submodules.sdma = sdma = SdmaEngine(self, dma, self.data_width, rtl_top.ADDR_WIDTH)
        wiring.connect(m, sdma.bus, wiring.flipped(self.bus))
        wiring.connect(m, dma.bus, wiring.flipped(self.dma_bus))
        m.d.comb += [self.ih_valid.eq(sdma.ih_valid), self.ih_src.eq(sdma.ih_src), self.ih_vmid.eq(sdma.ih_vmid),
                     self.ih_data.eq(sdma.ih_data), sdma.ih_done.eq(self.ih_done), sdma.ih_resp.eq(self.ih_resp),
                     sdma.ih_user.eq(self.ih_user), sdma.ih_addr.eq(self.ih_addr)]
        return m


class PortsRegistered(wiring.Component):
    """A block with a register on every port bit, both ways, so that what its ports connect
    to in a system starts and ends at a flip-flop and the paths from and to the ports are
    timed too. Out of context nextpnr times register-to-register paths only: a block's paths
    from its inputs (an MMIO write's address into the CSR block's decoding, the memory's R
    data into every fetcher's decoding) and to its outputs (READY and VALID worked out in the
    cycle) are not. A timing harness, not a design: every handshake arrives a cycle late,
    both ways. The block's own module is elaborated in place, so its registers keep the
    names they have alone (`cp.ring_end`, not `block.cp.ring_end`)."""

    def __init__(self, inner: wiring.Component):
        self.inner = inner
        super().__init__(dict(inner.signature.members))

    def elaborate(self, platform):
        self.inner._MustUse__used = True  # (elaborated here, in place, not as a submodule)
        m = self.inner.elaborate(platform)
        for (_, member, outer), (_, _, value) in zip(self.signature.flatten(self),
                                                     self.inner.signature.flatten(self.inner)):
            m.d.sync += value.eq(outer) if member.flow == wiring.In else outer.eq(value)
        return m


@dataclass(frozen=True)
class Block:
    name: str            # e.g. dma_32
    kind: str            # csr, cp, dma, mux, top
    width: int | None
    make: Callable[[], wiring.Component]
    parts: bool = False  # also synthesise with the hierarchy kept, for the per-submodule table

    @property
    def module(self) -> str:
        return "gpu_top" if self.kind == "top" else self.kind

    def verilog(self) -> str:
        return verilog.convert(self.make(), name=self.module, emit_src=False)


def block(kind: str, width: int | None = None, fetch_depth: int = 8, **dma_kwargs) -> Block:
    """One block; `dma_kwargs` configure the DMA engine, `fetch_depth` the CP's fetchers
    (the sweep's points)."""
    if kind == "csr":
        return Block("csr", "csr", None, CSRBlock)
    if width not in (32, 64, 128, 256):
        raise ValueError(f"{kind}: data width must be 32, 64, 128 or 256, not {width!r}")
    name = f"{kind}_{width}"
    if kind == "dma":
        suffix = "".join(f"_{k}{v}" for k, v in sorted(dma_kwargs.items()))
        return Block(name + suffix, "dma", width,
                     lambda: DMAEngine(width, rtl_top.ADDR_WIDTH, rtl_top.ID_WIDTH, **dma_kwargs))
    if kind == "mux":
        # the top's instance: its four masters, with the MMU's AxUSER and xUSER
        return Block(name, "mux", width, lambda: AXI4Mux(rtl_top.MUX_MASTERS, rtl_top.ADDR_WIDTH, width,
                                                         rtl_top.ID_WIDTH, req_user=REQ_USER.size,
                                                         resp_user=RESP_USER.size))
    if kind == "cp":
        suffix = "" if fetch_depth == 8 else f"_fetch_depth{fetch_depth}"
        return Block(name + suffix, "cp", width, lambda: CpBlock(width, fetch_depth))
    if kind == "mmu":
        return Block(name, "mmu", width, lambda: MMU(width, rtl_top.ADDR_WIDTH, rtl_top.ID_WIDTH,
                                                     tlb_entries=rtl_top.TLB_ENTRIES, walk_id=rtl_top.WALK_ID))
    if kind == "sdma":
        return Block(name, "sdma", width, lambda: SdmaBlock(width))
    if kind == "top":
        return Block(name, "top", width, lambda: rtl_top.GpuTop(width), parts=True)
    if kind == "top_nommu":  # the same top without the MMU: what the MMU costs
        return Block(name, "top", width, lambda: rtl_top.GpuTop(width, mmu=False))
    if kind == "top_ports":  # the same top with its ports' paths timed too
        return Block(name, "top", width, lambda: PortsRegistered(rtl_top.GpuTop(width)))
    raise ValueError(f"unknown block {kind!r}: choose csr, cp, dma, mux, mmu, sdma, top, top_nommu or top_ports")


KINDS = ("csr", "mux", "dma", "cp", "mmu", "sdma", "top", "top_nommu", "top_ports")
NOMMU_WIDTHS = (32,)  # the width of the FPGA goals: enough to see what the MMU costs


def default_blocks(widths=WIDTHS, kinds=KINDS) -> list[Block]:
    out = []
    for kind in kinds:
        if kind == "csr":
            out.append(block("csr"))
        else:
            out.extend(block(kind, w) for w in widths if kind not in ("top_nommu", "top_ports") or w in NOMMU_WIDTHS)
    return out
