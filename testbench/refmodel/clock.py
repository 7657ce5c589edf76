"""The reference model's time (a mixin of RefModel, testbench/refmodel/device.py): the busy
counters' accounting, and time passing for an MMIO access or a wait for irq, which polls a
pending WAIT_REG_MEM (either CP queue) and SDMA POLL_REGMEM on their grids and runs a CP out
of packets again when its burst refills. The package's docstring says how time behaves."""

from __future__ import annotations

from .cp.packets import _Fault


class ModelTime:
    """Time passing in RefModel (its attributes: the CP's `_t`, `_wait`, `_cp_*`, `_hq1`,
    `sdma`; its calls: `_idle`, `_irq`, `_run`, `_poll`, `_fail`)."""

    def _account(self, t: int) -> None:
        dt = t - self._t
        if dt > 0:
            if not self._idle() or (self._hq1 is not None and not self._hq1.idle()):
                self._busy += dt
            if self.sdma is not None and not self.sdma.idle():
                self.sdma.busy += dt
            self._t = t

    def _waiting(self) -> bool:
        """A WAIT_REG_MEM (either CP queue) or an SDMA POLL_REGMEM is pending, or the CP ran
        out of packets for now (_cp_budget): time passing can change something."""
        return (self._cp_starved or self._wait is not None or (self.sdma is not None and self.sdma.wait is not None)
                or (self._hq1 is not None and self._hq1.s["_wait"] is not None))

    def _spend(self, cycles: int) -> None:
        """Let `cycles` pass for an MMIO access (no irq level wanted)."""
        if not self._waiting():
            self._account(self._t + cycles)
        else:
            self._advance(self._t + cycles)

    def _advance(self, to: int, until_irq: bool = False) -> bool:
        """Let time pass up to `to`, polling a pending WAIT_REG_MEM and SDMA POLL_REGMEM on their
        grids and running a CP out of packets (_cp_budget) whenever its burst is full again,
        earliest first. With `until_irq`, stop as soon as irq is high; returns the irq level.

        A wait whose poll failed in this call skips its next polls (their result is known)
        up to the earliest moment anything but the CPU could change memory: another wait's
        next poll (unless that one failed in this call too), the SDMA's last read, the CP's
        next burst, `to`. Any engine moving on stops the skipping, so a skipped poll never
        hides a write: the engines' one, nor the CPU's after the call returns (at `to`, or
        early at an irq, where no wait's next poll has been moved past that moment). With
        `skip_polls` False every point of every grid is polled: the same behaviour, slower
        (tests/model/refmodel/test_model_sdma.py compares them)."""
        if not self._waiting():
            self._account(to)
            return self._irq()
        sd, h1 = self.sdma, self._hq1
        token = object()
        while True:
            w = self._wait
            sw = sd.wait if sd is not None else None
            w1 = h1.s["_wait"] if h1 is not None else None
            t_cp = w.next_poll if w is not None else None
            t_h1 = w1.next_poll if w1 is not None else None
            t_sd = sw.next_poll if sw is not None else None
            t_st = self._cp_fill_t + self.cp_burst - self._cp_left if self._cp_starved else None
            t = to + 1
            for x in (t_cp, t_h1, t_sd, t_st):
                if x is not None and x < t:
                    t = x
            if t > to:
                break
            if t == t_cp or t == t_h1 or t == t_sd:  # at one instant: queue 0, queue 1, the SDMA
                x = w if t == t_cp else w1 if t == t_h1 else sw
                if x.failed_in is token and self.skip_polls and (x is not sw or x.deadline is None
                                                                  or x.next_poll < x.deadline):
                    # Its result is known until something can change memory: skip its polls up
                    # to then, `last`. At one instant the engines go in this order (queue 0,
                    # queue 1, the SDMA, a CP out of packets last): a poll at the moment a later
                    # one moves is known, one at the moment an earlier one moves is not.
                    last, later = to, False
                    if t_st is not None and t_st < last:
                        last = t_st
                    for y in (w, w1, sw):
                        if y is x:
                            later = True
                        elif y is not None and y.failed_in is not token:
                            limit = y.next_poll if later else y.next_poll - 1
                            if limit < last:
                                last = limit
                    if sw is not None and sw is not x and sw.deadline is not None and sw.deadline < last:
                        last = sw.deadline  # (the SDMA's last read is a move even if it fails)
                    if last >= t:
                        nxt = t + ((last - t) // x.interval + 1) * x.interval  # on its grid, after `last`
                        if x is not sw:  # the skipped reads are reads all the same (PERF_Q0/Q1_POLLS)
                            skipped = (nxt - t) // x.interval
                            self._polls += skipped
                            if x is w1:
                                h1.polls += skipped  # type: ignore[union-attr]
                        x.next_poll = nxt if x is not sw or sw.deadline is None else min(nxt, sw.deadline)
                        continue
                if x is sw:
                    self._account(t)
                    if not sd.poll():  # type: ignore[union-attr]
                        sw.failed_in = token
                        continue
                elif x is w:
                    if not self._cp_wait_due(token):
                        continue
                else:
                    with h1.active():  # type: ignore[union-attr]
                        if not self._cp_wait_due(token):
                            continue
            else:
                self._account(t)  # the CP's burst is full again: it runs on (below)
            # an engine moved on: memory may have changed for the others' waits
            for x in (self._wait, sd.wait if sd is not None else None, h1.s["_wait"] if h1 is not None else None):
                if x is not None:
                    x.failed_in = None
            self._run()
            if until_irq and self._irq():
                return True
        self._account(to)
        if self._cp_starved:  # the CP runs on with the packets this time gave it
            self._run()
        return self._irq()

    def _cp_wait_due(self, token: object) -> bool:
        """The WAIT_REG_MEM of the CP queue whose state is in the attributes is due: poll it;
        True when the queue moved on (`_advance` skips the polls whose result is known)."""
        w = self._wait
        self._account(w.next_poll)
        try:
            self._poll()
        except _Fault as e:
            self._fail(e)
        if self._wait is w:
            w.failed_in = token
            return False
        return True
