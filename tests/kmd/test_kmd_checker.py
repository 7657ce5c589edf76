"""The CS checker at its edges: the read side (what a packet reads is the client's too),
every range exactly at the end of a BO (in) and one byte or dword past it (out), the
per-job limits met exactly, CHAINs after a bad packet, shared CHAIN targets, devices
without a DMA engine, three IB levels, accesses a mapping's permissions refuse, and a
closed BO still mapped for older jobs (the timeout diagnosis that reads the same streams:
tests/kmd_sched/reset/test_kmd_stuck_diagnosis.py).

These came out of the mutation campaign (`make mutate`, docs/verification.md): each
class of change the earlier tests let through has a test here. Bodies are
`check_*(dev)`, as in test_kmd_ioctl.py.
"""

from __future__ import annotations

import errno
import re

import numpy as np
import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import CsChunkIb, Domain, KmdError, Request
from spec import pm4
from testbench.refmodel import RefModel

from .test_kmd_ioctl import Client, addr_fields, drained_hw_state, expect, hw_state


def _outside(verb: str, where: str, m: int, a: int, n: int, ctx: int, end: int | None = None) -> str:
    """The refusal of a range in no mapping, or, `end` given, of one that starts in a mapping
    ending at `end` (with a hole after it) and runs past it."""
    why = (f"outside every mapping of context {ctx}" if end is None
           else f"which runs past the end of its mapping of context {ctx} at {end:#x}")
    return f"CS: {where} at IB+0x0 ({m:#x}) {verb} [{a:#x}, {a + n:#x}), {why}"


def check_read_side(dev):
    """A DMA_DATA copy may only read the client's own memory: another client's BO, the
    kernel's ring, fence and shadow pool are refused by name (EINVAL, "reads"), before
    anything reaches the hardware; a fill reads nothing, whatever its SRC field holds."""
    kmd = kmd_model.bind(dev)
    a, v = Client(), Client()
    abo, vbo = a.bo(0x4000), v.bo(0x4000)
    vbo.u32[:] = 0x5EC2E7
    m = abo.addr
    before = drained_hw_state(kmd)  # (bind()'s IB test may still be padding out on slow memory)
    for src in (vbo.addr, vbo.addr + 0x1000, kmd.ring.gpu_addr, kmd.fence_addr,
                kmd.shadow.bo.gpu_addr + kmd.shadow.bo.size - 0x40, m + 0x3FF0):  # the last: runs off our end
        past = m + 0x4000 if src == m + 0x3FF0 else None
        expect(errno.EINVAL, _outside("reads", "DMA_DATA", m, src, 0x20, a.ctx, past), a.submit,
               a.ib(abo, pm4.dma_data(m + 0x2000, src, 0x20)))
    # the destination is checked first: a bad one is named even when the source is bad too
    expect(errno.EINVAL, _outside("writes", "DMA_DATA", m, vbo.addr, 0x20, a.ctx), a.submit,
           a.ib(abo, pm4.dma_data(vbo.addr, vbo.addr + 0x100, 0x20)))
    assert hw_state(kmd) == before and not abo.u32[0x800:].any()
    # the good copy runs; a fill's SRC is its data, not an address
    abo.u32[0xC00:0xC08] = np.arange(8)
    a.run(abo, pm4.dma_data(m + 0x2000, m + 0x3000, 0x20, cp_sync=1))
    a.run(abo, pm4.dma_data(m + 0x2100, vbo.addr & 0xFFFF_FFFF, 0x10, src_sel="DATA", cp_sync=1))
    assert abo.u32[0x800:0x808].tolist() == list(range(8))
    assert abo.u32[0x840:0x844].tolist() == [vbo.addr & 0xFFFF_FFFF] * 4
    assert (vbo.u32 == 0x5EC2E7).all()


