"""Semaphore history: when each semaphore reached each value, and who made it so.

Host threads run concurrently in real time but each has its own virtual clock, so "already signaled"
at the moment a wait is called says nothing about virtual time. A wait therefore returns at the
virtual time its condition became true *as seen by the waiter*: the signal's time, plus the
semaphore-signal-to-wake latency (``wake_ns``) when the signal came after the wait was called in
virtual time (the waiter was blocked: something had to wake it) and was not the waiter's own. A
value reached at or before the call costs no wake-up: the wait is met when it is called (so a poll,
``timeout=0``, succeeds). Computing it from the history, not from the order in which real threads
happened to run, keeps traces of synchronized multi-thread programs deterministic.

>>> h = SemaphoreHistory(wake_ns=50)
>>> h.signaled("s0", 1, t=100, actor=None)   # the device signaled s0 = 1 at t=100
>>> h.signaled("s0", 5, t=300, actor=1)      # host thread 1 signaled s0 = 5 at t=300
>>> h.reached("s0", 2)
(300, 1)
>>> h.effective(300, 1, me=0, start=0)       # thread 0 sees thread 1's signal after the wake latency
350
>>> h.effective(300, 1, me=0, start=400)     # ... but a wait called after the signal is met at once
300
"""

from __future__ import annotations

from bisect import bisect_left

from reference.hal import MAX_SEMAPHORE_VALUE


Actor = int | None  # a host thread index, or None for the device (queue operations, host calls it runs)


PRUNE_AT = 256  # a semaphore's history is pruned when its length reaches a power of two from here on


