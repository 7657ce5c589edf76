"""What a first simulator build says it costs, off a terminal, before anything was measured
here: "1-3 minutes" took 5 min 18 s (2 min 14 s of CPU) on a shared 2-core machine. It says
the CPU time, and that the wait depends on the cores and load it names (no time is asserted:
the machine's)."""

from __future__ import annotations

from gpucosim.run.launch import first_build_words


def test_a_verilator_build_names_its_cpu_time_and_what_the_wait_depends_on(monkeypatch):
    import os

    said = first_build_words("verilator", cores=2, load=3.5)
    assert said == ("about 2 minutes of CPU time; the wait depends on the cores free: 2 cores here, load 3.5 "
                    "(a shared 2-core machine took 5 minutes)")

    def no_load():
        raise OSError("no load average")

    monkeypatch.setattr(os, "getloadavg", no_load)
    assert "1 core here (" in first_build_words("verilator", cores=1)  # (no load average: not said)


def test_this_machines_cores_and_load_are_named_by_default():
    import os

    said = first_build_words("verilator")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert f" {cores} core" in said and ", load " in said, said


def test_an_icarus_build_is_under_a_minute():
    assert first_build_words("icarus") == "under a minute"  # (as test_cli_run pins on a real build)
