"""What every proof harness shares: named properties, free inputs, the past, white-box access.

A harness wraps one real RTL block (never a copy) with the environment it may assume
(`assume`) and the properties it must meet (`prove`, `cover`), each named as in
formal/properties.py. The name travels to SymbiYosys as the property's source location
(`<group>.<name>:<line>`), which sby prints for a failed assert or a reached cover, so
run.py maps every result back to its row of the table.

Amaranth 0.5 keeps its "any value" cells (AnySeq: free every cycle, AnyConst: free but
fixed) out of the public `amaranth.hdl`; they are what SymbiYosys needs for inputs the
environment chooses, so they are imported from `amaranth.hdl._ast` here, once.
"""

from __future__ import annotations

import sys

from amaranth.hdl import Assert, Assume, Cat, Const, Cover, Elaboratable, Fragment, Module, ResetSignal, Signal, Value
from amaranth.hdl._ast import AnyConst, AnySeq  # noqa: F401 (re-exported for the harnesses)

from . import properties


class HarnessError(RuntimeError):
    """A harness does not match its table or its RTL (a property or signal name is wrong)."""


class _Elaborated(Elaboratable):
    """An already elaborated fragment as a submodule (Module wants `.elaborate()`)."""

    def __init__(self, fragment):
        self.fragment = fragment

    def elaborate(self, platform):
        return self.fragment


class WhiteBox:
    """The signals inside an elaborated block, by name, for invariants about its state.

    Proofs by induction need the block's internal state tied to what the harness tracks
    (a ghost counter of outstanding bursts must equal the block's own counter); reading
    those signals by name keeps the RTL free of formal-only ports. A renamed signal fails
    with its name and the block, not with a silent vacuous proof."""

    def __init__(self, dut, label: str):
        self.label = label
        self.fragment = Fragment.get(dut, None)
        self.module = _Elaborated(self.fragment)
        self._signals: dict[tuple[str, ...], dict[str, Signal]] = {}
        self._walk(self.fragment, ())

    def _walk(self, frag, path):
        found = self._signals.setdefault(path, {})
        read = {}
        for stmts in frag.statements.values():
            for stmt in stmts:
                for s in stmt._lhs_signals():
                    found.setdefault(s.name, s)
                for s in stmt._rhs_signals():  # inputs: driven by the parent, read here
                    read.setdefault(s.name, s)
        for name, s in read.items():
            found.setdefault(name, s)
        for sub, name, _ in frag.subfragments:
            if isinstance(sub, Fragment):
                self._walk(sub, path + (name or "?",))

    def __call__(self, name: str, path: str = "") -> Signal:
        """The signal `name` driven in the block (or in its submodule `path`, dotted)."""
        key = tuple(p for p in path.split(".") if p)
        sig = self._signals.get(key, {}).get(name)
        if sig is None:
            where = f"{self.label}.{path}" if path else self.label
            raise HarnessError(f"no signal {name!r} is driven in {where}: did the RTL rename it?")
        return sig

    def rows(self, name: str, path: str = "") -> list:
        """Every row of the memory `name` (a submodule of the block, or of its submodule
        `path`), each as a signal read through a read port of its own (added here: the block
        never sees it). Induction needs a queue's contents tied to the harness's ghost queue,
        and a memory's rows are no signals of the RTL (amaranth's MemoryData rows exist for
        simulation only). Each row is a View of the memory's shape."""
        from amaranth.hdl import Const
        from amaranth.hdl._mem import MemoryInstance
        from amaranth.lib import data
        from amaranth.utils import ceil_log2
        frag = self.fragment
        for part in [p for p in path.split(".") if p] + [name]:
            for sub, sub_name, _ in frag.subfragments:
                if sub_name == part:
                    frag = sub
                    break
            else:
                where = f"{self.label}.{path}" if path else self.label
                raise HarnessError(f"no submodule {part!r} in {where}: did the RTL rename it?")
        if not isinstance(frag, MemoryInstance):
            raise HarnessError(f"{self.label}: {name!r} is not a memory")
        shape = frag._data.shape
        from amaranth.hdl import Shape
        width = Shape.cast(shape).width
        out = []
        for i in range(frag._data.depth):
            sig = Signal(width, name=f"{name}_row{i}")
            frag.read_port(domain="comb", addr=Const(i, ceil_log2(frag._data.depth)), data=sig,
                           en=Const(1, 1), transparent_for=())
            out.append(data.View(shape, sig) if isinstance(shape, data.Layout) else sig)
        return out

    def state(self, fsm: str, name: str, path: str = "") -> Value:
        """True while the FSM `fsm` (its `<fsm>_state` signal) is in state `name`."""
        sig = self(f"{fsm}_state", path)
        for v in range(1 << len(sig)):
            try:
                if sig.decoder(v).split("/")[0] == name:
                    return sig == v
            except KeyError:  # past the last state
                break
        raise HarnessError(f"FSM {fsm!r} of {self.label} has no state {name!r}")

    def states(self, fsm: str, path: str = "") -> list[str]:
        sig = self(f"{fsm}_state", path)
        names = []
        for v in range(1 << len(sig)):
            try:
                names.append(sig.decoder(v).split("/")[0])
            except KeyError:
                break
        return names


