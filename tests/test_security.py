"""A malicious client, with only the ioctls and the UMD's API: it cannot reach memory that
is not its own, force a GPU reset, fake another client's fence, get an innocent client
blamed, read what an earlier client left behind, or write through a mapping it gave back.

Each `check_*(dev)` runs on the reference model here and on the RTL under both simulators
(tests/test_rtl_drivers.py); the long ones (a maximum-size IB on the RTL, a plain race
with the running CP, 1,000 flushes against a held CP) run on Verilator in
tests/test_rtl_security.py. The time-of-check-to-time-of-use attacks need the CP to be
held (a job waiting in WAIT_REG_MEM) so the rewrite lands before the CP fetches.
"""

from __future__ import annotations

import errno
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kmd_model
import umd
from kmd_model import uapi
from kmd_model.core.kmd import Wb
from kmd_model.uapi import CsChunkIb, Domain, KmdError, MappingRevoked, Request
from spec import packets, pm4, rules
from testbench.refmodel import RefModel

from .test_kmd_ioctl import Client, addr_fields, expect, hw_state

EVIL = 0xBAD0_0BAD


class Holder:
    """A client whose job holds the CP in a WAIT_REG_MEM until `release()`."""

    def __init__(self):
        self.c = Client()
        self.bo = self.c.bo(0x1000)
        self.seq = self.c.submit(self.c.ib(self.bo, pm4.wait_reg_mem(self.bo.addr + 0x800, 1, 1, "EQ")))

    def release(self) -> None:
        self.bo.u32[0x200] = 1
        assert self.c.wait(self.seq)


def quiet(kmd) -> None:
    """No GPU error, no reset, no timeout happened."""
    s = kmd.kmd_stats()
    assert (s["resets"], s["cp_errors"], s["job_timeouts"]) == (0, 0, 0), s


def _targets(kmd, victim) -> dict[str, int]:
    """Memory that is not the attacker's, by name: dword addresses."""
    t = {"another client's BO": victim.addr + 0x100,
         "the kernel ring": kmd.ring.gpu_addr + 4 * ((kmd.ring.wptr + 64) & kmd.ring.mask),
         "the ring's rptr write-back": kmd.wb_addr(Wb.RING_RPTR),
         "the ring's fence dword": kmd.fence_addr,
         "the shadow pool": kmd.shadow.bo.gpu_addr + kmd.shadow.bo.size - 64}
    if kmd.ih is not None:
        t["the IH ring"] = kmd.ih.gpu_addr + 4 * ((kmd.ih.rptr + 16) & (kmd.ih.size_dw - 1))
    return t


# ------------------------------------------------------------------------------ time of check, time of use

