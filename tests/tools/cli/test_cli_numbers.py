"""Numbers on gpucosim's command lines: every address, size, count, cycle and register value
takes the same forms (decimal or 0x hex: testbench.argtypes.parse_int) and refuses a bad
one in one line naming the option (--max-data and plot's --from/--to refused hex while
--base and regs took it; --to 1e308 printed numpy's overflow warning)."""

from __future__ import annotations

import json

import pytest

from .cli_helpers import gpucosim, usage_error

WORDS = ["disasm", "-x", "c0033700", "500", "2000000", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"]
TRACE = [{"ph": "X", "ts": 1, "dur": 2, "pid": 1, "tid": 1, "name": "a"}]


@pytest.mark.parametrize("decimal, hexa", [
    ([*WORDS, "--base", "8192"], [*WORDS, "--base", "0x2000"]),
    ([*WORDS, "--max-data", "12"], [*WORDS, "--max-data", "0xc"]),
    (["regs", "CP_ERROR", "8060929"], ["regs", "CP_ERROR", "0x7b0001"]),
    (["regs", "20"], ["regs", "0x14"]),
])
def test_decimal_and_hex_mean_the_same(decimal, hexa):
    a, b = gpucosim(*decimal), gpucosim(*hexa)
    assert a.returncode == 0 and not a.stderr, a.stderr
    assert a.stdout == b.stdout and not b.stderr


def test_plot_windows_and_the_bus_width_take_hex(tmp_path):
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(TRACE))
    r = gpucosim("plot", str(trace), "-o", str(tmp_path / "p.png"), "--from", "0x64", "--to", "300")
    assert r.returncode == 0 and r.stdout == f"gpucosim: wrote {tmp_path / 'p.png'}\n" and not r.stderr, r.stderr
    r = gpucosim("run", "examples/hello.py", "--sim", "model", "--data-width", "0x80", "--kmd", "job_timeout=0x4e20")
    assert r.returncode == 0 and "hello: OK on model" in r.stdout, r.stderr


OPTIONS = [  # (argv before the value, the option as argparse names it)
    ([*WORDS[:3], "--base"], "--base"),
    ([*WORDS[:3], "--max-data"], "--max-data"),
    (["regs", "CP_ERROR"], "VALUE"),
    (["plot", "t.json", "-o", "x.png", "--from"], "--from"),
    (["plot", "t.json", "-o", "x.png", "--to"], "--to"),
]


@pytest.mark.parametrize("before, opt", OPTIONS, ids=[o for _, o in OPTIONS])
@pytest.mark.parametrize("bad", ["zz", "1e3", "0x", "", "1.5", "\u0663", "9" * 200])
def test_a_bad_number_is_one_line_naming_the_option(capsys, before, opt, bad):
    """(a digit of another script was taken: int("\u0663") is 3; 200 digits were Python's
    "Exceeds the limit (4300 digits)" had there been 5000)"""
    assert usage_error(capsys, *before, bad) == \
        f"gpucosim {before[0]}: error: argument {opt}: must be an integer (decimal or 0x hex), not {bad!r}"


@pytest.mark.parametrize("argv, message", [
    ([*WORDS[:3], "--max-data", "0"], "argument --max-data: must be at least 1, not 0"),
    ([*WORDS[:3], "--max-data", "0x10001"], "argument --max-data: must be at most 65536, not 0x10001"),
    ([*WORDS[:3], "--base=-4"], "argument --base: must be at least 0, not -4"),
    (["regs", "CP_ERROR", "-1"], "argument VALUE: must be at least 0, not -1"),
    (["plot", "t.json", "-o", "x.png", "--from=-1"], "argument --from: must be at least 0, not -1"),
    (["plot", "t.json", "-o", "x.png", "--to", str(1 << 49)],
     f"argument --to: must be at most {1 << 48}, not {1 << 49}"),
    (["run", "examples/hello.py", "--data-width", "0x41"],
     "argument --data-width: '0x41' is not a bus width: choose 32, 64, 128 or 256"),
])
def test_an_out_of_range_number_is_one_line(capsys, argv, message):
    assert usage_error(capsys, *argv) == f"gpucosim {argv[0]}: error: {message}"


@pytest.mark.parametrize("value", ["1e308", "-1e308", "inf", "nan", "1e-308", str(10 ** 300), "0x" + "f" * 80])
def test_plot_refuses_any_window_out_of_range_without_a_warning(tmp_path, value):
    """--to 1e308 drew a picture after numpy's "RuntimeWarning: overflow encountered"."""
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(TRACE))
    r = gpucosim("plot", str(trace), "-o", str(tmp_path / "p.png"), f"--to={value}")
    assert r.returncode == 2 and not r.stdout, r.stdout
    assert r.stderr.startswith("gpucosim plot: error: argument --to: must ") and len(r.stderr.splitlines()) == 1, \
        r.stderr
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize("event", [{"ts": 1e308, "dur": 1e308}, {"ts": 1, "dur": 1e308}, {"ts": -1e308, "dur": 1},
                                   {"ts": 1e300, "dur": 1}])
def test_plot_refuses_events_out_of_range_without_a_traceback(tmp_path, event):
    """A trace whose event lay out at 1e308 us was matplotlib's "Axis limits cannot be NaN or
    Inf", or "cannot convert float infinity to integer", as a traceback."""
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps([*TRACE, {"ph": "X", "pid": 1, "tid": 1, "name": "far", **event}]))
    r = gpucosim("plot", str(trace), "-o", str(tmp_path / "p.png"))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith(f"gpucosim plot: error: {trace}: event 1 ('X') lies outside cycles 0 to {1 << 48} "), \
        r.stderr
