"""Register access for the KMD: named registers and fields over `Device` MMIO.

amdgpu reads registers by name (RREG32/WREG32 with generated offsets); so does this layer,
with the constants generated from spec/regs.rdl.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from . import regs
from .device import Device
from .log import get_logger
from .regfield import Field, Register

log = get_logger("bus")  # every register access, at debug: GPUCOSIM_LOG=bus=debug


class ProbeError(RuntimeError):
    """The device does not identify as a gpucosim front end this driver knows."""


@dataclass(frozen=True)
class DeviceInfo:
    """What probe() learned from ID, VERSION and CAPS."""

    version: tuple[int, int, int]
    bus_bytes: int
    addr_bits: int
    ib_levels: int
    has_dma: bool
    has_ih: bool
    dma_max_bytes: int  # largest DMA_DATA BYTE_COUNT (0 without a DMA engine)
    vm_levels: int = 0  # page-table levels of the MMU (VM_CAPS); 0: no MMU
    vmids: int = 0


SUPPORTED_MAJOR = regs.VERSION.MAJOR.reset


class Mmio:
    def __init__(self, dev: Device):
        self.dev = dev

    def read(self, reg: type[Register], index: int = 0) -> int:
        v = self.dev.mmio_read32(reg.addr(index))
        if log.isEnabledFor(logging.DEBUG):
            log.debug("read  %-18s -> %#010x", _label(reg, index), v)
        return v

    def write(self, reg: type[Register], value: int, index: int = 0) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("write %-18s <- %#010x", _label(reg, index), value)
        self.dev.mmio_write32(reg.addr(index), value)

    def fields(self, reg: type[Register], index: int = 0) -> dict[str, int]:
        return reg.decode(self.read(reg, index))

    def write_fields(self, reg: type[Register], **values: int) -> None:
        """Write a whole register from named fields; fields not named are written as 0."""
        word = 0
        for name, v in values.items():
            f = getattr(reg, name, None)
            if not isinstance(f, Field):
                raise ValueError(f"{reg.NAME} has no field {name!r}")
            word |= f.put(v)
        self.write(reg, word)

    def write64(self, lo: type[Register], hi: type[Register], addr: int) -> None:
        """A 64-bit address split over a _LO/_HI register pair."""
        hi_width = hi.FIELDS[0].width
        if not 0 <= addr < 1 << (32 + hi_width):
            raise ValueError(f"{lo.NAME[:-3]}: address {addr:#x} does not fit in {32 + hi_width} bits")
        self.write(lo, addr & 0xFFFF_FFFF)
        self.write(hi, addr >> 32)

    def read64(self, lo: type[Register], hi: type[Register]) -> int:
        """A _LO/_HI pair that holds still (an error address, latched): LO, then HI."""
        return self.read(lo) | (self.read(hi) << 32)

    def timestamp(self) -> int:
        """TIMESTAMP, read as docs/hardware.md says: HI, LO, then HI again, and again if HI
        moved (nothing latches HI when LO is read; read64's LO then HI gave a clock 2^32
        cycles ahead when LO wrapped between its two reads). HI moves once in 2^32 cycles,
        so the second try holds; a third is the bound, never a loop on a broken device."""
        hi = self.read(regs.TIMESTAMP_HI)
        for _ in range(3):
            lo = self.read(regs.TIMESTAMP_LO)
            again = self.read(regs.TIMESTAMP_HI)
            if again == hi:
                break
            hi = again
        return hi << 32 | lo

    def probe(self) -> DeviceInfo:
        """Identify the device, as a driver's probe does before touching anything else."""
        magic = self.read(regs.ID)
        if magic != regs.ID.MAGIC.reset:
            raise ProbeError(f"ID reads {magic:#010x}, expected {regs.ID.MAGIC.reset:#010x}: not a gpucosim device")
        v = self.fields(regs.VERSION)
        if v["MAJOR"] != SUPPORTED_MAJOR:
            raise ProbeError(f"register interface version {v['MAJOR']}.{v['MINOR']} is not supported "
                             f"(this driver knows major {SUPPORTED_MAJOR})")
        c = self.fields(regs.CAPS)
        vm = self.fields(regs.VM_CAPS) if c["VM"] else {"LEVELS": 0, "VMIDS": 0}
        return DeviceInfo(
            version=(v["MAJOR"], v["MINOR"], v["PATCH"]),
            bus_bytes=1 << c["BUS_BYTES_LOG2"],
            addr_bits=c["ADDR_BITS"],
            ib_levels=c["IB_LEVELS"],
            has_dma=bool(c["DMA"]),
            dma_max_bytes=(1 << c["DMA_MAX_LOG2"]) if c["DMA"] else 0,
            has_ih=bool(c["IH"]),
            vm_levels=vm["LEVELS"],
            vmids=vm["VMIDS"],
        )


def _label(reg: type[Register], index: int) -> str:
    return f"{reg.NAME}[{index}]" if reg.ARRAY_LEN > 1 else reg.NAME
