"""The Python campaign: mutmut over the modules of scope.MODULES, in a scratch copy.

Steps (each in build/mutate/py/, never in the repository's own tree):

1. copy the working tree's files there and write mutmut's configuration into the copy's
   pyproject.toml (the modules to mutate, the paired tests, one worker per core);
2. generate every mutant and the coverage map (which tests call which function), and
   give the functions that only run at import time (tables and builders generated from
   the packet table) the whole paired test set: mutmut would charge them to the one test
   that happened to import the module first;
3. choose the mutants to run: every one, or a deterministic sample (`sample` < 1): per
   function, the mutants ranked by a hash of (seed, mutation content), the first
   ceil(sample * n) of each, so every function is represented and the choice does not
   move when code elsewhere changes; mutations inside logging calls are left out;
4. run them (mutmut's runner, _inwork.py run) in waves by rank until the time budget is spent;
5. read the verdicts back, each mutant with its content key (survivors.key).

Each mutant runs in a process forked from a server that has imported only third-party
modules, so the mutated modules are imported after the mutant is switched on and
import-time code is mutated too.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import scope
from .survivors import key_of

ROOT = Path(__file__).resolve().parents[2]
INWORK = Path(__file__).with_name("_inwork.py")

# Imported by the fork server before any mutant runs: third-party code only, so that our
# modules are imported afresh (with the mutant on) in every forked test process.
PRELOAD = ("numpy", "hypothesis", "hypothesis.strategies", "pytest", "_pytest.python", "_pytest.fixtures",
           "_pytest.assertion.rewrite", "_pytest.main", "_pytest.runner", "_pytest.terminal", "mmap", "ctypes",
           "dataclasses", "enum", "errno", "logging", "collections", "struct", "array", "random", "re")

# mutmut exit codes (mutmut.stats.status_by_exit_code) and what they mean here
# (255: the test run raised, e.g. a mutated packet table failing its own check at import;
# mutmut's status table calls it "timeout", but it is mutmut's exit code -1, and fast)
KILLED_CODES = {1: "killed", 3: "killed (pytest internal error)", 2: "killed (collection error)",
                -24: "killed (timeout)", 24: "killed (timeout)", 152: "killed (timeout)",
                255: "killed (the test run raised)", 36: "killed (timeout)", -11: "killed (crash)",
                -9: "killed (crash)"}
TIMEOUT_CODES = {-24, 24, 152, 36}
SURVIVED_CODES = {0: "survived", 33: "survived (no test calls it)", 5: "survived (no test calls it)"}


@dataclass
class Mutant:
    name: str  # mutmut's name (numbered per function: changes when the code does)
    path: str
    function: str
    removed: list[str]
    added: list[str]
    exit_code: int | None = None
    key: str = ""  # survivors.key_of: stable across edits elsewhere
    logging: bool = False  # every changed line lies in a logging call
    chosen: bool = False
    rank: int = 0  # its place in its function's sample (choose_sample): the order it runs in

    @property
    def module(self) -> str:
        return self.path

    @property
    def verdict(self) -> str:
        if self.exit_code is None:
            return "not run"
        if self.exit_code in KILLED_CODES:
            return "killed"
        if self.exit_code in SURVIVED_CODES:
            return "survived"
        return "killed"  # anything else the test run did not like (mutmut: "suspicious")

    def diff(self) -> str:
        return "\n".join([f"-{line}" for line in self.removed] + [f"+{line}" for line in self.added])


@dataclass
class PyCampaign:
    work: Path = ROOT / "build" / "mutate" / "py"
    workers: int = 2
    modules: tuple[str, ...] = scope.MODULES
    tests: tuple[str, ...] = scope.TESTS
    log: Path | None = None
    mutants: list[Mutant] = field(default_factory=list)
    seconds: dict = field(default_factory=dict)

    # ------------------------------------------------------------------ 1. the scratch copy

    def prepare(self) -> None:
        t0 = time.monotonic()
        if self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True)
        for rel in _tree_files():
            dst = self.work / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dst)
        for rel in self.modules:  # let mutmut mutate decorated functions too (see undecorate)
            f = self.work / rel
            f.write_text(undecorate(f.read_text()))
        (self.work / "mutate_preload.txt").write_text("\n".join(PRELOAD) + "\n")
        with open(self.work / "pyproject.toml", "a") as f:
            f.write("\n" + _mutmut_config(self.modules, self.tests))
        # Hypothesis: the same examples for every mutant, and no example database that
        # would let one mutant's failures steer the next one's run
        with open(self.work / "tests" / "conftest.py", "a") as f:
            f.write("\n\nimport hypothesis as _h\n"
                    "_h.settings.register_profile('mutate', derandomize=True, database=None)\n"
                    "_h.settings.load_profile('mutate')\n")
            f.write(_STATS_FAILURES_HOOK.format(path=str(self.work / STATS_FAILURES)))
        t1 = time.monotonic()
        self._inwork("prepare", str(self.workers))
        t2 = time.monotonic()
        self._fix_import_time_map()
        subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", str(self.workers), "mutants"], cwd=self.work,
                       env=_env(), check=True, stdout=subprocess.DEVNULL)
        t3 = time.monotonic()
        self.mutants = self._list()
        self.seconds.update(copy=round(t1 - t0, 1), generate_and_map=round(t2 - t1, 1), compile=round(t3 - t2, 1),
                            list=round(time.monotonic() - t3, 1), prepare=round(time.monotonic() - t0, 1))

    def load(self) -> None:
        """The mutants of an earlier prepare(), with their verdicts so far."""
        rows = json.loads((self.work / "mutants.json").read_text())
        self.mutants = [Mutant(**r) for r in rows]
        self._read_codes()

    def _fix_import_time_map(self) -> None:
        mods = [m[:-3].replace("/", ".") for m in self.modules]
        hits = json.loads(self._inwork("import-hits", *mods, capture=True))
        stats_file = self.work / "mutants" / "mutmut-stats.json"
        stats = json.loads(stats_file.read_text())
        every = sorted(stats["duration_by_test"])
        for fn in hits:
            stats["tests_by_mangled_function_name"][fn] = every
        stats_file.write_text(json.dumps(stats, indent=1))

    def _list(self) -> list[Mutant]:
        """Every mutant with its diff (slow: mutmut parses each one; cached in mutants.json)."""
        rows = json.loads(self._inwork("list", capture=True))
        out = [Mutant(**r) for r in rows]
        seen: dict[str, int] = {}
        for m in sorted(out, key=lambda m: _natural(m.name)):
            k = key_of(m.path, m.function, m.removed, m.added)
            seen[k] = seen.get(k, 0) + 1
            m.key = k if seen[k] == 1 else f"{k} #{seen[k]}"  # the same change twice in one function
        _mark_logging(out)
        (self.work / "mutants.json").write_text(json.dumps([m.__dict__ for m in out]))
        return out

    def _read_codes(self) -> None:
        """Exit codes from mutmut's result files (mutants/<module>.meta)."""
        codes = {}
        for path in {m.path for m in self.mutants}:
            meta = self.work / "mutants" / f"{path}.meta"
            codes.update(json.loads(meta.read_text())["exit_code_by_key"])
        for m in self.mutants:
            m.exit_code = codes.get(m.name)

    # ------------------------------------------------------------------ 3. the sample

    def choose(self, sample: float, seed: int, skip_keys: set[str] = frozenset()) -> list[Mutant]:
        """The sample (choose_sample), less the mutants whose key is in `skip_keys`."""
        chosen = choose_sample(self.mutants, sample, seed)
        for m in chosen:
            m.chosen = True
        return [m for m in chosen if m.key not in skip_keys]

    # ------------------------------------------------------------------ 4. running

    def run(self, todo: list[Mutant], deadline: float) -> None:
        """Run `todo` until `deadline` (monotonic), in waves by rank: every function's first
        sampled mutant, then every function's second, and so on, in one process (_inwork.py
        run: mutmut's runner without the clean run `mutmut run` repeats per call). A run the
        deadline cuts short has then gone equally deep into every function (what it ran is
        a smaller stratified sample, reported as such), where running module by module
        would leave whole modules out."""
        t0 = time.monotonic()
        todo = sorted(todo, key=lambda m: (m.rank, _natural(m.name)))
        names = self.work / "run_names.txt"
        names.write_text("".join(m.name + "\n" for m in todo))
        if todo and deadline - time.monotonic() >= 60:
            self._inwork_until(deadline, "run", str(names), str(self.workers))
        self.seconds["run"] = round(time.monotonic() - t0, 1)
        self._read_codes()

    def _inwork_until(self, deadline: float, *args: str) -> None:
        """An _inwork.py step stopped by SIGINT at `deadline` (it stops its workers and keeps
        the verdicts so far), killed with its process group if it does not end 30 s later."""
        with open(self._log_path(), "a") as log:
            p = subprocess.Popen([sys.executable, str(INWORK), *args], cwd=self.work, stdout=log,
                                 stderr=subprocess.STDOUT, env=_env(), start_new_session=True)
            try:
                p.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGINT)  # the step itself, not its test processes
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        if p.returncode not in (0, -signal.SIGINT, -signal.SIGKILL):
            raise RuntimeError(f"step {args[0]!r} failed (exit {p.returncode}); see {self._log_path()}")

    # ------------------------------------------------------------------ helpers

    def _log_path(self) -> Path:
        return self.log or self.work / "mutmut.log"

    def _inwork(self, *args: str, capture: bool = False) -> str:
        with open(self._log_path(), "a") as log:
            r = subprocess.run([sys.executable, str(INWORK), *args], cwd=self.work, env=_env(), text=True,
                               stdout=subprocess.PIPE if capture else log, stderr=log)
        if r.returncode:
            raise RuntimeError(f"step {args[0]!r} failed (exit {r.returncode}){self._failed_tests()}; "
                               f"see {self._log_path()}")
        return r.stdout or ""

    def _failed_tests(self) -> str:
        """What the coverage pass's failing test was (the _STATS_FAILURES_HOOK's file), or ''."""
        try:
            text = (self.work / STATS_FAILURES).read_text()
        except OSError:
            return ""
        names = [ln.split(" (")[0] for ln in text.splitlines() if ln.startswith("tests/") and ln.endswith(")")]
        if not names:
            return ""
        return (f": the coverage pass stops at its first failing test, {names[0]} (the unmutated tests must "
                f"pass under the campaign; its report: {self.work / STATS_FAILURES})")