def check_toctou_cpu_rewrite(dev):
    """The client rewrites its IB from the CPU after CS returned, before the CP fetched it:
    the CP runs what was checked, for every target the rewrite aims at."""
    kmd = kmd_model.bind(dev)
    a, v = Client(), Client()
    abo, vbo = a.bo(), v.bo()
    vbo.u32[:] = 0x5A5A5A5A
    for name, target in _targets(kmd, vbo).items():
        hold = Holder()
        seq = a.submit(a.ib(abo, pm4.write_data(abo.addr + 0x2000, [len(name)], wr_confirm=1)))
        before = int(kmd.mem32[target // 4])
        abo.u32[:8] = pm4.write_data(target, [EVIL], wr_confirm=1) + pm4.pad(3)  # after the check
        hold.release()
        assert a.wait(seq)
        assert abo.u32[0x800] == len(name), f"{name}: the checked IB did not run"
        assert int(kmd.mem32[target // 4]) != EVIL, f"the rewritten IB wrote {name}"
        if name == "another client's BO":
            assert int(kmd.mem32[target // 4]) == before
    assert (vbo.u32 == 0x5A5A5A5A).all()
    quiet(kmd)


def check_toctou_gpu_rewrite(dev):
    """The job rewrites its own IBs on the GPU (WRITE_DATA into a later IB2, DMA_DATA over a
    CHAIN target, WRITE_DATA over the rest of its own IB): the CP runs the checked copies."""
    kmd = kmd_model.bind(dev)
    a, v = Client(), Client()
    abo, vbo = a.bo(0x8000), v.bo()
    vbo.u32[:] = 0x5A5A5A5A
    m, t = abo.addr, vbo.addr
    evil = pm4.write_data(t, [EVIL], wr_confirm=1) + pm4.pad(3)  # 8 dwords
    benign = [pm4.write_data(m + 0x6000 + 4 * i, [0x600D + i], wr_confirm=1) + pm4.pad(3) for i in range(3)]
    abo.u32[0x400:0x408] = benign[0]  # an IB2 at +0x1000
    abo.u32[0x500:0x508] = benign[1]  # a CHAIN target at +0x1400
    abo.u32[0x600:0x608] = evil  # the DMA's source, at +0x1800
    ib1 = (pm4.write_data(m + 0x1000, evil, wr_confirm=1)  # overwrites the IB2, then calls it
           + pm4.indirect_buffer(m + 0x1000, 8)
           + (pm4.dma_data(m + 0x1400, m + 0x1800, 32, cp_sync=1) if kmd.info.has_dma else
              pm4.write_data(m + 0x1400, evil, wr_confirm=1)))  # overwrites the CHAIN target
    own = len(ib1) + 9  # where the packet after the next one starts: overwritten by the next one
    ib1 += pm4.write_data(m + 4 * own, evil[:5], wr_confirm=1)
    assert len(ib1) == own
    ib1 += benign[2][:5] + pm4.indirect_buffer(m + 0x1400, 8, chain=1)
    ib1 += pm4.pad(-len(ib1) % 8)
    abo.u32[: len(ib1)] = ib1
    seq = a.submit(CsChunkIb(len(ib1), abo.handle))
    assert a.wait(seq)
    assert abo.u32[0x1800:0x1803].tolist() == [0x600D, 0x600E, 0x600F], "the checked copies did not all run"
    assert (vbo.u32 == 0x5A5A5A5A).all(), "a rewritten IB ran"
    quiet(kmd)


def check_fake_fence(dev):
    """A rewritten job writes the ring's fence dword with an innocent job's seqno, raises an
    interrupt so the KMD reads it, and stalls before the real fence: the innocent client's
    WAIT_CS does not return before its job ran."""
    kmd = kmd_model.bind(dev)
    a, v = Client(), Client()
    abo, vbo = a.bo(), v.bo()
    hold = Holder()
    aseq = a.submit(a.ib(abo, pm4.write_data(abo.addr + 0x2000, [1], wr_confirm=1) + pm4.pad(19)))
    vseq = v.submit(v.ib(vbo, pm4.wait_reg_mem(vbo.addr, 1, 1, "EQ") + pm4.write_data(vbo.addr + 0x100, [0x600D])))
    hw_seq = kmd.fence_drv.sync_seq  # the innocent job's hardware fence
    fake = (pm4.write_data(kmd.fence_addr, [hw_seq], wr_confirm=1)
            + pm4.release_mem(abo.addr + 0x3000, 0, data_sel="NONE", int_sel="SEND_INT")  # the KMD looks
            + pm4.wait_reg_mem(abo.addr + 0x3004, 1, 1, "EQ"))  # and the real fence never comes
    assert len(fake) == 20
    abo.u32[:24] = fake + pm4.pad(4)
    hold.release()
    assert a.wait(aseq, 20_000)
    expect(errno.ETIME, f"WAIT_CS: seqno {vseq:#x} of context {v.ctx} not signalled after 20000 cycles",
           v.wait, vseq, 20_000)
    assert vbo.u32[0x40] == 0
    vbo.u32[0] = 1
    assert v.wait(vseq) and vbo.u32[0x40] == 0x600D
    quiet(kmd)


def check_innocent_not_blamed(dev):
    """A rewritten job puts an illegal packet where an innocent job's packets sit in the
    kernel ring: nothing happens to the innocent client (no reset, not guilty)."""
    kmd = kmd_model.bind(dev)
    a, v = Client(), Client()
    abo, vbo = a.bo(), v.bo()
    hold = Holder()
    aseq = a.submit(a.ib(abo, pm4.write_data(abo.addr + 0x2000, [1], wr_confirm=1)))
    vseq = v.submit(v.ib(vbo, pm4.write_data(vbo.addr + 0x100, [0x600D])))
    vjob = v.f.contexts[v.ctx].jobs[vseq]
    slot = kmd.ring.gpu_addr + 4 * (vjob.ring_start & kmd.ring.mask)
    abo.u32[:8] = pm4.write_data(slot, [pm4.header(0x7B, 0), 0], wr_confirm=1) + pm4.pad(2)
    hold.release()
    assert a.wait(aseq) and v.wait(vseq) and vbo.u32[0x40] == 0x600D
    for c in (a, v):
        st = c.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.QUERY_STATE, c.ctx))
        assert st.reset_status == uapi.ResetStatus.NO_RESET and st.error is None
    quiet(kmd)


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
    before = hw_state(kmd)
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
            assert e.errno in (errno.EINVAL, errno.EFAULT), e
            continue
        accepted += 1
        resets = kmd.stats["resets"]
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
        assert kmd.stats["resets"] == resets and kmd.stats["cp_errors"] == 0, (seed, words)
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


# ------------------------------------------------------------------------------ mappings and stale data

def check_stale_mapping(dev):
    """A mapping kept past GEM_CLOSE is revoked: using it says so, and nothing written
    through any alias of it reaches the BO the next client gets at that address."""
    kmd = kmd_model.bind(dev)
    a, b = Client(), Client()
    old = a.bo(0x2000)
    view8 = a.io(Request.GEM_MMAP, uapi.GemMmapArgs(old.handle)).view
    alias = np.frombuffer(memoryview(view8), dtype=np.uint8)  # past every Python-level check
    phys = a.phys(old)
    a.io(Request.GEM_CLOSE, uapi.GemCloseArgs(old.handle))
    new = b.bo(0x2000)
    assert b.phys(new) == phys  # first fit: the same memory
    for use in (lambda: old.u32.__setitem__(0, EVIL), lambda: old.u32[0], lambda: old.u32.tolist(),
                lambda: view8[:4], lambda: np.copyto(view8, 1), lambda: view8 + 1, lambda: bytes(view8.tobytes()),
                lambda: old.u32.view("<u2"), lambda: old.u32.sum()):
        with pytest.raises(MappingRevoked, match=rf"^BO fd{a.f.fd}:{old.handle} \[{phys:#x}, "
                           rf"{phys + 0x2000:#x}\) was closed \(GEM_CLOSE\): its CPU mapping is gone, "
                           r"as after munmap$"):
            use()
    alias[:] = 0xEE  # an alias made before the close writes nowhere
    assert not new.u32.any()
    assert not dev.mem[phys:phys + 0x2000].any()
    # a copy made before the close is the client's own
    a2 = a.bo(0x1000)
    a2.u32[:4] = [1, 2, 3, 4]
    mine = a2.u32[:4].copy()
    a.io(Request.GEM_CLOSE, uapi.GemCloseArgs(a2.handle))
    assert mine.tolist() == [1, 2, 3, 4]
    # closing the file revokes too; the UMD's Buffer refuses its own use after free (without
    # pools, whose freed memory stays the device's own, mapped, to be reused)
    gpu = umd.open(api_version=2, pools=False)
    buf = gpu.alloc(4096)
    u = buf.u32
    buf.free()
    with pytest.raises(MappingRevoked):
        u[0] = 1
    with pytest.raises(ValueError, match="map: <umd.Buffer GTT .*> was freed"):
        buf.map()
    u2 = gpu.alloc(4096).u32
    gpu.close()
    with pytest.raises(MappingRevoked):
        u2[0]
    quiet(kmd)


def check_no_stale_data(dev):
    """Every new BO reads as zeros, whatever its domain and flags: nothing a previous owner
    (another client, or the kernel) wrote is left in it."""
    kmd = kmd_model.bind(dev)
    for domain in (Domain.GTT, Domain.VRAM):
        a = Client()
        secret = a.bo(0x3000, domain)
        secret.u32[:] = 0x5EC2E7
        phys = a.phys(secret)
        b = Client()  # (its page directory is made before the memory comes free)
        a.io(Request.GEM_CLOSE, uapi.GemCloseArgs(secret.handle))
        for flags in (0, uapi.GemFlags.CPU_ACCESS_REQUIRED):
            out = b.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x3000, 0, domain, flags))
            assert b.f.handles[out.handle].gpu_addr == phys  # the same memory
            view = b.io(Request.GEM_MMAP, uapi.GemMmapArgs(out.handle)).view
            assert not view.any(), f"{domain.name} BO with flags {flags} holds old data"
            view[:] = 0x77
            b.io(Request.GEM_CLOSE, uapi.GemCloseArgs(out.handle))
    # what a UMD asks for without clearing (IBs, staging) is zeroed all the same when it
    # comes from the kernel (without pools: every buffer is a new BO, here at the same address)
    gpu = umd.open(api_version=2, pools=False)
    x = gpu.alloc(0x1000, zero=False)
    x.u32[:] = 0x5EC2E7
    addr = x.gpu_addr
    x.free()
    y = gpu.alloc(0x1000, zero=False)
    assert y.gpu_addr == addr and not y.u32.any()
    gpu.close()
    # with pools, reused memory is only ever the same device's own (its cache and slabs),
    # and alloc() without zero=False clears it
    gpu = umd.open(api_version=2)
    x = gpu.alloc(0x1000, zero=False)
    x.u32[:] = 0x5EC2E7
    x.free()
    y = gpu.alloc(0x1000)
    assert y.backing is x.backing and not y.u32.any()
    gpu.close()
    quiet(kmd)


# ------------------------------------------------------------------------------ the UMD's fences and memory

def _wrap(dev, first_seq: int):
    """Submissions from `first_seq` on, in flight behind a held CP: finish() waits for
    them (it does not take the zero-filled fence dword for a seqno), no IB in flight is
    reused, and everything lands once the CP moves."""
    kmd = kmd_model.bind(dev, initial_seq=first_seq)
    gpu = umd.open(api_version=2)
    buf = gpu.alloc(0x1000)
    hold = Holder()
    q = gpu.queue(flush_threshold=1)
    for i in range(6):
        q.write(buf, 4 * i, 0x100 + i)  # one submission each, across the wrap
    seqs = [s.seq for s in q.inflight]
    assert seqs[0] == first_seq and seqs[-1] == (first_seq + 5) & 0xFFFF_FFFF  # each context counts on its own
    assert not q.seq_done(seqs[0]) and not q.seq_done(seqs[-1])
    with pytest.raises(umd.GpuTimeout, match=rf"^finish: queue \(context {q.ctx_id}\) not idle after 5000 cycles$"):
        q.finish(5000)
    assert len(q.inflight) == 6 and not q.pool.free  # nothing in flight came back to the pool
    q.write(buf, 0x40, 0x200)  # a new IB, not one in flight
    assert q.pool.created == 7
    assert not buf.u32[:7].any()
    hold.release()
    q.finish()
    assert buf.u32[:6].tolist() == [0x100 + i for i in range(6)] and buf.u32[0x10] == 0x200
    assert q.seq_done(seqs[-1]) and q.fence_trusted
    gpu.close()
    quiet(kmd)


def check_fence_wrap_from_top(dev):
    _wrap(dev, 0xFFFF_FFFE)


def check_fence_wrap_from_zero(dev):
    _wrap(dev, 0)


def _held_flushes(dev, n: int):
    """A held CP and `n` flushes: the queue never has more than max_inflight submissions (nor
    IBs) in flight; the flush past the limit waits, times out with a message naming the
    queue and the limit, and keeps what was recorded; once the CP moves, every write lands."""
    kmd = kmd_model.bind(dev, job_timeout=1 << 40)
    gpu = umd.open(api_version=2)
    buf = gpu.alloc(4 * n)
    hold = Holder()
    q = gpu.queue(max_inflight=8)
    q.timeout = 20_000
    timed_out = 0
    i, recorded = 0, False
    while i < n:
        try:
            if not recorded:
                q.write(buf, 4 * i, i + 1)  # raises when it cannot have an IB: not recorded
                recorded = True
            q.flush()  # raises when it cannot submit: still recorded
            i, recorded = i + 1, False
        except umd.GpuTimeout as e:
            assert re.fullmatch(rf"(new IB|flush): queue \(context {q.ctx_id}\) has 8 submissions in flight, "
                                rf"its limit \(max_inflight=8\), and the oldest \(seqno {q.inflight[0].seq:#x}\) "
                                r"has not finished after 20000 cycles", str(e)), str(e)
            timed_out += 1
            assert len(q.inflight) == 8 and q.pool.created <= 9
            if timed_out == 3:
                hold.release()
    q.finish()
    assert timed_out == 3 and q.pool.created <= 9
    assert np.array_equal(buf.u32[:n], np.arange(1, n + 1, dtype=np.uint32))
    gpu.close()
    quiet(kmd)


def check_held_cp_flushes(dev):
    _held_flushes(dev, 10_000 if dev.name == "model" else 200)


def check_out_of_memory(dev):
    """GTT full: a queue that needs a new IB gets OutOfMemory naming the queue and its limit,
    not a raw KMD error, and works again once memory is free (without pools: every IB is
    a BO of its own)."""
    kmd = kmd_model.bind(dev)
    gpu = umd.open(api_version=2, pools=False)
    buf = gpu.alloc(0x1000)
    q = gpu.queue(flush_threshold=1 << 20)
    q.write(buf, 0, 1)
    q.finish()  # the queue's first IB is back in its pool
    gtt = kmd.bo.heaps[Domain.GTT]
    hog = []
    while gtt.largest_free >= 0x1000:
        hog.append(gpu.alloc(gtt.largest_free, "gtt"))
    q.write(buf, 4, 2)  # reuses the pooled IB: no memory needed
    with pytest.raises(umd.OutOfMemory, match=rf"^new IB: no memory for 0x1000 bytes on queue \(context "
                       rf"{q.ctx_id}\), with nothing of its own in flight \(max_inflight=32\): ENOMEM: "
                       r"GEM_CREATE: no 0x1000 bytes free in GTT"):
        for i in range(300):  # more than one IB's worth, recorded before a flush
            q.write(buf, 8 + 4 * (i % 500), i)
    for h in hog:
        h.free()
    q.finish()
    assert buf.u32[:2].tolist() == [1, 2]
    q.write(buf, 0x100, 0x33)
    q.finish()
    assert buf.u32[0x40] == 0x33
    gpu.close()
    quiet(kmd)


# ------------------------------------------------------------------------------ limits

def _nops(n: int) -> list[int]:
    return pm4.pad(n)


def max_ib(kmd, c: Client, two_levels: bool) -> None:
    """A legal maximum-size IB (2^20 - 1 dwords), called from the ring or from an IB1, runs
    to its end on every backend (the job timeout counts time without progress)."""
    n = kmd_model.core.kmd.MAX_IB_DW
    big = c.bo(4 * n + 0x1000)
    m = big.addr
    body = _nops(n - 5) + pm4.write_data(m + 4 * n + 0x10, [0x600D], wr_confirm=1)
    big.u32[:n] = body
    assert len(body) == n
    if two_levels:
        small = c.bo(0x1000)
        seq = c.submit(c.ib(small, pm4.indirect_buffer(m, n) + pm4.write_data(small.addr + 0x100, [1])))
    else:
        seq = c.submit(CsChunkIb(n, big.handle))
    assert c.wait(seq, 50_000_000)
    assert big.u32[n + 4] == 0x600D
    if two_levels:
        assert small.u32[0x40] == 1


def test_max_ib_on_model():
    """(The RTL runs the same in tests/test_rtl_security.py, on Verilator: minutes on Icarus.)"""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    max_ib(kmd, c, False)
    max_ib(kmd, c, True)
    quiet(kmd)


def check_limits_exact(dev):
    """The IB-size, nesting and per-job limits refuse exactly what they say, by name."""
    kmd = kmd_model.bind(dev)
    c = Client()
    info = c.io(Request.INFO, uapi.InfoArgs(uapi.InfoQuery.DEV_INFO))
    assert info.max_ib_dw == (1 << 20) - 1 and info.max_job_dw == kmd.max_job_dw == 1 << 21
    bo = c.bo(0x1000)
    m = bo.addr
    expect(errno.EINVAL, "CS: chunk 0: size_dw must be 0x1 to 0xfffff, not 0x100000", c.submit,
           CsChunkIb(1 << 20, bo.handle))
    # nesting: IB1 -> IB2 runs, IB1 -> IB2 -> IB3 is refused
    bo.u32[0x200:0x208] = pm4.pad(8)
    bo.u32[0x100:0x108] = pm4.indirect_buffer(m + 0x800, 8) + pm4.pad(4)
    c.run(bo, pm4.indirect_buffer(m + 0x800, 8))
    expect(errno.EINVAL, f"CS: INDIRECT_BUFFER at IB2+0x0 ({m + 0x400:#x}): nests deeper than the device's "
           f"{info.ib_levels} IB levels", c.submit, c.ib(bo, pm4.indirect_buffer(m + 0x400, 8)))
    # the per-job total: IB1 calls the same IB2 three times, then a second IB2 fills up to
    # exactly the limit: that runs; one dword more (a filler at IB1's end) does not
    limit = kmd.max_job_dw
    ib2_dw = 1 << 19
    ib1 = pm4.indirect_buffer(0, 1) * 4 + pm4.pad(4)
    rest = limit - 3 * ib2_dw - len(ib1)
    big = c.bo(4 * (ib2_dw + rest))
    big.u32[:ib2_dw] = _nops(ib2_dw)
    big.u32[ib2_dw:ib2_dw + rest] = _nops(rest)
    ib1 = pm4.indirect_buffer(big.addr, ib2_dw) * 3 + pm4.indirect_buffer(big.addr + 4 * ib2_dw, rest) + pm4.pad(4)
    ib1_bo = c.bo(0x1000)
    ib1_bo.u32[:len(ib1) + 1] = ib1 + [pm4.TYPE2_FILLER]
    assert 3 * ib2_dw + rest + len(ib1) == limit
    seq = c.submit(CsChunkIb(len(ib1), ib1_bo.handle))
    if dev.name == "model":  # on the RTL two million dwords take minutes: accepted is what counts here
        assert c.wait(seq, 50_000_000)
    expect(errno.EINVAL, f"CS: the job of context {c.ctx} runs more than {limit} dwords (the per-job limit; "
           "every IB counts each time it runs)", c.submit, CsChunkIb(len(ib1) + 1, ib1_bo.handle))
    # distinct IBs: an IB1 calling max_job_ibs - 1 different IB2s runs; one more is refused
    k = info.max_job_ibs
    assert k == kmd.params.max_job_ibs == 4096
    ib2s = c.bo(32 * k)
    ib2s.u32[:8 * k] = pm4.pad(8) * k
    calls = c.bo(16 * k + 0x1000)
    calls.u32[:4 * k] = sum((pm4.indirect_buffer(ib2s.addr + 32 * i, 8) for i in range(k)), [])
    calls.u32[4 * k:4 * k + 8] = pm4.pad(8)
    seq = c.submit(CsChunkIb(4 * (k - 1), calls.handle))
    if dev.name == "model":
        assert c.wait(seq)
    expect(errno.EINVAL, f"CS: the job of context {c.ctx} reaches more than {k} distinct IBs (the per-job "
           "limit; an IB called again is counted once)", c.submit, CsChunkIb(4 * k, calls.handle))
    calls.u32[:4 * k] = pm4.indirect_buffer(ib2s.addr, 8) * k  # the same IB2 k times: one copy
    seq = c.submit(CsChunkIb(4 * k, calls.handle))
    if dev.name == "model":
        assert c.wait(seq)
    quiet(kmd)


# ------------------------------------------------------------------------------ ioctl arguments

_HOSTILE = [None, 1.5, 2.0, "2", b"\x02", True, -1, 1 << 64, [], object(), np.float64(2.0), float("nan")]


def check_hostile_ioctl_arguments(dev):
    """Every field of every ioctl's arguments, given a value of the wrong kind or range, is
    a KmdError with a one-line message (EINVAL, or ENOENT for an unknown handle) and no
    effect; never a Python exception from inside the KMD."""
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo(0x1000)
    ib = c.ib(bo, pm4.nop(6))
    good = {
        Request.GEM_CREATE: uapi.GemCreateArgs(0x1000, 0, Domain.GTT, 0),
        Request.GEM_CLOSE: uapi.GemCloseArgs(bo.handle),
        Request.GEM_MMAP: uapi.GemMmapArgs(bo.handle),
        Request.GEM_WAIT_IDLE: uapi.GemWaitIdleArgs(bo.handle, 0),
        Request.CTX: uapi.CtxArgs(uapi.CtxOp.QUERY_STATE, c.ctx),
        Request.CS: uapi.CsArgs(c.ctx, [ib]),
        Request.WAIT_CS: uapi.WaitCsArgs(c.ctx, 1, 0),
        Request.INFO: uapi.InfoArgs(uapi.InfoQuery.DEV_INFO),
    }
    from dataclasses import fields, replace
    n = 0
    for req, args in good.items():
        for f in fields(args):
            for v in _HOSTILE:
                if f.name == "chunks":
                    bad = replace(args, chunks=[replace(ib, size_dw=v)])
                else:
                    bad = replace(args, **{f.name: v})
                before = (len(kmd.live_bos()), kmd.stats["cs"])
                with pytest.raises(KmdError) as ei:
                    c.io(req, bad)
                e = ei.value
                if isinstance(v, int) and not isinstance(v, bool):  # an int out of range: its own errno
                    assert e.errno in (errno.EINVAL, errno.ENOENT, errno.ENOMEM), (req.name, f.name, v, e)
                else:  # not an int at all
                    assert e.errno in (errno.EINVAL, errno.ENOENT), (req.name, f.name, v, e)
                assert "\n" not in e.message and e.message.startswith(req.name.split("_")[0]), e.message
                assert (len(kmd.live_bos()), kmd.stats["cs"]) == before
                n += 1
    for field_name in ("handle", "offset", "gpu_addr", "flags"):
        for v in _HOSTILE:
            if field_name == "gpu_addr" and v is None:
                continue
            with pytest.raises(KmdError) as ei:
                c.submit(replace(ib, **{field_name: v}))
            assert ei.value.errno in (errno.EINVAL, errno.ENOENT), (field_name, v, ei.value)
            n += 1
    assert n > 100
    # the valid calls still work
    c.run(bo, pm4.nop(6))
    assert c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, np.int64(Domain.VRAM))).size == 0x1000
    quiet(kmd)


