"""A producer/consumer pair that meets through memory: the CPU produces items into a ring
of slots, a GPU queue consumes them, and WAIT_REG_MEM is how the GPU waits for work.

    consumer (GPU queue), recorded up front, per item i:
        WAIT_REG_MEM  produced >= i + 1        the CP polls the CPU's counter
        consume slot i % SLOTS                 DMA_DATA copy to out[i] (with a DMA engine),
                                               else WRITE_DATA of an acknowledgement
        RELEASE_MEM   event i                  "slot free again"
    producer (CPU), per item i:
        wait for event i - SLOTS               back-pressure: the slot must be free
        write the item into its slot, then produced = i + 1

Neither side spins on the other's registers: the GPU polls memory at POLL_INTERVAL, the
CPU sleeps in the KMD until the fence interrupt. The kernel waits for whole
submissions (WAIT_CS), never for a point inside one, so each item is its own
submission: were all of them one job, the producer's wait for item 0's event would
wait for the whole job, which waits for items the producer has not made yet — a
deadlock the KMD's job timeout ends (try `--one-submission`). A look at memory
(`ev.signalled()`) would see event i written in the middle of the one job; the kernel's
wait cannot. In a timeline (`--trace`) the CP's
WAIT_REG_MEM packets show their poll phases, and the fences the slots' turnover.

    gpucosim run examples/producer_consumer.py --sim verilator --trace build/pc.json
    gpucosim run examples/producer_consumer.py --sim model
"""

from __future__ import annotations

import sys

import numpy as np

import gpucosim
import kmd_model
import umd
from umd.winsys import Winsys
from spec import pm4
from testbench.argtypes import OneLineParser, integer_in

SLOT_BYTES = 64


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="producer_consumer", description=" ".join(__doc__.split("\n\n")[0].split()),
                       options_in_errors=True)
    ap.add_argument("--items", type=integer_in(1, 1024), default=24,
                    help="items produced (default 24, 1-1024; without --one-submission at most the KMD's sched_jobs, "
                         "32 by default: each item is a job)")
    ap.add_argument("--slots", type=integer_in(1, 64), default=4, help="ring slots (default 4, 1-64)")
    ap.add_argument("--poll-interval", type=integer_in(0, 0xFFFF), default=16,
                    help="cycles between the CP's polls (default 16, 0-65535)")
    ap.add_argument("--one-submission", action="store_true",
                    help="record everything into one submission (deadlocks: see above)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    n, slots = args.items, args.slots
    # Every item is a job in flight before the producer makes anything, and the KMD takes at
    # most sched_jobs unfinished jobs of a context on a ring (amdgpu_sched_jobs): the CS past
    # them waits for item 0, which waits for the producer, until the job timer ends item 0
    # (--items 33 and more, within the range --help gave, ended in a GpuError and a crash report)
    limit = kmd_model.bound().params.sched_jobs
    if n > limit and not args.one_submission:
        ap.error(f"--items {n}: at most {limit} here: every item is a job recorded before the producer starts, and "
                 f"the KMD holds a context's CS past {limit} unfinished jobs (sched_jobs) until its oldest, item 0, "
                 "is done: a deadlock the job timer would end")

    # what it prints counts the whole device: a file with CAP_PERFMON (docs/architecture.md, "Side channels")
    gpu = umd.open(api_version=2, winsys=Winsys(kmd_model.open_render_node(cap_perfmon=True)))
    dma = gpu.info().has_dma
    ring = gpu.alloc(slots * SLOT_BYTES, "gtt")  # the slots the producer fills
    ctrl = gpu.alloc(4096, "gtt")  # dword 0: items produced so far
    out = gpu.alloc(n * SLOT_BYTES, "vram")  # what the consumer delivered
    # Every item is a submission recorded before the producer makes anything, so all n are
    # in flight at once: a queue throttles at max_inflight submissions (the flush waits for
    # the oldest), which here would wait for item 0, which waits for the producer.
    q = gpu.queue(max_inflight=n + 1)
    t_start = gpu.counters().hw["timestamp"]

    # The consumer's whole program, recorded before any item exists.
    freed = []
    for i in range(n):
        q.wait_mem(ctrl, 0, i + 1, compare=">=", poll_interval=args.poll_interval)
        slot = ring.gpu_addr + (i % slots) * SLOT_BYTES
        if dma:
            q.emit_raw(pm4.dma_data(out.gpu_addr + i * SLOT_BYTES, slot, SLOT_BYTES, cp_sync=1))
        else:
            q.write(out, i * SLOT_BYTES, 0xACC00000 + i)  # no DMA engine: acknowledge item i
        freed.append(q.signal())
        if not args.one_submission:
            q.flush()
    q.flush()
    print(f"producer/consumer on {gpu.name}: {n} item{'s' * (n != 1)} through {slots} slot{'s' * (slots != 1)}, "
          f"consumer {'copies with DMA_DATA' if dma else 'acknowledges with WRITE_DATA (no DMA engine)'}")

    # The producer.
    rng = np.random.default_rng(7)
    items = rng.integers(0, 1 << 32, (n, SLOT_BYTES // 4), dtype=np.uint64).astype(np.uint32)
    waits = 0
    for i in range(n):
        if i >= slots:
            ev = freed[i - slots]
            # (a look at memory first: the slot may be free already. --one-submission waits in
            # the kernel at once: a look, which lets the GPU run a poll's cycles, may find the
            # event written in the middle of the one job, and the race would hide the deadlock)
            if args.one_submission or not ev.signalled():
                waits += 1
                # (longer than the KMD's job timeout: in the --one-submission deadlock the
                # KMD ends the job and the wait reports why)
                try:
                    done = ev.wait(umd.DEFAULT_TIMEOUT)
                except umd.GpuError as e:
                    print(f"producer/consumer: item {i - slots} was never consumed: {e}")
                    gpu.close()  # (its buffers and queue: a failed run leaks nothing either)
                    return 1
                if not done:
                    print(f"producer/consumer: item {i - slots} was never consumed")
                    gpu.close()
                    return 1
        s = (i % slots) * SLOT_BYTES // 4
        ring.u32[s:s + SLOT_BYTES // 4] = items[i]
        ctrl.u32[0] = i + 1  # publish: the consumer's WAIT_REG_MEM sees it at its next poll
        gpucosim.progress(i + 1, n, "items produced")
    q.finish()

    got = out.u32.reshape(n, SLOT_BYTES // 4)
    want = items if dma else None
    bad = [i for i in range(n) if (not np.array_equal(got[i], want[i]) if dma else got[i][0] != 0xACC00000 + i)]
    c = gpu.counters()
    cycles = c.hw["timestamp"] - t_start
    gpu.close()
    print(f"producer waited {waits} times for a free slot; {c.packets['WAIT_REG_MEM']} WAIT_REG_MEM "
          f"packets, {cycles} cycles")
    if bad:
        print(f"producer/consumer: FAILED — {len(bad)} items wrong, first {bad[0]}")
        return 1
    print(f"producer/consumer: OK on {gpu.name} — {n} item{'s' * (n != 1)}, {slots} slot{'s' * (slots != 1)}")
    return 0


if __name__ == "__main__":
    import kmd_model
    from testbench.refmodel import RefModel

    kmd_model.bind(RefModel(dma=True))
    sys.exit(main())
