"""The launcher's terminal: the app's output as it comes, and under it one status line
that a long run keeps up to date (a bar when the length is known: a build whose
previous duration is on record, an app that reports `gpucosim.progress(done, total)`;
otherwise a spinner with simulated cycles and ioctls).

The status line goes to stderr, only when stderr is a terminal, and only after the run
has taken a second (`GPUCOSIM_PROGRESS=0` turns it off, `=1` forces it on). It is
cleared before each line of output, so output and status never mix.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from pathlib import Path
from typing import Callable, TextIO

SPINNER = "|/-\\"
BAR = 24

# The simulator's process has one output, its log (stdout and stderr in one file, as
# cocotb's runner starts it). What the app and gpucosim write to sys.stderr there is
# written into the log between these two characters (MarkedStderr), and the echo sends it
# to stderr: the two streams stay apart, and in the order they were written. The app's own
# text may hold those characters (and ESCAPE): written as ESCAPE and a digit (escaped), or
# a '\x1e' it printed sent the rest of its stdout to stderr.
STDERR_START, STDERR_END, ESCAPE = "\x1e", "\x1f", "\x1d"  # (ASCII record, unit and group separators)
_ESCAPES = {ESCAPE: ESCAPE + "0", STDERR_START: ESCAPE + "1", STDERR_END: ESCAPE + "2"}
_UNESCAPED = {v[1]: k for k, v in _ESCAPES.items()}


def escaped(s: str) -> str:
    """`s` with the markers' characters (and ESCAPE) written as ESCAPE and a digit."""
    return s if not any(c in s for c in _ESCAPES) else "".join(_ESCAPES.get(c, c) for c in s)


class EscapedStdout:
    """sys.stdout of the simulator's process: the app's text, escaped (see `escaped`)."""

    def __init__(self, out: TextIO):
        self._out = out

    def write(self, s: str) -> int:
        self._out.write(escaped(s))
        return len(s)

    def __getattr__(self, name):  # (flush, fileno, encoding...: the real stdout's)
        return getattr(self._out, name)


class MarkedStderr:
    """sys.stderr of the simulator's process: each write goes to `out` (its stdout, the
    log) marked as stderr's, and is flushed at once, as stderr is unbuffered."""

    def __init__(self, out: TextIO, err: TextIO):
        self._out, self._err = out, err

    def write(self, s: str) -> int:
        if s:
            self._out.write(STDERR_START + escaped(s) + STDERR_END)
            self._out.flush()
        return len(s)

    def flush(self) -> None:
        self._out.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name):  # (fileno, encoding...: the real stderr's)
        return getattr(self._err, name)


def split_streams(text: str, state: tuple[bool, bool]) -> tuple[list[tuple[bool, str]], tuple[bool, bool]]:
    """`text` of the log -> [(to stderr?, piece)], unescaped, and the state the next text
    starts in: (in a stderr piece, after an ESCAPE) (a write may span two reads of the log)."""
    in_err, pending = state
    pieces: list[tuple[bool, str]] = []
    piece: list[str] = []

    def cut() -> None:
        if piece:
            pieces.append((in_err, "".join(piece)))
            piece.clear()

    for c in text:
        if pending:
            piece.append(_UNESCAPED.get(c, c))
            pending = False
        elif c == ESCAPE:
            pending = True
        elif c == (STDERR_END if in_err else STDERR_START):
            cut()
            in_err = not in_err
        else:
            piece.append(c)
    cut()
    return pieces, (in_err, pending)


def enabled(stream: TextIO) -> bool:
    env = os.environ.get("GPUCOSIM_PROGRESS", "")
    if env in ("0", "1"):
        return env == "1"
    return hasattr(stream, "isatty") and stream.isatty()


def bar(fraction: float, width: int = BAR) -> str:
    if not math.isfinite(fraction):  # (nan: int(round(nan)) raised, in the console's thread)
        fraction = 0.0
    fraction = min(max(fraction, 0.0), 1.0)
    n = int(round(fraction * width))
    return "[" + "#" * n + "." * (width - n) + f"] {100 * fraction:3.0f}%"


