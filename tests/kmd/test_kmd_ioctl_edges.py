"""Edges of the KMD's ioctls and GPU virtual memory that the happy paths and the error tables
of tests/kmd/test_kmd_ioctl.py do not sit on: ranges that end exactly at a limit, mappings
found among their neighbours, the names in messages and traces, what INFO reports of the
driver's parameters."""

from __future__ import annotations

import errno

import numpy as np
import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.ioctl import cs as cs_ioctl
from kmd_model.ioctl import trace as ioctl_trace
from kmd_model.uapi import CsChunkDep, CsChunkIb, Domain, HwIp, InfoQuery, Request, VaOp
from spec import pm4
from testbench.refmodel import RefModel

from .test_kmd_ioctl import RWX, Client, expect


def va(c: Client, handle: int, op: VaOp, addr: int, size: int, offset: int = 0):
    return c.io(Request.GEM_VA, uapi.GemVaArgs(handle, op, addr, offset, size, RWX))


def test_a_mapping_may_end_exactly_at_the_top_of_the_vms_range():
    kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x2000)
    info = c.io(Request.INFO, uapi.InfoArgs(InfoQuery.DEV_INFO))
    va(c, bo.handle, VaOp.MAP, info.va_end - 0x2000, 0x2000)  # its last byte is the VM's last
    expect(errno.EINVAL, f"GEM_VA: [{info.va_end - 0x1000:#x}, {info.va_end + 0x1000:#x}) is outside the VM's "
           f"range [{info.va_start:#x}, {info.va_end:#x})", va, c, bo.handle, VaOp.MAP, info.va_end - 0x1000, 0x2000)
    c.run(bo, pm4.write_data(info.va_end - 0x1000, [0x7E]))  # a job writes its last page
    assert bo.u32[0x1000 // 4] == 0x7E


def test_a_map_that_overlaps_the_next_mapping_but_not_the_one_before_is_refused():
    """Three mappings side by side with holes between: a MAP that starts in a hole and runs
    into a neighbour is found overlapping, whichever neighbour it is."""
    kmd_model.bind(RefModel())
    c = Client()
    bos = [c.bo(0x2000) for _ in range(3)]  # each 0x1000 apart: bo, hole, bo, hole, bo
    spare = c.bo(0x4000)
    for k in (1, 2):
        hole = bos[k - 1].addr + 0x2000
        expect(errno.EINVAL, f"GEM_VA: [{hole:#x}, {hole + 0x2000:#x}) overlaps the mapping "
               f"[{bos[k].addr:#x}, {bos[k].addr + 0x2000:#x}) of fd{c.f.fd}:{bos[k].handle}",
               va, c, spare.handle, VaOp.MAP, hole, 0x2000)
    va(c, spare.handle, VaOp.MAP, bos[0].addr + 0x2000, 0x1000)  # the hole alone is free


def test_an_ib_chunk_just_past_the_mapped_part_of_its_bo_is_refused():
    """A BO mapped in part: an IB chunk at the first offset past the mapping names an
    unmapped part of the BO, and is refused as such."""
    kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x2000)
    half = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x2000, 0, Domain.GTT, 0)).handle
    va(c, half, VaOp.MAP, bo.addr + 0x10000, 0x1000)  # only its first page
    expect(errno.EINVAL, f"CS: chunk 0: BO {half} is not mapped at offset 0x1000 in the file's VM (GEM_VA)",
           c.submit, CsChunkIb(8, handle=half, offset=0x1000))


