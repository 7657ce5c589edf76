"""Command buffers: IBs chain with INDIRECT_BUFFER CHAIN when full, sizes are patched
once known, every IB is padded to the alignment."""

from __future__ import annotations

import numpy as np
import pytest

import kmd_model
import umd
from spec import pm4
from testbench.refmodel import RefModel
from umd.winsys.cmdbuf import CHAIN_DW, CmdBuf


class FakeBuf:
    """An IB buffer without a device: just memory and an address."""

    def __init__(self, addr: int, size_dw: int):
        self.gpu_addr = addr
        self.u32 = np.zeros(size_dw, dtype="<u4")


def walk_chain(first_addr: int, first_size: int, read) -> list[tuple[int, int]]:
    """Follow CHAIN packets from the first IB: [(addr, size_dw)] of every IB in the chain."""
    out = [(first_addr, first_size)]
    while True:
        addr, size = out[-1]
        dwords = read(addr, size)
        last = None
        for item in pm4.decode_stream(dwords):
            assert item.ok, pm4.describe(item)
            last = item
        if last.name != "INDIRECT_BUFFER" or not last.fields["CHAIN"]:
            return out
        assert last.offset + last.length == size, "the chain packet must end its IB"
        a = last.fields["IB_BASE_LO"] << 2 | last.fields["IB_BASE_HI"] << 32
        out.append((a, last.fields["IB_SIZE"]))


def test_cmdbuf_chains_and_patches():
    bufs = {}

    def get():
        b = FakeBuf(0x10000 * (len(bufs) + 1), 64)
        bufs[b.gpu_addr] = b
        return b

    cb = CmdBuf(get, ib_size_dw=64, align_dw=8)
    for i in range(40):
        cb.emit(pm4.write_data(0x1000 + 4 * i, [i]), f"write #{i}")  # 5 dwords each
    first = cb.end()
    ibs = walk_chain(first.gpu_addr, first.size_dw, lambda a, n: bufs[a].u32[:n].tolist())
    assert len(ibs) == len(cb.ibs) == 4 and cb.chains == 3
    assert all(size % 8 == 0 and size <= 64 for _, size in ibs)
    packets = [p for a, n in ibs for p in pm4.decode_stream(bufs[a].u32[:n].tolist()) if p.name == "WRITE_DATA"]
    assert [p.data[0] for p in packets] == list(range(40))
    assert cb.labels[0x10000] == "write #0" and len(cb.labels) == 40
    with pytest.raises(ValueError, match="CmdBuf: a 60-dword packet does not fit an IB of 64 dwords"):
        cb.emit([0] * 60)
    with pytest.raises(ValueError, match="CmdBuf: ib_size_dw must be a multiple of 8 and at least 48, not 20"):
        CmdBuf(get, ib_size_dw=20)


def test_cmdbuf_empty_and_exact_fit():
    n = [0]

    def get():
        n[0] += 1
        return FakeBuf(0x1000 * n[0], 64)

    cb = CmdBuf(get, ib_size_dw=64, align_dw=8)
    assert cb.end() is None
    cb.emit(pm4.nop(64 - CHAIN_DW - 7 - 1))  # exactly the room one IB has for packets
    cb.emit(pm4.nop(1))  # does not fit beside it: chains
    first = cb.end()
    assert cb.chains == 1 and first.size_dw == 64 and cb.ibs[1].size_dw == 8


def test_cmdbuf_sizes_at_their_limits():
    """The smallest IB (4 x (chain + alignment) dwords) and an alignment of 1 (a power of two
    too: no padding) are taken; one alignment step less, or an alignment that is not a power
    of two, is refused. `dwords` counts every IB of the stream, closed or not."""
    n = [0]

    def get():
        n[0] += 1
        return FakeBuf(0x1000 * n[0], 64)

    smallest = 4 * (CHAIN_DW + 8)
    assert CmdBuf(get, ib_size_dw=smallest).max_packet_dw == smallest - CHAIN_DW - 7
    for size, align, why in ((smallest - 8, 8, f"ib_size_dw must be a multiple of 8 and at least {smallest}, not "
                                               f"{smallest - 8}"),
                             (64, 3, "align_dw must be a power of two, not 3"),
                             (64, 0, "align_dw must be a power of two, not 0")):
        with pytest.raises(ValueError, match=f"^CmdBuf: {why}$"):
            CmdBuf(get, ib_size_dw=size, align_dw=align)
    cb = CmdBuf(get, ib_size_dw=4 * (CHAIN_DW + 1), align_dw=1)
    assert cb.max_packet_dw == 4 * (CHAIN_DW + 1) - CHAIN_DW
    recorded = 0
    for i in range(9):  # 5-dword packets, three to a 20-dword IB: three IBs
        cb.emit(pm4.write_data(0x1000 + 4 * i, [i]))
        recorded += 5
        assert cb.dwords == recorded + CHAIN_DW * cb.chains  # (no padding with align_dw 1)
    assert cb.chains == 2
    first = cb.end()
    assert sum(ib.size_dw for ib in cb.ibs) == cb.dwords == 45 + 2 * CHAIN_DW and first.size_dw == 15 + CHAIN_DW


