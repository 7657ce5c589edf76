"""Crash reports and the exit report.

When the GPU stops on an error, a job times out (the KMD's job timeout: a fence that
never came), or the app raises, `CrashReporter` writes what a driver developer asks
for first into one text file and prints its path:

- the registers that say where the CP is (STATUS, CP_ERROR*, ring and IH pointers);
- the ring around the read pointer, disassembled, with the CP's position marked;
- the IB stack (ring -> IB1 -> IB2) and the packet in hand, disassembled;
- (for an error or timeout on another ring, the CP's queue 1 or the copy engine: that
  queue's registers, ring and IB, the copy engine's as SDMA packets)
- IH entries the KMD has not consumed yet, the jobs in flight;
- the last ioctls (strace-like) and the hardware and driver counters;
- raw dumps of the ring and the IBs, which `gpucosim disasm REPORT` lists again.

A GPU error is reported when the KMD sees it, before recovery resets the hardware, so
the registers still hold the error.

`exit_report()` is the summary at the end of a run: buffers still allocated (leaks),
IB pools, fences, ioctls by request.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections import Counter, deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from kmd_model import regs
from spec import ih as ih_spec
from spec import pm4, sdma

from . import regmap
from .dump import format_dump, n_dwords
from .trace.timeline import wave_time
from .trace.swtrace import ib_chain, ring_dwords

if TYPE_CHECKING:
    from kmd_model.core.kmd import Kmd

M32 = 0xFFFF_FFFF
LAST_IOCTLS = 24
MAX_REPORTS = 5  # per run: a storm of errors should not fill the disk
LISTING_AROUND = 12  # packets shown before and after the marked one

STATE_REGS = ("STATUS", "CP_ERROR", "CP_ERROR_ADDR_LO", "CP_ERROR_ADDR_HI", "CP_ERROR_OFFSET",
              "INT_STATUS", "INT_ENABLE", "CONTROL", "RB_RPTR", "RB_WPTR", "RB_CNTL",
              "IH_WPTR", "IH_RPTR", "IH_CNTL")
# The KMD's other rings (Kmd.notify's "gpu_error" names the failing one): the registers that
# say where that queue is, what runs it, and the packets it reads (the copy engine's are
# SDMA packets, which a PM4 listing reads as BAD TYPE 0 on every dword).
RING_REGS = {
    "gfx": STATE_REGS,
    "gfx_high": ("CP_HQD1_STATUS", "CP_HQD1_ERROR", "CP_HQD1_ERROR_ADDR_LO", "CP_HQD1_ERROR_ADDR_HI",
                 "CP_HQD1_ERROR_OFFSET", "INT_STATUS", "INT_ENABLE", "CONTROL", "CP_HQD1_RB_RPTR",
                 "CP_HQD1_RB_WPTR", "CP_HQD1_RB_CNTL", "IH_WPTR", "IH_RPTR", "IH_CNTL"),
    "sdma0": ("SDMA_STATUS", "SDMA_ERROR", "SDMA_ERROR_ADDR_LO", "SDMA_ERROR_ADDR_HI", "SDMA_ERROR_OFFSET",
              "INT_STATUS", "INT_ENABLE", "SDMA_CNTL", "SDMA_RB_RPTR", "SDMA_RB_WPTR", "SDMA_RB_CNTL",
              "IH_WPTR", "IH_RPTR", "IH_CNTL"),
}
ENGINE = {"gfx": "the CP", "gfx_high": "queue 1 (gfx_high)", "sdma0": "the copy engine (sdma0)"}


def _section(title: str, body: str) -> str:
    return f"== {title} ==\n{body.rstrip()}\n"


def marked_listing(dwords: list[int], base: int, mark_addr: int | None, note: str = "<-- CP",
                   codec=pm4) -> str:
    """The disassembly of a buffer, cut to the packets around `mark_addr`, which is marked;
    `codec`: spec.pm4, or spec.sdma for the copy engine's ring and IBs."""
    lines = []
    mark_i = None
    for item in codec.decode_stream(dwords):
        addr = base + 4 * item.offset
        line = f"  {addr:#010x}: {item.header:08x}  {codec.describe(item)}"
        if mark_addr is not None and addr <= mark_addr < addr + 4 * item.length:
            line += f"   {note}"
            mark_i = len(lines)
        lines.append(line)
    if mark_i is None:
        mark_i = len(lines) - 1
    lo, hi = max(0, mark_i - LISTING_AROUND), min(len(lines), mark_i + LISTING_AROUND + 1)
    out = lines[lo:hi]
    if lo:
        out.insert(0, f"  ... {_n(lo, 'packet')} before")
    if hi < len(lines):
        out.append(f"  ... {_n(len(lines) - hi, 'packet')} after")
    return "\n".join(out)


