"""The fast subset: a handful of mutants, one per class of hole issue 19 found, each of
which the named tests must kill. `make test` runs them (tests/flows/test_mutate.py), so a change
that blinds the suite to one of these classes fails CI; `python -m testbench.mutate --fast`
runs them by hand.

Each runs the whole test files that should notice (with -x: the first failure ends it),
not one test: deleting or weakening the test that bites makes the subset fail.

The packet table's bit positions have one too: moving a field in spec/packets.py changes
builders, decoder, RTL, model and checker alike, so only an outside reference can see it:
AMD's own encodings, with every field non-zero somewhere (tests/spec/amd/test_amd_conformance.py).
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..pipes import pipe_safe
from .patch import Patch, run_pytest, scratch_copy


@dataclass(frozen=True)
class FastMutant:
    patch: Patch
    tests: tuple[str, ...]  # pytest arguments: the files that must kill it


FAST = (
    FastMutant(Patch(
        "checker-read-side", "kmd_model/cs/checker.py",
        'bad[copy] |= ~self._owned(w, plan.value(pay, "src")[copy], n[copy])',
        "bad[copy] |= False",
        "the checker forgets where a DMA_DATA reads from: one client copies another's memory"),
        ("tests/kmd/test_kmd_checker.py",)),
    FastMutant(Patch(
        "fence-not-wrap-safe", "kmd_model/sched/fence.py",
        "while self.pending and seq_passed(self.pending[0].seq, value):",
        "while self.pending and self.pending[0].seq <= value:",
        "fence processing compares seqnos as plain numbers: nothing signals past 2^32"),
        ("tests/kmd_sched/test_kmd_fence.py",)),
    FastMutant(Patch(
        "ih-rptr-write-back", "kmd_model/irq/ih.py",
        "self.kmd.mmio.write(regs.IH_RPTR, self.rptr)",
        "self.kmd.mmio.write(regs.IH_RPTR, self.rptr & self.mask)",
        "the IH read pointer is written back wrapped: IH_PENDING stays high, entries are redone"),
        ("tests/kmd_sched/test_kmd_ih.py",)),
    FastMutant(Patch(
        "diagnosis-skips-ib2", "kmd_model/reset/stuck.py",
        'hit = walk(base, f["IB_SIZE"], level + 1)',
        "hit = None",
        "the timeout diagnosis does not look into IB2s"),
        ("tests/kmd_sched/reset/test_kmd_stuck_diagnosis.py",)),
    FastMutant(Patch(
        "wait-lt-as-le", "testbench/refmodel/cp/packets.py",
        '"LT": int.__lt__,',
        '"LT": int.__le__,',
        "WAIT_REG_MEM LT read as LE: only a wait on the boundary tells them apart"),
        ("tests/model/refmodel/test_refmodel_packets.py", "-k", "wait_reg_mem")),
    FastMutant(Patch(
        "raw-wait-never-set", "umd/queue/transfer.py",
        "raw = any(s < src + size and src < e for s, e in _written(q))",
        "raw = False",
        "the UMD never sets RAW_WAIT: invisible in the data on the model, where transfers are instant"),
        ("tests/umd/memory/test_umd_transfer_packets.py",)),
    FastMutant(Patch(
        "packet-field-moved", "spec/packets.py",
        '_ignored("TC_WC_ACTION_EN", 0, 20,',
        '_ignored("TC_WC_ACTION_EN", 0, 18,',
        "a packet field moves in the table: builders, decoder, RTL, model and checker move with it"),
        ("tests/spec/amd/test_amd_conformance.py",)),
    FastMutant(Patch(
        "address-high-dword", "kmd_model/reset/stuck.py",
        'a = f["ADDR_LO"] << 2 | f["ADDR_HI"] << 32',
        'a = f["ADDR_LO"] << 2 | f["ADDR_HI"] << 33',
        "an address's high dword put in the wrong place: invisible while every buffer lies below 4 GiB"),
        ("tests/kmd/memory/test_high_memory.py",)),
    FastMutant(Patch(
        "copyin-keeps-int-subclass", "kmd_model/ioctl/copyin.py",
        "if type(v) is int or id(type(v)) in _ENUM_IDS:",
        "if isinstance(v, int):",
        "the ioctl copy-in hands the handler the client's int subclass: its __int__ runs again, "
        "answering another handle than the one checked"),
        ("tests/security/client_code/test_security_hostile_program.py",)),
    FastMutant(Patch(
        "dump-line-address", "gpucosim/dump.py",
        'lines.append(f"{base + 4 * i:#010x}: {words}")',
        'lines.append(f"{base + i:#010x}: {words}")',
        "crash-report dumps address their lines wrongly past the first 8 dwords"),
        ("tests/tools/reports/test_dump.py",)),
)


def run_one(m: FastMutant, work: Path, timeout: float = 120) -> tuple[bool, float, str]:
    """Apply `m` to a scratch copy at `work` and run its tests: (killed, seconds, output)."""
    scratch_copy(work)
    m.patch.apply(work)
    code, secs, out = run_pytest(work, [*m.tests, f"--basetemp={work / '.pytest-tmp'}"], timeout)
    # only failing tests (pytest's exit 1) kill: no test collected (5), a collection error (2)
    # or a broken environment (3, 4, a timeout) would otherwise pass for a kill
    return code == 1, secs, out


@pipe_safe
def main() -> int:
    survived = 0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpucosim-mutate-") as tmp:
        for m in FAST:
            killed, secs, out = run_one(m, Path(tmp) / m.patch.name)
            print(f"{'killed  ' if killed else 'SURVIVED'} {m.patch.name:22s} {secs:5.1f} s  {m.patch.why}")
            if not killed:
                survived += 1
                print("    " + out.replace("\n", "\n    "))
    print(f"{len(FAST) - survived}/{len(FAST)} killed in {time.monotonic() - t0:.0f} s")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
