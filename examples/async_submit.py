"""What asynchronous submission costs and gains: the same workload on a queue with
async_submit=False and =True (API v3): SUBMITS flushes of a few writes each, then one
wait. It prints, per mode, the app thread's time per flush (wall and its own CPU time),
the wall time to the end of the wait, and checks the results are the same.

    gpucosim run examples/async_submit.py --sim model -- --submits 400
    gpucosim run examples/async_submit.py --sim verilator -- --submits 50

On the model the submission thread makes the CS ioctls itself, so a flush costs the app
thread only the recording's end and a queue append; but the two threads share one
interpreter (the GIL), so the total wall time does not drop. On the RTL the thread hands
each ioctl back to the app thread (umd/submit.py), which runs it at its next driver call:
flush() returns at once, the work is only moved, not shared.
"""

from __future__ import annotations

import sys
import time

import umd
from testbench.argtypes import OneLineParser, integer_in


def run(submits: int, writes: int, async_submit: bool) -> dict:
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(4 * submits * writes, "vram")
    q = gpu.queue(async_submit=async_submit, flush_threshold=1_000_000, max_inflight=submits + 1)
    q.finish()
    flush_wall = flush_cpu = 0.0
    t_start = time.perf_counter()
    for i in range(submits):
        q.write(buf, 4 * i * writes, list(range(i * writes, (i + 1) * writes)))
        w0, c0 = time.perf_counter(), time.thread_time()
        q.flush()
        flush_wall += time.perf_counter() - w0
        flush_cpu += time.thread_time() - c0
    ev = q.signal()
    ok = ev.wait()
    total = time.perf_counter() - t_start
    data = buf.u32[:submits * writes].tolist()
    seqs = (q.first_seq, q.last_seq)
    gpu.close()
    return {"ok": ok, "flush_wall_us": 1e6 * flush_wall / submits, "flush_cpu_us": 1e6 * flush_cpu / submits,
            "total_ms": 1e3 * total, "data": data, "seqs": seqs}


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="async_submit", description=" ".join(__doc__.split("\n\n")[0].split()),
                       options_in_errors=True)
    ap.add_argument("--submits", type=integer_in(1, 10_000), default=200, help="flushes (default 200, 1-10000)")
    ap.add_argument("--writes", type=integer_in(1, 64), default=4, help="dwords written per flush (default 4, 1-64)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    runs = {mode: run(args.submits, args.writes, mode) for mode in (False, True)}
    name = umd.open(api_version=3)
    backend = name.name
    name.close()
    print(f"async_submit on {backend}: {args.submits} flushes of {args.writes} writes, then one wait")
    for mode, r in runs.items():
        print(f"  async_submit={mode!s:5}  app thread per flush: {r['flush_wall_us']:7.1f} us wall, "
              f"{r['flush_cpu_us']:7.1f} us CPU;  to the end of the wait: {r['total_ms']:7.1f} ms")
    sync, asy = runs[False], runs[True]
    same = sync["ok"] and asy["ok"] and sync["data"] == asy["data"] and \
        sync["seqs"][1] - sync["seqs"][0] == asy["seqs"][1] - asy["seqs"][0]
    print(f"async_submit: {'OK' if same else 'FAILED'} — the same memory and seqnos in both modes")
    return 0 if same else 1


if __name__ == "__main__":
    import kmd_model
    from testbench.refmodel import RefModel

    kmd_model.bind(RefModel())
    sys.exit(main())