def check_ranges_at_the_end_of_a_bo(dev):
    """Every packet's range may end exactly at the end of its BO, and not one byte later."""
    kmd = kmd_model.bind(dev)
    c = Client()
    data = c.bo(0x1000)  # the ranges under test end at its end
    ibs = c.bo(0x2000)  # (mapped a page above: the page at `end` is a hole in the VM)
    d, end, ctx = data.addr, data.addr + 0x1000, c.ctx
    assert all(not m.va <= end < m.va + m.size for m in c.f.vm.maps)
    mem8, pend = dev.mem, c.phys(data) + 0x1000

    def refused(verb, name, a, n, dwords):
        expect(errno.EINVAL, _outside(verb, name, ibs.addr, a, n, ctx, end if a < end else None), c.submit,
               c.ib(ibs, dwords))

    c.run(ibs, pm4.write_data(end - 12, [1, 2, 3]))
    assert data.u32[-3:].tolist() == [1, 2, 3]
    refused("writes", "WRITE_DATA", end - 8, 12, pm4.write_data(end - 8, [1, 2, 3]))
    c.run(ibs, pm4.wait_reg_mem(end - 4, 3, 0xFF, "EQ"))  # polls the last dword (which holds 3)
    refused("polls", "WAIT_REG_MEM", end, 4, pm4.wait_reg_mem(end, 0, 0, "ALWAYS"))
    c.run(ibs, pm4.release_mem(end - 4, 7))
    assert data.u32[-1] == 7
    c.run(ibs, pm4.release_mem(end - 8, 0x1_0000_0008, data_sel="DATA_64"))
    assert data.u32[-2:].tolist() == [8, 1]
    c.run(ibs, pm4.release_mem(end - 8, 0, data_sel="TIMESTAMP"))
    assert data.u32[-2:].tolist() != [8, 1]
    refused("writes", "RELEASE_MEM", end, 4, pm4.release_mem(end, 7))
    refused("writes", "RELEASE_MEM", end, 8, pm4.release_mem(end, 7, data_sel="DATA_64"))
    refused("writes", "RELEASE_MEM", end, 8, pm4.release_mem(end, 7, data_sel="TIMESTAMP"))
    c.run(ibs, pm4.release_mem(end, 9, data_sel="NONE", int_sel="NONE"))  # writes nothing: anywhere is fine
    # an IB of one dword in the BO's last dword; of two, one past it
    data.u32[-1] = pm4.TYPE2_FILLER
    c.run(ibs, pm4.indirect_buffer(end - 4, 1))
    refused("runs", "INDIRECT_BUFFER", end - 4, 8, pm4.indirect_buffer(end - 4, 2))
    if kmd.info.has_dma:
        data.u32[0] = 0xAB
        c.run(ibs, pm4.dma_data(end - 1, d, 1, cp_sync=1))  # one byte: the last
        assert mem8[pend - 1] == 0xAB and data.u32[-1] >> 24 == 0xAB
        c.run(ibs, pm4.dma_data(end - 1, d + 4, 0, cp_sync=1))  # none at all: the byte it names is the BO's
        assert mem8[pend - 1] == 0xAB
        refused("writes", "DMA_DATA", end - 1, 2, pm4.dma_data(end - 1, d, 2))
        refused("writes", "DMA_DATA", end, 1, pm4.dma_data(end, d, 1))
        refused("reads", "DMA_DATA", end - 1, 2, pm4.dma_data(d, end - 1, 2))
        # a 1-byte copy to the BO's last byte from a source that is not ours: the source is named
        refused("reads", "DMA_DATA", end, 1, pm4.dma_data(end - 1, end, 1))
    assert kmd.stats["resets"] == 0 and kmd.stats["cp_errors"] == 0