class SemaphoreHistory:
    """Bounded over long runs once :meth:`bind` gave it the simulation (the device does): a semaphore's
    signals that lie at or before every time a wait may still be asked about (:meth:`floor`) collapse
    into the latest of them — a waiter, whose wait starts at or after that time, sees each of them as
    met when called, whichever it is — and a semaphore the host dropped is forgotten (:meth:`forget`,
    which the device's recorder calls when it traces the semaphore's ``host_release``)."""

    __slots__ = ("wake_ns", "_signals", "_failed", "_env", "_threads")

    def __init__(self, wake_ns: int):
        self.wake_ns = wake_ns
        # semaphore id → (values, times, actors) of its signals, in order (values increase)
        self._signals: dict[str, tuple[list[int], list[int], list[Actor]]] = {}
        self._failed: dict[str, tuple[int, Actor]] = {}
        self._env = None  # the simulation and its host threads (bind): None, nothing is pruned
        self._threads = None

    # -- bounds (long runs) --------------------------------------------------------------------------

    def bind(self, env, threads) -> None:
        """Prune with :meth:`floor` from the simulation ``env`` and its host threads ``threads``
        (:class:`~.host.HostThreads`)."""
        self._env, self._threads = env, threads

    def forget(self, sem_id: str) -> None:
        """Drop ``sem_id``'s signals and failure (any other resource id: nothing to drop)."""
        self._signals.pop(sem_id, None)
        self._failed.pop(sem_id, None)

    def floor(self) -> int:
        """A virtual time at or before every ``start``/``now`` a query may still use: the simulator's
        time (waits made by the device use it; a host thread's clock is never behind it), the start of
        every blocked host call, the clock of every live host thread; 0 (no pruning) once the device
        is closing (clocks may then stay behind the simulator's) or when unbound."""
        env, threads = self._env, self._threads
        if env is None or threads.closing is not None:
            return 0
        t = env._now
        for ht in threads._order:
            block = ht.block
            if block is not None and block.start < t:
                t = block.start
            if ht.thread.is_alive():
                c = threads.clock_of(ht)
                if c < t:
                    t = c
        return t

    def _prune(self, entry) -> None:
        """Drop the signals before the last one of the leading run at or before :meth:`floor`: a
        query for a value they reached now gets that one's time, also at or before any wait's start."""
        times = entry[1]
        floor = self.floor()
        n = len(times) - 1  # (the latest signal stays: retract may take it back)
        j = 0
        while j < n and times[j + 1] <= floor and times[j] <= floor:
            j += 1
        if j:
            for column in entry:
                del column[:j]

    # -- recording -----------------------------------------------------------------------------------

    def signaled(self, sem_id: str, value: int, t: int, actor: Actor) -> None:
        entry = self._signals.get(sem_id)
        if entry is None:
            entry = self._signals[sem_id] = ([], [], [])
        values = entry[0]
        values.append(value)
        entry[1].append(t)
        entry[2].append(actor)
        n = len(values)
        if n >= PRUNE_AT and not n & (n - 1) and self._env is not None:  # (amortized O(1) per signal)
            self._prune(entry)

    def retract(self, sem_id: str) -> None:
        """Forget the last :meth:`signaled` (the signal was rejected)."""
        for column in self._signals[sem_id]:
            column.pop()

    def failed(self, sem_id: str, t: int, actor: Actor) -> None:
        self._failed.setdefault(sem_id, (t, actor))

    # -- queries -------------------------------------------------------------------------------------

    def reached(self, sem_id: str, value: int) -> tuple[int, Actor]:
        """(time, actor) of the first signal that made the semaphore >= value; (0, None) if its initial
        value already was."""
        entry = self._signals.get(sem_id)
        if entry is None:
            return 0, None
        values = entry[0]
        i = bisect_left(values, value)
        if i == len(values):
            return 0, None
        return entry[1][i], entry[2][i]

    def reached_at(self, sem_id: str, value: int) -> int:
        """The time of :meth:`reached`."""
        entry = self._signals.get(sem_id)
        if entry is None:
            return 0
        values = entry[0]
        if not values or values[-1] < value:
            return 0
        if values[-1] == value:  # the common case: the wait the latest signal met (values increase)
            return entry[1][-1]
        return entry[1][bisect_left(values, value)]

    def failure(self, sem_id: str) -> tuple[int, Actor]:
        return self._failed.get(sem_id, (0, None))

    def reached_before_failure(self, sem, value: int, now: int) -> int | None:
        """For a wait the device makes at ``now`` on ``sem``, which has failed: the time it reached
        ``value``, when it did before failing and the failure lies after ``now`` in virtual time;
        None when the wait fails. (A host thread runs ahead of the simulation: it may have signaled
        and then failed the semaphore before the simulation got to a wait that the signal met.)"""
        if sem.last_value < value or self._failed.get(sem.id, (0, None))[0] <= now:
            return None
        return self.reached_at(sem.id, value)

    def effective(self, t: int, actor: Actor, me: Actor, start: int) -> int:
        """When a waiter (host thread ``me``, waiting since ``start``) observes a change made at ``t``:
        ``t`` when the change came at or before the wait in virtual time (the wait is met when it is
        called: nothing wakes it) or was the waiter's own; else ``t`` plus the wake latency."""
        if t > start and (actor is None or actor != me):
            return t + self.wake_ns
        return t

    def ready_at(self, waits) -> int:
        """When the device sees every ``(semaphore, value)`` of ``waits`` reached (no wake latency):
        the latest :meth:`reached_at`, inlined (every queue operation with waits asks)."""
        t = 0
        signals = self._signals
        for sem, value in waits:
            entry = signals.get(sem.id)
            if entry is None:
                continue
            values = entry[0]
            if not values or values[-1] < value:
                continue
            r = entry[1][-1] if values[-1] == value else entry[1][bisect_left(values, value)]
            if r > t:
                t = r
        return t


# A timepoint value no signal reaches (payloads stop at MAX_SEMAPHORE_VALUE): it fires on failure only.
_FAILURE_ONLY = MAX_SEMAPHORE_VALUE + 1


