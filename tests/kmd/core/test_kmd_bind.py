"""Binding the KMD and what it reports: its parameters at their bounds, bind and rebind
(a bring-up whose ring or IB test fails refuses the bind; a rebind keeps observers and trace
hooks and clears the counters), the observers (each job entering the ring, each doorbell,
interrupts, fences; gpucosim's timeline and crash reports are built on them), the counters
and stats, and spurious interrupts (counted, not taken for events)."""

from __future__ import annotations

import dataclasses
import errno

import pytest

import kmd_model
from kmd_model import regs
from kmd_model.uapi import CtxArgs, CtxOp, KmdError, MappingRevoked, Request
from spec import pm4
from testbench.refmodel import RefModel

from ..test_kmd_ioctl import Client
from tests.security.security_helpers import Holder


class SpuriousModel(RefModel):
    """A model whose interrupt line reads high `spurious` more times with nothing behind it."""

    spurious = 0

    def irq_level(self) -> bool:
        if self.spurious:
            self.spurious -= 1
            return True
        return super().irq_level()


def test_spurious_interrupts_are_counted_not_taken_for_events():
    dev = SpuriousModel(ih=False)
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo()
    c.run(bo, pm4.write_data(bo.addr + 0x800, [1]))
    assert kmd.mmio.read(regs.INT_STATUS) == 0
    before = (kmd.stats["spurious_interrupts"], kmd.stats["interrupts"], dev.now())
    dev.spurious = 2
    kmd.service()
    kmd.service()
    assert kmd.stats["spurious_interrupts"] == before[0] + 2 and kmd.stats["interrupts"] == before[1] + 2
    assert dev.now() - before[2] >= 2 * 16  # a line stuck high must not spin the driver
    assert kmd.stats["resets"] == 0 and kmd.mmio.read(regs.INT_STATUS) == 0


def test_rebind_keeps_observers_and_trace_hooks():
    dev = RefModel()
    seen, hooked = [], []
    kmd = kmd_model.bind(dev, observers=[lambda e, f: seen.append((e, f))])
    kmd.trace_hooks.append(hooked.append)
    c = Client()
    c.bo()
    n0 = len(seen)
    new = kmd_model.rebind(ring_log2_dw=8)
    assert new is not kmd and kmd_model.bound() is new and new.ring.size_dw == 256
    assert c.f.closed and not kmd.live_bos()  # the old driver's files were closed
    events = [e for e, _ in seen[n0:]]
    assert events[-1] == "bind" and seen[-1][1]["kmd"] is new and events.count("bind") == 1
    assert "doorbell" in events and "fence" in events  # the new bring-up (ring and IB tests) was observed
    n = len(hooked)
    c2 = Client()
    c2.bo()
    assert [r.request for r in hooked[n:]] == ["CTX", "INFO", "GEM_CREATE", "GEM_MMAP", "GEM_VA"]
    assert new.params.ring_log2_dw == 8 and new.params.ib_test



@pytest.mark.parametrize("kw, exc, message", [
    # (the one meant first, as gpucosim run --kmd says it: 24 names were left to read through)
    (dict(sched_jbos=8), TypeError, "unknown KMD parameter(s) sched_jbos: did you mean sched_jobs?; known: "),
    (dict(zzz=8), TypeError, "unknown KMD parameter(s) zzz; known: ban_after_hangs, "),
    (dict(sched_jobs=0), ValueError, "KMD parameter sched_jobs must be an int in [1, 65536], not 0"),
    (dict(vram_fraction=2.0), ValueError, "KMD parameter vram_fraction must be in (0, 1), not 2.0")])
