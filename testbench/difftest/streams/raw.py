"""Raw random dword streams: random packets, near-legal packets and plain noise, in the
ring or an IB, run on the model first and redrawn while they would be timing-dependent.

RAW_OUTCOMES lists what such a stream may end in (the coverage bins of the "raw" class).
"""

from __future__ import annotations

import random

from kmd_model.regs import IbLevel
from spec import packets as pk
from spec import pm4

from . import layout as L
from .gen import Builder, Caps, memory_config_bins
from .malformed import KNOWN_OPCODES, M32, Malformed, _lo_dword
from .stream import Stream

RAW_OUTCOMES = ("idle", "stuck") + tuple(f"error {c}" for c in (
    "ILLEGAL_OPCODE", "BAD_COUNT", "UNSUPPORTED", "FENCE_MISALIGNED", "IB_MISALIGNED", "IB_SIZE_ZERO", "BUS_DECERR"))

def _raw_addr(r: random.Random, align: int = 4) -> int:
    x = r.random()
    if x < 0.5:
        return (L.DATA_REGION[0] + r.randrange(L.DATA_REGION[1] - L.DATA_REGION[0] - 64)) & ~(align - 1)
    if x < 0.6:
        return L.SEM_REGION[0] + 4 * r.randrange(64)
    if x < 0.8:
        return (L.MEM_SIZE + r.randrange(1 << 20)) & ~(align - 1)
    return r.getrandbits(48) & ~(align - 1)


def _raw_packet(r: random.Random) -> list[int]:
    """A plausible packet with random contents (not necessarily legal)."""
    name = r.choice(["NOP", "WRITE_DATA", "WRITE_DATA", "INDIRECT_BUFFER", "WAIT_REG_MEM", "RELEASE_MEM",
                     "DMA_DATA"])
    p = pk.by_name[name]
    fields = {}
    for f in p.fields:
        if r.random() < 0.7 and f.enum:
            fields[f.name] = r.choice([e.value for e in f.enum])
        elif r.random() < 0.8:
            fields[f.name] = r.getrandbits(f.width) if r.random() < 0.3 else r.randint(0, min(f.max, 16))
    lows = []
    for v in p.values:
        if v.name in ("addr", "base", "dst", "src") and r.random() < 0.8:
            a = _raw_addr(r)
            lo, hi = (p.field(n) for n in v.fields)
            fields[lo.name] = (a & M32) >> lo.lsb
            fields[hi.name] = (a >> 32) & hi.max
            if lo.lsb and r.random() < 0.15:
                lows.append(_lo_dword(p, v.name))
    if name == "INDIRECT_BUFFER" and r.random() < 0.7:
        fields["IB_SIZE"] = r.randint(0, 32)
    data = [r.getrandbits(32) for _ in range(r.randint(1, 6))] if p.tail else ()
    dw = pm4.encode_fields(name, fields, data)
    for k in lows:
        dw[k] |= r.randint(1, 3)  # a misaligned address
    return dw


