"""The kernel-mode driver model: what amdgpu does for a real GPU, for the gpucosim front end.

    import kmd_model
    kmd = kmd_model.bind(dev)                  # probe + init a Device (testbench backend)
    f = kmd_model.open_render_node()           # like open("/dev/dri/renderD128")
    bo = f.ioctl(kmd_model.Request.GEM_CREATE, kmd_model.GemCreateArgs(4096))

Modules: uapi (requests, argument structures, KmdError), ioctl (the table and trace),
kmd (bring-up, interrupts, waits, reset), sched/ (scheduler, ring, sdma_ring, fence), ih,
cs/ (checker: shadow IBs and the checks on them; shadow: their pool), cp_error, mm/ (bo,
mapping: CPU mappings, revoked at GEM_CLOSE; vm, vmid), ctx, file, mmio/regs (registers), log
(GPUCOSIM_LOG). The KMD never
imports the UMD, cocotb or amaranth; it reaches the hardware only through `Device`.
"""

from . import ioctl  # noqa: F401  (fills the ioctl table)
from .kmd import Kmd, KmdParams, bind, bound, open_render_node, rebind, unbind  # noqa: F401
from .uapi import *  # noqa: F401,F403  (the uapi is the public surface, as amdgpu_drm.h is)