def check_lowest_bo_and_wrapped_addresses(dev):
    """The client's BO is the lowest in its VM (the first mapping): an IB in it runs, and an
    address whose high dword has bit 31 set (negative as a 64-bit signed number) is refused,
    not taken for an address in that BO."""
    kmd = kmd_model.bind(dev)
    c = Client()
    low = c.bo(0x1000, Domain.VRAM)
    assert low.addr == min(m.va for m in c.f.vm.maps)
    c.run(low, pm4.write_data(low.addr + 0x100, [0x10]))
    assert low.u32[0x40] == 0x10
    for hi in (0x8000_0000, 0xFFFF_FFFF, 0x1_0000):
        a = hi << 32 | (low.addr + 0x100)
        expect(errno.EINVAL, _outside("writes", "WRITE_DATA", low.addr, a, 4, c.ctx), c.submit,
               c.ib(low, pm4.write_data(a, [1])))
        # every packet kind names the address whole, bits above 47 included (the CP would
        # latch only its low 48 bits, which name this BO: tests/kmd_sched/reset/test_kmd_cp_error.py)
        expect(errno.EINVAL, _outside("polls", "WAIT_REG_MEM", low.addr, a, 4, c.ctx), c.submit,
               c.ib(low, pm4.wait_reg_mem(a, 0, 0, "ALWAYS")))
        expect(errno.EINVAL, _outside("writes", "RELEASE_MEM", low.addr, a, 8, c.ctx), c.submit,
               c.ib(low, pm4.release_mem(a, 7, data_sel="DATA_64")))
        for chain in (0, 1):
            expect(errno.EINVAL, _outside("runs", "INDIRECT_BUFFER", low.addr, a, 32, c.ctx), c.submit,
                   c.ib(low, pm4.indirect_buffer(a, 8, chain=chain)))
        if kmd.info.has_dma:
            expect(errno.EINVAL, _outside("reads", "DMA_DATA", low.addr, a, 4, c.ctx), c.submit,
                   c.ib(low, pm4.dma_data(low.addr + 0x200, a, 4)))
            expect(errno.EINVAL, _outside("writes", "DMA_DATA", low.addr, a, 4, c.ctx), c.submit,
                   c.ib(low, pm4.dma_data(a, low.addr + 0x200, 4)))
    assert low.u32[0x40] == 0x10 and kmd.stats["resets"] == 0


def check_bad_packet_before_a_chain(dev):
    """A bad packet followed by a CHAIN: the job is refused for the bad packet (the CP would
    stop there), whether the CHAIN is good or not; the CHAIN's target is not even copied."""
    kmd = kmd_model.bind(dev)
    a, v = Client(), Client()
    bo, vbo = a.bo(0x4000), v.bo()
    m = bo.addr
    bo.u32[0x800:0x808] = pm4.write_data(m + 0x3000, [1]) + pm4.pad(3)  # the CHAIN's target
    chain = pm4.indirect_buffer(m + 0x2000, 8, chain=1)
    for bad, why in ((pm4.write_data(vbo.addr, [1]), f"writes [{vbo.addr:#x}, {vbo.addr + 4:#x}), outside "
                      f"every mapping of context {a.ctx}"),
                     (pm4.encode_fields("WRITE_DATA", {"DST_SEL": 0, **addr_fields("WRITE_DATA", m + 0x100)}, [1]),
                      ": DST_SEL=REGISTER is not supported by this device")):
        sep = " " if why.startswith("writes") else ""
        expect(errno.EINVAL, f"CS: WRITE_DATA at IB+0x8 ({m + 8:#x}){sep}{why}",
               a.submit, a.ib(bo, pm4.nop(1) + bad + chain))
    assert not bo.u32[0xC00] and kmd.stats["cs_rejected"] == 2


