"""The curated RTL mutants: one plausible bug per behaviour the contract pins, applied to
the Amaranth source in a scratch copy (build/mutate/rtl/<name>), each run against the
directed RTL tests of its block and then a short RTL-vs-model campaign, on Icarus
(a fresh build of the whole front end takes about 5 s there against about 40 s on
Verilator, and these runs are short; measured in docs/verification.md).

A mutant is killed when a directed test fails or the campaign finds a mismatch. The
unmutated copy runs everything first: if it fails, no mutant result would mean anything.

    python -m testbench.mutate --rtl                 # all of them (make mutate PART=rtl)
    python -m testbench.mutate.rtl NAME...           # some, with each one's output
"""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..argtypes import OneLineParser
from ..pipes import pipe_safe
from .patch import ROOT, Patch, run_pytest, scratch_copy

SIM = "icarus"
DIFFTEST_STREAMS = 48  # two of every kind of stream (the generator's cycle is 24)
CP_TESTS = (("tests/difftest/test_rtl_vs_model.py",),)
DMA_TESTS = (("tests/rtl/test_dma_rtl.py", "-k", "dma_64 or small_config or longer_than_4k"),)
MUX_TESTS = (("tests/rtl/amaranth_sim/test_rtl_axi_mux.py",), ("tests/rtl/test_dma_rtl.py", "-k", "dma_64"))
REG_TESTS = (("tests/rtl/test_regs.py",),)
MMU_TESTS = (("tests/rtl/amaranth_sim/test_rtl_mmu.py",),)  # the MMU alone against spec.vm.walk (Amaranth's simulator)
RAW_CHECK = ("tests.cosim.cocotb_drivers", "umd_transfer__check_raw_chain_under_write_latency")
# AMD's own packets on the RTL (tests/spec/amd/test_amd_conformance.py, run there by test_rtl_drivers.py)
AMD_CHECKS = ("tests.cosim.cocotb_drivers", ("amd_conformance__check_amd_streams_run",
                                       "amd_conformance__check_amd_differences_refused"))


@dataclass(frozen=True)
class RtlMutant:
    patch: Patch
    tests: tuple[tuple[str, ...], ...] = CP_TESTS  # pytest runs (arguments each): the block's directed tests
    cocotb: tuple[tuple[str, object], ...] = ()  # (module, testcase or testcases) run straight through sim.run
    difftest: int = DIFFTEST_STREAMS  # streams of the RTL-vs-model campaign (0: none)


def _m(name, path, before, after, why, **kw) -> RtlMutant:
    return RtlMutant(Patch(name, path, before, after, why), **kw)


