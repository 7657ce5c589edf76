"""The timeline (`--trace`), crash reports and waveforms, on the reference model and on
Verilator (one Verilator run: examples/gpu_error.py with everything switched on; its
build with waves is cached like any other).

Structure, not timing: the tracks a request crosses are there, events are ordered on
simulated time (1 cycle = 10 ns), spans nest, the doorbell and fence events carry
their waveform time, and the crash report of the injected hardware error holds the
registers, the IB stack with the bad packet marked, and the last ioctls.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpucosim.trace import timeline as tl
from gpucosim.dump import parse
from gpucosim.trace.hwtrace import CpMonitor, fsm_states
from gpucosim.trace.timeline import NS_PER_CYCLE, Timeline, overlaps
from testbench import sim

from tests.conftest import shared_run

ROOT = Path(__file__).resolve().parents[3]
SOFTWARE_TRACKS = {"UMD API", "ioctl", "KMD ring + doorbell", "fences", "interrupts", "CP packets"}


def run(*argv: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, GPUCOSIM_PROGRESS="0")
    env.pop("GPUCOSIM_LOG", None)
    return subprocess.run([sys.executable, "-m", "gpucosim", "run", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def events(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] != "M"]


def track_names(trace: dict) -> dict[tuple[int, int], str]:
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
            if e["ph"] == "M" and e["name"] == "thread_name"}


def check_structure(trace: dict, backend: str) -> dict[str, list[dict]]:
    """What every timeline must satisfy; returns the events by track name."""
    assert trace["otherData"]["backend"] == backend
    assert trace["otherData"]["ns_per_cycle"] == NS_PER_CYCLE
    names = track_names(trace)
    evs = events(trace)
    assert evs, "no events"
    ts = [e["ts"] for e in evs]
    assert ts == sorted(ts), "events are not in time order"
    by_track: dict[str, list[dict]] = {}
    for e in evs:
        assert e["ph"] in ("X", "i")
        assert e["ts"] == pytest.approx(e["args"]["cycle"] * NS_PER_CYCLE / 1000, abs=1e-6), "ts is not sim time"
        assert "wall_ms" in e["args"]
        if e["ph"] == "X":
            assert e["dur"] >= 0
            assert e["dur"] == pytest.approx(e["args"]["cycles"] * NS_PER_CYCLE / 1000, abs=1e-6)
        by_track.setdefault(names[(e["pid"], e["tid"])], []).append(e)
    missing = SOFTWARE_TRACKS - set(by_track)
    assert not missing, f"tracks without events: {missing}"
    # one request's journey: the UMD call, its CS ioctl (with the IB disassembled), the doorbell
    cs = [e for e in by_track["ioctl"] if e["name"] == "CS"]
    assert cs and all("ibs" in e["args"] and "WRITE_DATA" in e["args"]["ibs"] for e in cs[:1])
    bells = [e for e in by_track["KMD ring + doorbell"] if e["name"].startswith("doorbell")]
    assert bells and all(e["args"]["wave_time"] == f"{e['args']['cycle'] * NS_PER_CYCLE} ns" for e in bells)
    assert any("INDIRECT_BUFFER" in e["args"]["ring_writes"] for e in bells)
    fences = by_track["fences"]
    assert fences and all("wave_time" in e["args"] for e in fences)
    assert any(e["name"].startswith("IH EOP") for e in by_track["interrupts"])
    assert any(e["name"] == "Queue.write" for e in by_track["UMD API"])
    # the dumps `gpucosim disasm` reads
    dumps = trace["otherData"]["dumps"]
    assert any(d["name"].startswith("ring") for d in dumps) and any(d["name"].startswith("CS seq") for d in dumps)
    return by_track


# ------------------------------------------------------------------------------ the model

def test_timeline_on_the_model(tmp_path):
    out = tmp_path / "demo.json"
    r = run("examples/demo.py", "--sim", "model", "--trace", str(out))
    assert r.returncode == 0, r.stderr
    assert f"gpucosim: timeline written to {out}" in r.stderr
    trace = json.loads(out.read_text())
    by_track = check_structure(trace, "model")
    cp = by_track["CP packets"]  # the model has no cycles: its packets are instants
    assert {e["name"] for e in cp} >= {"WRITE_DATA", "INDIRECT_BUFFER", "RELEASE_MEM", "WAIT_REG_MEM"}
    assert all(e["ph"] == "i" and "packet" in e["args"] for e in cp)
    assert "exit_report" in trace["otherData"]


def test_crash_report_on_the_model(tmp_path):
    r = run("examples/gpu_error.py", "--sim", "model", "--crash-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    (report,) = tmp_path.glob("crash-gpu_error-model-*.txt")
    text = report.read_text()
    assert "reason:  GPU error: illegal opcode 0x7b at IB+0x14" in text
    assert "CP_ERROR = 0x007b0101: CODE=ILLEGAL_OPCODE (1) LEVEL=IB1 (1) OPCODE=0x7b" in text
    assert "UNKNOWN op=0x7b count=0   <-- the packet in hand" in text
    # the resets before it, each kind: a ring's queue reset (gfx's too) is no GPU reset
    assert ", 0 GPU resets, 0 queue resets\n" in text, text
    names = [d.name for d in parse(report.read_bytes(), str(report))]
    assert any(n.startswith("ring") for n in names) and any(n.startswith("IB1") for n in names)


def test_a_gfx_error_s_recovery_is_named_a_queue_reset_on_the_timeline(tmp_path):
    """gpu_error's illegal opcode on the gfx ring is recovered by CP queue 0's reset alone
    (CP_QUEUE_RESET.Q0): the timeline's instant says so, as the other rings' do, and no
    "GPU reset" (the full reset, every ring) is shown."""
    out = tmp_path / "t.json"
    r = run("examples/gpu_error.py", "--sim", "model", "--trace", str(out), "--crash-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    names = [e["name"] for e in events(json.loads(out.read_text()))]
    assert names.count("gfx queue reset") == 1 and "GPU reset" not in names, [n for n in names if "reset" in n]


_OTHER_RING_APP = """import umd


