"""The kernel-mode driver model: what amdgpu does for a real GPU, for the gpucosim front end.

    import kmd_model
    kmd = kmd_model.bind(dev)                  # probe + init a Device (testbench backend)
    f = kmd_model.open_render_node()           # like open("/dev/dri/renderD128")
    bo = f.ioctl(kmd_model.Request.GEM_CREATE, kmd_model.GemCreateArgs(4096))

Where things are (the path tells the layer):

    uapi.py     the user API: requests, argument structures, KmdError (amdgpu_drm.h)
    ioctl/      the entry points, one module per family (gem, va, ctx, cs, wait, info),
                the table and argument checks (dispatch), the strace-like trace (trace)
    core/       the driver instance: kmd (its state, bring-up, self-tests), clients (files,
                contexts, BO lifetimes), bind (bind, open_render_node), file, ctx
    irq/        ih (the IH ring), handler (interrupt handler, fallback poll, waits)
    sched/      submission: scheduler (drm_sched), ring, sdma_ring, fence
    mm/         memory: bo, mapping (CPU mappings, revoked at GEM_CLOSE), vm, vmid
    cs/         the CS checker (shadow IBs and the checks on them), checked (the copies'
                records) and its shadow pool
    reset/      cp_error (the CP's error latches, decoded), recovery (the reset ladder),
                job_timer (drm_sched's timeout), stuck (the poll a timed-out job is stuck in)
    device.py   the one interface to the hardware; mmio.py, regs.py (generated), regfield.py
    log.py      GPUCOSIM_LOG
    tracebacks.py  a script's uncaught driver error as its lines and the error's one line

The KMD never imports the UMD, cocotb or amaranth; it reaches the hardware only through
`Device`.
"""

from . import ioctl  # noqa: F401  (fills the ioctl table)
from .core.bind import bind, bound, open_render_node, rebind, unbind  # noqa: F401
from .core.kmd import Kmd, KmdParams  # noqa: F401
from .uapi import *  # noqa: F401,F403  (the uapi is the public surface, as amdgpu_drm.h is)
from .uapi import KmdError as _KmdError

# an uncaught one reads `kmd_model.KmdError: ENODEV: ...`, the name a script imports it by
# (not the module it is defined in: kmd_model.uapi.KmdError)
_KmdError.__module__ = "kmd_model"

# `import kmd_model` in a script run by python: its uncaught KMD errors and argument mistakes
# (the tutorial's bind line, before any umd call), and ^C, as `gpucosim run` prints them
from . import tracebacks as _tracebacks  # noqa: E402

_tracebacks.install_for_script()