MUTANTS = (
    # ---- the command processor (rtl/cp/)
    _m("wait-lt-as-le", "rtl/cp/pm4/wait_reg_mem.py", '"LT": "<",', '"LT": "<=",',
       "WAIT_REG_MEM's LT holds on the boundary"),
    _m("wait-ge-as-gt", "rtl/cp/pm4/wait_reg_mem.py", '"GE": "=>",', '"GE": ">",',
       "WAIT_REG_MEM's GE fails on the boundary"),
    _m("wait-mask-ignored", "rtl/cp/pm4/wait_reg_mem.py", 'masked.eq(word & field(p, WRM, "MASK"))', "masked.eq(word)",
       "WAIT_REG_MEM compares the whole dword, not the masked bits"),
    _m("ib-nesting-unchecked", "rtl/cp/parser.py", "(~chain & lvl[cp.ib_levels], CpError.IB_NESTING, False)",
       "(~chain & lvl[cp.ib_levels] & 0, CpError.IB_NESTING, False)", "an IB nested past CAPS.IB_LEVELS runs"),
    _m("chain-in-ring-allowed", "rtl/cp/parser.py",
       'unsupported = unsupported | (lvl[0] & field(p_now, ib, "CHAIN"))',
       'unsupported = unsupported | (lvl[0] & field(p_now, ib, "CHAIN") & 0)', "a CHAIN in the ring is not refused"),
    _m("ib-size-zero-unchecked", "rtl/cp/packets.py", 'self.checks["ib_size_zero"] = lambda d: d[size.bits] == 0',
       'self.checks["ib_size_zero"] = lambda d: d[size.bits] == 0x80000', "IB_SIZE 0 is not refused"),
    _m("chain-as-call", "rtl/cp/pm4/indirect_buffer.py", 'with m.If(field(p, IB, "CHAIN")):',
       'with m.If(field(p, IB, "CHAIN") & 0):', "a CHAIN is run as a call: the rest of the IB runs after it"),
    _m("fence64-low-dword-only", "rtl/cp/pm4/release_mem.py", "c.blk_mask.eq(Mux(fence, Mux(two, 3, 1) << addr[2:5]",
       "c.blk_mask.eq(Mux(fence, Mux(two, 1, 1) << addr[2:5]",
       "RELEASE_MEM DATA_64 (and TIMESTAMP) writes only the low dword"),
    _m("eop-data-swapped", "rtl/cp/pm4/release_mem.py",
       '[field(p, RM, "INT_CTXID"), field(p, RM, "DATA_LO"), field(p, RM, "DATA_HI"), p[lo.dword]]',
       '[field(p, RM, "INT_CTXID"), field(p, RM, "DATA_HI"), field(p, RM, "DATA_LO"), p[lo.dword]]',
       "the EOP IH entry carries the fence's dwords swapped"),
    _m("ih-wptr-half-step", "rtl/cp/ih.py", "m.d.sync += c.ih_wptr.eq(c.ih_wptr + ih_spec.ENTRY_BYTES)",
       "m.d.sync += c.ih_wptr.eq(c.ih_wptr + ih_spec.ENTRY_BYTES // 2)",
       "IH_WPTR moves half an entry: entries overwrite each other"),
    _m("ih-overflow-late", "rtl/cp/processor.py", "ih_entry_full.eq(ih_used >= ih_bytes)",
       "ih_entry_full.eq(ih_used > ih_bytes)", "the IH ring takes one entry more than it holds"),
    _m("doorbell-overflow-off-by-one", "rtl/cp/queues.py", 'follow.eq(d["rptr_q"][i] + d["ring_size_q"][i])',
       'follow.eq(d["rptr_q"][i] + d["ring_size_q"][i] + 1)', "a wptr one dword more than the ring ahead is taken"),
    _m("doorbell-backwards-small", "rtl/cp/queues.py", "back = ahead[31]", "back = ahead[30]",
       "a wptr moved back by less than 2^30 is taken as far ahead"),
    _m("rptr-write-back-inverted", "rtl/cp/parser.py",
       "with m.If(c.qc.rptr_wb):\n                addr = Cat(Const(0, 2), c.qc.rptr_addr_lo[2:]",
       "with m.If(~c.qc.rptr_wb):\n                addr = Cat(Const(0, 2), c.qc.rptr_addr_lo[2:]",
       "the rptr is written back only when RB_CNTL.RPTR_WB is off"),
    _m("write-data-stride", "rtl/cp/pm4/write_data.py", "wd_addr.eq(Mux(no_incr, wd_addr, wd_addr + 4))",
       "wd_addr.eq(Mux(no_incr, wd_addr, wd_addr + 8))",
       "WRITE_DATA's data dwords land 8 bytes apart"),
    _m("qword-rule-as-dword", "rtl/cp/packets.py", "(p[lo.dword][:ceil_log2(r.align)] != 0)",
       "(p[lo.dword][:2] != 0)", "a 64-bit fence at a dword (not qword) address is not refused"),
    # ---- gfx9's packet rules (issue 18)
    _m("type2-exact-filler-only", "rtl/cp/packets.py",
       "tag.filler.eq((dword[_TYPE.bits] == pk.PACKET_TYPE2) |",
       "tag.filler.eq((dword == pk.TYPE2_FILLER) |",
       "a type-2 dword with PAD bits set (amdgpu's PACKET2(v)) is refused, not skipped",
       cocotb=(AMD_CHECKS,)),
    _m("nop-pad-counted", "rtl/cp/packets.py",
       "(type3 & (opcode == pk.NOP.opcode) & (count == _COUNT.max))",
       "(type3 & (opcode == pk.NOP.opcode) & (count == _COUNT.max) & 0)",
       "AMD's header-only NOP (0xFFFF1000) is read as a NOP of 16,384 payload dwords",
       cocotb=(AMD_CHECKS,)),
    _m("int-sel-3-interrupts", "rtl/cp/pm4/release_mem.py",
       'return (sel == v["SEND_INT"]) | (sel == v["SEND_INT_ON_CONFIRM"])', 'return sel != v["NONE"]',
       "RELEASE_MEM INT_SEL 3 (data with confirm, no interrupt) raises an EOP interrupt",
       cocotb=(AMD_CHECKS,)),
    _m("addr-incr-ignored", "rtl/cp/pm4/write_data.py",
       'return field(p, WD, "ADDR_INCR") == WD.field("ADDR_INCR").values["NO_INCREMENT"]',
       'return field(p, WD, "ADDR_INCR") == 2',
       "WRITE_DATA ADDR_INCR = NO_INCREMENT (amdgpu's WR_ONE_ADDR) walks the address anyway",
       cocotb=(AMD_CHECKS,)),
    _m("ib-beyond-bus-unchecked", "rtl/cp/parser.py", "(c.acc_beyond, CpError.BUS_DECERR, True)]",
       "(c.acc_beyond & 0, CpError.BUS_DECERR, True)]",
       "an IB whose IB_BASE_HI reaches past the bus is fetched from the address cut to the bus",
       cocotb=(AMD_CHECKS,)),
    _m("raw-wait-dropped", "rtl/cp/pm4/dma_data.py", 'dma.cmd_raw_wait.eq(field(p, DD, "RAW_WAIT"))',
       "dma.cmd_raw_wait.eq(0)", "the CP does not hand RAW_WAIT to the engine",
       tests=(), cocotb=(RAW_CHECK,)),
    _m("int-status-not-w1c", "rtl/csr.py", "~(bridge.wr_data[1:2] & wmask[1:2])",
       "~(bridge.wr_data[1:2] & wmask[1:2] & 0)", "INT_STATUS.EOP cannot be cleared by writing 1",
       tests=CP_TESTS + REG_TESTS),
    # ---- the DMA engine (rtl/dma/) and the AXI mux
    _m("burst-clamp-removed", "rtl/dma/engine.py", "bnd_beats = min(self.max_burst_beats, 4096 // B)",
       "bnd_beats = self.max_burst_beats", "bursts longer than 4 KiB cross 4 KiB boundaries",
       tests=DMA_TESTS, difftest=0),
    _m("dma-raw-ignored", "rtl/dma/commands.py", "qa.w.data.raw.eq(dma.cmd_raw_wait)", "qa.w.data.raw.eq(0)",
       "the engine starts a RAW_WAIT read before the earlier writes are answered",
       tests=DMA_TESTS, difftest=0),
    _m("dma-first-strobe", "rtl/dma/write.py", "Mux(wqh.first & (w_beat == 0), first_mask, all_lanes)",
       "Mux(wqh.first & (w_beat == 0), all_lanes, all_lanes)",
       "an unaligned transfer writes the bytes before its destination in its first beat", tests=DMA_TESTS),
    _m("mux-w-to-first-master", "rtl/axi_mux.py", "m.d.sync += wq[wq_index(wq_wp)].eq(aw_sel)",
       "m.d.sync += wq[wq_index(wq_wp)].eq(0)",
       "W bursts are taken from master 0 whichever master's AW went first", tests=MUX_TESTS, difftest=0),
    # ---- the MMU (rtl/mmu.py, issue 15); the difftest's VM streams translate 40 % of its IBs
    _m("mmu-write-needs-read", "rtl/mmu.py",
       'perm = Cat(pte[vm_spec.BIT["READABLE"].bit], pte[vm_spec.BIT["WRITEABLE"].bit],',
       'perm = Cat(pte[vm_spec.BIT["READABLE"].bit], pte[vm_spec.BIT["READABLE"].bit],',
       "a write is permitted by READABLE: a read-only page takes writes", tests=MMU_TESTS),
    _m("mmu-invalidate-ignored", "rtl/mmu.py", "m.d.sync += t_valid[i].eq(0)", "m.d.sync += t_valid[i].eq(t_valid[i])",
       "a TLB invalidation is acknowledged but drops nothing: stale translations after an unmap",
       tests=MMU_TESTS),
    _m("mmu-huge-page-offset", "rtl/mmu.py", "m.d.comb += leaf_ppn.eq(Cat(t.addr[PS:PS + span], pte_addr[span:]))",
       "m.d.comb += leaf_ppn.eq(pte_addr)",
       "a huge page maps every 4 KiB page in it to its first", tests=MMU_TESTS),
    _m("mmu-range-unchecked", "rtl/mmu.py", "with m.If(beyond & ~bypass):", "with m.If(beyond & bypass):",
       "an address beyond the page tables is translated by its low bits (aliasing), not refused",
       tests=MMU_TESTS),
)