def test_a_range_across_two_mappings_side_by_side_is_refused_as_crossing():
    """Two BOs mapped side by side: an IB, or a packet's range, that starts in one and ends in
    the other is refused (as amdgpu refuses an IB not inside one mapping), and the message
    says it crosses from one into the next where it does, not that it is outside every one."""
    kmd_model.bind(RefModel())
    c = Client()
    lo, hi = (c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, Domain.GTT, 0)).handle for _ in range(2))
    base = c.next_va + 0x10_0000
    va(c, lo, VaOp.MAP, base, 0x1000)
    va(c, hi, VaOp.MAP, base + 0x1000, 0x1000)
    seam = base + 0x1000
    expect(errno.EINVAL, f"CS: IB at {seam - 0x10:#x}+0x20 crosses from one mapping of context {c.ctx} into the "
           f"next at {seam:#x}: an IB must lie inside one mapping", c.submit, CsChunkIb(8, gpu_addr=seam - 0x10))
    ib = c.bo()
    expect(errno.EINVAL, f"CS: WRITE_DATA at IB+0x0 ({ib.addr:#x}) writes [{seam - 4:#x}, {seam + 4:#x}), which "
           f"crosses from one mapping of context {c.ctx} into the next at {seam:#x}: a packet's range must lie "
           "inside one mapping", c.submit, c.ib(ib, pm4.write_data(seam - 4, [1, 2])))
    c.run(ib, pm4.write_data(seam - 8, [1, 2]) + pm4.write_data(seam, [3, 4]))  # each inside one: they run


def test_ring_choice_errors_name_the_field():
    kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo()
    expect(errno.EINVAL, "CS: chunk 0: ip_instance must be an int, not 'x'",
           c.submit, CsChunkIb(8, bo.handle, 0, ip_instance="x"))
    expect(errno.EINVAL, "CS: chunk 0: ring must be an int, not 'x'", c.submit, CsChunkIb(8, bo.handle, 0, ring="x"))
    expect(errno.EINVAL, "CS: chunk 0: ring must be >= 0, not -1", c.submit, CsChunkIb(8, bo.handle, 0, ring=-1))
    expect(errno.EINVAL, "CS: chunk 1: ring must be >= 0, not -1",
           c.submit, c.ib(bo, pm4.nop(6)), CsChunkDep(HwIp.GFX, -1, c.ctx, 1))


def test_a_dependency_on_a_context_that_submitted_nothing_says_so():
    kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo()
    idle = c.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.ALLOC)).ctx_id
    expect(errno.EINVAL, f"CS: chunk 1: context {idle} never submitted seqno 0x5 (nothing submitted yet)",
           c.submit, c.ib(bo, pm4.nop(6)), CsChunkDep(HwIp.GFX, 0, idle, 5))
    first = c.submit(c.ib(bo, pm4.nop(6)))
    expect(errno.EINVAL, f"CS: chunk 1: context {c.ctx} never submitted seqno 0x5 (last is {first:#x})",
           c.submit, c.ib(bo, pm4.nop(6)), CsChunkDep(HwIp.GFX, 0, c.ctx, 5))


def test_the_kmds_count_of_shadow_bytes_adds_every_cs():
    kmd = kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo()
    c.run(bo, pm4.nop(6))
    one = kmd.kmd_stats()["cs_shadow_bytes"]
    c.run(bo, pm4.nop(6), 0x100)
    assert one > 0 and kmd.kmd_stats()["cs_shadow_bytes"] == 2 * one


def test_traces_print_unknown_hw_ip_types_as_given():
    assert ioctl_trace._fmt_value(CsChunkIb(8, 1, 0, ip_type=2, ring=1)) == "Ib(bo 1+0x0, 8 dw, DMA 1)"
    assert ioctl_trace._fmt_value(CsChunkIb(8, 1, 0, ip_type=77)) == "Ib(bo 1+0x0, 8 dw, 77 0)"
    assert ioctl_trace._fmt_value(CsChunkDep("gfx", 0, 1, 2)) == "Dep('gfx' 0, ctx 1, seq 2)"


def test_dev_info_reports_the_drivers_limits():
    kmd_model.bind(RefModel(), max_ib_chunks=7, max_dep_chunks=9)
    c = Client()
    info = c.io(Request.INFO, uapi.InfoArgs(InfoQuery.DEV_INFO))
    assert (info.max_ib_chunks, info.max_dep_chunks) == (7, 9)


