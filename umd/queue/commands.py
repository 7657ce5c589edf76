"""The commands a queue records of its own (the Queue entry points write, wait_mem and
emit_raw): WRITE_DATA / WAIT_REG_MEM or, on a copy queue, SDMA WRITE_LINEAR / POLL_REGMEM,
and raw dwords. Each records its packets under its call's label (Queue._label) and counts
as one command toward the flush threshold (Queue._end_command). The Queue and its flush are
in umd/queue/record.py and umd/queue/flush.py; the other recording calls in umd/events.py (signal, timestamp, wait_event)
and umd/queue/transfer.py (fill, copy, upload, download).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kmd_model.ioctl.copyin import shown
from spec import packets, pm4, sdma

from ..args import M32, _dwords, _index
from ..memory import Buffer, _own_buffer
from .flush import queue_flush
from .record import Queue

_POLL_INTERVAL = packets.WAIT_REG_MEM.field("POLL_INTERVAL")
COMPARE = {"always": "ALWAYS", "<": "LT", "<=": "LE", "==": "EQ", "!=": "NE", ">=": "GE", ">": "GT"}
_SYMBOL = {fn: sym for sym, fn in COMPARE.items()}


# -- entry points (the dispatch tables name these)

def queue_write_now(self: Queue, buf: Buffer, offset: int, data: Any) -> None:
    """API v1: write dwords through the GPU (WRITE_DATA) and submit at once (no data: nothing
    is recorded, nor submitted)."""
    calls = self.calls
    queue_write_batched(self, buf, offset, data)
    if self.calls != calls:
        queue_flush(self)


def queue_write_batched(self: Queue, buf: Buffer, offset: int, data: Any) -> None:
    """Record WRITE_DATA packets writing `data` (an int, a list of dwords, an integer array
    of dwords, or bytes-like: a multiple of 4 bytes) at buf+offset; they are submitted at
    the next flush. A uint8 array is refused (its bytes are not its elements): pass
    .tobytes() or .astype(np.uint32). No data records nothing (as every empty transfer)."""
    def too_many(n: int) -> None:  # (what the range check below says of that many)
        _own_buffer(self.device, "write", "buf", buf)._range("write", offset, 4 * n)

    words = _dwords("write", data, empty=True, most=buf.size // 4 if isinstance(buf, Buffer) else None,
                    too_many=too_many)
    addr = _own_buffer(self.device, "write", "buf", buf)._range("write", offset, 4 * len(words))
    if not words:
        return
    label = self._label("write")
    step = self.max_write_dw
    for i in range(0, len(words), step):
        chunk = words[i:i + step]
        self.cmdbuf.emit(sdma.write_linear(addr + 4 * i, chunk) if self.copy_engine
                         else pm4.write_data(addr + 4 * i, chunk, wr_confirm=1), label)
    self._end_command()


def queue_wait_mem(self: Queue, buf: Buffer, offset: int, ref: int, *, mask: int = M32,
                   compare: str = "==", poll_interval: int = 16) -> None:
    """GPU-side wait: the queue stops until (dword at buf+offset & mask) <compare> ref
    (WAIT_REG_MEM; unsigned compare: always, <, <=, ==, !=, >=, >). A wait no dword can
    end, its mask and ref deciding it alone (== a ref with bits outside mask, != 0 with
    mask 0, < 0, >= a ref above mask, > a ref at mask or above), is a ValueError: it would
    stop the queue until the KMD's job timer ended the job (a raw one, emit_raw(), runs)."""
    addr = _own_buffer(self.device, "wait_mem", "buf", buf)._range("wait_mem", offset, 4)
    fn = COMPARE.get(compare, compare) if isinstance(compare, str) else None
    if fn not in COMPARE.values():
        raise ValueError(f"wait_mem: compare must be one of {', '.join(COMPARE)}, not {shown(compare)}")
    ref, mask = (_index("wait_mem", name, v) for name, v in (("ref", ref), ("mask", mask)))
    for name, v in (("ref", ref), ("mask", mask)):
        if not 0 <= v <= M32:
            raise ValueError(f"wait_mem: {name} must fit in 32 bits, not {v:#x}")
    if (why := _never_holds(fn, ref, mask)) is not None:
        raise ValueError(f"wait_mem: (dword & {mask:#x}) {_SYMBOL[fn]} {ref:#x} can never hold ({why}): the queue "
                         "would stop there until the KMD's job timer ends the job: fix ref, mask or compare")
    top = _POLL_INTERVAL.max  # (a copy queue takes it in 16-clock units: it fits there too)
    if not 0 <= (poll_interval := _index("wait_mem", "poll_interval", poll_interval)) <= top:
        raise ValueError(f"wait_mem: poll_interval must be in [0, {top}], not {poll_interval}")
    if self.copy_engine:  # POLL_REGMEM's interval counts 16 clocks
        pkt = sdma.poll_regmem(addr, ref, mask, fn, interval=max(1, -(-poll_interval // 16)))
    else:
        pkt = pm4.wait_reg_mem(addr, ref, mask, fn, poll_interval=poll_interval)
    self.cmdbuf.emit(pkt, self._label("wait_mem"))
    self._end_command()


def _never_holds(fn: str, ref: int, mask: int) -> str | None:
    """Why (dword & mask) <fn> ref holds for no dword, or None when some dword makes it hold.
    The masked value is any of mask's subsets: 0 at least, mask at most (unsigned)."""
    if fn == "EQ" and ref & ~mask:
        return f"the masked dword never has ref's bits {ref & ~mask:#x}, outside mask"
    if fn == "NE" and mask == 0 and ref == 0:
        return "the masked dword is always 0"
    if fn == "LT" and ref == 0:
        return "no unsigned dword is below 0"
    if fn == "GE" and mask < ref:
        return f"the masked dword is at most mask, {mask:#x}"
    if fn == "GT" and mask <= ref:
        return f"the masked dword is at most mask, {mask:#x}"
    return None


def queue_emit_raw(self: Queue, dwords: Any) -> None:
    """Raw dwords, for experiments (PM4, or SDMA packets on a copy queue): the KMD's
    checker still sees a gfx queue's. They stay together, in one IB: more than one IB of the
    queue holds (`ib_size_dw` less its chaining and padding) is a ValueError. Dwords of the
    other engine (a PM4 header on a copy queue, an SDMA one on a gfx queue) are recorded as
    given, and the error they meet says so (GpuError.hint)."""
    top = self.cmdbuf.max_packet_dw  # (they stay together: one IB holds them all, or the call is refused here)

    def too_many(n: int) -> None:
        raise ValueError(f"emit_raw: {n} dwords do not fit in one IB of this queue (ib_size_dw="
                         f"{self.cmdbuf.ib_size_dw} holds at most {top} of an app's dwords beside its chaining and "
                         "padding): record them in several calls, or make the queue with a larger ib_size_dw")

    words = _dwords("emit_raw", dwords, "dwords", most=top, too_many=too_many)
    if len(words) > top:
        too_many(len(words))
    label = self._label("emit_raw")
    hint = _other_engine(self, words)
    self.cmdbuf.emit(words, label if hint is None else replace(label, hint=hint))
    self._end_command()


def _other_engine(q: Queue, words: list[int]) -> str | None:
    """What an error of emit_raw's packets should add when its first dword is no packet of the
    queue's engine but one of the other's (PM4 on a copy queue, SDMA on a gfx queue): each
    engine reads the other's header as an unknown opcode, which alone does not say why."""
    if not words:
        return None
    mine, other = (sdma, pm4) if q.copy_engine else (pm4, sdma)
    if mine.decode(words).ok:
        return None
    item = other.decode(words)
    if item.name is None:  # (a Malformed of an unknown opcode: the other engine's it is not)
        return None
    if q.copy_engine:
        return (f"its first dword {words[0]:#010x} is a PM4 {item.name} header, and a copy queue runs "
                "SDMA packets (spec.sdma's builders): emit PM4 on a gfx queue (gpu.queue())")
    return (f"its first dword {words[0]:#010x} is an SDMA {item.name} header, and a gfx queue runs "
            "PM4 packets (spec.pm4's builders): emit SDMA packets on a copy queue (gpu.queue(engine='copy'))")
