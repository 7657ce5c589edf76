"""What the CP would stop on is refused at CS, so no client can force a GPU reset: every
reserved bit of every packet (named by its place), misaligned addresses, an oversized
DMA, IB_SIZE 0, values the device does not support; and the property behind them: a
random stream the checker accepts runs without a packet or bus error.
"""

from __future__ import annotations

import errno

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kmd_model
from kmd_model.uapi import KmdError
from spec import packets, pm4, rules
from testbench.refmodel import RefModel

from ..security_helpers import quiet
from tests.kmd.test_kmd_ioctl import Client, addr_fields, drained_hw_state, expect, hw_state
from .test_security_toctou import check_toctou_gpu_rewrite


# ------------------------------------------------------------------------------ what the CP would refuse

def _good_packets(m: int) -> dict[str, list[int]]:
    """One valid packet of each kind, its addresses in the client's BO at `m`."""
    return {
        "NOP": pm4.nop(2),
        "WRITE_DATA": pm4.write_data(m + 0x100, [1]),
        "INDIRECT_BUFFER": pm4.indirect_buffer(m + 0x1000, 8),
        "WAIT_REG_MEM": pm4.wait_reg_mem(m + 0x200, 0, 0, "ALWAYS"),
        "RELEASE_MEM": pm4.release_mem(m + 0x300, 5),
        "DMA_DATA": pm4.dma_data(m + 0x400, m + 0x500, 16),
    }


def _bits(mask: int) -> list[int]:
    """The lowest and the highest set bit of each run of ones in `mask`."""
    out, b = [], 0
    while b < 32:
        if mask >> b & 1:
            e = b
            while e + 1 < 32 and mask >> (e + 1) & 1:
                e += 1
            out += sorted({b, e})
            b = e + 1
        else:
            b += 1
    return out


def check_reserved_bits_refused(dev):
    """Every reserved bit of every packet (header and payload, address bits below *_LO
    fields included) is refused at CS with its place named: the CP never sees it."""
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo(0x4000)
    m = bo.addr
    bo.u32[0x400:0x408] = pm4.pad(8)  # the IB the INDIRECT_BUFFER calls
    before = drained_hw_state(kmd)
    good = _good_packets(m)
    n = 0
    for name, pkt in good.items():
        if name == "DMA_DATA" and not kmd.info.has_dma:
            continue
        r = rules.RULES[name]
        for d in [-1] + list(range(len(r.reserved))):
            mask = rules.HEADER_RESERVED if d == -1 else r.reserved[d]
            for b in _bits(mask):
                bad = list(pkt)
                bad[d + 1] |= 1 << b
                with pytest.raises(KmdError) as ei:
                    c.submit(c.ib(bo, bad))
                e = ei.value
                where = f"{name} at IB+0x0 ({m:#x}): "
                assert e.errno == errno.EINVAL and e.message.startswith(f"CS: {where}"), e.message
                why = e.message[len(f"CS: {where}"):]
                if d == -1:
                    assert why == f"reserved header bits {1 << b:#x} are set (the CP ignores them; this KMD " \
                                  "refuses them)", why
                elif any(a.dword == d and a.low >> b & 1 for a in r.aligns):
                    assert why.endswith("is not dword aligned"), why  # the CP: *_MISALIGNED
                else:
                    assert why == f"reserved bits {1 << b:#x} of payload dword {d} are set (the CP ignores " \
                                  "them; this KMD refuses them)", why
                n += 1
    assert n >= 30
    assert hw_state(kmd) == before
    for pkt in good.values():  # and the clean packets run
        if pkt[0] >> 8 & 0xFF != packets.DMA_DATA.opcode or kmd.info.has_dma:
            c.run(bo, pkt)
    quiet(kmd)