def test_dependency_chunks_per_cs_are_bounded():
    """A CS carries at most DEV_INFO.max_dep_chunks dependencies (1,024 by default), each
    looked up under the KMD's lock: one more is EINVAL before any is looked up (the
    dependencies here name a context that does not exist, which would be their own
    EINVAL); a list longer than any CS may be is refused by its length alone."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo()
    seq = c.run(bo, pm4.nop(1))
    assert c.io(Request.INFO, uapi.InfoArgs(InfoQuery.DEV_INFO)).max_dep_chunks == 1024
    dep = CsChunkDep(HwIp.GFX, 0, c.ctx, seq)
    assert c.wait(c.submit(*[dep] * 1024, c.ib(bo, pm4.nop(1))))  # the limit itself
    # every chunk a CS may carry at once (4 IB, 1 fence, 1,024 dependency): copied in whole, and run
    assert c.wait(c.submit(*[dep] * 1024, *[c.ib(bo, pm4.nop(1))] * 4, uapi.CsChunkFence(bo.handle, 0x800)))
    bogus = CsChunkDep(HwIp.GFX, 0, 999, seq)
    cs_before = kmd.stats["cs"]
    expect(errno.EINVAL, "CS: 1025 dependency chunks, more than the 1024 a CS may carry (DEV_INFO.max_dep_chunks)",
           c.submit, *[bogus] * 1025, c.ib(bo, pm4.nop(1)))
    expect(errno.EINVAL, "CS: 100000 chunks, more than the 1029 a CS may carry (4 IB, 1 fence, 1024 dependency)",
           c.submit, *[bogus] * 100_000)
    expect(errno.EINVAL, "CS: chunk 0: no context 999 on this file", c.submit, bogus, c.ib(bo, pm4.nop(1)))
    assert kmd.stats["cs"] == cs_before
    kmd_model.bind(RefModel(), max_dep_chunks=0)
    c = Client()
    bo = c.bo()
    expect(errno.EINVAL, "CS: 1 dependency chunk, more than the 0 a CS may carry (DEV_INFO.max_dep_chunks)",
           c.submit, CsChunkDep(HwIp.GFX, 0, c.ctx, 1), c.ib(bo, pm4.nop(1)))


def test_a_chunk_list_longer_than_any_cs_is_refused_before_it_is_copied():
    """A hostile client's chunk list may be as long as it likes: the copy-in takes its
    length from the list's own storage and copies none of it past the most a CS may carry
    (a copy first made 200,000 chunks cost a second under no bound). Its chunks' fields are
    never read; a list subclass's __len__ and __iter__, which lie, are not called."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo()
    seq = c.run(bo, pm4.nop(1))
    reads = []

    class Spy(CsChunkDep):
        def __getattribute__(self, name):
            reads.append(name)
            return object.__getattribute__(self, name)

    class Liar(list):
        def __len__(self):
            return 1

        def __iter__(self):
            return iter([])

    spy = Spy(HwIp.GFX, 0, c.ctx, seq)
    traced: list = []
    kmd.trace_hooks.append(traced.append)
    for chunks in ([spy] * 1030, Liar([spy] * 1030), tuple([spy] * 1030)):
        expect(errno.EINVAL, "CS: 1030 chunks, more than the 1029 a CS may carry (4 IB, 1 fence, 1024 dependency)",
               c.io, Request.CS, uapi.CsArgs(c.ctx, chunks))
    assert reads == []
    # the ioctl trace shows what the kernel kept of the list: its kind and length, no chunk
    assert [ioctl_trace.fmt(r.args) for r in traced] == [
        f"{{ctx_id={c.ctx}, chunks=<a {kind} of 1030 chunks, not copied>}}" for kind in ("list", "Liar", "tuple")]
    kmd.trace_hooks.remove(traced.append)
    ok = Liar([spy] * 3 + [c.ib(bo, pm4.nop(1))])  # within the bound: copied from its storage
    assert c.wait(c.io(Request.CS, uapi.CsArgs(c.ctx, ok)).seq)
    assert reads  # (the spy does see a copy)


