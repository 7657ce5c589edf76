"""Where a run's --trace and --stats-json go when they name gpucosim's own stdout or stderr
(/dev/stdout, /dev/stderr, /dev/fd/1, or the file stdout was redirected to): the run writes a
file, and the launcher copies it to the stream once the run is over.

The simulator's /dev/stdout is its log: opened there with "w", the timeline truncated the
log, and the echo lost it and the app's output before it ("timeline written to
/dev/stdout", nothing on stdout). And a /dev/stdout that is a file (`> out.txt`) was
replaced by the timeline's write-and-rename, the app's output with it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from .session import RunOptions


def is_ours(path: str) -> bool:
    """Whether `path` is this process's stdout or stderr, by any name (/dev/stdout,
    /dev/fd/2, the file `> out.txt` made): names that mean another stream in the simulator's
    process, and a file the timeline's write-and-rename would replace."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return _same(st, 1) or _same(st, 2)


def to_relay(opts: RunOptions) -> None:
    """--trace and --stats-json naming this process's stdout or stderr are written to a file,
    which this process copies to the stream after the run (relay). The simulator's /dev/stdout is its log:
    opened there with "w", the timeline truncated the log, the echo lost it and the app's
    output before it; and a /dev/stdout that is a file (`> out.txt`) was replaced, the app's
    output with it, by the timeline's write-and-rename."""
    for attr in ("trace", "stats_json"):
        v = getattr(opts, attr)
        if v and is_ours(v):
            fd, tmp = tempfile.mkstemp(prefix="gpucosim-", suffix=".json")
            os.close(fd)
            os.unlink(tmp)  # (written by the run, or not at all)
            opts.relayed[tmp] = v
            setattr(opts, attr, tmp)


def relay(opts: RunOptions) -> None:
    """Copy what the run wrote in the place of a stream to that stream, once."""
    for tmp, dest in opts.relayed.items():
        try:
            with open(tmp) as f:
                text = f.read()
        except OSError:
            continue  # (the run wrote none: it said so)
        finally:
            Path(tmp).unlink(missing_ok=True)
        try:
            st = os.stat(dest)
            ours = [s for s, fd in ((sys.stdout, 1), (sys.stderr, 2)) if _same(st, fd)]
            if ours:  # (through the stream: its buffer, and pipe_safe's handling of a reader gone)
                ours[0].write(text)
                ours[0].flush()
            else:
                with open(dest, "w") as f:
                    f.write(text)
        except OSError as e:
            print(f"gpucosim: cannot write to {dest}: {e.strerror or e}", file=sys.stderr, flush=True)


def _same(st: os.stat_result, fd: int) -> bool:
    try:
        return os.path.samestat(st, os.fstat(fd))
    except OSError:
        return False
