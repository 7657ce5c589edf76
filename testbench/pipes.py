"""stdout of the project's command lines when its reader goes away (`python -m
testbench.difftest --list 3 | head`, `gpucosim disasm REPORT | head`): what is printed
after that is lost, never a BrokenPipeError traceback (at a print, or in the interpreter's
flush at exit). The one place for it: gpucosim's launcher and every `python -m` CLI
(`@pipe_safe` on its main)."""

from __future__ import annotations

import functools
import os
import sys
from typing import Callable, TextIO, TypeVar

F = TypeVar("F", bound=Callable[..., object])


def reader_gone() -> None:
    """stdout's reader went away: nothing printed from now on can be shown, which is not the
    program's error. Later writes, the interpreter's flush at exit among them, go to
    /dev/null instead of raising again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ is not None else 1)
    os.close(devnull)


class PipeSafe:
    """stdout for a whole command: a closed pipe ends the output, not the run. What runs
    (an app in-process, a campaign, the simulator's echo) keeps going to its end, so the
    exit code and the reports are the run's, as if the output had been read; a shell would
    instead kill the writer with SIGPIPE part-way through."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, s: str) -> int:
        try:
            return self._stream.write(s)
        except BrokenPipeError:
            reader_gone()
            return len(s)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            reader_gone()

    def __getattr__(self, name):
        return getattr(self._stream, name)


def pipe_safe(main: F) -> F:
    """A CLI's main with stdout PipeSafe while it runs (nested: the outer one already is)."""

    @functools.wraps(main)
    def run(*args, **kwargs):
        if isinstance(sys.stdout, PipeSafe):
            return main(*args, **kwargs)
        saved, sys.stdout = sys.stdout, PipeSafe(sys.stdout)
        try:
            return main(*args, **kwargs)
        finally:
            sys.stdout = saved

    return run  # type: ignore[return-value]