CHECKS = [check_toctou_cpu_rewrite, check_toctou_gpu_rewrite, check_fake_fence, check_innocent_not_blamed,
          check_reserved_bits_refused, check_cp_rules_refused, check_accepted_streams_run_clean,
          check_stale_mapping, check_no_stale_data, check_fence_wrap_from_top, check_fence_wrap_from_zero,
          check_held_cp_flushes, check_out_of_memory, check_limits_exact,
          check_hostile_ioctl_arguments]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_on_model_with_dma():
    for check in (check_toctou_gpu_rewrite, check_reserved_bits_refused, check_cp_rules_refused,
                  check_accepted_streams_run_clean):
        check(RefModel(dma=True))


def test_an_sdma_ib_in_the_kernels_range_is_refused():
    """The shadow pool is mapped executable in every VM, at the top (the CP fetches the
    checked copies from there with the job's VMID). The SDMA ring has no checker, so an
    SDMA IB chunk naming that range had its engine run another client's checked copies as
    SDMA packets under the hostile client's VMID, the error report giving back bits of
    them. A chunk that reaches into the kernel's range is EFAULT at CS, as a CP chunk
    outside the client's mappings is."""
    from kmd_model.uapi import HwIp

    kmd = kmd_model.bind(RefModel())
    held = Holder()  # its job, and its checked copies, stay in the pool
    b = Client()
    copy, n = kmd.contexts[held.c.ctx].jobs[held.seq].ibs[0]
    assert copy == kmd.kernel_va  # the first copy in the pool
    before = hw_state(kmd)
    for addr, size in ((copy, n), (copy + 32, 8), (copy - 32, 16)):  # inside it, or running into it
        expect(errno.EFAULT, f"CS: chunk 0: an IB at {addr:#x}+{4 * size:#x} reaches into the kernel's range "
               f"[{kmd.kernel_va:#x}, {kmd.kernel_va + kmd.kernel_va_size:#x}) of context {b.ctx}'s VM",
               b.submit, CsChunkIb(size, gpu_addr=addr, ip_type=HwIp.DMA))
    assert hw_state(kmd) == before and kmd.stats["sdma_errors"] == 0
    held.release()


