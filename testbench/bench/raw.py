"""The raw baseline of `make bench`: the co-simulation's speed against the simulator's own.

The same design and memory model (tb_top: gpu_top, the shared-file memory, the AXI
checker, the HDL clock, mmio_master) is driven by an HDL stimulus (testbench/sim/hdl/tb_raw.v)
with no cocotb: `verilator --binary --timing`, or plain Icarus with the memory's VPI
module. Both harnesses run the same `Work`, a memory image and a list of operations:

    work = dma_work(rounds=40)
    raw = run_raw(work, "verilator")        # {"cycles": ..., "seconds": ...}
    # testbench/bench/cocotb_bench.py runs the same work on the co-simulated device

so `make bench` reports co-simulation ÷ raw cycles per second measured side by side.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kmd_model import regs
from spec import pm4

from .. import sim
from ..sim import icarus_verilog
from ..sim.design import gpu_verilog, memory_sources
from ..memory import SharedMemory

RING, RPTR_WB, IH_RING, IH_WB, IB, OUT = 0x10000, 0x8000, 0x20000, 0x8040, 0x30000, 0x40000
RING_LOG2_DW, IH_LOG2 = 10, 6
IH_ENTRY_BYTES = 32  # IH_RPTR counts bytes, as amdgpu's
MEM_SIZE = 64 << 20
DMA_COPIES, DMA_COPY_BYTES = 32, 4096
SRC, DST = 0x100000, 0x200000
IDLE_CYCLES, DMA_ROUNDS = 1_000_000, 40  # about a second each at raw speed


@dataclass
class Work:
    """What a speed measurement runs: bytes placed in memory before the start, then
    operations: ("write", register offset, value), ("irq",) wait for the interrupt,
    ("idle", cycles), ("mark",). The figure is taken between the two marks."""

    name: str
    ops: list[tuple] = field(default_factory=list)
    mem: list[tuple[int, bytes]] = field(default_factory=list)

    def script(self) -> list[int]:
        """The ops as tb_raw.v's script words."""
        words: list[int] = []
        for op in self.ops:
            if op[0] == "write":
                words += [1, op[1], op[2]]
            elif op[0] == "irq":
                words += [2]
            elif op[0] == "idle":
                words += [3, op[1]]
            elif op[0] == "mark":
                words += [4]
            else:
                raise ValueError(f"unknown work operation {op!r}")
        return words + [0]


def setup_ops() -> list[tuple]:
    """Ring, IH ring and interrupt set up, as `make bench`'s cycle measurements do."""
    # AMD's units: bases >> 8, the ring in log2 qwords, the IH ring in log2 dwords
    w = [(regs.RB_BASE_LO, RING >> 8), (regs.RB_SIZE, RING_LOG2_DW - 1), (regs.RB_RPTR_ADDR_LO, RPTR_WB),
         (regs.IH_BASE_LO, IH_RING >> 8), (regs.IH_SIZE, IH_LOG2 + 3), (regs.IH_WPTR_ADDR_LO, IH_WB),
         (regs.IH_CNTL, regs.IH_CNTL.ENABLE.put(1) | regs.IH_CNTL.WPTR_WB.put(1)),
         (regs.INT_ENABLE, regs.INT_ENABLE.IH_PENDING.put(1)),
         (regs.RB_CNTL, regs.RB_CNTL.ENABLE.put(1) | regs.RB_CNTL.RPTR_WB.put(1))]
    return [("write", reg.addr(), int(v)) for reg, v in w]


def _dwords(d) -> bytes:
    return np.asarray(d, dtype=np.uint32).tobytes()


def idle_work(cycles: int) -> Work:
    """The design set up and left alone for `cycles`."""
    return Work("idle", setup_ops() + [("mark",), ("idle", cycles), ("mark",)])


