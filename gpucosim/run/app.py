"""The app a run runs: finding it from APP (a file, a module, module:function) without
running any of it, loading its main() (or, for a script with no main(), what runs it as
`python app.py` would, once the device is up), and saying in one line why it cannot be run."""

from __future__ import annotations

import difflib
import inspect
import keyword
import os
import runpy
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

from .session import RunOptions, described


def apply_app_log(main: Callable[[], Any], opts: RunOptions) -> None:
    """An app may name the trace it is meant to be read with (`GPUCOSIM_LOG = "..."` at
    module level, as examples/demo.py does): the launcher applies it before the app starts,
    so what watches the hardware (`cp=info`) is on from the first cycle. `--log` and
    $GPUCOSIM_LOG win over it."""
    from kmd_model import log

    if opts.log or os.environ.get(log.ENV):
        return
    spec = getattr(main, "gpucosim_log", None)  # (a script's, read from its source: it has not run yet)
    if spec is None:
        spec = getattr(sys.modules.get(getattr(main, "__module__", ""), None), "GPUCOSIM_LOG", None)
    if isinstance(spec, str) and spec:
        log.configure(spec, stream=sys.stdout)


class AppNotFound(LookupError):
    """The app a target names is not there (no file, no module, no such function), or is no
    app gpucosim can run (an async main()): the user's mistake, told in one line. An error
    raised by the app's own code is not this."""


def find_app(target: str) -> None:
    """Check that `target` names an app without running any of it (a module's parent
    packages are imported, as Python's own lookup does): AppNotFound says what is wrong."""
    import importlib.util

    if target.endswith(".py"):
        if not _is_file(target):
            raise AppNotFound(no_app_file(target))
        return
    name, colon, func = target.partition(":")
    if name.endswith(".py") and colon:  # (`examples/hello.py:main`: "is not an app")
        module = name[:-3].replace(os.sep, ".").replace("/", ".").strip(".")
        raise AppNotFound(f"{target!r} is not an app: a function is named after a module, not a file: give "
                          f"{module}:{func or 'main'} (from the folder the module is in), or {name} for its main()")
    if not colon and name and _is_file(name + ".py"):  # (`gpucosim run examples/hello`: the file is there)
        raise AppNotFound(f"{target!r} is not an app: did you mean {name}.py?")
    if not name or "/" in name or os.sep in name or _is_file(name):
        raise AppNotFound(f"{target!r} is not an app: give APP.py, a module (examples.demo) or module:function")
    # the target's form before any import (`examples.demo:` ran main(), `:1x` imported the
    # module and then found no function named so)
    if not all(part.isidentifier() for part in name.split(".")):
        raise AppNotFound(f"{target!r} is not an app: {name!r} is not a module name (dotted Python names, "
                          "as examples.demo)")
    if colon and not func:
        raise AppNotFound(f"{target!r} names no function after the colon: give module:function, or the module "
                          "alone for its main()")
    if colon and not (func.isidentifier() and not keyword.iskeyword(func)):
        raise AppNotFound(f"{target!r} is not an app: {func!r} is not a function name (give module:function, "
                          "one colon, a Python name after it)")
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError, OSError):  # a parent package that is missing, a name like "a..b", or
        found = False  # one too long for a file name (ENAMETOOLONG from the path finder's stat)
    if not found:
        if _is_dir(name):  # (`gpucosim run myapps`: a folder, not a package Python finds)
            raise AppNotFound(f"{name} is a folder, not an app: give the APP.py in it, a module (examples.demo) or "
                              "module:function")
        like = _like_module(name)
        raise AppNotFound(f"no module named {name!r}" + (f": did you mean {like}?" if like else "")
                          + " (APP is APP.py, a module or module:function)")


# What an app's source must name for it to read its arguments: sys.argv, a parser, or code
# it does not show (a module of its own or another package, an import or exec made at run
# time). Standard modules that read sys.argv themselves are listed too.
_ARG_WORDS = frozenset({"argv", "orig_argv", "argparse", "getopt", "optparse", "parse_args", "parse_known_args",
                        "parse_intermixed_args", "ArgumentParser", "fileinput", "unittest", "doctest", "runpy",
                        "exec", "eval", "compile", "__import__", "import_module", "importlib", "globals", "vars",
                        "__dict__", "modules", "getattr"})