class CrashReporter:
    def __init__(self, directory: str | os.PathLike, app: str, backend: str,
                 probe: Callable[[], dict] | None = None):
        self.directory = Path(directory)
        self.app = app
        self.backend = backend
        self.probe = probe  # the CP's IB stack from the hardware, when the backend can tell
        self.kmd: Kmd | None = None
        self.ioctls: deque = deque(maxlen=LAST_IOCTLS)
        self.written: list[Path] = []
        self.of_error: list[tuple[object, Path]] = []  # (a GPU error's info, its report): the app's GpuError holds it
        self.shown: Callable[[Path], str] = str  # how a path is printed (Session: from the user's cwd)
        self.extra: Callable[[], str] | None = None  # more to say (the exit report's stats)
        # what the drivers the app reloaded (kmd_model.rebind) counted before they went: the
        # exit report's fences, doorbells and interrupts are the run's, not the last driver's
        self.unloaded: Counter = Counter()
        self.loads = 1

    def attach(self, kmd: "Kmd") -> None:
        self.kmd = kmd
        kmd.trace_hooks.append(self.ioctls.append)

    def observe(self, event: str, f: dict) -> None:
        """Kmd.observers: a GPU error or job timeout, before recovery."""
        if event == "bind":
            if self.kmd is not None and f["kmd"] is not self.kmd:
                self.unloaded.update(kmd_counts(self.kmd))
                self.loads += 1
            self.kmd = f["kmd"]
        elif event == "gpu_error":
            info = f["info"]
            what = "job timeout" if info.code == "TIMEOUT" else "GPU error"
            path = self.report(f"{what}: {info.message}", info=info, state=f["state"], job=f["job"],
                               ring=f.get("ring", "gfx"))
            if path is not None:
                self.of_error.append((info, path))

    def report_of(self, exc: BaseException) -> Path | None:
        """The report written for the GPU error that `exc` (the UMD's GpuError) raises, when
        there is one: written before recovery, it holds what a report of the exception would
        have lost (the registers, the ring, the IB with the packet in hand)."""
        info = getattr(exc, "info", None)
        return next((p for i, p in self.of_error if i is info), None) if info is not None else None

    # ------------------------------------------------------------------ writing

    def report(self, reason: str, *, info=None, state=None, job=None,
               exc: BaseException | None = None, ring: str = "gfx") -> Path | None:
        if len(self.written) >= MAX_REPORTS:
            return None
        try:
            text = self.render(reason, info=info, state=state, job=job, exc=exc, ring=ring)
        except Exception as e:  # a report about a broken state must not break the run
            text = f"gpucosim crash report (incomplete)\nreason: {reason}\n\nwriting it failed:\n" + \
                "".join(traceback.format_exception(e))
        stem = Path(self.app).stem.replace(":", "_").replace(".", "_") or "app"
        self.directory.mkdir(parents=True, exist_ok=True)
        n = len(self.written) + 1
        path = self.directory / f"crash-{stem}-{self.backend}-{os.getpid()}-{n}.txt"
        path.write_text(text)
        self.written.append(path)
        print(f"gpucosim: {reason.splitlines()[0]}\ngpucosim: crash report written to {self.shown(path)}",
              file=sys.stderr, flush=True)
        return path

    def render(self, reason: str, *, info=None, state=None, job=None, exc=None, ring: str = "gfx") -> str:
        """`ring`: the KMD's ring the error or timeout is on (gfx, gfx_high, sdma0): its
        registers, ring and IBs are the ones shown."""
        kmd = self.kmd
        parts = [self._header(reason)]
        if exc is not None:
            parts.append(_section("exception in the app", "".join(traceback.format_exception(exc))))
        if kmd is None:
            parts.append("(the driver was not bound yet: no device state)\n")
            return "\n".join(parts)
        dumps: list[str] = []
        if ring not in RING_REGS or ring != "gfx" and self._sched(ring) is None:
            ring = "gfx"  # (a ring this report does not know: queue 0's, as before)
        ibs = ((lambda: self._ibs(state, job, dumps, info)) if ring == "gfx" else
               (lambda: self._ring_ibs(ring, info, state, job, dumps)))
        for title, fn in (("registers", lambda: self._registers(ring)),
                          ("ring" if ring == "gfx" else f"{ring} ring", lambda: self._ring(dumps, ring)),
                          ("IB stack and the packet in hand", ibs),
                          ("pending IH entries", self._ih), ("jobs", self._jobs),
                          ("last ioctls", self._last_ioctls), ("counters", self._counters)):
            try:
                parts.append(_section(title, fn()))
            except Exception as e:
                parts.append(_section(title, f"(could not read: {type(e).__name__}: {e})"))
        if self.extra is not None:
            try:
                parts.append(_section("buffers, pools, fences", self.extra()))
            except Exception as e:
                parts.append(_section("buffers, pools, fences", f"(could not read: {e})"))
        if dumps:
            parts.append(_section("dumps (list them with `gpucosim disasm THIS_FILE`)", "\n".join(dumps)))
        return "\n".join(parts)

    def _header(self, reason: str) -> str:
        cyc = None
        if self.kmd is not None:
            try:
                cyc = self.kmd.dev.now()
            except Exception:
                pass
        when = f"cycle {cyc} (waveform {wave_time(cyc)})" if cyc is not None else "before the device came up"
        return (f"gpucosim crash report\n"
                f"app:     {self.app}\nbackend: {self.backend}\nat:      {when}, "
                f"{time.strftime('%Y-%m-%d %H:%M:%S')}\nreason:  {reason}\n")

    def _sched(self, ring: str):
        """The KMD's scheduler of `ring` (None: the device has no such ring)."""
        return next((s for s in self.kmd.scheds if s.ring.name == ring), None)

    def _registers(self, ring: str = "gfx") -> str:
        m = self.kmd.mmio
        lines = []
        for name in RING_REGS[ring]:
            reg = getattr(regs, name)
            lines.append("  " + regmap.decode_line(reg, m.read(reg)))
        return "\n".join(lines)

    def _ring(self, dumps: list[str], name: str = "gfx") -> str:
        kmd = self.kmd
        sched = kmd.sched if name == "gfx" else self._sched(name)
        ring = sched.ring
        rptr_wb = ring.get_rptr()
        hw_rptr = (kmd.mmio.read(ring.RPTR) >> ring.RPTR_SHIFT) & M32  # (the SDMA's counts bytes)
        pending = sched.pending
        start = pending[0].ring_start if pending else ring.commit_start
        if (ring.committed - start) & M32 > ring.size_dw:
            start = ring.commit_start
        base, words = ring_dwords(ring, start, ring.wptr)
        lines = [f"  ring at {ring.gpu_addr:#x}, {n_dwords(ring.size_dw)}; KMD wptr {ring.wptr:#x}, "
                 f"committed (doorbell) {ring.committed:#x}; rptr {hw_rptr:#x} (write-back {rptr_wb:#x}); "
                 f"{n_dwords((ring.committed - hw_rptr) & M32)} not yet consumed"]
        if words:
            mark = ring.gpu_addr + 4 * (hw_rptr & ring.mask)
            lines.append(f"  ring [{start:#x}, {ring.wptr:#x}):")
            lines.append(marked_listing(words, base, mark, f"<-- rptr: {ENGINE[name]} is here",
                                        sdma if name == "sdma0" else pm4))
            # (a dump named like *sdma* is read as SDMA packets by `gpucosim disasm`)
            label = "ring" if name == "gfx" else f"{name} ring"
            dumps.append(format_dump(f"{label} [{start:#x}, {ring.wptr:#x}) at {base:#x}", base, words))
        else:
            lines.append("  (nothing written since the last job finished)")
        return "\n".join(lines)

    def _ibs(self, state, job, dumps: list[str], info=None) -> str:
        """Queue 0's IB stack and packet in hand: the hardware probe's when it holds queue 0's
        place; else (the CP's parser is in its other queue) queue 0's own, from its error
        registers (`state`), a timeout's diagnosis (`info`: the packet it is stuck in) or its
        STATUS, with the job's IBs."""
        kmd = self.kmd
        probe = None
        if self.probe is not None:
            try:
                probe = self.probe()
            except Exception as e:
                probe = {"error": f"{type(e).__name__}: {e}"}
        lines = []
        level = None
        moved = False
        ibs: list[dict] = []
        hdr_addr = None
        if probe and "error" not in probe:
            level = probe.get("level")
            ibs = [ib for ib in probe.get("ibs", []) if ib["level"] <= (level or 0)]
            hdr_addr = probe.get("header_addr")
            # (the job's IBs and those they chain to: a CHAIN replaces IB1's base)
            job_ibs = {addr for a, n in job.ibs for addr, _ in ib_chain(kmd.mem32, a, n, kmd.job_ib_translate(job))} \
                if job is not None and job.ibs else set()
            if probe.get("queue", 0) != 0 or job_ibs and any(ib["level"] == 1 for ib in ibs) and \
                    not any(ib["level"] == 1 and ib["base"] in job_ibs for ib in ibs):
                # the CP's registers hold the parser's place in its other queue (it switched to
                # the queue that could run once this one stopped, or polls): not this job's IBs
                # (a queue-0 timeout with the parser in queue 1's ring read "level RING")
                moved = True
                level, ibs, hdr_addr = None, [], None
        if state is not None:  # the error latches name the level and the packet
            level = state.level
            base = kmd.ring.gpu_addr if level == 0 else next(
                (ib["base"] for ib in ibs if ib["level"] == level), None)
            if state.code_name.startswith("BUS_") or state.code_name.startswith("DOORBELL"):
                if base is not None and level:
                    hdr_addr = base + 4 * state.offset_dw
                elif level == 0:
                    hdr_addr = kmd.ring.gpu_addr + 4 * (state.offset_dw & kmd.ring.mask)
            else:
                hdr_addr = state.addr
        elif moved or not probe or "error" in probe:
            # queue 0's own place: a timeout's diagnosis names the packet it is stuck in (by
            # the app's address: the job's IB that holds it gives the CP's), else its STATUS
            st = kmd.mmio.read(regs.STATUS)
            level = regs.STATUS.LEVEL.get(st)
            if info is not None and info.addr and job is not None and job.ibs:
                level = regs.IbLevel[info.level]
                if level == 1:
                    hdr_addr = next((a + 4 * k for a, n in job.ibs for k in range(n)
                                     if job.client_addr(a + 4 * k) == info.addr), None)
        if not ibs and job is not None and job.ibs and (level or 0) >= 1:
            # without the probe's: the job's IB that holds the packet, else its first
            addr, n = next(((a, n) for a, n in job.ibs if hdr_addr is not None and a <= hdr_addr < a + 4 * n),
                           job.ibs[0])
            ibs = [{"level": 1, "base": addr, "size_dw": n, "pos_dw": None}]
            if hdr_addr is None and state is not None and level == 1:  # a bus error: the offset
                hdr_addr = addr + 4 * state.offset_dw
        if level is None:
            level = regs.STATUS.LEVEL.get(kmd.mmio.read(regs.STATUS))
        lines.append(f"  the CP is at level {regmap.regs.IbLevel(level).name if level <= 2 else level}"
                     + (f", packet header at {hdr_addr:#x}" if hdr_addr is not None else ""))
        if probe and "error" in probe:
            lines.append(f"  (the hardware probe failed: {probe['error']})")
        if moved:
            lines.append("  (the CP's registers hold its other queue's place by now: the failing job's IB is shown)")
        lines.append(f"  ring at {kmd.ring.gpu_addr:#x}")
        mem32 = kmd.mem32
        # IBs are at the job's GPU virtual addresses: read them where its VM puts them
        xlate = kmd.job_ib_translate(job) if job is not None else (lambda va, n: va)
        for ib in ibs:
            base, n = ib["base"], ib["size_dw"]
            pos = ib.get("pos_dw")
            at = f", CP position +{4 * pos:#x}" if pos is not None else ""
            lines.append(f"  -> IB{ib['level']} at {base:#x}, {n_dwords(n)}{at}")
            pa = xlate(base, 4 * n) if n else None
            if pa is not None and (pa >> 2) + n <= len(mem32):
                words = mem32[pa >> 2:(pa >> 2) + n].tolist()
                mark = hdr_addr if ib["level"] == level else None
                note = "<-- the packet in hand" if mark is not None else ""
                if mark is None:  # the INDIRECT_BUFFER that went one level deeper
                    deeper = next((x for x in ibs if x["level"] == ib["level"] + 1), None)
                    mark, note = None, ""
                    if deeper is not None:
                        for item in pm4.decode_stream(words):
                            if isinstance(item, pm4.Packet) and item.name == "INDIRECT_BUFFER" and \
                                    item.args["base"] == deeper["base"]:
                                mark, note = base + 4 * item.offset, "<-- calls the next level"
                lines.append(marked_listing(words, base, mark, note))
                dumps.append(format_dump(f"IB{ib['level']} at {base:#x} ({n_dwords(n)})", base, words))
        hdr_pa = None if hdr_addr is None else hdr_addr if not level else xlate(hdr_addr, 4)
        if hdr_pa is not None and 0 <= hdr_pa and (hdr_pa >> 2) + 1 <= len(mem32):
            i = hdr_pa >> 2
            words = mem32[i:i + 2 + ((int(mem32[i]) >> 16) & 0x3FFF)].tolist()
            item = pm4.decode(words, 0)
            lines.append("  the packet in hand:")
            lines.append(f"    {hdr_addr:#010x}: {' '.join(f'{w:08x}' for w in words[:12])}"
                         + (" ..." if len(words) > 12 else ""))
            lines.append(f"    {pm4.describe(item, verbose=True)}")
        return "\n".join(lines)

    def _ring_ibs(self, name: str, info, state, job, dumps: list[str]) -> str:
        """Where the failing queue of another ring than gfx is: its level and packet (from its
        error registers, or a timeout's diagnosis), its job's first IB disassembled in its own
        packet format. (The hardware probe reads the CP's parser, not this queue.) The IB is
        listed where the queue ran it (the CS checker's copy when it checks), the header named
        by the address the app knows."""
        kmd = self.kmd
        codec = sdma if name == "sdma0" else pm4
        ring = self._sched(name).ring
        level, hw_hdr, shown, offset = None, None, None, None
        if state is not None:  # an error: its registers name the level and the packet
            level = state.level
            if state.code_name.startswith(("BUS_", "DOORBELL", "VM_FAULT")):
                offset = state.offset_dw  # (the address is the access's, or the doorbell's value)
            else:
                hw_hdr = state.addr
                shown = info.addr if info is not None else state.addr
        elif info is not None:  # a timeout: the packet it polls in, when found (the app's address)
            level, shown = regs.IbLevel[info.level], info.addr or None
        if level is None:
            level = ring.STATUS.LEVEL.get(kmd.mmio.read(ring.STATUS))
        ib1 = job.ibs[0] if job is not None and job.ibs and level >= 1 else None
        client = job.client_addr if job is not None else (lambda a: a)
        if offset is not None:
            hw_hdr = (ring.gpu_addr + 4 * (offset & ring.mask) if level == 0 else
                      ib1[0] + 4 * offset if ib1 is not None and level == 1 else None)
            shown = hw_hdr if hw_hdr is None or level == 0 else client(hw_hdr)
        if hw_hdr is None and shown is not None and ib1 is not None:
            hw_hdr = next((ib1[0] + 4 * k for k in range(ib1[1]) if client(ib1[0] + 4 * k) == shown), None)
        lines = [f"  {ENGINE[name]} is at level {regs.IbLevel(level).name if level <= 2 else level}"
                 + (f", packet header at {shown:#x}" if shown is not None else "")]
        if ib1 is None:
            return "\n".join(lines)
        base, n = ib1
        copy = f" (the CS checker's copy of the app's IB at {client(base):#x})" if client(base) != base else ""
        lines.append(f"  -> IB1 at {base:#x}, {n_dwords(n)}{copy}")
        pa = kmd.job_ib_translate(job)(base, 4 * n) if n else None
        mem32 = kmd.mem32
        if pa is not None and (pa >> 2) + n <= len(mem32):
            words = mem32[pa >> 2:(pa >> 2) + n].tolist()
            inside = hw_hdr is not None and base <= hw_hdr < base + 4 * n
            lines.append(marked_listing(words, base, hw_hdr if inside else None,
                                        "<-- the packet in hand" if inside else "", codec))
            dumps.append(format_dump(f"{name} IB1 at {base:#x} ({n_dwords(n)})", base, words))
            if inside:
                item = next(codec.decode_stream(words, (hw_hdr - base) >> 2))
                lines.append("  the packet in hand:")
                lines.append(f"    {codec.describe(item, verbose=True)}")
        return "\n".join(lines)

    def _ih(self) -> str:
        ih = self.kmd.ih
        if ih is None:
            return "  (no IH ring)"
        hw_wptr = self.kmd.mmio.read(regs.IH_WPTR)
        lines = [f"  IH ring at {ih.gpu_addr:#x}: KMD rptr {ih.rptr:#x}, hardware wptr {hw_wptr:#x} "
                 f"(write-back {ih.get_wptr():#x}); {ih.entries} {'entry' if ih.entries == 1 else 'entries'} handled so far"]
        r, n = ih.rptr, 0
        while r != hw_wptr and n < 16:
            i = (r & ih.mask) >> 2
            e = ih_spec.decode(ih.ring32[i:i + ih_spec.ENTRY_DWORDS].tolist())
            try:
                src = ih_spec.Source(e["SOURCE_ID"]).name
            except ValueError:
                src = f"source {e['SOURCE_ID']}"
            ts = e["TIMESTAMP_LO"] | e["TIMESTAMP_HI"] << 32
            lines.append(f"  pending: {src} (client {e['CLIENT_ID']:#x} source {e['SOURCE_ID']}) @{ts} data "
                         + " ".join(f"{e[k]:#x}" for k in ih_spec.DATA_FIELDS))
            r = (r + ih_spec.ENTRY_BYTES) & M32
            n += 1
        if n == 0:
            lines.append("  no entries pending")
        return "\n".join(lines)

    def _jobs(self) -> str:
        """Each ring's fences and jobs (the gfx ring's first, unlabelled; another ring's when
        it has run anything: the job that failed on the copy engine was missing)."""
        lines, jobs = [], 0
        for s in self.kmd.scheds:
            fd, name = s.fence_drv, s.ring.name
            if name != "gfx" and not (fd.sync_seq or s.pending or s.queue):
                continue
            label = "" if name == "gfx" else f"{name}: "
            lines.append(f"  {label}hardware fences: last emitted {fd.sync_seq:#010x}, last signalled "
                         f"{fd.last_seq:#010x}, fence memory {fd.read():#010x}")
            for kind, q in (("in the ring", s.pending), ("queued", s.queue)):
                for j in q:
                    jobs += 1
                    hw = f", hw fence {j.hw_fence.seq:#010x}" if j.hw_fence else ""
                    lines.append(f"  {label}{kind}: fd {j.ctx.file.fd} context {j.ctx.id} seq {j.seq:#x}, ring "
                                 f"[{j.ring_start:#x}, {j.ring_end:#x}), "
                                 f"IBs {', '.join(f'{a:#x}+{n}dw' for a, n in j.ibs)}{hw}")
        if not jobs:
            lines.append("  no jobs in flight")
        return "\n".join(lines)

    def _last_ioctls(self) -> str:
        return "\n".join(f"  {r}" for r in self.ioctls) or "  (none)"

    def _counters(self) -> str:
        c = self.kmd.counters()
        hw = ", ".join(f"{k} {v}" for k, v in c["hw"].items())
        pk = ", ".join(f"{k} {v}" for k, v in c["packets"].items())
        st = self.kmd.kmd_stats()
        kmd = ", ".join(f"{k} {v}" for k, v in st.items() if not isinstance(v, dict))
        return f"  hardware: {hw}\n  packets: {pk}\n  driver: {kmd}"