@dataclass
class Result:
    mutant: RtlMutant
    killed: bool
    by: str  # what killed it (or "survived")
    seconds: float
    output: str


def _cocotb(work: Path, module: str, testcase, timeout: float) -> tuple[int, str]:
    """cocotb testcase(s) of `module` on the whole front end: 0 when every one ran and passed."""
    names = [testcase] if isinstance(testcase, str) else list(testcase)
    code = (f"import sys; from testbench import sim; from testbench.sim.design import gpu_design; "
            f"r = sim.run(gpu_design(64), {SIM!r}, {module!r}, {names!r}, tag='mutate'); "
            f"print(r.explain()); sys.exit(0 if r.ok and set({names!r}) <= set(r.passed) else 1)")
    return _run(work, [sys.executable, "-c", code], timeout)


def _difftest(work: Path, streams: int, timeout: float) -> tuple[int, str]:
    return _run(work, [sys.executable, "-m", "testbench.difftest", "--sim", SIM, "--streams", str(streams),
                       "--json", str(work / "build" / "difftest.json")], timeout)


def _run(work: Path, cmd: list[str], timeout: float) -> tuple[int, str]:
    import os

    env = dict(os.environ, PYTHONPATH=str(work), SIM=SIM)
    env.pop("PYTEST_XDIST_WORKER", None)
    try:
        r = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        return r.returncode, "\n".join((r.stdout + r.stderr).strip().splitlines()[-12:])
    except subprocess.TimeoutExpired:
        return -9, f"timed out after {timeout:.0f} s"


