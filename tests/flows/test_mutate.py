"""The mutation campaign's fast subset, and the campaign's own parts.

`test_fast_subset` applies each mutant of testbench/mutate/fast.py to a scratch copy of
the tree and runs the test files that must kill it: a change that makes the suite blind
to one of these classes (the checker's read side, wrap-safe fences, the IH read pointer,
the timeout diagnosis, a compare on its boundary, RAW_WAIT, a packet field's position,
an address's high dword, the ioctl copy-in's plain ints, long dumps) fails here.
The whole campaign is `make mutate` (docs/verification.md).
"""

from __future__ import annotations

import json

import pytest

from testbench.mutate import survivors
from testbench.mutate.fast import FAST, FastMutant, run_one
from testbench.mutate.patch import Patch
from testbench.mutate.pymut import Mutant, choose_sample, undecorate
from testbench.mutate.report import Outcome, Report


@pytest.mark.parametrize("m", FAST, ids=lambda m: m.patch.name)
def test_fast_subset(m, tmp_path):
    killed, secs, out = run_one(m, tmp_path / "tree")
    assert killed, f"mutant {m.patch.name} ({m.patch.why}) survived {' '.join(m.tests)}:\n{out}"


def test_only_failing_tests_kill(tmp_path):
    """A mutant that breaks the import of the tests' module (a collection error, pytest's
    exit 2) is reported as not killed: a broken tree must not pass for a suite that bites."""
    m = FAST[-1]
    broken = FastMutant(Patch("import-breaks", m.patch.path, m.patch.before, m.patch.before + " +", "syntax error"),
                        m.tests)
    killed, _, out = run_one(broken, tmp_path / "tree")
    assert not killed and "SyntaxError" in out, out


def test_a_killed_mutants_tail_shows_the_failure_not_the_xdist_mark_warnings(tmp_path):
    """Mutants run pytest without xdist, so every `xdist_group` mark (the RTL tests' and
    tests/conftest.py's) was an unknown mark: `python -m testbench.mutate.rtl wait-lt-as-le`
    showed 11 of its 15 lines of output as those warnings, the assertion cut off."""
    from testbench.mutate.patch import run_pytest

    (tmp_path / "test_x.py").write_text("import pytest\n\n@pytest.mark.xdist_group('g')\n"
                                        "def test_x():\n    assert 1 == 2, 'the failure'\n")
    code, _, out = run_pytest(tmp_path, ["test_x.py"], timeout=120)
    assert code == 1 and "the failure" in out and "PytestUnknownMarkWarning" not in out, out


