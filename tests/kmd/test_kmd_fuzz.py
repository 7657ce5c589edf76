"""A hostile client's random ioctls: every request, every argument field given a good value,
a value off by one page, a huge or negative int, a float, a string, None, a numpy scalar,
a bare object, an int whose int() raises or an object whose repr spans lines, in random order across three open files, while the client scribbles over
its own BOs (IBs included) between calls. The KMD must answer each with a KmdError whose
message is one line naming the ioctl, never another exception; afterwards the device still
runs a good job for a new client, and closing every file leaves no BO behind.

(It found an SDMA IB off its 32-byte alignment raising a ValueError from the packet
builder inside CS: tests/kmd_sched/queues/test_kmd_queues_scheduling.py pins that one.)
"""

from __future__ import annotations

import errno
import random

import numpy as np
import pytest

import kmd_model
from kmd_model.uapi import (CsArgs, CsChunkDep, CsChunkFence, CsChunkIb, CtxArgs, CtxOp, GemCloseArgs, GemCreateArgs,
                            GemMmapArgs, GemVaArgs, GemWaitIdleArgs, HwIp, InfoArgs, KmdError, MappingRevoked, Request,
                            WaitCsArgs)
from spec import pm4
from testbench.refmodel import RefModel

from .test_kmd_ioctl import Client


class _IntRaises(int):
    """An int whose int() raises (client code run by the KMD's conversion)."""

    def __int__(self):
        raise RuntimeError("client code")

    __index__ = __int__


class _ReprLines:
    def __repr__(self):
        return "one\ntwo"


WEIRD = (None, -1, -2**63, 2**64, 2**32, 2**32 - 1, 0x7FFF_FFFF, 1.5, float("nan"), "1", b"\x01", [], {}, True,
         np.int64(5), np.uint32(7), np.float32(1), object(), 10**30, _IntRaises(1), _ReprLines())
NAMES_BY_VALUE = {int(r): r.name for r in Request}


class Hostile:
    """Argument values for one ioctl at a time: with probability `good` the call is well
    formed (its fields may still name another file's objects, closed handles, old seqnos);
    otherwise each field goes bad with probability 0.3, so most bad calls have one or two
    bad fields and reach deep into the checks."""

    def __init__(self, rng: random.Random, good: float):
        self.rng, self.good, self.p = rng, good, 0.0

    def call(self) -> None:
        self.p = 0.0 if self.rng.random() < self.good else 0.3

    def val(self, good):
        r = self.rng.random()
        if r >= self.p:
            return good
        r /= self.p
        if r < 0.45:
            return self.rng.choice(WEIRD)
        if r < 0.8:
            return self.rng.randrange(-5, 1 << self.rng.choice((4, 12, 20, 32, 48, 64)))
        return good + self.rng.choice((-1, 1, 4096, -4096)) if isinstance(good, int) else good

    def chunk(self, h: int, ctx: int, seqs: list[int]):
        rng, v = self.rng, self.val
        k = rng.random()
        if k < 0.7:
            size = rng.choice((8, 8, 16, rng.randrange(1, 64)))
            offset = rng.randrange(0, 4096, rng.choice((32, 32, 4)))  # (4: off an SDMA IB's 32-byte rule)
            return CsChunkIb(v(size), v(h), v(offset), v(None), v(0),
                             v(rng.choice((HwIp.GFX, HwIp.GFX, HwIp.DMA))), v(0), v(0))
        if k < 0.8:
            return CsChunkFence(v(h), v(rng.randrange(0, 4096, 4)))
        if k < 0.95 or self.p == 0:
            return CsChunkDep(v(0), v(0), v(ctx), v(rng.choice(seqs or [0])), v(0))
        return rng.choice(WEIRD)


def ioctl_args(h: Hostile, st: dict) -> tuple:  # noqa: C901 - one branch per request
    """One random (request, args) for a file whose BOs, contexts and seqnos are in `st`."""
    rng, v = h.rng, h.val
    h.call()
    bo = rng.choice(st["bos"]) if st["bos"] and rng.random() < 0.8 else rng.randrange(0, 20)
    ctx = rng.choice(st["ctx"]) if st["ctx"] and rng.random() < 0.8 else rng.randrange(0, 5)
    # what the fuzz frees is mostly its own later objects: the first BOs and context live on
    # (else after a few hundred calls nothing valid is left to submit)
    mine = bo if bo not in st["bos"][:2] else rng.randrange(3, 20)
    my_ctx = ctx if ctx != st["ctx0"] else rng.randrange(st["ctx0"] + 1, st["ctx0"] + 5)
    seq = rng.choice(st["seq"] or [0])
    op = rng.randrange(11)
    if op == 0:
        return Request.GEM_CREATE, GemCreateArgs(v(rng.choice((4096, 8192, 65536))), v(0), v(rng.choice((2, 4))),
                                                 v(rng.choice((0, 1, 2, 8))))
    if op == 1:
        return Request.GEM_CLOSE, GemCloseArgs(v(mine))
    if op == 2:
        return Request.GEM_MMAP, GemMmapArgs(v(bo))
    if op == 3:
        op = rng.choice((CtxOp.ALLOC, CtxOp.ALLOC, CtxOp.FREE, CtxOp.QUERY_STATE))
        return Request.CTX, CtxArgs(v(op), v(my_ctx if op == CtxOp.FREE else ctx), v(0), v(0))
    if op in (4, 5):
        ib_bo = rng.choice(st["bos"][:2]) if rng.random() < 0.9 else bo  # (the mapped ones)
        chunks = [h.chunk(ib_bo, ctx, st["seq"]) for _ in range(rng.choice((1, 1, 1, 2, 3, 0)))]
        return Request.CS, CsArgs(v(ctx), v(chunks))
    if op == 6:
        return Request.WAIT_CS, WaitCsArgs(v(ctx), v(seq), v(rng.choice((0, 100, 5000))))
    if op == 7:
        return Request.INFO, InfoArgs(v(rng.randrange(0, 8)))
    if op == 8:
        return Request.GEM_VA, GemVaArgs(v(mine), v(rng.randrange(1, 5)), v(rng.randrange(0, 1 << 30, 4096)), v(0),
                                         v(4096), v(rng.randrange(0, 16)))
    if op == 9:
        return Request.GEM_WAIT_IDLE, GemWaitIdleArgs(v(bo), v(rng.choice((0, 100, 5000))))
    return rng.choice((rng.randrange(0, 0x80), None, "CS", 1.0)), rng.choice((*WEIRD, CsArgs(1)))