class Harness(Elaboratable):
    """Subclasses set `group` (a key of properties.GROUPS) and write `build(m)`."""

    group: str = ""
    with_invariants: bool = True  # emit the induction's invariants (run.build_rtlil clears it for mutants)
    covers_only: frozenset | None = None  # the covers searched for (run.build_rtlil sets it for a CoverRun)
    asserts_only: frozenset | None = None  # the asserts checked (run.build_rtlil: a mutant checked on its targets)

    def __init__(self):
        self.emitted: dict[str, str] = {}  # property name → kind, as elaborated

    # -- properties
    def _named(self, stmt, name: str, kind: str):
        prop = properties.find(self.group, name)
        if prop.kind != kind:
            raise HarnessError(f"{self.group}.{name} is a {prop.kind} in formal/properties.py, "
                               f"emitted as {kind}")
        if name in self.emitted:
            raise HarnessError(f"{self.group}.{name} emitted twice")
        self.emitted[name] = kind
        # the name reaches sby as the source location: "<group>.<name>:<python line>"
        stmt.src_loc = (f"{self.group}.{name}", sys._getframe(2).f_lineno)
        self.m.d.comb += stmt

    def prove(self, name: str, test) -> None:
        """An assert of the table: holds in every reachable state. (In a mutant's BMC on its
        target properties alone, `asserts_only`, the others are not checked: dropping an assert
        leaves the traces as they are, and each step's proof that no listed one fails yet is
        what makes a deep BMC slow.)"""
        if self.asserts_only is not None and name not in self.asserts_only:
            test = Const(1)
        self._named(Assert(test), name, "assert")

    def cover(self, name: str, test) -> None:
        """A cover of the table: some trace reaches it. (In a search for some covers alone,
        `covers_only`, the others are stated unreachable, so that the solver spends no step on
        them.)"""
        if self.covers_only is not None and name not in self.covers_only:
            test = Const(0)
        self._named(Cover(test), name, "cover")

    def invariant(self, test) -> None:
        """An assert that strengthens the induction (the block's state agrees with the
        harness's ghost state). Proved like every assert; reported as `<group>.invariant`,
        not as a row of the table. Left out where only the table's rows are checked (a
        mutant's BMC: the rows must catch it, and invariants would only slow the search)."""
        if not self.with_invariants:
            return
        stmt = Assert(test)
        stmt.src_loc = (f"{self.group}.invariant", sys._getframe(1).f_lineno)
        self.invariants += 1
        self.m.d.comb += stmt

    def assume(self, test) -> None:
        """What the environment promises (a master's or a memory's side of a protocol)."""
        self.m.d.comb += Assume(test)

    # -- helpers
    def free(self, width: int, name: str | None = None) -> Signal:
        """A signal the environment chooses anew every cycle."""
        s = Signal(width, name=name)
        self.g.d.comb += s.eq(AnySeq(width))
        return s

    def const(self, width: int, name: str | None = None) -> Signal:
        """A value the environment chooses once (the same in every cycle)."""
        s = Signal(width, name=name)
        self.g.d.comb += s.eq(AnyConst(width))
        return s

    def past(self, v, name: str | None = None, init: int = 0) -> Signal:
        """`v` one cycle ago (`init` in the first cycle)."""
        v = Value.cast(v)
        # (reset_less: the harness's view of the past survives a reset of the design)
        s = Signal(len(v), name=name, init=init, reset_less=True)
        self.g.d.sync += s.eq(v)
        return s

    def held(self, valid, ready, payload):
        """(waited, old): VALID was high without READY last cycle, and the payload then."""
        return self.started & self.past(valid & ~ready), self.past(payload)

    def free_axi_slave(self, m, port) -> None:
        """`port`'s slave side free in every cycle, within AXI's rules: R and B held, with
        their payload, until READY."""
        for f in ("arready", "awready", "wready", "rvalid", "rid", "rdata", "rresp", "rlast",
                  "bvalid", "bid", "bresp"):
            sig = getattr(port, f)
            m.d.comb += sig.eq(self.free(len(sig)))
        for valid, ready, payload in ((port.rvalid, port.rready, Cat(port.rid, port.rdata, port.rresp, port.rlast)),
                                      (port.bvalid, port.bready, Cat(port.bid, port.bresp))):
            waited, old = self.held(valid, ready, payload)
            with m.If(waited):
                self.assume(valid & (payload == old))

    def no_reset(self) -> None:
        """The environment never resets: proofs start from the reset state (init values)."""
        self.assume(~ResetSignal())

    def elaborate(self, platform):
        m = self.m = Module()
        # free values and the past live in a module of their own: helpers called inside an
        # `m.If` must not become conditional (a past value updated only sometimes is stale)
        self.g = Module()
        m.submodules.ghost = self.g
        self.emitted = {}
        self.invariants = 0
        # `started` is low in the first cycle only: "the previous cycle" exists once it is high
        self.started = Signal(name="started", reset_less=True)
        m.d.sync += self.started.eq(1)
        self.build(m)
        missing = [p.name for p in properties.GROUPS[self.group].props if p.name not in self.emitted]
        if missing:
            raise HarnessError(f"{self.group}: properties in the table but not in the harness: "
                               f"{', '.join(missing)}")
        return m

    def build(self, m: Module) -> None:
        raise NotImplementedError