def test_a_job_named_by_many_dependency_chunks_is_looked_up_and_waited_for_once(monkeypatch):
    """1,024 dependency chunks naming one running job (1,000 by its seqno, 24 as the
    context's latest, 0xFFFFFFFF): two lookups, one for each distinct chunk, and the job
    waits for it once (drm_sched_job_add_dependency's dedup). Each chunk was looked up
    and counted: 1,024 entries in the job's dependencies and in the running job's
    dependents, a count of 1,024 to bring down. (Chunks of plain ints are keyed before the
    driver's lock, CsPrep, a chunk equal to one before it marked DUP there: the lookups are
    the other entries, and any chunk looked at whole, _dependency.)"""
    from kmd_model.ioctl import dispatch as dispatch_mod
    kmd = kmd_model.bind(RefModel(), job_timeout=2_000_000, fallback_poll=1_000)
    c = Client()
    bo = c.bo(0x8000)
    hold = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x7000, 1, 1, "EQ"), 0x400))  # until the CPU writes
    lookups, preps = [], []
    real = cs_ioctl._dependency
    monkeypatch.setattr(cs_ioctl, "_dependency", lambda *a: lookups.append(a[3]) or real(*a))
    real_dispatch = dispatch_mod.dispatch
    monkeypatch.setattr(dispatch_mod, "dispatch", lambda f, call: preps.append(call.prep) or real_dispatch(f, call))
    deps = [CsChunkDep(HwIp.GFX, 0, c.ctx, hold)] * 1000 + [CsChunkDep(HwIp.GFX, 0, c.ctx, 0xFFFF_FFFF)] * 24
    seq = c.submit(*deps, c.ib(bo, pm4.write_data(bo.addr + 0x100, [7]), 0x800))
    ctx = c.f.contexts[c.ctx]
    held, job = ctx.jobs[hold], ctx.jobs[seq]
    keyed = [k for k in preps[-1].deps if k is not None and k is not cs_ioctl.CsPrep.DUP]
    assert len(lookups) + len(keyed) == 2 and not lookups
    assert job.deps == [held] and held.dependents == [job] and job.deps_left == 1
    bo.u32[0x7000 // 4] = 1
    assert c.wait(seq) and bo.u32[0x100 // 4] == 7


def test_a_page_table_that_does_not_fit_names_the_ioctl_that_needed_it():
    """GEM_VA needs a new page table in VRAM; when VRAM is full its ENOMEM says GEM_VA."""
    kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x1000)
    size = 1 << 26
    while size >= 0x1000:  # fill VRAM
        try:
            c.io(Request.GEM_CREATE, uapi.GemCreateArgs(size, 0, Domain.VRAM, 0))
        except uapi.KmdError:
            size >>= 1
    far = bo.addr + (64 << 20)  # a 2 MiB range no table covers yet
    with pytest.raises(uapi.KmdError) as ei:
        va(c, bo.handle, VaOp.MAP, far, 0x1000)
    e = ei.value
    assert e.errno == errno.ENOMEM and e.message.startswith("GEM_VA: no 0x1000 bytes free in VRAM")


def _fill_vram(c: Client) -> None:
    size = 1 << 26
    while size >= 0x1000:
        try:
            c.io(Request.GEM_CREATE, uapi.GemCreateArgs(size, 0, Domain.VRAM, 0))
        except uapi.KmdError:
            size >>= 1


@pytest.mark.parametrize("op", [VaOp.MAP, VaOp.REPLACE])
def test_a_map_whose_second_page_table_does_not_fit_changes_nothing(op):
    """A range across two page tables, the first there already and no VRAM for the second:
    the ENOMEM leaves the VM as it was (no mapping, no valid entry, REPLACE's old mapping
    kept), so the range can be mapped once memory is back."""
    kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x1000)  # at the bottom of the VM: its page table (2 MiB) exists
    edge = (bo.addr | 0x1F_FFFF) + 1  # where the next page table would start
    old, new = (c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x2000, 0, Domain.GTT, 0)).handle for _ in range(2))
    if op == VaOp.REPLACE:
        va(c, old, VaOp.MAP, edge - 0x1000, 0x1000)
    vm = c.f.vm
    before = list(vm.maps)
    table = vm._table(vm.levels - 1, edge - 0x1000, False)
    pte_at = table.gpu_addr // 4 + 2 * ((edge - 0x1000) >> 12 & 511)
    pte = int(kmd_model.bound().mem32[pte_at])
    _fill_vram(c)
    with pytest.raises(uapi.KmdError) as ei:
        va(c, new, op, edge - 0x1000, 0x2000)
    assert ei.value.errno == errno.ENOMEM
    assert vm.maps == before and int(kmd_model.bound().mem32[pte_at]) == pte