def check_cp_rules_refused(dev):
    """What the CP stops on (an oversized DMA, misaligned addresses, IB_SIZE 0, too deep an
    IB, an unsupported value) is refused at CS, so no client can force a GPU reset."""
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo(0x4000)
    m = bo.addr
    wait = pm4.encode_fields("WAIT_REG_MEM", {**addr_fields("WAIT_REG_MEM", m + 0x200), "MEM_SPACE": 1})
    wait[2] |= 2  # the address dword's bits [1:0] (below ADDR_LO): 0x202 past the BO's start
    cases = [
        (wait, f"addr {m + 0x202:#x} is not dword aligned"),
        (pm4.encode_fields("INDIRECT_BUFFER", {**addr_fields("INDIRECT_BUFFER", m + 0x1000, "base"), "IB_SIZE": 8}),
         None),
    ]
    # an oversized DMA_DATA (the field holds up to 2^21 - 1; the engine takes 2^CAPS.DMA_MAX_LOG2)
    if kmd.info.has_dma:
        big = kmd.info.dma_max_bytes + 1
        raw = pm4.encode_fields("DMA_DATA", {"SRC_ADDR_LO": m & 0xFFFF_FFFF, "SRC_ADDR_HI": m >> 32,
                                             "DST_ADDR_LO": (m + 0x1000) & 0xFFFF_FFFF,
                                             "DST_ADDR_HI": (m + 0x1000) >> 32, "BYTE_COUNT": big})
        expect(errno.EINVAL, f"CS: DMA_DATA at IB+0x0 ({m:#x}): BYTE_COUNT {big} is over the DMA engine's "
               f"limit of {kmd.info.dma_max_bytes} bytes (CAPS.DMA_MAX_LOG2)", c.submit, c.ib(bo, raw))
    expect(errno.EINVAL, f"CS: WAIT_REG_MEM at IB+0x0 ({m:#x}): {cases[0][1]}", c.submit, c.ib(bo, cases[0][0]))
    for name, fields, why in (
            ("WRITE_DATA", {"DST_SEL": 5, "ENGINE_SEL": 2, **addr_fields("WRITE_DATA", m + 0x100)}, "ENGINE_SEL=CE is not "
             "supported by this device"),
            ("RELEASE_MEM", {"EVENT_INDEX": 5, "DATA_SEL": 1, "INT_SEL": 7, **addr_fields("RELEASE_MEM", m + 0x100)},
             "INT_SEL=7 is not a defined value"),
            ("RELEASE_MEM", {"EVENT_INDEX": 5, "DATA_SEL": 1, "INT_SEL": 5, **addr_fields("RELEASE_MEM", m + 0x100)},
             "INT_SEL=SEND_INT_CTXID_IF_32 is not supported by this device"),
            ("INDIRECT_BUFFER", addr_fields("INDIRECT_BUFFER", m + 0x1000, "base"), "IB_SIZE is 0")):
        expect(errno.EINVAL, f"CS: {name} at IB+0x0 ({m:#x}): {why}", c.submit,
               c.ib(bo, pm4.encode_fields(name, fields, [1] if name == "WRITE_DATA" else ())))
    quiet(kmd)


# A stream of random packets: valid ones aimed inside the client's BO, then random bit flips.
_KINDS = ["NOP", "WRITE_DATA", "WAIT_REG_MEM", "RELEASE_MEM", "DMA_DATA", "INDIRECT_BUFFER", "FILLER"]