# ------------------------------------------------------------------------------ long runs (RTL: tests/test_rtl_security.py)

def check_race_with_running_cp(dev):
    """No CP held: the client rewrites the end of its IB right after CS, while the CP is
    still running the IB's first part. The CP runs the checked copy. (On the model the job
    has finished before CS returns; the race is the RTL's.)"""
    kmd = kmd_model.bind(dev)
    a, v = Client(), Client()
    abo, vbo = a.bo(0x8000), v.bo()
    vbo.u32[:] = 0x5A5A5A5A
    ib = _nops(4000) + pm4.write_data(abo.addr + 0x7000, [1], wr_confirm=1)
    seq = a.submit(a.ib(abo, ib))
    abo.u32[4000:4005] = pm4.write_data(vbo.addr, [EVIL], wr_confirm=1)
    assert a.wait(seq)
    assert abo.u32[0x1C00] == 1 and (vbo.u32 == 0x5A5A5A5A).all()
    quiet(kmd)


def check_max_ib(dev):
    kmd = kmd_model.bind(dev)
    max_ib(kmd, Client(), False)
    quiet(kmd)


def check_max_ib2(dev):
    kmd = kmd_model.bind(dev)
    max_ib(kmd, Client(), True)
    quiet(kmd)


def check_progress_resets_job_timeout(dev):
    """A legal job that runs for longer than job_timeout, moving all the while, is not a
    hang; one that stops moving is, after job_timeout without progress."""
    kmd = kmd_model.bind(dev, job_timeout=5_000, fallback_poll=1_000)
    c = Client()
    bo = c.bo(0x40000)
    n = 0xF000  # dwords of NOPs: several job_timeouts of fetching
    t0 = dev.now()
    seq = c.submit(c.ib(bo, _nops(n) + pm4.write_data(bo.addr + 0x3F000, [1], wr_confirm=1)))
    assert c.wait(seq, 10_000_000)
    assert bo.u32[0xFC00] == 1
    assert dev.now() - t0 > 3 * 5_000, "the job was not longer than the timeout"
    quiet(kmd)
    stuck = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr, 1, 1, "EQ")))
    with pytest.raises(KmdError) as ei:
        c.wait(stuck, 100_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT"
    assert kmd.stats["job_timeouts"] == 1


LONG_CHECKS = [check_race_with_running_cp, check_max_ib, check_max_ib2, check_progress_resets_job_timeout]
