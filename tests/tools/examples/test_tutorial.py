"""docs/tutorial.md is real output: every command it shows is run here, and every listing
is checked against the output of the command it came from.

A listing is a fenced block preceded by `<!-- listing: SOURCE -->`. Its lines must appear
in that source's output in order and consecutively, except where a `...` line marks a
gap; only wall-clock figures (an ioctl's microseconds, a process id) may differ: cycles
are the simulation's and deterministic, so they must be this run's. The prose's figures
(PROSE_FACTS) and §4's bus table are checked against the run's output and timelines the
same way. A plain fenced block without a listing comment fails the test: each listing says
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

ROOT = Path(__file__).resolve().parents[3]
TUTORIAL = ROOT / "docs" / "tutorial.md"
# the apps the tutorial shows failing on purpose, and their exit codes
EXPECTED_EXIT = {"examples/producer_consumer.py": 1, "os:getcwd": 1}  # (as the prose says of each)
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
    """A line with its wall-clock numbers as `#` and its spacing collapsed. Only the numbers
    that differ from run to run are let go: an ioctl's microseconds and the process id in a
    crash report's name. Cycles, addresses and counts are the simulation's and must be
    this run's, so a change in the hardware's timing shows up here as a stale listing."""
    line = re.sub(r"\b\d+ us>", "# us>", line)
    line = re.sub(r"-(verilator|icarus|model)-\d+-", r"-\1-#-", line)
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
    for k in ("ts", "cat", "ph", "pid", "tid"):
        assert shown[k] == e[k], f"the timeline listing's {k} is {shown[k]!r}; this run's event has {e[k]!r}"
    for k, v in shown["args"].items():
        if k == "wall_ms":
            continue
        if isinstance(v, str) and v.endswith("\n..."):
            assert str(e["args"][k]).startswith(v[:-4]), k
        else:
            assert norm(str(e["args"][k])) == norm(str(v)), \
                f"the timeline listing's {k} is {v!r}; this run's is {e['args'][k]!r}"


def test_the_app_listing_is_the_app():
    """§0 shows examples/hello.py's own lines."""
    (body,) = [b for lang, b, _ in blocks(TUTORIAL.read_text()) if lang == "python"]
    app = [ln.strip() for ln in (ROOT / "examples" / "hello.py").read_text().splitlines()]
    for line in filter(None, (ln.strip() for ln in body.splitlines())):
        assert line in app, line


def test_the_app_listing_runs_as_the_tutorial_says():
    """§0's snippet, pasted into python after the line the tutorial gives for it, runs."""
    text = TUTORIAL.read_text()
    (body,) = [b for lang, b, _ in blocks(text) if lang == "python"]
    (prelude,) = re.findall(r"as the file does when run by itself:\s*`([^`]+)`", text)
    code = f"{prelude}\n{body}\nassert ok and int(buf.u32[0]) == 0xC0FFEE\ngpu.close()\n"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_the_prose_counts_the_app_listings_lines():
    """"The five lines need no main()" said of §0's six: the count is the listing's."""
    text = TUTORIAL.read_text()
    (body,) = [b for lang, b, _ in blocks(text) if lang == "python"]
    n = len([ln for ln in body.splitlines() if ln.strip()])
    said = re.findall(r"The (\w+) lines need no `main\(\)`", text)
    assert said == [["no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"][n]]


def test_listing_check_bites():
    """The comparison itself: a changed word, a changed cycle count, a dropped line
    without `...`, reordered lines all fail; wall-clock microseconds, a crash report's
    process id and spacing do not matter."""
    out = "a 1\nb 0x2\nc <3 cycles, 12 us>\nd crash-x-verilator-4242-1.txt\n"
    check_listing("a 1\nb 0x2\n...\nd crash-x-verilator-77-1.txt", out, "ok")
    check_listing("b   0x2\nc <3 cycles, 9999 us>", out, "ok")
    for bad in ("a 7", "c <4 cycles, 12 us>", "a 1\nc <3 cycles, 12 us>", "b 0x3", "d crash-x-verilator-4242-2.txt",
                "d crash-x-verilator-4242-1.txt\n...\na 1", "a 1\nb 0x2\nd crash-x-verilator-4242-1.txt"):
        with pytest.raises(AssertionError):
            check_listing(bad, out, "bad")


