"""Whose turn it is: host threads run one at a time, switching at device calls.

Virtual time alone does not make a multi-threaded host program deterministic: between two device
calls, threads run real Python side by side, so which of two threads released at one instant
records its next call first, or whether a joiner's ``host_join`` comes before the next call of a
thread still running, would be up to the OS. So every device call (and every return from a
blocking one) of a host thread passes a *gate* (:meth:`Turns.gate`): it goes on only when every
other live host thread is *settled* — blocked in a device call, in a Python wait it cannot leave by
itself (:mod:`.host_waits`: a join, a ``Queue.get``..., timed or not), stalled (no device call for
``STALL_S`` of real time: it may be computing, or blocked in a wait not recognised, such as a socket
read) — or waiting at the gate too with a later ``(clock, index)``. The thread that ran last may
go on while it is less than :data:`TURN_NS` of virtual time ahead of the earliest one waiting (fewer
switches; each costs a wake-up, ~50 µs here). A new thread counts as running until its first device
call, for at most ``STALL_S`` too.

No thread's clock changes here. What is fixed is the order in which the work of host threads that
meet at an instant reaches the device and the trace — the OS's choice before, which could also
decide results where that order matters (which of two same-time submissions a CUDA-model worker
issues first). Not covered: threads that hand off through primitives the gate cannot see (a plain
``Lock``, ``SimpleQueue``), and real-time timeouts that expire.

The gate's fast path: the thread that ran last goes on without a look at the others while nothing
that decides who goes has changed (:meth:`Turns.changed`: a thread blocked, was released,
registered, waited at the gate or handed something over; or threads started or ended).

Three threads released at one instant trace their waits in index order, in every run:

>>> import threading
>>> from reference import hal
>>> dev = hal.create_device("sim")
>>> s = dev.create_semaphore()                  # (the main thread is host thread 0)
>>> threads = [threading.Thread(target=s.wait, args=(1,)) for _ in range(3)]
>>> for t in threads: t.start()
>>> dev.queue_barrier([], [(s, 1)])
>>> for t in threads: t.join()
>>> [(e["thread"], e["t"]) for e in dev.trace.events("host_wait")]
[(1, 6200), (2, 6200), (3, 6200)]
>>> dev.close()
"""

from __future__ import annotations

import sys
import threading
from time import monotonic

TURN_NS = 50_000  # virtual ns the thread that ran last may be ahead of the earliest one waiting
RUNNING, BLOCKED = "running", "blocked"
# A thread at the gate is woken when another blocks or reaches the gate; what wakes no one (a thread
# entering a join or a Queue.get, ending) it notices by polling, first after 50 µs, doubling up to
# POLL_S (a new thread's first device call waited 0.2 ms for its joiner with host.FIRST_POLL_S).
GATE_FIRST_POLL_S = 0.00005


def thread_frames() -> dict:
    """``sys._current_frames()``, except that the calling thread's entry is the frame that called the
    caller: the caller keeps the dict in a local, and its own frame in it was a cycle (frame → dict →
    frame) that kept the thread's whole stack — a host program's locals, its semaphores and buffers —
    alive until the cyclic GC. (Both frames run the simulator's code: what a caller reads of them —
    a Python wait, a held lock, a pool work item further out — is the same.)"""
    frames = sys._current_frames()
    frames[threading.get_ident()] = sys._getframe(2)
    return frames


class Turns:
    """The gate of one device's :class:`~halsim.sim.host.HostThreads` (``threads``)."""

    def __init__(self, threads):
        self.threads = threads
        self.runner = None      # the HostThread that last went through the gate
        self.epoch = 0          # see changed()
        self.limit = None       # set by may_go: the earliest key of another thread at the gate
        # threading.active_count() when the gate last found no other thread to wait for (the gate
        # returns at once while the count is the same)
        self.solo = -1

    def changed(self) -> None:
        """Something that decides who goes next changed (a thread blocked, was released, registered,
        or is about to hand something to another thread, which may run next)."""
        self.epoch += 1

    def blocked(self, ht) -> None:
        """``ht`` blocks in a device call: a switch point — it is no longer the thread that ran last, so
        threads released together later go in ``(clock, index)`` order."""
        self.changed()
        if self.runner is ht:
            self.runner = None

    def gate(self, ht) -> None:
        """Let the calling host thread ``ht`` (device lock held) go on when it is its turn."""
        if threading.active_count() == self.solo:
            return  # one host thread and no other thread since: nothing to order
        threads = self.threads
        if threads.in_sim():
            return
        clock = threads.env._now + ht.lag if ht.frozen is None else threads.clock_of(ht)
        passed = ht.passed
        if passed is not None and ht is self.runner and passed[0] == self.epoch and \
                passed[1] == threading.active_count() and (passed[2] is None or (clock - TURN_NS, -1) < passed[2]):
            return  # it ran last, is not too far ahead, and nothing that decides changed since
        self.epoch += 1
        ht.gate_key = (clock, ht.index)
        try:
            if not self.may_go(ht):
                self.wake_next()  # a thread that waited for this one to reach a device call may go
                turn = ht.turn
                if turn is None:
                    turn = ht.turn = threading.Condition(threads.lock)
                poll = GATE_FIRST_POLL_S
                while not self.may_go(ht):
                    turn.wait(poll)
                    poll = min(2 * poll, threads.poll_s)
        finally:
            ht.gate_key = None
        self.runner = ht
        ht.passed = (self.epoch, threading.active_count(), self.limit)

    def wake_next(self) -> None:
        """Wake the thread at the gate that may go now, if one may (one wake-up, not all)."""
        best = None
        for other in self.threads._order:
            if other.gate_key is not None:
                key = self._key(other)
                if best is None or key < best[0]:
                    best = (key, other)
        if best is not None and best[1].turn is not None and self.may_go(best[1]):
            best[1].turn.notify()

    def _key(self, ht) -> tuple[int, int]:
        """The order at the gate: (clock, index); the thread that ran last TURN_NS earlier, first."""
        key = ht.gate_key
        return (key[0] - TURN_NS, -1) if ht is self.runner else key

    def may_go(self, ht) -> bool:
        """Whether ``ht`` (at the gate) goes now: every other live host thread is settled or at the
        gate behind it."""
        threads = self.threads
        stall_s = threads.stall_s
        key = self._key(ht)
        now = monotonic()
        frames = None
        alone = True
        limit = None
        for other in threads._order:
            if other is ht or not other.thread.is_alive():
                continue
            alone = False
            if other.gate_key is not None:
                if self._key(other) < key:
                    return False
                if limit is None or other.gate_key < limit:
                    limit = other.gate_key
                continue
            if other.state == BLOCKED:
                continue
            if frames is None:
                frames = thread_frames()
            if threads._quiet(other.thread, frames, set()) is not None:
                threads._waiting(other)  # (its clock stands still while it waits)
                continue
            if other.waited:  # woken from a Python wait since: it runs now
                other.waited = False
                other.active_at = now
            if now - other.active_at < stall_s:
                return False  # running: its next device call (or block) comes first
        me, known, first_seen = ht.thread, threads._known, threads._first_seen
        for t in threading.enumerate():  # started after the device, no device call yet
            if t is me or t in known:
                continue
            alone = False
            if now - first_seen.setdefault(t, now) >= stall_s:
                continue
            if frames is None:
                frames = thread_frames()
            if threads._quiet(t, frames, set()) is None:
                return False
        self.solo = threading.active_count() if alone else -1
        self.limit = limit
        return True
