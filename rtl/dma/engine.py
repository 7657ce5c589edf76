"""DMA engine: copies and fills of any length and alignment over an AXI4 master.

Each accepted command is written, with what each stage needs worked out once, into
three small queues (mostly block RAM), one per stage that walks the commands in order. The
stages run as a pipeline, so the next command's reads start while the last one is
still writing (back-to-back copies keep the bus busy):

    cmd ─┬─► qA ─► AR issuer ─► memory ─► R realigner ─► data FIFO (BRAM) ─► W stream
         ├─► qX ───────────────────────────────┘              │ (W follows AW)  ▲
         └─► qW ─► AW issuer ◄── beats ready ─────────────────┘                 │
                    └──► one entry per burst ─► wq ────────────────────────────┘
                    └──► one entry per burst ─► bq ─► B: done, in command order

Its stages, each in its own file and all built into this one module (so the netlist,
its signal names and its hierarchy are those of one block):

- commands.py: the command pointers and the command queues qa, qx, qw (queue.py);
- fifo.py: the data FIFO (block RAM with a registered head);
- read.py: the AR issuer and the R realigner; write.py: the AW issuer and the W stream
  (both cut commands into bursts with burst.py);
- completion.py: B, the first error's drain and report, abort, the counters.

Every AXI VALID and address comes from a register; no queue is read through a
multiplexer of registers. Reads and writes use one ID each (`read_id`, `write_id`), so
both come back in order.

Fill: `cmd_src[31:0]` is the pattern; the byte at address a is its byte (a mod 4).

`cmd_raw_wait` holds the command's reads until every earlier command is done (its
writes answered): a copy that reads what an earlier command writes needs it
(DMA_DATA's RAW_WAIT).

Errors: the first SLVERR/DECERR (R or B) ends the failing command and every command
queued after it: nothing new is issued for them (commands queued before it still
finish normally), everything in flight is drained (R beats are dropped, bursts whose AW
went out are completed — their data is always good, as W data is only ever taken from
beats that arrived OK), then `done` pulses once for each of those commands, in order,
with `resp` and `err_addr` of the first error. `err_addr` is the address of the first
byte the engine moves in the beat that answered the error (for a write, in the burst:
B has no beat detail): the beat's bus-aligned address, or the command's src/dst if
that lies inside the beat. While draining `cmd_ready` is low; afterwards the engine is
idle and the next command runs normally. An error in an earlier command that is still
finishing takes over (its error is the one reported).

`abort` (for the CP's soft reset): the same stop-and-drain for every queued command,
but they end without `done`; `busy` stays high until the bus is quiet, then the
engine is empty and idle.

Completion: `done` (one cycle, with `resp` 0 OK / 2 SLVERR / 3 DECERR and `err_addr`)
exactly once per accepted command (unless aborted), in order, after the command's last
write response. A command's writes never overtake an earlier command's reads (its
first AW waits for the earlier commands' bursts, which wait for their data), so only
read-after-write needs `cmd_raw_wait`.
`busy` = some accepted command is not done yet; `idle` = ~busy: every write of every
accepted command has been answered (what a RELEASE_MEM after DMA work waits for).
`busy_r` = `busy`, the same value in every cycle, from a register (worked out a cycle
ahead): for a client whose decisions must not start at the pointers' compare.

Counters (pulses, for the CSR block to accumulate): `perf_rd_bytes` bus bytes of each
R beat taken, `perf_wr_bytes` the bytes of each write burst whose B answers OKAY (a burst
the bus or the MMU refuses wrote nothing), `perf_busy`.

With `vm` (behind the MMU, rtl/mmu.py): each command carries its VMID (`cmd_vmid`),
which goes out with its reads and writes in AxUSER (access DMA_READ / DMA_WRITE); the
first error's RUSER/BUSER (a fault's cause and level) comes with it as `err_user`, and
`err_write` says whether a write (B) or a read (R) answered it.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..bus import AXI4Signature
from ..mmu import REQ_USER, RESP_USER
from .commands import command_pointers, command_queues
from .completion import completion
from .fifo import data_fifo
from .read import ar_issuer, r_realigner
from .write import aw_issuer, w_stream

BYTES_WIDTH = 21  # DMA_DATA BYTE_COUNT


def _pow2(v: int) -> bool:
    return isinstance(v, int) and v >= 1 and v & (v - 1) == 0


class Pipeline(SimpleNamespace):
    """What the stages share: the engine's widths and counts, and the signals one stage
    makes that a later one reads. The stages are built in the order of the pipeline, so
    a stage finds here everything made before it."""

    def take(self, names: str) -> tuple:
        return tuple(getattr(self, n) for n in names.split())

    def give(self, **signals) -> None:
        vars(self).update(signals)


class DMAEngine(wiring.Component):
    """See the module docstring. All counts are in bus beats unless named otherwise.

    data_width: AXI data width (32, 64, 128, 256).
    max_burst_beats: longest INCR burst (power of two, 1..256).
    max_reads: read bursts in flight. max_writes: write bursts awaiting B.
    fifo_depth: data FIFO in beats (power of two, ≥ 2·max_burst_beats + 2).
    cmd_depth: commands queued (power of two, ≥ 2).
    zero_length: whether a command may have zero bytes; without, `cmd_bytes` is never 0
    and the engine does not test it (the SDMA's commands move COUNT + 1 bytes: the test of
    its 23 bits lay on sdma_32's path from the SDMA's byte count into the queues' block RAM).
    """

    def _invalid(self, message: str) -> ValueError:
        self._MustUse__used = True  # not built, so not "created but never used" either
        return ValueError(message)

    def __init__(self, data_width: int = 64, addr_width: int = 48, id_width: int = 4,
                 read_id: int = 0, write_id: int = 0, max_burst_beats: int = 16,
                 max_reads: int = 8, max_writes: int = 8, fifo_depth: int = 128,
                 cmd_depth: int = 4, bytes_width: int = BYTES_WIDTH, vm: bool = False,
                 zero_length: bool = True):
        if data_width not in (32, 64, 128, 256):
            raise self._invalid(f"DMA data width must be 32, 64, 128 or 256, not {data_width!r}")
        if not _pow2(max_burst_beats) or max_burst_beats > 256:
            raise self._invalid(f"max_burst_beats must be a power of two from 1 to 256, not {max_burst_beats!r}")
        if not _pow2(fifo_depth) or fifo_depth < 2 * max_burst_beats + 2:
            raise self._invalid(f"fifo_depth must be a power of two of at least 2 * max_burst_beats + 2 "
                                f"= {2 * max_burst_beats + 2}, not {fifo_depth!r}")
        if not _pow2(cmd_depth) or cmd_depth < 2:
            raise self._invalid(f"cmd_depth must be a power of two of at least 2, not {cmd_depth!r}")
        if not _pow2(max_writes):
            raise self._invalid(f"max_writes must be a power of two, not {max_writes!r}")
        if not isinstance(max_reads, int) or max_reads < 1:
            raise self._invalid(f"max_reads must be a positive integer, not {max_reads!r}")
        for name, v in (("read_id", read_id), ("write_id", write_id)):
            if not 0 <= v < (1 << id_width):
                raise self._invalid(f"{name} {v!r} does not fit in {id_width} ID bits")
        self.data_width = data_width
        self.addr_width = addr_width
        self.id_width = id_width
        self.read_id = read_id
        self.write_id = write_id
        self.max_burst_beats = max_burst_beats
        self.max_reads = max_reads
        self.max_writes = max_writes
        self.fifo_depth = fifo_depth
        self.cmd_depth = cmd_depth
        self.bytes_width = bytes_width
        self.vm = vm
        self.zero_length = zero_length
        nb = data_width // 8
        vm_ports = {"cmd_vmid": In(4), "err_user": Out(RESP_USER), "err_write": Out(1)} if vm else {}
        super().__init__({
            "cmd_valid": In(1), "cmd_ready": Out(1),
            "cmd_src": In(addr_width), "cmd_dst": In(addr_width), "cmd_bytes": In(bytes_width),
            "cmd_fill": In(1), "cmd_raw_wait": In(1),
            "abort": In(1),
            "done": Out(1), "resp": Out(2), "err_addr": Out(addr_width),
            "busy": Out(1), "busy_r": Out(1), "idle": Out(1),
            "perf_rd_bytes": Out(range(nb + 1)),
            "perf_wr_bytes": Out(range(min(max_burst_beats, 4096 // nb) * nb + 1)),
            "perf_busy": Out(1),
            "bus": Out(AXI4Signature(addr_width, data_width, id_width,
                                     REQ_USER.size if vm else 0, RESP_USER.size if vm else 0)),
        } | vm_ports)

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        AW = self.addr_width
        DW = self.data_width
        B = DW // 8                      # bus bytes
        lb = exact_log2(B)               # lane bits
        bnd_beats = min(self.max_burst_beats, 4096 // B)  # bursts end at bnd_beats·B boundaries
        bnd_bits = exact_log2(bnd_beats)
        cw = self.bytes_width - lb + 1   # beat counts of one command
        D = self.cmd_depth
        cpw = exact_log2(D) + 1          # command pointers carry a wrap bit
        FD = self.fifo_depth
        fw = exact_log2(FD)
        MB = self.max_burst_beats
        mbw = max(1, exact_log2(MB))
        Q = self.max_writes
        qpw = exact_log2(Q) + 1
        s = Pipeline(bus=bus, AW=AW, DW=DW, B=B, lb=lb, bnd_beats=bnd_beats, bnd_bits=bnd_bits, cw=cw,
                     D=D, cpw=cpw, FD=FD, fw=fw, MB=MB, mbw=mbw, Q=Q, qpw=qpw)
        command_pointers(m, self, s)
        command_queues(m, self, s)
        data_fifo(m, self, s)
        ar_issuer(m, self, s)
        r_realigner(m, self, s)
        aw_issuer(m, self, s)
        w_stream(m, self, s)
        completion(m, self, s)
        return m
