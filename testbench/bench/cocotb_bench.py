"""cocotb side of `make bench` (testbench/bench/): cycle-exact measurements on the RTL,
and the co-simulation's speed.

Each cycle measurement watches the bus signals of tb_top from cocotb, mid-cycle, on
every edge of the few thousand cycles it needs. The speed measurement runs the raw
baseline's work (testbench/bench/raw.py) with Python woken only by its events. Results
go to the JSON file named by $GPUCOSIM_BENCH_OUT; timing figures are reported, never
asserted.
"""

import json
import os
import time

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge

from kmd_model import regs
from spec import pm4
from spec import vm
from testbench.bench import raw as raw_bench
from testbench.sim.cocotb_device import CocotbDevice, design_params, run_driver
from testbench.bench.raw import DST, IB, OUT, RING, RPTR_WB, SRC

RESULTS: dict = {}


def _save():
    path = os.environ.get("GPUCOSIM_BENCH_OUT")
    if path:
        old = json.loads(open(path).read()) if os.path.exists(path) else {}
        old.update(RESULTS)
        with open(path, "w") as f:
            json.dump(old, f, indent=1)


async def _setup(dut) -> CocotbDevice:
    dev = await CocotbDevice.start(dut)
    for _, reg, value in raw_bench.setup_ops():
        await dev._awrite(reg, value)
    return dev


async def _wr(dev, reg, value) -> None:
    await dev._awrite(reg.addr(), int(value))


def _put(dev, addr, dwords):
    a = np.asarray(dwords, dtype=np.uint32)
    dev.mem[addr:addr + 4 * a.size] = a.view(np.uint8)


@cocotb.test()
async def cp_latency(dut):
    """Doorbell → first ring fetch, and submit → irq for an IB holding one RELEASE_MEM."""
    dev = await _setup(dut)
    ib = pm4.release_mem(OUT, 1, data_sel="DATA_32", int_sel="SEND_INT_ON_CONFIRM")
    _put(dev, IB, ib)
    _put(dev, RING, pm4.indirect_buffer(IB, len(ib)))
    await ClockCycles(dut.clk, 10)
    cocotb.start_soon(_wr(dev, regs.RB_DOORBELL, 4))
    accepted = fetch = irq = None
    for cycle in range(1, 2000):
        await FallingEdge(dut.clk)  # mid-cycle: this cycle's handshakes are settled
        if accepted is None and int(dut.s_axil_wvalid.value) and int(dut.s_axil_wready.value):
            accepted = cycle
        if accepted is not None and fetch is None and int(dut.arvalid.value):
            fetch = cycle
        if accepted is not None and int(dut.irq.value):
            irq = cycle
            break
    RESULTS["cp_doorbell_to_fetch_cycles"] = fetch - accepted
    RESULTS["cp_submit_to_irq_cycles"] = irq - accepted
    RESULTS["bus_bytes"] = design_params()["DATA_WIDTH"] // 8
    _save()


HQ_RING, HQ_RPTR_WB = 0x64000, 0x8080  # the CP's second queue's ring (256 dwords)
LOAD_IB_PACKETS = 400  # queue 0's long IB: WRITE_DATA packets of 8 dwords


