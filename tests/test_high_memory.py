"""The driver checks on a device with 8 GiB of memory: GTT lies above 4 GiB.

Every other model test runs on 64 MiB, where every address's high dword is 0, so an
address put together or taken apart wrongly (`hi << 33`, `hi >> 32`, a high dword
dropped) goes unseen in the KMD's checker and timeout diagnosis, the UMD's packets and
the CP alike. Here the client's buffers (GTT, the default domain) sit above 4 GiB, so
ADDR_HI, IB_BASE_HI, SRC_ADDR_HI and DST_ADDR_HI are non-zero in every packet a check
builds. The model's memory is sparse: 8 GiB costs only the pages touched.

The three security checks about limits (held flushes, out of memory, exact limits) are
left out: they are about counts, not addresses, and take seconds each.
"""

from __future__ import annotations

import importlib

import pytest

import kmd_model
from kmd_model.uapi import Domain
from testbench.refmodel import RefModel

from . import driver_checks
from .test_kmd_ioctl import Client

MEM_SIZE = 8 << 30
SLOW = ("security__check_held_cp_flushes", "security__check_out_of_memory", "security__check_limits_exact")


def _checks() -> dict:
    out = {n: c for n, c in driver_checks.all_checks().items() if n not in SLOW}
    for mod_name in ("test_kmd_checker", "test_kmd_ih"):  # model-only check lists
        mod = importlib.import_module(f"tests.{mod_name}")
        out.update({f"{mod_name[5:]}__{c.__name__}": c for c in mod.CHECKS})
    return out


CHECKS = _checks()


def test_gtt_lies_above_4_gib():
    """The premise: a client's GTT buffer has a non-zero high dword, VRAM stays below 4 GiB."""
    kmd_model.bind(RefModel(mem_size=MEM_SIZE))
    c = Client()
    gtt, vram = c.bo(0x1000, Domain.GTT), c.bo(0x1000, Domain.VRAM)
    assert gtt.addr >> 32 and gtt.addr + 0x1000 <= MEM_SIZE
    assert not vram.addr >> 32


@pytest.mark.parametrize("name", list(CHECKS))
def test_check_above_4_gib(name):
    CHECKS[name](RefModel(mem_size=MEM_SIZE))
