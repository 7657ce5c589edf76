"""The pools' accounting of what this Device holds (umd/winsys/pool.py, MemoryManager.held):
the figure an OutOfMemory gives ("this Device holds N MiB of it", docs/tutorial.md "How much
memory an app has") counts the BOs made and not closed, whether a freed BO went back to the
kernel at once (pools off) or through the BO cache given back by the wait for memory."""

from __future__ import annotations

import pytest

import kmd_model
import umd
from testbench.refmodel import RefModel


@pytest.mark.parametrize("pools", [True, False])
def test_what_a_device_holds_drops_when_its_bos_go_back_to_the_kernel(pools):
    kmd_model.bind(RefModel())
    gpu = umd.open(pools=pools)
    kept, freed = gpu.alloc(1 << 20), gpu.alloc(3 << 20)
    freed.free()  # (pools on: into the BO cache, which the failed allocation gives back)
    with pytest.raises(umd.OutOfMemory, match=r"; this Device holds 1 MiB of it, the kernel "):
        gpu.alloc(20 << 20)
    kept.free()
    with pytest.raises(umd.OutOfMemory, match=r"; this Device holds 0 MiB of it, the kernel "):
        gpu.alloc(20 << 20)
    gpu.close()