def test_handles_and_context_ids_may_be_numpy_integers_as_every_other_integer_field():
    """Every integer argument takes a numpy integer (a handle read back from an array);
    the handle and context lookups did too little: `no BO with handle np.int64(1)`."""
    kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo()
    h, ctx = np.int64(bo.handle), np.uint32(c.ctx)
    assert c.io(Request.GEM_MMAP, uapi.GemMmapArgs(h)).size == bo.size
    chunk = c.ib(bo, pm4.pad(8))
    chunk.handle = np.int32(bo.handle)
    seq = c.submit(chunk, ctx=ctx)
    assert c.wait(seq, ctx=ctx)
    assert c.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.QUERY_STATE, ctx)).ctx_id == c.ctx
    c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(h))
    expect(errno.EINVAL, f"GEM_CLOSE: no BO with handle {bo.handle}", c.io, Request.GEM_CLOSE,
           uapi.GemCloseArgs(bo.handle))


@pytest.mark.parametrize("query, shown", [(22.0, "22.0"), (np.array([0x16, 0x0E]), "array([22, 14])"),
                                          (True, "True"), ("DEV_INFO", "'DEV_INFO'")])
def test_an_info_query_that_is_not_an_int_is_einval(query, shown):
    """drm_amdgpu_info.query is a u32: a float equal to a known query is not one, and an
    array is refused with EINVAL, not a numpy ValueError from comparing it."""
    kmd_model.bind(RefModel())
    c = Client()
    expect(errno.EINVAL, f"INFO: query must be an int, not {shown}", c.io, Request.INFO, uapi.InfoArgs(query))



def test_a_request_number_is_an_integer_and_only_an_integer():
    """A numpy integer request number is the ioctl it names; a float or a bool that equals
    one is not a request, and the message does not call a known ioctl unknown."""
    kmd_model.bind(RefModel())
    c = Client()
    assert c.io(np.uint32(Request.INFO), uapi.InfoArgs(InfoQuery.DEV_INFO)).va_start
    expect(errno.EINVAL, "unknown ioctl request 64.0", c.io, float(Request.GEM_CREATE), uapi.GemCreateArgs(0x1000))
    expect(errno.EINVAL, "unknown ioctl request True", c.io, True, None)


def test_an_alignment_no_heap_can_meet_is_named_in_the_enomem():
    """The heap has room, but not at that alignment: the message says which, rather than
    claiming there are not 0x1000 bytes free."""
    kmd_model.bind(RefModel())
    c = Client()
    with pytest.raises(uapi.KmdError) as ei:
        c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 1 << 40, Domain.GTT, 0))
    assert ei.value.errno == errno.ENOMEM
    assert ei.value.message.startswith("GEM_CREATE: no 0x1000 bytes aligned to 0x10000000000 free in GTT (")


def test_binding_a_bound_device_again_closes_the_old_drivers_files():
    """A second bind() of the same device replaces its driver (as rebind() does): the old
    driver's files are closed (EBADF) and their CPU mappings revoked, instead of living on
    with jobs that never finish and BOs whose memory the new driver hands out again."""
    dev = RefModel()
    kmd_model.bind(dev)
    old = Client()
    bo = old.bo()
    kmd_model.bind(dev)
    new = Client()
    nbo = new.bo()
    expect(errno.EBADF, "INFO: the file is closed", old.io, Request.INFO, uapi.InfoArgs(InfoQuery.DEV_INFO))
    with pytest.raises(uapi.MappingRevoked):
        bo.u32[0] = 0xBAD
    new.run(nbo, pm4.write_data(nbo.addr, [7]))
    assert nbo.u32[0] == 7
    nbo.u32[0] = 8
    kmd_model.bind(RefModel())  # another device: the old driver goes, its files with it, as at an unbind
    expect(errno.EBADF, "INFO: the file is closed", new.io, Request.INFO, uapi.InfoArgs(InfoQuery.DEV_INFO))
    with pytest.raises(uapi.MappingRevoked, match=r": its device's driver was unbound \(another device was bound\)$"):
        nbo.u32[0] = 9