def check_chaining_on_device(dev):
    """A queue with small IBs: 200 commands chain through many IBs in one submission."""
    kmd = kmd_model.bind(dev)
    gpu = umd.open(api_version=2)
    buf = gpu.alloc(4096)
    q = gpu.queue(ib_size_dw=64, flush_threshold=1000)
    for i in range(200):
        q.write(buf, 4 * i, i ^ 0x5555)
    ev = q.signal()
    ibs = q.cmdbuf.ibs
    assert q.cmdbuf.chains == len(ibs) - 1 >= 10
    q.flush()
    assert ev.wait()
    assert buf.u32[:200].tolist() == [i ^ 0x5555 for i in range(200)]
    vm = gpu.ws.file.vm  # the IBs are at GPU virtual addresses: read them where they are

    def read(a, n):
        p = vm.translate(a, 4 * n)
        return dev.mem[p:p + 4 * n].view("<u4").tolist()
    chain = walk_chain(ibs[0].gpu_addr, ibs[0].size_dw, read)
    assert [a for a, _ in chain] == [ib.gpu_addr for ib in ibs]
    c = gpu.counters()
    assert c.kmd["cs"] == 1 and c.packets["INDIRECT_BUFFER"] >= len(chain) + 1
    # the IBs are reused for the next stream once the GPU is done with them
    created = q.pool.created
    for i in range(200):
        q.write(buf, 4 * i, i)
    q.finish()
    assert q.pool.created == created and buf.u32[199] == 199
    assert kmd.stats["resets"] == 0


CHECKS = [check_chaining_on_device]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_sdma_cmdbuf_closes_full_ibs_padded_with_sdma_nops_and_loses_nothing():
    """A copy queue's stream over several IBs: SDMA IBs do not chain, so each full IB is
    closed, padded to the alignment with SDMA NOPs only, written to its memory with every
    packet it took, whole and in order, each packet's label at its own address."""
    from spec import sdma

    bufs = []

    def get():
        bufs.append(FakeBuf(0x10000 * (len(bufs) + 1), 64))
        return bufs[-1]

    cb = CmdBuf(get, ib_size_dw=64, align_dw=8, sdma=True)
    sent = []
    for i in range(40):  # 4 + 1..7 dwords each: IBs end at every residue of the alignment
        pkt = sdma.write_linear(0x1000 + 64 * i, [i] * (1 + i % 7)) if i % 3 else sdma.fence(0x2000, i)
        cb.emit(pkt, f"call #{i}")
        sent.append(pkt)
    first = cb.end()
    assert first is cb.ibs[0] and len(cb.ibs) > 3 and cb.chains == 0
    got, labels = [], {}
    for ib in cb.ibs:
        assert ib.chain_at is None and 0 < ib.size_dw <= 64 and ib.size_dw % 8 == 0, ib
        for item in sdma.decode_stream(ib.buf.u32[:ib.size_dw].tolist()):
            assert item.ok, sdma.describe(item)
            if item.name == "NOP":
                assert not any(item.payload)
            else:
                got.append(item.dwords)
                labels[ib.gpu_addr + 4 * item.offset] = len(labels)
    assert got == sent
    assert {a: cb.labels[a] for a in labels} == {a: f"call #{i}" for a, i in labels.items()} \
        and len(cb.labels) == len(sent)


