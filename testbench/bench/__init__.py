"""`make bench`: performance figures of the RTL and the driver, on Verilator, and how much
faster the reference model is than the RTL on the same apps (testbench/bench/model_speed.py).

The co-simulation's own speed (issue 13) is measured against two references in the same
run, so a loaded machine shows in both: the raw baseline (the same design and memory
model under an HDL stimulus, no cocotb: testbench/bench/raw.py), and the path before
(GPUCOSIM_CLOCK=cocotb: cocotb drives the clock, cocotbext-axi the MMIO) on the same
apps and difftest streams.

Writes build/bench.json and prints the same as a table, with the goals from the design
brief beside each figure. Goals are targets to report against; nothing here fails when
one is missed (benchmarks never assert timing).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from testbench import sim
from testbench.argtypes import OneLineParser, int_one_of, report_file_problem
from testbench.pipes import pipe_safe, write_whole
from testbench.sim.design import gpu_design

# metric → (goal text, check on the value or None)
GOALS = {
    "bus_bytes": ("", None),
    "dma_copy_eff_4k": (">= 0.99 (Xilinx DataMover 0.9775, open AXI CDMA 0.939)", lambda v: v >= 0.99),
    "dma_copy_eff_4k_lat64": (">= 0.90", lambda v: v >= 0.90),
    "dma_fill_eff_4k": ("", None),
    # the SDMA copy engine (issue 16): COPY_LINEAR on its own DMA engine
    "sdma_copy_eff_4k": (">= 0.99", lambda v: v >= 0.99),
    "sdma_copy_eff_4k_single": ("", None),
    "cp_plus_sdma_bytes_per_cycle": ("", None),
    "cp_plus_sdma_vs_alone": ("", None),
    "sdma_copy_eff_4k_32b": (">= 0.99", lambda v: v >= 0.99),
    "cp_plus_sdma_bytes_per_cycle_32b": ("", None),
    "cp_plus_sdma_mb_s": ("both engines at once, bytes_per_cycle_32b x Fmax of top_32 (make fpga)", None),
    "dma_16b_copy_cycles": ("<= 11 (open AXI CDMA 15)", lambda v: v <= 11),
    "cp_doorbell_to_fetch_cycles": ("<= 4", lambda v: v <= 4),
    "cp_submit_to_irq_cycles": ("<= 32", lambda v: v <= 32),
    # the CP's second hardware queue (issue 16): doorbell -> irq of a one-packet job on it
    "hp_latency_idle_cycles": ("", None),
    "hp_latency_under_load_cycles": ("<= 2 x idle, while queue 0 runs a long IB", None),
    "hp_latency_load_vs_idle": ("<= 2", lambda v: v <= 2),
    # the 32-bit top, whose Fmax `make fpga` measures: time = cycles / Fmax (fpga/report.py)
    "cp_submit_to_irq_cycles_32b": ("", None),
    "dma_copy_eff_4k_32b": (">= 0.99", lambda v: v >= 0.99),
    "dma_16b_copy_cycles_32b": ("", None),
    "cp_submit_to_irq_ns": ("<= 400 (cycles_32b / Fmax of top_32, make fpga)", lambda v: v <= 400),
    "dma_copy_mb_s_32b": (">= 380 (eff_4k_32b x 4 B x Fmax of top_32)", lambda v: v >= 380),
    "cp_stream_dwords_per_cycle_lat16": ("", None),
    # the MMU (issue 15): a walk of both levels at the memory's minimum latency, translated copies
    "mmu_walk_cycles": ("", None),
    "tlb_hit_rate_copy_1mib": ("", None),
    "dma_copy_eff_4k_vm": (">= 0.98 (warm TLB)", lambda v: v >= 0.98),
    "dma_copy_eff_4k_same_pages_physical": ("", None),
    "dma_copy_eff_1mib_cold": (">= 0.9", lambda v: v >= 0.9),
    "alloc_ioctls_per_1k_small": ("pools on <= 1/50 of off", lambda v: v["on"] <= v["off"] / 50),
    "driver_ioctls_per_cmd": ("batch 64 <= 1/10 of batch 1", lambda v: v["64"] <= v["1"] / 10),
    "driver_doorbells_per_cmd": ("batch 64 <= 1/10 of batch 1", lambda v: v["64"] <= v["1"] / 10),
    "sim_cycles_per_s_dma": ("", None),
    "sim_cycles_per_s_idle": ("", None),
    "sim_speed_ratio_dma_vs_idle": (">= 0.5", lambda v: v >= 0.5),
    "sim_cycles_per_s_raw_idle": ("", None),
    "sim_cycles_per_s_raw_dma": ("", None),
    "cosim_vs_raw_idle": (">= 0.5 (issue 13)", lambda v: v >= 0.5),
    "cosim_vs_raw_dma": (">= 0.5 (issue 13)", lambda v: v >= 0.5),
    "sim_cycles_per_s_idle_before": ("", None),
    "sim_cycles_per_s_dma_before": ("", None),
    # device time before ÷ now, the smaller of long_ib and big_copy (per app: "cosim_apps")
    "cosim_speedup_vs_before": (">= 10 (issue 13)", lambda v: v >= 10),
    # the same in the simulator process's CPU time, which other jobs on the machine do not move
    "cosim_speedup_vs_before_cpu": (">= 10 (issue 13)", lambda v: v >= 10),
    "difftest_streams_per_s": ("", None),
    "difftest_streams_per_s_before": ("", None),
    "difftest_speedup_vs_before": (">= 3 (issue 13)", lambda v: v >= 3),
    # the least ratio over testbench.bench.model_speed.WORKLOADS (per app: build/bench.json "model_speedup")
    "model_speedup_device_min_verilator": (">= 100 (issue 5)", lambda v: v >= 100),
    "model_speedup_app_min_verilator": (">= 100 (issue 5)", lambda v: v >= 100),
    "model_speedup_device_min_icarus": (">= 100 (issue 5)", lambda v: v >= 100),
    "model_speedup_app_min_icarus": (">= 100 (issue 5)", lambda v: v >= 100),
    # testbench/bench/cs.py: the CS checker + shadow copies, CPU time per 1,024 dwords submitted
    "cs_submit_us_per_kdw": ("<= 200 (before shadow IBs: ~480 for the check alone)", lambda v: v <= 200),
    "cs_submit_us_per_kdw_one_ib": ("", None),
    "cs_shadow_bytes_per_submit": ("", None),
    # the app thread's own CPU time per flush, model, 300 flushes of 4 writes (examples/async_submit.py)
    "umd_flush_app_cpu_us_sync": ("", None),
    "umd_flush_app_cpu_us_async": ("<= 1/5 of sync (the CS ioctl is the submission thread's)", None),
    "umd_flush_async_vs_sync": ("<= 0.2", lambda v: v <= 0.2),
}


WIDTH_32_TESTS = ["cp_latency", "dma_throughput", "dma_small_copy", "sdma_throughput"]
WIDTH_32_FIGURES = ("cp_submit_to_irq_cycles", "dma_copy_eff_4k", "dma_16b_copy_cycles", "sdma_copy_eff_4k",
                    "cp_plus_sdma_bytes_per_cycle")


def _fmt(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}: {_fmt(x)}" for k, x in v.items())
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def table(results: dict) -> str:
    rows = [("metric", "value", "goal", "")]
    for name, (goal, ok) in GOALS.items():
        if name not in results:
            rows.append((name, "not measured", goal, ""))
            continue
        v = results[name]
        verdict = "" if ok is None else ("met" if ok(v) else "MISSED")
        rows.append((name, _fmt(v), goal, verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


SPEEDUP_APPS = ("long_ib", "big_copy")  # GPU-bound: cosim_speedup_vs_before
REPORT_APPS = ("hello", "demo")  # driver-bound: their times are reported too
DIFFTEST_STREAMS = 240


def raw_figures(data_width: int) -> dict:
    """The raw baseline on Verilator, best of 3 of each work."""
    from testbench.bench import raw as raw_bench

    out = {}
    for key, work in (("idle", raw_bench.idle_work(raw_bench.IDLE_CYCLES)),
                      ("dma", raw_bench.dma_work(raw_bench.DMA_ROUNDS))):
        runs = [raw_bench.run_raw(work, "verilator", data_width) for _ in range(3)]
        out[f"sim_cycles_per_s_raw_{key}"] = max(r["cycles_per_s"] for r in runs)
        out[f"sim_cycles_raw_{key}"] = runs[0]["cycles"]
    return out


def before_and_now_apps(log=print) -> dict:
    """Device and app time of GPU-bound and small apps on the path before (cocotb clock)
    and now (HDL clock), each run in a process of its own, alternating."""
    from testbench.bench import model_speed

    apps = {}
    for name in SPEEDUP_APPS + REPORT_APPS:
        app = model_speed.WORKLOADS[name]
        before = model_speed.measure(app, "verilator", 1, clock="cocotb")
        now = model_speed.measure(app, "verilator", 3, clock="hdl")
        row = {"before_device_ms": round(before["device_s"] * 1e3, 2), "now_device_ms": round(now["device_s"] * 1e3, 2),
               "before_app_ms": round(before["app_s"] * 1e3, 2), "now_app_ms": round(now["app_s"] * 1e3, 2),
               "cycles": now["cycles"], "cycles_before": before["cycles"]}
        row["device_x"] = round(before["device_s"] / now["device_s"], 2)
        # the same in CPU time: what the machine's other jobs do not move
        row["before_device_cpu_ms"] = round(before["device_cpu_s"] * 1e3, 2)
        row["now_device_cpu_ms"] = round(now["device_cpu_s"] * 1e3, 2)
        row["device_cpu_x"] = round(before["device_cpu_s"] / now["device_cpu_s"], 2)
        row["app_x"] = round(before["app_s"] / now["app_s"], 2)
        apps[name] = row
        log(f"  {name:10s} device {row['before_device_ms']:9.1f} -> {row['now_device_ms']:8.1f} ms ({row['device_x']}x,"
            f" CPU {row['device_cpu_x']}x)"
            f"  app {row['before_app_ms']:9.1f} -> {row['now_app_ms']:8.1f} ms ({row['app_x']}x)"
            f"  cycles {row['cycles_before']} / {row['cycles']}")
    return apps


def difftest_figures(data_width: int, log=print) -> dict:
    """The same difftest streams on the path before and now: streams per second."""
    from testbench.difftest.campaign import DEFAULT_SEED
    from testbench.difftest.simulator.runner import run_rtl

    out = {}
    for clock, key in (("cocotb", "difftest_streams_per_s_before"), ("hdl", "difftest_streams_per_s")):
        recs, seconds, problems = run_rtl("verilator", DEFAULT_SEED, 0, DIFFTEST_STREAMS, data_width=data_width,
                                          clock=clock)
        bad = [r for r in recs if not r["ok"]]
        if problems or bad:
            raise RuntimeError(f"difftest on the {clock} clock: {len(bad)} mismatch(es) {problems[:1]}")
        out[key] = len(recs) / seconds
        log(f"  difftest, {clock} clock: {len(recs)} streams in {seconds:.1f} s")
    return out


def alloc_ioctls(n: int = 1000) -> dict:
    """ioctls a UMD spends on `n` small buffers (64 B .. 4 KiB, allocated then freed), with
    the pools (BO cache, slabs) on and off, on the model (the count does not depend on the
    backend)."""
    import random

    import kmd_model
    import umd
    from testbench.refmodel import RefModel

    out = {}
    for pools in (True, False):
        kmd_model.bind(RefModel())
        gpu = umd.open(pools=pools)
        rng = random.Random(1)
        n0 = gpu.ws.ioctls
        bufs = [gpu.alloc(rng.choice([64, 100, 256, 1000, 4096])) for _ in range(n)]
        for b in bufs:
            b.free()
        out["on" if pools else "off"] = (gpu.ws.ioctls - n0) * 1000 // n
        gpu.close()
        kmd_model.unbind()
    return out


def async_flush_cpu(submits: int = 300) -> dict:
    """The app thread's CPU time per flush, sync and async submission, on the model."""
    import kmd_model
    from examples import async_submit
    from testbench.refmodel import RefModel

    kmd_model.bind(RefModel())
    try:
        sync, asy = (async_submit.run(submits, 4, mode)["flush_cpu_us"] for mode in (False, True))
    finally:
        kmd_model.unbind()
    return {"umd_flush_app_cpu_us_sync": sync, "umd_flush_app_cpu_us_async": asy,
            "umd_flush_async_vs_sync": asy / sync}


