"""A script's traceback as its author reads it: the script's own frames and the one-line
error, without the drivers' frames inside the call that raised (the UMD's argument checks,
the KMD's ioctl dispatch, the backend's). `gpucosim run` prints an app's exception so
(gpucosim/run/app.py, session.py; its crash report keeps the rest), and so does a script
run by `python app.py`, through the excepthook installed when the script's own code
imports the KMD (`import kmd_model`, the tutorial's `kmd_model.bind(RefModel())` line),
imports the UMD or opens the GPU (install_for_script).

It is the KMD's, the lowest layer a script imports, so that a script whose first mistake
is in a KMD call (`kmd_model.bind(...)`, `kmd_model.open_render_node()`) before any
`import umd` reads one line too (it was Python's whole traceback, through bind's checks).
Only what the drivers raise for the script is trimmed: the KMD's errors (KmdError), those a
layer above adds with say_for_the_app (the UMD's UmdError and NotPermitted:
umd/tracebacks.py), an argument mistake said as TypeError or ValueError, and ^C
(KeyboardInterrupt). An exception of the script's own code is Python's traceback, whole,
as is any other exception out of the drivers (a bug of theirs: its frames are where to
look).
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from pathlib import Path
from types import TracebackType

from .uapi import KmdError

# The project's own packages: their frames are not the app's. (A one-line mistake in an API
# call was a 17-line traceback, most of it gpucosim's hooks and the UMD's argument checks;
# a GpuError came with the KMD's error it was raised from, another 20 lines of ioctl dispatch.)
_OURS = tuple(str(Path(__file__).resolve().parents[1] / d) + os.sep
              for d in ("gpucosim", "umd", "kmd_model", "testbench", "spec"))
# (what runs a script as __main__, `python -m` and gpucosim's run: not the app's frames either)
_RUNPY = frozenset({os.path.abspath(runpy.__file__), "<frozen runpy>"})


def ours(filename: str) -> bool:
    """Is `filename` (a frame's) the project's own code or runpy's, not the app's?"""
    return os.path.abspath(filename).startswith(_OURS) or filename in _RUNPY or os.path.abspath(filename) in _RUNPY


def _no_file(filename: str) -> bool:
    return filename.startswith("<") and filename.endswith(">")


def trim(te: traceback.TracebackException, seen: set[int] | None = None) -> bool:
    """Keep the app's part of `te`'s stack, and of the exceptions it was raised from; False
    when none of its frames is the app's (the drivers' inside, or gpucosim's own bug)."""
    seen = set() if seen is None else seen
    if id(te) in seen:
        return True
    seen.add(id(te))
    frames = list(te.stack)
    app = [i for i, f in enumerate(frames) if not ours(f.filename)]
    # (code without a file, a dataclass's generated __init__ ("<string>") under the drivers'
    # KmdParams, is not the app's line either: `bind(dev, job_timeout=-1)` kept bind's frames
    # down to it; it is when the app has no other, its code given as a string)
    app = [i for i in app if not _no_file(frames[i].filename)] or app
    if app:
        te.stack = traceback.StackSummary.from_list(frames[app[0]:app[-1] + 1])
    for attr in ("__cause__", "__context__"):
        inner = getattr(te, attr)
        if inner is not None and not trim(inner, seen):
            setattr(te, attr, None)  # (the driver's own error inside: a crash report has it)
    return bool(app)


def app_traceback(e: BaseException) -> str:
    """The traceback of an exception the app raised, as the app's author reads it: the
    app's frames and the exception (the whole of it, where no frame is the app's)."""
    te = traceback.TracebackException.from_exception(e)
    if not trim(te):
        return "".join(traceback.format_exception(e))
    return "".join(te.format())


# ---------------------------------------------------------------------------- python app.py

# What the drivers raise for the app, from wherever it came: the KMD's errors, ^C, and what a
# layer above adds (umd/tracebacks.py: the UMD's errors)
_SAID: list[type[BaseException]] = [KmdError, KeyboardInterrupt]


def say_for_the_app(*kinds: type[BaseException]) -> None:
    """Trim these exceptions too, from wherever they came: a layer's own errors for the app."""
    _SAID.extend(k for k in kinds if k not in _SAID)


def said_for_the_app(e: BaseException) -> bool:
    """Is `e` what the drivers raise for the app (trimmed), not a bug (shown whole)? The
    drivers' errors and ^C from wherever they came; a TypeError or ValueError only when the
    drivers raised it (their argument checks): the app's own is its bug."""
    if isinstance(e, tuple(_SAID)):
        return True
    if not isinstance(e, (TypeError, ValueError)):
        return False
    tb = e.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return ours(tb.tb_frame.f_code.co_filename)


def _excepthook(typ: type[BaseException], e: BaseException, tb: TracebackType | None) -> None:
    if _previous is None or not said_for_the_app(e):
        (_previous or sys.__excepthook__)(typ, e, tb)
        return
    try:
        text = app_traceback(e)
    except Exception:  # (an exception whose str() raises: Python's own words for it)
        _previous(typ, e, tb)
        return
    sys.stderr.write(text)
    sys.stderr.flush()


_previous = None  # the excepthook ours replaced (Python's own)


def install_for_script() -> None:
    """Install the excepthook when the code that imported the KMD or the UMD or called
    umd.open() (the first frame out of the drivers and importlib) is the script Python runs as `__main__`
    (`python app.py`, `python -m pkg.app`), and nobody else has one: an uncaught UMD error or ^C then prints as `gpucosim
    run` prints it. Not in a REPL or IPython (no script), under pytest or another program
    that imported the app (its code is not `__main__`), nor under `gpucosim run` (which
    prints the app's exceptions itself: kmd_model's binding is claimed)."""
    global _previous
    if sys.excepthook is not sys.__excepthook__:  # (ours already, or a program's own)
        return
    from .core.bind import claimed_by

    if claimed_by() is not None:
        return
    main = sys.modules.get("__main__")
    if main is None or not getattr(main, "__file__", None):  # (the REPL, python -c)
        return
    frame = sys._getframe(1)
    while frame is not None and (ours(frame.f_code.co_filename)
                                 or frame.f_code.co_filename.startswith("<frozen importlib")):
        frame = frame.f_back  # (an `import kmd_model`'s frames: importlib's)
    if frame is None or frame.f_globals is not vars(main):
        return
    _previous = sys.excepthook
    sys.excepthook = _excepthook