def status_text(label: str, st: dict | None, elapsed: float, tick: int) -> str:
    """One status line from a run's status: cycles, ioctls, the app's own progress."""
    st = st or {}
    parts = [label]
    total = st.get("total")
    if isinstance(total, (int, float)) and math.isfinite(total) and total > 0:
        parts.append(bar(st.get("done", 0) / total))
        if st.get("label"):
            parts.append(str(st["label"]))
    elif st.get("estimate"):
        parts.append(bar(min(elapsed / st["estimate"], 0.99)))
    else:
        parts.append(SPINNER[tick % len(SPINNER)])
    if "cycles" in st:
        parts.append(f"{st['cycles']:,} cycles")
    if "ioctls" in st:
        parts.append(f"{st['ioctls']} ioctl{'' if st['ioctls'] == 1 else 's'}")
    parts.append(f"{elapsed:.0f} s")
    return "  ".join(parts)


class _Guarded:
    """A stream whose writes first clear the status line (for in-process apps)."""

    def __init__(self, stream: TextIO, console: "Console"):
        self._stream, self._console = stream, console

    def write(self, s: str) -> int:
        with self._console.lock:
            self._console._clear()
            return self._stream.write(s)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class Console:
    """`with Console(label, status=fn, echo=log_path): ...run...`

    status: returns the run's status dict (or None); echo: a log file to copy to stdout
    as it grows (the simulator's), minus lines containing any of `noise`; echo_err: one to
    copy to stderr the same way (the simulator's own stderr)."""

    def __init__(self, label: str, *, status: Callable[[], dict | None] | None = None,
                 echo: Path | None = None, echo_err: Path | None = None, noise: tuple[str, ...] = (),
                 delay: float = 1.0,
                 out: TextIO | None = None, err: TextIO | None = None, guard_stdout: bool = False):
        self.label = label
        self.status = status or (lambda: None)
        self.echo = echo
        self.echo_err = echo_err
        self.noise = noise
        self.delay = delay
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.show = enabled(self.err)
        self.guard_stdout = guard_stdout and self.show
        self.lock = threading.RLock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.shown = False
        self.t0 = time.monotonic()
        self._saved = None

    def __enter__(self) -> "Console":
        for path in (self.echo, self.echo_err):
            if path is not None:
                path.unlink(missing_ok=True)
        if self.guard_stdout:
            self._saved = (sys.stdout, sys.stderr)
            sys.stdout = _Guarded(sys.stdout, self)  # type: ignore[assignment]
            sys.stderr = _Guarded(sys.stderr, self)  # type: ignore[assignment]
        if self.echo is not None or self.echo_err is not None or self.show:
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()
        with self.lock:
            self._clear()
        if self._saved is not None:
            sys.stdout, sys.stderr = self._saved

    # ------------------------------------------------------------------ the thread

    def _clear(self) -> None:
        if self.shown:
            self.err.write("\r\x1b[2K")
            self.err.flush()
            self.shown = False

    def _draw(self, tick: int) -> None:
        elapsed = time.monotonic() - self.t0
        if not self.show or elapsed < self.delay:
            return
        try:
            st = self.status()
            text = status_text(self.label, st, elapsed, tick)
        except Exception:  # (a status it cannot show: never the end of the thread, which echoes the output)
            return
        width = 120
        try:
            width = os.get_terminal_size(self.err.fileno()).columns - 1
        except (OSError, ValueError, AttributeError):
            pass
        self.err.write("\r\x1b[2K" + text[:width])
        self.err.flush()
        self.shown = True

    def _run(self) -> None:
        files: dict[Path, TextIO] = {}
        tick = 0
        state = (False, False)  # (split_streams: in a stderr piece, after an ESCAPE)

        def new_lines(path: Path | None) -> list[str]:
            if path is None:
                return []
            if path not in files and path.exists():
                files[path] = open(path, errors="replace")
            f = files.get(path)
            lines = []
            while f is not None:
                line = f.readline()
                if not line:
                    break
                if not any(n in line for n in self.noise):
                    lines.append(line)
            return lines

        try:
            while True:
                stopping = self.stop.is_set()
                lines, err_lines = new_lines(self.echo), new_lines(self.echo_err)
                with self.lock:
                    if lines or err_lines:
                        self._clear()
                        pieces, state = split_streams("".join(lines), state)
                        if err_lines:
                            pieces.append((True, "".join(err_lines)))
                        for to_err, piece in pieces:  # (each flushed: their order survives `2>&1`)
                            stream = self.err if to_err else self.out
                            stream.write(piece)
                            stream.flush()
                    if stopping:
                        break
                    if tick % 2 == 0:
                        self._draw(tick // 2)
                tick += 1
                self.stop.wait(0.05)
        finally:
            for f in files.values():
                f.close()


def file_status(path: Path) -> Callable[[], dict | None]:
    """Read the status the simulator's process writes (Session.status_tick)."""
    def read() -> dict | None:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None
    return read
