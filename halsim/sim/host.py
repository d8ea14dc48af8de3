"""Host threads on virtual time (Trio ``MockClock(autojump_threshold=0)`` style).

Host programs are ordinary Python, possibly with several real threads. Every device call runs under
one lock. A host thread is *registered* at its first device call; it is then RUNNING (executing
Python outside a blocking device call) or BLOCKED (inside one: a semaphore wait, ``device.sleep``, a
blocking queue call). Virtual time advances only when every *candidate* thread is BLOCKED; candidates
are the registered live threads plus threads started after the device was created that have not
called it yet (for at most :data:`GRACE_S` of real time, so an unrelated thread cannot freeze the
simulation). Whoever blocks last *drives*: it steps the SimPy environment until some blocked call is
released (its condition held, its deadline passed, or a deadlock was found), and the released threads
are woken through condition variables. Blocked threads poll (from :data:`FIRST_POLL_S`, doubling up
to :data:`POLL_S`) so they notice dead threads and threads that went idle in a Python wait; nothing
here sleeps in real time otherwise.

A running thread that cannot call the device before another thread acts counts as blocked too:
one in ``Thread.join``, in ``Future.result`` of a pool work item, in an untimed ``Queue.get`` /
``Event.wait`` / ... not yet notified, or an idle pool worker (read from its frames,
:mod:`.host_waits`) — the last kinds only while no thread the simulator does not hold is running,
since any of them might wake it, or once the thread has waited so for :data:`GRACE_S` (an outside
thread never holds virtual time back for ever). A running thread in none of these that made no device call for
:data:`STALL_S` of real time is *stalled*: simulated work (queue operations, sleeps) proceeds, but no
deadline expires (but a poll's: timeout 0) and no deadlock is declared while one is alive, since it may
still signal. One in a Python wait with a real-time timeout (``ev.wait(0.05)``) is blocked until that
wait's end in virtual time — its clock plus the timeout — and holds back only the later deadlines.

Threads register in the order they were started (:meth:`HostThreads.await_earlier_threads`), so
their indices do not depend on which one reaches the device first; and they take turns at device
calls (:mod:`.host_turns`), so what they trace comes in the same order in every run.

Each registered thread has a clock: ``env.now + lag``. Non-blocking calls add their host cost to the
lag (virtual time the thread spent without blocking); a release sets the clock to the release time.
While it waits in a Python primitive its clock stands still (``frozen``): afterwards it is that
clock or the simulator's time, whichever is later — or the giver's clock after a traced hand-off.

>>> import simpy, threading
>>> threads = HostThreads(simpy.Environment(), threading.RLock(), diagnose=None)
>>> with threads.lock:
...     me = threads.register(0)
...     b = threads.sleep_block(1_000)      # sleep 1 µs of virtual time
...     threads.block(b)
>>> threads.clock()
1000
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from heapq import heappop
from threading import current_thread, get_ident
from time import monotonic

from reference.hal import HalError, StatusCode

from .deadlock import deadlock_error
from .events import call_after
from .host_state import PENDING, RELEASED, RESOLVED, Block, HostThread
from .host_turns import BLOCKED, RUNNING, Turns, thread_frames
from .host_waits import CONDITION, TIMED, PythonWaits

POLL_S = 0.005  # real seconds between a blocked thread's checks for dead threads
# A blocked call's first checks come sooner (doubling up to POLL_S): another thread that just
# left the device for a Python wait (Queue.get...) is noticed without a whole POLL_S.
FIRST_POLL_S = 0.0002
GRACE_S = 2.0  # real seconds an unregistered new thread counts as "about to call the device"
STALL_S = 0.1  # real seconds without a device call after which a running thread no longer holds back work
INF = float("inf")

# candidates(): ACTIVE, or the virtual time from which no deadline may expire yet ("hold"): STALLED
# (none may), ALL_BLOCKED (no limit: deadlocks may be declared too), or the end of the earliest
# Python wait with a real-time timeout that a host thread is in (it cannot act before then).
ACTIVE, STALLED, ALL_BLOCKED = "active", -INF, INF


class HostThreads(PythonWaits):
    """The registered host threads of one device and the rule for advancing virtual time.

    ``diagnose(blocks)`` builds the :class:`~halsim.sim.deadlock.DeadlockReport` for pending blocks.
    """

    def __init__(self, env, lock: threading.RLock, diagnose):
        self.env = env
        self.lock = lock
        self.diagnose = diagnose
        self._by_ident: dict[int, HostThread] = {}
        self._order: list[HostThread] = []
        # Host threads that ended, by index, as their clock (``lag``, ``frozen``) only: a join asks for
        # it (clock_at); the records leave ``_order``, which every gate pass walks (a program that
        # starts a thread per task made each device call slower and slower) — see register.
        self._ended: dict[int, tuple] = {}
        self._prune_at = 64
        self._known = set(threading.enumerate())  # threads that existed before the device
        self._first_seen: dict[threading.Thread, float] = {}
        self._sim_ident: int | None = None
        self._releases = 0
        self._changes = 0  # bumped whenever a block is created, resolved or released
        self._user_code = False
        # The closer's clock once the device closes: it runs its work in flight to the end, past the
        # times at which it wakes blocked threads, whose clocks may then stay behind the simulator's
        # (nothing can be scheduled on a closed device).
        self.closing: int | None = None
        self.turns = Turns(self)  # one host thread at a time (the gate)
        # the pacing Turns uses too (this module's constants: one place where they are set)
        self.poll_s, self.stall_s = POLL_S, STALL_S

    # -- identity and clocks -------------------------------------------------------------------------

    def in_sim(self) -> bool:
        """Whether the caller is the simulator itself (running a queue operation or a host call)."""
        return self._sim_ident == threading.get_ident()

    def current(self) -> HostThread | None:
        """The calling thread's record, if it registered (the same real thread, not a reused ident:
        a live thread with the caller's ident is the caller; see Device.known_host_thread for why
        not ``threading.current_thread()``)."""
        ht = self._by_ident.get(get_ident())
        if ht is not None and not ht.thread.is_alive():
            return None
        return ht

    def enter(self, register, ns: int) -> None:
        """A host thread starts a device call: ``register()`` it if new, mark it active (see
        :meth:`touch`) and charge ``ns`` to its clock. Nothing for the simulator's own calls."""
        ident = get_ident()
        if self._sim_ident == ident:
            return
        ht = self._by_ident.get(ident)
        if ht is None or ht.thread is not current_thread():
            register()
            ht = self.current()
        if threading.active_count() != self.turns.solo:  # (the gate's own first test, inlined: every call)
            self.turns.gate(ht)
        ht.active_at = self._acted = monotonic()
        if ht.frozen is not None:  # back from a Python wait (its clock stood still, the gate too)
            self.thaw(ht)
        ht.lag += ns

    def await_earlier_threads(self) -> None:
        """Before the calling thread registers (lock held), let threads started before it register
        first (or die, or outlive GRACE_S, or wait in a Python primitive), so thread indices follow
        start order, not a race."""
        me = threading.current_thread()
        cond = None
        while True:
            now = time.monotonic()
            earlier = False
            frames = None
            for t in threading.enumerate():  # live threads, in the order they were started
                if t is me:
                    break
                if t in self._known:
                    continue
                if now - self._first_seen.setdefault(t, now) < GRACE_S:
                    frames = frames or thread_frames()
                    if self._quiet(t, frames, set()) in (None, TIMED):  # not idle in Queue.get or the like
                        earlier = True
                        break
            if not earlier:
                return
            cond = cond or threading.Condition(self.lock)
            cond.wait(POLL_S)

    def register(self, index: int) -> HostThread:
        """Register the calling thread under ``index`` (its first device call)."""
        thread = threading.current_thread()
        ht = HostThread(index, thread)
        self._by_ident[threading.get_ident()] = ht
        self._order.append(ht)
        self._known.add(thread)
        if len(self._order) >= self._prune_at:  # (amortized: once the list doubled since the last time)
            self._prune_ended()
        self.turns.changed()
        return ht

    def _prune_ended(self) -> None:
        """Move the records of threads that ended (not blocked) out of ``_order``, keeping their clock."""
        live = []
        for ht in self._order:
            if ht.thread.is_alive() or ht.block is not None or ht is self.turns.runner:
                live.append(ht)
                continue
            self._ended[ht.index] = (ht.lag, ht.frozen)  # (what its clock is made of: clock_at)
            if self._by_ident.get(ht.thread.ident) is ht:
                del self._by_ident[ht.thread.ident]
        self._order = live
        self._known = {t for t in self._known if t.is_alive()}
        self._prune_at = max(64, 2 * len(live))

    def clock(self) -> int:
        """Virtual ns for the caller: the simulator's time, plus the calling host thread's lag."""
        ident = get_ident()
        if self._sim_ident == ident:
            return self.env._now
        ht = self._by_ident.get(ident)
        if ht is not None and ht.thread is current_thread():
            if ht.frozen is None:
                return self.env._now + ht.lag
            return max(ht.frozen, self.env._now)
        return self.env._now

    def clock_of(self, ht: HostThread) -> int:
        """``ht``'s clock (see :meth:`clock`)."""
        return self._clock(ht.lag, ht.frozen)

    def _clock(self, lag: int, frozen: int | None) -> int:
        now = self.env._now
        return now + lag if frozen is None else max(frozen, now)

    def thaw(self, ht: HostThread) -> None:
        """``ht`` is back from a Python wait: its clock is where it stood, or the simulator's time if
        that is later (its host work before the wait is not counted again)."""
        ht.lag = max(0, ht.frozen - self.env._now)
        ht.frozen = ht.timed = None

    def charge(self, ns: int) -> None:
        """Add ``ns`` of host work to the calling thread's clock (no blocking)."""
        if ns and not self.in_sim():
            ht = self.current()
            if ht is not None:
                if ht.frozen is not None:
                    self.thaw(ht)
                ht.lag += ns

    def move_to(self, t: int) -> None:
        """Set the calling thread's clock to ``t`` (>= now) without blocking."""
        if not self.in_sim():
            ht = self.current()
            if ht is not None:
                ht.lag = max(0, t - self.env.now)
                ht.frozen = ht.timed = None

    def receive(self, t: int, wake_ns: int, started: bool = False) -> None:
        """The calling thread received what a thread whose clock was ``t`` handed over (a traced
        hand-off): it acts after it — at ``t + wake_ns`` if its own clock was behind (it waited;
        while it waited in Python its clock stood still), else at its own clock. A thread
        ``started`` by that hand-off (``Thread.start``) always wakes: it was not running at ``t``
        (even when its clock, the simulator's, equals the parent's)."""
        if self.in_sim():
            return
        ht = self.current()
        if ht is None:
            return
        mine = self.env._now + ht.lag if ht.frozen is None else ht.frozen
        if mine < t or (started and mine == t):
            ht.lag = max(0, t + wake_ns - self.env._now)
            ht.frozen = ht.timed = None
        elif ht.frozen is not None:
            self.thaw(ht)

    # -- blocking ------------------------------------------------------------------------------------

    def new_block(self, call: str, mode: str, timepoints, deadline: int | None, op=None,
                  start: int | None = None) -> Block:
        """A blocking call of the calling (registered) thread, made at ``start`` (default: its clock)."""
        ht = self.current()
        if ht is None:
            raise HalError(StatusCode.INTERNAL, "blocking call from an unregistered thread")
        start = self.clock() if start is None else start
        return Block(ht, call, mode, timepoints, start, deadline, op, threading.Condition(self.lock))

    def sleep_block(self, ns: int) -> Block:
        """A block released by the simulator ``ns`` after the calling thread's clock."""
        b = self.new_block("sleep", "all", (), None)
        t = b.start + ns
        b.state = RESOLVED
        self.env.timeout(max(0, t - self.env.now)).callbacks.append(lambda _ev: self.release(b, None, t))
        return b

    def block(self, b: Block) -> HalError | None:
        """Block the calling thread (lock held) until ``b`` is released; return its outcome."""
        ht = b.thread
        ht.state = BLOCKED
        ht.block = b
        self._changes += 1
        self.turns.blocked(ht)
        self.turns.wake_next()  # a thread at the gate may have waited for this one to block
        poll = FIRST_POLL_S
        try:
            while b.state != RELEASED:
                who = self.candidates()
                if who != ACTIVE:
                    self._drive(who)
                if b.state != RELEASED:
                    b.cond.wait(poll)
                    poll = min(2 * poll, POLL_S)
        finally:
            ht.block = None
            ht.state = RUNNING
        lag = b.release_t - self.env.now
        ht.lag = lag if lag >= 0 or self.closing is not None else 0
        ht.frozen = ht.timed = None
        self.turns.gate(ht)  # threads released at one instant go on one at a time, in order
        return b.outcome

    def gate_current(self) -> None:
        """The gate (:mod:`.host_turns`) for the calling thread if it is a registered host thread (a
        traced hand-off: its record comes in turn too)."""
        if threading.active_count() != self.turns.solo:  # (before the lookup: a lone thread's put/get)
            ht = self.current()
            if ht is not None:
                self.turns.gate(ht)

    def resolve(self, b: Block, outcome: HalError | None, at: int, final: bool = True) -> None:
        """``b``'s wait resolves with ``outcome`` at virtual time ``at``, as far as is known now: release
        it then (or at its deadline). Unless ``final`` (none of its semaphores can change any more),
        something earlier in virtual time may still come — a device signal, or one of a thread whose
        clock is behind the signaler's: it is released when the simulation gets there (a later call
        may move that earlier), and an outcome known to lie after its deadline leaves it to expire
        there. A final one outside the simulator is released at once (its thread runs ahead)."""
        if b.state == RELEASED:
            return
        t = max(b.start, at)
        if b.deadline is not None and t > b.deadline:
            if not final:
                b.late = True
                return
            outcome, t = b.timeout_error(), b.deadline
        if b.state == RESOLVED and t > b.release_t:
            return  # due earlier already
        now = self.env._now
        if t <= now or (final and self._sim_ident != threading.get_ident()):
            self.release(b, outcome, max(t, now))
            return
        b.outcome = outcome
        if b.state == RESOLVED and t == b.release_t:
            return  # the event already planned releases it, with this outcome
        b.state = RESOLVED
        b.release_t = t
        self._changes += 1
        call_after(self.env, t - now, self._due, b)

    def _due(self, event) -> None:
        b = event.arg
        if b.state == RESOLVED:  # (not released earlier; plans only move earlier)
            self.release(b, b.outcome, b.release_t)

    def release(self, b: Block, outcome: HalError | None, t: int) -> None:
        if b.state == RELEASED:
            return
        b.state = RELEASED
        b.outcome = outcome
        b.release_t = t
        b.thread.state = RUNNING
        b.thread.active_at = time.monotonic()
        self._releases += 1
        self._changes += 1
        self.turns.changed()
        b.cond.notify()

    def pending_blocks(self) -> list[Block]:
        """Blocked calls whose condition does not hold yet, in registration order."""
        return [ht.block for ht in self._order if ht.block is not None and ht.block.state == PENDING]

    # -- advancing virtual time ---------------------------------------------------------------------

    def touch(self) -> None:
        """The calling thread is making a device call (it is active, not stalled)."""
        ht = self.current()
        if ht is not None:
            ht.active_at = time.monotonic()

    def candidates(self):
        """ACTIVE if some candidate thread may still call the device soon; else the virtual time from
        which no deadline may expire yet: STALLED if some running one made no device call for STALL_S
        (computing, or in a wait not recognised), ALL_BLOCKED if none holds any back. A running thread
        in a wait it cannot leave by itself (:mod:`.host_waits`) counts as blocked — but a Python
        primitive's wait only while no thread the simulator does not hold is running (nor in a timed
        wait), since any of them might wake it, or once it has waited so for GRACE_S of real time. One
        in a wait with a real-time timeout is blocked until that wait's end in virtual time
        (:meth:`_timed_until`): earlier deadlines may expire; it holds back the later ones (and
        deadlock reports). One in a wait in C the program's last action may have ended counts as
        stalled for LOCK_SETTLE_S (:meth:`_woken_in_c`). An outside thread that waits holds nothing back."""
        now = time.monotonic()
        stalled = host_waits = False
        timed = INF
        frames = None
        for ht in self._order:
            if ht.state == RUNNING and ht.thread.is_alive():
                if frames is None:
                    frames = thread_frames()
                quiet = self._quiet(ht.thread, frames, set())
                if quiet is not None:
                    self._waiting(ht)
                    if self._woken_in_c(ht.thread, frames, now):  # (or woken by what the program just did)
                        stalled = True
                        continue
                    # Waiting in a Python primitive (Queue.get...): an outside thread may still wake
                    # it — for GRACE_S after its last device call or wake-up, then it counts as blocked.
                    if quiet == TIMED:
                        until = self._timed_until(ht, frames)
                        if until is None:  # joins an outside thread in such a wait: as stalled
                            stalled = True
                        elif until < timed:
                            timed = until
                    if (quiet == CONDITION or quiet == TIMED) and now - ht.active_at < GRACE_S:
                        host_waits = True
                    continue
                if ht.waited:  # it was seen waiting and has been woken: give it a fresh start
                    ht.waited = False
                    ht.active_at = now
                if now - ht.active_at < STALL_S:
                    return ACTIVE
                stalled = True
        # Threads the simulator does not hold: one started after the device that has not called it
        # yet may be about to (for GRACE_S), unless it waits as above; and any that does not wait so
        # might wake a host thread waiting in a Python primitive (see above). (One that waits in a
        # primitive used to count as a host thread's wait: beside an idle logging QueueListener and a
        # thread ticking in time.sleep no deadline ever expired.)
        me = current_thread()
        outside_busy = False
        for t in threading.enumerate():
            if t is me or self.record_of(t) is not None:
                continue
            if frames is None:
                frames = thread_frames()
            quiet = self._quiet(t, frames, set())
            if quiet is None or quiet == TIMED:
                if t not in self._known and now - self._first_seen.setdefault(t, now) < GRACE_S:
                    return ACTIVE
                outside_busy = True
            stalled = stalled or self._woken_in_c(t, frames, now)
        if host_waits and outside_busy:
            stalled = True
        if len(self._first_seen) > 64:
            self._first_seen = {t: s for t, s in self._first_seen.items() if t.is_alive()}
        return STALLED if stalled else timed

    def record_of(self, thread: threading.Thread) -> HostThread | None:
        """``thread``'s record if it is a registered host thread (not a reused ident's)."""
        ht = self._by_ident.get(thread.ident)
        return ht if ht is not None and ht.thread is thread else None

    def clock_at(self, index: int) -> int | None:
        """The clock of the host thread with device index ``index`` (an ended one's as it ended), if
        it registered."""
        ended = self._ended.get(index)
        if ended is not None:
            return self._clock(*ended)
        ht = next((ht for ht in self._order if ht.index == index), None)
        return None if ht is None else self.clock_of(ht)

    def is_blocked(self, thread: threading.Thread) -> bool:
        """Whether ``thread`` is a host thread blocked in a device call."""
        ht = self.record_of(thread)
        return ht is not None and ht.state == BLOCKED

    def user_code_ran(self) -> None:
        """The simulator ran host code (a host call): it may have started threads or changed state."""
        self._user_code, self._acted = True, time.monotonic()

    def _drive(self, hold) -> None:
        """Step the simulation until some blocked call is released (lock held, no active thread).

        ``hold`` (from :meth:`candidates`): deadlines from this virtual time on do not expire, since a
        running thread might still act before them. With every candidate blocked (ALL_BLOCKED) all
        deadlines expire and deadlocks are detected. With stalled threads (running, but without device
        calls for a while) only simulated work advances, and only up to the earliest deadline: a
        stalled thread may still signal, so nothing times out meanwhile (but a poll). A thread in a
        Python wait with a real-time timeout holds back the deadlines from that wait's end on.
        """
        env = self.env
        queue, step = env._queue, env.step
        start = self._releases
        self._sim_ident = threading.get_ident()
        self._user_code = False
        seen = -1
        event = callbacks = callback = None
        try:
            while self._releases == start:
                t_work = queue[0][0] if queue else INF  # env.peek()
                if seen != self._changes:  # blocks change rarely; events are many
                    seen = self._changes
                    pending = self.pending_blocks()
                    t_dead = min((b.deadline for b in pending if b.deadline is not None), default=INF)
                if t_work == INF or t_dead < t_work:  # next: a deadline, or nothing at all
                    if hold == ALL_BLOCKED:
                        if t_work == INF:
                            self._deadlock(pending, t_dead)
                            return
                    elif t_dead >= hold:
                        # No deadline expires while a running thread might still act before it —
                        # except a poll's (timeout 0): it asked to wait for no one, only the device.
                        if not self._expire_polls(pending, t_dead):
                            return
                        continue
                    # Nothing can meet the calls due (a thread in a timed Python wait cannot act
                    # before its end, after this deadline): they time out (no deadlock: it may act).
                    self._expire(pending, t_dead)
                    continue
                step()
                if hold == ALL_BLOCKED:
                    # The common case as a tight loop: keep stepping while no deadline is due and
                    # nothing the checks above look at changes (releases, blocks, host code run). The
                    # step is SimPy's Environment.step, inlined.
                    changes = self._changes
                    while queue and queue[0][0] <= t_dead and self._releases == start and \
                            self._changes == changes and not self._user_code:
                        env._now, _, _, event = heappop(queue)
                        callbacks, event.callbacks = event.callbacks, None
                        for callback in callbacks:
                            callback(event)
                        if not event._ok and not hasattr(event, "_defused"):
                            exc = type(event._value)(*event._value.args)
                            exc.__cause__ = event._value
                            raise exc
                        # what the event held (an op, and what the op used) is freed now, at its time
                        event = callbacks = callback = None
                if self._user_code:
                    self._user_code = False
                    hold = self.candidates()
                    if hold == ACTIVE:
                        return
            while env.peek() == env.now:  # release everyone due at this instant, not just the first
                env.step()
        finally:
            # The last event stepped may hold the last reference to what an operation used: drop it
            # while still the simulator, so its host_release is traced at the simulator's time, not
            # at this thread's clock before its release set it (after its wake-up).
            event = callbacks = callback = None
            self._sim_ident = None

    def _expire(self, pending: list[Block], t_dead) -> None:
        """Advance to ``t_dead`` and time out the blocks due then (plain DEADLINE_EXCEEDED)."""
        self._advance(t_dead)
        for b in pending:
            if b.deadline == t_dead:
                self.release(b, b.timeout_error(), t_dead)

    def _expire_polls(self, pending: list[Block], t_dead) -> bool:
        """If the blocks due at ``t_dead`` are all polls (timeout 0: deadline at their call), time
        them out there (plain DEADLINE_EXCEEDED) and return True."""
        due = [b for b in pending if b.deadline == t_dead]
        if not due or any(b.deadline != b.start for b in due):
            return False
        self._expire(due, t_dead)
        return True

    def _advance(self, t) -> None:
        if t > self.env.now:
            self.env.run(until=t)

    def _deadlock(self, pending: list[Block], t_dead) -> None:
        if not pending:
            raise HalError(StatusCode.INTERNAL, "simulator: all host threads blocked with nothing pending")
        if self._expire_polls(pending, t_dead):
            # Only polls expire: they answer "not yet" (DEADLINE_EXCEEDED) at their call, as when
            # work was pending; a poll loop is no deadlock, and a report per poll costs too much.
            return
        due = [b for b in pending if b.deadline == t_dead] if t_dead != INF else pending
        if all(b.late for b in due):
            # Each was met (or failed) only after its deadline — by a thread whose clock ran ahead:
            # a plain timeout, not a deadlock.
            self._expire(due, t_dead)
            return
        report = self.diagnose(pending) if self.diagnose else None
        if report is not None:
            report = replace(report, host_waits=self._host_waits())
        threads = {b: t for b in pending for t in (report.threads if report else ())
                   if t.thread == b.thread.index}
        if t_dead != INF:  # the earliest finite deadline expires: nothing can happen before it
            self._advance(t_dead)
            for b in due:
                error = b.timeout_error() if b.late else deadlock_error(report, threads.get(b), True)
                self.release(b, error, t_dead)
        else:
            for b in pending:
                self.release(b, deadlock_error(report, threads.get(b), False), b.start)

    def run_until_idle(self) -> None:
        """Run every scheduled simulator event (device shutdown), as the simulator. A blocked call
        whose deadline comes before the next event, or by the close (:attr:`closing`), times out
        there, in order: the simulation never runs past a deadline (a call still blocked when
        nothing is left is the closer's to cancel)."""
        env = self.env
        until = -INF if self.closing is None else self.closing
        self._sim_ident = threading.get_ident()
        seen = -1
        try:
            while True:
                t_work = env.peek()
                if seen != self._changes:
                    seen = self._changes
                    pending = self.pending_blocks()
                    t_dead = min((b.deadline for b in pending if b.deadline is not None), default=INF)
                if t_work <= t_dead and t_work != INF:
                    env.step()
                elif t_work != INF or t_dead <= until:
                    self._expire(pending, t_dead)
                else:
                    return
        finally:
            self._sim_ident = None

    def release_all(self, error: HalError, at=0) -> None:
        """Release every blocked call with ``error`` (device closed at ``at``; the simulator has run
        its work to the end, and past every deadline that came before)."""
        for ht in self._order:
            b = ht.block
            if b is not None and b.state != RELEASED:
                self.release(b, error.clone(), max(b.start, self.env.now, at))
