"""The CP's Fetcher (rtl/cp/fetch.py) in Amaranth's simulator, against a memory that answers
reads after a random latency, with a consumer that pops at random.

Every cycle the bench checks the AR channel (bus-aligned INCR bursts of at most
`max_burst_beats`, never across 4 KiB, never a dword outside [ptr, end) of the buffer, payload
held until ARREADY) and that the dwords come out in order, each with its tag and the response
of its beat. The scenarios: IBs at any dword alignment and length; a ring (small and large,
wrapping) whose end grows while it runs; redirects (flush, load and start in one cycle) with
beats of the old buffer still in flight; a read answered SLVERR.
"""

from __future__ import annotations

import random
from collections import deque

import pytest
from amaranth.hdl import Signal
from amaranth.lib import data
from amaranth.sim import Simulator

from rtl.cp.fetch import Fetcher

TAG = data.StructLayout({"parity": 1, "low": 4})


def tag_fn(m, dword):
    tag = Signal(TAG)
    m.d.comb += [tag.parity.eq(dword.xor()), tag.low.eq(dword[:4])]
    return tag


def word(addr: int) -> int:
    """The dword the memory holds at byte address `addr`."""
    return (addr * 2654435761 + 0x1234567) & 0xFFFF_FFFF


def expect_tag(dword: int) -> tuple[int, int]:
    return bin(dword).count("1") & 1, dword & 0xF


class Job:
    """A buffer to read: dword indices [ptr, end) at base, masked by mask (a ring)."""

    def __init__(self, base, ptr, end, mask=None):
        self.base, self.ptr, self.end, self.mask = base, ptr, end, mask

    def addr(self, i: int) -> int:
        return self.base + 4 * (i & self.mask if self.mask is not None else i)


def run_fetch(data_width: int, wraps: bool, jobs, seed: int, depth: int = 8, max_burst: int = 8,
              latency=(0, 6), pop_rate=0.7, grow=None, redirect_at=None, slverr=frozenset(),
              max_cycles: int = 20000) -> None:
    """`jobs`: Jobs run one after another (each a load + start; a later one a redirect with
    flush when `redirect_at` says after how many dwords of the earlier one). `grow`: the ring's
    end moves up by one step of this list every few cycles. `slverr`: byte addresses whose
    beat answers SLVERR."""
    f = Fetcher(data_width, 48, depth_beats=depth, max_burst_beats=max_burst, tag=(TAG, tag_fn), wraps=wraps)
    rng = random.Random(seed)
    bus_bytes = data_width // 8
    dpb = data_width // 32
    errors: list[str] = []

    async def bench(ctx):
        in_flight = deque()    # [ready cycle, addr of next beat, beats left, generation]
        generation = 0         # beats of bursts issued before a redirect belong to an older one
        held = None
        job_i = 0
        job = jobs[0]
        end = job.end if grow is None else grow[0]
        grow_i = 0
        want = deque()         # expected dwords of the current job: (dword, resp)
        popped = 0

        def start(j, flush):
            ctx.set(f.load, 1)
            ctx.set(f.start, 1)
            ctx.set(f.flush, int(flush))
            ctx.set(f.base, j.base)
            ctx.set(f.mask, j.mask if j.mask is not None else 0xFFFF_FFFF)
            ctx.set(f.ptr, j.ptr)

        start(job, False)
        ctx.set(f.end, end)
        for i in range(job.ptr, end):
            want.append(job.addr(i))
        await ctx.tick()
        for cycle in range(max_cycles):
            ctx.set(f.load, 0)
            ctx.set(f.start, 0)
            ctx.set(f.flush, 0)
            # ---- the ring's end grows
            if grow is not None and grow_i + 1 < len(grow) and cycle % 7 == 3:
                grow_i += 1
                for i in range(end, grow[grow_i]):
                    want.append(job.addr(i))
                end = grow[grow_i]
                ctx.set(f.end, end)
            # ---- memory: AR
            ar_ready = rng.random() < 0.7
            ctx.set(f.arready, int(ar_ready))
            # ---- memory: R (in order, one beat per cycle)
            beat = None
            if in_flight and in_flight[0][0] <= cycle:
                beat = in_flight[0]
                ctx.set(f.rvalid, 1)
                ctx.set(f.rdata, sum(word(beat[1] + 4 * k) << (32 * k) for k in range(dpb)))
                ctx.set(f.rresp, 2 if beat[1] in slverr else 0)
                ctx.set(f.rlast, int(beat[2] == 1))
            else:
                ctx.set(f.rvalid, 0)
            pop = rng.random() < pop_rate
            ctx.set(f.dw_ready, int(pop))

            # ---- settled: check AR
            arvalid = ctx.get(f.arvalid)
            araddr, arlen = ctx.get(f.araddr), ctx.get(f.arlen)
            if held is not None and (not arvalid or (araddr, arlen) != held):
                errors.append(f"cycle {cycle}: AR dropped or changed before ARREADY")
            held = (araddr, arlen) if arvalid and not ar_ready else None
            if arvalid and ar_ready:
                nbeats = arlen + 1
                if araddr % bus_bytes or nbeats > max_burst:
                    errors.append(f"cycle {cycle}: AR {araddr:#x} len {arlen}: not bus aligned or too long")
                if araddr // 4096 != (araddr + nbeats * bus_bytes - 1) // 4096:
                    errors.append(f"cycle {cycle}: AR {araddr:#x} len {arlen} crosses 4 KiB")
                inside = {job.addr(i) & ~(bus_bytes - 1) for i in range(job.ptr, end)}
                for b in range(nbeats):
                    if araddr + b * bus_bytes not in inside:
                        errors.append(f"cycle {cycle}: AR {araddr:#x} len {arlen} reads beat {b} outside "
                                      f"the buffer")
                        break
                in_flight.append([cycle + 1 + rng.randint(*latency), araddr, nbeats, generation])
            # ---- the dword on offer
            if ctx.get(f.dw_valid) and pop:
                got = ctx.get(f.dw_data)
                resp = ctx.get(f.dw_resp)
                tag = ctx.get(f.dw_tag)
                if not want:
                    errors.append(f"cycle {cycle}: dword {got:#x} beyond the buffer's end")
                else:
                    a = want.popleft()
                    exp_resp = 2 if a & ~(bus_bytes - 1) in slverr else 0
                    if got != word(a) or resp != exp_resp:
                        errors.append(f"cycle {cycle}: dword at {a:#x}: got {got:#x} resp {resp}, "
                                      f"expected {word(a):#x} resp {exp_resp}")
                    if (tag.parity, tag.low) != expect_tag(got):
                        errors.append(f"cycle {cycle}: dword {got:#x} has the tag of another")
                popped += 1
            if beat is not None:
                beat[1] += bus_bytes
                beat[2] -= 1
                if beat[2] == 0:
                    in_flight.popleft()
            if errors:
                return
            # ---- a redirect: the next job, while the old one's beats may still be in flight
            if redirect_at is not None and job_i + 1 < len(jobs) and popped >= redirect_at:
                job_i += 1
                job = jobs[job_i]
                generation += 1
                start(job, True)
                end = job.end
                ctx.set(f.end, end)
                want = deque(job.addr(i) for i in range(job.ptr, end))
                popped = 0
                await ctx.tick()
                continue
            if not want and not in_flight and (grow is None or grow_i + 1 == len(grow)):
                if job_i + 1 == len(jobs):
                    ctx.set(f.rvalid, 0)
                    await ctx.tick()  # (the last beat counts out at this edge)
                    if ctx.get(f.busy) or ctx.get(f.dw_valid):
                        errors.append("idle with reads in flight or a dword on offer past the end")
                    return
                job_i += 1
                job = jobs[job_i]
                start(job, False)
                end = job.end
                ctx.set(f.end, end)
                want = deque(job.addr(i) for i in range(job.ptr, end))
            await ctx.tick()
        errors.append(f"not finished in {max_cycles} cycles: {len(want)} dwords to go")

    sim = Simulator(f)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert not errors, "\n".join(errors[:10])


