"""The files `gpucosim disasm` and `gpucosim plot` read: bounded, and JSON that cannot
take the reader down.

A hostile or mistaken input was a hang or a traceback: `disasm /dev/zero` read without
end until memory ran out (MemoryError), and JSON nested 100,000 deep was Python's
RecursionError. Inputs are read up to MAX_BYTES (ten times the largest example's timeline,
pools.py's 26 MB) and JSON is parsed with its nesting caught; InputError says what is wrong
in one line.
"""

from __future__ import annotations

import json
import sys
from typing import Any, BinaryIO

MAX_BYTES = 256 << 20


class InputError(ValueError):
    """An input gpucosim will not read: the message starts with its name."""


def read_bytes(path: str) -> bytes:
    """The bytes of `path` ("-": stdin), at most MAX_BYTES; OSError as open() raises it."""
    if path == "-":
        return _read(sys.stdin.buffer, "stdin")
    with open(path, "rb") as f:
        return _read(f, path)


def _read(f: BinaryIO, name: str) -> bytes:
    data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise InputError(f"{name}: more than {MAX_BYTES >> 20} MiB, more than a timeline gpucosim writes "
                         "(it keeps its first million events) or any dump")
    return data


def loads(data: bytes | str, name: str) -> Any:
    """json.loads, whose errors (JSONDecodeError, UnicodeDecodeError) it raises as they are;
    InputError for nesting too deep to parse (RecursionError)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise InputError(f"{name}: JSON nested too deep to read (no gpucosim timeline is)") from None
