"""Run the flow on a list of blocks: synthesis one block at a time, place and route of
the seeds in parallel (`jobs`), cached per block under build/fpga/."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from testbench.sim import BUILD

from .blocks import Block
from .flow import DoesNotFit, FlowError, placer_args, pnr, summary, synth

FPGA_BUILD = BUILD / "fpga"


def run_block(b: Block, seeds, jobs: int = 2, log=lambda *_: None, workdir: Path = FPGA_BUILD,
              pnr_args: tuple[str, ...] = ()) -> dict:
    t0 = time.monotonic()
    try:
        text = b.verilog()
    except Exception as e:  # an elaboration error is the block's own bug: name it
        raise FlowError(f"{b.name}: Verilog conversion failed: {type(e).__name__}: {e}") from e
    s = synth(b.name, text, b.module, workdir)
    if b.parts:
        s.parts = synth(b.name + "-hier", text, b.module, workdir, parts=True).parts
    t1 = time.monotonic()
    try:
        # (the part's size does not depend on the seed: the first seed that cannot place
        # the block is the answer for all)
        with ThreadPoolExecutor(max(1, min(jobs, len(seeds)))) as ex:
            runs = list(ex.map(lambda seed: pnr(b.name, s.netlist, seed, extra=pnr_args), seeds))
    except DoesNotFit as e:
        out = summary(s, [], e.why)
        log(f"{b.name}: {out['lut4']} LUT4, {out['ff']} FF, does not fit the ECP5-25F: {e.why} "
            f"(synthesis {t1 - t0:.0f} s, place and route {time.monotonic() - t1:.0f} s)")
        return out
    out = summary(s, runs)
    out["pnr_args"] = " ".join(placer_args(pnr_args))  # (the flow's own settings too)
    log(f"{b.name}: {out['lut4']} LUT4, {out['ff']} FF, {out.get('fmax_mhz', '?')} MHz "
        f"(synthesis {t1 - t0:.0f} s, place and route {time.monotonic() - t1:.0f} s)")
    return out


def run_blocks(blocks: list[Block], seeds, jobs: int = 2, log=lambda *_: None,
               workdir: Path = FPGA_BUILD, pnr_args: tuple[str, ...] = ()) -> dict:
    """Every block's record. A FlowError carries the records of the blocks done before it
    (`results`), so a failure late in a long run loses none of them."""
    results: dict = {}
    for b in blocks:
        try:
            results[b.name] = run_block(b, seeds, jobs, log, workdir, pnr_args)
        except FlowError as e:
            e.results = results
            raise
    return results


__all__ = ["run_block", "run_blocks", "DoesNotFit", "FlowError"]
