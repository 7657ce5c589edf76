"""Steps of the Python campaign that run inside the scratch copy, with mutmut's own code.

Run as a script with the scratch copy as the working directory (mutmut reads its
configuration from ./pyproject.toml and keeps everything under ./mutants/):

    python _inwork.py prepare N      generate the mutants, collect the coverage map
                                     (which tests call which function) with N workers
    python _inwork.py import-hits    functions that run while the mutated modules import
    python _inwork.py list           every mutant: name, file, function, diff, exit code (JSON)
    python _inwork.py run FILE N     run the mutants named in FILE (one a line), in that
                                     order, N at a time

These helpers use mutmut 3.8's internals (pinned in pyproject.toml): `mutmut run` has no
way to generate the mutants and the map without running every mutant, and each `mutmut
run NAME...` first lists every test and runs the mutants' tests unmutated (the clean run)
and a forced failure: 30 to 100 s per call, spent again for every wave, where prepare's
coverage pass has already run every test clean. `run` skips those, and keeps our order
(waves by rank) where `mutmut run` would sort by estimated time.
"""

from __future__ import annotations

import difflib
import importlib
import json
import os
import sys
import textwrap
import threading
from pathlib import Path


def per_thread_call_stack() -> None:
    """Keep mutmut's call stack (the caller of each trampoline hit, in the coverage pass:
    MutmutCallStack) per thread in a dict, not in its ContextVar.

    Why: every trampoline sets and resets that ContextVar. On CPython before 3.12 the
    cyclic GC can run inside ContextVar.set/reset (a HAMT node allocation), and a
    finalizer that reaches a trampoline sets the same variable re-entrantly, freeing the
    HAMT the outer call is still copying (CPython gh-148891): the context then loses the
    variable (LookupError at the next reset, which fails the test and stops the coverage
    pass) or the process crashes. The UMD has such a finalizer, `weakref.finalize(device,
    submitter.stop)` for a device never closed, and tests/umd/submission/test_umd_async.py collects such
    devices; with umd/ mutated it failed the coverage pass 3 runs of 3 (and it is not
    the submission thread: the failing resets were all on the main thread). A dict keyed
    by thread id allocates nothing the GC tracks while it is updated, and a re-entrant
    set/reset pair between its two statements leaves it as it found it. Our tests run
    no asyncio, so the ContextVar's per-task stacks are not needed; mutant runs never
    touch the stack (only the coverage pass does)."""
    from mutmut.core import MutmutCallStack

    tops: dict[int, tuple] = {}
    root = (None, 0)

    def get(cls) -> tuple:
        return tops.get(threading.get_ident(), root)

    def set_(cls, value: tuple) -> tuple:
        me = threading.get_ident()
        old = tops.get(me, root)
        tops[me] = value
        return old  # the token: what reset puts back

    def reset(cls, token: tuple) -> None:
        tops[threading.get_ident()] = token

    MutmutCallStack.get, MutmutCallStack.set, MutmutCallStack.reset = (classmethod(get), classmethod(set_),
                                                                       classmethod(reset))


def prepare(workers: int) -> None:
    from mutmut.__main__ import (collect_or_load_stats, copy_also_copy_files, copy_src_dir, create_mutants,
                                 setup_source_paths, store_lines_covered_by_tests)
    from mutmut.mutation.trampoline import set_mutant_under_test
    from mutmut.utils.file_utils import walk_mutatable_files
    from mutmut.workers.isolation import get_mutant_runner

    per_thread_call_stack()  # (the coverage pass runs in a process forked from this one)
    set_mutant_under_test("mutant_generation")
    os.makedirs("mutants", exist_ok=True)
    copy_src_dir()
    copy_also_copy_files()
    setup_source_paths()
    store_lines_covered_by_tests()
    stats = create_mutants(workers)
    print(f"mutants generated: {stats.mutated} files mutated", flush=True)
    ours = 0
    for path in walk_mutatable_files():
        path = Path("mutants") / path
        text = path.read_text()
        if MUTMUT_TRAMPOLINE in text:
            path.write_text(use_our_trampoline(text))
            ours += 1
    if stats.mutated and not ours:
        raise SystemExit("prepare: no mutated module imports mutmut's trampoline as mutmut 3.8 writes it: "
                         "update _inwork.MUTMUT_TRAMPOLINE")
    collect_or_load_stats(get_mutant_runner(workers), apply_config_invalidation=True)