@pytest.mark.parametrize("data_width", [32, 64, 128])
def test_ibs_at_any_alignment(data_width):
    rng = random.Random(data_width)
    jobs = [Job(0x40000 + 0x1000 * k + 4 * rng.randrange(1024), 0, rng.choice([1, 2, 3, 7, 8, 9, 31, 100]))
            for k in range(12)]
    jobs.append(Job(0x7FFF0, 0, 40))  # across a 4 KiB boundary
    run_fetch(data_width, False, jobs, seed=data_width)


@pytest.mark.parametrize("data_width,log2", [(32, 1), (32, 6), (64, 2), (64, 9)])
def test_ring_wraps_while_its_end_grows(data_width, log2):
    size = 1 << log2
    ptr = size - 1  # starts at the last dword, so the first burst is cut by the wrap
    grow = [ptr + k for k in (0, 1, 3, 3, 10, 11, 40, 41, 41, 90)]
    run_fetch(data_width, True, [Job(0x10000, ptr, grow[-1], mask=size - 1)], seed=log2, grow=grow)


@pytest.mark.parametrize("seed", [7, 8, 10, 11])
def test_ring_with_a_slow_consumer(seed):
    # the buffer fills while bursts end in a beat's middle (the end grows by odd steps), and
    # a burst on offer must hold while the end grows
    for log2 in (1, 2, 6):
        size = 1 << log2
        grow = [size - 1 + k for k in range(1, 400, 3)]
        run_fetch(64, True, [Job(0x10000, size - 1, grow[-1], mask=size - 1)], seed=seed, grow=grow,
                  pop_rate=0.1)


@pytest.mark.parametrize("data_width", [32, 64])
def test_redirect_drops_what_the_old_buffer_had_in_flight(data_width):
    jobs = [Job(0x20004, 0, 200), Job(0x30008, 0, 50), Job(0x50000, 0, 20)]
    run_fetch(data_width, False, jobs, seed=7, redirect_at=5, latency=(3, 12), pop_rate=0.3)


def test_an_error_response_poisons_its_beat_only():
    run_fetch(64, False, [Job(0x60000, 0, 40)], seed=3, slverr={0x60020})


@pytest.mark.parametrize("data_width", [32, 64])
def test_slow_consumer_fills_the_buffer(data_width):
    # (at 64 bits a burst starting in a beat's second dword needs room for one dword more)
    for depth, burst in ((4, 2), (8, 8)):
        run_fetch(data_width, False, [Job(0x40004, 0, 300), Job(0x41ffc, 0, 9)], seed=11, depth=depth,
                  max_burst=burst, pop_rate=0.15)