def _legal_packet(r: random.Random) -> list[int]:
    """A legal packet that writes only the data region (or polls a semaphore)."""
    x = r.random()
    lo, hi = L.DATA_REGION
    a = lo + 8 * r.randrange((hi - lo) // 8 - 64)
    if x < 0.3:
        return pm4.write_data(a, [r.getrandbits(32) for _ in range(r.randint(1, 8))])
    if x < 0.5:
        return pm4.release_mem(a, r.getrandbits(32), data_sel=r.choice(["NONE", "DATA_32", "DATA_64"]),
                               int_sel=r.choice(["NONE", "SEND_INT"]))
    if x < 0.6:  # polls zeroed memory: may never end
        fn = r.choice(list(pk.WAIT_REG_MEM.field("FUNCTION").values))
        return pm4.wait_reg_mem(L.SEM_REGION[0] + 4 * r.randrange(256), r.choice([0, 1, r.getrandbits(32)]),
                                r.choice([0, M32, r.getrandbits(32)]), fn, poll_interval=r.randint(0, 40))
    if x < 0.8:
        return pm4.nop(r.randint(1, 6))
    return [pm4.TYPE2_FILLER]


def _near_legal_packet(r: random.Random) -> list[int]:
    """A legal packet with one late check broken: IB_SIZE 0, an IB base with bits 1:0
    set, a 64-bit fence at a 4-mod-8 address, a WRITE_DATA address with low bits set.
    Random dwords rarely get that far: every earlier check of the packet must pass first."""
    lo, hi = L.DATA_REGION
    a = lo + 8 * r.randrange((hi - lo) // 8 - 64)
    x = r.random()
    if x < 0.3:
        return pm4.indirect_buffer(a, 0)
    if x < 0.5:
        p = pm4.indirect_buffer(a, r.randint(1, 16))
        p[_lo_dword(pk.INDIRECT_BUFFER, "base")] |= r.randint(1, 3)
        return p
    if x < 0.75:
        p = pm4.release_mem(a, r.getrandbits(32), data_sel="DATA_64", int_sel=r.choice(["NONE", "SEND_INT"]))
        p[_lo_dword(pk.RELEASE_MEM, "addr")] += 4
        return p
    p = pm4.write_data(a, [r.getrandbits(32) for _ in range(r.randint(1, 4))])
    p[_lo_dword(pk.WRITE_DATA, "addr")] |= r.randint(1, 3)
    return p


def raw_dwords(r: random.Random, n: int, chaos: float) -> list[int]:
    """n dwords: legal packets, each replaced with probability `chaos` by something
    disruptive (a random dword, a packet with random fields or flipped bits, a known
    opcode with a random COUNT, filler-like constants, a legal packet with one late
    check broken)."""
    out: list[int] = []
    while len(out) < n:
        if r.random() >= chaos:
            out += _legal_packet(r)
            continue
        x = r.random()
        if x < 0.25:
            out.append(r.getrandbits(32))
        elif x < 0.5:
            p = _raw_packet(r) if r.random() < 0.5 else _legal_packet(r)
            for _ in range(r.randint(1, 2)):
                k = r.randrange(len(p))
                p[k] ^= 1 << r.randrange(32)
            out += p
        elif x < 0.7:
            op = r.choice(sorted(KNOWN_OPCODES))
            cnt = r.randint(0, 10)
            out += [pm4.header(op, cnt)] + [r.choice([r.getrandbits(32), _raw_addr(r) & M32, 0, 1])
                                            for _ in range(cnt + 1)]
        elif x < 0.8:
            out.append(r.choice([0, M32, pm4.TYPE2_FILLER | 1]))
        elif x < 0.85:
            out += _raw_packet(r)
        else:
            out += _near_legal_packet(r)
    return out[:n]


def raw_stream(rng: random.Random, index: int, seed: int, caps: Caps) -> Stream:
    """Random dwords in the ring or an IB. The candidate is run on the model first and
    redrawn while it would touch the command buffers (self-modifying streams are
    timing-dependent on any prefetching CP) or run a DMA_DATA (asynchronous)."""
    from ..compare import executed_accesses
    from ..driver import execute
    from testbench.refmodel import RefModel

    for _attempt in range(20):
        r = random.Random(rng.getrandbits(64))
        b = Builder(r, index, seed, "raw", caps)
        memory_config_bins(b)
        c = b.s.config
        where = r.choice([0, 0, 1, 1, 2][:caps.ib_levels + 3])
        n = r.randint(4, min(80, c.ring_size))
        chaos = r.choice([0.0, 0.03, 0.08, 0.2, 0.5, 1.0])
        body = raw_dwords(r, n, chaos)
        b.actions.append(("mark",))
        if where == 0:
            b.submit(body[:c.ring_size])
        else:
            def make(buf, i):
                return body
            m = Malformed(b, "raw")
            b.submit(m.ib_to(b.ring_buf(), 0, where, make, chain_ok=False))
        b.s.variant = f"{IbLevel(where).name}, chaos {chaos}"
        b.actions += [("stuck",), ("observe", "end"), ("recover",), ("observe", "final")]
        s = b.finish()
        trace: list[str] = []
        model = RefModel(L.MEM_SIZE, ib_levels=caps.ib_levels, dma=caps.dma, dma_max_bytes=caps.dma_max_bytes,
                         data_width=8 * caps.bus_bytes, trace=trace.append)
        obs = execute(s, model)
        acc = executed_accesses(trace)
        bad = any(k == "dma" for _, k, _, _ in acc) or any(
            k in ("write", "timestamp") and any(a < hi and b_ > lo for lo, hi in L.COMMAND_REGIONS)
            for _, k, a, b_ in acc)
        ts = [(a, b_) for _, k, a, b_ in acc if k == "timestamp"]
        polls = [(a, b_) for _, k, a, b_ in acc if k == "poll"]
        if bad or any(a < y and b_ > x for a, b_ in polls for x, y in ts):
            continue
        s.ts_ranges = ts
        s.bins = {("raw", "RAW", obs.status)} | {(e, o, f) for e, o, f in s.bins if e == ""}
        return s
    raise RuntimeError(f"stream {index}: no raw stream without hazards in 20 attempts")  # pragma: no cover