# The prose quotes the run too: each phrase below is in docs/tutorial.md with `{fact}` where
# it names a figure of this run. Listings are checked line by line above; these are the
# numbers in sentences and in the memory-bus table.
PROSE_FACTS = [
    "Its `<{cs_cycles} cycles,",
    "The KMD track marks `run_job` and the doorbell at cycle {doorbell}",
    "from entering the ring to being signalled (cycle {fence_signalled})",
    "the CP's INDIRECT_BUFFER (cycles {ib_from}–{ib_to})",
    "({cs_cycles} cycles: the VMID's setup and TLB flush, then the doorbell)",
    "`{ih_raw}`, AMD's soc15 layout",
    "the GPU clock when it was written ({ih_stamp_hex} = cycle {ih_stamp})",
    "WAIT_CS took {wait_cs} cycles: the irq rose at cycle {irq}, {irq_after_doorbell} cycles after the doorbell,",
    "took the remaining {handler_rest}.",
    "the irq line is high from cycle {irq} until",
    "The CP's `INDIRECT_BUFFER` (cycles {pipe_ib_from}–{pipe_ib_to}) is chunk 1",
    "the copy engine runs its own INDIRECT_BUFFER (cycles {pipe_sdma_from}–{pipe_sdma_to},",
    "the CP's chunk 0 ended at cycle {pipe_ib0_to}, its fence signalled",
    "about {slots1_more} % more cycles ({slots1_cycles} against {pipe_cycles} on this run)",
]


