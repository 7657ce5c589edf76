"""Draw a timeline (a `gpucosim run --trace` file) as a picture: one row per track, in the
order of a request's journey, slices as bars (nested slices one step lower), instants
as ticks; the x axis is simulated time in cycles. Needs matplotlib (Agg, no display).

    gpucosim plot build/demo.json -o build/demo.png --from 1000 --to 3000
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import zlib
from pathlib import Path

from ..inputs import InputError
from .timeline import NS_PER_CYCLE, TRACKS, load


class PlotError(ValueError):
    pass


# The cycles a picture can show, --from/--to and the trace's events alike: 2**48 cycles are 32
# days at 100 MHz, and well inside a double's exact integers (a window or an event out at 1e308
# was numpy's overflow warning, or matplotlib's "Axis limits cannot be NaN or Inf" traceback).
MAX_CYCLE = 1 << 48


# What a picture may be written as. matplotlib picks the format from the suffix: with none it
# writes PATH.png (so a tool naming PATH would name a file that is not there), and with one it
# does not know it raises after the whole run. These three cover the screen, the web and print.
PICTURE_SUFFIXES = (".png", ".svg", ".pdf")


def picture_path_problem(path: str | Path) -> str | None:
    """Why a picture cannot be written to `path` as given (one line, starting with the path),
    or None. Shared by `gpucosim plot -o` and the examples' `--plot`, before they run."""
    p = Path(path)
    if p.is_dir():
        return f"{path}: a folder, not a file (give a name such as {p / 'plot.png'})"
    if p.suffix.lower() not in PICTURE_SUFFIXES:
        return f"{path}: give a .png, .svg or .pdf file"
    return None


def picture_file_problem(path: str | Path) -> str | None:
    """picture_path_problem, and the folder must be there and take a new file (an app's
    --plot, checked before its run: /proc/x.png passed, and the run ended in matplotlib's
    FileNotFoundError traceback and a crash report)."""
    if problem := picture_path_problem(path):
        return problem
    folder = Path(path).resolve().parent
    if not folder.is_dir():
        return f"{path}: no such directory {folder}"
    from testbench.argtypes import folder_problem

    problem = folder_problem(folder)
    return f"{path}: {problem}" if problem else None


def _color(name: str, cmap) -> tuple:
    key = name.split(" ", 1)[0]
    return cmap((zlib.crc32(key.encode()) % 20) / 20)


def _events(data, trace) -> tuple[dict[tuple[int, int], str], list[dict]]:
    """The thread names and the drawable events (slices, instants) of a loaded trace. A file
    that is JSON but not a trace is refused by the first event that does not fit, by index."""
    events = data.get("traceEvents") if isinstance(data, dict) else None
    if not isinstance(events, list):
        from ..checks import FIGURES_KEYS

        if isinstance(data, dict) and all(k in data for k in FIGURES_KEYS):  # (the run's other JSON output)
            raise PlotError(f"{trace}: the figures of a run (--stats-json), not a timeline: plot the file "
                            "`gpucosim run APP --trace FILE` wrote")
        raise PlotError(f"{trace}: not a Chrome trace (no traceEvents list)")
    names = {}
    evs = []
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise PlotError(f"{trace}: event {i} is not an object: {str(e)[:60]}")
        ph = e.get("ph")
        if ph == "M" and e.get("name") == "thread_name":
            name = e.get("args", {}).get("name") if isinstance(e.get("args"), dict) else None
            if not (_int(e.get("pid")) and _int(e.get("tid")) and isinstance(name, str)):
                raise PlotError(f"{trace}: event {i}: a thread_name needs integer pid, tid and args.name")
            names[(e["pid"], e["tid"])] = name
        elif ph in ("X", "i", "I"):
            need = ("ts", "dur") if ph == "X" else ("ts",)
            bad = [k for k in need if not _number(e.get(k))] + [k for k in ("pid", "tid") if not _int(e.get(k))]
            if not isinstance(e.get("name"), str):
                bad.append("name")
            if bad:
                raise PlotError(f"{trace}: event {i} ({ph!r}) lacks a valid {', '.join(bad)}")
            if ph == "X" and e["dur"] < 0:
                raise PlotError(f"{trace}: event {i} ('X') lasts {e['dur']} (a negative dur)")
            end = (e["ts"] + e.get("dur", 0)) * 1000 / NS_PER_CYCLE
            if e["ts"] < 0 or end > MAX_CYCLE:
                raise PlotError(f"{trace}: event {i} ({ph!r}) lies outside cycles 0 to {MAX_CYCLE} "
                                f"(ts {e['ts']:g} us" + (f", dur {e['dur']:g} us)" if ph == "X" else ")"))
            evs.append(e)
    return names, evs


