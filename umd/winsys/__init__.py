"""The winsys: what the UMD asks of the kernel, and the kernel objects it manages itself
(Mesa's amdgpu winsys: radv_amdgpu_winsys/_bo/_cs, over libdrm_amdgpu).

- ioctl.py: Winsys, one `File.ioctl` call per request, counted; KMD_LOCK;
- va.py: the device's GPU virtual address range (the UMD picks the address a GEM_VA maps);
- pool.py: the BOs behind Buffers, reused through pb_cache and pb_slab;
- cmdbuf.py: command streams, IBs chained together (radv's CS).

The API objects above it (Device, Queue, Event) are in umd/; the asynchronous submission
thread, which decides which thread makes a Winsys's ioctls, in umd/submit.py.
"""

from .ioctl import KMD_LOCK, Winsys

__all__ = ["KMD_LOCK", "Winsys"]