def scribble(c: Client, bos: list, rng: random.Random) -> None:
    """The client writes a packet (good or bad, aimed mostly at its own BO) into one of its
    BOs, at an 8-dword slot where the fuzz puts IBs, or a random dword anywhere in it."""
    bo = rng.choice(bos)
    target = rng.choice(bos).addr + rng.randrange(0, 0x1000, 4) if rng.random() < 0.8 else rng.randrange(0, 1 << 32, 4)
    words = rng.choice((pm4.nop(2), pm4.write_data(target, [rng.getrandbits(32)]), [pm4.header(0x7B, 0), 0],
                        pm4.wait_reg_mem(target, 0, 0, "ALWAYS"), pm4.release_mem(target, rng.getrandbits(32)),
                        [rng.getrandbits(32)]))
    words = list(words) + pm4.pad(-len(words) % 8)
    o = rng.randrange(0, bo.u32.size - len(words), 8) if len(words) > 1 else rng.randrange(bo.u32.size)
    bo.u32[o:o + len(words)] = words


@pytest.mark.parametrize("cs_check", [True, False], ids=["checker", "vm_only"])
@pytest.mark.parametrize("good", [0.55, 0.9], ids=["hostile", "mostly_good"])
@pytest.mark.parametrize("seed", [1, 2])
def test_random_hostile_ioctls_only_ever_get_a_one_line_kmd_error(seed, good, cs_check):
    rng = random.Random(seed)
    h = Hostile(rng, good)
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000, cs_check=cs_check)
    clients = [Client() for _ in range(3)]
    state = {}
    for c in clients:
        bos = [c.bo(0x2000) for _ in range(2)]
        for bo in bos:
            for k in range(0, bo.u32.size, 8):  # every IB slot starts with a good packet
                c.ib(bo, pm4.write_data(bo.addr + 4 * k, [k]), offset=4 * k)
        state[c] = {"bos": [bo.handle for bo in bos], "mapped": bos, "ctx": [c.ctx], "ctx0": c.ctx, "seq": []}
    refused = ran = 0
    for _ in range(2500):
        c = rng.choice(clients)
        st = state[c]
        request, args = ioctl_args(h, st)
        try:
            out = c.f.ioctl(request, args)
        except KmdError as e:
            refused += 1
            msg = str(e)
            assert "\n" not in msg and e.message, repr(msg)
            assert e.errno in (errno.EINVAL, errno.ENOENT, errno.EBADF, errno.EACCES, errno.ENOMEM, errno.EIO,
                               errno.ECANCELED, errno.ETIME, errno.EBUSY, errno.EPERM), msg
            known = isinstance(request, int) and request in NAMES_BY_VALUE
            assert e.message.startswith(f"{NAMES_BY_VALUE[request]}" if known else "unknown ioctl request"), msg
        except MappingRevoked:
            refused += 1
        else:
            ran += 1
            if request == Request.GEM_CREATE:
                st["bos"].append(out.handle)
            elif request == Request.CTX and args.op == CtxOp.ALLOC:
                st["ctx"].append(out.ctx_id)
            elif request == Request.CTX and args.op == CtxOp.FREE and args.ctx_id in st["ctx"]:
                st["ctx"].remove(args.ctx_id)
            elif request == Request.CS:
                st["seq"].append(out.seq)
        if rng.random() < 0.3:
            try:
                scribble(c, st["mapped"], rng)
            except MappingRevoked:  # (the fuzz closed that BO's handle)
                pass
    s = kmd.kmd_stats()
    # both sides of the boundary were exercised, jobs ran
    assert refused > 500 and ran > 50 and s["jobs_retired"] + s["jobs_cancelled"] > 20, (refused, ran, s)
    # the device still serves a new client, whatever the others left running or broken
    c = Client()
    bo = c.bo()
    seq = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x100, [0xC0FFEE])))
    for other in clients:
        other.f.close()
    assert c.wait(seq) and bo.u32[0x40] == 0xC0FFEE
    c.f.close()
    s = kmd.kmd_stats()
    assert s["files"] == 0 and s["live_bos"] == 0, s