def events(path: Path) -> list[dict]:
    return [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") != "M"]


def end(e: dict) -> int:
    return e["args"]["cycle"] + e["args"].get("cycles", 0)


def run_facts(ran) -> dict[str, str]:
    """The figures the prose quotes, from this run's output and timelines."""
    ev = events(ran["tmp"] / "build" / "hello.json")
    bell = next(e for e in ev
                if e["name"].startswith("doorbell wptr=") and "vmid=1" in e["args"].get("ring_writes", ""))
    d = bell["args"]["cycle"]
    after = [e for e in ev if e["args"].get("cycle", -1) >= d]
    ib = next(e for e in after if e["name"] == "INDIRECT_BUFFER")
    irq = next(e for e in after if e["name"] == "irq line high")
    fence = next(e for e in ev if e["name"].startswith("fence 0x") and e["ph"] == "X" and e["args"]["cycle"] == d)
    eop = next(e for e in after if e["name"] == "IH EOP")
    cs = next(e for e in ev if e["name"] == "CS" and e["args"].get("result") == "{seq=1}")
    wait = next(e for e in ev if e["name"] == "WAIT_CS")
    stamp = eop["args"]["gpu_timestamp"]
    pipe = events(ran["tmp"] / "build" / "pipeline.json")
    app_ibs = [e for e in pipe if e["name"] == "INDIRECT_BUFFER" and "vmid=1" in e["args"].get("packet", "")]
    sdma = [e for e in pipe if e["name"] == "INDIRECT_BUFFER" and "packet" not in e["args"]]

    def cycles_of(command_start: str) -> int:
        out = next(v[1] for cmd, v in ran.items() if isinstance(v, tuple) and cmd.startswith(command_start))
        return int(re.search(r"through the pipeline in (\d+) cycles", out).group(1))

    chunk1 = app_ibs[1]
    pipe_cycles = cycles_of("gpucosim run examples/copy_pipeline.py --sim verilator --trace")
    slots1_cycles = cycles_of("gpucosim run examples/copy_pipeline.py --sim verilator --slots 1")
    # the copy engine's IB that runs while the CP consumes chunk 1: the one that starts within it
    beside = next(e for e in sdma if chunk1["args"]["cycle"] <= e["args"]["cycle"] < end(chunk1))
    facts = dict(cs_cycles=cs["args"]["cycles"], doorbell=d, fence_signalled=end(fence), ib_from=ib["args"]["cycle"],
                 ib_to=end(ib), ih_raw=eop["args"]["raw"], ih_stamp=stamp, ih_stamp_hex=hex(stamp),
                 wait_cs=wait["args"]["cycles"], irq=irq["args"]["cycle"], irq_after_doorbell=irq["args"]["cycle"] - d,
                 handler_rest=end(wait) - irq["args"]["cycle"],
                 pipe_ib_from=chunk1["args"]["cycle"], pipe_ib_to=end(chunk1),
                 pipe_sdma_from=beside["args"]["cycle"], pipe_sdma_to=end(beside),
                 pipe_ib0_to=end(app_ibs[0]), pipe_cycles=f"{pipe_cycles:,}", slots1_cycles=f"{slots1_cycles:,}",
                 slots1_more=round(100 * (slots1_cycles / pipe_cycles - 1)))
    return {k: str(v) for k, v in facts.items()}


# a figure in prose: eight dwords in hex, a hex number, a number with thousands commas, a number
FIGURE = r"((?:[0-9a-f]{8} ){7}[0-9a-f]{8}|0x[0-9a-f]+|\d{1,3}(?:,\d{3})+(?!\d)|\d+)"


def check_prose(text: str, facts: dict[str, str], phrases: list[str]) -> None:
    flat = " ".join(text.split())
    for phrase in phrases:
        parts = re.split(r"\{(\w+)\}", phrase)
        pattern = "".join(re.escape(p) if i % 2 == 0 else FIGURE for i, p in enumerate(parts))
        m = re.search(pattern, flat)
        assert m, (f"docs/tutorial.md no longer has the phrase {phrase!r}: keep it, with this run's figures, "
                   "or change the test")
        for name, said in zip(parts[1::2], m.groups()):
            assert said == facts[name], \
                f"docs/tutorial.md says {said} for {name} in {phrase!r}; this run gives {facts[name]}"


@pytest.mark.xdist_group("tutorial")
def test_the_prose_numbers_are_this_runs(ran):
    check_prose(TUTORIAL.read_text(), run_facts(ran), PROSE_FACTS)


@pytest.mark.xdist_group("tutorial")
def test_the_bus_table_is_this_runs(ran):
    """§4's table: each row's cycles, kind, ID and addresses are bus events of the run."""
    ev = [e for e in events(ran["tmp"] / "build" / "hello.json") if e.get("cat") == "bus"]
    rows = re.findall(r"^\| ([\d, ]+) \| (read|write) (\d+) B id(\d+) at (0x[0-9a-f]+)(?:, at (0x[0-9a-f]+))? \|",
                      TUTORIAL.read_text(), re.M)
    assert len(rows) >= 6
    for cycles, kind, size, bus_id, *addrs in rows:
        addrs = [a for a in addrs if a]
        cycles = [int(c) for c in cycles.split(",")]
        assert len(addrs) in (1, len(cycles)), cycles
        for i, cycle in enumerate(cycles):
            addr = addrs[i] if len(addrs) > 1 else addrs[0]
            name = f"{kind} {size}B id{bus_id}"
            assert any(e["name"] == name and e["args"]["cycle"] == cycle and e["args"]["addr"] == addr for e in ev), \
                f"the bus table's '{cycle} | {name} at {addr}' is not in this run's timeline: " \
                + str([(e["args"]["cycle"], e["name"], e["args"]["addr"])
                       for e in ev if abs(e["args"]["cycle"] - cycle) < 8])


def test_prose_check_bites():
    """A stale figure and a lost phrase both fail."""
    facts = {"n": "12", "m": "1,234"}
    check_prose("we took\n12 cycles, then 1,234.", facts, ["took {n} cycles, then {m}."])
    for text in ("we took 13 cycles, then 1,234.", "we took 12 cycles, then 1,233.", "we needed 12 cycles",
                 "we took 123 cycles, then 1,234.", "we took 12 cycles, then 1,2345."):
        with pytest.raises(AssertionError):
            check_prose(text, facts, ["took {n} cycles, then {m}."])
