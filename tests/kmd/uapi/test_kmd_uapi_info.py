"""INFO as an outside UMD writer reads it: every field of DEV_INFO and FW_VERSION is what the
device's own registers say (docs/registers.md: VERSION, CAPS, VM_CAPS, QUEUE_CAPS; read here
by the offsets and fields the docs give, tests/model/contract/contract_driver.py), COUNTERS'
`packets` and `hw` are the PERF_* registers they name, and its `timestamp` is TIMESTAMP read
as docs/hardware.md ("Counters and time") tells a driver to: HI, LO, then HI again.

kmd_model/uapi.py says what each field is (DevInfo, Counters); test_kmd_uapi_contract.py
holds INFO's errnos. `check_*(dev)` run on the reference model here and on the RTL through
tests/cosim/driver_checks.py.
"""

from __future__ import annotations

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import InfoQuery, Request
from tests.model.contract.contract_driver import Gpu, pm4_packets
from testbench.refmodel import RefModel


def _info(f, query):
    return f.ioctl(Request.INFO, uapi.InfoArgs(query))


def check_dev_info_is_what_the_registers_say(dev):
    """DEV_INFO's hardware fields are the registers' (a UMD learns the device through it, not
    through MMIO): hw_version VERSION's MAJOR.MINOR.PATCH (FW_VERSION's too), bus_bytes,
    addr_bits, ib_levels, has_dma, has_ih and dma_max_bytes CAPS's fields, vm_levels
    VM_CAPS.LEVELS with the VA range inside its 12 + 9·LEVELS bits and 4 KiB pages,
    sdma_rings QUEUE_CAPS.SDMA; packets the PERF_PACKETS order of docs/packets.md, and
    max_ib_dw the largest IB_SIZE its 20-bit field holds."""
    kmd_model.bind(dev)
    g = Gpu(dev)
    f = kmd_model.open_render_node()
    i, fw = _info(f, InfoQuery.DEV_INFO), _info(f, InfoQuery.FW_VERSION)
    v, caps = g.fields("VERSION"), g.fields("CAPS")
    assert i.hw_version == fw.hw_version == (v["MAJOR"], v["MINOR"], v["PATCH"]), (i.hw_version, fw.hw_version, v)
    assert (i.bus_bytes, i.addr_bits, i.ib_levels) == \
        (1 << caps["BUS_BYTES_LOG2"], caps["ADDR_BITS"], caps["IB_LEVELS"]), (i, caps)
    assert (i.has_dma, i.has_ih) == (bool(caps["DMA"]), bool(caps["IH"])), (i, caps)
    assert i.dma_max_bytes == (1 << caps["DMA_MAX_LOG2"] if caps["DMA"] else 0), (i.dma_max_bytes, caps)
    levels = g.fields("VM_CAPS")["LEVELS"]
    assert i.vm_levels == levels and i.va_alignment == 4096, (i.vm_levels, levels, i.va_alignment)
    assert 0 < i.va_start < i.va_end <= 1 << (12 + 9 * levels), (hex(i.va_start), hex(i.va_end), levels)
    assert i.va_start % 4096 == 0 == i.va_end % 4096
    assert i.sdma_rings == g.fields("QUEUE_CAPS")["SDMA"], (i.sdma_rings, g.fields("QUEUE_CAPS"))
    order = sorted(pm4_packets().values(), key=lambda p: p.index)
    assert i.packets == tuple(p.name for p in order), i.packets
    ib_size = pm4_packets()["INDIRECT_BUFFER"].fields["IB_SIZE"]
    assert i.max_ib_dw == (1 << ib_size.width) - 1, (i.max_ib_dw, ib_size.width)
    f.close()


def check_counters_are_the_perf_registers(dev):
    """COUNTERS (a file with CAP_PERFMON) on an idle device: `packets[name]` is
    PERF_PACKETS[i] of that packet's index in docs/packets.md, every `hw` counter the PERF_*
    register of its name, `timestamp` TIMESTAMP between two reads of it around the ioctl.
    A file without CAP_PERFMON gets `timestamp` alone, the same clock."""
    kmd = kmd_model.bind(dev)
    g = Gpu(dev)
    spy, own = kmd_model.open_render_node(cap_perfmon=True), kmd_model.open_render_node()
    kmd.wait_for(lambda: g.fields("STATUS")["IDLE"] == 1, 10_000)  # (bind's self-tests done)
    before = g.timestamp()
    c = _info(spy, InfoQuery.COUNTERS)
    after = g.timestamp()
    assert before <= c.hw["timestamp"] <= after, (before, c.hw["timestamp"], after)
    order = sorted(pm4_packets().values(), key=lambda p: p.index)
    assert list(c.packets) == [p.name for p in order], c.packets
    for p in order:
        assert c.packets[p.name] == g.read("PERF_PACKETS", p.index), (p.name, c.packets, g.read("PERF_PACKETS", p.index))
    assert c.packets["WRITE_DATA"] >= 1 and c.packets["RELEASE_MEM"] >= 1  # (bind's ring and IB tests)
    for name, value in c.hw.items():
        if name != "timestamp":
            assert value == g.read("PERF_" + name.upper()), (name, value, g.read("PERF_" + name.upper()))
    before = g.timestamp()
    mine = _info(own, InfoQuery.COUNTERS)
    after = g.timestamp()
    assert set(mine.hw) == {"timestamp"} and mine.packets == {}, mine
    assert before <= mine.hw["timestamp"] <= after, (before, mine.hw["timestamp"], after)
    spy.close()
    own.close()


CHECKS = [check_dev_info_is_what_the_registers_say, check_counters_are_the_perf_registers]


def test_dev_info_is_what_the_registers_say_on_the_model():
    check_dev_info_is_what_the_registers_say(RefModel())
    kmd_model.unbind()


def test_counters_are_the_perf_registers_on_the_model():
    check_counters_are_the_perf_registers(RefModel())
    kmd_model.unbind()


def test_counters_timestamp_is_never_torn_by_the_low_half_wrapping():
    """TIMESTAMP_LO and _HI are read from the running counter (nothing latches HI when LO is
    read: docs/hardware.md), so COUNTERS reads HI, LO, HI and again if HI moved. It read LO
    then HI (kmd_model/mmio.py's read64): with LO wrapping between the two reads, the clock it
    answered was 2^32 cycles ahead of the device's (0x1_ffff_fff7 for 0x1_0000_0007), 43 s
    at 100 MHz, for a file with CAP_PERFMON or without. The model's MMIO takes time as the
    bus's does (mmio_cycles), so each clock value before the wrap is tried: only the model
    starts near it (2^32 cycles is beyond a simulation)."""
    for perfmon in (False, True):
        dev = RefModel()
        kmd_model.bind(dev)
        f = kmd_model.open_render_node(cap_perfmon=perfmon)
        for k in range(1, 100):  # (torn at 9-16 cycles before the wrap without CAP_PERFMON, 57-64 with)
            t0 = dev._t = ((dev._t >> 32) + 1 << 32) - k  # (the model's clock, k cycles before LO's next wrap)
            ts = _info(f, InfoQuery.COUNTERS).hw["timestamp"]
            assert t0 <= ts <= dev._t, f"CAP_PERFMON {perfmon}, {k} cycles before the wrap: {ts:#x} " \
                                       f"outside [{t0:#x}, {dev._t:#x}]"
        kmd_model.unbind()