def run_one(m: RtlMutant | None, work: Path, timeout: float = 900) -> Result:
    """`m` applied to a fresh copy at `work` (None: the copy unmutated), its tests run in turn
    until one fails."""
    t0 = time.monotonic()
    scratch_copy(work)
    if m is not None:
        m.patch.apply(work)
    steps = []
    mm = m or BASELINE
    for args in mm.tests:
        steps.append((f"directed tests ({' '.join(args)})",
                      lambda args=args: run_pytest(work, [*args, f"--basetemp={work / '.pytest-tmp'}"], timeout,
                                                   env={"SIM": SIM})[::2]))
    for mod, case in mm.cocotb:
        what = case if isinstance(case, str) else ", ".join(case)
        steps.append((f"cocotb {what}", lambda mod=mod, case=case: _cocotb(work, mod, case, timeout)))
    if mm.difftest:
        steps.append((f"difftest ({mm.difftest} streams)", lambda: _difftest(work, mm.difftest, timeout)))
    for what, step in steps:
        code, out = step()
        if code not in (0,):
            return Result(mm, True, what, time.monotonic() - t0, out)
    return Result(mm, False, "survived", time.monotonic() - t0, out if steps else "")


# the unmutated copy runs the union of every mutant's steps
BASELINE = RtlMutant(Patch("baseline", "", "", "", "the unmutated tree"),
                     tests=tuple(dict.fromkeys(CP_TESTS + REG_TESTS + DMA_TESTS + MUX_TESTS)),
                     cocotb=(RAW_CHECK, AMD_CHECKS), difftest=DIFFTEST_STREAMS)


