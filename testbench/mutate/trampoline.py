"""mutmut's trampoline, keeping the name a function is given after its definition.

umd/api.py's DispatchTable renames each entry point to the call the app makes
(`fn.__qualname__ = "Queue.write"`), so that Python's argument errors say "Queue.write()
got an unexpected keyword argument 'value'" and not the name of the function behind the
entry. In a mutated module that function is mutmut's trampoline, which takes
`(*args, **kwargs)` and passes them on to a copy of the function
(`x_queue_write_batched__mutmut_orig`) or to the mutant under test: the copy, not the
renamed trampoline, raised the argument error, under its own name. The baseline failed
(tests/umd/api/test_umd_first_programs.py pins the message, so prepare's coverage pass stopped
at it), and every mutant of an entry point would have failed that test for its name alone.

Here the trampoline is mutmut's, wrapped once more: a call made after the trampoline was
renamed first gives its __qualname__ to the copy and every mutant (the function that
runs). Their __name__ stays: mutmut reads it to tell the original from a mutant (the
coverage pass's hit records, a classmethod's lookup). pymut.use_our_trampoline makes the
mutated modules import this one instead of mutmut's.
"""

from __future__ import annotations

import functools
import inspect

from mutmut.mutation.trampoline import MutantDict  # noqa: F401 (the mutated modules import it from here)
from mutmut.mutation.trampoline import wrap_in_trampoline as _mutmut_wrap


def wrap_in_trampoline(mutants_dict: dict, is_classmethod: bool = False):
    wrap = _mutmut_wrap(mutants_dict, is_classmethod)

    def mutated(decorated):
        trampoline = wrap(decorated)
        if is_classmethod or not inspect.isfunction(decorated) or (
                inspect.isgeneratorfunction(decorated) or inspect.iscoroutinefunction(decorated)
                or inspect.isasyncgenfunction(decorated)):
            return trampoline  # (nothing renames those: a plain call's frame would change what they return)
        named = [decorated.__qualname__]  # the name the copy and the mutants carry now

        @functools.wraps(trampoline)
        def renamed(*args, **kwargs):
            name = renamed.__qualname__
            if name != named[0]:  # renamed since the last call: the functions that run follow
                for fn in mutants_dict.values():
                    fn.__qualname__ = name
                named[0] = name
            return trampoline(*args, **kwargs)

        return renamed

    return mutated