def _pool_bytes(*dwords: int) -> int:
    """Bytes of the shadow pool copies of these sizes take (each starts 32-byte aligned)."""
    return sum(-(-4 * n // 32) * 32 for n in dwords)


def check_shared_chain_target(dev):
    """Two IB2s CHAIN to the same IB: it is copied once, both copies of the CHAIN point at
    its copy, it runs twice, and both runs count against the per-job limit."""
    limit = 1024
    kmd = kmd_model.bind(dev, max_job_dw=limit)
    c = Client()
    bo = c.bo(0x8000)
    m = bo.addr
    shared = 64  # dwords, at +0x4000: writes 0x5A, then fillers
    bo.u32[0x1000:0x1000 + shared] = pm4.write_data(m + 0x7000, [0x5A]) + [pm4.TYPE2_FILLER] * (shared - 5)
    for i, at in enumerate((0x1800, 0x1900)):  # IB2 a and b (12 dwords): a write of their own, the CHAIN
        bo.u32[at // 4:at // 4 + 12] = (pm4.write_data(m + 0x7004 + 4 * i, [0xA0 + i]) + pm4.pad(3)
                                        + pm4.indirect_buffer(m + 0x4000, shared, chain=1))
    ib1 = pm4.indirect_buffer(m + 0x1800, 12) + pm4.indirect_buffer(m + 0x1900, 12)  # 8 dwords
    assert c.wait(c.submit(c.ib(bo, ib1)))
    assert bo.u32[0x1C00:0x1C03].tolist() == [0x5A, 0xA0, 0xA1]
    assert kmd.stats["cs_shadow_bytes"] == _pool_bytes(8, 12, 12, shared)  # one copy of the shared IB
    # the limit counts the shared IB at each run: an IB1 padded to exactly the limit runs ...
    runs = len(ib1) + 2 * (12 + shared)
    pad = limit - runs
    big = c.bo(0x4000)
    big.u32[:len(ib1) + pad + 1] = ib1 + [pm4.TYPE2_FILLER] * (pad + 1)
    assert c.wait(c.submit(CsChunkIb(len(ib1) + pad, big.handle)))
    # ... one dword more does not
    expect(errno.EINVAL, f"CS: the job of context {c.ctx} runs more than {limit} dwords (the per-job limit; "
           "every IB counts each time it runs)", c.submit, CsChunkIb(len(ib1) + pad + 1, big.handle))


def check_job_limits_exact(dev):
    """The per-job limit, met exactly by an IB and its CHAIN, by two chunks, and by distinct
    IBs copied and run once each; one dword more is refused each time."""
    limit = 2048
    kmd = kmd_model.bind(dev, max_job_dw=limit)
    assert kmd.max_job_dw == limit
    c = Client()
    bo = c.bo(0x10000)
    m = bo.addr
    over = (errno.EINVAL, f"CS: the job of context {c.ctx} runs more than {limit} dwords (the per-job limit; "
            "every IB counts each time it runs)")
    bo.u32[:] = pm4.TYPE2_FILLER  # fillers: any cut of them is a valid IB
    # an IB (256 dwords, ending in a CHAIN) and its CHAIN target (the rest)
    a_dw = 256
    bo.u32[a_dw - 4:a_dw] = pm4.indirect_buffer(m + 0x8000, limit - a_dw, chain=1)
    assert c.wait(c.submit(CsChunkIb(a_dw, bo.handle)))
    bo.u32[a_dw - 4:a_dw] = pm4.indirect_buffer(m + 0x8000, limit - a_dw + 1, chain=1)
    expect(*over, c.submit, CsChunkIb(a_dw, bo.handle))
    # two chunks: each under the limit, together exactly at it, then over it
    half = limit // 2
    assert c.wait(c.submit(CsChunkIb(half, bo.handle, 0x8000), CsChunkIb(half, bo.handle, 0x8000)))
    expect(*over, c.submit, CsChunkIb(half, bo.handle, 0x8000), CsChunkIb(half + 1, bo.handle, 0x8000))
    # the same chunk twice: copied once (under the limit), run twice (over it)
    expect(*over, c.submit, CsChunkIb(half + 1, bo.handle, 0x8000), CsChunkIb(half + 1, bo.handle, 0x8000))
    # distinct IBs, each copied and run once: an IB1 of 8 dwords calls two IB2s that fill up the rest
    ib2_dw = (limit - 8) // 2
    calls = pm4.indirect_buffer(m + 0x8000, ib2_dw) + pm4.indirect_buffer(m + 0x8000 + 4 * ib2_dw, ib2_dw)
    bo.u32[0x3F00:0x3F08] = calls
    assert 8 + 2 * ib2_dw == limit
    assert c.wait(c.submit(CsChunkIb(8, bo.handle, 0xFC00)))
    bo.u32[0x3F04:0x3F08] = pm4.indirect_buffer(m + 0x8000 + 4 * ib2_dw, ib2_dw + 1)
    expect(*over, c.submit, CsChunkIb(8, bo.handle, 0xFC00))
    assert kmd.stats["resets"] == 0


def check_deepest_level_chain_rules(dev):
    """In the deepest IB (IB2 of 2) only a CHAIN is allowed, and it is checked like any
    INDIRECT_BUFFER: IB_SIZE 0 is refused there too; VALID is not looked at (AMD's gfx
    ring leaves it 0), so a chain with VALID 0 or 1 runs."""
    kmd_model.bind(dev)
    c = Client()
    bo = c.bo(0x4000)
    m = bo.addr
    ib2 = m + 0x2000
    bo.u32[0x800:0x808] = pm4.nop(3) + pm4.encode_fields(
        "INDIRECT_BUFFER", {**addr_fields("INDIRECT_BUFFER", m + 0x3000, "base"), "VALID": 1, "CHAIN": 1})
    expect(errno.EINVAL, f"CS: INDIRECT_BUFFER at IB2+0x10 ({ib2 + 0x10:#x}): IB_SIZE is 0", c.submit,
           c.ib(bo, pm4.indirect_buffer(ib2, 8)))
    for valid in (0, 1):
        bo.u32[0xC00:0xC08] = pm4.write_data(m + 0x100, [3 + valid]) + pm4.pad(3)
        bo.u32[0x800:0x808] = pm4.nop(3) + pm4.indirect_buffer(m + 0x3000, 8, chain=1, valid=valid)
        c.run(bo, pm4.indirect_buffer(ib2, 8))
        assert bo.u32[0x40] == 3 + valid


def check_shadow_layout_and_client_addresses(dev):
    """Copies start on 32-byte boundaries (the pool's bytes say so), and an address inside a
    copy is reported as the client's: a timeout in the first dword of an IB2 whose IB1 is
    exactly 32 bytes names the IB2, not the end of the IB1."""
    kmd = kmd_model.bind(dev, job_timeout=20_000, fallback_poll=5_000)
    c = Client()
    bo = c.bo(0x4000)
    m = bo.addr
    bo.u32[0x800:0x80C] = pm4.wait_reg_mem(m + 0x3000, 1, 1, "EQ") + pm4.pad(5)  # IB2: 12 dwords
    seq = c.submit(c.ib(bo, pm4.indirect_buffer(m + 0x2000, 12)))  # IB1: 8 dwords
    assert kmd.stats["cs_shadow_bytes"] == 32 + 64  # 12 dwords take 64 bytes of the pool
    with pytest.raises(KmdError) as ei:
        c.wait(seq, 200_000)
    e = ei.value
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT"
    assert re.search(rf"stuck in WAIT_REG_MEM at IB2\+0x0 \({m + 0x2000:#x}\): \*{m + 0x3000:#x} & 0x1 = 0x0, "
                     r"waits for == 0x1, context", e.message), e.message


CHECKS = [check_read_side, check_ranges_at_the_end_of_a_bo, check_lowest_bo_and_wrapped_addresses,
          check_bad_packet_before_a_chain, check_shared_chain_target, check_job_limits_exact,
          check_deepest_level_chain_rules, check_shadow_layout_and_client_addresses]


def _perm(verb: str, where: str, m: int, a: int, n: int, need: str, ctx: int) -> str:
    return (f"CS: {where} at IB+0x0 ({m:#x}) {verb} [{a:#x}, {a + n:#x}), in a mapping of context {ctx} "
            f"without {need}")


def test_no_dma_engine():
    """A device without a DMA engine: DMA_DATA is refused at CS (the CP would stop on it)."""
    kmd = kmd_model.bind(RefModel(dma=False))
    assert not kmd.info.has_dma
    c = Client()
    bo = c.bo()
    m = bo.addr
    for pkt in (pm4.dma_data(m + 0x100, m + 0x200, 16), pm4.dma_data(m + 0x100, 0, 4, src_sel="DATA")):
        expect(errno.EINVAL, f"CS: DMA_DATA at IB+0x0 ({m:#x}): this device has no DMA engine (CAPS.DMA = 0)",
               c.submit, c.ib(bo, pkt))
    c.run(bo, pm4.write_data(m + 0x100, [1]))
    assert bo.u32[0x40] == 1


def test_dma_byte_count_limit_exact():
    """BYTE_COUNT up to the engine's limit is accepted and runs; one more is refused."""
    dev = RefModel(dma=True)
    kmd = kmd_model.bind(dev)
    lim = kmd.info.dma_max_bytes
    c = Client()
    bo = c.bo(lim + 0x1000)
    m = bo.addr
    c.run(bo, pm4.dma_data(m + 0x1000, 0xC0DE, lim, src_sel="DATA", cp_sync=1), offset=0)
    assert bo.u32[0x400] == 0xC0DE and bo.u32[-1] == 0xC0DE
    raw = pm4.dma_data(m + 0x1000, 0xC0DE, lim, src_sel="DATA")
    raw[-1] += 1  # BYTE_COUNT is the low field of the last dword
    expect(errno.EINVAL, f"CS: DMA_DATA at IB+0x0 ({m:#x}): BYTE_COUNT {lim + 1} is over the DMA engine's limit "
           f"of {lim} bytes (CAPS.DMA_MAX_LOG2)", c.submit, c.ib(bo, raw))


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_three_ib_levels():
    """A device with three IB levels: an IB3 runs, and what is wrong in it is named there."""
    kmd = kmd_model.bind(RefModel(ib_levels=3))
    assert kmd.info.ib_levels == 3
    c, v = Client(), Client()
    bo, vbo = c.bo(), v.bo()
    m = bo.addr
    bo.u32[0x400:0x408] = pm4.indirect_buffer(m + 0x2000, 8) + pm4.pad(4)  # IB2 -> IB3
    bo.u32[0x800:0x808] = pm4.write_data(m + 0x3000, [3]) + pm4.pad(3)
    c.run(bo, pm4.indirect_buffer(m + 0x1000, 8))
    assert bo.u32[0xC00] == 3
    bo.u32[0x800:0x808] = pm4.write_data(vbo.addr, [3]) + pm4.pad(3)
    expect(errno.EINVAL, f"CS: WRITE_DATA at IB3+0x0 ({m + 0x2000:#x}) writes [{vbo.addr:#x}, {vbo.addr + 4:#x}), "
           f"outside every mapping of context {c.ctx}", c.submit, c.ib(bo, pm4.indirect_buffer(m + 0x1000, 8)))


def test_a_write_to_one_address_is_one_dword():
    """WRITE_DATA with ADDR_INCR = NO_INCREMENT (amdgpu's WR_ONE_ADDR) writes one dword
    however many it carries: at the last dword of a BO it is accepted, and refused it
    names that dword alone."""
    kmd_model.bind(RefModel())
    c, v = Client(), Client()
    bo, vbo = c.bo(0x1000), v.bo(0x1000)
    last = bo.addr + bo.size - 4
    c.run(bo, pm4.write_data(last, [1, 2, 3], addr_incr="NO_INCREMENT"))
    assert bo.u32[-1] == 3
    expect(errno.EINVAL, _outside("writes", "WRITE_DATA", bo.addr, vbo.addr, 4, c.ctx), c.submit,
           c.ib(bo, pm4.write_data(vbo.addr, [1, 2, 3], addr_incr="NO_INCREMENT")))


def test_an_access_its_mapping_does_not_permit_is_refused_at_cs():
    """docs/architecture.md, "The security boundary": a range whose mapping does not permit
    the access is refused at CS (what the MMU would stop never costs a reset), for every
    packet that names memory, and an IB must be in an EXECUTABLE mapping (the CP would
    fetch it; the shadow copy must not run what the client said is not code)."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    R, W = uapi.VmFlags.READABLE, uapi.VmFlags.WRITEABLE
    bo = c.bo(0x1000)  # RWX: the IBs
    ro, wo, rw = c.bo(0x1000, vm_flags=R), c.bo(0x1000, vm_flags=W), c.bo(0x1000, vm_flags=R | W)
    m = bo.addr
    before = hw_state(kmd)
    cases = [
        ("writes", "WRITE_DATA", pm4.write_data(ro.addr, [1]), ro.addr, 4, "WRITEABLE"),
        ("polls", "WAIT_REG_MEM", pm4.wait_reg_mem(wo.addr, 0, 0xFFFF_FFFF, "EQ"), wo.addr, 4, "READABLE"),
        ("writes", "RELEASE_MEM", pm4.release_mem(ro.addr, 1), ro.addr, 4, "WRITEABLE"),
        ("writes", "DMA_DATA", pm4.dma_data(ro.addr, rw.addr, 16), ro.addr, 16, "WRITEABLE"),
        ("reads", "DMA_DATA", pm4.dma_data(rw.addr, wo.addr, 16), wo.addr, 16, "READABLE"),
        ("runs", "INDIRECT_BUFFER", pm4.indirect_buffer(rw.addr, 8), rw.addr, 32, "EXECUTABLE"),
    ]
    for verb, name, words, a, n, need in cases:
        expect(errno.EINVAL, _perm(verb, name, m, a, n, need, c.ctx), c.submit, c.ib(bo, words))
    rw.u32[:8] = pm4.pad(8)
    expect(errno.EINVAL, f"CS: IB at {rw.addr:#x}+0x20 is in a mapping of context {c.ctx} without EXECUTABLE",
           c.submit, CsChunkIb(8, handle=rw.handle))
    assert hw_state(kmd) == before and kmd.stats["resets"] == 0
    c.run(bo, pm4.dma_data(wo.addr, ro.addr, 16))  # what each mapping permits runs
    c.run(bo, pm4.write_data(rw.addr, [7]) + pm4.wait_reg_mem(rw.addr, 7, 0xFFFF_FFFF, "EQ"))


def test_a_closed_bo_still_mapped_for_older_jobs_is_not_the_new_jobs():
    """GEM_CLOSE of a BO a job still uses keeps its mapping for that job only (Vm.bos: the
    jobs submitted after it do not hold it, so it is freed and unmapped when the old job
    retires). A job submitted after the close that names it is refused at CS, instead of
    being accepted and then faulting, or not, depending on when the old job retires."""
    kmd = kmd_model.bind(RefModel(), job_timeout=50_000)
    c = Client()
    ib, x, flag = c.bo(), c.bo(), c.bo()
    old = c.submit(c.ib(ib, pm4.wait_reg_mem(flag.addr, 1, 0xFFFF_FFFF, "EQ") + pm4.write_data(x.addr, [1])))
    c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(x.handle))
    expect(errno.EINVAL, _outside("writes", "WRITE_DATA", ib.addr + 0x400, x.addr + 4, 4, c.ctx),
           c.submit, c.ib(ib, pm4.write_data(x.addr + 4, [2]), 0x400))
    flag.u32[0] = 1
    assert c.wait(old) and kmd.stats["resets"] == 0  # the older job had it to the end