# ------------------------------------------------------------------------------ exit report

QUEUE_ENGINE = {"gfx": "CP queue 0 (gfx)", "gfx_high": "CP queue 1 (gfx_high)", "sdma0": "the SDMA (sdma0)"}


def queue_engine(kmd: "Kmd", q) -> str:
    """The engine a UMD queue's jobs run on, as the KMD routes them (Kmd.sched_for: a
    high-priority context's gfx jobs on the CP's queue 1 when there is one). A closed
    queue's context is gone: its priority is the one the queue asked for."""
    from types import SimpleNamespace

    from kmd_model.sched.scheduler import Priority

    sched = kmd.rings.get((q.ip_type, 0))
    if sched is None:
        return "no engine"
    ctx = kmd.contexts.get((q.ws.file.fd, q.ctx_id))
    if ctx is None:
        ctx = SimpleNamespace(priority={"low": Priority.LOW, "high": Priority.HIGH}.get(q.priority, Priority.NORMAL))
    name = kmd.sched_for(sched, ctx).name
    return QUEUE_ENGINE.get(name, name)


def _size(n: int) -> str:
    return f"{n} byte{'s' * (n != 1)}" if n < 4096 else f"{n // 1024} KiB"


def _n(n: int, noun: str, plural: str | None = None) -> str:
    """`1 flush`, `2 flushes`: a count and its noun, as English has it (the report said
    "1 flushes", "1 hits", "1 free range(s)")."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _fds(fds: list[int]) -> str:
    """File descriptors, runs of them compact: `fds 3-26`, `fds 3, 5, 7-9`, `fd 3`."""
    fds = sorted(fds)
    runs: list[list[int]] = []
    for fd in fds:
        if runs and fd == runs[-1][1] + 1:
            runs[-1][1] = fd
        else:
            runs.append([fd, fd])
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)
    return f"fd{'s' * (len(fds) != 1)} {text}"


def _alike(items: list[tuple[Any, int]]) -> list[tuple[Any, list[int]]]:
    """(key, fd) pairs grouped by key, in the order each key first came, with their fds:
    an app that opens 24 devices alike gets one line for them, not 24 the same."""
    groups: dict[Any, list[int]] = {}
    for key, fd in items:
        groups.setdefault(key, []).append(fd)
    return list(groups.items())


def kmd_counts(kmd: "Kmd") -> Counter:
    """What the exit report's fences line counts, of one driver instance."""
    fd = kmd.fence_drv
    return Counter(emitted=fd.emitted, signalled=fd.signalled, doorbells=kmd.ring.doorbells,
                   interrupts=kmd.stats["interrupts"], resets=kmd.stats["resets"],
                   queue_resets=kmd.stats["queue_resets"])