def test_cmdbuf_chain_packet_ends_an_ib_on_a_wider_alignment():
    """The KMD may ask for IBs padded to 16 dwords (ib_align_dw is a KMD parameter): the
    padding before a CHAIN packet makes the IB, chain packet included, end on the
    alignment. (With 8 dwords and a 4-dword chain packet, padding for the packet's length
    added or subtracted comes to the same: only a wider alignment tells them apart.)"""
    bufs = {}

    def get():
        b = FakeBuf(0x10000 * (len(bufs) + 1), 128)
        bufs[b.gpu_addr] = b
        return b

    cb = CmdBuf(get, ib_size_dw=128, align_dw=16)
    for i in range(60):
        cb.emit(pm4.write_data(0x1000 + 4 * i, [i]), f"write #{i}")  # 5 dwords each
    first = cb.end()
    assert cb.chains >= 2
    ibs = walk_chain(first.gpu_addr, first.size_dw, lambda a, n: bufs[a].u32[:n].tolist())
    assert [a for a, _ in ibs] == [ib.gpu_addr for ib in cb.ibs]
    assert [size % 16 for _, size in ibs] == [0] * len(ibs), ibs
    assert all(ib.chain_at == ib.size_dw - CHAIN_DW for ib in cb.ibs[:-1])
    packets = [p for a, n in ibs for p in pm4.decode_stream(bufs[a].u32[:n].tolist()) if p.name == "WRITE_DATA"]
    assert [p.data[0] for p in packets] == list(range(60))


@pytest.mark.parametrize("sdma", [False, True], ids=["pm4", "sdma"])
@pytest.mark.parametrize("fail_at", [0, 1, 2])
def test_a_command_whose_ib_wait_raises_is_taken_back_whole(sdma, fail_at):
    """A command of several packets (an IB each) that gets `fail_at` new IBs and not the next
    (get_ib raises:
    a wait for one timed out or was interrupted): the stream is as before the command, its
    IBs given back; the commands after it record as if it had never been tried (the same
    dwords in the same IBs, the same labels)."""
    from spec import sdma as sdma_pkts

    def write(addr, data):
        return sdma_pkts.write_linear(addr, data) if sdma else pm4.write_data(addr, data)

    def stream(fail: bool):
        made, free, new = [], [], [-99]

        def get():  # (a pool: IBs given back are taken again first, so both streams use the same addresses)
            if new[0] == fail_at:
                raise KeyboardInterrupt
            new[0] += 1
            if free:
                return free.pop(0)
            made.append(FakeBuf(0x10000 * (len(made) + 1), 64))
            return made[-1]

        cb = CmdBuf(get, ib_size_dw=64, align_dw=8, sdma=sdma, put_ib=free.append)
        for i in range(5):
            cb.begin()
            cb.emit(write(0x1000 + 4 * i, [i]), f"write #{i}")
        if fail:
            new[0] = 0  # (counts the new IBs the command takes)
            cb.begin()
            with pytest.raises(KeyboardInterrupt):
                for _ in range(4):  # (an IB each)
                    cb.emit(write(0x2000, [7] * 40), "failed")
            assert len(free) == fail_at
        new[0] = -99  # (no failure from here)
        for i in range(5, 14):
            cb.begin()
            cb.emit(write(0x1000 + 4 * i, [i]), f"write #{i}")
        cb.end()
        return [(ib.gpu_addr, ib.buf.u32[:ib.size_dw].tolist()) for ib in cb.ibs], cb.labels, cb.chains

    assert stream(True) == stream(False)


@pytest.mark.parametrize("after", [0, 1], ids=["nothing_after", "a_write_after"])
@pytest.mark.parametrize("packets", [1, 3], ids=["in_the_open_ib", "across_ibs"])
def test_take_back_after_end_leaves_the_stream_as_before_the_command(packets, after):
    """take_back (download's, when its flush did not submit): a command recorded, counted and
    closed by end() (a flush that then timed out, or was interrupted) is taken back whole,
    its label too (end() had moved it with the IB's): recording goes on, and the next end()
    gives the same IBs, labels and count as a stream where it was never recorded."""
    def stream(with_it: bool):
        made = []

        def get():
            made.append(FakeBuf(0x10000 * (len(made) + 1), 64))
            return made[-1]
        cb = CmdBuf(get, ib_size_dw=64, align_dw=8)
        for i in range(3):
            cb.begin()
            cb.emit(pm4.write_data(0x1000 + 4 * i, [i]), f"write #{i}")
            cb.command()
        if with_it:
            cb.begin()
            for _ in range(packets):  # (23 dwords each: one fits the open IB, three take another)
                cb.emit(pm4.write_data(0x2000, [7] * 20), "download")
            assert len(cb.ibs) == (1 if packets == 1 else 2)
            cb.command()
            cb.end()
            cb.take_back()
        for _ in range(after):
            cb.begin()
            cb.emit(pm4.write_data(0x3000, [9]), "write #3")
            cb.command()
        cb.end()
        return [(ib.gpu_addr, ib.buf.u32[:ib.size_dw].tolist()) for ib in cb.ibs], cb.labels, cb.commands, cb.chains

    assert stream(True) == stream(False)