# packages whose code reads no app's arguments: the drivers and what an app draws with
_NO_ARGS = frozenset({"umd", "kmd_model", "spec", "numpy", "matplotlib"})


def reads_no_arguments(target: str) -> bool:
    """True when the app's source shows that it cannot read sys.argv: it names no `argv`, no
    argument parser and nothing that could read them for it (every import is a standard
    module or a driver package, nothing imported or run at run time). False whenever it
    might (the run's own check after main() then says whether it did): gpucosim refuses an
    argument it does not know before the run only when no app could take it."""
    import ast
    import importlib.util

    try:
        if target.endswith(".py"):
            path = target
        else:
            spec = importlib.util.find_spec(target.partition(":")[0])
            path = spec.origin if spec is not None else None
        if not path or not path.endswith(".py"):
            return False
        tree = ast.parse(Path(path).read_bytes(), filename=path)
    except Exception:  # (unreadable, not Python: loading it says so)
        return False
    std = sys.stdlib_module_names

    def script_only(stmt) -> bool:  # `if __name__ == "__main__":` runs when the file is a script, not under gpucosim
        t = getattr(stmt, "test", None) if isinstance(stmt, ast.If) and not stmt.orelse else None
        return (isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and t.left.id == "__name__"
                and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq) and isinstance(t.comparators[0], ast.Constant)
                and t.comparators[0].value == "__main__")

    # (a script with no main() runs as __main__: its `if __name__ == "__main__":` runs too)
    flat = ":" not in target and not binds_name(tree, "main")
    nodes = [n for stmt in tree.body if flat or not script_only(stmt) for n in ast.walk(stmt)]
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and (node.level or not node.module):
            return False  # (a module of its own package)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in _ARG_WORDS or (top not in std and top not in _NO_ARGS):
                    return False
            if any(a.name in _ARG_WORDS or a.name == "*" for a in node.names):
                return False
        word = (node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else
                node.arg if isinstance(node, ast.arg) else
                node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None)
        if word is not None and (word in _ARG_WORDS or "argv" in word):
            return False
    return True


def binds_name(tree, name: str) -> bool:
    """Does a module's source bind `name` at its top level (a def, a class, an assignment, an
    import; in an if, try, with or loop too, not inside a function or class)? A star import
    might: True."""
    import ast

    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:
                return True
            todo += node.decorator_list  # (not its body: the function's own names)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(a.name == "*" or (a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
            continue
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, (ast.Store, ast.Del)):
            return True
        todo += ast.iter_child_nodes(node)
    return False


def script_source(target: str) -> str | None:
    """The file of an app that is a script, not an app with a main(): a .py file or a module
    (no `:function` named) whose source binds no `main` at its top level, as a new user's
    first script (`gpu = umd.open()` on its first lines). None for an app with a main(), a
    package, or a source that does not parse (importing it says why, as before)."""
    import ast
    import importlib.util

    if ":" in target:
        return None
    try:
        if target.endswith(".py"):
            path = target
        else:
            spec = importlib.util.find_spec(target)
            if spec is None or spec.submodule_search_locations is not None:
                return None  # (a package: its main() or its error, as before)
            path = spec.origin
        if not path or not path.endswith(".py"):
            return None
        tree = ast.parse(Path(path).read_bytes(), filename=path)
    except Exception:  # (unreadable, not Python: loading it says so)
        return None
    return None if binds_name(tree, "main") else path


def _script_log(path: str) -> str | None:
    """A script's `GPUCOSIM_LOG = "..."` at its top level, read from its source (apply_app_log)."""
    import ast

    try:
        tree = ast.parse(Path(path).read_bytes(), filename=path)
    except Exception:
        return None
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "GPUCOSIM_LOG"
                                                 for t in stmt.targets)
                and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)):
            return stmt.value.value
    return None


