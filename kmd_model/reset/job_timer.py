"""The job timer (Kmd's part, mixed into core/kmd.py's Kmd; drm_sched's timeout and
amdgpu_job_timedout): a ring whose head job made no progress for `job_timeout` cycles
goes through `timedout_job`, which diagnoses what the job is stuck in and recovers with
it as the guilty one (reset/recovery.py). Progress restarts the timer, so a long legal job
runs to its end.
"""

from __future__ import annotations

from spec import packets
from spec.sdma import packets as sdma_packets

from .. import regs
from ..log import get_logger
from ..sched.scheduler import Scheduler
from ..uapi import HwErrorInfo
from .stuck import any_wait_holds, find_unsatisfied_poll, find_unsatisfied_wait

log = get_logger("kmd")


class JobTimerMixin:
    """Kmd's job timer: has a ring moved, and what to do when it has not."""

    def _progressed(self, sched: Scheduler) -> bool:
        """The job timer of `sched`'s ring ran out: has its queue moved since it last looked?
        When it has, the timer starts again: a long legal job runs to its end, and a stuck
        one is caught between job_timeout and 2 * job_timeout cycles after its last step, a
        job stuck from its start job_timeout * 9 / 8 after it (the registers are read at the
        timer's looks, not at every job start, which would cost MMIO reads per job: the first
        look, Scheduler.FIRST_LOOK, comes job_timeout / 8 after the start and only takes the
        mark; a job that ends before it costs no read).

        Progress is the queue's own registers moving (ring.PROGRESS: its rptr and the dwords
        the CP fetched for it, PERF_Q0/Q1_DWORDS_FETCHED; the SDMA engine's counters), or the
        counters it shares with the CP's other queue (ring.SHARED_PROGRESS: all dwords
        fetched, DMA bytes) moving while the queue is not polling (STATUS.WAITING) nor stopped
        (STATUS.ERROR), or while the other queue had no job in the ring since the last look (they
        are its own DMA). A queue stuck in a WAIT_REG_MEM moves nothing of its own (a poll
        fetches nothing): the other queue's traffic does not hide it. A queue that is neither
        is running or waiting for the CP, which the other queue holds only by running (the
        arbiter skips a polling queue): a job queued behind the other queue's work is not
        taken for stuck. The price: a legal job that is polling at two looks job_timeout
        apart, with the same rptr and fetched dwords, while the other queue moves the DMA
        counters, is taken for stuck (amdgpu's job timer does not restart for progress at all).

        The dwords the CP fetched for the queue since the last look go to its head job's count
        (`head_fetched`, which _overrun bounds) whether or not the other queue was busy: the
        counter (ring.FETCHED) is the queue's own."""
        m, ring, now = self.mmio, sched.ring, self.dev.now()
        own = tuple(m.read(r) for r in ring.PROGRESS)
        shared = tuple(m.read(r) for r in ring.SHARED_PROGRESS)
        # the reads this queue's polls made (PERF_Q0/Q1_POLLS), for a queue that shares the CP:
        # did it have a turn to poll since the last look (_may_be_parked)?
        polls = m.read(ring.POLLS) if ring.POLLS is not None and self._cp_others(sched) else None
        before, since = sched.progress_mark, sched.marked_at
        sched.progress_mark, sched.marked_at = (own, shared, polls), now
        if not before:  # the head job is new (or the ring was restarted): count from here
            sched.head_fetched = 0
        else:
            i = ring.PROGRESS.index(ring.FETCHED)
            sched.head_fetched += (own[i] - before[0][i]) & 0xFFFF_FFFF
        unserved = False  # the CP busy with the other queue, this one waiting for it, since the last look
        if not before or own != before[0]:
            moved = True
        elif shared == before[1]:
            moved = False
        elif sched is self.sdma_sched:
            # the CP's fetched dwords and DMA bytes: the CP's packet in hand moving, which an
            # SDMA TRAP waits behind for the CP's IH writer (SdmaRing.SHARED_PROGRESS); a
            # polling or stopped engine waits for no one (tests/kmd_sched/queues/test_kmd_queues_not_stuck.py
            # check_an_sdma_job_behind_the_cps_long_packet_is_not_taken_for_stuck, and
            # test_kmd_reset.py's ..._long_nop_is_not_taken_for_stuck, on the RTL)
            st = m.read(ring.STATUS)
            moved = not (ring.STATUS.WAITING.get(st) or ring.STATUS.ERROR.get(st))
        else:
            others_idle = not any(s.pending or s.busy_at >= since for s in self._cp_others(sched))
            st = m.read(ring.STATUS)
            moved = not (ring.STATUS.WAITING.get(st) or ring.STATUS.ERROR.get(st)) or others_idle
            unserved = moved and not others_idle  # queued behind the other queue's work
            if (not moved and ring.STATUS.WAITING.get(st) and not ring.STATUS.ERROR.get(st)
                    and self._may_be_parked(sched, before[2] is not None and polls == before[2])):
                # Parked, not stuck: on the RTL a poll that failed parks its queue (WAITING
                # stays 1) until the CP is its own again to poll once more, and queue 1, which
                # outranks queue 0, keeps the CP while it can run. Here the queue did nothing
                # since the last look and the shared counters moved, the other queue's work
                # (a waiting queue moves none: its transfers ended before its poll began).
                # The queue having made no poll read since the last look (PERF_Q0_POLLS: it had
                # no turn to poll) and a poll of its job holding in memory now (_may_be_parked),
                # it waits for the CP, as a queue behind the other's work does: taken for
                # stuck, an innocent job polling a
                # flag that was set while a client of HIGH priority (any client by default)
                # kept queue 1 busy for a job timeout was reset with TIMEOUT, its context
                # guilty, a hang counted towards its file's ban (tests/kmd_sched/
                # test_kmd_queues_not_stuck.py check_a_poll_released_behind_queue_1_s_flood_is_not_taken_for_stuck,
                # on the RTL). A job none of whose polls holds is stuck as before, whatever
                # the other queue does; one with a poll that holds waits until the other
                # queue lets go of the CP (queue 1 waits one packet of queue 0's at most:
                # never parked).
                moved = unserved = True
        # The time rule (_overrun) counts the cycles the job could run: from its start to the
        # first look, then every interval between two looks but those in which its queue was
        # not served (the two cases above: its own counters still, the other queue's work
        # moving the shared ones, this queue queued behind it or parked in a poll that holds).
        # It counted every cycle from head_at: with cs_check off an innocent job queued
        # behind a HIGH client's jobs on queue 1 for unchecked_job_timeouts job timeouts was
        # reset as "ran N cycles unchecked" without having run a packet (tests/kmd_sched/
        # test_kmd_queues_not_stuck.py
        # test_an_unchecked_job_starved_by_queue_1_is_not_reset_for_the_time_it_could_not_run),
        # where the checked path takes it as waiting for the CP, as it is.
        if not before:
            sched.head_ran = now - sched.head_at
        elif not unserved:
            sched.head_ran += now - since
        if moved and self._overrun(sched) is not None:
            moved = False  # moving for ever is no reason to keep running: see KmdParams.unchecked_job_timeouts
        if moved:
            sched.progress_at = now
        return moved

    def _may_be_parked(self, sched: Scheduler, no_poll_made: bool) -> bool:
        """May `sched`'s queue, polling, its own counters still since the last look while the
        other CP queue's work moved the shared ones, be parked in a poll that holds, waiting
        for the CP (not stuck)? Either queue (queue 1 too: below), only when it made no poll
        read since the last look (`no_poll_made`: its
        PERF_Q0_POLLS still; a queue that has the CP polls every POLL_INTERVAL, one parked
        behind the other queue's work reads nothing), and only when some poll of the job
        holds in memory: the queue had no turn to poll, and may be in that one.

        Taken for stuck, an innocent job parked in a poll released while a client of HIGH
        priority (any client by default) kept queue 1 busy was reset with TIMEOUT, its
        context guilty, a hang towards its file's ban (tests/kmd_sched/queues/test_kmd_queues_not_stuck.py
        check_a_poll_released_behind_queue_1_s_flood_is_not_taken_for_stuck, on the RTL),
        with a later poll still to come too (..._with_a_later_poll_still_to_come_...). Until
        the CP counted each queue's poll reads, the KMD inferred the turn from what it could
        see, that queue 1 had been running at both looks with a job in its ring all along and
        that no WAIT_REG_MEM had started on the CP since the last look (PERF_PACKETS): a poll
        of queue 1 that fails yields the CP. But one that holds at once yields nothing, so a
        HIGH client flooding queue 1 with jobs that each start one had an innocent parked job
        reset (tests/kmd_sched/queues/test_kmd_queues_not_stuck.py
        test_a_flood_of_polls_that_hold_at_once_on_queue_1_leaves_a_parked_job_alone), and
        the rule kept growing terms for the ways a hostile client played with the looks. The
        count is what the rule was after.

        The polls that make the rule hold a hostile job: one stuck in a poll that never holds
        after one that does is parked only while its queue makes no read, that is while queue 1
        keeps the CP without a pause, in which no job of queue 0 can run anyway; the first
        interval between two looks in which its queue polled, and failed, finds it stuck
        (test_a_poll_that_never_holds_after_one_that_does_is_stuck_when_queue_1_lets_it_poll,
        ..._when_queue_1_polls_in_its_job, ..._when_queue_1_polls_only_between_looks,
        test_a_poll_a_client_makes_hold_only_at_the_looks_is_stuck). A POLL_INTERVAL longer
        than the job timeout leaves some intervals without a read, parked, but not all: each
        read it makes is a look's worth of proof. Queue 1 outranks queue 0 and takes the CP
        back after one packet of queue 0's, so it polls at every turn and its reads are the
        proof: a hostile client's HIGH job in a poll that never holds after one that does, its
        own normal jobs keeping queue 0 busy, is stuck at the first interval with a read (the
        rule was queue 0's alone: taken as parked by an inference, such a job held ring 1 for
        as long as they did, every other HIGH client behind it:
        test_a_high_job_in_a_poll_that_never_holds_after_one_that_does_is_stuck_while_queue_0_works).
        But a switch waits until the DMA engine has answered every transfer queue 0 queued,
        so its DMA_DATAs without CP_SYNC keep queue 1 off the CP, no read made, for as long as
        they run: an innocent HIGH job whose flag was set meanwhile was reset with TIMEOUT
        (tests/kmd_sched/queues/test_kmd_queues_not_stuck.py
        check_a_high_poll_held_off_by_queue_0_s_transfers_is_not_taken_for_stuck, Verilator)."""
        if not no_poll_made:
            return False
        return self._polls_hold(sched) or any_wait_holds(
            self.mem32, sched.head_job().ibs, self.info.ib_levels, **self._job_access(sched.head_job()))

    def _cp_others(self, sched: Scheduler) -> list[Scheduler]:
        """The rings whose queue shares the CP with `sched`'s (the CP's other queue)."""
        return [s for s in self.scheds if s is not sched and s.ring.CP_QUEUE and sched.ring.CP_QUEUE]

    def _job_access(self, job) -> dict:
        """How the diagnosis reads `job`'s IBs (its VM only: find_unsatisfied_wait's keywords)."""
        return dict(client_addr=job.client_addr, translate=self.job_translate(job), read=self.job_read(job),
                    translate_many=self.job_translate_many(job))

    def _polls_hold(self, sched: Scheduler) -> bool:
        """Does every WAIT_REG_MEM of the head job hold in memory now (the timeout's diagnosis,
        find_unsatisfied_wait, finds none that does not)? (A later poll that does not hold
        answers False: which poll the queue is in is not known; _may_be_parked then asks
        whether any holds.)"""
        job = sched.head_job()
        return job is not None and find_unsatisfied_wait(
            self.mem32, job.ibs, self.info.ib_levels, client_addr=job.client_addr,
            translate=self.job_translate(job), read=self.job_read(job),
            translate_many=self.job_translate_many(job)) is None

    def _overrun(self, sched: Scheduler) -> str | None:
        """Why the head job must stop though it moves, when nothing bounds it (a PM4 job the CS
        checker did not check: a CHAIN to itself never ends, and moves its queue's fetch counter
        all the while; an SDMA job, never checked: POLL_REGMEMs that give up one by one move it
        for as long as it has them, the time rule alone); else None. Such a job may run what the checker lets a job run, twice
        over: once the CP has fetched more than 2 * max_job_dw dwords for it (its queue's own
        counter, PERF_Q0/Q1_DWORDS_FETCHED, counted at the timer's looks, so the other CP
        queue's work neither hides nor inflates it), it is reset; a checked job never fetches
        that much, so no job the checker would accept is. With the defaults that is some 1.6 M
        cycles (the time rule alone took 32 M, 2 minutes on the model, and with the CP's one
        shared fetch counter the time rule was all there was while the other queue was busy).

        The time rule stays, as a backstop: more than `unchecked_job_timeouts` job timeouts
        run since the job reached the head of its ring (`head_ran`), the intervals between two
        looks in which its queue was not served left out (_progressed: its own counters still
        while the other queue's work moved the shared ones, this queue neither polling nor
        stopped, or parked in a poll that holds). No loop is known to need it (every packet a
        job runs is fetched on its own queue). It counted every cycle from the head: an
        innocent job that queue 1 kept off the CP was reset for time it could not run, which
        the checked path (no time rule, its timer restarted) never held against a job."""
        job = sched.head_job()
        if job is None:
            return None
        if job.checked is not None:
            # The checker bounds its dwords, not its time: 7-dword DMA_DATAs of 1 MiB each (a
            # CP_SYNC fill of the client's own memory, legal) moved the DMA counters at every
            # look, and one job held its queue for as long as its bytes took (on Verilator 24
            # fills of 128 KiB, 168 dwords, held queue 0 for 131 job timeouts, an innocent job
            # behind it; max_job_dw dwords of them some 4e10 cycles). The time rule, further off.
            if sched.head_ran > self.params.checked_job_timeouts * sched.job_timeout:
                return (f"ran {sched.head_ran} cycles, more than {self.params.checked_job_timeouts} job timeouts "
                        "(checked_job_timeouts: the checker bounds a job's dwords, not the bytes it moves)")
            return None
        if sched is self.sdma_sched:
            # No dword rule: an SDMA job has no CHAIN, it fetches its IBs once. But nothing
            # checks what they do, and a POLL_REGMEM gives up after its RETRY_COUNT and moves
            # on: a job of polls each giving up inside a job timeout moves the fetch counter at
            # every look, and held the ring for ever (174,762 polls fit one IB). The time rule
            # bounds it, as amdgpu's timer bounds every job by its time.
            ran = self.dev.now() - sched.head_at
            if ran > self.params.unchecked_job_timeouts * sched.job_timeout:
                return (f"ran {ran} cycles (the SDMA ring is not checked), more than "
                        f"{self.params.unchecked_job_timeouts} job timeouts")
            return None
        limit = 2 * self.max_job_dw
        if sched.head_fetched > limit:
            return (f"fetched {sched.head_fetched} dwords unchecked (cs_check off), more than twice max_job_dw "
                    f"({limit})")
        # (the cycles it could run, counted at the timer's looks: _progressed; not those its
        # queue waited for the CP behind the other queue's work)
        if sched.head_ran > self.params.unchecked_job_timeouts * sched.job_timeout:
            return (f"ran {sched.head_ran} cycles unchecked (cs_check off), more than {self.params.unchecked_job_timeouts} "
                    "job timeouts")
        return None

    def _why_timed_out(self, sched: Scheduler) -> str:
        why = self._overrun(sched)
        if why is not None:
            return why
        return f"no progress for {self.dev.now() - sched.progress_at} cycles"

    @staticmethod
    def _doing(ring, stuck, st: int, waiting: int, level: int) -> str:
        """What a timed-out job's queue was doing, for its message: the packet it is stuck in
        when the diagnosis found it, else the queue by its hardware name (CP queue 0 or 1, the
        SDMA engine: "CP polling" did not say which of the CP's two queues) polling or busy,
        with its status register."""
        if stuck:
            return f"stuck in {stuck}"
        if waiting:
            return f"{ring.ENGINE} polling in a {ring.POLL_PACKET}"
        return f"{ring.ENGINE} busy at {regs.IbLevel(level).name} ({ring.STATUS.NAME} {st:#x})"

    def _held_by_the_drain(self, sched: Scheduler) -> bool:
        """Is the head job's VM's VMID drained for a waiting VM, a later job of the VM held
        back by it (VmidManager.lift_drain)? Then the drain is lifted, the held job goes, and
        the timer starts again: the job is stuck only if it makes no progress after that.
        Not for a job the time rules reset."""
        job = sched.head_job()
        if self._overrun(sched) is not None or not self.vmids.lift_drain(job.vm):
            return False
        log.warning("%s: job %#x of context %s made no progress while its VMID %d was drained and a "
                    "later job of its VM waited for it: the drain moves on", sched.name, job.seq, job.ctx.name,
                    job.vm.vmid)
        sched.progress_at = self.dev.now()
        for s in self.scheds:
            if s.has_queued():
                s.kick()
        return True

    @staticmethod
    def _done_unseen(sched: Scheduler) -> bool:
        """Has the ring's head job finished, its fence in memory though nobody has read it yet
        (its interrupt dropped by a full IH ring, the fallback poll not due)? Then it is
        retired here, not reset: the job timer took such a job for stuck and reset the
        device for it (or its queue), every ring's jobs resubmitted. (The timer runs only with
        a job in the ring: Scheduler.timed_out.)"""
        job = sched.pending[0]
        sched.fence_drv.process()
        return job.finished

    def timedout_job(self) -> None:
        """drm_sched's timedout_job: the head job made no progress for job_timeout cycles."""
        if self._done_unseen(self.sched):
            return
        job = self.sched.head_job()
        st = self.mmio.read(regs.STATUS)
        if regs.STATUS.ERROR.get(st):  # stopped by an error whose interrupt we never saw
            self._cp_error(self.read_cp_error())
            self._recover_pending()
            return
        if self._held_by_the_drain(self.sched):
            return
        self.stats["job_timeouts"] += 1
        why = self._why_timed_out(self.sched)
        stuck = find_unsatisfied_wait(self.mem32, job.ibs, self.info.ib_levels, client_addr=job.client_addr,
                                      translate=self.job_translate(job), read=self.job_read(job),
                                      translate_many=self.job_translate_many(job))
        msg = (f"job {job.seq:#x} timed out on {self.ring.name}: {why}, "
               f"{self._doing(self.ring, stuck, st, regs.STATUS.WAITING.get(st), regs.STATUS.LEVEL.get(st))}, "
               f"context {job.ctx.name}")
        # the packet it is stuck in, when found: its place, as a CP error names its packet's
        # (so the UMD names the call that recorded it)
        level = regs.IbLevel(stuck.level if stuck else regs.STATUS.LEVEL.get(st)).name
        info = HwErrorInfo(code="TIMEOUT", level=level,
                           opcode=packets.WAIT_REG_MEM.opcode if stuck or regs.STATUS.WAITING.get(st) else 0,
                           opcode_name="WAIT_REG_MEM" if stuck or regs.STATUS.WAITING.get(st) else None,
                           offset=stuck.offset if stuck else 0, addr=stuck.addr if stuck else 0,
                           seq=job.seq, ctx_id=job.ctx.id, message=msg)
        log.error("timeout: %s", msg)
        if self.observers:
            self.notify("gpu_error", info=info, state=None, job=job, ring=self.ring.name)
        self.ring_recover(self.sched, job, info)

    def ring_timedout_job(self, sched: Scheduler) -> None:
        """drm_sched's timedout_job for an extra ring."""
        if self._done_unseen(sched):
            return
        job, ring = sched.head_job(), sched.ring
        raw = self.mmio.read(ring.STATUS)
        st = ring.STATUS.decode(raw)
        if st["ERROR"]:
            self._ring_error(sched, ring.read_error())
            self._ring_recover_pending(sched)
            return
        if self._held_by_the_drain(sched):
            return
        self.stats["job_timeouts"] += 1
        # the packet it polls in, found as the gfx ring's timer finds it: its place goes into
        # the error's fields, so the UMD names the call that recorded it
        if sched is self.sdma_sched:
            stuck = find_unsatisfied_poll(self.mem32, job.ibs, job.client_addr, self.job_read(job),
                                          self.job_translate(job), self.job_translate_many(job))
        else:  # (the CP's other queue runs PM4, as ring 0)
            stuck = find_unsatisfied_wait(self.mem32, job.ibs, self.info.ib_levels, client_addr=job.client_addr,
                                          translate=self.job_translate(job), read=self.job_read(job),
                                          translate_many=self.job_translate_many(job))
        polls = stuck or st["WAITING"]
        doing = self._doing(ring, stuck, raw, st["WAITING"], st["LEVEL"])
        msg = f"job {job.seq:#x} timed out on {ring.name}: {self._why_timed_out(sched)}, {doing}, context {job.ctx.name}"
        opcode = (sdma_packets.POLL_REGMEM.op if sched is self.sdma_sched else packets.WAIT_REG_MEM.opcode) if polls else 0
        info = HwErrorInfo(code="TIMEOUT", level=regs.IbLevel(stuck.level if stuck else st["LEVEL"]).name,
                           opcode=opcode, opcode_name=ring.POLL_PACKET if polls else None,
                           offset=stuck.offset if stuck else 0, addr=stuck.addr if stuck else 0,
                           seq=job.seq, ctx_id=job.ctx.id, message=msg)
        log.error("timeout: %s", msg)
        if self.observers:
            self.notify("gpu_error", info=info, state=None, job=job, ring=ring.name)
        self.ring_recover(sched, job, info)
