"""A hostile context's own limits (round 3 of the hostile program): what one context can make
the driver spend, and run, beyond the checker.

- A CHAIN to itself with the CS checker off: the reference model ran it inside the doorbell's
  MMIO write for ever (the process hung). Its CP now runs a bounded burst of packets at an
  instant and the rest as time passes, so the job timer resets the loop, as on the RTL.
"""

from __future__ import annotations

import errno
import threading

import pytest

import kmd_model
from kmd_model import regs
from kmd_model.uapi import KmdError
from spec import pm4
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client


def _in_thread(fn, timeout: float = 60) -> tuple[bool, list]:
    """Run `fn` in a daemon thread: (hung, [its result or exception])."""
    out: list = []

    def run() -> None:
        try:
            out.append(fn())
        except Exception as e:  # noqa: BLE001 (the test looks at it)
            out.append(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout=timeout)
    return t.is_alive(), out


# ------------------------------------------------------------------------------ a loop on the model

def test_a_chain_to_itself_with_the_checker_off_is_a_timeout_reset_on_the_model_as_on_the_rtl():
    dev = RefModel()
    kmd = kmd_model.bind(dev, job_timeout=5_000, fallback_poll=1_000, cs_check=False, unchecked_job_timeouts=4)
    h = Client()
    hbo = h.bo(0x1000)
    loop = h.ib(hbo, pm4.indirect_buffer(hbo.addr, 8, chain=1))  # (padded to 8: the CHAIN is the IB's first packet)
    hung, out = _in_thread(lambda: h.submit(loop))
    if hung:  # end the loop (the CP reads the client's own IB), so the thread ends
        hbo.u32[:8] = pm4.pad(8)
    assert not hung, "the doorbell's MMIO write never returned"
    seq = out[0]
    assert not regs.STATUS.IDLE.get(dev.mmio_read32(regs.STATUS.ADDR))  # busy in its loop
    with pytest.raises(KmdError) as ei:
        h.wait(seq, 1_000_000)
    e = ei.value
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT"
    assert "cycles unchecked (cs_check off), more than 4 job timeouts" in e.message
    assert kmd.stats["job_timeouts"] == 1
    v = Client()  # an innocent client's job then completes
    vbo = v.bo(0x1000)
    assert v.run(vbo, pm4.write_data(vbo.addr + 0x100, [5])) and vbo.u32[0x40] == 5
