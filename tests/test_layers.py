"""The stack's layers import downwards only: the launcher (gpucosim/) picks and starts a
backend from testbench/, and nothing in testbench/ imports the launcher back."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imports(path: Path) -> set[str]:
    """Top-level package names a Python file imports (at any depth of its code)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_testbench_does_not_import_the_launcher():
    files = sorted((ROOT / "testbench").rglob("*.py"))
    assert len(files) > 10
    bad = [str(f.relative_to(ROOT)) for f in files if "gpucosim" in imports(f)]
    assert not bad, f"testbench/ imports gpucosim/ (the launcher sits above it): {bad}"


def test_the_import_scan_sees_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from gpucosim.session import Session\nimport os.path\n")
    assert imports(f) == {"gpucosim", "os"}
