"""An API call's argument mistakes said for the app: Python's own TypeErrors for a wrong
keyword or too many positional arguments name the entry point the app called (Queue.write,
Timestamp.wait), what it takes and the keyword probably meant, never the function a dispatch
table points at or a count that includes the object the method is called on.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import re
from typing import Callable


def named_args(name: str) -> Callable:
    """The callable under the name `name`, its argument mistakes said as _keyword_mistake says
    them: ev.signalled(1) was Python's 'takes 1 positional argument but 2 were given' (which
    counts the event). A method that is not an API entry point takes it as it is (not seen by
    `api_hook`: an Event.signalled() loop is not a span a look); the entry points' wrappers
    (_unless_lost, _named_args) build on it."""
    def deco(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def call(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except TypeError as e:
                if (better := _keyword_mistake(name, fn, args, kwargs, e)) is None:
                    raise
            raise better
        return call
    return deco


def app_signature(fn: Callable) -> inspect.Signature:
    """`fn`'s signature as the app calls it, on its object: without `self` and the UMD's own
    `_x` arguments (help() and inspect.signature of `gpu.alloc` showed `_owner`)."""
    sig = inspect.signature(fn)
    return sig.replace(parameters=[p for p in sig.parameters.values()
                                   if p.name != "self" and not p.name.startswith("_")])


def accepted_keywords(fn: Callable) -> list[str]:
    """The arguments an app may name at a call of `fn` (its own, not self or the UMD's `_x`)."""
    return [p.name for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self" and not p.name.startswith("_")]


def unexpected_keyword(call: str, name: str, accepted: list[str]) -> TypeError:
    """`call(name=...)` names no argument of the call: Python's words, then what the call
    takes and the name probably meant (`umd.open(pool=False)`: pools)."""
    close = difflib.get_close_matches(name, accepted, n=1, cutoff=0.65)  # (not out= for timeout=)
    return TypeError(f"{call}() got an unexpected keyword argument {name!r}"
                     f"{f': did you mean {close[0]}=?' if close else ''} "
                     f"({call}() takes {', '.join(accepted) if accepted else 'no arguments'})")


def _keyword_mistake(call: str, fn: Callable, args: tuple, kwargs: dict, e: TypeError) -> TypeError | None:
    """Python's argument errors for a call of entry point `call` (the app's own mistake, not a
    TypeError from inside the call), said for the app: "f() got an unexpected keyword
    argument 'x'" as unexpected_keyword says it; "f() takes 4 positional arguments but 5 were
    given" with the counts the app sees (Python counts the object the method is called on:
    gpu.queue("copy") "takes 1 positional argument but 2 were given") and the call's
    arguments. None for any other TypeError. Python's alone said neither what the call takes
    nor, for umd.open, which open."""
    m = re.search(r"\(\) got an unexpected keyword argument '(\w+)'$", str(e))
    if (m is None or m[1] not in kwargs) and "positional argument" not in str(e):
        return None
    call = _as_called(call, args)
    try:
        sig = inspect.signature(fn)
        sig.bind(*args, **kwargs)
    except TypeError:
        if m is not None and m[1] in kwargs:
            return unexpected_keyword(call, m[1], accepted_keywords(fn))
        missing = re.search(r"\(\) (missing \d+ required (?:positional|keyword-only) arguments?: .*)$", str(e))
        if missing is not None:  # (Python's words name what is missing; the call's arguments say where each goes)
            return TypeError(f"{call}() {missing[1]}: {call}{_shown_signature(sig)}")
        return _too_many_positional(call, sig, args)
    except ValueError:  # (no signature)
        return None
    return None  # the arguments fit the call: the TypeError came from inside it


def _as_called(call: str, args: tuple) -> str:
    """`call` ("Event.wait") as the app called it: a method a subclass inherits is named by the
    object's own class (ts.wait(1, 2) is Timestamp.wait(), not Event.wait())."""
    cls, _, meth = call.rpartition(".")
    if cls and args:
        own = type(args[0])
        if own.__name__ != cls and any(c.__name__ == cls for c in own.__mro__[1:]):
            return f"{own.__name__}.{meth}"
    return call


def _too_many_positional(call: str, sig: inspect.Signature, args: tuple) -> TypeError | None:
    """More positional arguments than `call` takes, counted as the app wrote them (not the
    object the method is called on), with the call's arguments; None for another mistake
    (a missing argument: Python's words name it already)."""
    params = list(sig.parameters.values())
    given = len(args)
    if params and params[0].name == "self":  # (an api_call function: the object is args[0])
        params, given = params[1:], given - 1
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return None
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if given <= len(pos):
        return None
    least = sum(p.default is p.empty for p in pos)
    if not pos:
        takes = "no positional arguments"
    elif least == len(pos):
        takes = f"{len(pos)} positional argument{'s' * (len(pos) != 1)}"
    else:
        takes = f"from {least} to {len(pos)} positional arguments"
    return TypeError(f"{call}() takes {takes} but {given} {'was' if given == 1 else 'were'} given: "
                     f"{call}{_shown_signature(sig)}")


def _shown_signature(sig: inspect.Signature) -> str:
    """"(src, src_offset, size, *, timeout=2000000)": the arguments as the app passes them (not
    `self`, nor the UMD's own `_` ones; no annotations)."""
    params = [p.replace(annotation=p.empty) for p in sig.parameters.values()
              if p.name != "self" and not p.name.startswith("_")]
    return str(inspect.Signature(params))

