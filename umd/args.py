"""The checks of an app's arguments that every entry point shares: integers read once
(_index), flags, a wait's timeout (and its old keyword's alias), dword data in each form an
app may pass (_dwords). Each refusal is one line naming the call and the argument
(docs/architecture.md, "The UMD's API rules"); a value is read once and the plain copy
used from then on, so an app's __index__ cannot answer differently later.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from kmd_model.ioctl.copyin import shown  # (an app's value in a one-line message, never raising)

M32 = 0xFFFF_FFFF
DEFAULT_TIMEOUT = 2_000_000  # simulated cycles

def _index(call: str, name: str | None, v: Any) -> int:
    """An integer argument as a plain int, read once: callers use what this returns, never `v`
    again (an app's __index__ may answer differently the next time, or raise). operator.index
    answers an exact int (Python 3.10 on), for an int subclass too: none of its methods runs later.
    name None: `call` names the value itself (a setting: "Queue.max_inflight must be an int")."""
    who = call if name is None else f"{call}: {name}"
    if isinstance(v, bool):
        raise TypeError(f"{who} must be an int, not {shown(v)}")
    try:
        n = operator.index(v)
    except TypeError:
        raise TypeError(f"{who} must be an int, not {shown(v)}") from None
    except Exception as e:  # the app's own __index__ raised: still this call's one-line error
        raise TypeError(f"{who} must be an int, not a {type(v).__name__} whose __index__ raised "
                        f"{type(e).__name__}") from None
    if n.bit_length() > 128:  # no argument is this wide: refused before a message prints 4,000 digits
        raise ValueError(f"{who} must fit in 64 bits, not {shown(n)}")
    return n


def _flag(call: str, name: str, v: Any) -> bool:
    """A True/False argument: a bool, or numpy's (what `arr.any()` returns, as numpy's
    integers are integers to _index); not 1, "yes" or None."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise TypeError(f"{call}: {name} must be True or False, not {shown(v)}")



FOREVER = (1 << 64) - 1  # the KMD's "no bound" (amdgpu's AMDGPU_TIMEOUT_INFINITE): a wait's timeout=None


def _timeout(call: str, v: Any, name: str | None = "timeout") -> int:
    """A wait's bound in GPU cycles (None: none, FOREVER; the KMD's job timer still ends a
    job that stops making progress), checked here whatever the wait would find (an event
    already signalled too), so a bad value is the caller's error, not the kernel's EINVAL.
    Every waiting call names it `timeout` (docs/architecture.md, "The UMD's API rules"). name None: `call` is a setting (Queue.timeout)."""
    who = call if name is None else f"{call}: {name}"
    if v is None:
        return FOREVER
    if isinstance(v, bool) or not hasattr(type(v), "__index__"):
        raise TypeError(f"{who} must be an int (GPU cycles) or None, not {shown(v)}")
    v = _index(call, name, v)
    if not 0 <= v < 1 << 64:
        raise ValueError(f"{who} must be in [0, 2**64) or None, not {v}")
    return v


class _Unset:
    def __repr__(self) -> str:  # (what help() shows for the keyword's default)
        return "<not given>"


_UNSET: Any = _Unset()  # an optional keyword the caller did not pass


def _timeout_alias(call: str, timeout: Any, old: Any, old_name: str) -> Any:
    """`timeout`, or the keyword an earlier release called it (`old_name`), kept as an alias
    so apps written for it run unchanged; both at once (timeout not its default) is the
    caller's mistake."""
    if old is _UNSET:
        return timeout
    if timeout is None or timeout != DEFAULT_TIMEOUT:
        raise TypeError(f"{call}: timeout and {old_name} (its old name) both given: pass timeout only")
    return old


_BYTE_FORMATS = ("B", "c")  # a buffer of these holds bytes (bytes, bytearray, memoryview(...))


def _dwords(call: str, data: Any, name: str = "data", empty: bool = False, most: int | None = None,
            too_many: Callable[[int], None] | None = None) -> list[int]:
    """`data` (argument `name` of `call`) as dwords: an int, a list, tuple or range of them,
    an integer array (an element a dword; any buffer of typed items, array.array('I') or a
    ctypes array, is one), or bytes-like (its bytes, little-endian dwords). `empty`: none at
    all is allowed (a transfer of nothing: write's data), else refused (emit_raw's packets).
    More than `most` dwords is `too_many(count)`'s error, raised before any is converted or
    checked (a write of 10**8 dwords to a 64-byte buffer took a minute and gigabytes to say
    it did not fit)."""
    if not isinstance(data, (np.ndarray, list, tuple, range)) and not hasattr(type(data), "__index__"):
        try:
            view = memoryview(data)
        except TypeError:
            raise TypeError(f"{call}: {name} must be an int, a list of ints, an integer array or bytes-like, "
                            f"not {shown(data)}") from None
        if view.format in _BYTE_FORMATS:
            b = view.tobytes()  # (a strided view too: its bytes in order)
            if len(b) % 4 or not (b or empty):
                what = "a multiple of 4 bytes" if empty else "a non-empty multiple of 4 bytes"
                raise ValueError(f"{call}: bytes {name} must be {what}, not {len(b)}")
            if most is not None and too_many is not None and len(b) // 4 > most:
                too_many(len(b) // 4)
            return np.frombuffer(b, "<u4").tolist()
        data = np.asarray(view)  # typed items: the array rules below
    if isinstance(data, np.ndarray):
        if data.dtype.kind not in "ui":
            raise TypeError(f"{call}: {name} must be an integer array, not {data.dtype}")
        if data.dtype.itemsize == 1:
            # bytes to the app (what download() and Buffer.map() return), but an array's elements
            # are dwords here: each byte would become a dword of its own, and 4x the length
            raise TypeError(f"{call}: {name} is a {data.dtype} array, whose elements would each be a dword: "
                            f"pass {name}.tobytes() for its bytes, or {name}.astype(np.uint32) for a dword each")
        if most is not None and too_many is not None and data.size > most:
            too_many(data.size)
        words = data.ravel().tolist()
    elif isinstance(data, (list, tuple, range)):
        if most is not None and too_many is not None and len(data) > most:
            too_many(len(data))
        words = list(data)
    else:
        words = [_index(call, name, data)]
    if not words and not empty:
        raise ValueError(f"{call}: {name} is empty")
    for i, w in enumerate(words):
        words[i] = w = _index(call, f"{name}[{i}]", w)
        if not 0 <= w <= M32:
            raise ValueError(f"{call}: {name}[{i}] must fit in 32 bits, not {w:#x}")
    return words