def _script_runner(target: str, path: str) -> Callable[[], Any]:
    """What runs a script (no main()) as `python app.py` or `python -m app` would, as
    __main__, `if __name__ == "__main__":` included: called by the run in the place of a
    main(), once the device is bound. Importing it before, as an app with a main() is, ran
    its top level with no device yet (`umd.open()`: "no GPU is bound yet")."""
    if target.endswith(".py"):
        d = str(Path(path).resolve().parent)
        if d not in sys.path:
            sys.path.insert(0, d)  # an app may import modules beside it

        def run_script() -> None:
            runpy.run_path(path, run_name="__main__")
    else:
        def run_script() -> None:
            runpy.run_module(target, run_name="__main__", alter_sys=True)

    run_script.gpucosim_log = _script_log(path)  # type: ignore[attr-defined]
    return run_script


def no_app_file(target: str) -> str:
    """Why the APP.py `target`, which is no file, cannot run (one line): not there, or a folder."""
    if _is_dir(target):
        return f"{target} is a folder, not an app: give the .py file to run"
    # `examples.hello.py`: a module's name with the file's .py (as `python -m x.py` is refused)
    name = target[:-3] if target.endswith(".py") else ""
    if "." in name and "/" not in name and os.sep not in name and _is_file(name.replace(".", "/") + ".py"):
        return (f"no app at {target}: a module is named without .py ({name}), a file with its folders "
                f"({name.replace('.', '/')}.py)")
    like = _like_file(target)
    if like is None and not os.path.isabs(target) and _is_file(str(_ROOT / target)):
        # (the README's `gpucosim run examples/hello.py` from another folder: the example is
        # the repository's, and its module runs from any folder)
        module = Path(target).with_suffix("").as_posix().replace("/", ".")
        return (f"no app at {target} in {os.getcwd()}: did you mean {_ROOT / target} (the repository's; "
                f"the module {module} runs from any folder)?")
    return f"no app at {target}" + (f": did you mean {like}?" if like else "")


_ROOT = Path(__file__).resolve().parents[2]  # the repository's top folder (examples/ is in it)


def _like_file(target: str) -> str | None:
    """The .py file a mistyped APP.py meant: one beside it spelt close to it (examples/helo.py),
    or, for a bare name, the example of that name (hello.py from the top folder)."""
    folder, name = os.path.split(target)
    try:
        names = sorted(e.name for e in os.scandir(folder or ".") if e.name.endswith(".py") and e.is_file())
    except OSError:
        names = []
    close = difflib.get_close_matches(name, names[:10_000], n=1, cutoff=0.75)
    if close:
        return os.path.join(folder, close[0])
    if not folder and _is_file(os.path.join("examples", name)):
        return os.path.join("examples", name)
    return None


def _like_module(name: str) -> str | None:
    """The module a mistyped one meant: one of its package spelt close to it (examples.helo),
    or, for a bare name, the example of that name (hello)."""
    import importlib.util

    parent, _, last = name.rpartition(".")
    try:
        spec = importlib.util.find_spec(parent) if parent else None
    except (ImportError, ValueError, OSError):
        return None
    folders = list(spec.submodule_search_locations or []) if spec is not None else [] if parent else ["."]
    names = set()
    for folder in folders:
        try:
            names.update(e.name[:-3] for e in os.scandir(folder) if e.name.endswith(".py") and e.is_file())
        except OSError:
            pass
    names.discard("__init__")
    close = difflib.get_close_matches(last, sorted(names)[:10_000], n=1, cutoff=0.75)
    if close:
        return f"{parent}.{close[0]}" if parent else close[0]
    if not parent and _is_file(str(_ROOT / "examples" / (last + ".py"))):  # (importable from any folder)
        return f"examples.{last}"
    return None


def _is_dir(path: str) -> bool:
    """Path.is_dir, False for a name the system refuses."""
    try:
        return Path(path).is_dir()
    except OSError:
        return False


def _is_file(path: str) -> bool:
    """Path.is_file, False for a name the system refuses (too long: pathlib raised)."""
    try:
        return Path(path).is_file()
    except OSError:
        return False


def _function_meant(mod, func: str) -> str:
    """": did you mean main()?" for a mistyped function of `mod`'s own (defined there, not
    imported; not private), else ""."""
    own = [n for n, v in vars(mod).items() if inspect.isfunction(v) and v.__module__ == mod.__name__
           and not n.startswith("_")]
    by_case = {n.lower(): n for n in own}
    close = difflib.get_close_matches(func.lower(), list(by_case), n=1, cutoff=0.6)
    return f": did you mean {by_case[close[0]]}()?" if close else ""


