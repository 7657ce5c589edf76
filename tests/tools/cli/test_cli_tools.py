"""The `gpucosim` tools that run no app: regs (the register table, one register, a decoded
value), disasm (words, text, binary and dumps), bench and plot, with their outputs and
error messages (pinned: they are the interface a user reads)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from gpucosim import cli
from gpucosim.dump import format_dump
from spec import pm4, sdma

from .cli_helpers import ROOT, usage_error


# ------------------------------------------------------------------------------ regs

def test_regs_table_register_and_decode(capsys):
    assert cli.main(["regs"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["offset", "register", "reset", "fields"]
    assert any(line.split()[1] == "RB_DOORBELL" for line in out[1:])
    # every column starts where its heading does, after a name longer than 20 characters too
    # (PERF_SDMA_DWORDS_FETCHED, VM_CONTEXT_PT_BASE_LO[16] pushed their rows' columns right)
    reset_at, fields_at = out[0].index("reset"), out[0].index("fields")
    assert any(len(line.split()[1]) > 20 for line in out[1:])
    for line in out[1:]:
        assert line[reset_at - 1] == " " and line[reset_at] != " ", line
        assert line[fields_at - 1] == " " and line[fields_at] != " ", line
    assert cli.main(["regs", "cp_error"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("CP_ERROR @ 0x0c0, reset: the device's state (driven by the hardware)")
    assert cli.main(["regs", "INT_STATUS"]) == 0
    assert capsys.readouterr().out.startswith(
        "INT_STATUS @ 0x020, reset 0x00000000 but for IH_PENDING (the device's state)")
    assert "values: NONE=0, ILLEGAL_OPCODE=1" in out
    assert cli.main(["regs", "CP_ERROR", "0x7b0101"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "CP_ERROR @ 0x0c0 = 0x007b0101",
        "  CODE             [7:0]    RO          ILLEGAL_OPCODE (1)",
        "  LEVEL            [9:8]    RO          IB1 (1)",
        "  OPCODE           [23:16]  RO          0x7b",
    ]
    assert cli.main(["regs", "0x14", "0x105"]) == 0  # by offset: STATUS
    assert capsys.readouterr().out.splitlines()[0] == "STATUS @ 0x014 = 0x00000105"
    assert cli.main(["regs", "PERF_PACKETS[2]", "7"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "PERF_PACKETS[2] @ 0x128 = 0x00000007"
    assert cli.main(["regs", "0x12c", "7"]) == 0  # an offset names its element
    assert capsys.readouterr().out.splitlines()[0] == "PERF_PACKETS[3] @ 0x12c = 0x00000007"
    # an array named alone: the value is any element's, and the header says so (it decoded
    # "PERF_PACKETS[0] @ 0x120", an element nobody had asked for)
    assert cli.main(["regs", "PERF_PACKETS", "7"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "PERF_PACKETS[0..7] @ 0x120..0x13c = 0x00000007 (any element: their fields are the same; PERF_PACKETS[i] "
        "names one)",
        "  COUNT            [31:0]   RO          0x7"]


def test_regs_names_the_array_element_asked_for(capsys):
    """`gpucosim regs PERF_PACKETS[2]` (or its offset, 0x128) describes that element: its own
    offset, not element 0's 0x120 with the index dropped; the array's name alone describes
    the array from its base, as before."""
    for asked in ("PERF_PACKETS[2]", "perf_packets[0x2]", "0x128"):
        assert cli.main(["regs", asked]) == 0
        assert capsys.readouterr().out.splitlines()[0] == \
            "PERF_PACKETS[2] @ 0x128, reset: the device's state (driven by the hardware), element 2 of an " \
            "array of 8 (4-byte stride)", asked
    assert cli.main(["regs", "VM_CONTEXT_PT_BASE_LO[15]"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == \
        "VM_CONTEXT_PT_BASE_LO[15] @ 0x37c, reset 0x00000000, element 15 of an array of 16 (4-byte stride)"
    assert cli.main(["regs", "PERF_PACKETS"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == \
        "PERF_PACKETS @ 0x120, reset: the device's state (driven by the hardware), array of 8 (4-byte stride)"


def test_regs_decodes_a_vm_faults_access_and_cause(capsys):
    """VM_FAULT_STATUS's ACCESS and CAUSE printed as bare numbers: their names are spec/vm.py's
    Access and Cause (the MMU's, the model's and the C header's), as CP_ERROR.CODE's are
    CpError's; a value no member has says so, with the enum's name."""
    assert cli.main(["regs", "VM_FAULT_STATUS", "0x2325"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "VM_FAULT_STATUS @ 0x220 = 0x00002325",
        "  VMID             [3:0]    RO          5",
        "  ACCESS           [6:4]    RO          FETCH (2)",
        "  LEVEL            [9:8]    RO          3",
        "  CAUSE            [13:12]  RO          RANGE (2)",
    ]
    assert cli.main(["regs", "VM_FAULT_STATUS", "0x1070"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2] == "  ACCESS           [6:4]    RO          7 (no Access value)"
    assert out[4] == "  CAUSE            [13:12]  RO          PERMISSION (1)"
    assert cli.main(["regs", "VM_FAULT_STATUS"]) == 0
    assert "values: READ=0, WRITE=1, FETCH=2, DMA_READ=3, DMA_WRITE=4" in capsys.readouterr().out


def test_regs_says_when_a_write_is_ignored(capsys):
    """A field locked by another (spec/regs.rdl swwel: a ring's base, size and rptr write-back
    address) is "RW, ignored while <lock>=1", every one the map has, and no other field is;
    a register's columns widen to its longest access."""
    from kmd_model import regs

    locked = {(r.NAME, f.name): f.swwel for r in regs.REGISTERS for f in r.FIELDS if f.swwel}
    assert ("RB_RPTR_ADDR_LO", "ADDRESS") in locked and ("SDMA_RB_CNTL", "RB_SIZE") in locked
    for r in regs.REGISTERS:
        assert cli.main(["regs", r.NAME]) == 0
        lines = capsys.readouterr().out.splitlines()
        for f in r.FIELDS:
            (line,) = [x for x in lines if x.split()[:1] == [f.name]]
            rest = line.split(None, 2)[2]  # (after the name and the bits: the access, the description)
            lock = locked.get((r.NAME, f.name))
            want = f"RW, ignored while {lock}=1" if lock else f.access
            assert rest == want or rest.startswith(want + "  "), line
    assert cli.main(["regs", "SDMA_RB_CNTL", "0x1d"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "SDMA_RB_CNTL @ 0x40c = 0x0000001d",
        "  RB_ENABLE             [0]      RW                                          1",
        "  RB_SIZE               [5:1]    RW, ignored while SDMA_RB_CNTL.RB_ENABLE=1  0xe",
        "  RPTR_WRITEBACK_ENABLE [12]     RW                                          0",
    ]


def test_regs_errors(capsys):
    assert usage_error(capsys, "regs", "STATSU") == \
        "gpucosim regs: error: no register named 'STATSU' (did you mean STATUS, INT_STATUS?)"
    assert usage_error(capsys, "regs", "0x3") == ("gpucosim regs: error: no register at offset 0x3: registers are "
                                                  "dwords at offsets that are multiples of 4 (0x0 is ID)")
    assert usage_error(capsys, "regs", "PERF_PACKETS[9]") == \
        "gpucosim regs: error: PERF_PACKETS[9] is out of range: the array has 8 registers"
    assert usage_error(capsys, "regs", "STATUS", "lots") == \
        "gpucosim regs: error: argument VALUE: must be an integer (decimal or 0x hex), not 'lots'"
    assert usage_error(capsys, "regs", "STATUS", "0x100000000") == \
        "gpucosim regs: error: argument VALUE: must fit in 32 bits (at most 0xffffffff), not 0x100000000"


@pytest.mark.parametrize("name", ["CP_ERROR[5]", "cp_error[0]"])
def test_regs_refuses_an_index_on_a_register_that_is_no_array(capsys, name):
    """CP_ERROR[5] said "out of range: the array has 1 registers" of a register that is no
    array, and CP_ERROR[0] was taken as CP_ERROR."""
    assert usage_error(capsys, "regs", name) == \
        f"gpucosim regs: error: CP_ERROR is one register, not an array: give it without [{name[9:-1]}]"


# ------------------------------------------------------------------------------ disasm

WD = pm4.write_data(0x2000000, [0x12345678], wr_confirm=1)


def test_disasm_words_text_binary_and_dumps(capsys, tmp_path):
    assert cli.main(["disasm", "-x", *(f"{w:08x}" for w in WD)]) == 0
    assert capsys.readouterr().out == "0x0000: c0033700  WRITE_DATA  wr_confirm=1 addr=0x02000000 data=[0x12345678]\n"
    text = tmp_path / "ib.txt"
    text.write_text("# an IB\n0x1000: " + " ".join(f"0x{w:x}" for w in WD) + "\n" + "80000000\n")
    assert cli.main(["disasm", str(text)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("0x1000: c0033700  WRITE_DATA") and out[1] == "0x1014: 80000000  TYPE2 FILLER"
    binary = tmp_path / "ib.bin"
    binary.write_bytes(b"".join(w.to_bytes(4, "little") for w in WD))
    assert cli.main(["disasm", str(binary), "--base", "0x2000"]) == 0
    assert capsys.readouterr().out.startswith("0x2000: c0033700  WRITE_DATA")
    report = tmp_path / "crash.txt"  # prose around named dumps, as a crash report has
    report.write_text("gpucosim crash report\nreason: x\n== dumps ==\n" + format_dump("IB1 at 0x3000", 0x3000, WD)
                      + "\n" + format_dump("ring", 0x100, pm4.pad(3)) + "\n")
    assert cli.main(["disasm", str(report)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "IB1 at 0x3000 (5 dwords)" and out[1].startswith("0x3000: c0033700  WRITE_DATA")
    assert out[3] == "ring (3 dwords at 0x100)"
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": [], "otherData": {"dumps": [
        {"name": "CS seq 1 IB at 0x4000 (5 dwords)", "base": 0x4000, "dwords": WD}]}}))
    assert cli.main(["disasm", str(trace), "--only", "CS"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("0x4000: c0033700  WRITE_DATA")
    # an empty --only (an unset shell variable: --only "$NAME") matched every dump, as if
    # no filter had been given
    for src in (report, trace):
        assert usage_error(capsys, "disasm", str(src), "--only", "") == (
            "gpucosim disasm: error: --only: '' matches every dump: give part of a dump's name (gpucosim disasm "
            "FILE lists them)")


@pytest.mark.parametrize("name", ["PERF_PACKETS[1", "PERF_PACKETS[1]]", "PERF_PACKETS[[1]"])
def test_regs_refuses_an_unbalanced_index(capsys, name):
    """`regs PERF_PACKETS[1` (a bracket lost to the shell or a typo) was read as element 1."""
    assert usage_error(capsys, "regs", name) == \
        f"gpucosim regs: error: bad index in {name!r}: an array's element is NAME[INDEX]"


def test_disasm_says_1_dword_and_reads_it_back(capsys, tmp_path):
    """A one-dword dump was headed "(1 dwords)", by disasm and in a crash report's or a
    timeline's dump names; the parser that checks a dump's said length reads both spellings
    (reports written before say "1 dwords")."""
    from gpucosim.dump import parse_text

    report = tmp_path / "crash.txt"
    report.write_text("gpucosim crash report\n== dumps ==\n" + format_dump("ring", 0x100, pm4.pad(1)) + "\n"
                      + format_dump("IB1 at 0x3000 (1 dword)", 0x3000, pm4.pad(1)) + "\n")
    assert cli.main(["disasm", str(report)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "ring (1 dword at 0x100)" and out[3] == "IB1 at 0x3000 (1 dword)"
    assert len(parse_text(format_dump("IB1 at 0x3000 (1 dwords)", 0x3000, pm4.pad(1)) + "\n")) == 1
    for said in ("3 dwords", "1 dword"):
        with pytest.raises(Exception, match="cut short"):
            parse_text(format_dump(f"IB1 at 0x3000 ({said})", 0x3000, pm4.pad(2)) + "\n")


def test_disasm_errors(capsys, tmp_path):
    assert usage_error(capsys, "disasm") == \
        "gpucosim disasm: error: nothing to disassemble: give FILE, - for stdin, or --dwords HEX..."
    assert usage_error(capsys, "disasm", "nosuch.txt") == \
        "gpucosim disasm: error: cannot read nosuch.txt: No such file or directory"
    # dwords typed without -x (as `gpucosim regs` takes its value): the file they are not is said, and -x
    assert usage_error(capsys, "disasm", "c0033700", "0x100000", "0") == \
        ("gpucosim disasm: error: cannot read c0033700: No such file or directory (dwords on the command line go "
         "after -x: gpucosim disasm -x c0033700 ...)")
    bad = tmp_path / "bad.txt"
    bad.write_text("c0033700 zz\n")
    assert usage_error(capsys, "disasm", str(bad)) == f"gpucosim disasm: error: {bad}:1: 'zz' is not a hex dword"
    assert usage_error(capsys, "disasm", "-x", "123456789") == \
        "gpucosim disasm: error: --dwords:1: '123456789' does not fit in 32 bits"
    assert usage_error(capsys, "disasm", "-x", "0", "--base", "0x2") == \
        "gpucosim disasm: error: argument --base: must be a multiple of 4, not 0x2"
    assert usage_error(capsys, "disasm", str(bad), "-x", "0") == "gpucosim disasm: error: give FILE or --dwords, not both"
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    assert usage_error(capsys, "disasm", str(empty)) == f"gpucosim disasm: error: {empty}: no dwords found"
    odd = tmp_path / "odd.bin"
    odd.write_bytes(b"\x00\x01\x02\xff\xfe")
    assert usage_error(capsys, "disasm", str(odd)) == \
        f"gpucosim disasm: error: {odd}: 5 bytes is not a whole number of dwords"
    js = tmp_path / "other.json"
    js.write_text('{"traceEvents": []}')
    assert usage_error(capsys, "disasm", str(js)) == (
        f"gpucosim disasm: error: {js}: a JSON file without gpucosim dumps (write one with "
        f"`gpucosim run APP --trace FILE`)")
    # a trace whose dumps were edited by hand (or by a hostile program) is refused by index
    for dumps, message in [("5", "otherData.dumps is not a list of dumps"),
                           ('[{"dwords": [1, "x"]}]', "dump 0 needs a name, an integer base and a list of 32-bit dwords"),
                           ('[{"name": "r", "base": 0, "dwords": [1]}, {"name": "s", "base": -4, "dwords": [1]}]',
                            "dump 1 needs a name, an integer base and a list of 32-bit dwords"),
                           ('[{"name": "r", "base": 0, "dwords": [4294967296]}]',
                            "dump 0 needs a name, an integer base and a list of 32-bit dwords")]:
        js.write_text('{"otherData": {"dumps": %s}}' % dumps)
        assert usage_error(capsys, "disasm", str(js)) == f"gpucosim disasm: error: {js}: {message}"


def test_disasm_of_the_other_engines_packets_says_which_option_lists_them(capsys):
    """SDMA dwords listed as PM4 were "BAD TYPE 0: not a type-3 header" on every line, PM4
    given --sdma "UNKNOWN op=0x00": nothing said the dwords were the other engine's."""
    words = [f"{w:x}" for w in sdma.write_linear(0x100000, [1, 2, 3])]
    assert cli.main(["disasm", "-x", *words]) == 0
    out = capsys.readouterr()
    assert out.out.count("BAD TYPE 0") == len(words)
    assert out.err == "gpucosim disasm: no PM4 packet decodes, and as SDMA they are WRITE_LINEAR: give --sdma\n"
    words = [f"{w:x}" for w in pm4.write_data(0x100000, [1]) + pm4.write_data(0x100004, [2])]
    assert cli.main(["disasm", "--sdma", "-x", *words]) == 0
    assert capsys.readouterr().err == ("gpucosim disasm: no SDMA packet decodes, and as PM4 they are WRITE_DATA, ...: "
                                       "leave out --sdma\n")
    for given in (["-x", "0", "0", "0"],  # zeros: SDMA NOPs, memory never written
                  ["-x", *words],  # as given
                  ["-x", "deadbeef"]):  # neither engine's
        assert cli.main(["disasm", *given]) == 0
        assert capsys.readouterr().err == ""


def test_disasm_refuses_addresses_past_64_bits(capsys, tmp_path):
    """A base or an address line past the 64-bit address space (a typo of one digit too many)
    was taken: the listing showed addresses no packet can name."""
    assert usage_error(capsys, "disasm", "-x", "0", "--base", "0x10000000000000000") == \
        "gpucosim disasm: error: argument --base: must fit in 64 bits (at most 0xfffffffffffffffc), not 0x10000000000000000"
    assert usage_error(capsys, "disasm", "-x", "0", "0", "--base", "0xfffffffffffffffc") == \
        "gpucosim disasm: error: --dwords: 2 dwords from 0xfffffffffffffffc run past the 64-bit address space"
    text = tmp_path / "d.txt"
    text.write_text("0x00001000: 00000000\n0x10000000000000000: 00000000\n")
    assert usage_error(capsys, "disasm", str(text)) == \
        f"gpucosim disasm: error: {text}:2: '0x10000000000000000:' does not fit in 64 bits"
    binary = tmp_path / "d.bin"
    binary.write_bytes(bytes(8))
    assert usage_error(capsys, "disasm", str(binary), "--base", "0xfffffffffffffffc") == \
        f"gpucosim disasm: error: {binary}: 2 dwords from 0xfffffffffffffffc run past the 64-bit address space"


def test_disasm_names_a_cut_short_trace_or_crash_report(capsys, tmp_path):
    """A trace or crash report cut short (a full disk, a killed run, a partial copy) was read
    as a plain hex dump: "'{"traceEvents":[...' is not a hex dword", "'gpucosim' is not a
    hex dword". It says what the file is and what is wrong with it."""
    js = tmp_path / "t.json"
    js.write_text('{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "UM')
    assert usage_error(capsys, "disasm", str(js)) == \
        f"gpucosim disasm: error: {js} is not a JSON trace (line 1, column 81: Unterminated string starting at)"
    report = tmp_path / "crash-app-model-1-1.txt"
    report.write_text("gpucosim crash report\napp:     examples/gpu_error.py\nbackend: model\n\n== registers ==\n"
                      "  STATUS = 0x00000105: IDLE=1 ERROR=1 LEVEL=IB1 (1)\n")
    assert usage_error(capsys, "disasm", str(report)) == \
        f"gpucosim disasm: error: {report}: a crash report without its dumps (no `-- dump:` section: cut short?)"



@pytest.mark.parametrize("cut, says", [
    (6, ":7: '000' is not a whole dword (8 hex digits): cut short?"),
    (9, ": dump 'IB1 at 0x1000 (9 dwords)' has 8 of its 9 dwords: cut short?"),
])
def test_disasm_names_a_crash_report_cut_inside_its_last_dump(capsys, tmp_path, cut, says):
    """A report cut inside its last dump (the dumps close it) was listed without a word: a
    dword cut to "00" read as 0x00000000, a line short of its last dwords as a shorter IB."""
    report = tmp_path / "crash-app-model-1-1.txt"
    text = "gpucosim crash report\napp:     app.py\n\n== dumps ==\n" + format_dump(
        "IB1 at 0x1000 (9 dwords)", 0x1000, [0xC0001000, *range(1, 9)]) + "\n"
    report.write_text(text[:-cut])
    assert usage_error(capsys, "disasm", str(report)) == f"gpucosim disasm: error: {report}{says}"
    report.write_text(text)
    assert cli.main(["disasm", str(report)]) == 0


# ------------------------------------------------------------------------------ bench, plot

def test_bench_calls_testbench_bench(monkeypatch):
    import testbench.bench

    calls = []
    monkeypatch.setattr(testbench.bench, "main", lambda argv, prog: calls.append((argv, prog)) or 0)
    assert cli.main(["bench", "--quick", "x"]) == 0
    assert cli.main(["bench", "--help"]) == 0
    assert calls == [(["--quick", "x"], "gpucosim bench"), (["--help"], "gpucosim bench")]


def test_bench_makes_its_output_folder_only_to_write_the_report(monkeypatch, tmp_path):
    """`bench -o new/dir/b.json` made new/dir while checking it could write there, before the
    run: a run that then failed left the empty folders behind. The folders are made when the
    report is written; a folder the check cannot use is still refused before the run."""
    import testbench.bench
    from testbench.argtypes import report_file_problem

    def refused(width):
        raise RuntimeError("no simulator")

    monkeypatch.setattr(testbench.bench, "gpu_design", refused)
    with pytest.raises(RuntimeError, match="no simulator"):
        testbench.bench.main(["-o", str(tmp_path / "new" / "dir" / "b.json"), "--speed-sims", "none"])
    assert list(tmp_path.iterdir()) == []
    assert report_file_problem(tmp_path / "a" / "b" / "r.json", "a report") is None
    assert list(tmp_path.iterdir()) == []
    assert report_file_problem("", "a report") == "an empty name (give a path)"  # (not ". is a folder")
    (tmp_path / "f").write_text("")
    assert report_file_problem(tmp_path / "f" / "b" / "r.json", "a report") == f"{tmp_path / 'f'} is a file, not a folder"
    if Path("/proc").is_dir():
        assert report_file_problem(Path("/proc/new/r.json"), "a report").startswith("cannot write in /proc: ")


def _refuse_writes_to(monkeypatch, path: Path) -> None:
    """The OS refuses to open `path` for writing (EACCES), whoever runs the test: what a
    root-squashed NFS share or a security module answers root, whose os.access says yes."""
    import errno
    import os

    real_open = os.open

    def refusing(file, flags, *args, **kwargs):
        if Path(file) == path and flags & (os.O_WRONLY | os.O_RDWR):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(file))
        return real_open(file, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing)


def _immutable(path: Path) -> bool:
    """Make `path` unwritable by the kernel itself: chmod for a user, chattr +i for root (whom
    no permission bit stops); False when this system allows neither."""
    import os
    import shutil
    import subprocess

    if os.geteuid() != 0:
        path.chmod(0o444)
        return True
    chattr = shutil.which("chattr")
    return bool(chattr) and subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode == 0


def _mutable(path: Path) -> None:
    import shutil
    import subprocess

    if shutil.which("chattr"):
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)
    path.chmod(0o644)


def test_bench_refuses_an_earlier_report_it_cannot_write(monkeypatch, capsys, tmp_path):
    """`bench -o b.json`, an earlier report this process cannot write: os.access said yes to
    root always (CI runs as root), so minutes of benchmarks ran to fail writing it at their
    end; and its message said "Permission denied" whatever the OS had said. The check opens
    the file for writing (nothing written), before the run; as root too."""
    import testbench.bench

    def refused(width):
        raise RuntimeError("the run started")

    monkeypatch.setattr(testbench.bench, "gpu_design", refused)
    out = tmp_path / "b.json"
    out.write_text('{"x": 1}\n')
    with monkeypatch.context() as m:
        _refuse_writes_to(m, out)
        with pytest.raises(SystemExit) as ei:
            testbench.bench.main(["-o", str(out), "--speed-sims", "none"], prog="gpucosim bench")
        assert ei.value.code == 2
        assert capsys.readouterr().err == f"gpucosim bench: error: -o: cannot write {out}: Permission denied\n"
    assert out.read_text() == '{"x": 1}\n'  # (untouched: opened for appending, closed)
    if _immutable(out):  # the kernel's own refusal, root or not
        try:
            with pytest.raises(SystemExit):
                testbench.bench.main(["-o", str(out), "--speed-sims", "none"], prog="gpucosim bench")
            err = capsys.readouterr().err
            assert err.startswith(f"gpucosim bench: error: -o: cannot write {out}: "), err
        finally:
            _mutable(out)
    with pytest.raises(RuntimeError, match="the run started"):  # writable: the run goes on
        testbench.bench.main(["-o", str(out), "--speed-sims", "none"])


@pytest.mark.parametrize("opt", ["--trace", "--stats-json"])
def test_run_refuses_an_output_file_it_cannot_write(monkeypatch, capsys, tmp_path, opt):
    """`gpucosim run --stats-json f.json`, a file this process cannot write: os.access said
    yes to root, and the run ended in "cannot write the run's figures"; the check opens it."""
    out = tmp_path / "f.json"
    out.write_text("")  # (empty: a new output, which the run may write)
    with monkeypatch.context() as m:
        _refuse_writes_to(m, out)
        assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model", opt, str(out)) == \
            f"gpucosim run: error: {opt}: cannot write {out}: Permission denied"
    if _immutable(out):
        try:
            assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model", opt, str(out)).startswith(
                f"gpucosim run: error: {opt}: cannot write {out}: ")
        finally:
            _mutable(out)
    # writable: the checks pass it (the run is then refused for an argument hello.py cannot read)
    assert "neither gpucosim nor the app knows --x" in usage_error(capsys, "run", "examples/hello.py", "--sim",
                                                                   "model", opt, str(out), "--x")


def test_bench_without_the_benchmarks(monkeypatch, capsys):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert cli.main(["bench"]) == 2
    assert capsys.readouterr().err.strip() == \
        "gpucosim bench: error: the benchmarks (testbench/bench/) are not there yet"


def test_plot_errors(capsys, tmp_path):
    # one readable line, as disasm's: the OS's reason, not Python's "[Errno 2] ...: 'path'"
    assert usage_error(capsys, "plot", "nosuch.json", "-o", str(tmp_path / "x.png")) == \
        "gpucosim plot: error: cannot read nosuch.json: No such file or directory"
    assert usage_error(capsys, "plot", str(tmp_path), "-o", str(tmp_path / "x.png")) == \
        f"gpucosim plot: error: cannot read {tmp_path}: Is a directory"
    text = tmp_path / "notes.txt"
    text.write_text("not a trace\n")
    assert usage_error(capsys, "plot", str(text), "-o", str(tmp_path / "x.png")) == \
        f"gpucosim plot: error: {text} is not a JSON trace (line 1, column 1: Expecting value)"
    empty = tmp_path / "t.json"
    empty.write_text('{"traceEvents": []}')
    assert usage_error(capsys, "plot", str(empty), "-o", str(tmp_path / "x.png")) == \
        f"gpucosim plot: error: {empty}: no events to draw"
    assert usage_error(capsys, "plot", str(empty)) == \
        "gpucosim plot: error: the following arguments are required: -o/--output"
    # a window that ends before it starts drew an empty picture (the end moved to start + 1)
    trace = tmp_path / "ok.json"
    trace.write_text('[{"ph": "X", "ts": 1, "dur": 2, "pid": 1, "tid": 1, "name": "a"}]')
    assert usage_error(capsys, "plot", str(trace), "-o", str(tmp_path / "x.png"), "--from", "500", "--to", "100") == \
        "gpucosim plot: error: --to 100 is not after --from 500"
    assert not (tmp_path / "x.png").exists()
    # a window with nothing in it (past the run; ns taken for cycles) drew an empty picture
    assert usage_error(capsys, "plot", str(trace), "-o", str(tmp_path / "x.png"), "--from", "5000", "--to", "9000") == \
        f"gpucosim plot: error: {trace}: no events between cycles 5000 and 9000 (the run spans cycles 100 to 300)"
    assert not (tmp_path / "x.png").exists()
    # one bound alone, beyond the run's other end: `--to 50` drew cycles 100-101 (the end moved to the
    # run's start + 1), `--from 300` an empty picture of cycles 300-301
    assert usage_error(capsys, "plot", str(trace), "-o", str(tmp_path / "x.png"), "--to", "50") == \
        f"gpucosim plot: error: {trace}: --to 50 is not after the run's first event (the run spans cycles 100 to 300)"
    assert usage_error(capsys, "plot", str(trace), "-o", str(tmp_path / "x.png"), "--from", "300") == \
        f"gpucosim plot: error: {trace}: --from 300 is not before the run's end (the run spans cycles 100 to 300)"
    assert not (tmp_path / "x.png").exists()
    # -o without a suffix: matplotlib wrote x.png while the tool said it wrote x; a suffix it does not
    # know raised its ValueError as a traceback after the trace was read
    for name in ("x", "x.txt", "x.PNGX"):
        assert usage_error(capsys, "plot", str(trace), "-o", str(tmp_path / name)) == \
            f"gpucosim plot: error: -o {tmp_path / name}: give a .png, .svg or .pdf file"
    assert usage_error(capsys, "plot", str(trace), "-o", str(tmp_path)) == \
        f"gpucosim plot: error: -o {tmp_path}: a folder, not a file (give a name such as {tmp_path / 'plot.png'})"
    assert sorted(f.name for f in tmp_path.iterdir()) == ["notes.txt", "ok.json", "t.json"]
    assert cli.main(["plot", str(trace), "-o", str(tmp_path / "x.SVG")]) == 0
    assert capsys.readouterr().out.strip() == f"gpucosim: wrote {tmp_path / 'x.SVG'}"
    assert (tmp_path / "x.SVG").read_bytes().lstrip().startswith(b"<?xml")


@pytest.mark.parametrize("text, message", [
    ("5", "not a Chrome trace (no traceEvents list)"),
    ('{"traceEvents": 5}', "not a Chrome trace (no traceEvents list)"),
    # the figures of --stats-json, the run's other JSON output: named as such
    ('{"app": "a.py", "backend": "model", "exit_code": 0, "cycles": 5, "ioctls": 9}',
     "the figures of a run (--stats-json), not a timeline: plot the file `gpucosim run APP --trace FILE` wrote"),
    ('{"traceEvents": [7]}', "event 0 is not an object: 7"),
    ('[{"ph": "X"}]', "event 0 ('X') lacks a valid ts, dur, pid, tid, name"),
    ('[{"ph": "i", "ts": "soon", "pid": 1, "tid": 1, "name": "a"}]', "event 0 ('i') lacks a valid ts"),
    ('[{"ph": "X", "ts": 1, "dur": 2, "pid": 1, "tid": 1, "name": "a"}, '
     '{"ph": "X", "ts": 1, "dur": -3, "pid": 1, "tid": 1, "name": "b"}]', "event 1 ('X') lasts -3 (a negative dur)"),
    ('[{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": []}]',
     "event 0: a thread_name needs integer pid, tid and args.name"),
])
def test_plot_refuses_json_that_is_not_a_trace(capsys, tmp_path, text, message):
    """A hostile or hand-edited trace file is one error line naming the event, not a traceback."""
    bad = tmp_path / "t.json"
    bad.write_text(text)
    assert usage_error(capsys, "plot", str(bad), "-o", str(tmp_path / "x.png")) == \
        f"gpucosim plot: error: {bad}: {message}"
    assert not (tmp_path / "x.png").exists()


def test_plot_names_a_binary_file_as_no_trace(capsys, tmp_path):
    """A binary file given as the trace (a gzipped one, a waveform, a crash dump's neighbour)
    said "cannot read F: 'utf-8' codec can't decode byte 0x8b in position 1: invalid start
    byte": Python's decoder, and nothing of what to give instead."""
    bad = tmp_path / "t.json.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00\xfc\x00")
    assert usage_error(capsys, "plot", str(bad), "-o", str(tmp_path / "x.png")) == (
        f"gpucosim plot: error: {bad} is not a JSON trace: byte 1 is not UTF-8 text (plot the file "
        "`gpucosim run APP --trace FILE` wrote)")
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("window", [("--from", "nan"), ("--to", "inf"), ("--from=-inf",), ("--to", "NaN")])
def test_plot_refuses_a_window_that_is_no_finite_cycle(capsys, tmp_path, window):
    """nan and inf are floats to argparse: matplotlib raised its "Axis limits cannot be NaN or
    Inf" as a traceback."""
    trace = tmp_path / "ok.json"
    trace.write_text('[{"ph": "X", "ts": 1, "dur": 2, "pid": 1, "tid": 1, "name": "a"}]')
    opt, value = window if len(window) == 2 else window[0].split("=")
    assert usage_error(capsys, "plot", str(trace), "-o", str(tmp_path / "x.png"), *window) == \
        f"gpucosim plot: error: argument {opt}: must be an integer (decimal or 0x hex), not {value!r}"
    assert not (tmp_path / "x.png").exists()


def test_disasm_lists_several_files_and_names_an_unmatched_pattern(capsys, tmp_path):
    """README's `gpucosim disasm build/crash/crash-gpu_error-*.txt` pastes: a pattern that
    matches several reports lists each under its name (FILE took one: "unrecognized
    arguments"), and one that matches none, which the shell passes on as it is, says so."""
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("c0033700 500 2000000 0 12345678\n")
    b.write_text("ffff1000\n")
    assert cli.main(["disasm", str(a), str(b)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"==> {a} <==" and "WRITE_DATA" in out[1] and out[2:4] == ["", f"==> {b} <=="], out
    assert "NOP" in out[4] and len(out) == 5, out
    pattern = str(tmp_path / "crash-*.txt")
    assert usage_error(capsys, "disasm", pattern) == (
        f"gpucosim disasm: error: cannot read {pattern}: no file matches that pattern (the shell passes a "
        "pattern that matches nothing on as it is)")
    assert usage_error(capsys, "disasm", "-", "-") == "gpucosim disasm: error: - (stdin) can be read once"
    assert usage_error(capsys, "disasm", str(a), str(b), "--only", "ring") == \
        "gpucosim disasm: error: no dump named like 'ring' (the input has no named dumps, as a crash report has)"


@pytest.mark.parametrize("argv, opt", [
    (["run", "examples/hello.py", "--sim", "model", "--trace", ""], "--trace"),
    (["run", "examples/hello.py", "--sim", "model", "--stats-json", ""], "--stats-json"),
    (["run", "examples/hello.py", "--sim", "model", "--crash-dir", ""], "--crash-dir"),
    (["run", "examples/hello.py", "--sim", "verilator", "--waves-file", ""], "--waves-file"),
    (["disasm", ""], "FILE"),
    (["plot", "", "-o", "x.png"], "TRACE"),
    (["plot", "t.json", "-o", ""], "-o/--output"),
])
def test_an_empty_path_is_refused(capsys, argv, opt):
    """`--trace "$OUT"` with OUT unset ran with no timeline and no word (an empty option was
    no option), `disasm ""` said "cannot read : Is a directory", `plot t.json -o ""` "a
    folder, not a file (give a name such as plot.png)"."""
    assert usage_error(capsys, *argv) == f"gpucosim {argv[0]}: error: argument {opt}: an empty name (give a path)"


@pytest.mark.parametrize("sub", ["disasm", "plot"])
def test_an_endless_or_too_deep_input_is_one_line(tmp_path, sub):
    """`disasm /dev/zero` read until memory ran out (MemoryError), and JSON nested 200,000 deep
    was a RecursionError traceback, in disasm and in plot: inputs are read up to 256 MiB
    (gpucosim/inputs.py) and their nesting is caught."""
    from .cli_helpers import gpucosim

    out = ["-o", str(tmp_path / "x.png")] if sub == "plot" else []
    deep = tmp_path / "deep.json"
    deep.write_text('{"traceEvents": ' + "[" * 200_000 + "]" * 200_000 + "}")
    for name, says in ((str(deep), "JSON nested too deep to read (no gpucosim timeline is)"),
                       ("/dev/zero", "more than 256 MiB, more than a timeline gpucosim writes (it keeps its first "
                                     "million events) or any dump")):
        if not Path(name).exists():
            continue
        r = gpucosim(sub, name, *out, timeout=60)
        assert r.returncode == 2 and r.stderr == f"gpucosim {sub}: error: {name}: {says}\n", r.stderr[-2000:]


LONG = "a" * 300  # (a name longer than any file system's 255)


@pytest.mark.parametrize("argv, opt, name", [
    (["run", "examples/hello.py", "--sim", "model", "--trace", f"{LONG}.json"], "argument --trace", f"{LONG}.json"),
    # (a missing folder before the long name: stat stops at it with ENOENT, and the run went
    # ahead, made the folder and failed at the end; beside it the same under a folder that is)
    (["run", "examples/hello.py", "--sim", "model", "--stats-json", f"no-such-folder/{LONG}/s.json"],
     "argument --stats-json", f"no-such-folder/{LONG}/s.json"),
    (["run", "examples/hello.py", "--sim", "model", "--stats-json", f"examples/{LONG}/s.json"],
     "argument --stats-json", f"examples/{LONG}/s.json"),
    (["plot", "t.json", "-o", f"{LONG}.png"], "argument -o/--output", f"{LONG}.png"),
    (["disasm", f"{LONG}.txt"], "argument FILE", f"{LONG}.txt"),
    (["run", f"{LONG}.py", "--sim", "model"], "APP", f"{LONG}.py"),
])
def test_a_name_too_long_is_one_line(argv, opt, name):
    """pathlib's is_dir()/is_file() raise ENAMETOOLONG (a missing file is only False): a name
    past 255 characters was an OSError traceback from the checks meant to refuse bad paths."""
    from .cli_helpers import gpucosim

    r = gpucosim(*argv)
    assert not (ROOT / "no-such-folder").exists()  # (nothing made for an output refused)
    shown = name[:30] + "..." + name[-20:]
    assert r.returncode == 2 and r.stderr == \
        f"gpucosim {argv[0]}: error: {opt}{':' if opt != 'APP' else ''} {shown!r} ({len(name)} characters): " \
        "File name too long\n", r.stderr


def test_a_module_name_too_long_is_no_module():
    from .cli_helpers import gpucosim

    r = gpucosim("run", f"examples.{LONG}", "--sim", "model")
    assert r.returncode == 2 and r.stderr == f"gpucosim run: error: no module named 'examples.{LONG}' (APP is " \
        "APP.py, a module or module:function)\n", r.stderr


def test_repeated_options_add_up(capsys):
    """`disasm -x A -x B` listed B alone and `run --log ioctl=info --log ring=debug` logged the
    ring alone: argparse's last value won, silently. Both add up now."""
    assert cli.main(["disasm", "-x", "c0033700", "500", "2000000", "0", "12345678", "-x", "ffff1000"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in out] == ["WRITE_DATA", "NOP"], out
    from .cli_helpers import gpucosim

    r = gpucosim("run", "examples/hello.py", "--sim", "model", "--log", "ioctl=info", "--log", "ring=debug")
    assert r.returncode == 0, r.stderr
    said = r.stdout + r.stderr
    assert "[ioctl] ioctl(fd 3, CS," in said and "[ring] " in said, said[-2000:]


@pytest.mark.parametrize("name", ["w.gtkw", "w.vcd", "w", "w.FST"])
def test_a_waves_file_is_an_fst_file(capsys, tmp_path, name):
    """--waves-file w.gtkw: the waveform was written there, then overwritten by its own GTKWave
    save file (NAME.gtkw beside it); w.vcd held FST."""
    path = tmp_path / name
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "verilator", "--waves-file", str(path)) == (
        f"gpucosim run: error: --waves-file {path}: the waveform is FST (its save file goes beside it as .gtkw): "
        "give a .fst file")


def test_bench_refuses_an_output_folder_that_takes_no_file():
    """`gpucosim bench -o /proc/b.json` (a folder there, that takes no file) started minutes
    of benchmarks, to fail writing at their end: refused first now, as run's outputs are."""
    if not Path("/proc").is_dir():
        pytest.skip("no /proc")
    from .cli_helpers import gpucosim

    r = gpucosim("bench", "-o", "/proc/b.json", timeout=60)
    assert r.returncode == 2 and r.stderr.startswith("gpucosim bench: error: -o: cannot write in /proc: "), r.stderr


@pytest.mark.parametrize("opt", ["--trace", "--stats-json"])
def test_a_symlink_loop_is_one_line(tmp_path, opt):
    """--trace loop.json, a symbolic link to itself, was Path.resolve's "RuntimeError: Symlink
    loop" traceback (is_dir() and exists() are False for it, so the checks let it pass)."""
    from .cli_helpers import gpucosim

    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    r = gpucosim("run", "examples/hello.py", "--sim", "model", opt, str(loop))
    assert r.returncode == 2 and r.stderr == \
        f"gpucosim run: error: argument {opt}: {loop}: Too many levels of symbolic links\n", r.stderr


@pytest.mark.parametrize("opt", ["--trace", "--stats-json", "--waves-file"])
def test_a_dash_is_no_output_file(capsys, opt):
    """--stats-json - wrote a file named "-" (stdin's name suggests stdout): refused, with
    the name that is stdout."""
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "verilator", opt, "-") == \
        f"gpucosim run: error: argument {opt}: - is no file here: give a name (/dev/stdout for stdout)"


def test_a_bad_mplbackend_in_the_environment_draws_all_the_same(tmp_path):
    """MPLBACKEND=frob made matplotlib's import raise its ValueError (a traceback) before plot
    could choose its Agg backend; the pictures are files, whatever the environment's display."""
    from .cli_helpers import gpucosim

    trace = tmp_path / "t.json"
    trace.write_text('[{"ph": "X", "ts": 1, "dur": 2, "pid": 1, "tid": 1, "name": "a"}]')
    r = gpucosim("plot", str(trace), "-o", str(tmp_path / "x.png"), env={"MPLBACKEND": "frob"})
    assert r.returncode == 0 and r.stdout == f"gpucosim: wrote {tmp_path / 'x.png'}\n" and not r.stderr, r.stderr


def test_a_home_matplotlib_cannot_write_in_draws_without_warnings(tmp_path):
    """With no writable ~/.config/matplotlib (a read-only or missing HOME), matplotlib's
    import printed "mkdir -p failed ..." and "Matplotlib created a temporary cache
    directory ..." on stderr, and made a new folder in /tmp each run."""
    from .cli_helpers import gpucosim

    trace = tmp_path / "t.json"
    trace.write_text('[{"ph": "X", "ts": 1, "dur": 2, "pid": 1, "tid": 1, "name": "a"}]')
    # /proc/1 has no .config, and nothing can make one there, root or not
    env = {"HOME": "/proc/1", "XDG_CONFIG_HOME": "", "XDG_CACHE_HOME": "", "MPLCONFIGDIR": ""}
    for k in range(2):
        r = gpucosim("plot", str(trace), "-o", str(tmp_path / f"x{k}.png"), env=env)
        assert r.returncode == 0 and not r.stderr, r.stderr
        assert (tmp_path / f"x{k}.png").stat().st_size > 0


def test_matplotlib_folder_root_cannot_write_in_is_set_aside(monkeypatch, tmp_path):
    """A ~/.config/matplotlib that takes no files while os.access says yes (root's answer for an
    immutable folder, a read-only or root-squashed mount): it was kept, and matplotlib's import
    warned and made a new folder in /tmp each run. The check makes a file there, as root too."""
    import os

    from gpucosim.trace import plot

    home = tmp_path / "cfg" / "matplotlib"
    home.mkdir(parents=True)
    if not _immutable(home):
        pytest.skip("neither chmod nor chattr can make a folder unwritable here")
    try:
        monkeypatch.setattr(os, "access", lambda *a, **k: True)  # (what root is told)
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
        monkeypatch.setenv("MPLCONFIGDIR", "")  # (restored after the test)
        plot._config_dir_for_matplotlib()
        assert os.environ["MPLCONFIGDIR"] not in ("", str(home))
        assert Path(os.environ["MPLCONFIGDIR"]).is_dir()
    finally:
        _mutable(home)
        home.chmod(0o755)
    monkeypatch.setenv("MPLCONFIGDIR", "")
    plot._config_dir_for_matplotlib()  # (writable: matplotlib's own folder is kept)
    assert os.environ["MPLCONFIGDIR"] == ""


def test_shared_memory_outside_a_dev_shm_that_takes_no_files(monkeypatch):
    """A /dev/shm that refuses new files while os.access says yes (root, a read-only mount in a
    container): mkstemp's PermissionError was a traceback before any run; the memory file goes
    to the temp directory instead."""
    import errno
    import os
    import tempfile

    from testbench.memory import SharedMemory

    real = tempfile.mkstemp

    def refusing(*args, dir=None, **kwargs):
        if dir == "/dev/shm":
            raise PermissionError(errno.EROFS, os.strerror(errno.EROFS), dir)
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", refusing)
    monkeypatch.setattr(os, "access", lambda *a, **k: True)
    with SharedMemory(1 << 12) as mem:
        assert mem.path.parent == Path(tempfile.gettempdir())
        mem.view[:4] = 7
        assert mem.read(0, 4) == b"\x07" * 4
