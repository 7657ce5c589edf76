"""The stack's layers import only downwards (docs/architecture.md): the packet and register
tables (spec/) stand alone; the RTL builds from spec/; the KMD model knows spec/ and no
backend; the UMD knows the KMD's uAPI and spec/, never a backend, the RTL or cocotb; the
testbench (the backends) never imports the launcher (gpucosim/) that picks and starts
it. An import anywhere in a module counts, a function's own included: a lazy import
up the stack is still one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = {"spec", "rtl", "kmd_model", "umd", "testbench", "gpucosim", "formal", "fpga", "examples", "tests"}
THIRD_PARTY_SIMULATION = {"cocotb", "cocotb_tools", "cocotbext", "amaranth"}

# layer -> what it may import of ours (itself always), and of the simulation libraries
ALLOWED = {
    "spec": (set(), set()),
    "rtl": ({"spec"}, {"amaranth"}),
    "kmd_model": ({"spec"}, set()),
    "umd": ({"kmd_model", "spec"}, set()),
    "testbench": (OURS - {"gpucosim", "tests"}, THIRD_PARTY_SIMULATION),
}
# spec/gen/generate.py writes every other form of the tables (RTL constants, the C header, the
# docs' tables, formal.md's property table): the one module of spec/ that reads the others.
EXEMPT = {"spec/gen/generate.py"}


def imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module.split(".")[0]))
    return out


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_only_below_it(layer):
    ours, libs = ALLOWED[layer]
    bad = []
    files = sorted((ROOT / layer).rglob("*.py"))
    assert files, f"no Python files under {layer}/"
    for f in files:
        rel = f.relative_to(ROOT).as_posix()
        if rel in EXEMPT:
            continue
        for line, top in imports(f):
            up = top in OURS and top != layer and top not in ours
            if up or (top in THIRD_PARTY_SIMULATION and top not in libs):
                bad.append(f"{rel}:{line} imports {top}")
    assert not bad, f"{layer}/ reaches up or sideways:\n" + "\n".join(bad)


def test_the_check_sees_an_upward_import(tmp_path):
    """(The scan itself: a lazy import inside a function is found.)"""
    f = tmp_path / "m.py"
    f.write_text("import spec\n\ndef f():\n    from gpucosim import cli\n    import cocotb.triggers\n")
    assert imports(f) == [(1, "spec"), (4, "gpucosim"), (5, "cocotb")]