def run_rtl(report, deadline: float, jobs: int = 2, names: list[str] | None = None) -> dict:
    """Run the baseline, then the mutants (`jobs` at a time) until `deadline`; add their
    outcomes to `report` (layer "rtl"). Returns the run's facts for the report."""
    from .report import Outcome

    work = ROOT / "build" / "mutate" / "rtl"
    todo = [m for m in MUTANTS if names is None or m.patch.name in names]
    for m in todo:
        m.patch.check()  # every patch still applies, before minutes are spent
    t0 = time.monotonic()
    print(f"mutate: RTL baseline (the unmutated tree) on {SIM} ...", flush=True)
    base = run_one(None, work / "baseline")
    if base.killed:
        raise RuntimeError(f"mutate: the unmutated tree fails its RTL tests ({base.by}); no RTL mutant result "
                           f"would mean anything:\n{base.output}")
    print(f"mutate: baseline passed in {base.seconds:.0f} s; {len(todo)} RTL mutants, {jobs} at a time ...",
          flush=True)
    results: dict[str, Result | None] = {m.patch.name: None for m in todo}

    def one(m: RtlMutant) -> None:
        if time.monotonic() > deadline:
            return
        r = run_one(m, work / m.patch.name)
        results[m.patch.name] = r
        print(f"  {'killed  ' if r.killed else 'SURVIVED'} {m.patch.name:28s} {r.seconds:5.0f} s  {r.by}", flush=True)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, todo))
    for m in todo:
        r = results[m.patch.name]
        verdict = "not run" if r is None else "killed" if r.killed else "survived"
        report.outcomes.append(Outcome("rtl", m.patch.path, m.patch.key, m.patch.diff, verdict,
                                       r.by if r else "", m.patch.name))
    return {"simulator": SIM, "baseline_seconds": round(base.seconds, 1), "mutants": len(todo),
            "seconds": round(time.monotonic() - t0, 1), "difftest_streams": DIFFTEST_STREAMS,
            "killed_by": {n: (r.by if r else None) for n, r in results.items()},
            "seconds_each": {n: (round(r.seconds, 1) if r else None) for n, r in results.items()}}


@pipe_safe
def main(argv: list[str]) -> int:
    known = [m.patch.name for m in MUTANTS]
    ap = OneLineParser(prog="python -m testbench.mutate.rtl", options_in_errors=True,
                                 description="Run RTL mutants one by one, each with its tests' output "
                                             "(all of them without NAME; `baseline` is the unmutated RTL).",
                                 epilog=f"mutants: {', '.join(known)}")
    ap.add_argument("names", nargs="*", metavar="NAME", help="a mutant's name, or baseline")
    names = ap.parse_args(argv).names or known
    unknown = sorted(set(names) - set(known) - {"baseline"})
    if unknown:
        ap.error(f"unknown RTL mutant(s) {', '.join(unknown)} (known: {', '.join(known)}; or baseline)")
    work = ROOT / "build" / "mutate" / "rtl"
    for n in names:
        m = None if n == "baseline" else next(x for x in MUTANTS if x.patch.name == n)
        r = run_one(m, work / n)
        verdict = ("FAILED" if r.killed else "passed") if m is None else ("killed" if r.killed else "SURVIVED")
        print(f"{verdict} {n} in {r.seconds:.0f} s: {r.by}\n    "
              + r.output.replace("\n", "\n    "))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
