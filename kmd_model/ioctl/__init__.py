"""The ioctls: the table (dispatch), the strace-like trace (trace) and the entry points,
one module per family: gem (GEM_CREATE, GEM_CLOSE, GEM_MMAP, GEM_WAIT_IDLE), va
(GEM_VA), ctx (CTX), cs (CS), wait (WAIT_CS), info (INFO).

Each handler validates its arguments completely before it changes anything, so a
failed ioctl has no effect, and fails with `KmdError(errno, "<IOCTL>: what was wrong")`.
With `GPUCOSIM_LOG=ioctl=info` every call is printed as strace prints syscalls:

    ioctl(fd 3, GEM_CREATE, {size=0x1000, domain=GTT}) = {handle=1, gpu_addr=0x2000000, size=0x1000} <16 cycles, 41 us>
    ioctl(fd 3, CS, {ctx_id=1, chunks=[Ib(0x2000000, 8 dw)]}) = -1 EINVAL (CS: IB at ...) <0 cycles, 90 us>
"""

# importing the families fills the table (dispatch.IOCTLS)
from . import gem, va, ctx, cs, wait, info  # noqa: F401