class WaitTally:
    """The resolution of one host wait (earliest failure dominates, in list order on a tie; ALL: the
    latest reach once every value is reached; ANY: the earliest; each time as the waiter sees it,
    :meth:`SemaphoreHistory.effective`): at the call, :meth:`note` of every wait
    (``SimDevice._resolution``); while it blocks, kept up to date as its timepoints fire, in O(1) per
    fire — re-resolving the list at each fire made a wait on N semaphores O(N²).

    A semaphore whose value was reached while others are still awaited may fail later: the tally then
    watches it with a failure-only timepoint, so that failure is seen when it happens (re-resolving
    saw it only when another timepoint happened to fire), as ``local-task`` sees it (IREE [H]'s
    ``iree_async_semaphore_multi_wait`` stops watching a member once its timepoint fired: there the
    wait would go on; docs/hal-contract.md). ``resolved(t, outcome, final)`` gets each
    resolution; ``final``: every value timepoint fired."""

    __slots__ = ("history", "any_mode", "me", "start", "resolved", "left", "unreached", "reach",
                 "fail", "error", "_timepoints")

    def __init__(self, history: SemaphoreHistory, any_mode: bool, me: Actor, start: int, resolved):
        self.history, self.any_mode, self.me, self.start = history, any_mode, me, start
        self.resolved = resolved
        self.left = self.unreached = 0  # value timepoints not fired yet; values not reached yet
        self.reach = None  # effective time: ALL, the latest reach; ANY, the earliest
        self.fail = None  # (effective time, list index) of the earliest failure
        self.error = None
        self._timepoints: list = []

    def watch(self, timepoints) -> None:
        """Register a timepoint per ``(semaphore, value)`` (one already met fires now)."""
        self.left = self.unreached = len(timepoints)
        for i, (sem, value) in enumerate(timepoints):
            tp = sem.add_timepoint(value, lambda _error, i=i, sem=sem, value=value: self._fired(i, sem, value))
            if tp is not None:
                self._timepoints.append(tp)

    def cancel(self) -> None:
        for tp in self._timepoints:
            tp.cancel()
        self._timepoints = []

    def note(self, i: int, sem, value: int) -> bool:
        """Count what wait ``i`` (``sem >= value``) shows now: its value reached, its failure (True)."""
        if sem.last_value >= value:  # (kept after a failure: it may have been reached before)
            history = self.history
            t = history.effective(*history.reached(sem.id, value), self.me, self.start)
            self.unreached -= 1
            reach = self.reach
            if reach is None or (t < reach if self.any_mode else t > reach):
                self.reach = t
        if sem.failure is None:
            return False
        self._note_failure(i, sem)
        return True

    def _note_failure(self, i: int, sem) -> None:
        t = self.history.effective(*self.history.failure(sem.id), self.me, self.start)
        if self.fail is None or (t, i) < self.fail:
            self.fail, self.error = (t, i), sem.failure

    def _fired(self, i: int, sem, value: int) -> None:
        self.left -= 1
        if not self.note(i, sem, value) and self.left:
            # (not after the last fire: the wait is final then, as re-resolving had it)
            tp = sem.add_timepoint(_FAILURE_ONLY, lambda _error: self._failed(i, sem))
            if tp is not None:  # (None: a failure in between fired it at once)
                self._timepoints.append(tp)
        self._resolve()

    def _failed(self, i: int, sem) -> None:
        self._note_failure(i, sem)
        self._resolve()

    def _resolve(self) -> None:
        res = self.resolution()
        if res is not None:
            self.resolved(res[0], res[1], self.left == 0)

    def resolution(self) -> tuple[int, object] | None:
        """``(time, error or None)`` as known now; None if nothing resolves the wait yet."""
        start, reach = self.start, self.reach
        if not self.any_mode and self.unreached:
            reach = None  # not all reached
        if self.fail is not None and (reach is None or max(start, self.fail[0]) <= max(start, reach)):
            return max(start, self.fail[0]), self.error
        return None if reach is None else (max(start, reach), None)
