"""The commands README.md and docs/ show in ```sh blocks paste as they are: one command a
line (README's `gpucosim disasm build/crash/<report>.txt` was a redirection from a file
named `report`), and README's gpucosim commands run. docs/tutorial.md's are run by
test_tutorial.py.

The README's lines run here through bash as typed, with `gpucosim` this tree's
(`python -m gpucosim`), in a scratch folder holding `examples/` and with $GPUCOSIM_BUILD
there, on the model ($SIM=model for the lines without --sim; the lines naming a simulator,
--waves or make are left out: they build RTL, minutes on 2 cores)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from .cli_helpers import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def sh_lines(path) -> list[str]:
    """The command lines of a Markdown file's ```sh blocks, without their comments."""
    out = []
    for body in re.findall(r"```sh\n(.*?)```", path.read_text(), re.S):
        for line in body.replace("\\\n", " ").splitlines():
            cmd = shlex.split(line, comments=True)
            if cmd:
                out.append(line)
    return out


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_shown_command_is_one_plain_command(path):
    for line in sh_lines(path):
        lex = shlex.shlex(line, posix=True, punctuation_chars=True)
        lex.whitespace_split, lex.commenters = True, "#"
        words = list(lex)
        assert not {"<", ">", "|", ";", "&", ">>", "&&", "||"} & set(words), (path.name, line)
        assert not any(re.fullmatch(r"<\w+>", w) for w in shlex.split(line, comments=True)), (path.name, line)


def readme_model_lines() -> list[str]:
    return [line for line in sh_lines(ROOT / "README.md")
            if re.match(r"\s*(python -m )?gpucosim ", line)
            and not re.search(r"--sim (verilator|icarus)|--waves|^make ", line)]


def test_the_readmes_gpucosim_commands_run(tmp_path):
    lines = readme_model_lines()
    assert any("disasm" in line for line in lines) and len(lines) >= 5, lines
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = dict(os.environ, GPUCOSIM_PROGRESS="0", GPUCOSIM_BUILD=str(tmp_path / "build"), SIM="model",
               PYTHONPATH=str(ROOT), PY=sys.executable)
    env.pop("GPUCOSIM_LOG", None)
    for line in lines:
        # (`python` and `gpucosim` as the user's shell finds them in the activated venv)
        script = f'gpucosim() {{ "$PY" -m gpucosim "$@"; }}\npython() {{ "$PY" "$@"; }}\n{line}\n'
        r = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, (line, r.stdout[-2000:], r.stderr[-2000:])
        assert "Traceback" not in r.stderr, (line, r.stderr)
        if "disasm" in line:
            assert "UNKNOWN op=0x7b" in r.stdout, (line, r.stdout)  # (gpu_error's illegal packet)
