"""The AXI memory model's Python side: shared storage, run-time settings, protocol checker.

The RTL memory model (`testbench/sim/hdl/axi_mem.v`) keeps its bytes in a file that C code
inside the simulator maps (DPI-C on Verilator, VPI on Icarus: `testbench/sim/csrc/`). Python
maps the same file as a numpy array, so drivers and hardware share memory the way a GPU's
GTT is shared, and no Python runs per bus beat::

    with SharedMemory(64 << 20) as mem:
        mem.export_env()                    # before the first bus access
        configure(dut, rd_latency=64, stall={"r": 32}, seed=7)
        checker = ProtocolChecker(dut)      # watches axi_checker's chk_* outputs
        ...reset, run traffic...
        mem.view[0x1000:0x1010]             # what the hardware wrote

The checker's violation codes live in `CHECKER_CODES` below, the one table both sides
use: `python -m testbench.memory` writes its Verilog rendering into axi_checker.v.
"""

from __future__ import annotations

import logging
import os
import string
import tempfile
import weakref
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple

import numpy as np

from .pipes import pipe_safe

MEM_ENV = "GPUCOSIM_MEM_FILE"  # read by testbench/sim/csrc/gpumem.c
DEFAULT_SIZE = 64 << 20

RESP_NAMES = {"OKAY": 0, "EXOKAY": 1, "SLVERR": 2, "DECERR": 3}
CHANNELS = ("aw", "w", "b", "ar", "r")


# ----------------------------------------------------------------------------- storage

def _new_memory_file() -> tuple[int, str]:
    """A new file for the memory: in /dev/shm when a file can be made there, else in the temp
    directory. Tried by making it: os.access said yes to root for a /dev/shm that refuses
    files (a read-only mount, a container's), and mkstemp's PermissionError ended the run."""
    if os.path.isdir("/dev/shm"):
        try:
            return tempfile.mkstemp(prefix="gpucosim-mem-", suffix=".bin", dir="/dev/shm")
        except OSError:
            pass
    return tempfile.mkstemp(prefix="gpucosim-mem-", suffix=".bin")


