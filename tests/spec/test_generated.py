"""Everything derived from spec/ is up to date, and the generated Verilog is lint-clean."""

import pytest

from spec.gen import generate
from testbench import lint


def test_generated_files_match_spec():
    stale = [str(p.relative_to(generate.ROOT)) for p in generate.stale()]
    assert not stale, f"generated files differ from spec/ (run `make gen`): {stale}"


@pytest.mark.parametrize("data_width", lint.DATA_WIDTHS)
def test_verilator_lint_clean(data_width):
    r = lint.lint(data_width)
    assert r.returncode == 0, r.stdout + r.stderr


def test_generator_rejects_unsupported_access(tmp_path, monkeypatch):
    """The CSR generator names the field it cannot implement instead of emitting wrong RTL."""
    bad = tmp_path / "bad.rdl"
    bad.write_text("addrmap m { reg { field { sw = rw; hw = rw; } F[0:0] = 0; } R @ 0x0; };")
    monkeypatch.setattr(generate, "RDL", bad)
    with pytest.raises(ValueError, match=r"^R\.F: sw=rw hw=rw is not supported by the CSR generator$"):
        generate.collect(generate.compile_rdl())


def test_lint_help_says_what_it_does_without_linting(capsys, monkeypatch):
    """`python -m testbench.lint --help` ran the whole lint (four Verilator runs, a minute
    or more); a misspelt option did too."""
    monkeypatch.setattr(lint, "lint", lambda w: pytest.fail("linted"))
    with pytest.raises(SystemExit) as e:
        lint.main(["--help"])
    assert e.value.code == 0 and "verilator --lint-only" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        lint.main(["--widht", "32"])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == "python -m testbench.lint: error: unrecognized arguments: --widht 32"


def test_a_bar_in_a_gfx9_difference_does_not_split_its_row(monkeypatch):
    """docs/hardware.md's table of differences from gfx9 (spec/gfx9.py): a `|` in a cell is
    escaped, so the row keeps its four columns in the rendered markdown."""
    from spec import gfx9

    monkeypatch.setattr(gfx9, "DIFFERENCES", (gfx9.Difference("DST_SEL | ENGINE_SEL", "a", "b|c", "d"),))
    lines = gfx9.render_table().splitlines()
    assert lines[0] == gfx9.BEGIN and lines[-1] == gfx9.END
    assert lines[2:5] == ["| what | gfx9 | here | why |", "|---|---|---|---|", r"| DST_SEL \| ENGINE_SEL | a | b\|c | d |"]


def test_generator_rejects_hw_next_on_what_is_not_plain_storage(tmp_path, monkeypatch):
    """hw_next (a field's next value as a port: rtl/csr.py's ih_rptr_next) is a bypass of
    the write into plain flip-flops; on a field without them the generator says so."""
    from spec.gen import gen_csr

    bad = tmp_path / "bad.rdl"
    bad.write_text("property hw_next { type = boolean; component = field; };\n"
                   "addrmap m { reg { field { sw = rw; hw = r; onwrite = woclr; hwset; hw_next; } F[0:0] = 0; } R @ 0x0; };")
    monkeypatch.setattr(generate, "RDL", bad)
    regs, enums = generate.collect(generate.compile_rdl())
    with pytest.raises(ValueError, match=r"^R\.F: hw_next is only supported on plain sw=rw hw=r storage outside "
                                         r"arrays$"):
        gen_csr.render_amaranth(regs, enums, "", 8)
