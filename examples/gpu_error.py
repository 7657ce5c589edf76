"""A GPU error, seen from every layer, and the crash report it leaves.

The app does some good work (writes and a fence, waited for through the interrupt),
then submits an IB holding a packet with opcode 0x7b, which the CP does not implement.
The KMD's CS checker would refuse it at submission (EINVAL: "UNKNOWN op=0x7b"); a
driver parameter switches the checker off, as a test harness would, so the packet
reaches the hardware. Then:

  CP      stops, latches CP_ERROR (ILLEGAL_OPCODE, level IB1, opcode 0x7b), the packet's
          address and offset, writes a CP_ERROR entry into the IH ring, raises irq
  KMD     the IH handler decodes the entry; the job at the read pointer is guilty;
          recovery: stop the gfx ring -> reset CP queue 0 alone (CP_QUEUE_RESET.Q0; the
          copy engine and CP queue 1 run on) -> cancel the guilty context's gfx jobs ->
          restart (the full reset, CONTROL.SOFT_RESET, only if the queue's reset fails)
  UMD     finish() raises GpuError("illegal opcode 0x7b at IB+0x14 (0x102014), context 1",
          recorded by Queue.emit_raw() #4)
  gpucosim  writes a crash report (registers, ring, IB stack with the packet marked,
          IH entries, last ioctls, counters) before the reset wipes the registers

The queue works on afterwards (its error was raised once), and so does a new queue.

    gpucosim run examples/gpu_error.py --sim verilator
    gpucosim disasm build/crash/crash-gpu_error-verilator-*.txt
"""

from __future__ import annotations

import sys

import kmd_model
import umd
from spec import pm4

BAD_OPCODE = 0x7B


def main() -> int:
    gpu = umd.open(api_version=2)
    buf = gpu.alloc(4096, "gtt")
    q = gpu.queue()
    q.write(buf, 0, [0x11, 0x22, 0x33])
    if not q.signal().wait(100_000):
        print("gpu_error: the good work did not finish")
        return 1

    kmd_model.bound().params.cs_check = False  # let the bad packet reach the CP
    q.write(buf, 0x40, 0x44)
    q.emit_raw([pm4.header(BAD_OPCODE, 0), 0])
    seen = None
    try:
        q.finish()
    except umd.GpuError as e:
        seen = e
    kmd_model.bound().params.cs_check = True
    if seen is None:
        print("gpu_error: the GPU did not report the bad packet")
        return 1
    print(f"the UMD raised: {seen}")
    print(f"  code {seen.code}, opcode {seen.opcode:#x}, at IB offset {seen.ib_offset:#x} (address {seen.addr:#x}), "
          f"context {seen.context}")

    q.write(buf, 0x84, 0x66)  # the same queue runs on: only its ring's queue was reset
    q.finish()
    q2 = gpu.queue()  # and a fresh context
    q2.write(buf, 0x80, 0x55)
    q2.finish()
    ok = buf.u32[0x20] == 0x55 and buf.u32[0x21] == 0x66
    gpu.close()
    print(f"gpu_error: {'OK' if ok else 'FAILED'} on {gpu.name} — error reported, GPU recovered")
    return 0 if ok else 1


if __name__ == "__main__":
    from testbench.argtypes import script_takes_no_arguments

    script_takes_no_arguments("gpu_error", __doc__)
    from testbench.refmodel import RefModel

    kmd_model.bind(RefModel())
    sys.exit(main())
