"""The hardware half of the timeline, watched from cocotb (Verilator or Icarus).

No Python runs per cycle: each monitor sleeps on value changes of a few registers and
wakes only when the hardware does something.

- CP packets: the CP's parser FSM register `cp_state` and its IB `level`. A packet
  starts when the FSM leaves RUN with a new header in `hdr`/`hdr_taken_off`/`hdr_addr` (not
  when it leaves RUN for the IH writer's states to append the SDMA's entry), and
  ends when the FSM is back in RUN at the packet's level (an INDIRECT_BUFFER ends when
  its IB has returned). Inside a packet, phases (data write, poll, fence write, IH
  entry, rptr write-back) are nested slices. State names come from the Amaranth FSM
  itself (`fsm_states`), so a change to rtl/cp/ cannot silently shift them.
- Memory bursts: the memory model's request queues (`mem.arq_wp`/`arq_rp` for reads,
  `awq_wp`/`bq_rp` for writes) move once per AR/AW handshake and once per finished
  burst; the queue entries hold ID, address and length. Bursts with a DMA ID go on the
  DMA track, the CP's own on the memory-bus track.
- The irq line: one slice per high period.

`cp_probe(dut)` reads the CP's IB stack and current packet for crash reports.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections import deque
from pathlib import Path
from typing import Callable

from kmd_model.log import get_logger
from kmd_model.regs import IbLevel
from spec import packets as pk
from spec import pm4
from spec import vm as vm_spec

from .timeline import Timeline, wave_time

log = get_logger("cp")

# AXI IDs: rtl/axi_mux.py puts the master's index in the top two ID bits (ID_WIDTH 4, four
# masters): the CP 0-3, the SDMA 4-6 (7 is the MMU's walks), the DMA engine 8, the SDMA's 12.
DMA_ID_MIN = 8
SDMA_IDS = frozenset((4, 5, 6, 12, 13, 14, 15))

# FSM states that are a phase of the packet in hand (a nested slice of it)
PHASES = {
    "WD_WRITE": "data write", "WD_WAIT": "data write",
    "WRM_READ": "poll", "WRM_RESP": "poll", "WRM_SLEEP": "poll",
    "RM_WRITE": "fence write", "RM_WAIT": "fence write",
    "IH_ENTRY_WRITE": "IH entry",
    "IH_ENTRY_WAIT": "IH entry", "IH_WB_WRITE": "IH entry", "IH_WB_WAIT": "IH entry", "IH_DONE": "IH entry",
    "RPTR_WRITE": "rptr write-back", "RPTR_WAIT": "rptr write-back",
    "EXEC_DMA_DATA": "DMA queue", "DMA_SYNC": "DMA wait (CP_SYNC)",
}
ERROR_STATES = ("ERR_DRAIN", "ERROR")
# The IH writer's states. From RUN the FSM enters them only for another engine's entry (the
# SDMA's: rtl/cp/ih.py start_ext, straight to IH_ENTRY_WRITE, or IH_DONE when the IH ring is
# off or full) and comes back to RUN: no header is taken, so no packet starts.
IH_STATES = ("IH_ENTRY_WRITE", "IH_ENTRY_WAIT", "IH_WB_WRITE", "IH_WB_WAIT", "IH_DONE")
SWAP_STATES = ("SWAP", "SWAP1")  # the CP switches hardware queues (rtl/cp/queues.py)


# ------------------------------------------------------------------------------ FSM encoding

HWTRACE_ENV = "GPUCOSIM_HWTRACE"  # which monitors feed the timeline: a comma list, all when unset
MONITORS = ("cp", "sdma", "bus", "irq")


def monitors_wanted() -> list[str]:
    """The monitors $GPUCOSIM_HWTRACE asks for (every one when it is unset); ValueError
    naming one it does not know (a name not known dropped its track without a word)."""
    text = os.environ.get(HWTRACE_ENV)
    if text is None:
        return list(MONITORS)
    which = [w.strip() for w in text.split(",") if w.strip()]
    for w in which:
        if w not in MONITORS:
            raise ValueError(f"{w!r} is not a monitor: give a comma list of {', '.join(MONITORS)}")
    return which


@functools.lru_cache(maxsize=None)
def _elaborated_states(data_width: int) -> dict[str, dict[int, str]]:
    """{block: {encoding: state name}} of every parser FSM in one elaboration of the top:
    the launcher asks for the CP's and the copy engine's in turn, and each elaboration of
    GpuTop is about 2 s of CPU (one per process and data width now, not one per block)."""
    from amaranth.hdl import Fragment, Signal

    try:
        from amaranth.hdl import Switch
    except ImportError:  # amaranth 0.5 keeps it private
        from amaranth.hdl._ast import Switch
    from rtl.top import GpuTop

    frag = Fragment.get(GpuTop(data_width), None)
    found: dict[str, dict[int, str]] = {}

    def walk(f, path: tuple) -> None:
        block = path[-1]
        for stmts in f.statements.values():
            for s in stmts:
                if isinstance(s, Switch) and isinstance(s.test, Signal) and s.test.name == f"{block}_state":
                    sig = s.test
                    for n in range(1 << len(sig)):
                        try:
                            found.setdefault(block, {})[n] = sig.decoder(n).rsplit("/", 1)[0]
                        except (KeyError, TypeError):
                            pass
        for sub, name, *_ in f.subfragments:
            walk(sub, path + (str(name),))

    walk(frag, ("top",))
    return found


def fsm_states(data_width: int = 64, cache_dir: Path | None = None, block: str = "cp") -> dict[int, str]:
    """{encoding: state name} of a parser FSM (`block`: "cp", or "sdma" for the copy
    engine's; the state signal is `<block>_state`), from the Amaranth design.

    Amaranth numbers FSM states in the order the source first names them; the state
    signal's decoder knows the mapping. Cached beside the design's Verilog."""
    cache = None
    if cache_dir is not None:
        from testbench.sim.design import gpu_verilog
        cache = Path(cache_dir) / (gpu_verilog(data_width).stem + f".{block}_states.json")
        try:
            return {int(k): v for k, v in json.loads(cache.read_text()).items()}
        except (OSError, ValueError, AttributeError):  # (none yet; or half of one: made again)
            pass
    found = dict(_elaborated_states(data_width).get(block, {}))
    if not found or "RUN" not in found.values():
        raise RuntimeError(f"cannot find the {block} FSM ({block}_state) in rtl.top.GpuTop")
    if cache is not None:
        # (whole or not at all: a run stopped as it wrote it, or another one reading it as it
        # was written, read half a JSON file, a traceback at every later run)
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(found))
        os.replace(tmp, cache)
    return found


def _int(handle) -> int:
    """A signal's value as an int, without building a LogicArray (this runs once per
    event, and cocotb's LogicArray costs more than the rest of the monitor)."""
    try:
        return int(handle._handle.get_signal_val_binstr(), 2)
    except AttributeError:  # not a GPI handle (tests), or another cocotb
        try:
            return int(handle.value)
        except ValueError:
            return 0
    except ValueError:  # X/Z bits (Icarus before reset)
        return 0


async def _watch(handle, wake: Callable[[], None], owner) -> None:
    """Call `wake()` after every change of `handle`, until `owner.stopped`.

    `wake()` runs in the time step's read-only phase: a simulator may report the change
    before it has applied the other registers updated on the same edge (Icarus does: the CP
    monitor read the header of the previous packet), so the values read are settled."""
    from cocotb.triggers import ReadOnly

    trigger = handle.value_change
    while not owner.stopped:
        await trigger
        await ReadOnly()
        if owner.stopped:
            return
        wake()


# ------------------------------------------------------------------------------ CP packets

class _Open:
    __slots__ = ("name", "level", "start", "args", "ib", "returning", "filler")

    def __init__(self, name, level, start, args, ib=False, filler=False):
        self.name, self.level, self.start, self.args = name, level, start, args
        self.ib, self.returning, self.filler = ib, False, filler


class CpMonitor:
    """Packets the CP executes, as nested slices on the "CP packets" track."""

    def __init__(self, cp, states: dict[int, str], timeline: Timeline | None, now: Callable[[], int],
                 read_dwords: Callable[[int, int, int], list[int]] | None = None):
        self.cp = cp
        self.states = states
        self.tl = timeline
        self.now = now
        self.read_dwords = read_dwords  # (level, addr, n) -> dwords, for the disassembly
        self.stack: list[_Open] = []
        self.phase: tuple[str, int] | None = None
        self.filler: list | None = None  # [start, end, count, level, offset] of a run of fillers
        self.packets = 0
        self.stopped = False
        # the CP's two hardware queues (rtl/cp/queues.py): each has its own stack of open
        # packets and its own track ("cp", "cp.hqd1"); SWAP parks one and resumes the other
        self.track = "cp"
        self.q = 0  # the queue in hand: every SWAP flips it, a soft reset returns to queue 0
        self.parked: dict[int, list] = {}
        self.ext_ih = False  # the IH writer is appending another engine's entry (IH_STATES)
        self.ext_wrm = False  # ... while a WAIT_REG_MEM sleeps between its polls

    def tasks(self) -> list:
        """One waiter per watched register: a single trigger each is far cheaper than
        First(), which starts a task per trigger on every wake-up."""
        cp = self.cp
        self._st, self._lv, self._off = cp.cp_state, cp.level, cp.hdr_taken_off
        self._ps, self._pl = self.states.get(_int(self._st), "RUN"), _int(self._lv)
        self._po = _int(self._off)
        # (hdr_taken_off: a one-dword pad inside an IB is taken without leaving RUN)
        return [_watch(self._st, self._wake, self), _watch(self._lv, self._wake, self),
                _watch(self._off, self._wake, self)]

    def _wake(self) -> None:
        s, lvl, off = _int(self._st), _int(self._lv), _int(self._off)
        name = self.states.get(s, f"state{s}")
        if name != self._ps or lvl != self._pl:  # another waiter may have seen it already
            self.step(self._ps, name, self._pl, lvl)
            self._ps, self._pl = name, lvl
        elif off != self._po and name == "RUN":  # a pad in an IB: RUN throughout
            self._pad(self.now())
        self._po = off

    # -- the state machine of the watcher
    def step(self, ps: str, s: str, pl: int, lvl: int) -> None:
        t = self.now()
        if ps == "RUN" and s in IH_STATES:  # the SDMA's entry between two packets: none starts
            self.ext_ih = True
            return
        if self.ext_ih:
            if s in IH_STATES:
                return
            self.ext_ih = False
            if s == "RUN":  # back where it was, the packet before it long done
                return
        # a WAIT_REG_MEM writes no IH entry: the IH writer's states between its polls append the
        # SDMA's (rtl/cp/ih.py RET_WRM), drawn as a phase named as that engine's
        self.ext_wrm = s in IH_STATES and (ps == "WRM_SLEEP" or self.ext_wrm)
        if s in SWAP_STATES or ps in SWAP_STATES:
            if s == "SWAP" and ps not in SWAP_STATES:
                self._swap(t, ps)
            return
        if s == "QRESET":  # CP_QUEUE_RESET of the queue in hand
            if ps != "QRESET":
                self._close_all(t, "queue reset")
                self._instant("queue reset", t)
            return
        if s == "RESET" and ps != "RESET":
            self._close_all(t, "soft reset")
            for stack in self.parked.values():
                self.stack = stack
                self._close_all(t, "soft reset")
            self.parked, self.q, self.track = {}, 0, "cp"
            self._instant("soft reset", t)
            return
        if s in ERROR_STATES:
            if ps == "RUN":  # a bad header or a doorbell error: the packet never started
                self._start(t, error=True)
            if s == "ERR_DRAIN" and ps not in ERROR_STATES:
                self._close_all(t, "CP error")
                self._instant("CP error", t, {"wave_time": wave_time(t)})
            return
        if lvl < pl:  # an IB returned: the INDIRECT_BUFFER at the new level is done
            while self.stack and self.stack[-1].level > lvl:
                self._close(t)
            if self.stack and self.stack[-1].ib:
                if s == "RUN":
                    self._close(t)
                else:
                    self.stack[-1].returning = True
        elif ps == "RUN" and s != "RUN":
            self._start(t)
        # phases inside the packet in hand
        phase = PHASES.get(s)
        if self.ext_wrm:  # (step() below)
            phase = "IH entry (copy engine)"
        if self.phase is not None and (phase is None or phase != self.phase[0]):
            self._end_phase(t)
        if phase is not None and self.phase is None and self.stack and not self.stack[-1].filler:
            self.phase = (phase, t)
        if s == "RUN" and ps != "RUN" and self.stack:
            top = self.stack[-1]
            if top.level == lvl and (not top.ib or top.returning or (ps == "EXEC_INDIRECT_BUFFER" and lvl == pl)):
                self._close(t)

    def _swap(self, t: int, ps: str) -> None:
        """The CP switches queues: a packet in hand (a WAIT_REG_MEM that yields) ends here
        (the queue parses it again when it resumes); the open IBs wait with their queue."""
        q, self.q = self.q, 1 - self.q
        if self.phase is not None:
            self._end_phase(t)
        self._flush_filler()
        if ps != "RUN" and self.stack and not self.stack[-1].ib:
            self._close(t, "yielded to the other queue")
        self.parked[q] = self.stack
        self.stack = self.parked.pop(1 - q, [])
        self.track = "cp" if q else "cp.hqd1"

    def _start(self, t: int, error: bool = False) -> None:
        cp = self.cp
        hdr, off, addr, lvl = _int(cp.hdr), _int(cp.hdr_taken_off), _int(cp.hdr_addr), _int(cp.level)
        where = ("HQD1 " if self.q else "") + f"{_level_name(lvl)}+{4 * off:#06x}"  # (as the model's trace)
        if _is_pad(hdr):
            self._pad(t)
            self.stack.append(_Open("filler", lvl, t, {}, filler=True))  # (closed when RUN is back)
            return
        self._flush_filler()
        opcode = (hdr >> 8) & 0xFF
        p = pk.by_opcode.get(opcode) if hdr >> 30 == pk.PACKET_TYPE3 else None
        name = p.name if p else f"bad header {hdr:#010x}"
        args = {"where": where, "addr": f"{addr:#x}", "header": f"{hdr:#010x}"}
        if self.read_dwords is not None and p is not None:
            n = ((hdr >> 16) & 0x3FFF) + 2
            try:
                args["packet"] = _describe(tuple(self.read_dwords(lvl, addr, n)))
            except Exception:  # a packet past the end of memory: the CP reports it
                pass
        if log.isEnabledFor(logging.INFO):
            log.info("%s: %s", where, args.get("packet", name))
        self.packets += 1
        if error:
            self._instant(name, t, args)
            return
        self.stack.append(_Open(name, lvl, t, args, ib=(p is pk.INDIRECT_BUFFER)))

    def _pad(self, t: int) -> None:
        """A one-dword pad (a type-2 dword, or the header-only NOP): logged each, as the
        model's trace shows them, and drawn as one slice per run of pads."""
        cp = self.cp
        hdr, off, lvl = _int(cp.hdr), _int(cp.hdr_taken_off), _int(cp.level)
        if not _is_pad(hdr):
            return
        where = ("HQD1 " if self.q else "") + f"{_level_name(lvl)}+{4 * off:#06x}"  # (as the model's trace)
        if log.isEnabledFor(logging.INFO):
            log.info("%s: %s", where, _describe((hdr,)))
        if self.filler and self.filler[3] == lvl and t - self.filler[1] <= 2:
            self.filler[2] += 1
            self.filler[1] = t + 1
        else:
            self._flush_filler()
            self.filler = [t, t + 1, 1, lvl, where]

    def _close(self, t: int, why: str | None = None) -> None:
        if self.phase is not None:
            self._end_phase(t)
        o = self.stack.pop()
        if o.filler:
            if self.filler is not None:
                self.filler[1] = t
            return
        if why:
            o.args["ended_by"] = why
        if self.tl is not None:
            self.tl.span(self.track, o.name, o.start, t, o.args)

    def _close_all(self, t: int, why: str) -> None:
        while self.stack:
            self._close(t, why)
        self._flush_filler()

    def _end_phase(self, t: int) -> None:
        name, t0 = self.phase
        self.phase = None
        if self.tl is not None:
            self.tl.span(self.track, name, t0, t)

    def _flush_filler(self) -> None:
        if self.filler is None:
            return
        t0, t1, n, _, where = self.filler
        self.filler = None
        if self.tl is not None:
            self.tl.span(self.track, "pad" if n == 1 else f"pad x{n}", t0, t1, {"where": where})

    def _instant(self, name: str, t: int, args: dict | None = None) -> None:
        if self.tl is not None:
            self.tl.instant(self.track, name, t, args)

    def finish(self) -> None:
        self._close_all(self.now(), "end of run")


def _is_pad(hdr: int) -> bool:
    return hdr >> 30 == pk.PACKET_TYPE2 or hdr & 0xFFFF_FF00 == pk.NOP_PAD


@functools.lru_cache(maxsize=4096)
def _describe(words: tuple[int, ...]) -> str:
    """The disassembly of one packet (packets repeat: fences, NOPs, the same IBs)."""
    return pm4.describe(pm4.decode(words, 0))


def _level_name(level: int) -> str:
    try:
        return IbLevel(level).name
    except ValueError:
        return f"LEVEL{level}"


# ------------------------------------------------------------------------------ bursts and irq

class BusMonitor:
    """AR and AW bursts at the memory model, from handshake to last beat (reads) or to
    the write response (writes)."""

    def __init__(self, mem, timeline: Timeline, now: Callable[[], int]):
        self.mem, self.tl, self.now = mem, timeline, now
        self.reads: deque = deque()
        self.writes: deque = deque()
        self.n_reads = len(mem.arq_id)
        self.n_writes = len(mem.awq_id)
        self.bursts = 0
        self.stopped = False

    def tasks(self) -> list:
        m = self.mem
        self._ptrs = (m.arq_wp, m.arq_rp, m.awq_wp, m.bq_rp)
        self._last = [_int(h) for h in self._ptrs]
        return [_watch(h, self._wake, self) for h in self._ptrs]

    def _wake(self) -> None:
        cur = [_int(h) for h in self._ptrs]
        last = self._last
        if cur == last:
            return
        t = self.now()
        for i in range((cur[0] - last[0]) % self.n_reads):
            self.reads.append(self._entry("ar", (last[0] + i) % self.n_reads, t))
        for i in range((cur[2] - last[2]) % self.n_writes):
            self.writes.append(self._entry("aw", (last[2] + i) % self.n_writes, t))
        for _ in range((cur[1] - last[1]) % self.n_reads):
            if self.reads:
                self._emit("read", self.reads.popleft(), t)
        for _ in range((cur[3] - last[3]) % self.n_writes):
            if self.writes:
                self._emit("write", self.writes.popleft(), t)
        self._last = cur

    def _entry(self, ch: str, i: int, t: int) -> tuple:
        m = self.mem
        q = (m.arq_id, m.arq_addr, m.arq_len, m.arq_size) if ch == "ar" else \
            (m.awq_id, m.awq_addr, m.awq_len, m.awq_size)
        return (t, _int(q[0][i]), _int(q[1][i]), _int(q[2][i]), _int(q[3][i]))

    def _emit(self, kind: str, e: tuple, t: int) -> None:
        t0, ident, addr, length, size = e
        nbytes = (length + 1) << size
        track = "sdma_bus" if ident in SDMA_IDS else "dma" if ident >= DMA_ID_MIN else "bus"
        self.bursts += 1
        self.tl.span(track, f"{kind} {nbytes}B id{ident}", t0, t, {
            "addr": f"{addr:#x}", "beats": length + 1, "bytes": nbytes, "id": ident,
            "wave_time": wave_time(t0)})

    def finish(self) -> None:
        t = self.now()
        for kind, q in (("read", self.reads), ("write", self.writes)):
            while q:
                self._emit(kind + " (unfinished)", q.popleft(), t)


class IrqMonitor:
    """The irq line: one slice per high period."""

    def __init__(self, irq, timeline: Timeline, now: Callable[[], int]):
        self.irq, self.tl, self.now = irq, timeline, now
        self.high_since: int | None = None
        self.stopped = False

    def tasks(self) -> list:
        return [_watch(self.irq, self._wake, self)]

    def _wake(self) -> None:
        t = self.now()
        if _int(self.irq):
            if self.high_since is None:
                self.high_since = t
        elif self.high_since is not None:
            self.tl.span("irq", "irq line high", self.high_since, t,
                         {"wave_time": wave_time(self.high_since)})
            self.high_since = None

    def finish(self) -> None:
        if self.high_since is not None:
            self.tl.span("irq", "irq line high", self.high_since, self.now())
            self.high_since = None


class HwMonitors:
    """Start and stop the monitors for one run (from the cocotb test)."""

    def __init__(self, dut, timeline: Timeline | None, *, data_width: int = 64,
                 cache_dir: Path | None = None, mem32=None):
        from cocotb.utils import get_sim_steps, get_sim_time

        from .timeline import NS_PER_CYCLE

        steps = get_sim_steps(NS_PER_CYCLE, "ns")

        def now() -> int:
            return get_sim_time("step") // steps

        self.now = now
        self.gpu = dut.gpu
        self.mem32 = mem32
        self.monitors: list = []
        self.tasks: list = []
        which = monitors_wanted()
        self.cp = None
        cp_timeline = timeline if "cp" in which else None
        if cp_timeline is not None or log.isEnabledFor(logging.INFO):
            self.cp = CpMonitor(dut.gpu.cp, fsm_states(data_width, cache_dir), cp_timeline, now,
                                self._read if mem32 is not None else None)
            self.monitors.append(self.cp)
        if timeline is not None:
            if "sdma" in which and hasattr(dut.gpu, "sdma"):
                from .sdma_monitor import SdmaMonitor

                self.monitors.append(SdmaMonitor(dut.gpu.sdma, fsm_states(data_width, cache_dir, "sdma"),
                                                 timeline, now))
            if "bus" in which:
                self.monitors.append(BusMonitor(dut.mem, timeline, now))
            if "irq" in which:
                self.monitors.append(IrqMonitor(dut.irq, timeline, now))

    def set_memory(self, mem32) -> None:
        self.mem32 = mem32
        if self.cp is not None:
            self.cp.read_dwords = self._read

    def _read(self, level: int, addr: int, n: int) -> list[int]:
        """`n` dwords at `addr` as the CP at `level` sees them: the ring (level 0) reads
        physical memory, IBs read through their job's VMID, walked in memory as the MMU
        walks (a dword whose page does not translate raises: the CP faults on it)."""
        vmid = _int(self.gpu.cp.vmid) if level else 0
        if not vmid or not _int(getattr(self.gpu, f"vm_context_cntl_{vmid}")):
            i = addr >> 2
            return self.mem32[i:i + n].tolist()
        # (the page-table bases are a small memory in the CSR block, an entry per VMID)
        from rtl.csr import LUTRAM_ARRAYS

        def base(reg: str) -> int:  # (an entry not written since the reset reads 0)
            lsb, mem, valid = LUTRAM_ARRAYS[reg]
            if not _int(getattr(self.gpu.csr, valid)) >> vmid & 1:
                return 0
            return _int(getattr(self.gpu.csr, mem)[vmid]) << lsb
        root = (base("VM_CONTEXT_PT_BASE_HI") << 32) | (base("VM_CONTEXT_PT_BASE_LO") & ~(vm_spec.PAGE_SIZE - 1))

        def read64(a: int) -> int:
            return int(self.mem32[a >> 2]) | int(self.mem32[(a >> 2) + 1]) << 32
        out = []
        for k in range(n):
            w = vm_spec.walk(read64, root, addr + 4 * k, vm_spec.Access.FETCH)
            if w.phys is None:
                raise LookupError(f"VMID {vmid} {addr + 4 * k:#x}: {w.cause.name}")
            out.append(int(self.mem32[w.phys >> 2]))
        return out

    def start(self) -> "HwMonitors":
        import cocotb

        self.tasks = [cocotb.start_soon(c) for m in self.monitors for c in m.tasks()]
        return self

    def stop(self) -> None:
        # No Task.cancel(): a task whose trigger already fired cannot take it. The
        # monitors return at their next wake-up, or cocotb ends them with the test.
        for m in self.monitors:
            m.stopped = True
            m.finish()


def cp_probe(dut, ib_levels: int = 2) -> dict:
    """The CP's position from its registers: level, the IB stack, the packet in hand."""
    cp = dut.gpu.cp
    out = {"level": _int(cp.level), "header": _int(cp.hdr), "header_offset_dw": _int(cp.hdr_taken_off),
           "header_addr": _int(cp.hdr_addr), "ibs": []}
    try:  # the queue whose place the parser's registers hold (queue 1's while it runs it)
        out["queue"] = _int(cp.q)
    except AttributeError:
        pass
    for i in range(1, ib_levels + 1):
        try:
            out["ibs"].append({"level": i, "base": _int(getattr(cp, f"ib_base{i}")),
                               "size_dw": _int(getattr(cp, f"ib_size{i}")),
                               "pos_dw": _int(getattr(cp, f"ib_pos{i}"))})
        except AttributeError:
            break
    return out
