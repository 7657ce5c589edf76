"""Bulk transfers through the DMA engine (API v2): memcpy in every direction, and memset.

    device → device   Queue.copy(dst, dst_off, src, src_off, size)
    host → device     Queue.upload(dst, dst_off, data)
    device → host     Queue.download(src, src_off, size) -> numpy uint8 array
    memset            Queue.fill(buf, off, size, value)

Any byte offset and size. An empty transfer (size 0, no data: write's too) is checked as
any other (its buffer, offsets in [0, size]) and records nothing: no packet, no command
toward the flush threshold; download returns an empty array without waiting (as memcpy
of 0 bytes, POSIX's write of 0). A transfer larger than one DMA_DATA packet can move
(2^CAPS.DMA_MAX_LOG2 bytes, DevInfo.dma_max_bytes) is split into several packets.

Uploads and downloads go through GTT staging buffers, as a real runtime's do for VRAM
the CPU cannot map: the CPU fills (or reads) the staging buffer, the DMA engine moves the
bytes. A staging buffer holds at most STAGING_BYTES (a larger transfer takes several) and
is released at the next flush; the KMD keeps its memory until the job that uses it has
finished. When GTT is short an upload first flushes what the queue recorded and waits for
its own earlier work, so any size of transfer fits.

DMA_DATA packets run in the background of the CP, one after another; a copy whose source
overlaps what an earlier transfer of the same submission writes sets RAW_WAIT, so it
reads the new bytes. Packets other than DMA_DATA (fences above all) already wait for
every earlier transfer (docs/hardware.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spec import pm4, sdma

from ..args import DEFAULT_TIMEOUT, M32, _index, _timeout
from ..memory import Buffer, _own_buffer
from .flush import _finish
from .record import Queue


def _bytes_range(q: Queue, call: str, name: str, buf: Buffer, offset: Any, size: Any,
                 offset_name: str = "offset") -> tuple[int, int]:
    """(gpu address, size) of [offset, offset + size) of `buf` (arguments `name` and
    `offset_name` of `call` on queue `q`: the names its docstring gives), any byte alignment."""
    buf = _own_buffer(q.device, call, name, buf)
    offset = _index(call, offset_name, offset)
    size = _index(call, "size", size)
    for what, v in ((offset_name, offset), ("size", size)):
        if v < 0:
            raise ValueError(f"{call}: {what} must be >= 0, not {v}")
    if offset + size > buf.size:
        which = f"{name} " if call == "copy" else ""  # (the one call with two buffers says which)
        raise ValueError(f"{call}: {which}[{offset:#x}, {offset + size:#x}) is outside the {buf.size:#x}-byte buffer")
    return buf.gpu_addr + offset, size


def _need_dma(q: Queue, call: str) -> None:
    if not q.has_dma:
        # (the copy engine moves bytes too: its queue is the way when the device has one)
        other = ": a copy queue (Device.queue(engine='copy')) has the SDMA's" if q.device.dev_info.sdma_rings else ""
        raise RuntimeError(f"{call}: this device has no DMA engine (CAPS.DMA = 0){other}")


def _written(q: Queue) -> list[tuple[int, int]]:
    """Byte ranges DMA transfers of the submission being recorded write (fill, copy)."""
    if q.__dict__.get("_dma_flush") != q.flushes:  # a flush ends the submission
        q._dma_flush = q.flushes
        q._dma_written = []
    return q._dma_written


def _emit_copy(q: Queue, dst: int, src: int, size: int, label: str) -> None:
    """DMA_DATA copies of at most dma_chunk bytes; RAW_WAIT where an earlier transfer of
    this submission writes what this one reads."""
    step = q.dma_chunk
    if q.copy_engine:  # SDMA runs each packet to its end before the next: no read-after-write hazard
        for i in range(0, size, step):
            q.cmdbuf.emit(sdma.copy_linear(dst + i, src + i, min(step, size - i)), label)
        return
    raw = any(s < src + size and src < e for s, e in _written(q))
    for i in range(0, size, step):
        n = min(step, size - i)
        q.cmdbuf.emit(pm4.dma_data(dst + i, src + i, n, raw_wait=int(raw)), label)
    _written(q).append((dst, dst + size))


def queue_copy(self: Queue, dst: Buffer, dst_offset: int, src: Buffer, src_offset: int, size: int) -> None:
    """Device → device: copy `size` bytes (any alignment); source and destination must not
    overlap (as memcpy)."""
    _need_dma(self, "copy")
    d, size = _bytes_range(self, "copy", "dst", dst, dst_offset, size, "dst_offset")
    s, _ = _bytes_range(self, "copy", "src", src, src_offset, size, "src_offset")
    if s < d + size and d < s + size:  # (one buffer's two ranges: no two buffers share memory)
        s, d = s - src.gpu_addr, d - src.gpu_addr  # (offsets, as the app gave them: it named no address)
        raise ValueError(f"copy: source [{s:#x}, {s + size:#x}) and destination [{d:#x}, {d + size:#x}) of the "
                         "same buffer overlap")
    if size:
        _emit_copy(self, d, s, size, self._label("copy"))
        self._end_command()


STAGING_BYTES = 4 << 20  # the most one staging buffer holds: a larger transfer goes through several


def _staging_step(q: Queue) -> int:
    """Bytes per staging buffer: STAGING_BYTES, in whole DMA packets (the packets are the
    same as with one staging buffer)."""
    return max(q.dma_chunk, STAGING_BYTES // q.dma_chunk * q.dma_chunk)


def _staging(q: Queue, call: str, size: int) -> Buffer:
    """A GTT staging buffer of `size` bytes (never 0: empty transfers record nothing). When
    memory is short the queue first submits what it recorded, then waits for its own work
    (Queue._alloc_or_wait), as OutOfMemory's contract says: a loop of uploads larger in all
    than GTT runs, each flush letting the earlier staging buffers go."""
    buf = q._alloc_or_wait(size, f"{call}: staging buffer", may_flush=True)
    q.staging.append(buf)
    return buf


def queue_upload(self: Queue, dst: Buffer, dst_offset: int, data: Any) -> None:
    """Host → device: the CPU writes `data` (bytes or an array) into a staging buffer now,
    the DMA engine copies it to dst+dst_offset when the queue runs."""
    _need_dma(self, "upload")
    if isinstance(data, np.ndarray):
        if data.dtype.hasobject:  # (references, not bytes: numpy cannot view them as bytes)
            raise TypeError(f"upload: data must be bytes-like or a numpy array of numbers, not an array of "
                            f"{data.dtype}")
        raw = np.ascontiguousarray(data).view(np.uint8).ravel()
    else:
        try:
            view = memoryview(data)
        except TypeError:
            # (a list of ints is write()'s data: which width its numbers are is the app's to say)
            hint = (": a list of dwords is np.array(data, '<u4'), or write()'s data"
                    if isinstance(data, (list, tuple)) else "")
            raise TypeError(f"upload: data must be bytes-like or a numpy array, not {type(data).__name__}{hint}") \
                from None
        # (a strided view's bytes in order: cast() takes only a contiguous one)
        raw = np.frombuffer(view.cast("B") if view.c_contiguous else view.tobytes(), dtype=np.uint8)
    d, size = _bytes_range(self, "upload", "dst", dst, dst_offset, raw.size, "dst_offset")
    if size:
        label, step = self._label("upload"), _staging_step(self)
        for i in range(0, size, step):
            n = min(step, size - i)
            stage = _staging(self, "upload", n)
            stage.map()[:n] = raw[i:i + n]
            _emit_copy(self, d + i, stage.gpu_addr, n, label)
        self._end_command()


def queue_download(self: Queue, src: Buffer, src_offset: int, size: int, *,
                   timeout: int | None = DEFAULT_TIMEOUT) -> np.ndarray:
    """Device → host: copy `size` bytes into a staging buffer, wait for the queue, return
    a copy of the bytes, a numpy uint8 array (this flushes and waits, as any read-back does:
    Queue.finish, `timeout` in GPU cycles, None no bound, GpuTimeout when they pass).
    A download that raises before its flush submitted its copy (a GpuTimeout waiting at
    max_inflight, a ^C) takes the copy back (CmdBuf.take_back): what was recorded before it
    stays recorded, and nothing of the download runs later. One that raises after (its
    wait timed out, an earlier job failed) leaves its copy submitted: the staging buffer is
    freed, and reused only once that submission has finished (winsys/pool.py)."""
    _need_dma(self, "download")
    timeout = _timeout("download", timeout)
    s, size = _bytes_range(self, "download", "src", src, src_offset, size, "src_offset")
    if not size:
        return np.zeros(0, dtype=np.uint8)
    out = np.empty(size, dtype=np.uint8)
    label, step = self._label("download"), _staging_step(self)
    for i in range(0, size, step):  # (one staging buffer at a time: any size fits in GTT)
        n = min(step, size - i)
        # not in q.staging: the flush frees those, and this one is read after the job is done
        stage = self._alloc_or_wait(n, "download: staging buffer", may_flush=True)
        try:
            view = stage.map()
            self.cmdbuf.begin()  # (the copy of this staging buffer: what take_back takes)
            flushes, written = self.flushes, len(_written(self))
            try:
                _emit_copy(self, stage.gpu_addr, s + i, n, label)
                self.cmdbuf.command()  # (no flush at the threshold here: _finish flushes next)
                _finish(self, timeout, "download", own="copy")
            except BaseException:
                if self.flushes == flushes:  # not submitted: nothing of it may run later
                    self.cmdbuf.take_back()
                    del _written(self)[written:]
                raise
            out[i:i + n] = view[:n]
        finally:
            stage.free()
    return out


def queue_fill(self: Queue, buf: Buffer, offset: int, size: int, value: int) -> None:
    """API v2 (memset): fill `size` bytes with a 32-bit value; the byte at address a gets
    byte (a mod 4) of the value. With a DMA engine any offset and size (DMA_DATA fills,
    split at the engine's limit); without one, dword-aligned WRITE_DATA."""
    if not 0 <= (value := _index("fill", "value", value)) <= M32:
        raise ValueError(f"fill: value must fit in 32 bits, not {value:#x}")
    if self.copy_engine or self.has_dma:
        addr, size = _bytes_range(self, "fill", "buf", buf, offset, size)
    else:
        size = _index("fill", "size", size)
        if size < 0 or size & 3:  # (0 fills nothing, as with a DMA engine and on a copy queue)
            raise ValueError(f"fill: size must be a non-negative multiple of 4, not {size}")
        addr = _own_buffer(self.device, "fill", "buf", buf)._range("fill", offset, size)
    if not size:
        return  # (an empty transfer records nothing: the module's docstring)
    label = self._label("fill")
    if self.copy_engine:
        for i in range(0, size, self.dma_chunk):
            self.cmdbuf.emit(sdma.constant_fill(addr + i, value, min(self.dma_chunk, size - i)), label)
    elif self.has_dma:
        step = self.dma_chunk
        for i in range(0, size, step):
            self.cmdbuf.emit(pm4.dma_data(addr + i, value, min(step, size - i), src_sel="DATA"), label)
        _written(self).append((addr, addr + size))
    else:
        n = size // 4
        step = self.max_write_dw
        for i in range(0, n, step):
            self.cmdbuf.emit(pm4.write_data(addr + 4 * i, [value] * min(step, n - i), wr_confirm=1), label)
    self._end_command()