def load_main(target: str) -> Callable[[], Any]:
    """`pkg.module` or `pkg.module:function` or a path to a .py file -> its main function;
    for a script with no main() (script_source), the function that runs it as __main__,
    none of it run yet. AppNotFound when the target is not there; whatever the app's own
    code raises otherwise."""
    import importlib
    import importlib.util

    find_app(target)
    # the drivers before the app: its folder goes first on sys.path, and a module there named
    # like one of ours (an app called umd.py) took its place in the simulator, which imports
    # them after the app (a 20-line traceback, "'umd' is not a package"; the model had them)
    for pkg in ("umd", "kmd_model", "spec", "testbench"):
        importlib.import_module(pkg)
    script = script_source(target)
    if script is not None:
        return _script_runner(target, script)
    if target.endswith(".py"):
        path = Path(target)
        spec = importlib.util.spec_from_file_location("gpucosim_app", path)
        if spec is None or spec.loader is None:
            raise AppNotFound(f"cannot load app {target!r}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["gpucosim_app"] = mod
        d = str(path.resolve().parent)
        if d not in sys.path:
            sys.path.insert(0, d)  # an app may import modules beside it
        spec.loader.exec_module(mod)
        func = "main"
    else:
        name, _, func = target.partition(":")
        mod = importlib.import_module(name)
        func = func or "main"
    fn = getattr(mod, func, None)
    if not callable(fn):  # (after "cannot load app TARGET: "; the function meant: examples.hello:mian)
        raise AppNotFound(f"it has no callable {func}(){_function_meant(mod, func)}")
    try:  # (main(x) was a TypeError from the call, a crash report of gpucosim's making)
        inspect.signature(fn).bind()
    except TypeError:
        raise AppNotFound(f"its {func}{inspect.signature(fn)} takes arguments: gpucosim calls {func}() with none "
                          "(the app's arguments are in sys.argv)") from None
    except ValueError:
        pass  # (no signature to read: a builtin; the call says)
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):  # (its coroutine was the exit status)
        raise AppNotFound(f"its {func}() is async (a coroutine function): gpucosim calls {func}() and does not "
                          f"await it; make it a plain def")
    if inspect.isgeneratorfunction(fn):  # (its generator was the exit status: none of main's body ran)
        raise AppNotFound(f"its {func}() is a generator function (it has a yield): gpucosim calls {func}(), which "
                          f"runs none of its body; make it a plain def (return, not yield)")
    return fn


def app_traceback(e: BaseException) -> str:
    """The traceback of an exception the app's main() raised, as the app's author reads it:
    the app's frames and the exception, without the project's (the launcher's before the
    app's first frame, the drivers' after its last), which the crash report keeps. The
    same trimming a script run by python gets from the UMD's excepthook: umd/tracebacks.py
    (imported here, not by the launcher, which stays light)."""
    from umd.tracebacks import app_traceback as trimmed

    return trimmed(e)


def report_load_error(target: str, e: BaseException) -> None:
    """One line for an app that is not there; the traceback first when the app's own code
    raised while it was imported (its bug, and where it is)."""
    if isinstance(e, AppNotFound):
        print(f"gpucosim: cannot load app {target!r}: {e}", file=sys.stderr, flush=True)
        return
    # the launcher's frames and importlib's are not the app's bug: the traceback starts at the
    # app's own code (a SyntaxError has none: its file, line and caret say where)
    here = str(Path(__file__).resolve().parents[1])  # the gpucosim package, not only run/
    tb = e.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename.startswith(("<frozen", here))):
        tb = tb.tb_next
    if tb is None:
        lines = traceback.format_exception_only(type(e), e)
    else:  # (and the drivers' frames after the app's last: an API call it made at import, umd.open())
        from umd.tracebacks import trim

        te = traceback.TracebackException(type(e), e, tb)
        lines = list(te.format()) if trim(te) else traceback.format_exception(type(e), e, tb)
    print("".join(lines), end="", file=sys.stderr)
    print(f"gpucosim: cannot load app {target!r}: {described(e)}", file=sys.stderr, flush=True)
