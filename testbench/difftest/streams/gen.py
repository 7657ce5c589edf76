"""Constrained-random generator of valid command streams.

`valid_stream(rng, ...)` draws a stream that must run to completion on any correct
device, whatever its timing: every packet kind and field class of spec/packets.py, IB
chains and nesting down to CAPS.IB_LEVELS, rings of 32..1024 dwords that wrap many times
(packets straddle the wrap), WAIT_REG_MEMs satisfied at once, by an earlier packet or by
a CPU write some cycles after the submission, RELEASE_MEM fences with and without
interrupts (small IH rings overflow), DMA_DATA of random sizes and alignments when the
device has a DMA engine, and random memory back-pressure.

Timing independence is what makes RTL and model comparable, so the generator keeps
every result determined by packet order alone:
- destinations of CP writes (WRITE_DATA, RELEASE_MEM) may overlap: the CP executes in
  order and waits for each write response;
- a DMA destination is a fresh block nothing else reads or writes, a DMA source is
  read-only memory (the DMA engine runs beside the CP unless CP_SYNC);
- each WAIT_REG_MEM polls its own semaphore, written only by the CPU release or the
  one packet meant to satisfy it;
- the driver only waits for the CP at `settle` points (and consumes IH entries there),
  so IH overflow and ring occupancy are the same on both backends.

The `Builder` is shared with malformed.py, access_faults.py and raw.py beside it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from kmd_model.regs import IbLevel
from spec import packets as pk
from spec import pm4

from . import layout as L
from .stream import Config, PacketInfo, Stream

M32 = 0xFFFF_FFFF
IB_CHUNK = 16 << 10  # each IB gets its own chunk of the IB region
MAX_IB_BODY = 2048  # dwords: an IB starts at most 4 KiB into its chunk

WAIT_FUNCS = [n for n in pk.WAIT_REG_MEM.field("FUNCTION").values if n != "ALWAYS"]
_CMP = {"LT": int.__lt__, "LE": int.__le__, "EQ": int.__eq__, "NE": int.__ne__, "GE": int.__ge__,
        "GT": int.__gt__, "ALWAYS": lambda a, b: True}
def _supported(p: pk.PacketDef, name: str) -> list[str]:
    return [e.name for e in p.field(name).enum if e.supported]


DATA_SELS = _supported(pk.RELEASE_MEM, "DATA_SEL")
INT_SELS = _supported(pk.RELEASE_MEM, "INT_SEL")
INTERRUPTS = ("SEND_INT", "SEND_INT_ON_CONFIRM")  # the INT_SELs that append an EOP entry
WD_DST_SELS = _supported(pk.WRITE_DATA, "DST_SEL")
RM_DST_SELS = _supported(pk.RELEASE_MEM, "DST_SEL")
# RELEASE_MEM's cache-action bits (gfx9; amdgpu's fence sets four): no-ops here
RM_CACHE_BITS = [f.name for f in pk.RELEASE_MEM.fields if f.name.endswith("_ACTION_EN")]
LEVEL_BIN = {0: "@ring", 1: "@ib1", 2: "@ib2"}
VM_SHARE = 0.4  # valid streams whose IBs run under a VMID, translated (testbench/difftest/streams/vm.py)


@dataclass(frozen=True)
class Caps:
    """What the device under test reports (CAPS), which shapes the streams."""

    ib_levels: int = 2
    dma: bool = False
    dma_max_bytes: int = 1 << 20
    bus_bytes: int = 8

    @property
    def dma_note(self) -> str:
        return "" if self.dma else "DMA_DATA not generated: the device reports CAPS.DMA = 0"


class Buf:
    """Where the dwords being built will sit: the ring (from driver wptr `start`) or an IB."""

    def __init__(self, level: int, base: int, start: int = 0, mask: int | None = None):
        self.level, self.base, self.start, self.mask = level, base, start, mask

    def pos(self, i: int) -> tuple[int, int]:
        """(byte address, dword offset) of dword i of the content."""
        if self.mask is None:
            return self.base + 4 * i, i
        off = (self.start + i) & self.mask
        return self.base + 4 * off, off


def random_config(rng: random.Random, *, ring_log2: int | None = None) -> Config:
    if ring_log2 is None:
        ring_log2 = rng.choice([5, 5, 6, 6, 7, 8, 9, 10])
    size = 4 << ring_log2
    lo, hi = L.RING_REGION
    ring_base = lo + (rng.randrange(0, (hi - lo - size) // 4096 + 1) * 4096 if rng.random() < 0.4
                      else 256 * rng.randrange(0, (hi - lo - size) // 256))  # bases are >> 8: 256-aligned
    ih_log2 = rng.choice([1, 2, 3, 4, 5, 6])
    ilo, ihi = L.IH_REGION
    ih_base = ilo + 256 * rng.randrange(0, (ihi - ilo - (32 << ih_log2)) // 256)

    def latency() -> int:
        return rng.choice([0, 0, 2, rng.randint(1, 16), rng.randint(17, 64)])

    stall = {}
    if rng.random() < 0.5:
        for ch in ("aw", "w", "b", "ar", "r"):
            if rng.random() < 0.6:
                stall[ch] = rng.choice([16, 64, 128])  # n/256 per cycle
    mem = dict(rd_latency=latency(), wr_latency=latency(), stall=stall, seed=rng.getrandbits(32) | 1)
    return Config(ring_base, ring_log2, ih_base, ih_log2, rptr_wb=rng.random() < 0.7,
                  ih_wptr_wb=rng.random() < 0.7, mem=mem)


class Builder:
    """Builds one stream: packets into the ring and IBs, and the driver's actions."""

    def __init__(self, rng: random.Random, index: int, seed: int, kind: str, caps: Caps,
                 config: Config | None = None):
        self.rng = rng
        self.caps = caps
        self.s = Stream(index, seed, kind, config or random_config(rng))
        self.pre: list = []  # preloads, run before everything else
        self.actions: list = []
        self.releases: list = []  # release steps of the submission being built
        self.wptr = 0
        self.since_settle = 0  # ring dwords submitted since the last settle
        self.eop = 0  # IH entries since the IH ring was last consumed
        self.n_ibs = 0
        self.dma_next = L.DMA_DST_REGION[0]
        self.sem_next = L.SEM_REGION[0]
        self.canary_next = L.CANARY_REGION[0]
        self.src_loaded = False
        self.chains = 0
        c = self.s.config
        infra = [(c.ring_base, c.ring_base + 4 * c.ring_size), (L.RECOVERY, L.RECOVERY + 0x100)]
        if c.rptr_wb:
            infra.append((L.RPTR_WB, L.RPTR_WB + 4))
        if c.ih_enable:
            infra.append((c.ih_base, c.ih_base + (32 << c.ih_log2)))
            if c.ih_wptr_wb:
                infra.append((L.IH_WPTR_WB, L.IH_WPTR_WB + 4))
        self.s.infra = infra
        if caps.dma_note:
            self.s.notes.append(caps.dma_note)

    # ------------------------------------------------------------------ bookkeeping

    def bin(self, opcode: str, cls: str, error: str = "") -> None:
        self.s.bins.add((error, opcode, cls))

    def info(self, buf: Buf, i: int, dwords: list[int], writes=(), irq: bool = False,
             note: str = "") -> PacketInfo:
        addr, off = buf.pos(i)
        p = PacketInfo(buf.level, addr, off, list(dwords), list(writes), irq, note)
        self.s.packets.append(p)
        if irq:
            self.eop += 1
        return p

    def preload(self, addr: int, dwords) -> None:
        self.pre.append(("mem", addr, dwords))

    def sem(self, initial: int) -> int:
        a = self.sem_next
        self.sem_next += 4 * self.rng.choice([1, 1, 2, 9])
        if self.sem_next >= L.SEM_REGION[1]:
            self.sem_next = L.SEM_REGION[0]
        self.preload(a, [initial])
        return a

    def data_addr(self, nbytes: int, align: int = 4) -> int:
        """A destination for CP writes; sometimes just before a 4 KiB boundary."""
        lo, hi = L.DATA_REGION
        r = self.rng
        if r.random() < 0.2 and nbytes > align:
            page = lo + 4096 * r.randrange(1, (hi - lo) // 4096 - 2)
            a = page - align * r.randint(1, max(1, min(nbytes // align - 1, 64)))
        else:
            a = lo + align * r.randrange(0, (hi - lo - nbytes) // align)
        return a

    def canary(self, n: int = 1) -> list[int]:
        """Packets that must never run: each writes a fresh canary dword."""
        out = []
        for _ in range(n):
            a = self.canary_next
            self.canary_next = a + 4 if a + 4 < L.CANARY_REGION[1] else L.CANARY_REGION[0]
            out += pm4.write_data(a, [0xCA11_AB1E])
        return out

    def new_ib(self) -> int | None:
        if (self.n_ibs + 1) * IB_CHUNK > L.IB_REGION[1] - L.IB_REGION[0]:
            return None
        chunk = L.IB_REGION[0] + self.n_ibs * IB_CHUNK
        self.n_ibs += 1
        r = self.rng.random()
        off = 0 if r < 0.3 else 4096 - 4 * self.rng.randint(1, 6) if r < 0.5 else 4 * self.rng.randrange(1024)
        return chunk + off

    def load_src(self) -> None:
        if not self.src_loaded:
            lo, hi = L.SRC_REGION
            words = np.random.default_rng(self.rng.getrandbits(64)).integers(0, 1 << 32, (hi - lo) // 4,
                                                                              dtype=np.uint32)
            self.preload(lo, words)
            self.src_loaded = True

    # ------------------------------------------------------------------ valid packets

    def body(self, buf: Buf, n: int, room: int, first: int = 0) -> list[int]:
        """n random valid packets (fewer if `room` dwords run out) for buffer `buf`,
        starting at its dword `first`."""
        out: list[int] = []
        for _ in range(n):
            left = room - len(out)
            if left < 1:
                break
            out += self.packet(buf, first + len(out), left)
        return out

    def packet(self, buf: Buf, i: int, room: int) -> list[int]:
        r = self.rng
        kinds = [("nop", 2), ("filler", 1), ("write", 6), ("release", 4), ("wait", 3)]
        if buf.level < self.caps.ib_levels:
            kinds.append(("ib", 3 if buf.level == 0 else 2))
        if self.caps.dma:
            kinds.append(("dma", 4))
        need = {"nop": 2, "filler": 1, "write": 5, "release": 8, "wait": 7, "ib": 4, "dma": 7}
        kinds = [(k, w) for k, w in kinds if need[k] <= room]
        if not kinds:
            return []
        kind = r.choices([k for k, _ in kinds], [w for _, w in kinds])[0]
        return getattr(self, "p_" + kind)(buf, i, room)

    def p_filler(self, buf: Buf, i: int, room: int) -> list[int]:
        """A one-dword pad: gfx9's header-only NOP (amdgpu's ring nop), or a type-2 dword
        with or without PAD bits."""
        r = self.rng
        x = r.random()
        if x < 0.4:
            dw = [pm4.NOP_PAD | (r.randint(1, 3) if r.random() < 0.2 else 0)]  # (PREDICATE, SHADER_TYPE)
            self.bin("NOP", "pad_1dw")
        else:
            dw = [pm4.TYPE2_FILLER | (r.randrange(1, 1 << 30) if x < 0.7 else 0)]
            self.bin("TYPE2", "filler" if dw[0] == pm4.TYPE2_FILLER else "pad")
            self.bin("TYPE2", LEVEL_BIN[buf.level])
        self.info(buf, i, dw)
        return dw

    def p_nop(self, buf: Buf, i: int, room: int) -> list[int]:
        r = self.rng
        n = r.choice([1, r.randint(2, 8), r.randint(9, 40)])
        n = min(n, room - 1)
        dw = pm4.nop(n)
        if r.random() < 0.7:  # the payload is ignored: make it junk
            dw[1:] = [r.getrandbits(32) for _ in range(n)]
        if r.random() < 0.2:  # PREDICATE / SHADER_TYPE are ignored too
            dw[0] |= r.randint(1, 3)
            self.bin("NOP", "hdr_flags")
        self.info(buf, i, dw)
        self.bin("NOP", "count0" if n == 1 else "count_small" if n <= 8 else "count_large")
        self.bin("NOP", LEVEL_BIN[buf.level])
        return dw

    def p_write(self, buf: Buf, i: int, room: int, addr: int | None = None,
                data: list[int] | None = None) -> list[int]:
        r = self.rng
        if data is None:
            n = r.choices([1, r.randint(2, 8), r.randint(9, 64), r.randint(65, 400)], [3, 4, 2, 1])[0]
            n = max(1, min(n, room - 4))
            data = [r.getrandbits(32) for _ in range(n)]
        n = len(data)
        if addr is None:
            addr = self.data_addr(4 * n)
        wc = r.randint(0, 1)
        one = r.random() < 0.1  # ADDR_INCR = NO_INCREMENT: every dword to addr
        amd = r.random() < 0.3  # gfx9's other accepted values: DST_SEL, PFP, cache policy
        dw = pm4.write_data(addr, data, wr_confirm=wc, addr_incr=int(one),
                            dst_sel=r.choice(WD_DST_SELS) if amd else "MEMORY",
                            engine_sel=r.choice(["ME", "PFP"]) if amd else "ME",
                            cache_policy=r.randrange(4) if amd else 0)
        self.info(buf, i, dw, [(addr, addr + (4 if one else 4 * n))])
        if one:
            self.bin("WRITE_DATA", "no_increment")
        if amd:
            self.bin("WRITE_DATA", "gfx9_fields")
        self.bin("WRITE_DATA", "len1" if n == 1 else "len2-8" if n <= 8 else "len9-64" if n <= 64 else "len65+")
        if (addr & 31) + 4 * n > 32:
            self.bin("WRITE_DATA", "cross32B")
        if addr // 4096 != (addr + 4 * n - 1) // 4096:
            self.bin("WRITE_DATA", "cross4K")
        if wc:
            self.bin("WRITE_DATA", "wr_confirm")
        self.bin("WRITE_DATA", LEVEL_BIN[buf.level])
        return dw

    def p_release(self, buf: Buf, i: int, room: int, addr: int | None = None, data_sel: str | None = None,
                  data: int | None = None) -> list[int]:
        r = self.rng
        sel = data_sel or r.choice(DATA_SELS)
        int_sel = r.choice(INT_SELS)
        if not self.s.config.ih_enable:
            int_sel = "NONE"
        nbytes = {"NONE": 0, "DATA_32": 4, "DATA_64": 8, "TIMESTAMP": 8}[sel]
        if addr is None:
            addr = self.data_addr(max(nbytes, 4), 8 if nbytes == 8 or r.random() < 0.5 else 4)
        if data is None:
            data = r.getrandbits(32 if sel == "DATA_32" else 64)
        ev = r.random()
        event = (r.choice(list(pk.RELEASE_MEM.field("EVENT_TYPE").values)) if ev < 0.7
                 else r.randrange(64))  # an open enum: any AMD event number is accepted
        amd = {}
        if r.random() < 0.3:  # amdgpu's fence: cache actions (no-ops here), TC_L2, a cache policy
            amd = {b.lower(): r.randint(0, 1) for b in RM_CACHE_BITS}
            amd.update(dst_sel=r.choice(RM_DST_SELS), cache_policy=r.randrange(4), exec=r.randint(0, 1))
            self.bin("RELEASE_MEM", "gfx9_fields")
        dw = pm4.release_mem(addr, data, data_sel=sel, int_sel=int_sel, event_type=event,
                             int_ctxid=r.getrandbits(32) if r.random() < 0.5 else 0, **amd)
        writes = [(addr, addr + nbytes)] if nbytes else []
        self.info(buf, i, dw, writes, irq=int_sel in INTERRUPTS)
        if sel == "TIMESTAMP":
            self.s.ts_ranges.append((addr, addr + 8))
        self.bin("RELEASE_MEM", f"data_{sel}")
        self.bin("RELEASE_MEM", f"int_{int_sel}")
        if event not in pk.RELEASE_MEM.field("EVENT_TYPE").names:
            self.bin("RELEASE_MEM", "event_other")
        self.bin("RELEASE_MEM", LEVEL_BIN[buf.level])
        return dw

    def wait_condition(self, block: bool, fn: str | None = None) -> tuple[str, int, int, int, int | None]:
        """(function, mask, ref, a value that satisfies, one that does not or None)."""
        r = self.rng
        want = fn
        for _ in range(200):
            fn = want or r.choice(WAIT_FUNCS)
            mask = r.choice([M32, 0xFFFF, 0xFF00_FF00, r.getrandbits(32), 1 << r.randrange(32)])
            ref = r.choice([r.getrandbits(32) & mask, r.randint(0, 16), mask, 0, r.getrandbits(32)])
            cands = {ref, (ref + 1) & M32, (ref - 1) & M32, 0, mask, r.getrandbits(32), r.getrandbits(32) & mask}
            ok = sorted(v for v in cands if _CMP[fn](v & mask, ref))
            bad = sorted(v for v in cands if not _CMP[fn](v & mask, ref))
            if ok and (bad or not block):
                junk = r.getrandbits(32) & ~mask & M32
                good = r.choice(ok) | junk
                if not _CMP[fn](good & mask, ref):
                    continue
                return fn, mask, ref, good, (r.choice(bad) if bad else None)
        raise RuntimeError("no WAIT_REG_MEM condition found")  # pragma: no cover

    def poll_interval(self) -> int:
        r = self.rng
        return r.choice([0, 1, r.randint(2, 16), r.randint(17, 100)])

    def p_wait(self, buf: Buf, i: int, room: int) -> list[int]:
        r = self.rng
        modes = ["always", "immediate", "release"] + (["by_packet"] if room >= 7 + 8 else [])
        mode = r.choice(modes)
        pi = self.poll_interval()
        out: list[int] = []
        if mode == "always":
            sem = self.sem(r.getrandbits(32))
            fn, mask, ref = "ALWAYS", r.getrandbits(32), r.getrandbits(32)
        else:
            fn, mask, ref, good, bad = self.wait_condition(block=mode == "release")
            if mode == "immediate":
                sem = self.sem(good)
            elif mode == "release":
                sem = self.sem(bad)
                self.releases += [("delay", r.choice([1, r.randint(2, 50), r.randint(51, 400)])),
                                  ("mem", sem, [good])]
                self.s.infra.append((sem, sem + 4))  # the CPU writes it after the mark
            else:  # an earlier packet writes the value the wait needs
                sem = self.sem(bad if bad is not None else r.getrandbits(32))
                if r.random() < 0.5:
                    out += self.p_write(buf, i, room, addr=sem, data=[good])
                else:
                    out += self.p_release(buf, i, room, addr=sem, data_sel="DATA_32", data=good)
        amd = {}
        if r.random() < 0.3:  # amdgpu's gfx-ring pipeline sync waits with ENGINE = PFP
            amd = dict(engine=r.choice(["ME", "PFP"]), cache_policy=r.randrange(4),
                       optimize_ace_offload_mode=r.randint(0, 1))
            self.bin("WAIT_REG_MEM", "gfx9_fields")
        dw = pm4.wait_reg_mem(sem, ref, mask, fn, poll_interval=pi, **amd)
        self.info(buf, i + len(out), dw)
        self.bin("WAIT_REG_MEM", f"fn_{fn}")
        self.bin("WAIT_REG_MEM", mode)
        if pi == 0:
            self.bin("WAIT_REG_MEM", "poll0")
        self.bin("WAIT_REG_MEM", LEVEL_BIN[buf.level])
        return out + dw

    def p_ib(self, buf: Buf, i: int, room: int, chain: bool = False) -> list[int]:
        """An INDIRECT_BUFFER to a new IB one level down (or, chained, at this level)."""
        base = self.new_ib()
        if base is None:
            return self.p_nop(buf, i, room)
        r = self.rng
        level = buf.level if chain else buf.level + 1
        me = self.info(buf, i, [])  # its place in execution order is before its body
        sub = Buf(level, base)
        n = r.choices([1, r.randint(2, 4), r.randint(5, 10)], [2, 5, 2])[0]
        dw = self.body(sub, n, MAX_IB_BODY - 40)
        if r.random() < 0.3 and self.chains < 4:
            self.chains += 1
            dw += self.p_ib(sub, len(dw), 4, chain=True)
            dw += self.canary(r.randint(0, 2))  # after a CHAIN nothing more of this IB runs
        if not dw:
            dw = pm4.nop(1)
            self.info(sub, 0, dw)
        self.s.buffers[base] = dw
        self.preload(base, dw)
        vmid = r.randrange(16) if r.random() < 0.3 else 0
        amd = {}
        if r.random() < 0.5:  # VALID (0 on amdgpu's gfx ring, 1 in Mesa's chains), preemption bits
            amd = dict(valid=r.randint(0, 1), pre_enb=r.randint(0, 1), cache_policy=r.randrange(4),
                       pre_resume=r.randint(0, 1), priv=r.randint(0, 1))
            self.bin("INDIRECT_BUFFER", "gfx9_fields")
        me.dwords = pm4.indirect_buffer(base, len(dw), chain=int(chain), vmid=vmid, **amd)
        self.bin("INDIRECT_BUFFER", ("chain" if chain else "call") + LEVEL_BIN[level].replace("@", "_"))
        if vmid:
            self.bin("INDIRECT_BUFFER", "vmid")
        if base // 4096 != (base + 4 * len(dw) - 1) // 4096:
            self.bin("INDIRECT_BUFFER", "cross4K")
        return me.dwords

    def dma_dst(self, n: int) -> int | None:
        a = self.dma_next
        size = (n + 64 + 63) & ~63
        if a + size > L.DMA_DST_REGION[1]:
            return None
        self.dma_next = a + size
        return a + self.rng.randrange(0, 64)

    def p_dma(self, buf: Buf, i: int, room: int) -> list[int]:
        r = self.rng
        n = r.choices([0, r.randint(1, 16), r.randint(17, 256), r.randint(257, 4096), r.randint(4097, 20000)],
                      [1, 4, 4, 2, 1])[0]
        dst = self.dma_dst(n)
        if dst is None:
            return self.p_nop(buf, i, room)
        fill = r.random() < 0.3
        cp_sync, raw_wait = r.randint(0, 1), r.randint(0, 1)
        amd = {}
        if r.random() < 0.3:  # Mesa's gfx9 forms: DIS_WC, L2 selects, cache policies, PFP
            amd = dict(dis_wc=r.randint(0, 1), dst_sel=r.choice(["ADDRESS", "ADDRESS_TC_L2"]),
                       src_cache_policy=r.randrange(4), dst_cache_policy=r.randrange(4),
                       engine=r.choice(["ME", "PFP"]))
            self.bin("DMA_DATA", "gfx9_fields")
        if fill:
            src = r.getrandbits(32)
            dw = pm4.dma_data(dst, src, n, src_sel="DATA", cp_sync=cp_sync, raw_wait=raw_wait, **amd)
        else:
            self.load_src()
            lo, hi = L.SRC_REGION
            src = lo + r.randrange(0, hi - lo - n)
            sel = r.choice(["ADDRESS", "ADDRESS_TC_L2"]) if amd else "ADDRESS"
            dw = pm4.dma_data(dst, src, n, cp_sync=cp_sync, raw_wait=raw_wait, src_sel=sel, **amd)
        self.info(buf, i, dw, [(dst, dst + n)] if n else [])
        self.bin("DMA_DATA", "fill" if fill else "copy")
        self.bin("DMA_DATA", "size0" if n == 0 else "size<=16" if n <= 16 else "size<=4K" if n <= 4096
                 else "size>4K")
        if not fill and src % 4:
            self.bin("DMA_DATA", "src_unaligned")
        if dst % 4:
            self.bin("DMA_DATA", "dst_unaligned")
        if cp_sync:
            self.bin("DMA_DATA", "cp_sync")
        if raw_wait:
            self.bin("DMA_DATA", "raw_wait")
        self.bin("DMA_DATA", LEVEL_BIN[buf.level])
        return dw

    # ------------------------------------------------------------------ the ring

    def ring_buf(self) -> Buf:
        c = self.s.config
        return Buf(IbLevel.RING, c.ring_base, self.wptr, c.ring_size - 1)

    def submit(self, dwords: list[int]) -> None:
        """Queue a submission (settling first if the ring could overflow)."""
        c = self.s.config
        if self.since_settle + len(dwords) > c.ring_size:
            self.settle()
        if (self.wptr & (c.ring_size - 1)) + len(dwords) > c.ring_size:
            self.bin("RING", "wrap")
        self.actions.append(("submit", dwords, self.releases))
        self.releases = []
        self.wptr = (self.wptr + len(dwords)) & M32
        self.since_settle += len(dwords)

    def settle(self) -> None:
        self.actions.append(("settle",))
        self.since_settle = 0
        c = self.s.config
        if c.ih_enable and self.eop > (1 << c.ih_log2):
            self.bin("IH", "overflow")
        self.eop = 0

    def ring_packets(self, n: int) -> list[int]:
        """Up to n packets for the next submission (at most one ring's worth)."""
        c = self.s.config
        buf = self.ring_buf()
        out: list[int] = []
        for _ in range(n):
            if len(out) >= c.ring_size - 1:
                break
            before = len(self.s.packets)
            p = self.packet(buf, len(out), c.ring_size - len(out))
            if not p:
                break
            start = (self.wptr + len(out)) & (c.ring_size - 1)
            if start + len(p) > c.ring_size and len(self.s.packets) > before:
                self.bin("RING", "straddle")
            out += p
        return out

    def finish(self) -> Stream:
        s = self.s
        s.actions = self.pre + self.actions
        return s


def valid_bins(caps: Caps) -> set[tuple[str, str]]:
    """Every (opcode, field class) bin a valid stream can hit on a device with `caps`."""
    lv = [LEVEL_BIN[i] for i in range(caps.ib_levels + 1)]
    out = {("NOP", c) for c in ("count0", "count_small", "count_large", "hdr_flags", "pad_1dw", *lv)}
    out |= {("TYPE2", c) for c in ("filler", "pad", *lv)}
    out |= {("WRITE_DATA", c) for c in ("len1", "len2-8", "len9-64", "len65+", "cross32B", "cross4K",
                                        "wr_confirm", "no_increment", "gfx9_fields", *lv)}
    out |= {("INDIRECT_BUFFER", f"{k}_ib{i}") for k in ("call", "chain") for i in range(1, caps.ib_levels + 1)}
    out |= {("INDIRECT_BUFFER", c) for c in ("vmid", "cross4K", "gfx9_fields")}
    out |= {("WAIT_REG_MEM", c) for c in ("fn_ALWAYS", *(f"fn_{f}" for f in WAIT_FUNCS), "always", "immediate",
                                          "release", "by_packet", "poll0", "gfx9_fields", *lv)}
    out |= {("RELEASE_MEM", c) for c in (*(f"data_{s}" for s in DATA_SELS), *(f"int_{s}" for s in INT_SELS),
                                         "event_other", "gfx9_fields", *lv)}
    out |= {("RING", "wrap"), ("RING", "straddle"), ("IH", "overflow"), ("MEMORY", "latency>16"),
            ("MEMORY", "stalls"), ("VM", "pages"), ("VM", "huge"), ("VM", "ib_vmid")}
    return out | (dma_bins(caps) if caps.dma else set())


def dma_bins(caps: Caps) -> set[tuple[str, str]]:
    lv = [LEVEL_BIN[i] for i in range(caps.ib_levels + 1)]
    return {("DMA_DATA", c) for c in ("copy", "fill", "size0", "size<=16", "size<=4K", "size>4K", "src_unaligned",
                                      "dst_unaligned", "cp_sync", "raw_wait", "gfx9_fields", *lv)}


def memory_config_bins(b: Builder) -> None:
    m = b.s.config.mem
    if max(m["rd_latency"], m["wr_latency"]) > 16:
        b.bin("MEMORY", "latency>16")
    if any(m["stall"].values()):
        b.bin("MEMORY", "stalls")


def valid_stream(rng: random.Random, index: int, seed: int, caps: Caps) -> Stream:
    b = Builder(rng, index, seed, "valid", caps)
    memory_config_bins(b)
    b.actions.append(("mark",))
    total = rng.choices([rng.randint(3, 8), rng.randint(9, 25), rng.randint(26, 60)], [3, 5, 2])[0]
    done = 0
    while done < total:
        k = rng.randint(1, 5)
        before = len(b.s.packets)
        dw = b.ring_packets(k)
        if not dw:
            break
        done += max(1, len(b.s.packets) - before)
        b.submit(dw)
        if rng.random() < 0.15:
            b.settle()
    b.settle()
    writes = [w for p in b.s.packets for w in p.writes]
    b.actions += [("observe", "final"), ("check", writes + b.s.infra)]
    s = b.finish()
    if rng.random() < VM_SHARE:
        from .vm import to_vm
        to_vm(s, rng)
    return s
