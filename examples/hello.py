"""One request, the smallest whole journey: write a value through the GPU and wait for it.

    gpucosim run examples/hello.py --sim verilator --log ioctl=info,ring=debug,ih=info,cp=info,umd=debug \\
        --trace build/hello.json

docs/tutorial.md follows this request through every layer, with this run's output.
"""

from __future__ import annotations

import sys

import umd


def main() -> int:
    gpu = umd.open(api_version=2)
    buf = gpu.alloc(4096, "vram")
    q = gpu.queue()
    q.write(buf, 0, 0xC0FFEE)        # recorded into an IB: WRITE_DATA
    done = q.signal()                # RELEASE_MEM of the queue's next event value
    ok = done.wait()                 # flush (CS ioctl), then sleep in WAIT_CS until the interrupt
    value = int(buf.u32[0])
    gpu.close()
    print(f"hello: {'OK' if ok and value == 0xC0FFEE else 'FAILED'} on {gpu.name} — read back {value:#x}")
    return 0 if ok and value == 0xC0FFEE else 1


if __name__ == "__main__":
    from testbench.argtypes import script_takes_no_arguments

    script_takes_no_arguments("hello", __doc__)
    import kmd_model
    from testbench.refmodel import RefModel

    kmd_model.bind(RefModel())
    sys.exit(main())
