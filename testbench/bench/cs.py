"""What the security boundary costs (kmd_model/cs/checker.py): the CS checker and its shadow
copies, measured on the reference model (the checker is the same Python on every backend).

    cs_submit_us_per_kdw        CPU time (process time, so other load on the machine hardly
                                counts) of what CS adds per job: copying and checking every IB
                                (CsChecker.check), room in the shadow pool, writing the copies
                                (CsChecker.place); in microseconds per 1,024 dwords submitted,
                                for a 64 Ki-dword job of the batching example's packet mix (a
                                one-dword WRITE_DATA per command, a RELEASE_MEM at the end) as
                                the UMD records it (chained 1,024-dword IBs); median of 7 runs
    cs_submit_us_per_kdw_one_ib the same stream in one IB
    cs_shadow_bytes_per_submit  shadow-pool bytes per CS of the batching example's default
                                configuration (flush threshold 64, IB alignment 8)

    python -m testbench.bench.cs
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import kmd_model
from kmd_model.cs.shadow import ShadowWait
import umd
from testbench.refmodel import RefModel
from testbench.pipes import pipe_safe

JOB_DW = 64 * 1024


def _record(q, buf, dwords: int) -> None:
    i = 0
    while q.cmdbuf.dwords < dwords - 16:
        q.write(buf, 4 * (i % 4096), i + 1)
        i += 1
    q.signal()


def _time_cs(kmd, ctx, ibs: list[tuple[int, int]], runs: int = 7) -> float:
    """Median process time of check + shadow room + place, in seconds."""
    times = []
    for _ in range(runs):
        t0 = time.process_time()
        job = kmd.checker.check(ctx, ibs, ctx.file.vm)
        addr = kmd.shadow_alloc(job, ShadowWait())  # as CS calls it (the pool is empty here: no wait)
        kmd.checker.place(job, addr, kmd.shadow_va(addr))
        times.append(time.process_time() - t0)
        kmd.shadow.free(addr, job.shadow_bytes)
    return statistics.median(times)


def measure() -> dict:
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open(api_version=2)
    buf = gpu.alloc(4 * 4096)
    out = {}
    for key, ib_dw in (("cs_submit_us_per_kdw", 1024), ("cs_submit_us_per_kdw_one_ib", JOB_DW)):
        q = gpu.queue(flush_threshold=1 << 30, ib_size_dw=ib_dw)
        _record(q, buf, JOB_DW)
        first = q.cmdbuf.end()
        total = sum(ib.size_dw for ib in q.cmdbuf.ibs)
        ctx = gpu.ws.file.contexts[q.ctx_id]
        t = _time_cs(kmd, ctx, [(first.gpu_addr, first.size_dw)])
        out[key] = round(t * 1e6 / (total / 1024), 1)
        q.cmdbuf.reset()
        q.close()
    gpu.close()
    kmd_model.unbind()
    out["cs_shadow_bytes_per_submit"] = _batching_shadow_bytes()
    return out


def _batching_shadow_bytes(commands: int = 1024) -> float:
    from examples import batching

    kmd = kmd_model.bind(RefModel())
    cs0, b0 = kmd.stats["cs"], kmd.stats["cs_shadow_bytes"]
    batching.measure(8, 64, commands)
    kmd = kmd_model.bound()
    n = kmd.stats["cs"] - cs0
    per = (kmd.stats["cs_shadow_bytes"] - b0) / n if n else 0.0
    kmd_model.unbind()
    return round(per, 1)


@pipe_safe
def main() -> int:
    print(json.dumps(measure(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
