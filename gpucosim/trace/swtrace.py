"""The software half of the timeline: UMD API calls, ioctls, the KMD's ring, doorbells,
interrupts and fences, from the drivers' own hooks.

- `umd.runtime.api_hook` wraps every UMD API call (a span on the "UMD API" track);
- `Kmd.trace_hooks` hands over every ioctl record (a span on "ioctl");
- `Kmd.observers` sees doorbells (with the ring dwords they publish, disassembled),
  jobs entering the ring, interrupts, IH entries, fences and GPU errors.

The hardware half (CP packets, bus bursts, the irq line) is `hwtrace` beside this module.
Nothing here runs unless a timeline was asked for (`gpucosim run --trace FILE`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

from kmd_model.ioctl.trace import fmt as fmt_ioctl
from kmd_model.uapi import CsChunkIb, HwIp
from spec import pm4, sdma

from ..dump import n_dwords
from .timeline import Timeline, wave_time

if TYPE_CHECKING:
    from kmd_model.ioctl.trace import IoctlRecord
    from kmd_model.core.kmd import Kmd

M32 = 0xFFFF_FFFF
MAX_LISTING = 48  # packets shown in one event's disassembly
MAX_CHAIN = 16  # chained IBs followed when dumping a submission


def short(v: Any, limit: int = 100) -> str:
    """A bounded repr for event arguments."""
    if isinstance(v, int) and not isinstance(v, bool):
        s = str(v) if -10 < v < 10 else f"{v:#x}"
    elif isinstance(v, (list, tuple)) and v and all(isinstance(x, int) for x in v):
        shown = ", ".join(f"{x:#x}" for x in v[:6])
        s = f"[{shown}{', ...' if len(v) > 6 else ''}] ({len(v)})"
    else:
        s = repr(v)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def listing(dwords: list[int], base: int) -> str:
    lines = pm4.disassemble(dwords, base)
    if len(lines) > MAX_LISTING:
        lines = lines[:MAX_LISTING] + [f"... {len(lines) - MAX_LISTING} more packets"]
    return "\n".join(lines)


def ring_dwords(ring, start: int, end: int) -> tuple[int, list[int]]:
    """(byte address of `start`, the dwords [start, end)) of a ring, across its wrap."""
    n = (end - start) & M32
    idx = [(start + k) & ring.mask for k in range(n)]
    return ring.gpu_addr + 4 * (start & ring.mask), ring.ring32[idx].tolist()


def ib_chain(mem32, addr: int, size_dw: int, translate=lambda va, n: va) -> list[tuple[int, list[int]]]:
    """An IB and the IBs it chains to (INDIRECT_BUFFER CHAIN as its last packet), at GPU
    virtual addresses `translate(va, nbytes)` finds in memory."""
    out = []
    seen = set()
    while size_dw and addr not in seen and len(out) < MAX_CHAIN:
        pa = translate(addr, 4 * size_dw)
        if pa is None or (pa >> 2) + size_dw > len(mem32):
            break
        seen.add(addr)
        words = mem32[pa >> 2:(pa >> 2) + size_dw].tolist()
        out.append((addr, words))
        nxt = None
        for item in pm4.decode_stream(words):
            if isinstance(item, pm4.Packet) and item.name == "INDIRECT_BUFFER" and item.fields.get("CHAIN"):
                nxt = item.args
        if not nxt:
            break
        addr, size_dw = nxt["base"], nxt["size_dw"]
    return out


class Tracer:
    """Feeds one `Timeline` from the drivers. `now()` is the device clock in cycles."""

    def __init__(self, timeline: Timeline, now: Callable[[], int]):
        self.tl = timeline
        self.now = now
        self.kmd: Kmd | None = None
        self.fence_emitted: dict[Any, tuple[int, Any]] = {}  # hw fence -> (cycle, job) when it entered its ring
        self.dumps: list[dict] = []  # ring commits and IBs, for `gpucosim disasm trace.json`
        timeline.metadata["dumps"] = self.dumps

    def attach(self, kmd: "Kmd") -> None:
        self.kmd = kmd
        kmd.trace_hooks.append(self.ioctl)

    def _dump(self, name: str, base: int, dwords: list[int]) -> None:
        self.dumps.append({"name": name, "base": base, "dwords": dwords})

    # ------------------------------------------------------------------ UMD

    def api(self, name: str, fn: Callable, args: tuple, kwargs: dict) -> Any:
        """umd.runtime.api_hook: one span per API call (calls made inside one nest in it)."""
        t0, w0 = self.now(), time.perf_counter()
        a: dict[str, Any] = {}
        shown = args
        if shown and type(shown[0]).__module__.startswith("umd."):
            a["on"] = short(shown[0])
            shown = shown[1:]
        if shown:
            a["args"] = ", ".join(short(x, 48) for x in shown)
        for k, v in kwargs.items():
            a[k] = short(v, 48)
        try:
            result = fn(*args, **kwargs)
        except BaseException as e:
            a["raised"] = f"{type(e).__name__}: {e}"
            raise
        else:
            if result is not None:
                a["result"] = short(result)
            return result
        finally:
            a["wall_us"] = round((time.perf_counter() - w0) * 1e6, 1)
            self.tl.span("umd", name, t0, self.now(), a)

    # ------------------------------------------------------------------ ioctls

    def ioctl(self, rec: "IoctlRecord") -> None:
        """Kmd.trace_hooks: the record arrives when the call returns."""
        end = self.now()
        a = {"fd": rec.fd, "args": fmt_ioctl(rec.args), "wall_us": round(rec.wall_us, 1)}
        if rec.error is not None:
            a["result"] = f"-1 {rec.error.name} ({rec.error.message})"
        else:
            a["result"] = fmt_ioctl(rec.result)
        if rec.request == "CS" and rec.error is None and self.kmd is not None:
            self._cs_listing(rec, a)
        self.tl.span("ioctl", rec.request, end - rec.cycles, end, a)

    def _cs_listing(self, rec: "IoctlRecord", a: dict) -> None:
        kmd = self.kmd
        file = kmd.files.get(rec.fd)
        parts = []
        for ch in rec.args.chunks:
            if not isinstance(ch, CsChunkIb):
                continue
            if file is None:
                continue
            if ch.handle and ch.handle in file.handles:
                bo = file.handles[ch.handle]
                m = next((m for m in file.vm.maps if m.bo is bo and m.offset <= ch.offset < m.offset + m.size), None)
                if m is None:
                    continue
                addr = m.va + ch.offset - m.offset
            elif ch.gpu_addr is not None:
                addr = ch.gpu_addr
            else:
                continue
            if ch.ip_type == HwIp.DMA:  # the copy engine's IB: SDMA packets, no chains
                pa = file.vm.translate(addr, 4 * ch.size_dw)
                if pa is None:
                    continue
                words = kmd.mem32[pa // 4: pa // 4 + ch.size_dw].tolist()
                self._dump(f"CS seq {rec.result.seq} SDMA IB at {addr:#x} ({n_dwords(len(words))})", addr, words)
                parts.append(f"SDMA IB at {addr:#x}, {n_dwords(len(words))}:\n{sdma.listing(words, addr)}")
                continue
            for base, words in ib_chain(kmd.mem32, addr, ch.size_dw, file.vm.translate):
                self._dump(f"CS seq {rec.result.seq} IB at {base:#x} ({n_dwords(len(words))})", base, words)
                parts.append(f"IB at {base:#x}, {n_dwords(len(words))}:\n{listing(words, base)}")
        if parts:
            a["ibs"] = "\n".join(parts)

    # ------------------------------------------------------------------ KMD events

    def observe(self, event: str, f: dict) -> None:
        """Kmd.observers."""
        now = self.now()
        if event == "bind":
            self.kmd = f["kmd"]
            self.tl.instant("kmd", "driver reloaded", now, {"params": repr(f["kmd"].params)})
        elif event == "doorbell":
            ring = f["ring"]
            base, words = ring_dwords(ring, f["start"], f["wptr"])
            gfx = ring.name == "gfx"
            self._dump(f"{'' if gfx else ring.name + ' '}ring [{f['start']:#x}, {f['wptr']:#x}) at {base:#x}",
                       base, words)
            self.tl.instant("kmd", f"doorbell {'' if gfx else ring.name + ' '}wptr={f['wptr']:#x}", now, {
                "ring": ring.name, "wptr": f"{f['wptr']:#x}", "rptr": f"{ring.get_rptr():#x}", "dwords": len(words),
                "ring_writes": listing(words, base) if gfx else sdma.listing(words, base),
                "wave_time": wave_time(now)})
        elif event == "run_job":
            job, fence = f["job"], f["fence"]
            self.fence_emitted[fence] = (now, job)
            ring = job.ring.name if job.ring is not None else "gfx"
            self.tl.instant("kmd", f"run_job {'' if ring == 'gfx' else ring + ' '}fd {job.ctx.file.fd} ctx {job.ctx.id} "
                            f"seq {job.seq:#x}",
                            now, {"engine": ring,
                "hw_fence": f"{fence.seq:#010x}", "ibs": ", ".join(f"{a:#x}+{n}dw" for a, n in job.ibs),
                "ring": f"[{job.ring_start:#x}, {job.ring_end:#x})", "user_fence": job.user_fence is not None})
        elif event == "irq":
            self.tl.instant("irq", "KMD irq handler", now, {"wave_time": wave_time(now)})
        elif event == "ih_entry":
            e = f["entry"]
            ts = e["TIMESTAMP_LO"] | e["TIMESTAMP_HI"] << 32
            self.tl.instant("irq", f"IH {f['source']}", now, {
                "client": f"{e['CLIENT_ID']:#x}", "source_id": e["SOURCE_ID"], "gpu_timestamp": ts,
                "data": " ".join(f"{e[k]:#x}" for k in ("DATA0", "DATA1", "DATA2", "DATA3")),
                "raw": " ".join(f"{d:08x}" for d in f["raw"])})
        elif event == "fence":
            fence = f["fence"]
            a = {"seq": f"{fence.seq:#010x}", "wave_time": wave_time(now)}
            emitted = self.fence_emitted.pop(fence, None)
            name = f"fence {fence.seq:#x}"
            if emitted is not None:
                t0, job = emitted
                a.update(fd=job.ctx.file.fd, context=job.ctx.id, job_seq=job.seq, emitted_wave_time=wave_time(t0),
                         engine=job.ring.name if job.ring is not None else "gfx")
                self.tl.span("fence", name, t0, now, a)
            else:  # a kernel fence (IB test): no job
                self.tl.instant("fence", name + " signalled", now, a)
        elif event == "gpu_error":
            info = f["info"]
            self.tl.instant("kmd", f"GPU error {info.code}", now, {"message": info.message,
                                                                  "wave_time": wave_time(now)})
        elif event == "reset":
            # (a ring's reset of its queue alone names the ring; the full reset does not)
            name = f"{f['ring']} queue reset" if f.get("ring") else "GPU reset"
            self.tl.instant("kmd", name, now, {"resubmitted": f["resubmitted"]})


def model_cp_hook(timeline: Timeline, now: Callable[[], int]) -> Callable[[str], None]:
    """RefModel's `trace` hook: each packet the model's CP starts, as an instant (the
    model has no cycles, so its packets take no time)."""
    def hook(line: str) -> None:
        where, _, text = line.partition(": ")
        name = text.split(" ", 1)[0] or "packet"
        # the copy engine's packets ("SDMA RING+0x0040: ...") and the CP's queue 1's ("HQD1
        # RING+0x0020: ...") get tracks of their own, as on the RTL (hwtrace.py)
        track = "sdma" if where.startswith("SDMA") else "cp.hqd1" if where.startswith("HQD1") else "cp"
        timeline.instant(track, name, now(), {"where": where, "packet": text})
    return hook