def dma_work(rounds: int) -> Work:
    """`rounds` submissions of one IB of 32 back-to-back 4 KiB DMA copies, each ending in a
    RELEASE_MEM with an interrupt that the work waits for and acknowledges (IH_RPTR)."""
    n, size = DMA_COPIES, DMA_COPY_BYTES
    ib = sum((pm4.dma_data(DST + i * size, SRC + i * size, size) for i in range(n)), [])
    ring: list[int] = []
    ops = setup_ops() + [("mark",)]
    for r in range(rounds):
        ring += pm4.indirect_buffer(IB, len(ib))
        ring += pm4.release_mem(OUT, r + 1, data_sel="DATA_32", int_sel="SEND_INT_ON_CONFIRM")
        if len(ring) > 1 << RING_LOG2_DW:
            raise ValueError(f"{rounds} rounds do not fit the ring")
        ops += [("write", regs.RB_DOORBELL.addr(), len(ring)), ("irq",),
                ("write", regs.IH_RPTR.addr(), (r + 1) * IH_ENTRY_BYTES)]
    ops.append(("mark",))
    src = (np.arange(n * size) % 251).astype(np.uint8).tobytes()
    return Work("dma", ops, [(SRC, src), (IB, _dwords(ib)), (RING, _dwords(ring))])


def place(work: Work, mem: np.ndarray) -> None:
    """Put the work's memory image into a device's memory view."""
    for addr, data in work.mem:
        mem[addr:addr + len(data)] = np.frombuffer(data, dtype=np.uint8)


# ------------------------------------------------------------------------------ the harness

def _sources(data_width: int) -> list[Path]:
    h = sim.HDL_DIR
    return [gpu_verilog(data_width), h / "axi_mem.v", h / "axi_checker.v", h / "mmio_master.v",
            h / "tb_top.v", h / "tb_raw.v"]


def build_raw(simulator: str, data_width: int = 64) -> Path:
    """Compile tb_raw for `simulator` once (cached like testbench.sim builds); its folder."""
    reason = sim.unavailable_reason(simulator)
    if reason:
        raise sim.SimulatorUnavailable(reason)
    sim.setup_env()
    mem = memory_sources()
    half = sim.CLOCK_PERIOD_NS // 2
    c_sources = list(mem["c_sources"] if simulator == "verilator" else mem["vpi_sources"])
    # Icarus compiles Amaranth's Verilog as the co-simulation's build does (icarus_verilog)
    rewrite = [Path(icarus_verilog.__file__)] if simulator == "icarus" else []
    key = sim._digest([simulator, "raw", data_width, half, sim.VERILATOR_WAIVERS, sim.VERILATOR_FAST_ARGS,
                       sim.VERILATOR_FAST_MAKE], _sources(data_width) + c_sources + rewrite)
    build_dir = sim.BUILD / "sim" / f"{simulator}-raw-dw{data_width}-{key}"
    stamp = build_dir / ".built"
    with sim._locked(sim.BUILD / "sim" / f".lock-{simulator}-raw-dw{data_width}-{key}"):
        if stamp.exists():
            return build_dir
        shutil.rmtree(build_dir, ignore_errors=True)
        build_dir.mkdir(parents=True)
        defines = [f"-DGPUCOSIM_HDL_CLOCK={half}", f"-I{sim.HDL_DIR}", f"-I{sim.CSRC_DIR}"]
        if simulator == "verilator":
            cmd = ["verilator", "--binary", *sim.VERILATOR_WAIVERS, *sim.VERILATOR_FAST_ARGS,
                   "--timescale", "1ns/1ps", "--top-module", "tb_raw", f"-GDATA_WIDTH={data_width}",
                   *defines, "-Mdir", str(build_dir), "-o", "tb_raw", "--build-jobs", "2",
                   *[a for m in (*sim.VERILATOR_FAST_MAKE, *sim._coroutine_flags()) for a in ("-MAKEFLAGS", m)],
                   *map(str, _sources(data_width)), *map(str, c_sources)]
            cmds = [cmd]
        else:
            (build_dir / "cmds.f").write_text("+timescale+1ns/1ps\n")
            cmds = [["iverilog-vpi", f"--name={mem['vpi_name']}", *map(str, c_sources)],
                    ["iverilog", "-g2012", "-o", str(build_dir / "tb_raw.vvp"), "-s", "tb_raw",
                     f"-Ptb_raw.DATA_WIDTH={data_width}", *defines, "-f", str(build_dir / "cmds.f"),
                     *map(str, icarus_verilog.icarus_sources(_sources(data_width), build_dir))]]
        log = build_dir / "build.log"
        with open(log, "w") as f:
            for c in cmds:
                r = subprocess.run(c, cwd=build_dir, stdout=f, stderr=subprocess.STDOUT)
                if r.returncode:
                    raise RuntimeError(f"{simulator} build of the raw harness failed:\n{log.read_text()[-4000:]}")
        stamp.write_text(json.dumps({"sim": simulator, "design": "raw", "key": key}))
    return build_dir


