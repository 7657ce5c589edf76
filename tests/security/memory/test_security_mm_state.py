"""A hostile client against the KMD's memory management, as a stateful property test
(hypothesis's RuleBasedStateMachine, and `random_walk`, the same rules driven by a seeded
random.Random for deep runs): two or three render nodes make GEM_CREATE, GEM_MMAP,
GEM_CLOSE, GEM_VA MAP / UNMAP / REPLACE / CLEAR (good and bad), GEM_WAIT_IDLE and INFO
MEMORY calls, write their BOs from the CPU, and run small GPU jobs (WRITE_DATA, DMA_DATA
copies, SDMA writes, a user fence) into their mapped VAs and into VAs only another file has
mapped, while one job held in a WAIT_REG_MEM (checked at CS, released later) writes to a VA
whose mapping the client changes or closes under it; other files take every VMID in turn,
and VRAM is filled. With the CS checker on, and off (the MMU alone stands).

A reference beside the driver says what each file's VM maps (which VA page holds which
page of which BO, with which permissions), which handles are live, what every BO holds and
which BOs the held job keeps alive. After every step:

- each ioctl's errno is the one docs/architecture.md and kmd_model/uapi.py give (amdgpu's
  order of checks; ENOMEM exactly when the heap has no room), nothing raises but KmdError;
- the KMD's mappings are the reference's, and so are its page tables (walked in device
  memory with spec/vm.py's walk, for every page of each file's window);
- every live BO holds exactly what the reference says (so no file read or wrote another's
  BO through any mapping, handle or job), and no two allocated BOs share memory;
- a BO the held job may still reach is still allocated (busy), and GEM_WAIT_IDLE says so
  of exactly those (the BOs mapped at its CS, and those whose mapping went while it was in
  its ring: a write it translated before the TLB flush may still land); a job the MMU stops is its own file's INFO VM_FAULT, no other's;
- the heaps' accounting (INFO MEMORY) is the live BOs plus the page tables the reference
  expects; views of closed BOs raise MappingRevoked, and an alias made through the buffer
  protocol reaches none of the BO's memory;
- at the end, once every file is closed, the driver holds what it held at bring-up.

Threads of one file racing GEM_CLOSE against a CS and a GEM_VA on the same handle:
test_security_mm_threads.py. The reference: mm_reference.py; the rules: mm_memory_rules.py
(files, BOs, mappings) and mm_job_rules.py (GPU jobs); here the machine, its invariants and
its runs.

Its default run in make test is small and reproducible (derandomize, no database). Longer:
    GPUCOSIM_MM_EXAMPLES=2000 GPUCOSIM_MM_WALKS=50 GPUCOSIM_MM_STEPS=400 \
        .venv/bin/python -m pytest -q tests/security/memory/test_security_mm_state.py
(hypothesis's examples, the walks' count, each walk's steps; a walk's seed is its index.)
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import Domain, GemFlags, InfoQuery, Request, VaOp
from spec import vm as vm_spec
from testbench.refmodel import RefModel

from tests.security.memory.mm_job_rules import MmJobRules
from tests.security.memory.mm_memory_rules import MmMemoryRules
from tests.security.memory.mm_reference import IB_SIZE, IB_VA, JOB_TIMEOUT, PAGE, R, RWX, W, WIN0, WINDOW, X, RFile
from tests.security.security_helpers import _start_state, assert_as_at_bring_up


class MmMachine(MmMemoryRules, MmJobRules, RuleBasedStateMachine):
    CS_CHECK = True  # False: the MMU alone stands (a job the checker would refuse faults)

    def __init__(self):
        super().__init__()
        self.dev = RefModel()
        self.kmd = kmd_model.bind(self.dev, job_timeout=JOB_TIMEOUT, cs_check=self.CS_CHECK, cap_sys_nice=True)
        self.start = _start_state(self.kmd)
        self.files: list[RFile] = []
        self.hold = None  # the held job: (RFile, seq, target va, value, held BOs)
        self.serial = 0
        self.info = None

    # ------------------------------------------------------------------ invariants

    @invariant()
    def vms_match(self):
        if not self.files:
            return
        mem = self.dev.mem
        read64 = lambda a: int(mem[a:a + 8].view("<u8")[0])  # noqa: E731
        for rf in self.files:
            vm = rf.f.vm
            got = [(m.va, m.size, m.offset, m.flags, m.bo) for m in vm.maps if m.va != IB_VA]
            want = [(m.va, m.size, m.offset, m.flags, m.bo.kbo) for m in rf.maps]
            assert got == want, (got, want)
            assert set(rf.f.handles) == set(rf.bos) | {rf.ib_handle}
            for h, bo in rf.bos.items():
                assert rf.f.handles[h] is bo.kbo
            # the page tables, walked as the MMU does
            root = vm.root.gpu_addr
            for p in range(-1, WINDOW + 1):
                va = WIN0 + p * PAGE
                w = vm_spec.walk(read64, root, va, None)
                m = next((m for m in rf.maps if m.va <= va < m.end), None)
                if m is None:
                    assert w.phys is None, (hex(va), w)
                    continue
                assert w.phys == m.bo.kbo.gpu_addr + m.offset + va - m.va, (hex(va), w)
                bits = w.flags & (vm_spec.READABLE | vm_spec.WRITEABLE | vm_spec.EXECUTABLE)
                want_bits = ((vm_spec.READABLE if m.flags & R else 0) | (vm_spec.WRITEABLE if m.flags & W else 0)
                             | (vm_spec.EXECUTABLE if m.flags & X else 0))
                assert bits == want_bits, (hex(va), hex(w.flags), m.flags)

    @invariant()
    def memory_matches(self):
        mem = self.dev.mem
        for rf in self.files:
            for bo in rf.bos.values():
                k = bo.kbo
                assert not k.freed and not k.closed
                got = np.asarray(mem[k.gpu_addr:k.end])
                want = bo.data
                if bo.big:  # (its first and last 16 KiB: what the machine's jobs reach)
                    got, want = np.concatenate([got[:0x4000], got[-0x4000:]]), np.concatenate(
                        [want[:0x4000], want[-0x4000:]])
                if not (got == want).all():
                    bad = int(np.flatnonzero(got != want)[0])
                    raise AssertionError(f"fd {rf.f.fd} BO {bo.handle} byte {bad:#x}: {got[bad]:#x}, "
                                         f"not {want[bad]:#x}")
        if self.hold is not None and self.hold[0] != "cancelled":
            for bo in self.hold[4]:
                assert not bo.kbo.freed, "a BO the held job may reach was freed"
        live = sorted((b.gpu_addr, b.end) for b in self.kmd.bo.live)
        for (a0, a1), (b0, b1) in zip(live, live[1:]):
            assert a1 <= b0, "two allocated BOs share memory"

    @invariant()
    def accounting(self):
        kmd = self.kmd
        for d, h in kmd.bo.heaps.items():
            assert h.used == sum(b.size for b in kmd.bo.live if b.domain == d)
            assert h.used + sum(e - s for s, e in h.holes) == h.size
        if not self.files or self.hold is not None:
            return
        m = self.files[0].f.ioctl(Request.INFO, uapi.InfoArgs(InfoQuery.MEMORY))
        user = {d: sum(bo.size for rf in self.files for bo in rf.bos.values() if bo.domain == d) for d in Domain}
        tables = sum(1 + len(rf.regions) for rf in self.files) * vm_spec.TABLE_BYTES
        ibs = len(self.files) * IB_SIZE
        assert m.vram.used == self.start[Domain.VRAM] + user[Domain.VRAM] + tables, (m.vram.used, self.start)
        assert m.gtt.used == self.start[Domain.GTT] + user[Domain.GTT] + ibs

    def teardown(self):
        try:
            if self.hold is not None and self.hold[0] != "cancelled":
                self._set_flag(self.hold[0])
            for rf in self.files:
                rf.f.close()
            assert_as_at_bring_up(self.kmd, self.start)
        finally:
            kmd_model.unbind()


EXAMPLES = int(os.environ.get("GPUCOSIM_MM_EXAMPLES", "12"))
MmMachine.TestCase.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=50, deadline=None, derandomize=True, database=None,
    suppress_health_check=list(HealthCheck), print_blob=True)
test_mm_state_machine = MmMachine.TestCase


class MmMachineUnchecked(MmMachine):
    CS_CHECK = False


MmMachineUnchecked.TestCase.settings = MmMachine.TestCase.settings
test_mm_state_machine_checker_off = MmMachineUnchecked.TestCase


def random_walk(seed: int, steps: int, cls=MmMachine) -> None:
    """The same machine driven by a seeded random.Random for `steps` steps in one run (hypothesis
    keeps its runs short): deep sequences, reproducible by seed."""
    import random
    rng = random.Random(seed)
    m = cls()
    r = rng.randrange
    try:
        m.open_files(2 + r(2), r(1 << 16))
        rules = [
            (6, lambda: m.gem_create(r(3), 1 + r(4), rng.choice([Domain.GTT, Domain.VRAM]),
                                     rng.choice([0, 0, GemFlags.NO_CPU_ACCESS]), rng.choice([0, 0x10000]), r(2) * r(PAGE))),
            (4, lambda: m.gem_close(r(3), r(1 << 16))),
            (3, lambda: m.gem_mmap(r(3), r(1 << 16))),
            (3, lambda: m.cpu_write(r(3), r(1 << 16), r(4 * PAGE), 1 + r(255))),
            (2, lambda: m.gem_wait_idle(r(3), r(1 << 16))),
            (8, lambda: m.map_good(r(3), r(1 << 16), r(WINDOW), r(1 << 16), rng.choice([RWX, RWX, R | W, R, W]))),
            (8, lambda: m.gem_va(r(3), rng.choice(list(VaOp)), r(1 << 16), r(WINDOW + 2) - 2, r(5), r(6),
                                 rng.choice([RWX, R | W, R, W, X, 0, 1 << 4]),
                                 rng.choice([0] * 12 + [4, -WIN0, 1 << 30]))),
            (8, lambda: m.write_data(r(3), r(1 << 16), r(1 << 12), 1 + r(0xFFFF_FFFF), r(1 << 16))),
            (4, lambda: m.ib_by_handle(r(3), r(1 << 16), r(1 << 16), r(1 << 12), 1 + r(0xFFFF_FFFF))),
            (4, lambda: m.sdma_write(r(3), r(1 << 16), r(1 << 12), 1 + r(0xFFFF_FFFF))),
            (4, lambda: m.dma_copy(r(3), r(1 << 16), r(1 << 16), r(1 << 12), r(1 << 12), rng.choice([4, 8, 64, PAGE]))),
            (3, lambda: m.hold_job(r(3), r(1 << 16), r(1 << 12), 1 + r(0xFFFF_FFFF)) if m.hold is None else None),
            (2, lambda: m.release() if m.hold is not None else None),
            (1, lambda: m.close_file(r(3)) if len(m.files) > 1 else None),
            (1, lambda: m.vmid_churn(14 + r(3))),
            (1, lambda: m.fill_vram(r(3), r(4))),
            (1, lambda: m.open_file() if len(m.files) < 3 else None),
        ]
        weights = [w for w, _ in rules]
        held_for = 0
        for _ in range(steps):
            rng.choices(rules, weights)[0][1]()
            held_for = held_for + 1 if m.hold is not None else 0
            if held_for > 25:
                m.release()
            m.vms_match()
            m.memory_matches()
            m.accounting()
    finally:
        m.teardown()


@pytest.mark.parametrize("checker", ["on", "off"])
@pytest.mark.parametrize("seed", range(int(os.environ.get("GPUCOSIM_MM_WALKS", "1"))))
def test_mm_random_walk(seed, checker):
    random_walk(seed, int(os.environ.get("GPUCOSIM_MM_STEPS", "300")),
                MmMachine if checker == "on" else MmMachineUnchecked)
