"""The wrong file given to `gpucosim disasm` or `plot`, as a newcomer gives it: a picture, an
archive, a program, an empty file, a crash report to plot. Each is one line saying what the
file is, not a screen of "BAD TYPE" dwords with exit status 0, nor JSON's "line 1, column 1:
Expecting value"."""

from __future__ import annotations

import gzip

import pytest

from tests.tools.cli.cli_helpers import ROOT, usage_error

SAY = "not a dword dump (give a dump, a crash report or a `gpucosim run --trace` file)"


@pytest.mark.parametrize("name, data, kind", [
    ("sweep.png", None, "a PNG picture"),  # (a picture `gpucosim plot` drew: the docs')
    ("report.txt.gz", gzip.compress(b"c0033700 500 2000000 0 12345678\n"), "a gzip archive"),
    ("a.out", b"\x7fELF\x02\x01\x01" + bytes(57), "an ELF program"),
    ("fig.pdf", b"%PDF-1.4\n\xe2\xe3\xcf\xd3\n" + bytes(100), "a PDF document"),
], ids=["png", "gzip", "elf", "pdf"])
def test_disasm_names_a_file_of_another_kind(capsys, tmp_path, name, data, kind):
    f = tmp_path / name
    f.write_bytes(data if data is not None else (ROOT / "docs" / "fpga-sweep.png").read_bytes())
    assert usage_error(capsys, "disasm", str(f)) == f"gpucosim disasm: error: {f} is {kind}, {SAY}"


def test_binary_dwords_are_still_listed(capsys, tmp_path):
    f = tmp_path / "ib.bin"
    f.write_bytes(bytes.fromhex("003703c0 00050000 00000002 00000000 78563412"))  # (WRITE_DATA, little-endian)
    from gpucosim import cli

    assert cli.main(["disasm", str(f)]) == 0
    assert "WRITE_DATA" in capsys.readouterr().out


@pytest.mark.parametrize("text, said", [
    ("", "{f} is empty (plot the file `gpucosim run APP --trace FILE` wrote)"),
    ("gpucosim crash report\napp:     fault.py\n", "{f} is a crash report, not a trace: its dumps are listed by "
                                                   "gpucosim disasm {f}"),
    ("hello\n", "{f} is not a JSON trace (line 1, column 1: Expecting value)"),
], ids=["empty", "crash-report", "text"])
def test_plot_says_what_a_file_that_is_no_json_is(capsys, tmp_path, text, said):
    f = tmp_path / "in.txt"
    f.write_text(text)
    assert usage_error(capsys, "plot", str(f), "-o", str(tmp_path / "x.png")) == (
        f"gpucosim plot: error: {said.format(f=f)}")