def test_a_rebind_with_a_bad_parameter_keeps_the_driver(kw, exc, message):
    """kmd_model.rebind(sched_jbos=8) (a typo) unloaded the driver, then failed on the name:
    no driver was bound any more, every open file was closed (an app's Device lost), and
    the next umd.open() said "no GPU is bound yet". The parameters are checked first, as
    modprobe checks them before it loads anything: the driver and its files are untouched."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    c.bo()
    with pytest.raises(exc) as ei:
        kmd_model.rebind(**kw)
    assert str(ei.value).startswith(message)
    assert kmd_model.bound() is kmd and not c.f.closed
    c.bo()  # (the file still works)
    assert kmd_model.rebind(sched_jobs=8).params.sched_jobs == 8


def test_a_rebind_revokes_the_old_drivers_mappings_saying_why():
    """The device bound again with files open (bind, not rebind, which closes them first):
    the memory behind the old driver's BOs is the new driver's to hand out, so a client's
    view kept across the bind raises MappingRevoked naming the BO as the client knows it
    (its file and handle) and why, and its file answers EBADF."""
    dev = RefModel()
    kmd_model.bind(dev)
    c = Client()
    bo = c.bo()
    bo.u32[0] = 7
    kmd_model.bind(dev)
    with pytest.raises(MappingRevoked) as ei:
        bo.u32[0] = 1
    assert str(ei.value) == f"BO fd{c.f.fd}:{bo.handle}: its driver was replaced (the device was bound again)"
    with pytest.raises(KmdError) as ki:
        c.io(Request.CTX, CtxArgs(CtxOp.ALLOC))
    assert ki.value.errno == errno.EBADF


def test_idle_waits_return_at_once_and_counters_read_the_hardware():
    dev = RefModel()
    kmd_model.bind(dev)
    c = Client(cap_perfmon=True)  # (it reads the device-wide counters)
    bo = c.bo(0x4000)
    c.run(bo, pm4.write_data(bo.addr + 0x2000, [1, 2, 3]) + pm4.dma_data(bo.addr + 0x3000, bo.addr + 0x2000, 12))
    t = dev.now()
    assert not c.io(Request.GEM_WAIT_IDLE, kmd_model.uapi.GemWaitIdleArgs(bo.handle, 1_000_000)).busy
    assert dev.now() - t < 1000  # an idle BO: no waiting out the timeout
    cnt = c.io(Request.INFO, kmd_model.uapi.InfoArgs(kmd_model.uapi.InfoQuery.COUNTERS))
    assert set(cnt.hw) == {"busy_cycles", "stall_cycles", "dwords_fetched", "dma_bytes_read", "dma_bytes_written",
                           "dma_busy_cycles", "timestamp"}
    assert cnt.hw["dma_bytes_written"] == 12 and 12 <= cnt.hw["dma_bytes_read"] <= 16  # reads: whole bus beats
    assert cnt.hw["dwords_fetched"] >= 24 and cnt.hw["timestamp"] > 0
    # the ring tests of the gfx ring and of the CP's second queue (gfx_high), the IB test, ours
    assert cnt.packets["DMA_DATA"] == 1 and cnt.packets["WRITE_DATA"] == 4
    assert bo.u32[0xC00:0xC03].tolist() == [1, 2, 3]


def test_every_doorbell_brings_new_work():
    """A ring smaller than the queue of jobs: the scheduler refills it as space comes back,
    and never rings the doorbell without moving the write pointer."""
    kmd = kmd_model.bind(RefModel(), ring_log2_dw=6)
    wptrs = []
    kmd.observers.append(lambda e, f: wptrs.append(f["wptr"]) if e == "doorbell" else None)
    c = Client()
    bo = c.bo(0x8000)
    hold = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x7000, 1, 1, "EQ")))
    seqs = [c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x4000 + 4 * i, [i + 1]), offset=0x100 * (i + 1)))
            for i in range(12)]
    for _ in range(5):
        kmd.service()  # nothing moved: nothing to ring
    bo.u32[0x1C00] = 1
    assert c.wait(seqs[-1]) and c.wait(hold, 0)
    assert len(wptrs) > 3 and all(b > a for a, b in zip(wptrs, wptrs[1:])), wptrs
    assert kmd.ring.doorbells == len(wptrs) + 2  # and the bring-up's two (ring test, IB test)


def test_fence_repr():
    from kmd_model.sched.fence import Fence
    f = Fence(0x12)
    assert repr(f) == "Fence(0x00000012 pending)"
    f.signalled = True
    assert repr(f) == "Fence(0x00000012 signalled)"
    f.error = RuntimeError("reset")
    assert repr(f) == "Fence(0x00000012 error)"


def test_stats_and_odd_parameters():
    kmd = kmd_model.bind(RefModel(), initial_seq=0xFFFF_FFFF)  # the last seqno is a first seqno too
    a, b = Client(), Client()
    a.bo()
    c = a.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
    s = kmd.kmd_stats()
    # the kernel's: wb, ring, IH, IB test, shadow pool, SDMA ring and gfx_high ring (7), a
    # root table per file's VM (2) and the page table under a's BO (1)
    assert (s["files"], s["contexts"], s["live_bos"], s["kernel_bos"]) == (2, 3, 1, 7 + 2 + 1)
    assert kmd.fence_drv.sync_seq == 0xFFFF_FFFF and s["last_fence"] == 0xFFFF_FFFF
    bo = a.bo()
    assert a.wait(a.submit(a.ib(bo, pm4.nop(2)), ctx=c), ctx=c)
    assert kmd.kmd_stats()["last_fence"] == 0
    pa = a.phys(bo)
    assert repr(a.f.handles[bo.handle]) == f"Bo(fd3:2 GTT [{pa:#x}, {pa + 0x4000:#x}) fd 3)"
    assert repr(kmd.wb_bo) == f"Bo(wb GTT [{kmd.wb_bo.gpu_addr:#x}, {kmd.wb_bo.end:#x}) kernel)"
    b.f.close()
    assert kmd.kmd_stats()["files"] == 1


def test_observers_see_each_job_enter_the_ring():
    """"run_job" (gpucosim's timeline draws it): the job and its hardware fence, once per
    time the job enters the ring: an innocent job in the ring at a reset enters it again,
    with a new fence."""
    kmd = kmd_model.bind(RefModel(), cs_check=False)
    seen = []
    kmd.observers.append(lambda event, f: seen.append((f["job"].seq, f["job"].ctx.id, f["fence"].seq))
                         if event == "run_job" else None)
    hold = Holder()
    a, b = Client(), Client()
    abo, bbo = a.bo(), b.bo()
    bad = a.submit(a.ib(abo, [pm4.header(0x7B, 0), 0]))
    good = b.submit(b.ib(bbo, pm4.write_data(bbo.addr + 0x100, [5])))
    hold.release()
    assert b.wait(good) and bbo.u32[0x40] == 5
    jobs = [(s, c) for s, c, _ in seen]
    assert jobs == [(hold.seq, hold.c.ctx), (bad, a.ctx), (good, b.ctx), (good, b.ctx)]  # b's again after the reset
    fences = [f for _, _, f in seen]
    assert fences == sorted(set(fences)) and all(f == seen[0][2] + i for i, f in enumerate(fences))


def test_kmd_parameters_at_their_bounds():
    """Each KMD parameter (`bind(dev, name=...)`, `gpucosim run --kmd name=...`) takes its
    smallest value and its largest (the cycle counts' 2^62 is only a sanity bound) and
    refuses one past either, in one line naming the parameter and its range."""
    from kmd_model.core.kmd import KmdParams

    smallest = {"ring_log2_dw": 6, "ih_log2_entries": 2, "ib_align_dw": 1, "initial_seq": 0, "job_timeout": 1,
                "fallback_poll": 1, "hw_timeout": 1, "max_ib_chunks": 1, "max_dep_chunks": 0, "max_job_dw": 1, "max_job_ibs": 1,
                "shadow_pool_kib": 4, "sdma_ring_log2_dw": 6, "hw_submission_limit": 1, "ban_after_hangs": 1,
                "unchecked_job_timeouts": 1, "checked_job_timeouts": 1, "sched_jobs": 1, "file_ban_after_hangs": 1}
    largest = {"ring_log2_dw": 20, "ih_log2_entries": 16, "ib_align_dw": 256, "initial_seq": 0xFFFF_FFFF,
               "max_ib_chunks": 64, "max_dep_chunks": 1 << 16, "max_job_ibs": 1 << 20, "max_job_dw": 1 << 30, "shadow_pool_kib": 1 << 30,
               "job_timeout": 1 << 62, "fallback_poll": 1 << 62, "hw_timeout": 1 << 62,
               "sdma_ring_log2_dw": 20, "hw_submission_limit": 1 << 20, "ban_after_hangs": 1 << 20,
               "unchecked_job_timeouts": 1 << 20, "checked_job_timeouts": 1 << 20, "sched_jobs": 1 << 16,
               "file_ban_after_hangs": 1 << 20}
    # Every integer parameter is bounded on both sides: a parameter added without its
    # bounds here fails this line.
    ints = {f.name for f in dataclasses.fields(KmdParams) if f.type in ("int", int)}
    assert set(smallest) == set(largest) == ints
    for name, lo in smallest.items():
        assert getattr(KmdParams(**{name: lo}), name) == lo
        with pytest.raises(ValueError, match=rf"^KMD parameter {name} must be an int in \[{lo}, \d+\], not {lo - 1}$"):
            KmdParams(**{name: lo - 1})
    for name, hi in largest.items():
        assert getattr(KmdParams(**{name: hi}), name) == hi
        with pytest.raises(ValueError, match=rf"^KMD parameter {name} must be an int in \[\d+, {hi}\], not {hi + 1}$"):
            KmdParams(**{name: hi + 1})
    with pytest.raises(ValueError, match=r"^KMD parameter ib_align_dw must be a power of two, not 24$"):
        KmdParams(ib_align_dw=24)


def test_observers_see_interrupts_and_fences_and_traces_are_sane():
    """"irq" for each interrupt taken and "fence" for each fence signalled (the timeline's
    instants); every traced ioctl says how long it took in wall-clock microseconds (under
    a second for these) and the failed ones are counted."""
    kmd = kmd_model.bind(RefModel())
    events, recs = [], []
    kmd.observers.append(lambda event, f: events.append((event, f.get("fence"))))
    kmd.trace_hooks.append(recs.append)
    c = Client()
    bo = c.bo()
    for i in range(3):
        c.run(bo, pm4.write_data(bo.addr + 4 * i, [i]), offset=0x100 * (i + 1))
    fences = [f.seq for e, f in events if e == "fence"]
    assert len(fences) == 3 and fences == sorted(fences) and fences[-1] == kmd.fence_drv.last_seq
    assert [e for e, _ in events].count("irq") == kmd.stats["interrupts"] - 1  # (the IB test's came before)
    errors = kmd.stats["ioctl_errors"]
    for _ in range(3):
        with pytest.raises(kmd_model.uapi.KmdError):
            c.io(Request.GEM_MMAP, kmd_model.uapi.GemMmapArgs(99))
    assert kmd.stats["ioctl_errors"] == errors + 3
    assert recs and all(0 <= r.wall_us < 1_000_000 for r in recs)


def test_rebinding_clears_the_counters_and_bind_says_what_it_takes():
    """A driver bound to a device that has run work starts its counters afresh (CONTROL.
    PERF_CLEAR): INFO COUNTERS shows its own ring and IB tests only; unknown parameters,
    and params given twice, are refused in one line."""
    from kmd_model.core.kmd import KmdParams

    dev = RefModel()
    kmd_model.bind(dev)
    c = Client()
    bo = c.bo()
    for i in range(4):
        c.run(bo, pm4.write_data(bo.addr + 4 * i, [i]))
    kmd = kmd_model.bind(dev)
    cnt = kmd.counters()["packets"]
    # the ring tests (gfx and gfx_high: the CP's two queues) and the IB test
    assert (cnt["WRITE_DATA"], cnt["RELEASE_MEM"], cnt["INDIRECT_BUFFER"]) == (3, 1, 1)
    with pytest.raises(TypeError, match=r"^unknown KMD parameter\(s\) speed, zoom; known: ban_after_hangs, cap_perfmon, cap_sys_nice, checked_job_timeouts, cs_check, fallback_poll, "):
        kmd_model.bind(dev, speed=1, zoom=2)
    with pytest.raises(TypeError, match=r"^bind: give either params or keyword parameters, not both$"):
        kmd_model.bind(dev, KmdParams(), job_timeout=5)


class CorruptingModel(RefModel):
    """A CP whose WRITE_DATA lands one bit off when it writes the IB test's magic."""

    def _op_write_data(self, *args) -> None:
        super()._op_write_data(*args)
        from kmd_model.core.kmd import IB_TEST_MAGIC

        m32 = self.mem.view("<u4")
        m32[m32 == IB_TEST_MAGIC] ^= 1


def test_an_ib_test_that_reads_back_wrong_fails_the_bind():
    """amdgpu's IB test at bind: its fence signals but the magic it wrote reads back wrong:
    the bind fails with EIO saying what it read and what it expected."""
    from kmd_model.core.kmd import IB_TEST_MAGIC

    kmd_model.unbind()  # (nothing bound before: the message is the bring-up's alone)
    with pytest.raises(kmd_model.uapi.KmdError) as e:
        kmd_model.bind(CorruptingModel())
    assert e.value.errno == errno.EIO
    assert e.value.message == f"IB test failed: read {IB_TEST_MAGIC ^ 1:#010x}, expected {IB_TEST_MAGIC:#010x}"


class DeafModel(RefModel):
    """A CP that never hears the doorbell."""

    def mmio_write32(self, offset: int, value: int) -> None:
        if offset != regs.RB_DOORBELL.ADDR:
            super().mmio_write32(offset, value)


def test_a_ring_test_that_never_completes_fails_the_bind():
    kmd_model.unbind()  # (nothing bound before: the message is the bring-up's alone)
    with pytest.raises(kmd_model.uapi.KmdError) as e:
        kmd_model.bind(DeafModel(), hw_timeout=2_000)
    assert e.value.errno == errno.ETIMEDOUT
    assert e.value.message == "ring test failed: scratch 0xcafedead after 2000 cycles (rptr 0x0, wptr 0x8)"


class DeafAfterOneDoorbell(RefModel):
    """A CP that hears the gfx ring's first doorbell (the ring test's) and no other."""

    heard = 0

    def mmio_write32(self, offset: int, value: int) -> None:
        if offset == regs.RB_DOORBELL.ADDR:
            self.heard += 1
            if self.heard > 1:
                return
        super().mmio_write32(offset, value)


def test_an_ib_test_whose_fence_never_signals_fails_the_bind():
    """The ring test passes, then the IB test's doorbell goes unheard: the bind fails with
    ETIMEDOUT naming the fence, the cycles waited and what fence memory holds."""
    kmd_model.unbind()  # (nothing bound before: the message is the bring-up's alone)
    with pytest.raises(kmd_model.uapi.KmdError) as e:
        kmd_model.bind(DeafAfterOneDoorbell(), hw_timeout=2_000, initial_seq=0x100)
    assert e.value.errno == errno.ETIMEDOUT
    assert e.value.message == ("IB test failed: fence 0x00000100 not signalled after 2000 cycles "
                               "(fence memory 0x000000ff)")


class GoesDeaf(RefModel):
    """A model that binds, then stops hearing the doorbell once told to (`deaf`)."""

    deaf = False

    def mmio_write32(self, offset: int, value: int) -> None:
        if not (self.deaf and offset == regs.RB_DOORBELL.ADDR):
            super().mmio_write32(offset, value)


def test_a_bind_whose_bring_up_fails_says_what_is_bound_now():
    """A bind of the bound device again detaches its driver before the bring-up (which
    resets the hardware): when the bring-up failed, the detached driver stayed the bound one
    and umd.open() opened a file on it. Now none is bound, said so. A bind of another device
    that fails leaves the bound driver bound and working, said so too; one that succeeds
    takes the render node, and a Device of the old driver is DeviceLost at its next call (it
    went on, on a driver that was no longer the bound one)."""
    import umd

    dev = GoesDeaf()
    kmd_model.bind(dev)
    gpu = umd.open()
    dev.deaf = True
    with pytest.raises(kmd_model.uapi.KmdError) as e:
        kmd_model.bind(dev, hw_timeout=2_000)
    assert e.value.errno == errno.ETIMEDOUT
    assert str(e.value) == ("ETIMEDOUT: ring test failed: scratch 0xcafedead after 2000 cycles (rptr 0x0, wptr 0x8): "
                            "no driver is bound now (the device's old driver was unloaded first): bind again")
    with pytest.raises(KmdError, match="^ENODEV: no device bound"):
        kmd_model.bound()
    with pytest.raises(umd.UmdError, match="^open: no GPU is bound yet"):
        umd.open()
    with pytest.raises(umd.DeviceLost, match="^alloc: this Device's file was closed by the driver"):
        gpu.alloc(64)
    gpu.close()

    kmd = kmd_model.bind(RefModel())
    gpu = umd.open()
    buf = gpu.alloc(64)
    with pytest.raises(kmd_model.uapi.KmdError) as e:
        kmd_model.bind(DeafModel(), hw_timeout=2_000)
    assert str(e.value) == ("ETIMEDOUT: ring test failed: scratch 0xcafedead after 2000 cycles (rptr 0x0, wptr 0x8): "
                            "the driver bound before is still bound, its device untouched")
    assert kmd_model.bound() is kmd
    with gpu.queue() as q:
        q.write(buf, 0, 5)
    assert buf.u32[0] == 5

    kmd_model.bind(RefModel())
    with pytest.raises(umd.DeviceLost, match="^alloc: this Device's file was closed by the driver"):
        gpu.alloc(64)
    with pytest.raises(umd.DeviceLost, match="^u32: this Device's file was closed by the driver"):
        buf.u32.tolist()
    gpu.close()


@pytest.mark.parametrize("dev, said", [
    (RefModel, "bind: give a device, RefModel(), not the class RefModel (docs/tutorial.md: "
               "kmd_model.bind(RefModel()))"),
    (None, "bind: give a device (a kmd_model.device.Device such as RefModel()), not None"),
    ("model", "bind: give a device (a kmd_model.device.Device such as RefModel()), not 'model'"),
])
def test_bind_names_a_device_it_cannot_take(dev, said):
    """docs/tutorial.md's paste line binds `RefModel()`: a new user who types the class
    (`kmd_model.bind(RefModel)`), None or a backend's name got a TypeError or AttributeError
    from inside the driver's bring-up (`RefModel.mmio_read32() missing 1 required positional
    argument`, `'str' object has no attribute 'mmio_read32'`); bind says what it takes, in one
    line, and the device bound before stays bound."""
    kmd_model.bind(RefModel())
    before = kmd_model.bound()
    with pytest.raises(TypeError) as e:
        kmd_model.bind(dev)
    assert str(e.value) == said
    assert kmd_model.bound() is before


@pytest.mark.parametrize("params, said", [
    ({"cap_sys_nice": True}, "bind: params is a KmdParams, not a dict: give its items as keywords, "
                             "bind(dev, **params), or KmdParams(**params)"),
    ("cs_check=False", "bind: params must be a KmdParams (or give keyword parameters: bind(dev, cs_check=False)), "
                       "not 'cs_check=False'"),
    ([8], "bind: params must be a KmdParams (or give keyword parameters: bind(dev, cs_check=False)), not list"),
])
def test_bind_names_parameters_it_cannot_take(params, said):
    """`kmd_model.bind(RefModel(), {"cap_sys_nice": True})` (the parameters as a dict, in
    bind's second place) was "AttributeError: 'dict' object has no attribute
    'vram_fraction'" from inside the driver; the driver bound before stays bound."""
    kmd_model.bind(RefModel())
    before = kmd_model.bound()
    with pytest.raises(TypeError) as e:
        kmd_model.bind(RefModel(), params)
    assert str(e.value) == said
    assert kmd_model.bound() is before
    assert kmd_model.bind(RefModel(), kmd_model.KmdParams(cap_sys_nice=True)).params.cap_sys_nice is True


def test_a_bound_driver_shows_what_it_is_at_the_prompt():
    """docs/tutorial.md's paste line, `kmd_model.bind(RefModel())`, typed at the interpreter's
    prompt showed "<kmd_model.core.kmd.Kmd object at 0x7f...>"."""
    import umd

    kmd = kmd_model.bind(RefModel())
    assert repr(kmd) == "<kmd_model.Kmd on model: 0 open files, 0 contexts>"
    gpu = umd.open()
    gpu.queue()
    assert repr(kmd) == "<kmd_model.Kmd on model: 1 open file, 1 context>"
    kmd_model.bind(RefModel())
    assert repr(kmd).startswith("<kmd_model.Kmd on model (no longer bound): 0 open files")


@pytest.mark.parametrize("burst", [1, 2, 3])
def test_a_model_whose_cp_runs_a_packet_or_a_few_a_cycle_binds_and_runs_jobs(burst):
    """RefModel(cp_burst=N): the CP runs N packets at one instant at most, refilled at one a
    cycle. It ran one burst per device call however many cycles the call spent, so with
    cp_burst 1 the bind's IB test (4 packets, in one 20,000-cycle wait) timed out, and a job
    of 40 packets took 20 fallback polls of 20,000 cycles with cp_burst 2. Now the CP runs
    one packet a cycle as time passes: the job's 40 packets take about 40 cycles more."""
    kmd = kmd_model.bind(RefModel(cp_burst=burst))
    c = Client()
    bo = c.bo()
    t0 = kmd.dev.now()
    c.run(bo, [w for i in range(40) for w in pm4.write_data(bo.addr + 0x800 + 4 * i, [i + 1])])
    assert bo.u32[0x800 // 4:0x800 // 4 + 40].tolist() == list(range(1, 41))
    assert kmd.dev.now() - t0 < 2_000, kmd.dev.now() - t0
    assert kmd.stats["resets"] == 0 and kmd.stats["job_timeouts"] == 0
