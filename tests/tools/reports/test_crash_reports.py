"""What a run reports of itself: one crash report for one failure, the exit report's kernel
buffers, the status line."""

from __future__ import annotations

import re


from ..cli.cli_helpers import gpucosim

# the job timer ends a wait nobody satisfies; the app does not catch the GpuError
HANG = ("import umd\n"
        "def main():\n"
        "    gpu = umd.open()\n"
        "    buf = gpu.alloc(64)\n"
        "    q = gpu.queue()\n"
        "    q.wait_mem(buf, 0, 2)\n"
        "    q.finish(timeout=None)\n")


def test_an_uncaught_gpu_error_names_its_report_and_writes_no_second(tmp_path):
    """A GPU error or job timeout has its report written before recovery; the app dying of
    the GpuError it raised wrote a second, after recovery (the ring reset, the packet in hand
    gone), under a third line saying the same error: two reports of one failure."""
    app = tmp_path / "hang.py"
    app.write_text(HANG)
    r = gpucosim("run", str(app), "--sim", "model", "--kmd", "job_timeout=20000", "--crash-dir",
                 str(tmp_path / "crash"))
    assert r.returncode == 1, r.stderr
    reports = list((tmp_path / "crash").glob("crash-hang-model-*.txt"))
    assert len(reports) == 1, r.stderr
    assert "== exception in the app ==" not in reports[0].read_text()
    lines = r.stderr.splitlines()
    assert lines[0].startswith("gpucosim: job timeout: job 0x1 timed out on gfx"), r.stderr
    assert lines[1] == f"gpucosim: crash report written to {reports[0]}"
    assert lines[-1] == (f"gpucosim: exception in the app: GpuError, the GPU error above (its crash report: "
                         f"{reports[0]})"), r.stderr
    # an exception of the app's own still has its report
    app.write_text(HANG.replace("    q.finish(timeout=None)\n", "    raise RuntimeError('mine')\n"))
    r = gpucosim("run", str(app), "--sim", "model", "--crash-dir", str(tmp_path / "crash2"))
    assert r.returncode == 1 and "gpucosim: exception in the app: RuntimeError: mine" in r.stderr, r.stderr
    assert len(list((tmp_path / "crash2").glob("crash-hang-model-*.txt"))) == 1


def test_the_exit_reports_kernel_buffers_say_a_repeated_name_once(tmp_path):
    """An app with 8 MiB mapped has a page table for every 2 MiB: the exit report listed
    "vm L1 table, vm L1 table, vm L1 table, ..." once for each."""
    app = tmp_path / "big.py"
    app.write_text("import umd\n"
                   "def main():\n"
                   "    gpu = umd.open()\n"
                   "    global bufs\n"
                   "    bufs = [gpu.alloc(2 << 20, 'vram') for _ in range(4)]\n")  # (left open: the report shows them)
    r = gpucosim("run", str(app), "--sim", "model", "--stats")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stderr.splitlines() if x.startswith("  kernel buffers: "))
    names = line.split("): ", 1)[1].split(", ")
    assert len(names) == len(set(names)), line
    assert any(re.fullmatch(r"vm L1 table \(x\d+\)", n) for n in names), line


def test_the_status_line_counts_one_ioctl_in_the_singular():
    """A run's status line said "1 ioctls" while the app waited in its first one."""
    from gpucosim.run.console import status_text

    assert status_text("verilator: big", {"cycles": 332, "ioctls": 1}, 4.0, 0) == (
        "verilator: big  |  332 cycles  1 ioctl  4 s")
    assert status_text("verilator: big", {"cycles": 0, "ioctls": 2}, 4.0, 0).endswith("  2 ioctls  4 s")
