"""--streams-file: hand-made streams, a pickled list, read back for a run.

`load(path, family)` returns the list or raises StreamsFileError, one line naming the
file and what is wrong with it: it cannot be read, it is not a pickle (text, empty,
truncated), it is a pickle of something else (not a list, an empty list, an item that is
not a Stream / MultiStream, a field of the wrong type), or it names a class that does not
exist here.

A pickle runs whatever callables it names, so the unpickler only finds what streams are
made of: the dataclasses and enums of the difftest's stream modules, kmd_model and spec,
numpy arrays, and a few builtins (sets, the old protocols' helpers); anything else is
refused by name, before it runs.

Files written before the difftest package was split (testbench.difftest.stream, .gen,
.malformed, .layout, .raw, .vm; now under testbench.difftest.streams) still load: their
module names are mapped to the new ones.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import io
import pickle
import types
import typing
from pathlib import Path

# module paths of the streams' classes before the package split (7c84d77) -> today's
MOVED = {f"testbench.difftest.{m}": f"testbench.difftest.streams.{m}"
         for m in ("stream", "gen", "malformed", "layout", "raw", "vm")}
# packages whose dataclasses and enums a stream may hold
DATA_PACKAGES = ("testbench.difftest.", "kmd_model.", "spec.")
# the other callables streams pickle through (protocol 0-2 name builtins and copyreg by
# their Python 2 names; numpy arrays and scalars by numpy 1's or numpy 2's paths)
PLAIN = {(m, n) for m in ("builtins", "__builtin__") for n in ("set", "frozenset", "object", "bytearray")} | {
    ("copyreg", "_reconstructor"), ("copy_reg", "_reconstructor"), ("_codecs", "encode"),
    ("numpy", "ndarray"), ("numpy", "dtype")} | {
    (f"numpy.{c}.multiarray", n) for c in ("core", "_core") for n in ("_reconstruct", "scalar")} | {
    (f"numpy.{c}.numeric", "_frombuffer") for c in ("core", "_core")}


class StreamsFileError(ValueError):
    """What is wrong with a streams file, in one line that names it."""


class _Unpickler(pickle.Unpickler):
    def __init__(self, f, path: Path):
        super().__init__(f)
        self.path = path

    def find_class(self, module: str, name: str):
        module = MOVED.get(module, module)
        if (module, name) in PLAIN:
            return super().find_class(module, name)
        where = f"{module}.{name}"
        if not module.startswith(DATA_PACKAGES) or "." in name:
            raise StreamsFileError(f"{self.path}: names {where}, which is not part of a stream (not loaded)")
        try:
            obj = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            raise StreamsFileError(f"{self.path}: names {where}, which does not exist here: re-create the file "
                                   f"from streams made by this checkout") from None
        if not (isinstance(obj, type) and (dataclasses.is_dataclass(obj) or issubclass(obj, enum.Enum))):
            raise StreamsFileError(f"{self.path}: names {where}, which is not part of a stream (not loaded)")
        return obj


def _a(name: str) -> str:
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _type_name(x) -> str:
    return type(x).__name__


def _runtime_type(hint):
    """What isinstance can check of a field's annotation (a class, a tuple of them for
    a union), or None."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        parts = [_runtime_type(a) for a in typing.get_args(hint)]
        if any(p is None for p in parts):
            return None
        return tuple(c for p in parts for c in (p if isinstance(p, tuple) else (p,)))
    want = origin or hint
    if want is float:
        return (int, float)
    return want if isinstance(want, type) and want is not typing.Any else None


def _check_fields(obj, what: str) -> str | None:
    """The first field of dataclass `obj` whose value is not of its declared type (where
    that type is a plain class or a generic of one), as "what.field is a X, not a Y"."""
    try:
        hints = typing.get_type_hints(type(obj))
    except Exception:  # an annotation that does not resolve here: nothing to check against
        hints = {}
    for f in dataclasses.fields(obj):
        if f.name not in obj.__dict__:
            return f"{what} has no field {f.name}"
        want = _runtime_type(hints.get(f.name))
        got = obj.__dict__[f.name]
        if want is not None and not isinstance(got, want):
            names = " or ".join(w.__name__ for w in want) if isinstance(want, tuple) else want.__name__
            return f"{what}.{f.name} is {_a(_type_name(got))}, not {_a(names)}"
        if dataclasses.is_dataclass(got) and not isinstance(got, type):
            why = _check_fields(got, f"{what}.{f.name}")
            if why:
                return why
    return None


def item_class(family: str) -> type:
    if family == "multi":
        from ..multi.gen import MultiStream

        return MultiStream
    from .stream import Stream

    return Stream


def load(path: str | Path, family: str = "cp") -> list:
    """The streams pickled in `path` (a list of Streams; of MultiStreams for the "multi"
    family), checked; StreamsFileError (one line) when they cannot be."""
    path = Path(path)
    want = item_class(family)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise StreamsFileError(f"{path}: cannot read it: {e.strerror or e}") from None
    if not data:
        raise StreamsFileError(f"{path}: an empty file, not a pickled list of {want.__name__}s")
    try:
        streams = _Unpickler(io.BytesIO(data), path).load()
    except StreamsFileError:
        raise
    except EOFError:
        raise StreamsFileError(f"{path}: the pickle ends early (a truncated file?)") from None
    except MemoryError:  # a length field of garbage asks for gigabytes
        raise StreamsFileError(f"{path}: not a pickled list of {want.__name__}s (it asks for more memory "
                               f"than there is)") from None
    except Exception as e:  # pickle's errors are many kinds (UnpicklingError, ValueError, KeyError ...)
        why = " ".join(str(e).split())[:200] or "no detail"
        raise StreamsFileError(f"{path}: not a pickled list of {want.__name__}s ({_type_name(e)}: {why})") from None
    if not isinstance(streams, (list, tuple)):
        raise StreamsFileError(f"{path}: a pickled {_type_name(streams)}, not a list of {want.__name__}s")
    if not streams:
        raise StreamsFileError(f"{path}: an empty list: no streams to run")
    other = item_class("cp" if family == "multi" else "multi")
    for i, s in enumerate(streams):
        if not isinstance(s, want):
            hint = (" (a multi-queue stream: run it with --multi)" if family == "cp" else
                    " (a CP stream: run it without --multi)") if isinstance(s, other) else ""
            raise StreamsFileError(f"{path}: item {i} is {_a(_type_name(s))}, not {_a(want.__name__)}{hint}")
        why = _check_fields(s, want.__name__)
        if why:
            raise StreamsFileError(f"{path}: item {i}: {why}")
    return list(streams)


def unrunnable(s, index: int, sim: str, family: str, e: Exception, where: str = "the streams file") -> tuple[dict, str]:
    """The failed record, and the one-line story, of item `index` of a streams file that
    raised `e` on the way (an action verb the driver has not, a memory setting the memory
    model has not ...): what the loader's checks cannot see."""
    why = f"item {index} of {where} cannot run: {' '.join(repr(e).split())[:300]}"
    return {"index": index, "sim": sim, "family": family, "kind": s.kind, "class": s.error_class,
            "variant": s.variant, "skipped": getattr(s, "skipped", ""), "ok": False, "outcome": "",
            "rtl_outcome": "cannot run", "bins": [], "wall": 0, "idle_after": None, "first_packet": why,
            "diffs": [why], "replay": ""}, why