# The line mutmut puts at the top of every mutated module, and ours (testbench/mutate/trampoline.py):
# the same trampoline, which also keeps a name the function is given after its definition.
MUTMUT_TRAMPOLINE = "from mutmut.mutation.trampoline import wrap_in_trampoline as _mutmut_mutated, MutantDict\n"
OUR_TRAMPOLINE = "from testbench.mutate.trampoline import wrap_in_trampoline as _mutmut_mutated, MutantDict\n"


def use_our_trampoline(text: str) -> str:
    """A mutated module's text, its trampolines made by testbench/mutate/trampoline.py (umd/api.py
    renames its entry points; mutmut's trampoline ran them under the copy's name). The line
    is replaced in place, so mutmut's line index of the file still holds."""
    if text.count(MUTMUT_TRAMPOLINE) != 1:
        raise SystemExit("prepare: a mutated module does not import mutmut's trampoline once, as mutmut 3.8 "
                         "writes it: update _inwork.MUTMUT_TRAMPOLINE")
    return text.replace(MUTMUT_TRAMPOLINE, OUR_TRAMPOLINE)


def import_hits(modules: list[str]) -> None:
    """The mutated functions that run at import time (tables built from the packet table,
    the generated builders): mutmut's map charges them to whichever test ran first."""
    from mutmut.mutation.trampoline import set_mutant_under_test
    from mutmut.state import state

    per_thread_call_stack()
    sys.path.insert(0, str(Path("mutants").resolve()))
    set_mutant_under_test("stats")
    for m in modules:
        importlib.import_module(m)
    print(json.dumps(sorted(state()._stats)))


def list_mutants() -> None:
    from mutmut.mutation.data import MutantLineSpans, SourceFileMutationData
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.utils.file_utils import walk_mutatable_files
    from mutmut.utils.format_utils import orig_function_and_class_names_from_key

    out = []
    for path in walk_mutatable_files():
        m = SourceFileMutationData(path=path)
        m.load()
        spans = MutantLineSpans.load(path)
        lines = (Path("mutants") / path).read_text().splitlines() if spans else None
        for name, code in m.exit_code_by_key.items():
            func, cls = orig_function_and_class_names_from_key(name)
            func = func.rpartition(".")[-1]
            try:
                removed, added = _diff(name, func, spans, lines)
            except (AttributeError, KeyError, TypeError):  # no usable index: mutmut's own (slow) way
                diff = get_diff_for_mutant(name, path=path).splitlines()[2:]  # without the --- / +++ lines
                removed, added = [d[1:] for d in diff if d.startswith("-")], [d[1:] for d in diff if d.startswith("+")]
            out.append({"name": name, "path": str(path), "function": f"{cls}.{func}" if cls else func,
                        "removed": removed, "added": added, "exit_code": code})
    json.dump(out, sys.stdout)


def _diff(name: str, func: str, spans, lines: list[str]) -> tuple[list[str], list[str]]:
    """The lines a mutant removes and adds: its generated function against the unmutated
    copy, both read by mutmut's line index out of the mutated file read once (mutmut's
    get_diff_for_mutant rereads the file up to the function and parses both with libcst,
    per mutant: minutes for a campaign, against about a second). Both are renamed to the
    original name first, so a change in the def line reads as it does in the source."""
    from mutmut.mutation.diff_apply import generated_function_names

    orig, mutant = generated_function_names(name)
    a, b = spans.span_by_function_name[orig], spans.span_by_function_name[mutant]
    old = textwrap.dedent("\n".join(lines[a.start - 1:a.end]).replace(orig, func)).split("\n")
    new = textwrap.dedent("\n".join(lines[b.start - 1:b.end]).replace(mutant, func)).split("\n")
    diff = list(difflib.unified_diff(old, new, lineterm=""))[2:]
    return [d[1:] for d in diff if d.startswith("-")], [d[1:] for d in diff if d.startswith("+")]