# The coverage pass (mutmut's stats run: every test, unmutated, `pytest -x`) stops at its first
# failure, and runs in a forked child whose captured output mutmut drops: the log said only
# "failed to collect stats. runner returned 1", and a failing test went unnamed for a session
# (mutants-10). The copy's tests/conftest.py gets this hook, which writes each failing report
# to STATS_FAILURES in the scratch copy (appended last: it wraps the conftest's own hook).
STATS_FAILURES = "stats_failures.txt"
_STATS_FAILURES_HOOK = """

_mutate_logreport = pytest_runtest_logreport


def pytest_runtest_logreport(report) -> None:
    _mutate_logreport(report)
    if report.failed and os.environ.get("MUTANT_UNDER_TEST") == "stats":
        with open({path!r}, "a") as f:
            f.write(f"{{report.nodeid}} ({{report.when}})\\n{{report.longreprtext[-4000:]}}\\n\\n")
"""


def choose_sample(mutants: list[Mutant], sample: float, seed: int) -> list[Mutant]:
    """Per function, the first ceil(sample * n) of its n mutants ranked by sha256(seed, key);
    mutants in logging calls are left out. Stratified, so every function is represented;
    keyed by content, so the choice in one function does not move when code elsewhere
    (or mutmut's numbering) changes."""
    by_fn: dict[tuple[str, str], list[Mutant]] = {}
    for m in mutants:
        if not m.logging:
            by_fn.setdefault((m.path, m.function), []).append(m)
    chosen = []
    for ms in by_fn.values():
        ms = sorted(ms, key=lambda m: hashlib.sha256(f"{seed}|{m.key}".encode()).hexdigest())
        ms = ms if sample >= 1 else ms[:math.ceil(sample * len(ms))]
        for rank, m in enumerate(ms):
            m.rank = rank
        chosen += ms
    return chosen