async def _hp_latency(dut, load: bool) -> int:
    """Doorbell (its AXI4-Lite write accepted) → irq of a one-packet job on the CP's second
    queue (CP_HQD1_*, high priority by default): a RELEASE_MEM with its interrupt. With
    `load`, queue 0 is running a long IB of WRITE_DATA packets when the doorbell comes (the
    arbiter preempts it at the next packet boundary, docs/hardware.md "CP hardware queues")."""
    dev = await _setup(dut)
    await _wr(dev, regs.CP_HQD1_RB_BASE_LO, HQ_RING >> 8)
    await _wr(dev, regs.CP_HQD1_RB_SIZE, 7)
    await _wr(dev, regs.CP_HQD1_RB_RPTR_ADDR_LO, HQ_RPTR_WB)
    await _wr(dev, regs.CP_HQD1_RB_CNTL, regs.CP_HQD1_RB_CNTL.ENABLE.put(1) | regs.CP_HQD1_RB_CNTL.RPTR_WB.put(1))
    job = pm4.release_mem(OUT, 1, data_sel="DATA_32", int_sel="SEND_INT_ON_CONFIRM")
    _put(dev, HQ_RING, job)
    if load:
        ib = sum((pm4.write_data(DST + 32 * (i % 64), list(range(8))) for i in range(LOAD_IB_PACKETS)), [])
        _put(dev, IB, ib)
        _put(dev, RING, pm4.indirect_buffer(IB, len(ib)))
        await _wr(dev, regs.RB_DOORBELL, 4)
        await ClockCycles(dut.clk, 300)  # well inside the IB
        assert regs.STATUS.LEVEL.get(await _read(dev, regs.STATUS)) == 1, "queue 0 is not in its IB"
    await ClockCycles(dut.clk, 10)
    cocotb.start_soon(_wr(dev, regs.CP_HQD1_RB_DOORBELL, len(job)))
    accepted = None
    for cycle in range(1, 5000):
        await FallingEdge(dut.clk)  # mid-cycle: this cycle's handshakes are settled
        if accepted is None and int(dut.s_axil_wvalid.value) and int(dut.s_axil_wready.value):
            accepted = cycle
        if accepted is not None and int(dut.irq.value):
            if load:
                assert regs.STATUS.LEVEL.get(await _read(dev, regs.STATUS)) == 1, "queue 0 left its IB"
            return cycle - accepted
    raise RuntimeError("no interrupt from the high-priority job")


@cocotb.test()
async def hp_latency_idle(dut):
    """The high-priority queue's latency on an idle device."""
    RESULTS["hp_latency_idle_cycles"] = await _hp_latency(dut, load=False)
    _save()


@cocotb.test()
async def hp_latency_under_load(dut):
    """... and while queue 0 runs a long IB."""
    RESULTS["hp_latency_under_load_cycles"] = await _hp_latency(dut, load=True)
    _save()


@cocotb.test()
async def driver_batching(dut):
    """1024 small WRITE_DATA commands through the UMD at batch sizes 1, 8 and 64."""

    def body(dev):
        import kmd_model
        import umd

        out = {}
        for batch in (1, 8, 64):
            kmd = kmd_model.bind(dev)
            try:
                gpu = umd.open(api_version=2)
                buf = gpu.alloc(4 * 1024, "gtt")
                q = gpu.queue(flush_threshold=batch)
                s0 = dict(kmd.kmd_stats())
                c0 = dev.now()
                for i in range(1024):
                    q.write(buf, 4 * i, [i])
                q.finish()
                s1 = kmd.kmd_stats()
                assert buf.u32[:1024].tolist() == list(range(1024)), "batched writes lost data"
                out[batch] = {
                    "ioctls_per_cmd": (s1["ioctls"] - s0["ioctls"]) / 1024,
                    "doorbells_per_cmd": (s1["doorbells"] - s0["doorbells"]) / 1024,
                    "cycles": dev.now() - c0,
                }
                gpu.close()
            finally:
                kmd_model.unbind()
        return out

    out = await run_driver(dut, body)
    RESULTS["driver_ioctls_per_cmd"] = {str(b): v["ioctls_per_cmd"] for b, v in out.items()}
    RESULTS["driver_doorbells_per_cmd"] = {str(b): v["doorbells_per_cmd"] for b, v in out.items()}
    RESULTS["driver_cycles_1024_cmds"] = {str(b): v["cycles"] for b, v in out.items()}
    _save()


async def _run_work(dev, work: raw_bench.Work) -> tuple[int, float]:
    """Run a raw-baseline Work on the co-simulated device: (cycles, seconds) between its
    marks. The device is reset first, so the work may run again."""
    await dev.reset()
    raw_bench.place(work, dev.mem)
    marks = []
    for op in work.ops:
        if op[0] == "write":
            await dev._awrite(op[1], op[2])
        elif op[0] == "irq":
            if not int(dev.dut.irq.value) and not await dev._await_irq(1 << 40):
                raise RuntimeError(f"{work.name}: no interrupt")
        elif op[0] == "idle":
            await dev._adelay(op[1])
        elif op[0] == "mark":
            marks.append((dev.now(), time.perf_counter()))
    (c0, t0), (c1, t1) = marks
    return c1 - c0, t1 - t0