def exit_report(kmd: "Kmd", queues: list, ioctl_stats: dict[str, list], at_exit: bool = True,
                devices: list = (), unloaded: Counter | None = None, loads: int = 1) -> tuple[str, int]:
    """(the report, live user buffer objects): at the end of a run, those are leaks. With
    the UMD `devices` the app opened: the buffers it still holds, its VA range and pools.
    `unloaded`: what the `loads - 1` drivers the app reloaded (kmd_model.rebind) had
    counted (CrashReporter.unloaded), added to `kmd`'s."""
    live = kmd.live_bos()
    nbytes = sum(b.size for b in live)
    lines = []
    unclosed, memory = [], []
    for d in devices:
        fd = d.ws.file.fd
        if at_exit and not d.closed:  # (its queues, pools and slabs are the BO leaks below)
            unclosed.append((d.name, fd))
        apps = [b for b in d.buffers if b.owner is None]  # (not the queues' own pages, IBs, staging)
        if apps and at_exit:
            held = sum(b.size for b in apps)
            lines.append(f"  LEAK: {_n(len(apps), 'buffer')} of the app, {_size(held)}, never freed: "
                         + ", ".join(repr(b) for b in apps[:4]) + (" ..." if len(apps) > 4 else ""))
        d.mm.take_back()  # (ranges and entries whose work is done)
        va, p = d.mm.va.stats(), d.mm.stats()
        va_text = (f"{_size(va.used)} in {_n(va.allocations, 'range')}, {_n(va.free_ranges, 'free range')}, the "
                   f"largest {_size(va.largest_free)}; at most {_size(va.peak_used)} used, "
                   f"{_n(va.peak_free_ranges, 'free range')}")
        if p.enabled:
            pools = (f"BO cache {_n(p.cache_hits, 'hit')}, {_n(p.cache_misses, 'miss', 'misses')}, "
                     f"{p.cache_expired} expired, {p.cached} cached ({_size(p.cached_bytes)}); slabs "
                     f"{_n(p.slab_allocs, 'entry', 'entries')} handed out, {_n(p.slabs, 'slab')} "
                     f"({_size(p.slab_bytes)}), {_n(p.slab_frees_deferred, 'free')} deferred to their fence, "
                     f"{_size(p.waste_bytes)} wasted by rounding up (at most {_size(p.waste_peak_bytes)})")
        else:
            pools = f"off ({_n(p.bos_created, 'BO')} created, {p.bos_released} released)"
        memory.append(((d.name, va_text, pools), fd))
    for name, fds in _alike(unclosed):
        if len(fds) == 1:
            lines.append(f"  LEAK: the app never closed its device ({name}, fd {fds[0]}): gpu.close() frees its "
                         "buffers, queues and pools")
        else:
            lines.append(f"  LEAK: the app never closed {len(fds)} devices ({name}, {_fds(fds)}): gpu.close() "
                         "frees a device's buffers, queues and pools")
    for (name, va_text, pools), fds in _alike(memory):
        if len(fds) == 1:
            lines.append(f"  VA ({name}, fd {fds[0]}): {va_text}\n  pools: {pools}")
        else:
            lines.append(f"  VA ({len(fds)} devices alike: {name}, {_fds(fds)}; each): {va_text}\n"
                         f"  pools (each of the {len(fds)}): {pools}")
    shown = ", ".join(repr(b) for b in live[:6]) + (" ..." if len(live) > 6 else "")
    if live and at_exit:
        lines.append(f"  LEAK: {_n(len(live), 'buffer object')}, {_size(nbytes)} still allocated at exit: {shown}")
    elif live:
        lines.append(f"  buffers: {len(live)} allocated, {_size(nbytes)}: {shown}")
    else:
        lines.append("  buffers: none left allocated (no leaks)" if at_exit else "  buffers: none allocated")
    kb = kmd.bo.live_bos(None)
    names = Counter(b.name for b in kb)  # (in the order first seen; a page table per 2 MiB mapped repeats)
    lines.append(f"  kernel buffers: {len(kb)} ({_size(sum(b.size for b in kb))}): "
                 + ", ".join(f"{n} (x{k})" if k > 1 else n for n, k in names.items()))
    counts = []
    for q in queues:
        cb = q.cmdbuf
        fd = q.ws.file.fd
        if at_exit and not q.closed and cb.commands:
            # recorded and never submitted: the app neither flushed nor closed the queue, so the
            # GPU never ran them (the report said "N API calls, 0 flushes" and nothing more)
            calls = [str(lb) for lb in list(cb.labels.values()) + [lb for _, lb in cb._pending_labels]]
            lines.append(f"  LEAK: queue fd {fd} ctx {q.ctx_id} on {queue_engine(kmd, q)}: {_n(cb.commands, 'command')} "
                         f"recorded and never submitted ({n_dwords(cb.dwords)}): the GPU never ran "
                         f"{'it' if cb.commands == 1 else 'them'} (flush(), finish() or close() submits)" + (f"; the first {calls[0]}" if calls else ""))
        pool = q.pool
        counts.append(((q.ctx_id, queue_engine(kmd, q),
                        f"{_n(q.calls, 'API call')}, {_n(q.flushes, 'flush', 'flushes')}, IB pool "
                        f"{_n(pool.created, 'IB')} of {4 * pool.size_dw} bytes created, {len(pool.free)} free, "
                        f"{_n(q.cmdbuf.chains, 'chain')}, {_n(len(q.inflight), 'submission')} in flight"
                        + (" (closed)" if q.closed else "")), fd))
    for (ctx, engine, text), fds in _alike(counts):
        # context ids are per file (two clients' first contexts are both 1): the fd tells them apart
        if len(fds) == 1:
            lines.append(f"  queue fd {fds[0]} ctx {ctx} on {engine}: {text}")
        else:
            lines.append(f"  {len(fds)} queues alike ({_fds(fds)}, ctx {ctx} on {engine}; each): {text}")
    fd = kmd.fence_drv
    n = kmd_counts(kmd) + (unloaded or Counter())
    # (a reloaded driver starts its counts afresh: the line showed the last driver's alone,
    # "1 emitted, 2 doorbells" after batching.py's 1,554 CS ioctls)
    loaded = f" (over {loads} driver loads: kmd_model.rebind)" if loads > 1 else ""
    lines.append(f"  fences: {n['emitted']} emitted, {n['signalled']} signalled, {len(fd.pending)} pending, "
                 f"last {fd.last_seq:#010x}; {_n(n['doorbells'], 'doorbell')}, {_n(n['interrupts'], 'interrupt')}, "
                 f"{_n(n['resets'], 'GPU reset')}, {_n(n['queue_resets'], 'queue reset')}{loaded}")
    if ioctl_stats:
        total = sum(v[0] for v in ioctl_stats.values())
        per = ", ".join(f"{k} {v[0]}" for k, v in sorted(ioctl_stats.items(), key=lambda kv: -kv[1][0]))
        cyc = sum(v[1] for v in ioctl_stats.values())
        wall = sum(v[2] for v in ioctl_stats.values()) / 1000
        lines.append(f"  ioctls: {total} ({per}); {_n(cyc, 'cycle')}, {wall:.1f} ms inside them")
    return "\n".join(lines), len(live)


class IoctlStats:
    """Count, cycles and wall time per ioctl request (a Kmd.trace_hooks callable)."""

    def __init__(self):
        self.by_request: dict[str, list] = {}
        self.errors: Counter = Counter()

    def __call__(self, rec: Any) -> None:
        v = self.by_request.setdefault(rec.request, [0, 0, 0.0])
        v[0] += 1
        v[1] += rec.cycles
        v[2] += rec.wall_us
        if rec.error is not None:
            self.errors[rec.request] += 1