def undecorate(src: str) -> str:
    """The same module with every decorator applied by an assignment after its function:

        @ioctl_def(Request.CS)             def cs(kmd, file, a):
        def cs(kmd, file, a):        ->        ...
            ...                            cs = ioctl_def(Request.CS)(cs)

    mutmut (3.8) leaves decorated functions alone (its trampoline cannot wrap them), which
    would leave the ioctl handlers, properties and API entry points unmutated. A setter
    (`@value.setter def value`) is renamed `value__setter` so the property stays reachable.
    Only @staticmethod / @classmethod alone stay (mutmut handles those). Run on the
    scratch copy only; the lines mutmut mutates are the original ones."""
    while True:
        tree = ast.parse(src)
        todo = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                and n.decorator_list and not (len(n.decorator_list) == 1
                                              and isinstance(n.decorator_list[0], ast.Name)
                                              and n.decorator_list[0].id in ("staticmethod", "classmethod"))]
        if not todo:
            return src
        n = max(todo, key=lambda n: n.lineno)
        lines = src.splitlines(keepends=True)
        first = min(d.lineno for d in n.decorator_list) - 1  # 0-based: the first decorator line
        def_at = first + next(i for i, ln in enumerate(lines[first:]) if ln.lstrip().startswith(("def ", "async def ")))
        indent = lines[def_at][:len(lines[def_at]) - len(lines[def_at].lstrip())]
        name, target = n.name, n.name
        last = n.decorator_list[-1]
        if isinstance(last, ast.Attribute) and isinstance(last.value, ast.Name) and last.value.id == n.name:
            target = f"{n.name}__{last.attr}"  # @value.setter: the def must not hide the property
            lines[def_at] = lines[def_at].replace(f"def {n.name}(", f"def {target}(", 1)
        expr = target
        for d in reversed(n.decorator_list):
            expr = f"{ast.get_source_segment(src, d)}({expr})"
        lines.insert(n.end_lineno, f"{indent}{name} = {expr}\n")
        del lines[first:def_at]
        src = "".join(lines)