def main():
    gpu = umd.open(api_version=2)
    q = gpu.queue({kw})
    q.emit_raw([{bad:#x}])
    try:
        q.signal().wait()
    except umd.GpuError as e:
        print("raised:", e)
    gpu.close()
    return 0
"""


@pytest.mark.parametrize("kw, bad, ring", [("engine='copy'", 0x000000FF, "sdma0"),
                                           ("priority='high'", 0xC0007B00, "gfx_high")])
def test_crash_report_of_the_copy_engine_and_queue_1_on_the_model(tmp_path, kw, bad, ring):
    """A GPU error on the copy engine (sdma0) or the CP's queue 1 (gfx_high): the report showed
    queue 0's registers and ring, said "the CP is at level IB1" while the CP was idle in its
    ring, and disassembled the SDMA's IB as PM4 (BAD TYPE 0 on every dword, the copy engine's
    packet marked as the CP's packet in hand), its dump named so that `gpucosim disasm` did
    the same. The report now shows the failing queue's registers and ring, its IB in its own
    packet format, and names its dumps so disasm reads them right."""
    app = tmp_path / "bad_packet.py"
    app.write_text(_OTHER_RING_APP.format(kw=kw, bad=bad))
    # (queue 1's app asks for HIGH: CAP_SYS_NICE)
    r = run(str(app), "--sim", "model", "--kmd", "cs_check=0", "--kmd", "cap_sys_nice=1", "--crash-dir", str(tmp_path))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"raised: GPU error: illegal opcode {bad & 0xFF if ring == 'sdma0' else 0x7b:#x} at IB+0x0" in r.stdout
    (report,) = tmp_path.glob("crash-bad_packet-model-*.txt")
    text = report.read_text()
    if ring == "sdma0":
        assert "SDMA_ERROR = 0x00ff0101: CODE=ILLEGAL_OPCODE (1) LEVEL=IB1 (1) OP=0xff SUB_OP=0x0" in text, text
        assert "SDMA_STATUS = " in text and "CP_ERROR = " not in text
        assert "== sdma0 ring ==" in text
        assert "the copy engine (sdma0) is at level IB1, packet header at 0x" in text, text
        assert "UNKNOWN op=0xff sub_op=0x00   <-- the packet in hand" in text, text
        assert "BAD TYPE" not in text, text
    else:
        assert "CP_HQD1_ERROR = 0x007b0101: CODE=ILLEGAL_OPCODE (1) LEVEL=IB1 (1) OPCODE=0x7b" in text, text
        assert "CP_HQD1_STATUS = " in text and "CP_ERROR = " not in text
        assert "== gfx_high ring ==" in text
        assert "queue 1 (gfx_high) is at level IB1, packet header at 0x" in text, text
        assert "UNKNOWN op=0x7b count=0   <-- the packet in hand" in text, text
    assert f"  {ring}: in the ring: fd 3 context 1 seq 0x1, ring [" in text, text  # (the job that failed)
    names = [d.name for d in parse(report.read_bytes(), str(report))]
    assert any(n.startswith(f"{ring} ring") for n in names) and any(n.startswith(f"{ring} IB1") for n in names), names
    listed = subprocess.run([sys.executable, "-m", "gpucosim", "disasm", str(report)], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert ("UNKNOWN op=0xff sub_op=0x00" if ring == "sdma0" else "UNKNOWN op=0x7b") in listed.stdout, listed.stdout
    if ring == "sdma0":  # (the PM4 listing after a bad header is out of step: its COUNT is garbage)
        assert "BAD TYPE" not in listed.stdout, listed.stdout


def test_queue_1_packets_on_their_own_track_on_the_model(tmp_path):
    """The model's packets of the CP's queue 1 ("HQD1 RING+..." in its log) went on queue 0's
    "CP packets" track, while the RTL's timeline puts them on "CP packets, queue 1 (CP_HQD1)":
    each queue's on its own track on both backends."""
    app = tmp_path / "high.py"
    app.write_text("""import umd


def main():
    gpu = umd.open(api_version=2)
    a = gpu.alloc(4096, "vram")
    q = gpu.queue(priority="high")
    q.write(a, 0, 1)
    q.signal().wait()
    gpu.close()
    return 0
""")
    out = tmp_path / "t.json"
    r = run(str(app), "--sim", "model", "--kmd", "cap_sys_nice=1", "--trace", str(out))  # (it asks for HIGH)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    trace = json.loads(out.read_text())
    names = track_names(trace)
    where = {}
    for e in events(trace):
        if "where" in e["args"] and "packet" in e["args"]:
            where.setdefault(names[(e["pid"], e["tid"])], []).append(e["args"]["where"])
    assert where.get("CP packets, queue 1 (CP_HQD1)") and \
        all(w.startswith("HQD1 ") for w in where["CP packets, queue 1 (CP_HQD1)"]), where
    assert not [w for w in where.get("CP packets", []) if w.startswith("HQD1 ")], where


# ------------------------------------------------------------------------------ Verilator

@pytest.fixture(scope="module")
def verilator_run(tmp_path_factory):
    """examples/gpu_error.py on Verilator with the timeline, a waveform and crash reports:
    run once per pytest run (shared_run), however the workers and module order fall."""
    reason = sim.unavailable_reason("verilator")
    if reason:
        pytest.skip(reason)
    from gpucosim.trace.waves import unavailable_reason as waves_reason

    def once():
        d = tmp_path_factory.mktemp("verilator")
        args = ["examples/gpu_error.py", "--sim", "verilator", "--trace", str(d / "trace.json"),
                "--crash-dir", str(d / "crash"), "--stats", "--stats-json", str(d / "figures.json")]
        waves = None if waves_reason("verilator") else d / "waves.fst"
        if waves is not None:
            args += ["--waves", "--waves-file", str(waves)]
        return d, run(*args, timeout=600), waves

    d, r, waves = shared_run("trace-verilator", once)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return d, r, waves


pytestmark_verilator = pytest.mark.xdist_group("verilator_trace")


@pytestmark_verilator
def test_timeline_on_verilator(verilator_run):
    d, r, _ = verilator_run
    trace = json.loads((d / "trace.json").read_text())
    by_track = check_structure(trace, "verilator")
    cp = [e for e in by_track["CP packets"] if e["ph"] == "X"]
    names = {e["name"] for e in cp}
    assert names >= {"WRITE_DATA", "INDIRECT_BUFFER", "RELEASE_MEM", "fence write", "IH entry"}
    assert all(e["dur"] > 0 for e in cp if e["name"] in ("WRITE_DATA", "INDIRECT_BUFFER"))
    # packets of an IB lie inside its INDIRECT_BUFFER slice (start and end cycles from the RTL)
    ibs = [e for e in cp if e["name"] == "INDIRECT_BUFFER" and e["args"]["where"].startswith("RING")]
    inner = [e for e in cp if e["args"].get("where", "").startswith("IB1")]
    assert inner and all(any(ib["ts"] <= e["ts"] and e["ts"] + e["dur"] <= ib["ts"] + ib["dur"] for ib in ibs)
                         for e in inner)
    # the injected error, as the CP saw it
    assert any(e["name"] == "CP error" for e in by_track["CP packets"])
    assert any(e["name"].startswith("IH CP_ERROR") for e in by_track["interrupts"])
    assert any(e["name"] == "irq line high" and e["dur"] > 0 for e in by_track["interrupts"])
    # memory bursts of the CP, with their IDs and addresses
    bus = by_track["memory bus (CP)"]
    assert any(e["name"].startswith("read ") for e in bus) and any(e["name"].startswith("write ") for e in bus)
    assert all(e["args"]["id"] < 8 for e in bus)
    # the UMD's wait spans the ioctl that blocks in the KMD while the GPU works
    waits = [e for e in by_track["UMD API"] if e["name"] == "Event.wait"]
    assert waits and waits[0]["dur"] > 0
    assert overlaps(trace) == []


@pytest.mark.xdist_group("verilator_trace_apps")
@pytest.mark.parametrize("app", ["memcpy", "producer_consumer"])
def test_busy_timelines_do_not_lose_slices(tmp_path, app):
    """The apps with the most concurrent work (DMA bursts in flight, fences in flight): no
    slice partly overlaps another on its track, so Perfetto shows every one."""
    reason = sim.unavailable_reason("verilator")
    if reason:
        pytest.skip(reason)
    out = tmp_path / "t.json"
    r = run(f"examples/{app}.py", "--sim", "verilator", "--trace", str(out), timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    trace = json.loads(out.read_text())
    assert overlaps(trace) == []
    lanes = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert (lanes & {"DMA bursts (2)", "fences (2)"}), sorted(lanes)  # the concurrency was there


@pytest.mark.xdist_group("verilator_trace_apps")
def test_crash_report_of_queue_0_while_queue_1_waits_on_the_rtl(tmp_path):
    """A bad packet on queue 0 while the CP's queue 1 waits in its own IB: the report's IB
    stack comes from the CP's registers, which by the time the report is written hold the
    parser's position in queue 1 (it switched to the queue that can run). The report listed
    queue 1's IB as the one the CP was in, with the packet in hand nowhere in it; it lists the
    failing job's IB, with the bad packet marked, as the model's report does."""
    reason = sim.unavailable_reason("verilator")
    if reason:
        pytest.skip(reason)
    app = tmp_path / "two_queues.py"
    app.write_text("""import umd


def main():
    gpu = umd.open(api_version=2)
    flag, a = gpu.alloc(4096, "gtt"), gpu.alloc(4096, "vram")
    h = gpu.queue(priority="high")
    q = gpu.queue()
    h.write(a, 8, 1)
    h.wait_mem(flag, 0, 1)
    done = h.signal()
    h.flush()
    q.write(a, 0, 5)
    q.emit_raw([0xC0007B00, 0])
    try:
        q.signal().wait()
    except umd.GpuError as e:
        print("raised:", e)
    flag.u32[0] = 1
    done.wait()
    gpu.close()
    return 0
""")
    for backend in ("model", "verilator"):
        d = tmp_path / backend
        r = run(str(app), "--sim", backend, "--kmd", "cs_check=0", "--kmd", "cap_sys_nice=1",  # (h is HIGH)
                "--crash-dir", str(d), timeout=600)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert "raised: GPU error: illegal opcode 0x7b at IB+0x14" in r.stdout, r.stdout
        (report,) = d.glob("crash-two_queues-*.txt")
        text = report.read_text()
        stack = text.split("== IB stack and the packet in hand ==")[1].split("\n== ")[0]
        assert "UNKNOWN op=0x7b count=0   <-- the packet in hand" in stack, f"{backend}:\n{stack}"
        assert "WAIT_REG_MEM" not in stack, f"{backend}: queue 1's IB listed as the CP's:\n{stack}"


@pytest.mark.xdist_group("verilator_trace_apps")
def test_sdma_entries_do_not_repeat_cp_packets_on_the_rtl(tmp_path):
    """The SDMA's TRAP entry is written by the CP's IH writer after the CP has gone idle: the
    `[cp]` log and the CP's track showed the CP's last packet a second time (queue 1's ring
    NOP). Every CP packet is logged once, as the reference model logs it."""
    reason = sim.unavailable_reason("verilator")
    if reason:
        pytest.skip(reason)
    app = tmp_path / "gfx_then_copy.py"
    app.write_text("""import umd


def main():
    gpu = umd.open(api_version=2)
    a, b = gpu.alloc(4096, "vram"), gpu.alloc(4096, "vram")
    q = gpu.queue(priority="high")
    q.write(a, 0, 0x1234)
    q.signal().wait()
    c = gpu.queue(engine="copy")
    c.copy(b, 0, a, 0, 64)
    c.signal().wait()
    gpu.close()
    return 0
""")
    out = tmp_path / "t.json"
    r = run(str(app), "--sim", "verilator", "--kmd", "cap_sys_nice=1", "--log", "cp=info", "--trace", str(out),
            timeout=600)  # (q is HIGH: CAP_SYS_NICE)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    logged = [line for line in (r.stdout + r.stderr).splitlines() if line.startswith("[cp] ")]
    assert any(line.startswith("[cp] HQD1 RING+") for line in logged), logged  # (queue 1's ring ran)
    assert len(logged) == len(set(logged)), [line for line in logged if logged.count(line) > 1]
    where = [e["args"]["where"] for e in events(json.loads(out.read_text()))
             if e["ph"] in ("X", "i") and "header" in e.get("args", {})]
    assert where and len(where) == len(set(where)), sorted(w for w in where if where.count(w) > 1)


@pytest.mark.xdist_group("verilator_trace_apps")
def test_sdma_packets_on_the_rtl_timeline(tmp_path):
    """The copy engine's packets are slices on their own track, read from the SDMA
    parser's state machine, each COPY_LINEAR inside its INDIRECT_BUFFER; the engine's
    bursts are on the SDMA memory-bus track, not mixed in with its packets."""
    reason = sim.unavailable_reason("verilator")
    if reason:
        pytest.skip(reason)
    out = tmp_path / "t.json"
    r = run("examples/copy_pipeline.py", "--sim", "verilator", "--trace", str(out), "--", "--chunks", "3",
            timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    trace = json.loads(out.read_text())
    assert overlaps(trace) == []
    spans = [e for e in events(trace) if e.get("cat") == "sdma" and e["ph"] == "X"]
    names = [e["name"] for e in spans]
    assert names.count("COPY_LINEAR") == 3 and "FENCE" in names, names
    assert not [n for n in names if n.startswith(("read", "write"))], names  # no bursts on the packet track
    ibs = [e for e in spans if e["name"] == "INDIRECT_BUFFER"]
    for copy in (e for e in spans if e["name"] == "COPY_LINEAR"):
        assert copy["args"]["where"].startswith("IB+"), copy
        assert any(ib["ts"] <= copy["ts"] and copy["ts"] + copy["dur"] <= ib["ts"] + ib["dur"] for ib in ibs), copy
    bursts = [e for e in events(trace) if e.get("cat") == "sdma_bus"]
    assert any(e["name"].startswith("read") for e in bursts) and any(e["name"].startswith("write") for e in bursts)


@pytestmark_verilator
def test_crash_report_on_verilator(verilator_run):
    d, r, _ = verilator_run
    (report,) = (d / "crash").glob("crash-gpu_error-verilator-*.txt")
    out = r.stdout + r.stderr  # the simulator's stderr reaches us through its log, on stdout
    assert f"gpucosim: crash report written to {report}" in out
    text = report.read_text()
    for want in ("reason:  GPU error: illegal opcode 0x7b at IB+0x14",
                 "STATUS = ", "ERROR=1", "CP_ERROR = 0x007b0101: CODE=ILLEGAL_OPCODE (1)",
                 "<-- rptr: the CP is here", "-> IB1 at ", "UNKNOWN op=0x7b count=0   <-- the packet in hand",
                 "== pending IH entries ==", "== jobs ==", "in the ring: fd 3 context 1",
                 "== last ioctls ==", "ioctl(fd 3, CS, ", "== counters ==", "-- dump: IB1 at "):
        assert want in text, want
    assert "gpucosim: exit report (verilator, " in out


@pytestmark_verilator
def test_stats_json_on_verilator(verilator_run):
    d, r, _ = verilator_run
    fig = json.loads((d / "figures.json").read_text())
    assert fig["backend"] == "verilator" and fig["exit_code"] == 0
    assert fig["cycles"] > 100 and fig["ioctls"] > 10 and fig["device_calls"] >= 20
    assert 0 < fig["device_s"] and 0 < fig["app_s"]
    assert 0 < fig["device_cpu_s"]  # (the simulator's CPU time in the device calls, in this process)


@pytestmark_verilator
def test_waves_on_verilator(verilator_run):
    d, r, waves = verilator_run
    if waves is None:
        from gpucosim.trace.waves import unavailable_reason as waves_reason

        pytest.skip(waves_reason("verilator"))
    assert waves.exists() and waves.read_bytes()[:1] == b"\x00"  # an FST header block
    assert waves.stat().st_size > 10_000
    assert f"gpucosim: waveform written to {waves}" in r.stdout + r.stderr
    check_gtkw_names(waves)


def check_gtkw_names(waves):
    """Every signal of the save file is in the waveform under that very name, so GTKWave
    opens on them (a name the file lacks shows an empty view); none was dropped."""
    import pywellen
    from gpucosim.trace.waves import SIGNALS, gtkw_signals

    in_file = {v.full_name for v in pywellen.Waveform(str(waves)).all_vars()}
    saved = gtkw_signals(waves.with_suffix(".gtkw"))
    assert len(saved) == sum(len(s) for _, s in SIGNALS)
    assert [n for n in saved if n not in in_file] == []
    assert "gpu.cp.cp_state" in " ".join(saved) and all(n.startswith("tb_top.") for n in saved), saved


@pytest.mark.xdist_group("icarus_waves")
def test_waves_on_icarus(tmp_path):
    reason = sim.unavailable_reason("icarus")
    if reason:
        pytest.skip(reason)
    waves = tmp_path / "hello.fst"
    r = run("examples/hello.py", "--sim", "icarus", "--waves-file", str(waves), timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"gpucosim: waveform written to {waves}" in r.stdout + r.stderr
    check_gtkw_names(waves)


# ------------------------------------------------------------------------------ units

def test_clock_matches_the_testbench():
    from testbench.sim.cocotb_device import CLOCK_PERIOD_NS

    assert NS_PER_CYCLE == CLOCK_PERIOD_NS
    assert tl.cycles_to_us(1234) == 12.34
    assert tl.wave_time(1234) == "12340 ns"


class _Sig:
    def __init__(self, v=0):
        self.v = v

    @property
    def value(self):
        return self.v


class _Cp:
    def __init__(self):
        for n in ("cp_state", "level", "hdr", "hdr_taken_off", "hdr_addr"):
            setattr(self, n, _Sig())


def _watched_cp():
    """A CpMonitor on a stand-in CP at RUN in the ring, and `go(at, state, ...)`, which sets
    the CP's registers at cycle `at` and wakes the monitor: (monitor, timeline, go)."""
    states = fsm_states(64)
    code = {v: k for k, v in states.items()}
    t = [0]
    timeline = Timeline("test")
    cp = _Cp()
    mon = CpMonitor(cp, states, timeline, lambda: t[0])
    mon._st, mon._lv, mon._off = cp.cp_state, cp.level, cp.hdr_taken_off
    mon._ps, mon._pl, mon._po = "RUN", 0, 0

    def go(at, state, level=None, hdr=None, off=0, addr=0):
        t[0] = at
        if hdr is not None:
            cp.hdr.v, cp.hdr_taken_off.v, cp.hdr_addr.v = hdr, off, addr
        cp.cp_state.v = code[state]
        if level is not None:
            cp.level.v = level
        mon._wake()

    return mon, timeline, go


def test_cp_monitor_nests_packets_from_fsm_changes():
    """The watcher's rules on a hand-made sequence: a ring IB whose IB holds a WRITE_DATA
    and a CHAIN, a filler, then an error."""
    from spec import packets as pk
    from spec import pm4

    mon, timeline, go = _watched_cp()

    ib_hdr = pm4.indirect_buffer(0x1000, 8)[0]
    wd_hdr = pm4.write_data(0x2000, [1])[0]
    chain_hdr = pm4.indirect_buffer(0x3000, 8, chain=1)[0]
    go(10, "PAYLOAD", hdr=ib_hdr, off=0, addr=0x100)  # ring packet 0: INDIRECT_BUFFER
    go(13, "RUN", level=1)  # its last payload dword starts the IB
    go(20, "PAYLOAD", hdr=wd_hdr, off=0, addr=0x1000)  # IB1: WRITE_DATA
    go(24, "WD_COLLECT")
    go(26, "WD_WRITE")
    go(27, "WD_WAIT")
    go(31, "DONE")
    go(32, "RUN")
    go(33, "PAYLOAD", hdr=chain_hdr, off=3, addr=0x100c)  # IB1: a CHAIN to the next IB
    go(36, "EXEC_INDIRECT_BUFFER")
    go(37, "RUN")
    go(40, "RING_DONE", level=0, hdr=ib_hdr, off=0, addr=0x100)  # the IB returns
    go(41, "RPTR_WRITE")
    go(42, "RPTR_WAIT")
    go(46, "RUN")
    go(50, "RING_DONE", hdr=pk.NOP_PAD, off=4, addr=0x110)  # two one-dword ring pads: AMD's nop
    go(52, "RUN")
    go(53, "RING_DONE", hdr=pk.TYPE2_FILLER | 5, off=5, addr=0x114)  # and a type-2 with PAD bits
    go(55, "RUN")
    go(60, "ERR_DRAIN", hdr=0xC0007B00, off=6, addr=0x118)  # a bad header
    go(61, "IH_ENTRY_WRITE")
    go(70, "ERROR")
    mon.finish()
    spans = [(name, s, e) for track, ph, name, s, e, _ in timeline.events if ph == "X"]
    assert ("INDIRECT_BUFFER", 10, 46) in spans
    assert ("WRITE_DATA", 20, 32) in spans
    assert ("INDIRECT_BUFFER", 33, 37) in spans  # the CHAIN ends when the new IB starts
    assert ("data write", 26, 31) in spans
    assert ("rptr write-back", 41, 46) in spans
    assert ("pad x2", 50, 55) in spans
    instants = [name for track, ph, name, *_ in timeline.events if ph == "i"]
    assert "bad header 0xc0007b00" in instants and "CP error" in instants


def test_cp_monitor_sees_pads_inside_an_ib(caplog):
    """Inside an IB the CP takes a one-dword pad without leaving RUN: only the header's
    offset moves. Each pad is logged as the model logs it, a run of them is one slice."""
    import logging

    from spec import packets as pk
    from spec import pm4

    states = fsm_states(64)
    code = {v: k for k, v in states.items()}
    t = [0]
    timeline = Timeline("test")
    cp = _Cp()
    cp.cp_state.v, cp.level.v = code["RUN"], 1
    mon = CpMonitor(cp, states, timeline, lambda: t[0])
    mon._st, mon._lv, mon._off = cp.cp_state, cp.level, cp.hdr_taken_off
    mon._ps, mon._pl, mon._po = "RUN", 1, 0
    with caplog.at_level(logging.INFO, logger="gpucosim.cp"):
        for at, off, hdr in ((20, 5, pk.NOP_PAD), (21, 6, pk.NOP_PAD), (22, 7, pk.TYPE2_FILLER)):
            t[0] = at
            cp.hdr.v, cp.hdr_taken_off.v = hdr, off
            mon._wake()
        t[0] = 23
        cp.hdr.v, cp.hdr_taken_off.v, cp.cp_state.v = 0xC0001000, 8, code["PAYLOAD"]  # a NOP with a payload
        mon._wake()
        mon.finish()
    spans = [(name, s, e) for track, ph, name, s, e, _ in timeline.events if ph == "X"]
    assert ("pad x3", 20, 23) in spans
    pads = [r.getMessage() for r in caplog.records if r.name == "gpucosim.cp"]
    assert pads[:3] == ["IB1+0x0014: NOP  n_payload=0", "IB1+0x0018: NOP  n_payload=0",
                        "IB1+0x001c: " + pm4.describe(pm4.decode([pk.TYPE2_FILLER], 0))]


def test_cp_monitor_does_not_take_another_engines_ih_entry_for_a_packet(caplog):
    """The CP's IH writer appends the SDMA's entries (TRAP, POLL_TIMEOUT, SDMA_ERROR) between
    two CP packets: its FSM goes from RUN to IH_ENTRY_WRITE (IH_DONE when the IH ring is off
    or full) and back to RUN with no header taken. The watcher took that for a packet starting
    and logged, and drew, the last packet again (`[cp] HQD1 RING+0x0070: NOP` twice after an
    SDMA TRAP): one packet, one slice and one log line."""
    import logging

    from spec import pm4

    mon, timeline, go = _watched_cp()

    nop = pm4.nop(3)[0]
    ib_hdr = pm4.indirect_buffer(0x1000, 8)[0]
    with caplog.at_level(logging.INFO, logger="gpucosim.cp"):
        go(10, "PAYLOAD", hdr=nop, off=0x1c, addr=0x70)  # a ring NOP
        go(14, "RING_DONE")
        go(15, "RPTR_WRITE")
        go(16, "RPTR_WAIT")
        go(20, "RUN")
        for at, path in ((30, ("IH_ENTRY_WRITE", "IH_ENTRY_WAIT", "IH_WB_WRITE", "IH_WB_WAIT", "IH_DONE")),
                         (50, ("IH_DONE",))):  # the SDMA's entry; then one the IH ring drops
            for k, state in enumerate(path):
                go(at + k, state)
            go(at + len(path), "RUN")
        go(60, "PAYLOAD", hdr=ib_hdr, off=0x20, addr=0x80)  # an IB, with an SDMA entry inside it
        go(63, "RUN", level=1)
        go(70, "IH_ENTRY_WRITE")
        go(72, "IH_DONE")
        go(73, "RUN")
        go(80, "RING_DONE", level=0, hdr=ib_hdr, off=0x20, addr=0x80)
        go(84, "RUN")
        mon.finish()
    spans = [(name, s, e) for track, ph, name, s, e, _ in timeline.events if ph == "X"]
    packets = [sp for sp in spans if sp[0] in ("NOP", "INDIRECT_BUFFER")]
    assert packets == [("NOP", 10, 20), ("INDIRECT_BUFFER", 60, 84)], spans
    logged = [r.getMessage() for r in caplog.records if r.name == "gpucosim.cp"]
    assert logged == ["RING+0x0070: NOP", "RING+0x0080: INDIRECT_BUFFER"], logged
    assert mon.packets == 2
    # ... and one appended while a WAIT_REG_MEM sleeps between its polls (the FSM goes back to
    # WRM_SLEEP): a phase of its own, named as the copy engine's, not a plain "IH entry" of the wait
    wait = 0xC0053C00  # a WAIT_REG_MEM header
    for at, state, hdr in ((100, "PAYLOAD", wait), (107, "WRM_READ", None), (108, "WRM_RESP", None),
                           (110, "WRM_SLEEP", None), (120, "IH_ENTRY_WRITE", None), (121, "IH_ENTRY_WAIT", None),
                           (126, "IH_DONE", None), (127, "WRM_SLEEP", None), (130, "WRM_READ", None),
                           (131, "WRM_RESP", None), (133, "DONE", None), (134, "RUN", None)):
        go(at, state, hdr=hdr, off=0x30, addr=0x100 if hdr else 0)
    spans = [(name, s, e) for track, ph, name, s, e, _ in timeline.events if ph == "X" and s >= 100]
    assert ("WAIT_REG_MEM", 100, 134) in spans and ("IH entry (copy engine)", 120, 127) in spans, spans
    assert not [sp for sp in spans if sp[0] == "IH entry"], spans


def test_timeline_slices_never_partly_overlap_on_a_track():
    """Perfetto draws one track's slices as a stack and drops slices that partly overlap:
    concurrent work goes to extra lanes of its track, nesting stays on its lane."""
    from gpucosim.trace.timeline import Timeline, overlaps

    tl = Timeline("model")
    tl.span("dma", "burst a", 0, 10)
    tl.span("dma", "burst b", 5, 15)  # partly overlaps a
    tl.span("dma", "burst c", 12, 20)  # partly overlaps b, not a
    tl.span("cp", "IB", 0, 100)
    tl.span("cp", "packet", 10, 20)  # nests in IB: same lane
    tl.span("fence", "f1", 0, 50)
    tl.span("fence", "f2", 40, 60)
    j = tl.to_json()
    assert overlaps(j) == []
    tid = {e["name"]: e["tid"] for e in j["traceEvents"] if e.get("ph") == "X"}
    assert tid["burst a"] == tid["burst c"] != tid["burst b"]
    assert tid["IB"] == tid["packet"] and tid["f1"] != tid["f2"]
    names = {e["tid"]: e["args"]["name"] for e in j["traceEvents"] if e.get("name") == "thread_name" and e["pid"] == 2}
    assert names[tid["burst b"]] == "DMA bursts (2)"
    # and the check itself finds a partial overlap
    bad = {"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "name": "a"},
                           {"ph": "X", "pid": 1, "tid": 1, "ts": 5, "dur": 10, "name": "b"}]}
    assert overlaps(bad) == ["track (1, 1): b [5000, 15000) overlaps a [0, 10000)"]


def test_two_clients_first_contexts_are_told_apart_by_their_fd():
    """Context ids are per file: two clients' first contexts are both 1. The crash report's
    jobs, the exit report's queues and the timeline's run_job and fence events name the
    file's fd with the id (they named the id alone: "context 1" twice)."""
    import kmd_model
    import umd
    from gpucosim.crash import CrashReporter, exit_report
    from gpucosim.trace.swtrace import Tracer
    from gpucosim.trace.timeline import Timeline
    from testbench.refmodel import RefModel

    dev = RefModel()
    tl = Timeline("model")
    tracer, crash = Tracer(tl, dev.now), CrashReporter(".", "app", "model")
    kmd = kmd_model.bind(dev, observers=[tracer.observe, crash.observe])
    tracer.attach(kmd)
    crash.attach(kmd)
    gpus = [umd.open(), umd.open()]
    fds = [g.ws.file.fd for g in gpus]
    assert fds[0] != fds[1]
    queues = [g.queue() for g in gpus]
    gates = [g.alloc(4096) for g in gpus]
    for q, gate in zip(queues, gates):
        assert q.ctx_id == 1
        q.wait_mem(gate, 0, 1)
        q.flush()
    kmd.service()
    jobs = crash.render("test").split("== jobs ==")[1]
    for fd in fds:
        assert re.search(rf"^  (in the ring|queued): fd {fd} context 1 seq ", jobs, re.M), jobs
    text, _ = exit_report(kmd, queues, {}, at_exit=False)
    # (the two queues alike: one line, which names both fds)
    assert f"  2 queues alike (fds {min(fds)}-{max(fds)}, ctx 1 on CP queue 0 (gfx); each): " in text, text
    for gate in gates:
        gate.u32[0] = 1
    for q in queues:
        q.finish()
    names = [e[2] for e in tl.events]
    fences = [e[5] for e in tl.events if e[0] == "fence" and "context" in e[5]]
    for fd in fds:
        assert any(re.fullmatch(rf"run_job fd {fd} ctx 1 seq 0x\d+", n) for n in names), names
        assert any(a["fd"] == fd and a["context"] == 1 for a in fences), fences
    for g in gpus:
        g.close()


def test_crash_report_of_a_queue_0_timeout_while_the_cp_works_in_queue_1(tmp_path):
    """A queue-0 job timed out (polling in its IB1) while the CP's parser was in queue 1's
    ring: the CP's registers (the RTL's probe) held queue 1's place, level RING, and the
    report said "the CP is at level RING" with no IB, of queue 0's timeout. It describes
    queue 0's own state: the level its STATUS reads, the job's IB with the packet the timeout
    found it stuck in marked, and a line saying the CP's registers hold the other queue's
    place. The model's probe, whose level was the last packet's whichever queue ran it, is
    queue 0's too."""
    import kmd_model
    import umd
    from gpucosim.crash import CrashReporter
    from gpucosim.run.launch import _model_probe
    from testbench.refmodel import RefModel

    dev = RefModel()
    in_queue_1 = {}  # what the RTL's probe reads with the parser in queue 1's ring

    def probe():
        return in_queue_1 or _model_probe(dev)

    crash = CrashReporter(tmp_path, "app", "model", probe)
    kmd = kmd_model.bind(dev, observers=[crash.observe], job_timeout=3000, cap_sys_nice=True)  # (h is HIGH)
    crash.attach(kmd)
    try:
        gpu = umd.open()
        flag, a = gpu.alloc(4096, "gtt"), gpu.alloc(4096, "vram")
        q, h = gpu.queue(), gpu.queue(priority="high")
        h.write(a, 8, 1)
        h.finish()
        hq = kmd.hqd_ring
        in_queue_1.update({"level": 0, "queue": 1, "header_addr": hq.gpu_addr + 4 * (hq.wptr & hq.mask),
                           "ibs": [{"level": 1, "base": 0x3F100000, "size_dw": 8, "pos_dw": 8},
                                   {"level": 2, "base": 0, "size_dw": 0, "pos_dw": 0}]})
        q.write(a, 0, 5)
        q.wait_mem(flag, 0, 1)
        with pytest.raises(umd.GpuError, match="timed out"):
            q.signal().wait()
        (report,) = crash.written
        stack = report.read_text().split("== IB stack and the packet in hand ==")[1].split("\n== ")[0]
        assert "the CP is at level IB1, packet header at " in stack, stack
        assert "level RING" not in stack, stack
        assert "WAIT_REG_MEM" in stack and "<-- the packet in hand" in stack, stack
        assert "its other queue's place" in stack, stack
        # the model: queue 0's level, though queue 1 ran the last packet (at its ring)
        dev._hq1.last, dev._cur_level, dev._frames = 1, 0, [[0x3F000000, 24, 5]]
        assert _model_probe(dev)["level"] == 1
        gpu.close()
    finally:
        kmd_model.unbind()


def test_the_exit_report_names_each_queues_engine():
    """The exit report's per-queue lines said "queue fd 3 ctx 1: ..." alone: which engine ran
    them (the CP's queue 0 or 1, the SDMA) was left to guess. Each names its engine, as the
    KMD routes it (a high-priority context's gfx jobs go to the CP's queue 1)."""
    import kmd_model
    import umd
    from gpucosim.crash import exit_report
    from testbench.refmodel import RefModel

    kmd = kmd_model.bind(RefModel(), cap_sys_nice=True)  # (a queue is HIGH: CAP_SYS_NICE)
    try:
        gpu = umd.open()
        queues = [gpu.queue(), gpu.queue(priority="high"), gpu.queue(engine="copy")]
        buf = gpu.alloc(4096)
        queues[2].fill(buf, 0, 64, 7)
        queues[2].close()
        text, _ = exit_report(kmd, queues, {}, at_exit=False)
        lines = [ln for ln in text.splitlines() if ln.startswith("  queue fd")]
        assert [ln.split(":")[0] for ln in lines] == [
            f"  queue fd {gpu.ws.file.fd} ctx {queues[0].ctx_id} on CP queue 0 (gfx)",
            f"  queue fd {gpu.ws.file.fd} ctx {queues[1].ctx_id} on CP queue 1 (gfx_high)",
            f"  queue fd {gpu.ws.file.fd} ctx {queues[2].ctx_id} on the SDMA (sdma0)"], text
        buf.free()
        gpu.close()
    finally:
        kmd_model.unbind()


def test_the_exit_report_gives_devices_and_queues_alike_one_line_and_counts_in_english():
    """An app that opened 24 devices got 24 near-identical VA and pools lines (and as many
    queue lines and "never closed" leaks); the report said "1 flushes", "1 hits", "1 API
    calls", "1 free range(s)". Devices and queues alike are one line with their count and
    fds; one alone keeps its own line; every count agrees with its noun."""
    import re

    import kmd_model
    import umd
    from gpucosim.crash import _fds, exit_report
    from testbench.refmodel import RefModel

    assert [_fds(x) for x in ([3], [3, 4, 5], [7, 3, 5, 4, 9])] == ["fd 3", "fds 3-5", "fds 3-5, 7, 9"]
    kmd = kmd_model.bind(RefModel())
    try:
        gpus, queues = [], []
        for _ in range(24):
            gpu = umd.open()
            q = gpu.queue()
            q.write(gpu.alloc(64), 0, 1)
            q.finish()
            gpus.append(gpu)
            queues.append(q)
        odd = umd.open(pools=False)  # (unlike the others: a line of its own)
        text, _ = exit_report(kmd, queues, {}, devices=gpus + [odd])
        lines = text.splitlines()
        fds = _fds([g.ws.file.fd for g in gpus])
        assert fds == f"fds {gpus[0].ws.file.fd}-{gpus[-1].ws.file.fd}"
        assert [ln.split(":")[0] for ln in lines if ln.startswith(("  VA", "  pools"))] == [
            f"  VA (24 devices alike", "  pools (each of the 24)", f"  VA (model, fd {odd.ws.file.fd})", "  pools"], text
        assert f"  VA (24 devices alike: model, {fds}; each): " in text
        assert f"  LEAK: the app never closed 25 devices (model, {_fds([g.ws.file.fd for g in gpus + [odd]])}): " \
               "gpu.close() frees a device's buffers, queues and pools" in lines
        (q_line,) = [ln for ln in lines if "queue" in ln and "API call" in ln]
        assert q_line.startswith(f"  24 queues alike ({fds}, ctx {queues[0].ctx_id} on CP queue 0 (gfx); each): "
                                 "1 API call, 1 flush, IB pool 1 IB of "), q_line
        assert "1 submission" not in q_line and "0 submissions in flight" in q_line
        # no count with the wrong number: "1 flushes", "2 hit,", "(s)"
        assert "(s)" not in text and not re.search(r"\b1 (flushes|hits|misses|ranges|free ranges|entries|slabs|"
                                                     r"API calls|IBs|chains|submissions|doorbells|interrupts|"
                                                     r"GPU resets|queue resets|BOs|bytes|cycles)\b", text), text
        one, _ = exit_report(kmd, queues[:1], {}, devices=gpus[:1])
        assert f"  VA (model, fd {gpus[0].ws.file.fd}): " in one and "  pools: BO cache " in one
        assert f"  queue fd {gpus[0].ws.file.fd} ctx {queues[0].ctx_id} on CP queue 0 (gfx): 1 API call, 1 flush, " \
               "IB pool 1 IB of " in one
        for g in gpus + [odd]:
            g.close()
    finally:
        kmd_model.unbind()


def test_a_crash_reports_listing_counts_the_packets_it_leaves_out_in_english():
    """A crash report's listing around the packet in hand said "... 1 packets before"."""
    from gpucosim.crash import LISTING_AROUND, marked_listing
    from spec import pm4

    nops = [pm4.nop(0)[0]] * (2 * LISTING_AROUND + 3)  # (one-dword NOPs)
    text = marked_listing(nops, 0x1000, 0x1000 + 4 * (LISTING_AROUND + 1))
    lines = text.splitlines()
    assert lines[0] == "  ... 1 packet before" and lines[-1] == "  ... 1 packet after", text
    text = marked_listing(nops + nops[:1], 0x1000, 0x1000 + 4 * (LISTING_AROUND + 1))
    assert text.splitlines()[-1] == "  ... 2 packets after", text


def test_a_timeline_keeps_its_first_max_events_and_says_how_many_it_dropped(tmp_path, monkeypatch, capsys):
    """An 11-minute --trace run kept every event: 3.6 GB of memory and a 930 MB file that
    `gpucosim plot` and `disasm` then refused. The timeline keeps its first MAX_EVENTS, counts
    the rest, and says so in the file and on stderr."""
    from gpucosim import cli
    from gpucosim.trace import timeline as tl

    t = tl.Timeline("model")
    monkeypatch.setattr(tl, "MAX_EVENTS", 3)
    for i in range(5):
        t.instant("umd", f"e{i}", i)
    t.span("umd", "late", 5, 6)
    assert len(t) == 3 and t.dropped == 3
    t.write(tmp_path / "t.json")
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["otherData"]["dropped_events"] == 3
    assert [e["name"] for e in data["traceEvents"] if e["ph"] != "M"] == ["e0", "e1", "e2"]
    monkeypatch.setattr(tl, "MAX_EVENTS", 10)
    assert cli.main(["run", "examples/hello.py", "--sim", "model", "--trace", str(tmp_path / "h.json")]) == 0
    said = [ln for ln in capsys.readouterr().err.splitlines() if "timeline written" in ln]
    # the count says what it counts: the file's events, the metadata naming tracks among them
    n = len(json.loads((tmp_path / "h.json").read_text())["traceEvents"])
    assert said and f"({n} events: 10 slices and instants, {n - 10} naming the processes and tracks; the " in said[0]
    assert " after them dropped: a timeline keeps the first 10)" in said[0]


def test_crash_report_counts_one_ih_entry_as_one():
    """The IH line said "1 entries handled so far" (the count as the driver keeps it, the
    noun in the plural whatever it was)."""
    import kmd_model
    import umd
    from gpucosim.crash import CrashReporter
    from testbench.refmodel import RefModel

    dev = RefModel()
    crash = CrashReporter(".", "app", "model")
    kmd = kmd_model.bind(dev, observers=[crash.observe])
    crash.attach(kmd)
    gpu = umd.open()
    try:
        lines = [ln for ln in crash.render("test").splitlines() if "handled so far" in ln]
        assert len(lines) == 1, lines
        n = kmd.ih.entries
        assert lines[0].endswith(f"; {n} {'entry' if n == 1 else 'entries'} handled so far"), (n, lines)
        assert n == 1  # (the case the plural got wrong: the bind's own entry, none of the app's yet)
    finally:
        gpu.close()