def run(names_file: str, workers: int) -> None:
    """mutmut's own loop (mutmut.__main__._run) over the named mutants in the given order:
    same runner (fork server), same time limits, results saved per mutant as they come
    (mutants/<module>.meta: exit code and seconds), so a run stopped by SIGINT keeps them."""
    from math import ceil

    from mutmut.__main__ import _register_mutant_result, collect_source_file_mutation_data
    from mutmut.configuration import config
    from mutmut.mutation.trampoline import set_mutant_under_test
    from mutmut.state import state
    from mutmut.stats import load_stats
    from mutmut.utils.file_utils import setup_source_paths
    from mutmut.utils.format_utils import mangled_name_from_mutant_name
    from mutmut.workers.isolation import get_mutant_runner

    import signal

    # the campaign stops this step with SIGINT at its deadline; a shell that starts it in the
    # background (make mutate &) hands it SIGINT ignored, and Python then raises nothing
    signal.signal(signal.SIGINT, signal.default_int_handler)
    names = [n for n in Path(names_file).read_text().split() if n]
    setup_source_paths()
    if not load_stats():
        raise SystemExit("run: no mutants/mutmut-stats.json (run prepare first)")
    wanted = set(names)
    found, _ = collect_source_file_mutation_data(mutant_names=[])  # all (its filter fnmatches each pair)
    data_of = {name: m for m, name, _ in found if name in wanted}
    missing = [n for n in names if n not in data_of]
    if missing:
        raise SystemExit(f"run: {len(missing)} unknown mutants, e.g. {missing[0]}")
    set_mutant_under_test("")
    cfg = config()
    runner = get_mutant_runner(workers)
    by_name = {}
    done = 0

    def drain_one() -> None:
        nonlocal done
        _register_mutant_result(runner.wait_for_result(), by_name)
        done += 1
        if done % 50 == 0:
            print(f"run: {done} of {len(names)} done", flush=True)

    runner.startup()
    try:
        for name in names:
            m = data_of[name]
            tests = state().tests_by_mangled_function_name.get(mangled_name_from_mutant_name(name), set())
            if not tests:
                m.exit_code_by_key[name] = 33  # mutmut's "no tests"
                m.save()
                continue
            est = sum(state().duration_by_test[t] for t in tests)
            m.estimated_time_of_tests_by_mutant[name] = est
            cpu_limit = ceil((est + cfg.timeout_constant) * cfg.timeout_multiplier * 2)
            while not runner.has_capacity():
                drain_one()
            by_name[name] = m
            # fastest first, as mutmut's fork runner orders them (its fork server runs them
            # in the order given: a set's, which moves with the hash seed): a killed mutant
            # stops at its first failing test, so the quick ones should come first
            ordered = sorted(tests, key=lambda t: (state().duration_by_test[t], t))
            runner.submit(name, ordered, cpu_limit, est)
        runner.signal_work_complete()
        while runner.pending_count() > 0:
            drain_one()
    except KeyboardInterrupt:
        print("run: stopped (out of time)", flush=True)
        runner.stop_all_workers()
    except ChildProcessError:
        pass
    finally:
        runner.shutdown()
    print(f"run: {done} of {len(names)} done", flush=True)


if __name__ == "__main__":
    # Run as a script, Python puts this file's folder first on sys.path, where rtl.py,
    # scope.py, patch.py ... would hide the tree's own top-level packages of those names from
    # the tests: a test that imports `rtl` (spec/gen's docs render formal/properties.py, which
    # reads rtl.csr) got testbench/mutate/rtl.py and failed the coverage pass.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if not p or Path(p).resolve() != here]
    cmd = sys.argv[1]
    if cmd == "prepare":
        prepare(int(sys.argv[2]))
    elif cmd == "import-hits":
        import_hits(sys.argv[2:])
    elif cmd == "list":
        list_mutants()
    elif cmd == "run":
        run(sys.argv[2], int(sys.argv[3]))
    else:
        raise SystemExit(f"unknown step {cmd!r}")
