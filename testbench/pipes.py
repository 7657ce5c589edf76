"""stdout of the project's command lines when its reader goes away (`python -m
testbench.difftest --list 3 | head`, `gpucosim disasm REPORT | head`): what is printed
after that is lost, never a BrokenPipeError traceback (at a print, or in the interpreter's
flush at exit). When it cannot be written for another reason (a full disk: `gpucosim regs >
out.txt`), the command goes on too, and then says in one line that its output is incomplete
and fails (status 1, or the run's own when that is not 0); so it does when started with
stdout closed (`>&-`). Started with stderr closed (`2>&-`), its messages go to /dev/null, not
into stdout. The one place for it: gpucosim's launcher and every `python -m` CLI
(`@pipe_safe` on its main)."""

from __future__ import annotations

import errno
import functools
import io
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
        self.lost: OSError | None = None  # the first write that failed for another reason than the reader

    def write(self, s: str) -> int:
        try:
            return self._stream.write(s)
        except BrokenPipeError:
            reader_gone()
        except OSError as e:
            self._lose(e)
        return len(s)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            reader_gone()
        except OSError as e:
            self._lose(e)
        except ValueError:
            if not self._stream.closed:
                raise
            # (an app run in this process closed sys.stdout: nothing is left to flush, and the
            # command's own flush at its end was a "closed file" traceback)

    def _lose(self, e: OSError) -> None:
        """The output is incomplete (ENOSPC, EIO): remembered for the end of the command; the
        rest goes nowhere (it would fail the same way, the interpreter's flush at exit too)."""
        self.lost = self.lost or e
        reader_gone()

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _Closed(io.TextIOBase):
    """stdout when the command was started with it closed (`>&-`): every write fails as a
    write to a closed descriptor does, so PipeSafe reports the output as lost."""

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        raise OSError(errno.EBADF, "stdout is closed")


def _reopen_closed() -> None:
    """Started with stdout or stderr closed (`>&-`, `2>&-`), Python sets sys.stdout or
    sys.stderr to None: a print was AttributeError's traceback, and print(file=sys.stderr)
    with None writes to stdout. The descriptor is opened on /dev/null (a file the command or
    its simulator opens must not become its fd 1 or 2), stderr writes there, and stdout is
    _Closed."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        setattr(sys, name, _Closed() if name == "stdout" else open(fd, "w", closefd=False))


def lenient_stdout() -> None:
    """stdout writes what its encoding cannot as escapes (\\u2014), as Python's stderr does:
    with PYTHONIOENCODING=ascii (or a locale's narrow charset) a '—' in a line was
    UnicodeEncodeError, a traceback of the command, or of the app it runs."""
    if getattr(sys.stdout, "errors", None) == "strict" and hasattr(sys.stdout, "reconfigure"):
        try:
            sys.stdout.reconfigure(errors="backslashreplace")
        except (ValueError, OSError):
            pass


def _prog(main: Callable) -> str:
    """The command a CLI's messages name: its module (`testbench.difftest`, `fpga`), also when
    it runs as `python -m` (its __module__ is then `__main__`, which they said)."""
    mod = sys.modules.get(main.__module__)
    spec = getattr(mod, "__spec__", None)
    name = spec.name if spec is not None and main.__module__ == "__main__" else main.__module__
    # (formal's main is formal.run's, which `python -m formal` runs: its messages say "formal:")
    return name.removesuffix(".__main__").removesuffix(".cli").removesuffix(".run")


def _interrupt_again(previous: Callable) -> Callable:
    """sys.unraisablehook for a command's run: a ^C whose KeyboardInterrupt was raised inside
    a finalizer (a weakref.finalize or __del__ the garbage collector ran at that moment: a
    memory mapping's munmap, in every difftest stream) is one Python ignores: it printed
    "Exception ignored in: <finalize object ...>" and a traceback, and the campaign ran on
    as if no ^C had come (a 100,000-stream difftest for 48 minutes). It is raised again in
    the main thread instead (_thread.interrupt_main, as a new SIGINT), without the traceback;
    any other exception goes to the hook there was. From another thread, a moment later:
    made here, on the main thread (or while threading's start() waits for its thread), the
    new interrupt was raised inside this hook, and ignored again."""
    import _thread
    import time

    def again() -> None:
        time.sleep(0.01)  # (the main thread out of the finalizer and this hook by then)
        _thread.interrupt_main()

    def hook(unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            _thread.start_new_thread(again, ())
            return
        previous(unraisable)

    return hook


def pipe_safe(main: F) -> F:
    """A CLI's main with stdout PipeSafe while it runs (nested: the outer one already is),
    and a ^C that lands in a finalizer raised again (_interrupt_again)."""

    @functools.wraps(main)
    def run(*args, **kwargs):
        if isinstance(sys.stdout, PipeSafe):
            return main(*args, **kwargs)
        _reopen_closed()
        lenient_stdout()
        saved = sys.stdout
        sys.stdout = safe = PipeSafe(saved)
        saved_hook = sys.unraisablehook
        sys.unraisablehook = _interrupt_again(saved_hook)
        prog = _prog(main)
        try:
            code = main(*args, **kwargs)
            safe.flush()  # (what is still buffered fails now, not in the interpreter's flush at exit)
        except KeyboardInterrupt as e:
            # Ctrl-C (or a SIGTERM turned into one): the user's choice, not a crash; it was a
            # traceback of wherever the campaign or flow happened to be. 130 as a shell reports
            # SIGINT (128 + the signal of one that carries its own, gpucosim's Terminated).
            safe.flush()
            sys.stdout = saved
            print(f"{prog}: interrupted (stopped before its end)", file=sys.stderr, flush=True)
            return 128 + int(getattr(e, "signum", 2))
        finally:
            sys.stdout = saved
            sys.unraisablehook = saved_hook
        if safe.lost is not None:
            print(f"{prog}: cannot write the output to stdout: {safe.lost.strerror or safe.lost} (it is incomplete)",
                  file=sys.stderr, flush=True)
            return code or 1
        return code

    return run  # type: ignore[return-value]


def write_whole(path: str | os.PathLike, data: str | bytes) -> None:
    """Write a command's output file whole or not at all: through a temporary file beside it,
    renamed over it, so a reader, or the next run that reads it back, never sees half a file
    whatever stops the writer (^C, a full disk: then the earlier file stays as it was). Its
    temporary name is this process's and thread's: two writers of the same file never
    write into one (`a.json.tmp` was also a file of the user's beside `a.json` that a
    campaign overwrote). A symlink keeps pointing where it did, its target gets the data;
    a pipe or a device (/dev/stdout) is written into, never replaced by a file."""
    import threading
    from pathlib import Path

    p = Path(path)
    mode = "wb" if isinstance(data, bytes) else "w"
    if p.exists() and not p.is_file():
        with open(p, mode) as f:
            f.write(data)
        return
    real = p.resolve()
    tmp = real.with_name(f"{real.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        with open(tmp, mode) as f:
            f.write(data)
        os.replace(tmp, real)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