def _remove_file(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class SharedMemory:
    """A file-backed byte array shared with the simulator's memory model.

    The file lives in /dev/shm when it exists (RAM, no disk traffic), else in the temp
    directory; it is sparse, so a large memory costs only the pages touched. `view` is a
    numpy uint8 memmap over the whole file; writes through it are seen by the next bus
    read, and bus writes are seen by the view at once (both sides map it MAP_SHARED).
    Keep a reference while the simulator uses it: a file this object created is
    deleted when the object is closed or garbage-collected.
    """

    def __init__(self, size: int = DEFAULT_SIZE, path: str | os.PathLike | None = None):
        if not isinstance(size, int) or size <= 0 or size % 32:
            raise ValueError(f"memory size must be a positive multiple of 32 bytes, not {size!r}")
        self.size = size
        self._owned = path is None
        if path is None:
            fd, name = _new_memory_file()
            os.close(fd)
            path = name
        self.path = Path(path)
        # A file we created goes away with this object even if close() is never
        # reached (a failing test): at garbage collection or interpreter exit.
        self._remove = weakref.finalize(self, _remove_file, str(self.path)) if self._owned else None
        with open(self.path, "ab") as f:
            f.truncate(size)  # sparse; an existing file given by `path` is resized to `size`
        self.view: np.memmap = np.memmap(self.path, dtype=np.uint8, mode="r+", shape=(size,))

    # -- environment
    def export_env(self) -> None:
        """Point the simulator's C side at this file (it maps it on first access after reset)."""
        os.environ[MEM_ENV] = str(self.path)

    # -- access
    def _check(self, addr: int, n: int) -> None:
        if addr < 0 or n < 0 or addr + n > self.size:
            raise IndexError(f"memory access [{addr:#x}, {addr + n:#x}) outside [0, {self.size:#x})")

    def read(self, addr: int, n: int) -> bytes:
        self._check(addr, n)
        return self.view[addr:addr + n].tobytes()

    def write(self, addr: int, data: bytes | bytearray | memoryview | np.ndarray) -> None:
        if isinstance(data, np.ndarray):
            buf = np.ascontiguousarray(data).view(np.uint8).ravel()
        else:
            buf = np.frombuffer(bytes(data), dtype=np.uint8)
        self._check(addr, len(buf))
        self.view[addr:addr + len(buf)] = buf

    def read32(self, addr: int) -> int:
        return int.from_bytes(self.read(addr, 4), "little")

    def write32(self, addr: int, value: int) -> None:
        self.write(addr, (value & 0xFFFF_FFFF).to_bytes(4, "little"))

    def fill(self, value: int = 0) -> None:
        self.view[:] = value

    # -- lifetime
    def close(self) -> None:
        """Unmap and, if this object created the file, delete it."""
        view, self.view = getattr(self, "view", None), None  # type: ignore[assignment]
        if view is not None:
            mm = getattr(view, "_mmap", None)
            del view
            if mm is not None:
                try:
                    mm.close()
                except BufferError:  # someone still holds a slice of the view
                    pass
        if self._remove is not None:
            self._remove()
        if os.environ.get(MEM_ENV) == str(self.path):
            del os.environ[MEM_ENV]

    def __enter__(self) -> "SharedMemory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SharedMemory(size={self.size:#x}, path={str(self.path)!r})"


# ----------------------------------------------------------------------------- settings

def _resp_code(resp: int | str) -> int:
    if isinstance(resp, str):
        try:
            return RESP_NAMES[resp.upper()]
        except KeyError:
            raise ValueError(f"unknown AXI response {resp!r}: choose one of {', '.join(RESP_NAMES)}") from None
    if resp not in (0, 1, 2, 3):
        raise ValueError(f"AXI response must be 0..3, not {resp!r}")
    return resp


def start_bench_clock(clk: Any, period_ns: int = 10) -> None:
    """Start the clock of a block bench (tb_dma, tb_axi_mem, the checker alone), which
    cocotb drives: its C++ clock (`impl="gpi"`), toggled by the simulator with no Python
    per edge. cocotb's default without COCOTB_TRUST_INERTIAL_WRITES is a Python task that
    wakes at every edge, a quarter of an Icarus DMA session's CPU (dw32: 9.75 s against
    13.07; the same tests pass and the same bench figures, Verilator as fast either way).
    gpu_top's path under cocotb's clock keeps cocotb's default: `make bench` measures it as
    the path before issue 13."""
    import cocotb
    from cocotb.clock import Clock

    cocotb.start_soon(Clock(clk, period_ns, unit="ns", impl="gpi").start())


def configure(dut: Any, *, rd_latency: int = 0, wr_latency: int = 0,
              stall: Mapping[str, float | int] | None = None, seed: int = 1,
              error_window: tuple[int, int, int | str] | None = None, prefix: str = "cfg_") -> None:
    """Set axi_mem's cfg_* inputs on `dut` (any handle holding them under `prefix`).

    rd_latency / wr_latency: cycles from AR handshake to first R handshake, and from
    the last W handshake to the B handshake (the model's minimum is 2).
    stall: {"aw"|"w"|"b"|"ar"|"r": p}: per-cycle chance that the model withholds
    READY (aw, w, ar) or VALID (b, r); p is a probability (0 <= p < 1, as float) or
    n/256 (int 0..255). Missing channels get 0.
    seed: seeds the back-pressure dice; takes effect at the next reset.
    error_window: (base, limit, resp): beats in [base, limit) answer resp ("SLVERR",
    "DECERR" or 2/3); None disables. Beyond the file's end is always DECERR.
    """
    stall = dict(stall or {})
    unknown = set(stall) - set(CHANNELS)
    if unknown:
        raise ValueError(f"unknown stall channel(s) {sorted(unknown)}: choose from {', '.join(CHANNELS)}")

    def sig(name: str) -> Any:
        return getattr(dut, prefix + name)

    for name, v in (("rd_latency", rd_latency), ("wr_latency", wr_latency)):
        if not 0 <= v <= 0xFFFF:
            raise ValueError(f"{name} must be 0..65535 cycles, not {v!r}")
        sig(name).value = v
    for ch in CHANNELS:
        p = stall.get(ch, 0)
        n = round(p * 256) if isinstance(p, float) else p
        if not 0 <= n <= 255:
            raise ValueError(f"stall[{ch!r}] must be a probability below 1 or 0..255 (n/256), not {p!r}")
        sig(f"stall_{ch}").value = n
    sig("seed").value = seed & 0xFFFF_FFFF
    if error_window is None:
        base, limit, resp = 0, 0, 0
    else:
        base, limit, r = error_window
        resp = _resp_code(r)
    sig("err_base").value = base
    sig("err_limit").value = limit
    sig("err_resp").value = resp


class MemoryModel:
    """Handle on one axi_mem instance: its shared storage plus its run-time settings."""

    def __init__(self, dut: Any, memory: SharedMemory, prefix: str = "cfg_"):
        self.dut = dut
        self.memory = memory
        self.prefix = prefix
        memory.export_env()

    def configure(self, **kwargs: Any) -> None:
        configure(self.dut, prefix=self.prefix, **kwargs)


# ----------------------------------------------------------------------------- checker codes

class CheckerCode(NamedTuple):
    code: int
    name: str
    template: str  # str.format fields: addr (hex as {addr:#x}), a0, a1, a2


# The one table of axi_checker violation codes. axi_checker.v holds its rendering
# (localparams CHK_<name> and the message task); regenerate with `python -m testbench.memory`.
CHECKER_CODES: tuple[CheckerCode, ...] = (
    CheckerCode(0x01, "AW_4K", "AW burst {a0} (ID {a1}) at {addr:#x}: {a2} bytes cross a 4 KiB boundary"),
    CheckerCode(0x02, "AR_4K", "AR burst {a0} (ID {a1}) at {addr:#x}: {a2} bytes cross a 4 KiB boundary"),
    CheckerCode(0x03, "AW_BURST", "AW burst {a0} (ID {a1}) at {addr:#x}: burst type {a2} is not INCR"),
    CheckerCode(0x04, "AR_BURST", "AR burst {a0} (ID {a1}) at {addr:#x}: burst type {a2} is not INCR"),
    CheckerCode(0x05, "AW_SIZE", "AW burst {a0} (ID {a1}) at {addr:#x}: beat size {a2} bytes is wider than the bus"),
    CheckerCode(0x06, "AR_SIZE", "AR burst {a0} (ID {a1}) at {addr:#x}: beat size {a2} bytes is wider than the bus"),
    CheckerCode(0x07, "WLAST_MISSING", "W burst {a0} at {addr:#x}: WLAST missing on beat {a1} of {a2}"),
    CheckerCode(0x08, "WLAST_EARLY", "W burst {a0} at {addr:#x}: WLAST on beat {a1} of {a2}"),
    CheckerCode(0x09, "W_LEN_MISMATCH", "W burst {a0} at {addr:#x}: {a1} beats sent ahead of AW, whose AWLEN gives {a2}"),
    CheckerCode(0x0A, "W_TOO_LONG", "W burst {a0}: no WLAST in {a1} beats"),
    CheckerCode(0x10, "AW_VALID_DROP", "AW channel: AWVALID dropped before AWREADY (ID {a0}, address {addr:#x})"),
    CheckerCode(0x11, "AW_UNSTABLE", "AW channel: payload changed while AWVALID waited for AWREADY (ID {a0}, address {addr:#x})"),
    CheckerCode(0x12, "W_VALID_DROP", "W channel: WVALID dropped before WREADY (W burst {a0})"),
    CheckerCode(0x13, "W_UNSTABLE", "W channel: WDATA/WSTRB/WLAST changed while WVALID waited for WREADY (W burst {a0})"),
    CheckerCode(0x14, "B_VALID_DROP", "B channel: BVALID dropped before BREADY (ID {a0})"),
    CheckerCode(0x15, "B_UNSTABLE", "B channel: BID/BRESP changed while BVALID waited for BREADY (ID {a0})"),
    CheckerCode(0x16, "AR_VALID_DROP", "AR channel: ARVALID dropped before ARREADY (ID {a0}, address {addr:#x})"),
    CheckerCode(0x17, "AR_UNSTABLE", "AR channel: payload changed while ARVALID waited for ARREADY (ID {a0}, address {addr:#x})"),
    CheckerCode(0x18, "R_VALID_DROP", "R channel: RVALID dropped before RREADY (ID {a0})"),
    CheckerCode(0x19, "R_UNSTABLE", "R channel: RID/RDATA/RRESP/RLAST changed while RVALID waited for RREADY (ID {a0})"),
    CheckerCode(0x20, "R_NO_READ", "R beat with ID {a0}, but no read with that ID is outstanding"),
    CheckerCode(0x21, "RLAST_MISSING", "read burst (ID {a0}) at {addr:#x}: RLAST missing on beat {a1} of {a2}"),
    CheckerCode(0x22, "RLAST_EARLY", "read burst (ID {a0}) at {addr:#x}: RLAST on beat {a1} of {a2}"),
    CheckerCode(0x23, "B_NO_WRITE", "B with ID {a0}, but no write with that ID has finished its AW and W beats"),
    CheckerCode(0x30, "R_TRACK_FULL", "checker capacity: more than {a1} reads outstanding with ID {a0} (raise MAX_READS)"),
    CheckerCode(0x31, "W_TRACK_FULL", "checker capacity: more than {a1} write bursts between AW and W (raise MAX_WRITES)"),
)
CHECKER_BY_CODE = {c.code: c for c in CHECKER_CODES}
CHECKER_BY_NAME = {c.name: c for c in CHECKER_CODES}


def checker_message(code: int, addr: int = 0, a0: int = 0, a1: int = 0, a2: int = 0) -> str:
    """The text axi_checker prints for a violation (identical to its $display)."""
    c = CHECKER_BY_CODE.get(code)
    if c is None:
        return f"axi_checker: violation code {code}"
    return "axi_checker: " + c.template.format(addr=addr, a0=a0, a1=a1, a2=a2)


_GEN_BEGIN = "    // BEGIN generated from testbench/memory.py CHECKER_CODES (python -m testbench.memory); do not edit"
_GEN_END = "    // END generated"


def _verilog_format(template: str) -> tuple[str, list[str]]:
    out, args = [], []
    for literal, field, spec, _conv in string.Formatter().parse(template):
        out.append(literal.replace("%", "%%").replace('"', '\\"'))
        if field is None:
            continue
        if field not in ("addr", "a0", "a1", "a2"):
            raise ValueError(f"checker template field {field!r} is not one of addr, a0, a1, a2")
        out.append("0x%0h" if spec == "#x" else "%0d")
        args.append(field)
    return "".join(out), args


def render_checker_codes() -> str:
    """The generated part of axi_checker.v: one localparam per code and the message task."""
    seen: set[int] = set()
    lines = [_GEN_BEGIN]
    for c in CHECKER_CODES:
        if c.code in seen or not 0 < c.code < 256:
            raise ValueError(f"checker code {c.code:#x} ({c.name}) is duplicated or out of 1..255")
        seen.add(c.code)
        lines.append(f"    localparam [7:0] CHK_{c.name} = 8'h{c.code:02x};")
    lines += [
        "",
        "    task chk_message(input [7:0] code, input [ADDR_WIDTH-1:0] addr,",
        "                     input [31:0] a0, input [31:0] a1, input [31:0] a2);",
        "        begin",
        "            case (code)",
    ]
    for c in CHECKER_CODES:
        fmt, args = _verilog_format(c.template)
        lines.append(f'                CHK_{c.name}: $display("axi_checker: {fmt}"{"".join(", " + a for a in args)});')
    lines += [
        '                default: $display("axi_checker: violation code %0d", code);',
        "            endcase",
        "        end",
        "    endtask",
        _GEN_END,
    ]
    return "\n".join(lines) + "\n"


CHECKER_SOURCE = Path(__file__).resolve().parent / "sim" / "hdl" / "axi_checker.v"


def _splice(text: str, block: str) -> str:
    begin = text.index(_GEN_BEGIN)
    end = text.index(_GEN_END, begin) + len(_GEN_END) + 1
    return text[:begin] + block + text[end:]


def checker_source_is_current(path: Path = CHECKER_SOURCE) -> bool:
    text = path.read_text()
    return _splice(text, render_checker_codes()) == text


def update_checker_source(path: Path = CHECKER_SOURCE) -> bool:
    """Rewrite the generated block of axi_checker.v; True if the file changed."""
    text = path.read_text()
    new = _splice(text, render_checker_codes())
    if new != text:
        path.write_text(new)
    return new != text


# ----------------------------------------------------------------------------- cocotb side

class ProtocolViolation(AssertionError):
    """axi_checker flagged the bus; the message is the checker's own text."""

    def __init__(self, message: str, code: int, addr: int, info: tuple[int, int, int]):
        super().__init__(message)
        self.message = message
        self.code = code
        self.name = CHECKER_BY_CODE[code].name if code in CHECKER_BY_CODE else f"code {code}"
        self.addr = addr
        self.info = info  # chk_arg0..2: what each means is in the code's message


class ProtocolChecker:
    """Turns axi_checker's sticky chk_error into a cocotb test failure.

    `dut` holds the checker's outputs under `prefix` (chk_error, chk_code, chk_addr,
    chk_arg0..2). By default a violation raises ProtocolViolation in a background task,
    which fails the running test; with `fail=False` violations are only logged and
    collected in `violations` (for tests that provoke them). `check()` raises if the
    checker's error output is set, so a test can also assert at chosen points.
    """

    def __init__(self, dut: Any, prefix: str = "chk_", fail: bool = True, name: str = "axi_checker"):
        import cocotb

        self.dut = dut
        self.prefix = prefix
        self.fail = fail
        self.violations: list[ProtocolViolation] = []
        self.log = logging.getLogger(f"cocotb.{name}")
        self._task = cocotb.start_soon(self._watch())

    def _sig(self, name: str) -> Any:
        return getattr(self.dut, self.prefix + name)

    def read(self) -> ProtocolViolation | None:
        """The checker's latched violation, or None."""
        if not self._sig("error").value.is_resolvable or not int(self._sig("error").value):
            return None
        code = self._sig("code").value.to_unsigned()
        addr = self._sig("addr").value.to_unsigned()
        info = tuple(self._sig(f"arg{i}").value.to_unsigned() for i in range(3))
        return ProtocolViolation(checker_message(code, addr, *info), code, addr, info)  # type: ignore[arg-type]

    async def _watch(self) -> None:
        from cocotb.triggers import ReadOnly, RisingEdge

        while True:
            await RisingEdge(self._sig("error"))
            await ReadOnly()
            v = self.read()
            if v is None:
                continue
            self.violations.append(v)
            if self.fail:
                self.log.error("%s", v)
                raise v
            self.log.info("expected violation: %s", v)

    def check(self) -> None:
        v = self.read()
        if v is not None:
            raise v

    def stop(self) -> None:
        self._task.cancel()


@pipe_safe
def _main(argv: Iterable[str] | None = None) -> int:
    changed = update_checker_source()
    print(f"{CHECKER_SOURCE}: {'updated' if changed else 'up to date'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