@cocotb.test()
async def sim_speed(dut):
    """Simulated cycles per wall second, idle and on back-to-back DMA copies, on the raw
    baseline's work (best of 3: the machine is noisy). $GPUCOSIM_BENCH_SCALE shortens
    the work (for the slow path cocotb drives the clock of)."""
    scale = float(os.environ.get("GPUCOSIM_BENCH_SCALE", "1"))
    dev = await CocotbDevice.start(dut)
    suffix = "" if dev.hdl_clock else "_before"
    for key, work in (("idle", raw_bench.idle_work(round(raw_bench.IDLE_CYCLES * scale))),
                      ("dma", raw_bench.dma_work(max(1, round(raw_bench.DMA_ROUNDS * scale))))):
        runs = [await _run_work(dev, work) for _ in range(3)]
        RESULTS[f"sim_cycles_per_s_{key}{suffix}"] = max(c / s for c, s in runs)
        RESULTS[f"sim_cycles_{key}{suffix}"] = runs[0][0]
    assert np.array_equal(dev.mem[raw_bench.DST:raw_bench.DST + raw_bench.DMA_COPIES * raw_bench.DMA_COPY_BYTES],
                          dev.mem[raw_bench.SRC:raw_bench.SRC + raw_bench.DMA_COPIES * raw_bench.DMA_COPY_BYTES]), \
        "the bench's DMA copies are wrong"
    dev.checker.check()
    _save()


DMA_ID = 8  # the mux puts the DMA behind the top ID bit


async def _dma_copies(dut, dev, ib_dwords, latency=0, vmid=0):
    """Run an IB of DMA_DATA packets; cycles from the DMA's first request (AR, or AW for a
    fill, which reads nothing) to its last B. With `vmid`, the IB runs under that VMID
    (its addresses are virtual: _vm_map's)."""
    dev.mem_model.configure(rd_latency=latency)
    await ClockCycles(dut.clk, 2)
    _put(dev, IB, ib_dwords)
    ring = pm4.indirect_buffer(IB + (VA_OFF if vmid else 0), len(ib_dwords), vmid=vmid)
    wptr = int(dev.mem[RPTR_WB:RPTR_WB + 4].view(np.uint32)[0])  # the CP's rptr: the ring's end
    for i, d in enumerate(ring):
        _put(dev, RING + 4 * ((wptr + i) % 1024), [d])
    await _wr(dev, regs.RB_DOORBELL, wptr + len(ring))
    first = last = None
    cycle = 0
    while True:
        await FallingEdge(dut.clk)  # mid-cycle: this cycle's handshakes are settled
        cycle += 1
        if first is None and (
                (int(dut.arvalid.value) and int(dut.arready.value) and int(dut.arid.value) == DMA_ID)
                or (int(dut.awvalid.value) and int(dut.awready.value) and int(dut.awid.value) == DMA_ID)):
            first = cycle
        if int(dut.bvalid.value) and int(dut.bready.value) and int(dut.bid.value) == DMA_ID:
            last = cycle
        if first is not None and last is not None and int(dut.gpu.cp.idle.value):
            break
        if cycle > 2_000_000:
            raise RuntimeError(f"DMA bench did not finish: first {first} last {last} idle {dut.gpu.cp.idle.value} "
                               f"dma busy {dut.gpu.dma.busy.value}")
    return last - first + 1


@cocotb.test()
async def dma_throughput(dut):
    """Back-to-back 4 KiB copies (32 of them) at 0 and 64 cycles of read latency; fills."""
    dev = await _setup(dut)
    bus = design_params()["DATA_WIDTH"] // 8
    n, size = 32, 4096
    src, dst = 0x100000, 0x200000
    dev.mem[src:src + n * size] = (np.arange(n * size) % 251).astype(np.uint8)
    copies = sum((pm4.dma_data(dst + i * size, src + i * size, size) for i in range(n)), [])
    span = await _dma_copies(dut, dev, copies)
    RESULTS["dma_copy_eff_4k"] = n * size / (span * bus)
    assert np.array_equal(dev.mem[dst:dst + n * size], dev.mem[src:src + n * size]), "bench copies wrong"
    span = await _dma_copies(dut, dev, copies, latency=64)
    RESULTS["dma_copy_eff_4k_lat64"] = n * size / (span * bus)
    fills = sum((pm4.dma_data(dst + i * size, 0x1234_5678, size, src_sel="DATA") for i in range(n)), [])
    span = await _dma_copies(dut, dev, fills)
    RESULTS["dma_fill_eff_4k"] = n * size / (span * bus)
    _save()