def _cycles(c: float) -> str:
    """A cycle as the user gives one: whole cycles in full (`:g` showed 2**48 - 1 as
    2.81475e+14, the same as 2**48), a fraction as it is."""
    return str(int(c)) if c == int(c) else f"{c:g}"


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _takes_files(folder: str) -> bool:
    """A file can be made in `folder` (made and removed here): the OS answers for the write
    itself. os.access asks the permission bits, which root passes where the write still fails
    (an immutable folder, a read-only or root-squashed mount, a security module)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def _config_dir_for_matplotlib() -> None:
    """matplotlib keeps its configuration and font cache in $MPLCONFIGDIR, else
    $XDG_CONFIG_HOME/matplotlib or ~/.config/matplotlib. When that cannot be made or written
    (a read-only or missing HOME: a container, a CI user), its import printed two warnings
    ("mkdir -p failed ...", "Matplotlib created a temporary cache directory ...") and made a
    new folder in /tmp on every run. A folder of our own in the temporary directory, kept
    from run to run, serves instead, quietly; a $MPLCONFIGDIR the user set is left alone."""
    if os.environ.get("MPLCONFIGDIR"):
        return
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    home = os.path.join(base, "matplotlib")
    try:
        os.makedirs(home, exist_ok=True)
        if _takes_files(home):
            return
    except OSError:
        pass
    uid = os.getuid() if hasattr(os, "getuid") else 0
    ours = os.path.join(tempfile.gettempdir(), f"gpucosim-matplotlib-{uid}")
    try:
        os.makedirs(ours, mode=0o700, exist_ok=True)
        st = os.lstat(ours)
    except OSError:
        return  # (matplotlib's own fallback, with its warnings)
    # a shared /tmp: only a real folder of this user's, not one another user made (or a link)
    if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and _takes_files(ours):
        os.environ["MPLCONFIGDIR"] = ours


def pyplot():
    """matplotlib.pyplot on its Agg backend (files, no display), for every picture the project
    draws. $MPLBACKEND is set aside first: matplotlib reads it as it is imported, and a value it
    does not know was its ValueError traceback before the backend could be chosen. PlotError
    without matplotlib."""
    _config_dir_for_matplotlib()
    saved = os.environ.pop("MPLBACKEND", None)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError("plotting needs matplotlib: pip install matplotlib") from None
    finally:
        if saved is not None:
            os.environ["MPLBACKEND"] = saved
    return plt


def _not_json(trace: str | Path, e: json.JSONDecodeError) -> str:
    """Why `trace` is no JSON: JSON's words, or what the file is when that says more (an empty
    file and a crash report were "line 1, column 1: Expecting value")."""
    head = e.doc.lstrip()[:40]
    if not head:
        return f"{trace} is empty (plot the file `gpucosim run APP --trace FILE` wrote)"
    if head.startswith("gpucosim crash report"):
        return f"{trace} is a crash report, not a trace: its dumps are listed by gpucosim disasm {trace}"
    return f"{trace} is not a JSON trace (line {e.lineno}, column {e.colno}: {e.msg})"


def plot(trace: str | Path, output: str | Path, *, start: float | None = None, end: float | None = None,
         title: str | None = None, width: float = 14.0) -> Path:
    plt = pyplot()
    try:
        data = load(trace)
    except InputError as e:
        raise PlotError(str(e)) from None
    except OSError as e:
        raise PlotError(f"cannot read {trace}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise PlotError(_not_json(trace, e)) from None
    except UnicodeDecodeError as e:  # (it said "cannot read F: 'utf-8' codec can't decode byte 0xfc in ...")
        raise PlotError(f"{trace} is not a JSON trace: byte {e.start} is not UTF-8 text (plot the file "
                        "`gpucosim run APP --trace FILE` wrote)") from None
    except ValueError as e:
        raise PlotError(f"cannot read {trace}: {e}") from None
    names, evs = _events(data, trace)
    if not evs:
        raise PlotError(f"{trace}: no events to draw")
    us_per_cycle = NS_PER_CYCLE / 1000

    def cyc(e, key="ts"):
        return e[key] / us_per_cycle

    first = min(cyc(e) for e in evs)
    last = max(cyc(e) + e.get("dur", 0) / us_per_cycle for e in evs)
    lo = start if start is not None else first
    hi = end if end is not None else last
    # one bound given, past the run's other end: the window is empty (it was drawn as the one
    # cycle after it, an empty picture, or `--to 10` as cycles 26-27 of a run from cycle 26)
    if start is None and end is not None and end <= first:
        raise PlotError(f"{trace}: --to {_cycles(end)} is not after the run's first event (the run spans cycles "
                        f"{_cycles(first)} to {_cycles(last)})")
    if end is None and start is not None and start >= last:
        raise PlotError(f"{trace}: --from {_cycles(start)} is not before the run's end (the run spans cycles "
                        f"{_cycles(first)} to {_cycles(last)})")
    if hi <= lo:
        hi = lo + 1  # (a run of one instant)
    order = [(t.pid, t.tid) for t in TRACKS.values()]

    def place(k: tuple) -> tuple:
        pid, tid = k
        base, lane = (tid // 100, tid % 100) if tid >= 100 else (tid, 0)  # timeline._tid's lanes
        return (order.index((pid, base)), lane) if (pid, base) in order else (len(order) + pid, tid)

    tracks = sorted({(e["pid"], e["tid"]) for e in evs}, key=place)
    # nesting depth of each slice within its track
    rows: dict[tuple, list] = {k: [] for k in tracks}
    for k in tracks:
        stack: list[float] = []
        for e in sorted((e for e in evs if (e["pid"], e["tid"]) == k),
                        key=lambda e: (e["ts"], -e.get("dur", 0))):
            s = cyc(e)
            f = s + e.get("dur", 0) / us_per_cycle
            while stack and stack[-1] <= s:  # ended before this one starts: not its parent
                stack.pop()
            depth = len(stack)
            if e["ph"] == "X":
                stack.append(f)
            if f < lo or s > hi:
                continue
            rows[k].append((e, s, f, depth))
    if not any(rows.values()):  # (a window past the run, or in ns or us instead of cycles)
        raise PlotError(f"{trace}: no events between cycles {_cycles(lo)} and {_cycles(hi)} (the run spans "
                        f"cycles {_cycles(first)} to {_cycles(last)})")
    depth_of = {k: max((d for *_, d in rows[k]), default=0) + 1 for k in tracks}
    total = sum(min(depth_of[k], 4) for k in tracks)
    fig, ax = plt.subplots(figsize=(width, 0.45 * total + 1.4))
    cmap = plt.get_cmap("tab20")
    y = 0.0
    ticks, labels = [], []
    span = hi - lo
    px_per_cycle = width * 72 * 0.8 / span  # points per cycle across the axes, roughly
    n_instants = sum(1 for k in tracks for e, *_ in rows[k] if e["ph"] != "X")
    label_slot: dict[tuple, int] = {}  # instants at one place: their labels one under the other
    for k in tracks:
        h = min(depth_of[k], 4)
        top = y + h
        ticks.append(y + h / 2)
        labels.append(names.get(k, f"{k[0]}/{k[1]}"))
        for e, s, f, depth in rows[k]:
            if depth >= 4:
                continue
            row_y = y + depth
            if e["ph"] == "X":
                w = max(f - s, span / 2000)
                ax.broken_barh([(s, w)], (row_y + 0.1, 0.8), facecolors=_color(e["name"], cmap),
                               edgecolor="black", linewidth=0.3)
                if w * px_per_cycle > 3.0 * len(e["name"]) + 2:
                    ax.text(s + w / 2, row_y + 0.5, e["name"], ha="center", va="center", fontsize=5.5,
                            clip_on=True)
            else:
                ax.plot([s, s], [row_y + 0.1, row_y + 0.9], color=_color(e["name"], cmap), linewidth=1.2)
                if n_instants <= 24:  # a few: name them
                    key = (k, round(s))
                    i = label_slot[key] = label_slot.get(key, -1) + 1
                    ax.text(s, row_y + 0.3 + 0.3 * (i % 3), " " + e["name"], ha="left", va="center",
                            fontsize=5.5, clip_on=True)
        ax.axhline(y, color="0.85", linewidth=0.5)
        y = top
    ax.set_ylim(0, y)
    ax.invert_yaxis()
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlim(lo, hi)
    ax.set_xlabel(f"simulated time (cycles; 1 cycle = {NS_PER_CYCLE} ns)")
    other = data.get("otherData")
    other = other if isinstance(other, dict) else {}
    app = Path(other.get("app", "")).name  # the script's name, not where it was checked out
    ax.set_title(title or f"{app} on {other.get('backend', '?')}", fontsize=10)
    fig.tight_layout()
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130)
    plt.close(fig)
    return out