@pipe_safe
def main(argv: list[str] | None = None, prog: str = "python -m testbench.bench") -> int:
    """`prog`: the command the user typed, which usage errors and --help name (`gpucosim bench`)."""
    # (no abbreviations, as gpucosim's other subcommands: `gpucosim bench --data 32` was
    # --data-width 32, and `--speed none` started tens of minutes of benchmarks)
    ap = OneLineParser(prog=prog, options_in_errors=True, allow_abbrev=False,
                       description=" ".join(__doc__.split("\n\n")[0].split()),
                       epilog="It builds the Verilator designs it needs and runs them, the cocotb-clock baselines "
                              "and (unless --speed-sims none) the model against each simulator: tens of minutes on "
                              "2 cores (76 min for --data-width 32 --speed-sims none on a loaded 2-core machine). "
                              "Ctrl-C stops it; -o is written only at the end, an earlier report left as it was.")
    # (-o and --data-width had no help: `gpucosim bench --help` showed them bare)
    ap.add_argument("--data-width", type=int_one_of((32, 64, 128, 256)), default=64, metavar="{32,64,128,256}",
                    help="memory bus width in bits of the design measured (default 64; the 32-bit top's cycle "
                         "figures are measured too)")
    ap.add_argument("-o", "--output", default=str(sim.BUILD / "bench.json"), metavar="JSON",
                    help="where the figures go, as JSON (default build/bench.json); the same is printed as a table")
    ap.add_argument("--speed-sims", default="verilator", metavar="SIMS",
                    help="simulators the model is compared with, comma-separated, or none (default verilator)")
    args = ap.parse_args(argv)
    from testbench.bench.model_speed import parse_sims

    sims, problem = parse_sims(args.speed_sims, none_ok=True)
    if problem:
        ap.error(f"--speed-sims: {problem}")
    out = Path(args.output)
    # (before minutes of benchmarks, not after: a folder that takes no file, -o immutable/b.json,
    # ran them all and failed at the end; and a file other than an earlier report, -o README.md,
    # was removed below and written over; an earlier report this process cannot write, which
    # os.access here said root could, always)
    if problem := report_file_problem(args.output, "figures of an earlier bench"):
        ap.error(f"-o: {problem}")
    design = gpu_design(args.data_width)
    # The cocotb runs write their figures to a file of the run's own: -o (and its folder)
    # is written once, at the end (it was written by the runs, its folder made before them,
    # and an earlier report removed before a run that might fail)
    own = sim.BUILD / "runs" / f"bench-{os.getpid()}.json"
    own.parent.mkdir(parents=True, exist_ok=True)
    own.unlink(missing_ok=True)
    env = {"GPUCOSIM_BENCH_OUT": str(own.resolve())}
    res = sim.run(design, "verilator", "testbench.bench.cocotb_bench", tag="bench", extra_env=env, clock="hdl")
    # the path before issue 13, on a tenth of the work (its cycles per second do not depend on it)
    before = sim.run(design, "verilator", "testbench.bench.cocotb_bench", "sim_speed", tag="bench-before",
                     extra_env={**env, "GPUCOSIM_BENCH_SCALE": "0.1"}, clock="cocotb")
    results = json.loads(own.read_text()) if own.exists() else {}
    own.unlink(missing_ok=True)
    # The same cycle figures on the 32-bit top (the width of the FPGA goals), through a file
    # of the run's own (it was -o's name with -32b, removed and written over unasked)
    out32 = sim.BUILD / "runs" / f"bench32-{os.getpid()}.json"
    out32.unlink(missing_ok=True)
    res32 = sim.run(gpu_design(32), "verilator", "testbench.bench.cocotb_bench", WIDTH_32_TESTS, tag="bench32",
                    extra_env={"GPUCOSIM_BENCH_OUT": str(out32.resolve())})
    if out32.exists():
        for k, v in json.loads(out32.read_text()).items():
            if k in WIDTH_32_FIGURES:
                results[f"{k}_32b"] = v
        out32.unlink()
    print("raw baseline (testbench/bench/raw.py) ...")
    results.update(raw_figures(args.data_width))
    r = results
    if "hp_latency_idle_cycles" in r and "hp_latency_under_load_cycles" in r:
        r["hp_latency_load_vs_idle"] = r["hp_latency_under_load_cycles"] / r["hp_latency_idle_cycles"]
    if "sim_cycles_per_s_dma" in r and "sim_cycles_per_s_idle" in r:
        r["sim_speed_ratio_dma_vs_idle"] = r["sim_cycles_per_s_dma"] / r["sim_cycles_per_s_idle"]
    for key in ("idle", "dma"):
        if f"sim_cycles_per_s_{key}" in r:
            r[f"cosim_vs_raw_{key}"] = r[f"sim_cycles_per_s_{key}"] / r[f"sim_cycles_per_s_raw_{key}"]
    if r.get("sim_cycles_dma") != r.get("sim_cycles_raw_dma"):
        print(f"note: the raw harness ran the DMA work in {r.get('sim_cycles_raw_dma')} cycles, the co-simulation "
              f"in {r.get('sim_cycles_dma')}", file=sys.stderr)
    print("before (cocotb clock) and now (HDL clock), device and app time:")
    apps = before_and_now_apps()
    r["cosim_apps"] = apps
    r["cosim_speedup_vs_before"] = min(apps[a]["device_x"] for a in SPEEDUP_APPS)
    r["cosim_speedup_vs_before_cpu"] = min(apps[a]["device_cpu_x"] for a in SPEEDUP_APPS)
    r.update(difftest_figures(args.data_width))
    r["difftest_speedup_vs_before"] = r["difftest_streams_per_s"] / r["difftest_streams_per_s_before"]
    from testbench.bench import cs as cs_bench

    r.update(cs_bench.measure())
    r.update(async_flush_cpu())
    r["alloc_ioctls_per_1k_small"] = alloc_ioctls()
    if sims:
        from testbench.bench import model_speed

        print("model vs RTL, seconds inside the device and in the app (testbench/bench/model_speed.py):")
        speed = model_speed.compare(sims, model_speed.WORKLOADS)
        results["model_speedup"] = speed
        results.update(model_speed.summary(speed, sims))
    from fpga import report as fpga_report

    results.update(fpga_report.derived(fpga_report.load_other(fpga_report.FPGA_JSON), results))
    out.parent.mkdir(parents=True, exist_ok=True)
    write_whole(out, json.dumps(results, indent=1) + "\n")
    print(table(results))
    print(f"\nwritten to {out}")
    for what, x in (("bench run", res), ("bench run on the path before", before), ("bench run at 32 bits", res32)):
        if not x.ok:
            print(f"{what} failed:\n" + x.explain(), file=sys.stderr)
            return 1
    return 0