RAW_TIMEOUT_S = 900


def run_raw(work: Work, simulator: str = "verilator", data_width: int = 64) -> dict:
    """Run `work` on the raw harness: {"cycles", "seconds", "cycles_per_s"} between its marks.
    Verilator stamps the marks with the wall clock; on Icarus the seconds are the process's
    less those of the same run with nothing between the marks."""
    n, stamps, wall = _run(work, simulator, data_width)
    if stamps:
        s = (stamps[1] - stamps[0]) / 1e9
    else:
        first = work.ops.index(("mark",))
        empty = Work(work.name, work.ops[:first + 1] + [("mark",)], work.mem)
        s = wall - _run(empty, simulator, data_width)[2]
    return {"cycles": n, "seconds": s, "cycles_per_s": n / s}


def _run(work: Work, simulator: str, data_width: int) -> tuple[int, list[int], float]:
    build_dir = build_raw(simulator, data_width)
    with tempfile.TemporaryDirectory(prefix="gpucosim-raw-") as d, SharedMemory(MEM_SIZE) as mem:
        place(work, mem.view)
        mem.view.flush()
        script, times = Path(d) / "script.hex", Path(d) / "times"
        script.write_text("\n".join(f"{w:08x}" for w in work.script()) + "\n")
        args = [f"+script={script}", f"+times={times}"]
        if simulator == "verilator":
            cmd = [str(build_dir / "tb_raw"), *args]
        else:
            cmd = ["vvp", "-M", str(build_dir), "-m", memory_sources()["vpi_name"], str(build_dir / "tb_raw.vvp"),
                   "-none", *args]
        env = {**os.environ, "GPUCOSIM_MEM_FILE": str(mem.path)}
        t0 = time.perf_counter()
        try:
            # a harness that never reaches its last mark (a broken build, a hung design) must not
            # spin forever: the longest work takes about a minute on a loaded machine
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=d, timeout=RAW_TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            raise RuntimeError(f"raw {simulator} run of {work.name} did not finish in {RAW_TIMEOUT_S} s "
                               f"(a hang: its last output follows)\n{out[-2000:]}") from None
        wall = time.perf_counter() - t0
        out = p.stdout + p.stderr
        cycles = [int(line.split()[1]) for line in out.splitlines() if line.startswith("cycle ")]
        stamps = [int(x) for x in times.read_text().split()] if times.exists() else []
        if p.returncode or "raw: done" not in out or len(cycles) != 2 or len(stamps) not in (0, 2):
            raise RuntimeError(f"raw {simulator} run of {work.name} failed (exit {p.returncode}):\n{out[-3000:]}")
        if "AXI checker" in out:
            raise RuntimeError(f"raw {simulator} run of {work.name}: {out[-2000:]}")
    return cycles[1] - cycles[0], stamps, wall