def _env() -> dict:
    env = dict(os.environ)
    env.pop("MUTANT_UNDER_TEST", None)
    env.pop("PYTEST_ADDOPTS", None)
    # every test process imports the mutated modules afresh (their mutants make them large):
    # bytecode caching keeps that at ~0.1 s instead of seconds
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _natural(name: str) -> tuple[str, int]:
    base, _, n = name.rpartition("_")
    return base, int(n) if n.isdigit() else 0


def _tree_files() -> list[str]:
    """The working tree's files (tracked, and new ones not ignored), as git sees them."""
    r = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                       check=True)
    return [p for p in r.stdout.decode().split("\0") if p and (ROOT / p).is_file()]


def _mutmut_config(modules, tests) -> str:
    def arr(xs):
        return "[" + ", ".join(json.dumps(x) for x in xs) + "]"
    return "\n".join([
        "[tool.mutmut]",
        f"source_paths = {arr(scope.SOURCE_PATHS)}",
        f"only_mutate = {arr(modules)}",
        # (formal/: spec/gen renders docs/formal.md from formal/properties.py; without a copy
        # the tests in mutants/ imported the one the venv's editable install points at)
        f"also_copy = {arr(['testbench/', 'gpucosim/', 'rtl/', 'formal/', 'examples/', 'include/', 'docs/'])}",
        f"pytest_add_cli_args = {arr(['-p', 'no:xdist', '-p', 'no:cacheprovider', '-p', 'no:randomly'])}",
        f"pytest_add_cli_args_test_selection = {arr([*tests, '-k', scope.TEST_FILTER])}",
        'process_isolation = "forkserver"',
        'forkserver_warmup = "import"',
        'preload_modules_file = "mutate_preload.txt"',
        "use_git_change_detection = false",
        # a mutant that loops is cut off after 3x (its tests' time + 5 s), not mutmut's 15x:
        # one such mutant would otherwise hold a worker for minutes. Not less: the times are
        # measured once (prepare), and on a loaded machine a survivor that runs all 708
        # tests took 2.9x their measured 31 s (load 10, 2 cores); cut off, it would count
        # as killed. Real timeouts are rare (4 of 1,221 in a default run, 21 to 79 s each).
        "timeout_multiplier = 3.0",
        "timeout_constant = 5.0",
        "",
    ])


def _mark_logging(mutants: list[Mutant]) -> None:
    """Flag mutants whose every changed line is part of a logging call (log.debug(...),
    `if log.isEnabledFor(...)`): what the log says is not the contract under test."""
    spans: dict[str, list[tuple[int, int]]] = {}
    originals: dict[str, list[str]] = {}
    for path in {m.path for m in mutants}:
        src = (ROOT / path).read_text()
        originals[path] = src.splitlines()
        spans[path] = _logging_spans(ast.parse(src))
    for m in mutants:
        lines = originals[m.path]
        changed = [ln.strip() for ln in m.removed] or [ln.strip() for ln in m.added]
        rows = []
        for text in changed:
            rows.append([i + 1 for i, ln in enumerate(lines) if ln.strip() == text and text])
        m.logging = bool(rows) and all(r and all(any(a <= i <= b for a, b in spans[m.path]) for i in r)
                                       for r in rows)


def _logging_spans(tree: ast.AST) -> list[tuple[int, int]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and _is_log(node.value.func):
            out.append((node.lineno, node.end_lineno))
        elif (isinstance(node, ast.If) and isinstance(node.test, ast.Call) and isinstance(node.test.func, ast.Attribute)
              and node.test.func.attr == "isEnabledFor" and not node.orelse
              and all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and _is_log(s.value.func)
                      or isinstance(s, ast.Assign) for s in node.body)):
            out.append((node.lineno, node.end_lineno))
    return out


def _is_log(func: ast.AST) -> bool:
    return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "log"
            and func.attr in ("debug", "info", "warning", "error", "critical", "exception"))
