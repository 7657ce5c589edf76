"""`make bench`: performance figures of the RTL and the driver, on Verilator, and how much
faster the reference model is than the RTL on the same apps (testbench/model_speed.py).

Writes build/bench.json and prints the same as a table, with the goals from the design
brief beside each figure. Goals are targets to report against; nothing here fails when
one is missed (benchmarks never assert timing).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from testbench import sim
from testbench.design import gpu_design

# metric → (goal text, check on the value or None)
GOALS = {
    "bus_bytes": ("", None),
    "dma_copy_eff_4k": (">= 0.99 (Xilinx DataMover 0.9775, open AXI CDMA 0.939)", lambda v: v >= 0.99),
    "dma_copy_eff_4k_lat64": (">= 0.90", lambda v: v >= 0.90),
    "dma_fill_eff_4k": ("", None),
    "dma_16b_copy_cycles": ("<= 11 (open AXI CDMA 15)", lambda v: v <= 11),
    "cp_doorbell_to_fetch_cycles": ("<= 4", lambda v: v <= 4),
    "cp_submit_to_irq_cycles": ("<= 32", lambda v: v <= 32),
    # the 32-bit top, whose Fmax `make fpga` measures: time = cycles / Fmax (fpga/report.py)
    "cp_submit_to_irq_cycles_32b": ("", None),
    "dma_copy_eff_4k_32b": (">= 0.99", lambda v: v >= 0.99),
    "dma_16b_copy_cycles_32b": ("", None),
    "cp_submit_to_irq_ns": ("<= 400 (cycles_32b / Fmax of top_32, make fpga)", lambda v: v <= 400),
    "dma_copy_mb_s_32b": (">= 380 (eff_4k_32b x 4 B x Fmax of top_32)", lambda v: v >= 380),
    "cp_stream_dwords_per_cycle_lat16": ("", None),
    "driver_ioctls_per_cmd": ("batch 64 <= 1/10 of batch 1", lambda v: v["64"] <= v["1"] / 10),
    "driver_doorbells_per_cmd": ("batch 64 <= 1/10 of batch 1", lambda v: v["64"] <= v["1"] / 10),
    "sim_cycles_per_s_dma": ("", None),
    "sim_cycles_per_s_idle": ("", None),
    "sim_speed_ratio_dma_vs_idle": (">= 0.5", lambda v: v >= 0.5),
    # the least ratio over testbench.model_speed.WORKLOADS (per app: build/bench.json "model_speedup")
    "model_speedup_device_min_verilator": (">= 100 (issue 5)", lambda v: v >= 100),
    "model_speedup_app_min_verilator": (">= 100 (issue 5)", lambda v: v >= 100),
    "model_speedup_device_min_icarus": (">= 100 (issue 5)", lambda v: v >= 100),
    "model_speedup_app_min_icarus": (">= 100 (issue 5)", lambda v: v >= 100),
}


WIDTH_32_TESTS = ["cp_latency", "dma_throughput", "dma_small_copy"]
WIDTH_32_FIGURES = ("cp_submit_to_irq_cycles", "dma_copy_eff_4k", "dma_16b_copy_cycles")


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-width", type=int, default=64, choices=(32, 64, 128, 256))
    ap.add_argument("-o", "--output", default=str(sim.BUILD / "bench.json"))
    ap.add_argument("--speed-sims", default="verilator", metavar="SIMS",
                    help="simulators the model is compared with, comma-separated, or none (default verilator)")
    args = ap.parse_args(argv)
    sims = [x for x in args.speed_sims.split(",") if x and x != "none"]
    if sims:
        from testbench.model_speed import sims_problem

        problem = sims_problem(sims)
        if problem:
            ap.error(f"--speed-sims: {problem}")
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    res = sim.run(gpu_design(args.data_width), "verilator", "testbench.cocotb_bench", tag="bench",
                  extra_env={"GPUCOSIM_BENCH_OUT": str(out.resolve())})
    results = json.loads(out.read_text()) if out.exists() else {}
    # The same cycle figures on the 32-bit top (the width of the FPGA goals).
    out32 = out.with_name(out.stem + "-32b.json")
    out32.unlink(missing_ok=True)
    res32 = sim.run(gpu_design(32), "verilator", "testbench.cocotb_bench", WIDTH_32_TESTS, tag="bench32",
                    extra_env={"GPUCOSIM_BENCH_OUT": str(out32.resolve())})
    if out32.exists():
        for k, v in json.loads(out32.read_text()).items():
            if k in WIDTH_32_FIGURES:
                results[f"{k}_32b"] = v
        out32.unlink()
    if "sim_cycles_per_s_dma" in results and "sim_cycles_per_s_idle" in results:
        results["sim_speed_ratio_dma_vs_idle"] = results["sim_cycles_per_s_dma"] / results["sim_cycles_per_s_idle"]
    if sims:
        from testbench import model_speed

        print("model vs RTL, seconds inside the device and in the app (testbench/model_speed.py):")
        speed = model_speed.compare(sims, model_speed.WORKLOADS)
        results["model_speedup"] = speed
        results.update(model_speed.summary(speed, sims))
    from fpga import report as fpga_report

    results.update(fpga_report.derived(fpga_report.load(fpga_report.FPGA_JSON), results))
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(table(results))
    print(f"\nwritten to {out}")
    for r in (res, res32):
        if not r.ok:
            print("bench run failed:\n" + r.explain(), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
