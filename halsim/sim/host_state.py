"""The records of :mod:`halsim.sim.host`: a registered host thread (:class:`HostThread`: its index,
clock lag and blocking call) and one blocking host call (:class:`Block`: what it waits for, until
when, how it ended).

>>> import threading
>>> ht = HostThread(0, threading.current_thread())
>>> b = Block(ht, "wait_semaphores", "all", (), start=100, deadline=None, op=None, cond=threading.Condition())
>>> (ht.state, b.state, b.release_t, b.timeout_error().code.name)
('running', 'pending', 100, 'DEADLINE_EXCEEDED')
"""

from __future__ import annotations

import threading
import time

from reference.hal import HalError, StatusCode, WaitMode
from reference.hal.wait import deadline_exceeded

from .host_turns import RUNNING

PENDING, RESOLVED, RELEASED = "pending", "resolved", "released"


class HostThread:
    """A registered host thread: its index, real thread, clock lag and current blocking call."""

    __slots__ = ("index", "thread", "lag", "state", "block", "active_at", "waited", "gate_key", "turn", "passed",
                 "frozen", "timed", "until")

    def __init__(self, index: int, thread: threading.Thread):
        self.index = index
        self.thread = thread
        self.lag = 0
        self.state = RUNNING
        self.block: Block | None = None
        self.active_at = time.monotonic()  # real time of its last device call or wake-up
        self.waited = False  # last seen in a wait of host_waits (so its end is a wake-up)
        self.gate_key: tuple[int, int] | None = None  # (clock, index) while it waits to run (gate)
        self.turn: threading.Condition | None = None  # what it waits on at the gate (on the device lock)
        self.passed: tuple | None = None  # (epoch, thread count, limit) when it last went through the gate
        # Its clock when it was first seen waiting in a Python primitive (host_waits), until its next
        # device call or traced hand-off: the clock stands still while it waits (its lag does not
        # count again once the simulation has advanced past it).
        self.frozen: int | None = None
        # the Python wait with a real-time timeout it was last seen in: (its waiter lock, real time first
        # seen, timeout in ns); and the virtual time that wait ends (it cannot act before, unless woken)
        self.timed: tuple | None = None
        self.until = 0

    def __repr__(self) -> str:
        return f"<HostThread {self.index} {self.state} lag={self.lag}>"


class Block:
    """One blocking host call: what it waits for, until when, and how it ended (``outcome``: None for
    success or the HalError to raise)."""

    __slots__ = ("thread", "call", "mode", "timepoints", "start", "deadline", "op", "state", "outcome",
                 "release_t", "cond", "late", "inside")

    def __init__(self, thread: HostThread, call: str, mode: str, timepoints, start: int,
                 deadline: int | None, op, cond: threading.Condition):
        self.thread = thread
        self.call = call
        self.mode = mode
        self.timepoints = timepoints
        self.start = start
        self.deadline = deadline
        self.op = op
        self.state = PENDING
        self.outcome: HalError | None = None
        self.release_t = start
        self.cond = cond
        self.late = False  # resolved only after its deadline so far: it times out there (no deadlock)
        self.inside = None  # the host call (sim:sync) whose function made this call, on this thread

    def timeout_error(self) -> HalError:
        if self.timepoints:
            return deadline_exceeded(WaitMode[self.mode.upper()], self.timepoints)
        return HalError(StatusCode.DEADLINE_EXCEEDED, f"{self.call} timed out")