def test_a_patch_that_no_longer_applies_says_so(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\nx = 1\n")
    for text, n in (("x = 1\n", 2), ("y = 2\n", 0)):
        with pytest.raises(ValueError, match=rf"^mutant m: a.py holds its text {n} times, not once: the code "
                                             r"changed; update testbench/mutate"):
            Patch("m", "a.py", text, "z", "why").apply(tmp_path)


def test_every_hand_written_mutant_still_applies():
    """Each RTL mutant and each of the fast subset names text that occurs once in today's
    tree, and the mutated file still parses: a refactor that moves the code (the CP's
    pipelining moved ten of them) fails here, in make test, rather than when a `make
    mutate` is run, and no mutant is "killed" by a syntax error instead of a test."""
    from testbench.mutate.rtl import MUTANTS

    for m in [*MUTANTS, *FAST]:
        text = m.patch.check()
        compile(text.replace(m.patch.before, m.patch.after), m.patch.path, "exec")


def test_every_kmd_and_security_test_file_is_in_the_campaigns_tests():
    """The driver's and the boundary's test files are all fast model-level ones: each is in
    scope.TESTS, or its mutants' killers look missing. tests/kmd/uapi/test_kmd_amdgpu_errnos.py
    was not (4 December 2026): WAIT_CS's per-ring answers and CTX ALLOC's priority messages
    had tests the campaign never ran, and three arguments said no test could tell."""
    from pathlib import Path

    from testbench.mutate import scope

    root = Path(__file__).resolve().parents[2]
    files = sorted(str(p.relative_to(root)) for d in ("tests/kmd", "tests/kmd_sched", "tests/security")
                   for p in (root / d).rglob("test_*.py"))
    assert files and [f for f in files if f not in scope.TESTS] == []


def test_the_campaigns_test_filter_leaves_out_only_what_needs_a_simulator_or_rtl():
    """scope.TEST_FILTER is a pytest -k expression, matched against parts of each test's
    name: "not rtl" left out every test whose name holds "rtl", a UMD test "named as partly
    run" and two of a refused flush's among them (their mutants' killers looked missing)."""
    from _pytest.mark.expression import Expression

    from testbench.mutate import scope

    def kept(nodeid: str) -> bool:
        return Expression.compile(scope.TEST_FILTER).evaluate(lambda word: word in nodeid)

    for nodeid in ("tests/umd/failures/test_umd_split_flush_refused.py::test_a_call_straddling_the_refused_cs_is_named_as_partly_run",
                   "tests/model/refmodel/test_refmodel_snapshot.py::test_configure_checks_like_the_rtl_memory_model",
                   "tests/spec/packets/test_pm4.py::test_table_api_for_rtl"):
        assert kept(nodeid), nodeid
    for nodeid in ("tests/umd/test_umd_queue.py::test_x[verilator]", "tests/cosim/test_rtl_drivers.py::test_y[icarus]",
                   "tests/model/contract/test_contract_vm.py::test_vm_levels_are_the_rtls_on_the_model"):
        assert not kept(nodeid), nodeid


def test_survivor_list_is_well_formed():
    args = survivors.load()
    for a in args.entries:
        assert a.kind in survivors.KINDS and a.why.strip(), a
        assert "::" in a.key, a


def test_survivor_keys_ignore_numbering_and_spacing(tmp_path):
    k = survivors.key_of("m.py", "f", ["  if a // 4 >= n:  "], "if a  / 4 >= n:")
    assert k == "m.py::f: if a // 4 >= n: -> if a / 4 >= n:"
    toml = tmp_path / "s.toml"
    toml.write_text('[[survivor]]\nmodule = "m.py"\nfunction = "f"\nbefore = "if a // 4 >= n:"\n'
                    'after = "if a / 4 >= n:"\nkind = "equivalent"\nwhy = "a is a multiple of 4"\n'
                    '[[survivor]]\nmodule = "m.py"\nfunction = "dead"\nkind = "equivalent"\nwhy = "never called"\n')
    args = survivors.load(toml)
    assert args.find(k).reason == "equivalent: a is a multiple of 4"
    assert args.find("m.py::dead: return 1 -> return 2").why == "never called"  # the whole function
    assert args.find("m.py::f: x -> y") is None
    toml.write_text('[[survivor]]\nmodule = "m.py"\nfunction = "f"\nbefore = "x"\nkind = "maybe"\nwhy = "."\n')
    with pytest.raises(ValueError, match=r"^s.toml: survivor #1: give both before and after"):
        survivors.load(toml)


def test_undecorate_keeps_behaviour():
    src = ("import functools\n\ndef deco(tag):\n    def d(f):\n        @functools.wraps(f)\n"
           "        def call(*a):\n            return (tag, f(*a))\n        return call\n    return d\n\n"
           "class C:\n    def __init__(self):\n        self._v = 1\n\n    @property\n    def v(self):\n"
           "        return self._v\n\n    @v.setter\n    def v(self, x):\n        self._v = x\n\n"
           "    @staticmethod\n    def s():\n        return 5\n\n    @deco('m')\n    def m(self):\n"
           "        return self._v\n\n@deco('f')\n@deco('g')\ndef f(x):\n    return x + 1\n")
    out = undecorate(src)
    assert "@" not in out.replace("@staticmethod", "")
    a, b = {}, {}
    exec(compile(src, "a", "exec"), a)
    exec(compile(out, "b", "exec"), b)
    for ns in (a, b):
        c = ns["C"]()
        c.v = 7
        assert (c.v, ns["C"].s(), c.m(), ns["f"](1), ns["f"].__name__) == (7, 5, ("m", 7), ("f", ("g", 2)), "f")


def test_sample_is_stratified_and_stable():
    ms = [Mutant(f"n{i}", "m.py", f"f{i % 3}", [f"line {i}"], [f"line {i}!"]) for i in range(30)]
    for m in ms:
        m.key = survivors.key_of(m.path, m.function, m.removed, m.added)
    s1 = {m.key for m in choose_sample(ms, 0.25, 1)}
    assert len(s1) == 3 * 3  # ceil(0.25 * 10) of each function's ten
    renumbered = [Mutant(f"other{i}", m.path, m.function, m.removed, m.added, key=m.key) for i, m in enumerate(ms)]
    assert {m.key for m in choose_sample(renumbered[::-1], 0.25, 1)} == s1  # names and order do not matter
    assert {m.key for m in choose_sample(ms, 0.25, 2)} != s1
    assert len(choose_sample(ms, 1.0, 1)) == 30
    chosen = choose_sample(ms, 0.25, 1)
    assert sorted(m.rank for m in chosen) == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_a_run_goes_equally_deep_into_every_function(monkeypatch, tmp_path):
    """The chosen mutants run in waves by rank (each function's first, then each one's
    second ...), in one run: a deadline that cuts it leaves a smaller stratified sample,
    not the modules that sort last."""
    from pathlib import Path

    from testbench.mutate.pymut import PyCampaign

    ms = [Mutant(f"{mod}.f{i % 4}__mutmut_{i}", f"{mod}.py", f"f{i % 4}", [f"{i}"], [f"{i}!"])
          for mod in ("a", "z") for i in range(40)]
    for m in ms:
        m.key = survivors.key_of(m.path, m.function, m.removed, m.added)
    todo = choose_sample(ms, 0.5, 1)
    runs = []
    camp = PyCampaign(workers=2, modules=(), work=tmp_path)
    monkeypatch.setattr(camp, "_inwork_until", lambda deadline, *args: runs.append(
        (args[0], Path(args[1]).read_text().split(), args[2])))
    monkeypatch.setattr(camp, "_read_codes", lambda: None)
    camp.run(todo, deadline=1e12)
    assert len(runs) == 1 and runs[0][0] == "run" and runs[0][2] == "2"
    order = runs[0][1]
    rank = {m.name: m.rank for m in todo}
    assert sorted(order) == sorted(rank)
    assert [rank[n] for n in order] == sorted(rank[n] for n in order)  # wave after wave
    assert {n.split(".")[0] for n in order[:8]} == {"a", "z"}  # the first wave: every function of both modules
    runs.clear()
    camp.run(todo, deadline=0)  # no time left: nothing starts
    assert runs == []


def test_report_scores(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text('[[survivor]]\nmodule = "a.py"\nfunction = "f"\nkind = "equivalent"\nwhy = "dead"\n'
                    '[[survivor]]\nmodule = "a.py"\nfunction = "g"\nbefore = "x"\nafter = "y"\n'
                    'kind = "accepted"\nwhy = "text"\n')
    r = Report(survivors.load(toml))
    r.outcomes = [Outcome("python", "a.py", f"a.py::h: {i} -> {i}!", "", "killed") for i in range(7)] + [
        Outcome("python", "a.py", "a.py::f: 1 -> 2", "", "survived"),
        Outcome("python", "a.py", "a.py::g: x -> y", "", "survived"),
        Outcome("python", "a.py", "a.py::h: p -> q", "", "survived"),
        Outcome("python", "a.py", "a.py::h: r -> s", "", "skipped"),
        Outcome("rtl", "rtl/cp.py", "rtl/cp.py::m1", "", "killed")]
    d = r.as_dict()
    assert d["modules"]["a.py"]["score"] == round(7 / 9, 4)  # the equivalent one leaves the denominator
    assert d["python_score"] == round(7 / 9, 4) and d["rtl_score"] == 1.0 and d["score"] == round(8 / 10, 4)
    assert [s["reason"] for s in d["survivors"]] == ["equivalent: dead", "accepted: text", "test to add"]
    r.write(tmp_path / "m.json")
    assert json.loads((tmp_path / "m.json").read_text())["layers"]["python"]["skipped"] == 1
    assert "a.py::h: p -> q" in r.table()
    assert d["unused_arguments"] == []  # both entries match a mutant: f's by function, g's exactly
    r.outcomes = [o for o in r.outcomes if "::g: " not in o.key]
    assert r.unused_arguments() == ["a.py::g: x -> y"] and "match no mutant any more" in r.table()
    # a run of other modules (--modules b.py) says nothing of a.py's arguments
    r.outcomes = [Outcome("python", "b.py", "b.py::k: 1 -> 2", "", "killed")]
    assert r.unused_arguments() == []


# What mutmut's trampoline does with its call stack in the coverage pass, and a cycle whose
# finalizer reaches a trampoline (as umd's Device does: weakref.finalize(device,
# submitter.stop)), collected by the GC at every allocation threshold from 1 to 29.
_REENTRY = '''
import gc, sys, weakref
from mutmut.core import MutmutCallStack as S
from testbench.mutate._inwork import per_thread_call_stack
per_thread_call_stack()

def trampoline(name, fn):
    caller, depth = S.get()
    token = S.set((name, depth + 1))
    try:
        return fn()
    finally:
        S.reset(token)

class Device:
    def __init__(self):
        self.me = self
        weakref.finalize(self, trampoline, "stop", lambda: None)

wrong = 0
for threshold in range(1, 30):
    gc.set_threshold(threshold, 1, 1)
    for _ in range(1000):
        Device()
        trampoline("outer", lambda: trampoline("inner", Device))
        wrong += S.get() != (None, 0)
print("wrong", wrong)
'''


def test_the_coverage_pass_call_stack_survives_a_finalizer_reentering_it():
    """The coverage pass's call stack (testbench/mutate/_inwork.py per_thread_call_stack)
    stays balanced when the GC runs a finalizer that reaches a trampoline in the middle of
    a set or reset. mutmut's own ContextVar does not on CPython < 3.12 (gh-148891: the
    interpreter crashed on this very loop, 3 runs of 3 on 3.11, in 0.2 s), which is what
    failed the coverage pass once tests/umd/submission/test_umd_async.py was in it. Run in a child, as
    the ContextVar's failure is a crash."""
    import subprocess
    import sys

    from testbench.mutate.pymut import ROOT

    r = subprocess.run([sys.executable, "-c", _REENTRY], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout.strip()) == (0, "wrong 0"), r.stderr[-2000:]


def test_the_campaigns_script_does_not_hide_the_trees_packages(monkeypatch):
    """_inwork.py runs as a script, and Python puts a script's folder first on sys.path: there
    testbench/mutate/rtl.py hid the tree's `rtl` package from the tests of the coverage pass
    (tests/spec/test_generated.py renders docs/formal.md, whose properties read rtl.csr: an
    ImportError, and `make mutate` stopped in prepare). Its folder leaves sys.path first."""
    import runpy
    import sys
    from pathlib import Path

    import testbench.mutate._inwork as inwork

    here = str(Path(inwork.__file__).resolve().parent)
    monkeypatch.setattr(sys, "path", [here, *sys.path])
    monkeypatch.setattr(sys, "argv", [inwork.__file__, "no-such-step"])
    with pytest.raises(SystemExit, match="unknown step 'no-such-step'"):
        runpy.run_path(inwork.__file__, run_name="__main__")
    assert here not in sys.path


def test_a_renamed_entry_point_keeps_its_name_when_mutated(monkeypatch, tmp_path):
    """umd/api.py's DispatchTable renames each entry point to the call the app makes, so that
    Python's argument errors name it ("Queue.write() got an unexpected keyword argument").
    Mutated, the entry point is mutmut's trampoline, and the copy of the function it runs
    raised them under its own name (x_queue_write__mutmut_orig()): the coverage pass failed
    at tests/umd/api/test_umd_first_programs.py (`make mutate` stopped in prepare on every UMD
    queue module) and any mutant of an entry point would fail that test for its name alone.
    With the campaign's trampoline (_inwork.use_our_trampoline) the function that runs, the
    copy or a mutant, takes the name; its __name__ stays, which mutmut's coverage pass reads
    (the hit is recorded under the original function, not a crash)."""
    import re

    from mutmut.configuration import reset_config
    from mutmut.mutation.file_mutation import mutate_file_contents
    from mutmut.mutation.trampoline import set_mutant_under_test
    from mutmut.state import state

    from testbench.mutate._inwork import use_our_trampoline
    from umd.api import DispatchTable

    src = "def queue_write(self, buf, offset, data):\n    return offset + buf\n"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.mutmut]\nsource_paths = ["."]\n')
    monkeypatch.setenv("MUTANT_UNDER_TEST", "")
    reset_config()
    try:
        code = use_our_trampoline(mutate_file_contents("m.py", src).code)
    finally:
        reset_config()
    ns = {"__name__": "m"}
    exec(compile(code, "m.py", "exec"), ns)
    fn = DispatchTable(9, 1, {"Queue.write": ns["queue_write"]}).entries["Queue.write"]
    mutants = sorted(k for k in ns["mutants_x_queue_write__mutmut"] if k != "_mutmut_orig")
    assert mutants and fn(None, 1, 2, 3) == 3
    seen = set(state()._stats)
    try:
        for under_test in ("", "stats", *(f"m.{k}" for k in mutants)):
            set_mutant_under_test(under_test)
            for call, message in ((lambda: fn(None, 1, 2, value=1), "got an unexpected keyword argument 'value'"),
                                  (lambda: fn(None, 1), "missing 2 required positional arguments: 'offset' and "
                                                        "'data'")):
                with pytest.raises(TypeError, match="^" + re.escape(f"Queue.write() {message}") + "$"):
                    call()
        assert "m.x_queue_write" in state()._stats  # the coverage pass's hit, by the original's name
    finally:
        set_mutant_under_test(None)
        state()._stats.intersection_update(seen)
        reset_config()  # (the hit record read the scratch folder's configuration)
    assert (fn.__name__, fn.__qualname__) == ("write", "Queue.write")


def test_the_coverage_pass_names_the_test_that_failed_it(tmp_path):
    """The coverage pass (mutmut's stats run of every test, unmutated, `pytest -x`) runs in a
    forked child whose output mutmut drops: a failing test stopped `make mutate` in prepare
    with "failed to collect stats. runner returned 1" and no name (mutants-10, for a whole
    session). The copy's tests/conftest.py, with the campaign's hook appended, writes each
    failing report during that pass only, and the campaign's error names the first."""
    from testbench.mutate.pymut import _STATS_FAILURES_HOOK, ROOT, STATS_FAILURES, PyCampaign
    from testbench.mutate.patch import run_pytest

    work = tmp_path / "work"
    (work / "tests").mkdir(parents=True)
    report = work / STATS_FAILURES
    (work / "tests" / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text()
                                                + _STATS_FAILURES_HOOK.format(path=str(report)))
    (work / "tests" / "test_x.py").write_text("def test_ok():\n    pass\n\n"
                                              "def test_bad():\n    assert 1 == 2, 'the reason'\n")
    camp = PyCampaign(work=work)
    for under_test, written in (("", False), ("stats", True)):
        code, _, out = run_pytest(work, ["tests/test_x.py"], timeout=120,
                                  env={"MUTANT_UNDER_TEST": under_test, "PYTHONPATH": f"{work}:{ROOT}"})
        assert code == 1 and report.exists() == written, out  # the conftest's own hook still runs too
    text = report.read_text()
    assert text.startswith("tests/test_x.py::test_bad (call)\n") and "the reason" in text and "test_ok" not in text
    assert camp._failed_tests() == (": the coverage pass stops at its first failing test, tests/test_x.py::test_bad "
                                    f"(the unmutated tests must pass under the campaign; its report: {report})")
    report.unlink()
    assert camp._failed_tests() == ""


def test_the_campaign_runs_no_test_that_pins_an_apps_trimmed_traceback():
    """Under the campaign every call of a mutated function passes through mutmut's trampoline,
    whose frames umd/tracebacks.py does not count as the drivers' (they are the app's to the
    trim): a test that runs `python app.py` and pins its trimmed traceback fails there whatever
    the mutant. tests/umd/api/test_umd_script_tracebacks.py in scope.TESTS stopped every
    campaign that mutated the app's path in prepare's coverage pass (mutants-10, mutants-11);
    its apps run in subprocesses, whose calls the coverage map never records anyway."""
    import mutmut.mutation.trampoline

    from testbench.mutate import scope
    from umd.tracebacks import ours

    assert not ours(mutmut.mutation.trampoline.__file__)
    assert "tests/umd/api/test_umd_script_tracebacks.py" not in scope.TESTS
