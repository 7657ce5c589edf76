"""The one interface between the KMD and whatever plays the GPU.

Backends (testbench/): the RTL under cocotb on Verilator or Icarus, and the reference
model. The KMD sees only this: 32-bit MMIO, the CPU's view of memory, a way to wait for
the interrupt, and the simulated clock. It never imports cocotb.

Everything is synchronous, as a kernel driver is. The cocotb backend runs driver code in
a greenlet of the simulator's thread (testbench/sim/bridge.py) and turns each MMIO access or
wait into a switch to the coroutine that awaits it, so the simulator and the driver never
run at the same time (docs/architecture.md, "Driver code and the cocotb scheduler").
"""

from __future__ import annotations

import abc
import os
import weakref

import numpy as np

from .regs import MMIO_ADDR_WIDTH


class BusError(RuntimeError):
    """An MMIO access answered SLVERR or DECERR."""

    RESP_NAMES = {2: "SLVERR", 3: "DECERR"}

    def __init__(self, op: str, offset: int, resp: int):
        self.op, self.offset, self.resp = op, offset, resp
        why = " (no register at that offset)" if resp == 3 else ""
        super().__init__(f"MMIO {op} at {offset:#06x} answered {self.RESP_NAMES.get(resp, resp)}{why}")


class Device(abc.ABC):
    """What the KMD needs from a GPU, and nothing more."""

    #: short name of the backend, e.g. "verilator", "icarus", "model"
    name: str = "device"
    #: only the thread that bound the KMD may call in (the RTL under cocotb: the simulator's,
    #: where the driver runs in a bridged greenlet); the UMD's submission thread then hands
    #: its ioctls to that thread
    thread_bound: bool = False

    @abc.abstractmethod
    def mmio_read32(self, offset: int) -> int:
        """Read a 32-bit register at byte `offset`; raises BusError on an error response."""

    @abc.abstractmethod
    def mmio_write32(self, offset: int, value: int) -> None:
        """Write a 32-bit register; raises BusError on an error response."""

    @property
    @abc.abstractmethod
    def mem(self) -> np.ndarray:
        """The CPU's view of device-visible memory (uint8), shared with the hardware."""

    @abc.abstractmethod
    def wait_irq(self, timeout_cycles: int) -> bool:
        """Block until the irq line is high or `timeout_cycles` pass; True if it is high."""

    @abc.abstractmethod
    def now(self) -> int:
        """Simulated time in device clock cycles."""

    @abc.abstractmethod
    def delay(self, cycles: int) -> None:
        """Let `cycles` of simulated time pass (for polling loops)."""

    def mem_file(self) -> tuple[int, int] | None:
        """(file descriptor, byte offset) of a file whose bytes from that offset are `mem`, so
        the KMD can give each CPU mapping of a buffer an OS mapping of its own, which it can
        revoke (kmd_model/mm/mapping.py); None when `mem` is plain process memory. The default
        finds the file of a `numpy.memmap`."""
        m = self.mem
        while m is not None and not isinstance(m, np.memmap):
            m = m.base if isinstance(m.base, np.ndarray) else None
        if m is None or getattr(m, "filename", None) is None:
            return None
        fd = self.__dict__.get("_mem_fd")
        if fd is None:
            fd = self.__dict__["_mem_fd"] = os.open(m.filename, os.O_RDWR | os.O_CLOEXEC)
            weakref.finalize(self, os.close, fd)
        return fd, m.offset + (self.mem.ctypes.data - m.ctypes.data)

    def irq_level(self) -> bool:
        """The irq line now, without waiting."""
        return self.wait_irq(0)

    @staticmethod
    def _check_offset(offset: int) -> None:
        if not isinstance(offset, int) or offset < 0 or offset % 4:
            raise ValueError(f"MMIO offset must be a non-negative multiple of 4, not {offset!r}")
        Device._check_mmio_range(offset, 4)

    @staticmethod
    def _check_mmio_range(offset: int, n: int) -> None:
        """The aperture is 2^MMIO_ADDR_WIDTH bytes: an offset beyond it is the caller's
        mistake, on every backend alike (the RTL's AXI4-Lite address has MMIO_ADDR_WIDTH bits,
        so there it would alias a register: 0x10098 rang RB_DOORBELL)."""
        if offset < 0 or offset + n > 1 << MMIO_ADDR_WIDTH:
            raise ValueError(f"MMIO offset {offset:#x} is outside the {MMIO_ADDR_WIDTH}-bit register space")

    @staticmethod
    def _check_value(value: int) -> None:
        if not isinstance(value, int) or not 0 <= value < 1 << 32:
            raise ValueError(f"MMIO value must fit in 32 bits, not {value!r}")
