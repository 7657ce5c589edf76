"""The journey of a few requests, from the UMD API to the hardware's interrupt and back.

The app allocates buffers, records WRITE_DATA packets, a GPU-side wait (WAIT_REG_MEM)
that a later CPU write releases, and fences (RELEASE_MEM), submits them, waits through
the interrupt, and checks memory. With the driver's tracing on it shows every layer:
the IBs the UMD built, each ioctl, what the KMD wrote into its ring (disassembled) and
the doorbell values, the IH entries of the interrupts, the fence seqnos, and at the
end the packets the CP executed by opcode (PERF_PACKETS via INFO).

    python -m examples.demo                    # on the reference model if nothing is bound
    GPUCOSIM_LOG=ioctl=info python -m examples.demo   # choose what to trace yourself

The launcher (testbench/) binds the chosen backend with `kmd_model.bind(dev)` and then
calls `main()`; the last line is the summary: `demo: OK on <backend> — N packets, ...`.
"""

from __future__ import annotations

import os
import sys

import kmd_model
import umd
from umd.winsys import Winsys

# every layer: the UMD's IBs, each ioctl, the checked copies, the ring and its doorbell, the
# packets the CP starts (under a simulator), the IH entries and the fences they signal
TRACE = "umd=debug,ioctl=info,cs=debug,sched=debug,ring=debug,cp=info,ih=info,fence=debug,kmd=info"
# (`gpucosim run` applies it before the app starts, so the CP's monitors run from the start)
GPUCOSIM_LOG = TRACE


def say(msg: str) -> None:
    print(f"[app] {msg}", flush=True)


def main() -> int:
    from kmd_model import log
    if not os.environ.get(log.ENV):
        log.configure(TRACE, stream=sys.stdout)
    errors: list[str] = []

    def check(what: str, got, want) -> None:
        if got != want:
            errors.append(f"{what}: got {got!r}, expected {want!r}")
            say(f"MISMATCH {what}: got {got!r}, expected {want!r}")

    # what it prints counts the whole device: a file with CAP_PERFMON (docs/architecture.md, "Side channels")
    gpu = umd.open(api_version=2, winsys=Winsys(kmd_model.open_render_node(cap_perfmon=True)))
    info = gpu.info()
    say(f"opened {gpu.name}: {info.ib_levels} IB levels, {'DMA, ' if info.has_dma else ''}"
        f"ring of {info.ring_size_dw} dwords, IBs padded to {info.ib_align_dw} dwords")
    start = gpu.counters()

    out = gpu.alloc(4096, "vram")
    flag = gpu.alloc(4096, "gtt")
    q = gpu.queue()

    # 1. writes and a fence, waited for through the interrupt
    say("step 1: WRITE_DATA x2 + signal, flush, wait")
    values = [0xC0FFEE00 + i for i in range(4)]
    q.write(out, 0, values)
    q.write(out, 0x40, 0x12345678)
    e1 = q.signal()
    if not e1.wait(100_000):
        errors.append("step 1: the event did not signal")
    check("out[0:4]", out.u32[:4].tolist(), values)
    check("out[0x40]", int(out.u32[0x10]), 0x12345678)

    # 2. a GPU-side wait that a later write (the CPU's, through its mapping) releases
    say("step 2: WAIT_REG_MEM on flag == 1, then WRITE_DATA + signal")
    q.wait_mem(flag, 0, 1, compare="==", poll_interval=32)
    q.write(out, 0x80, 0xAB)
    e2 = q.signal()
    q.flush()
    early = e2.wait(2_000)
    say(f"after 2000 cycles: event {'signalled (wrong!)' if early else 'pending: the CP is waiting on the flag'}")
    check("step 2 waits for the flag", early, False)
    check("out[0x80] before the flag", int(out.u32[0x20]), 0)
    say("CPU writes flag = 1")
    flag.u32[0] = 1
    if not e2.wait(100_000):
        errors.append("step 2: the event did not signal after the flag was written")
    check("out[0x80] after the flag", int(out.u32[0x20]), 0xAB)

    # 3. a GPU clock sample around a fill, and one more fence
    say("step 3: timestamp, fill 64 bytes, timestamp")
    t0 = q.timestamp()
    q.fill(out, 0x100, 64, 0x5A5A5A5A)
    t1 = q.timestamp()
    q.finish()
    check("fill", out.u32[0x40:0x50].tolist(), [0x5A5A5A5A] * 16)
    say(f"GPU clock: {t0.cycles} -> {t1.cycles}")

    end = gpu.counters()
    packets = {k: end.packets[k] - start.packets[k] for k in end.packets}
    kmd = {k: end.kmd[k] - start.kmd[k] for k in ("ioctls", "doorbells", "interrupts", "ih_entries",
                                                   "fences_signalled", "cs")}
    cycles = end.hw["timestamp"] - start.hw["timestamp"]
    say("packets executed by the CP, by opcode: " + ", ".join(f"{k} {v}" for k, v in packets.items() if v))
    say("the KMD counted, from the first COUNTERS query to the last (bring-up's self-tests not included):")
    say("  " + ", ".join(f"{k} {v}" for k, v in kmd.items()) + f"; last fence seqno {end.kmd['last_fence']:#010x}")
    n_packets = sum(packets.values())
    gpu.close()
    if errors:
        print(f"demo: FAILED on {gpu.name} — {len(errors)} mismatch(es): {errors[0]}")
        return 1
    print(f"demo: OK on {gpu.name} — {n_packets} packets, {kmd['fences_signalled']} fences, "
          f"{kmd['interrupts']} interrupts, {cycles} cycles")
    return 0


if __name__ == "__main__":
    from testbench.argtypes import script_takes_no_arguments

    script_takes_no_arguments("demo", __doc__)
    import kmd_model
    try:
        kmd_model.bound()
    except kmd_model.KmdError:  # run on its own: the reference model
        from kmd_model import log
        from testbench.refmodel import RefModel
        if not os.environ.get(log.ENV):
            log.configure(TRACE, stream=sys.stdout)
        kmd_model.bind(RefModel())
    sys.exit(main())
