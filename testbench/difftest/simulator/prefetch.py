"""The model's side of a campaign, run ahead in the process that started the simulator.

A stream's generation and its run on the reference model depend on (seed, index, caps)
alone, so they need not wait for the simulator: while the simulator runs stream i on
the RTL, the process that launched it (testbench/difftest/simulator/runner.py, otherwise idle
until the simulator ends) makes the next streams and runs them on the model, on the
other core. What the simulator gets is what it would have computed itself: the same
Stream, the model's Observation and memory, made by the same code from the same inputs.

Protocol, over a multiprocessing connection (a Unix socket with an authentication key
that runner.py passes in the environment): the simulator side sends its caps, the
lockstep flag, the end of its range of indices and how far ahead to work, once; then,
as it starts each stream i, i. The server answers every index from i + 1 to i + ahead it
has not answered yet, in order, with (index, stream, observation, the model's memory as
the qwords where it differs from the stream's own CPU writes), or (index, None) when the
model raised; it skips indices the simulator has passed. A simulator that finds no
answer ready when it needs one computes the stream itself and drops the late answer, so
a slow or missing server only costs time.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import threading
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path

import numpy as np

from ..campaign import make_stream, run_model
from ..driver import Observation
from ..streams.gen import Caps
from ..streams.stream import Stream

ADDRESS_ENV = "DIFFTEST_PREFETCH"
KEY_ENV = "DIFFTEST_PREFETCH_KEY"


def _cpu_writes(stream: Stream, mem: np.ndarray) -> np.ndarray:
    """`mem` zeroed, then only the stream's CPU writes ("mem" actions, releases too) made,
    in order: most of what the model's memory holds at the end (the DMA sources' random
    bytes, the command buffers), so it need not be sent."""
    mem[:] = 0
    m32 = mem.view("<u4")

    def do(actions) -> None:
        for a in actions:
            if a[0] == "mem":
                dw = np.asarray(a[2], dtype=np.uint32)
                m32[a[1] >> 2:(a[1] >> 2) + dw.size] = dw
            elif a[0] == "submit":
                do(a[2])
    do(stream.actions)
    return mem


def _answer(seed: int, index: int, caps: Caps, step: bool) -> tuple:
    """(index, stream, observation, and the model's memory as the qwords (indices, values)
    where it differs from _cpu_writes')."""
    stream = make_stream(seed, index, caps)
    obs, m = run_model(stream, caps, step=step)
    q = m.mem.view(np.uint64)
    differ = np.flatnonzero(q != _cpu_writes(stream, np.empty_like(m.mem)).view(np.uint64))
    return index, stream, obs, differ, q[differ]


class Server:
    """Answers the simulators of one run_rtl call (one connection each) from a thread
    per connection."""

    def __init__(self, seed: int):
        self.seed = seed
        # its own short folder: a Unix socket's path has at most 107 bytes
        self.folder = Path(tempfile.mkdtemp(prefix="gpucosim-prefetch-"))
        self.address = str(self.folder / "sock")
        self.key = secrets.token_bytes(16)
        self.listener = Listener(self.address, family="AF_UNIX", authkey=self.key)
        self.threads: list[threading.Thread] = []
        self.closing = False
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def env(self) -> dict[str, str]:
        return {ADDRESS_ENV: self.address, KEY_ENV: self.key.hex()}

    def _accept(self) -> None:
        while True:
            try:
                conn = self.listener.accept()
            except OSError:  # closed
                return
            except Exception:  # noqa: BLE001 - a client that failed the handshake
                continue
            if self.closing:  # close()'s own connection
                conn.close()
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self.threads.append(t)

    def _serve(self, conn: Connection) -> None:
        with conn:
            try:
                caps, step, end, ahead = conn.recv()
                at, done = -1, -1  # the simulator's stream, the last index answered
                while True:
                    at = max(at, conn.recv())
                    while conn.poll(0):  # only the newest position counts
                        at = max(at, conn.recv())
                    for index in range(max(done + 1, at + 1), min(at + ahead + 1, end)):
                        try:
                            answer = _answer(self.seed, index, caps, step)
                        except Exception:  # noqa: BLE001 - the simulator runs it and reports it
                            answer = (index, None)
                        conn.send(answer)
                        done = index
                        if conn.poll(0):  # the simulator moved on: see where it is first
                            break
            except (EOFError, OSError):
                return

    def close(self) -> None:
        # The acceptor must be gone before the socket closes: a thread still in accept()
        # could take the next Server's socket, given the same file descriptor, and greet
        # its simulator with this key ("digest sent was rejected"). So wake it with a
        # connection of our own and wait for it.
        self.closing = True
        try:
            Client(self.address, family="AF_UNIX", authkey=self.key).close()
        except (OSError, EOFError, AuthenticationError):
            pass
        self.acceptor.join(5)
        self.listener.close()
        for t in self.threads:
            t.join(5)
        shutil.rmtree(self.folder, ignore_errors=True)


class Prefetcher:
    """The simulator's side: `start(i)` as stream i starts (the server works on the next
    ones), `take(i)` when stream i is due: (stream, observation, model memory), or None
    when it is not there yet (compute it here). The memory is one buffer, valid until the
    next take."""

    def __init__(self, conn: Connection, caps: Caps, step: bool, end: int, ahead: int):
        self.conn = conn
        self.held: tuple | None = None  # an answer received before its turn
        self.mem: np.ndarray | None = None  # the model's memory of the last answer taken
        conn.send((caps, step, end, ahead))

    @classmethod
    def connect(cls, caps: Caps, step: bool, end: int, ahead: int = 2) -> "Prefetcher | None":
        address, key = os.environ.get(ADDRESS_ENV), os.environ.get(KEY_ENV)
        if not address or not key:
            return None
        try:
            return cls(Client(address, family="AF_UNIX", authkey=bytes.fromhex(key)), caps, step, end, ahead)
        except (OSError, EOFError, ValueError, AuthenticationError):
            return None  # the campaign runs without it (its records say ahead: false)

    def start(self, index: int) -> None:
        try:
            self.conn.send(index)
        except OSError:
            pass

    def take(self, index: int, mem_size: int) -> tuple[Stream, Observation, np.ndarray] | None:
        try:
            while True:
                got, self.held = self.held, None
                if got is None:
                    if not self.conn.poll(0):
                        return None
                    got = self.conn.recv()
                if got[0] > index:  # a later one: keep it for its turn
                    self.held = got
                    return None
                if got[0] == index:
                    if got[1] is None:
                        return None
                    _, stream, obs, differ, values = got
                    if self.mem is None or self.mem.size != mem_size:
                        self.mem = np.empty(mem_size, dtype=np.uint8)
                    _cpu_writes(stream, self.mem).view(np.uint64)[differ] = values
                    return stream, obs, self.mem
        except (OSError, EOFError):
            return None

    def close(self) -> None:
        try:
            self.conn.close()
        except OSError:
            pass
