"""Run the flow on a list of blocks: synthesis one block at a time, place and route of
the seeds in parallel (`jobs`), cached per block under build/fpga/."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from testbench.sim import BUILD

from .blocks import Block
from .flow import FlowError, pnr, summary, synth

FPGA_BUILD = BUILD / "fpga"


def run_block(b: Block, seeds, jobs: int = 2, log=lambda *_: None, workdir: Path = FPGA_BUILD) -> dict:
    t0 = time.monotonic()
    try:
        text = b.verilog()
    except Exception as e:  # an elaboration error is the block's own bug: name it
        raise FlowError(f"{b.name}: Verilog conversion failed: {type(e).__name__}: {e}") from e
    s = synth(b.name, text, b.module, workdir)
    if b.parts:
        s.parts = synth(b.name + "-hier", text, b.module, workdir, parts=True).parts
    t1 = time.monotonic()
    with ThreadPoolExecutor(max(1, min(jobs, len(seeds)))) as ex:
        runs = list(ex.map(lambda seed: pnr(b.name, s.netlist, seed), seeds))
    out = summary(s, runs)
    log(f"{b.name}: {out['lut4']} LUT4, {out['ff']} FF, {out.get('fmax_mhz', '?')} MHz "
        f"(synthesis {t1 - t0:.0f} s, place and route {time.monotonic() - t1:.0f} s)")
    return out


def run_blocks(blocks: list[Block], seeds, jobs: int = 2, log=lambda *_: None) -> dict:
    return {b.name: run_block(b, seeds, jobs, log) for b in blocks}


__all__ = ["run_block", "run_blocks", "FlowError"]