def _random_stream(rng: np.random.Generator, m: int, size: int, has_dma: bool) -> list[int]:
    words: list[int] = []
    for _ in range(int(rng.integers(1, 12))):
        k = _KINDS[int(rng.integers(len(_KINDS)))]
        a = m + 0x2000 + 4 * int(rng.integers(0, (size - 0x2000) // 4 - 64))
        if k == "NOP":
            words += pm4.nop(int(rng.integers(1, 6)))
        elif k == "WRITE_DATA":
            words += pm4.write_data(a, rng.integers(0, 1 << 32, int(rng.integers(1, 9))).tolist(),
                                    wr_confirm=int(rng.integers(2)))
        elif k == "WAIT_REG_MEM":
            words += pm4.wait_reg_mem(a, 0, 0, "ALWAYS" if rng.random() < 0.7 else "EQ")
        elif k == "RELEASE_MEM":
            words += pm4.release_mem(a & ~7, int(rng.integers(1 << 32)),
                                     data_sel=["NONE", "DATA_32", "DATA_64", "TIMESTAMP"][int(rng.integers(4))])
        elif k == "DMA_DATA" and has_dma:
            n = int(rng.integers(0, 200))
            src = m + 0x2000 + int(rng.integers(0, 0x1000))
            fill = rng.random() < 0.3
            words += pm4.dma_data(a, src & 0xFFFF_FFFF if fill else src, n, src_sel="DATA" if fill else "ADDRESS")
        elif k == "INDIRECT_BUFFER":
            words += pm4.indirect_buffer(m + 0x1000, 8)
        else:
            words.append(pm4.TYPE2_FILLER)
    for _ in range(int(rng.integers(0, 3))):  # flip bits
        i = int(rng.integers(len(words)))
        words[i] ^= 1 << int(rng.integers(32))
    return words


def _accepted_streams_run_clean(dev, seeds) -> int:
    """For each seed, a random stream: refused at CS, or run with no CP error. A wait the
    stream asked for (WAIT_REG_MEM EQ on a dword that never matches) may time out."""
    kmd = kmd_model.bind(dev, job_timeout=20_000, fallback_poll=5_000)
    c = Client()
    size = 0x4000
    bo = c.bo(size)
    m = bo.addr
    bo.u32[0x400:0x408] = pm4.write_data(m + 0x3F00, [7]) + pm4.pad(3)  # the IB2 every IB packet calls
    accepted = 0
    for seed in seeds:
        words = _random_stream(np.random.default_rng(seed), m, size, kmd.info.has_dma)
        words += pm4.pad(-len(words) % 8)
        try:
            seq = c.submit(c.ib(bo, words))
        except KmdError as e:
            assert e.errno == errno.EINVAL, e
            continue
        accepted += 1
        resets = kmd.stats["resets"] + kmd.stats["queue_resets"]  # (a gfx hang: queue 0's reset)
        try:
            c.wait(seq, 200_000)
        except KmdError as e:  # only a timeout the stream asked for
            assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT", (seed, e)
            assert any(pm4.decode(words, i).ok and getattr(pm4.decode(words, i), "name", "") == "WAIT_REG_MEM"
                       for i in range(len(words)) if words[i] >> 30 == 3), (seed, e)
            c = Client()  # the guilty context is done for; carry on with a new client
            bo = c.bo(size)
            m = bo.addr
            bo.u32[0x400:0x408] = pm4.write_data(m + 0x3F00, [7]) + pm4.pad(3)
            continue
        assert kmd.stats["resets"] + kmd.stats["queue_resets"] == resets and kmd.stats["cp_errors"] == 0, (seed, words)
    assert kmd.stats["cp_errors"] == 0
    return accepted


def check_accepted_streams_run_clean(dev):
    """Property: whatever the checker accepts, the CP runs without a packet or bus error."""
    n = 40 if dev.name != "model" else 400
    assert _accepted_streams_run_clean(dev, range(n)) > n // 4


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_accepted_streams_run_clean_hypothesis(seed):
    _accepted_streams_run_clean(RefModel(), [seed])


CHECKS = [check_reserved_bits_refused, check_cp_rules_refused, check_accepted_streams_run_clean]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


@pytest.mark.parametrize("check", [check_toctou_gpu_rewrite, *CHECKS], ids=lambda f: f.__name__[6:])
def test_on_model_without_dma(check):
    """The checks that branch on CAPS.DMA, on a device without the DMA engine (test_on_model's
    RefModel, and the RTL, have one): they send no DMA_DATA there, and what they do send is
    still refused or runs clean. A KMD that took every device for one with DMA sends the
    clean DMA_DATA to a CP that stops on it."""
    dev = RefModel(dma=False)
    assert not kmd_model.bind(dev).info.has_dma
    check(dev)