VA_OFF = 0x1000_0000  # _vm_map: virtual = physical + VA_OFF
PT = 0x80_0000  # where _vm_map builds its page tables


async def _read(dev, reg) -> int:
    return await dev._aread(reg.addr())


async def _vm_map(dev, vmid: int, ranges) -> None:
    """Page tables (4 KiB pages) mapping each physical [lo, hi) at lo + VA_OFF for `vmid`,
    the VMID's base and enable programmed, its TLB entries invalidated."""
    huge = 1 << vm.leaf_bits(vm.LEVELS - 2)
    tables: dict[int, int] = {}
    dev.mem[PT:PT + 4096] = 0
    nxt = PT + 4096
    m64 = dev.mem.view("<u8")
    for lo, hi in ranges:
        for pa in range(lo, hi, 4096):
            va = pa + VA_OFF
            t = tables.get(va // huge)
            if t is None:
                t = tables[va // huge] = nxt
                nxt += 4096
                dev.mem[t:t + 4096] = 0
                m64[(PT >> 3) + vm.index(va, 0)] = vm.pde(t)
            m64[(t >> 3) + vm.index(va, 1)] = vm.pte(pa, vm.READABLE | vm.WRITEABLE | vm.EXECUTABLE)
    await dev._awrite(regs.VM_CONTEXT_PT_BASE_LO.addr(vmid), PT)
    await dev._awrite(regs.VM_CONTEXT_PT_BASE_HI.addr(vmid), 0)
    await dev._awrite(regs.VM_CONTEXT_CNTL.addr(vmid), 1)
    await _vm_flush(dev, vmid)


async def _vm_flush(dev, vmid: int) -> None:
    await _wr(dev, regs.VM_INVALIDATE_REQ, regs.VM_INVALIDATE_REQ.PER_VMID.put(1 << vmid)
              | regs.VM_INVALIDATE_REQ.ALL_ADDR.put(1))
    while not (await _read(dev, regs.VM_INVALIDATE_ACK)) >> vmid & 1:
        pass


async def _tlb(dev) -> tuple[int, int, int]:
    return (await _read(dev, regs.PERF_TLB_HITS), await _read(dev, regs.PERF_TLB_MISSES),
            await _read(dev, regs.PERF_WALK_CYCLES))


@cocotb.test()
async def vm_translation(dut):
    """The MMU (issue 15): a page walk; a 1 MiB copy with a cold TLB (efficiency, hit rate);
    4 KiB copies with a warm TLB against the same copies untranslated."""
    dev = await _setup(dut)
    bus = design_params()["DATA_WIDTH"] // 8
    vmid = 1
    mib = 1 << 20
    await _vm_map(dev, vmid, [(IB, IB + 0x10000), (OUT, OUT + 0x1000), (SRC, SRC + mib), (DST, DST + mib)])
    dev.mem[SRC:SRC + mib] = (np.arange(mib) % 251).astype(np.uint8)
    # one miss: the IB's page and the fence's page are cold; cycles per walk (two levels)
    h0, m0, w0 = await _tlb(dev)
    await _dma_copies(dut, dev, pm4.dma_data(OUT + VA_OFF, SRC + VA_OFF, 4), vmid=vmid)
    h1, m1, w1 = await _tlb(dev)
    RESULTS["mmu_walk_cycles"] = (w1 - w0) / (m1 - m0)
    # 1 MiB, cold TLB
    await _vm_flush(dev, vmid)
    dev.mem[DST:DST + mib] = 0
    h0, m0, _ = await _tlb(dev)
    span = await _dma_copies(dut, dev, pm4.dma_data(DST + VA_OFF, SRC + VA_OFF, mib), vmid=vmid)
    h1, m1, _ = await _tlb(dev)
    assert np.array_equal(dev.mem[DST:DST + mib], dev.mem[SRC:SRC + mib]), "the translated 1 MiB copy is wrong"
    RESULTS["dma_copy_eff_1mib_cold"] = mib / (span * bus)
    RESULTS["tlb_hit_rate_copy_1mib"] = (h1 - h0) / ((h1 - h0) + (m1 - m0))
    # 32 copies of 4 KiB over 4 page pairs: the second run finds every page in the TLB
    n, size = 32, 4096
    copies = sum((pm4.dma_data(DST + VA_OFF + (i % 4) * size, SRC + VA_OFF + (i % 4) * size, size)
                  for i in range(n)), [])
    await _dma_copies(dut, dev, copies, vmid=vmid)
    _, m0, _ = await _tlb(dev)
    span = await _dma_copies(dut, dev, copies, vmid=vmid)
    _, m1, _ = await _tlb(dev)
    RESULTS["dma_copy_eff_4k_vm"] = n * size / (span * bus)
    RESULTS["dma_copy_eff_4k_vm_misses"] = m1 - m0
    plain = sum((pm4.dma_data(DST + (i % 4) * size, SRC + (i % 4) * size, size) for i in range(n)), [])
    span = await _dma_copies(dut, dev, plain)
    RESULTS["dma_copy_eff_4k_same_pages_physical"] = n * size / (span * bus)
    dev.checker.check()
    _save()


@cocotb.test()
async def dma_small_copy(dut):
    """A 16-byte aligned copy: DMA command accepted → its last write response."""
    dev = await _setup(dut)
    _put(dev, IB, pm4.dma_data(0x200000, 0x100000, 16))
    _put(dev, RING, pm4.indirect_buffer(IB, 7))
    await _wr(dev, regs.RB_DOORBELL, 4)
    accepted = None
    for cycle in range(1, 5000):
        await FallingEdge(dut.clk)  # mid-cycle: this cycle's handshakes are settled
        if accepted is None and int(dut.gpu.cmd_valid.value) and int(dut.gpu.cmd_ready.value):
            accepted = cycle
        if accepted is not None and int(dut.bvalid.value) and int(dut.bready.value) and int(dut.bid.value) == DMA_ID:
            RESULTS["dma_16b_copy_cycles"] = cycle - accepted
            break
    _save()


@cocotb.test()
async def cp_fetch_stream(dut):
    """Parsing throughput: an IB of 4,096 dwords of 4-dword NOPs with CP_STREAM_LATENCY
    cycles of read latency (default 16); ring and IB dwords per busy cycle, which is what
    the fetchers' read-ahead (rtl/cp/fetch.py, `fetch_depth`) buys (make sweep)."""
    dev = await _setup(dut)
    lat = int(os.environ.get("CP_STREAM_LATENCY", "16"))
    ib = []
    while len(ib) < 4096:
        ib += pm4.nop(3)
    dev.mem_model.configure(rd_latency=lat)
    await ClockCycles(dut.clk, 2)
    _put(dev, IB, ib)
    ring = pm4.indirect_buffer(IB, len(ib))
    _put(dev, RING, ring)

    busy0, dw0 = await _read(dev, regs.PERF_BUSY_CYCLES), await _read(dev, regs.PERF_DWORDS_FETCHED)
    await _wr(dev, regs.RB_DOORBELL, len(ring))
    for _ in range(200_000):
        await ClockCycles(dut.clk, 64)
        if int(dut.gpu.cp.idle.value):
            break
    busy = await _read(dev, regs.PERF_BUSY_CYCLES) - busy0
    dwords = await _read(dev, regs.PERF_DWORDS_FETCHED) - dw0
    dev.mem_model.configure(rd_latency=0)
    RESULTS[f"cp_stream_dwords_per_cycle_lat{lat}"] = dwords / busy
    _save()


SDMA_RING = 0x60000  # the SDMA's ring (1024 dwords), beside raw_bench's
SDMA_DMA_ID = 12  # the SDMA's own DMA engine: the mux's fourth master


async def _sdma_setup(dev) -> None:
    await _wr(dev, regs.SDMA_RB_BASE_LO, SDMA_RING >> 8)
    await _wr(dev, regs.SDMA_RB_CNTL, regs.SDMA_RB_CNTL.RB_ENABLE.put(1) | regs.SDMA_RB_CNTL.RB_SIZE.put(10))


async def _sdma_copies(dut, dev, words, cp_words=None):
    """Submit SDMA packets (and, with `cp_words`, an IB of DMA_DATA packets to the CP at the
    same time); cycles from the first request of a DMA engine to the last B of either."""
    wptr = await _read(dev, regs.SDMA_RB_WPTR) // 4
    for i, d in enumerate(words):
        _put(dev, SDMA_RING + 4 * ((wptr + i) % 1024), [d])
    ids = (SDMA_DMA_ID,) if cp_words is None else (SDMA_DMA_ID, DMA_ID)
    seen = {"first": None, "last": None}

    async def watch():
        cycle = 0
        while True:
            await FallingEdge(dut.clk)  # mid-cycle: this cycle's handshakes are settled
            cycle += 1
            if seen["first"] is None and (
                    (int(dut.arvalid.value) and int(dut.arready.value) and int(dut.arid.value) in ids)
                    or (int(dut.awvalid.value) and int(dut.awready.value) and int(dut.awid.value) in ids)):
                seen["first"] = cycle
            if int(dut.bvalid.value) and int(dut.bready.value) and int(dut.bid.value) in ids:
                seen["last"] = cycle
            if (seen["first"] is not None and seen["last"] is not None and int(dut.gpu.sdma.idle.value)
                    and int(dut.gpu.cp.idle.value)):
                return
            if cycle > 2_000_000:
                raise RuntimeError(f"SDMA bench did not finish: {seen}")

    task = cocotb.start_soon(watch())
    if cp_words is not None:
        _put(dev, IB, cp_words)
        ring = pm4.indirect_buffer(IB, len(cp_words))
        cp_wptr = await _read(dev, regs.RB_WPTR)
        for i, d in enumerate(ring):
            _put(dev, RING + 4 * ((cp_wptr + i) % 1024), [d])
        await _wr(dev, regs.RB_DOORBELL, cp_wptr + len(ring))
    await _wr(dev, regs.SDMA_DOORBELL, 4 * (wptr + len(words)))
    await task
    return seen["last"] - seen["first"] + 1


@cocotb.test()
async def sdma_throughput(dut):
    """The SDMA's COPY_LINEAR: one 4 KiB copy, 32 back to back in one submission, and 32 on
    each engine at once (the CP's DMA_DATA and the SDMA's COPY_LINEAR share the memory port)."""
    from spec import sdma

    dev = await _setup(dut)
    await _sdma_setup(dev)
    bus = design_params()["DATA_WIDTH"] // 8
    n, size = 32, 4096
    src, dst, dst2 = 0x100000, 0x200000, 0x300000
    dev.mem[src:src + n * size] = (np.arange(n * size) % 251).astype(np.uint8)
    span = await _sdma_copies(dut, dev, sdma.copy_linear(dst, src, size))
    RESULTS["sdma_copy_eff_4k_single"] = size / (span * bus)
    copies = sum((sdma.copy_linear(dst + i * size, src + i * size, size) for i in range(n)), [])
    span_sdma = await _sdma_copies(dut, dev, copies)
    RESULTS["sdma_copy_eff_4k"] = n * size / (span_sdma * bus)
    assert np.array_equal(dev.mem[dst:dst + n * size], dev.mem[src:src + n * size]), "SDMA bench copies wrong"
    dev.mem[dst:dst + n * size] = 0
    cp = sum((pm4.dma_data(dst2 + i * size, src + i * size, size) for i in range(n)), [])
    span_both = await _sdma_copies(dut, dev, copies, cp)
    assert np.array_equal(dev.mem[dst2:dst2 + n * size], dev.mem[src:src + n * size]), "CP bench copies wrong"
    assert np.array_equal(dev.mem[dst:dst + n * size], dev.mem[src:src + n * size]), "SDMA bench copies wrong"
    # bytes per cycle of both engines at once, against the SDMA alone (the port is one: ~1)
    RESULTS["cp_plus_sdma_bytes_per_cycle"] = 2 * n * size / span_both
    RESULTS["cp_plus_sdma_vs_alone"] = (2 * n * size / span_both) / (n * size / span_sdma)
    _save()
