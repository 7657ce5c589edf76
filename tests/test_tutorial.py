"""docs/tutorial.md is real output: every command it shows is run here, and every listing
is checked against the output of the command it came from.

A listing is a fenced block preceded by `<!-- listing: SOURCE -->`. Its lines must appear
in that source's output in order and consecutively, except where a `...` line marks a
gap; decimal numbers (cycles, wall times, process ids) may differ, everything else may
not. A plain fenced block without a listing comment fails the test: each listing says
where it comes from. Commands are the lines of ```sh blocks and every inline `gpucosim
...` span (a bare `gpucosim SUBCOMMAND` is run with --help); `build/tutorial` becomes a
temporary directory, `docs/` outputs too.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial.md"
# the apps the tutorial shows failing on purpose, and their exit codes
EXPECTED_EXIT = {"examples/producer_consumer.py": 1}
# placeholders the prose uses in commands
APP = "examples/hello.py"


def blocks(text: str) -> list[tuple[str, str, str | None]]:
    """(language, body, listing source or None) of every fenced block, in order."""
    out = []
    for m in re.finditer(r"(?:<!-- listing: ([^>]+?) -->\n)?```(\w*)\n(.*?)```", text, re.S):
        out.append((m.group(2), m.group(3), m.group(1)))
    return out


def commands(text: str) -> list[str]:
    cmds = []
    for lang, body, _ in blocks(text):
        if lang == "sh":
            cmds += [c.strip() for c in body.replace("\\\n", " ").splitlines() if c.strip()]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for m in re.finditer(r"`(gpucosim [^`]+)`", prose):
        cmd = " ".join(m.group(1).split())
        # a bare `gpucosim run` names the subcommand: its --help must exist
        cmds.append(cmd + " --help" if len(cmd.split()) == 2 else cmd)
    return list(dict.fromkeys(cmds))  # (in order, each once)


def norm(line: str) -> str:
    """A line with its decimal numbers as `#` and its spacing collapsed."""
    line = re.sub(r"[0-9A-Za-z_.]+", lambda m: "#" if re.fullmatch(r"\d+(\.\d+)?", m.group()) else m.group(), line)
    return " ".join(line.split())


def check_listing(listing: str, output: str, what: str) -> None:
    got = [norm(x) for x in output.splitlines()]
    segments: list[list[str]] = [[]]
    for line in listing.splitlines():
        if line.strip() == "...":
            segments.append([])
        elif line.strip():
            segments[-1].append(norm(line))
    at = 0
    for seg in filter(None, segments):
        for i in range(at, len(got) - len(seg) + 1):
            if got[i:i + len(seg)] == seg:
                at = i + len(seg)
                break
        else:
            first = next((x for x in seg if x not in got[at:]), None)
            raise AssertionError(f"{what}: the listing's lines are not in the output in order, without a "
                                 f"`...` where lines are left out; first line not found after line {at}: {first!r}"
                                 + ("" if first else f"; the segment starting {seg[0]!r} is not consecutive"))


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """Every command of the tutorial, in order: {command: (exit code, output)}."""
    from testbench import sim

    reason = sim.unavailable_reason("verilator")
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("tutorial")
    env = dict(os.environ, GPUCOSIM_PROGRESS="0")
    env.pop("GPUCOSIM_LOG", None)
    results = {}
    report = None
    for cmd in commands(TUTORIAL.read_text()):
        line = cmd.replace("build/tutorial", str(tmp / "build")).replace("docs/", f"{tmp}/docs-")
        line = line.replace(" APP ", f" {APP} ").replace("build/batching.png", str(tmp / "batching.png"))
        if "REPORT" in line:
            assert report is not None, f"{cmd}: no crash report written before it"
            line = line.replace("REPORT", str(report))
        argv = shlex.split(line)
        assert argv[0] == "gpucosim", cmd
        r = subprocess.run([sys.executable, "-m", "gpucosim", *argv[1:]], cwd=ROOT, env=env, timeout=600,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out = r.stdout.replace(str(tmp / "build"), "build/tutorial")
        results[cmd] = (r.returncode, out)
        found = sorted((tmp / "build" / "crash").glob("crash-gpu_error-*.txt"))
        report = found[0] if found else report
    results["crash report"] = report
    results["tmp"] = tmp
    return results


@pytest.mark.xdist_group("tutorial")
def test_every_command_runs(ran):
    cmds = commands(TUTORIAL.read_text())
    assert len(cmds) >= 10
    for cmd in cmds:
        code, out = ran[cmd]
        app = next((a for a in EXPECTED_EXIT if a in cmd), None)
        assert code == EXPECTED_EXIT.get(app, 0), f"{cmd}: exit {code}\n{out[-2000:]}"
        assert "Traceback" not in out, f"{cmd}:\n{out[-3000:]}"


@pytest.mark.xdist_group("tutorial")
def test_every_listing_is_real_output(ran):
    text = TUTORIAL.read_text()
    first_run = next(c for c in commands(text) if c.startswith("gpucosim run examples/hello.py"))
    error_run = next(c for c in commands(text) if c.startswith("gpucosim run examples/gpu_error.py"))
    pipeline_run = next(c for c in commands(text) if c.startswith("gpucosim run examples/copy_pipeline.py"))
    sources = {"hello": ran[first_run][1], "gpu_error": ran[error_run][1], "copy_pipeline": ran[pipeline_run][1],
               "gpu_error crash report": ran["crash report"].read_text()}
    checked = 0
    for lang, body, source in blocks(text):
        if lang in ("sh", "python"):
            continue
        assert source is not None, f"a listing without `<!-- listing: SOURCE -->`: {body[:80]!r}"
        if source == "hello timeline":
            check_timeline_event(json.loads(body), ran["tmp"] / "build" / "hello.json")
        else:
            check_listing(body, sources[source], f"listing from {source}")
        checked += 1
    assert checked >= 8


def check_timeline_event(shown: dict, trace: Path) -> None:
    events = json.loads(trace.read_text())["traceEvents"]
    same = [e for e in events if norm(e.get("name", "")) == norm(shown["name"]) and e.keys() == shown.keys()
            and e["args"].keys() == shown["args"].keys()]
    assert same, f"no event like {shown['name']!r} with the listed fields in the timeline"
    e = same[0]
    for k, v in shown["args"].items():
        if k == "wall_ms":
            continue
        if isinstance(v, str) and v.endswith("\n..."):
            assert str(e["args"][k]).startswith(v[:-4]), k
        else:
            assert norm(str(e["args"][k])) == norm(str(v)), k


def test_the_app_listing_is_the_app():
    """§0 shows examples/hello.py's own lines."""
    (body,) = [b for lang, b, _ in blocks(TUTORIAL.read_text()) if lang == "python"]
    app = [ln.strip() for ln in (ROOT / "examples" / "hello.py").read_text().splitlines()]
    for line in filter(None, (ln.strip() for ln in body.splitlines())):
        assert line in app, line


def test_listing_check_bites():
    """The comparison itself: a changed word, a dropped line without `...`, reordered
    lines all fail; numbers and spacing do not matter."""
    out = "a 1\nb 0x2\nc 3 us\nd\n"
    check_listing("a 7\nb 0x2\n...\nd", out, "ok")
    check_listing("b   0x2\nc 9 us", out, "ok")
    for bad in ("a 1\nc 3 us", "b 0x3", "d\n...\na 1", "a 1\nb 0x2\nd"):
        with pytest.raises(AssertionError):
            check_listing(bad, out, "bad")
