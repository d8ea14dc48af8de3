"""The engine's interface and state objects (:mod:`real_backends.common.engine`): the :class:`Adapter`
a GPU API plugs in through, the :class:`Event` and :class:`Action` it passes around, an issued prefix
of a split command buffer (:class:`_Prefix`), and the :class:`Backoff` pacing of status polls.

>>> b = Backoff(spin=False)
>>> b.wait(spin=False)   # sleeps POLL_MIN_S, then twice as long next time, up to POLL_MAX_S
"""

from __future__ import annotations

import os
import time
from typing import Any

from reference.hal import HalError, StatusCode
from reference.hal.queue_op import QueueOp

MAX_WAIT_EVENTS = 32  # IREE_HAL_MAX_WAIT_EVENT_COUNT
POLL_SPIN_S = 0.0002  # polling a status: how long the last work in flight is looked at between yields
POLL_MIN_S, POLL_MAX_S = 0.00005, 0.0002  # then the waits between looks, doubling
# Lets other threads take the interpreter lock between looks: time.sleep(0) sleeps ~70 us on Linux
# (the kernel's timer slack), sched_yield does not.
_yield = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))


class Backoff:
    """The pace of a thread polling a status: for ``POLL_SPIN_S`` after :meth:`restart` (``spin``:
    the last work in flight, a host may be waiting for it) it yields between looks — ``time.sleep(0)``,
    ~70 µs on the Linux VMs measured (the kernel's timer slack), not a bare yield — then sleeps
    ``POLL_MIN_S``, doubling up to ``POLL_MAX_S``, so as not to take the interpreter lock and a CPU
    from a host thread that is submitting (or helping: Engine.help), which then runs ~20 % slower
    (docs/accuracy.md)."""

    __slots__ = ("spin_until", "delay")

    def __init__(self, spin: bool = True):
        self.restart(spin)

    def restart(self, spin: bool = True) -> None:
        self.spin_until = time.perf_counter() + POLL_SPIN_S if spin else 0.0
        self.delay = 0.0

    def wait(self, spin: bool = True) -> None:
        """Pause before the next look (``spin=False``: no more bare yields, someone else watches)."""
        if spin and time.perf_counter() < self.spin_until:
            time.sleep(0)
            return
        self.delay = min(max(self.delay * 2, POLL_MIN_S), POLL_MAX_S)
        time.sleep(self.delay)


class WaitFailed(HalError):
    """Raised by an adapter that cannot enqueue work because an event it waits on already failed
    (OpenCL: behind a failed user event, or behind work that failed through one)."""


class Adapter:
    """What a GPU API supplies to the engine. ``stream`` is the queue index; handles are the API's."""

    wait_policy = "pending"         # "user_event": unresolved waits become user events
    max_wait_events: int | None = MAX_WAIT_EVENTS
    pooled = True                   # device-signal events come from an EventPool of the device's capacity
    inline_issue = False            # ready actions may be issued on the thread that made them ready
                                    # (only where issuing never blocks: OpenCL enqueues, not CUDA's syncs)

    def create_event(self) -> Any:
        raise NotImplementedError

    def destroy_event(self, handle) -> None:
        raise NotImplementedError

    def create_user_event(self) -> Any:
        raise HalError(StatusCode.UNIMPLEMENTED, "user events")

    def set_user_event(self, handle, error: HalError | None) -> None:
        raise HalError(StatusCode.UNIMPLEMENTED, "user events")

    def stream_wait(self, stream: int, handle) -> None:
        """The next work on ``stream`` waits for ``handle``."""
        raise NotImplementedError

    def submit(self, stream: int, action: "Action") -> None:
        """Enqueue the op's commands on ``stream`` (raise HalError if they cannot be)."""
        raise NotImplementedError

    def record(self, stream: int, handle) -> Any:
        """Record ``handle`` (None: a fresh one) after everything enqueued on ``stream``; return it."""
        raise NotImplementedError

    def query(self, handle) -> "HalError | bool | None":
        """Without blocking: True when ``handle`` completed, False when not yet, the error if the work
        before it failed; None when the API cannot tell (then host threads do not help, Engine.help)."""
        return None

    def synchronize(self, handle, backlog: int = 0) -> HalError | None:
        """Block until ``handle`` completed; the error if the work before it failed. ``backlog``: how
        many completions wait behind this one, or host threads helping (0: nobody else watches it,
        a host may be waiting for it: look closely)."""
        raise NotImplementedError

    def timing(self, action: "Action") -> tuple[int, int, list] | None:
        """(start, end, [(command index, start, end), …]) of the action's work on the host clock (ns),
        or None when the API has no device timestamps for it."""
        return None

    def reached_at(self, action: "Action") -> int | None:
        """When the device reached ``action.last`` (its signal or completion event), on the host clock
        (ns), for an action without timed work; None when the API has no timestamp for it."""
        return None

    def holds(self, op: QueueOp) -> bool:
        """True for an op the API must see issued only once its waits are reached on the host and
        everything before it on its queue completed (OpenCL: an indirect dispatch, whose workgroup
        counts the host reads when it enqueues the kernel). Later ops of its queue wait behind it."""
        return False

    def forget(self, buffer) -> None:
        """A dealloca decommitted ``buffer``'s allocation: drop the API's memory for it (work in
        flight keeps what it uses through ``Action.keep``)."""

    def park(self, action: "Action") -> None:
        """An issued action completed with a failure: keep whatever of it the API may still reference
        (OpenCL: PoCL's notify lists point at its events until the events it waited on are set) —
        released by :meth:`close`."""

    def close(self) -> None:
        pass


class Event:
    """An engine-side native event: a device-signal event recorded for ``sem >= value``, or a user event."""

    __slots__ = ("handle", "pooled", "sem", "value", "refs", "kind", "producer")

    def __init__(self, handle, pooled, sem: str, value: int, kind: str, producer=None):
        self.handle = handle
        self.pooled = pooled
        self.sem = sem
        self.value = value
        self.refs = 1
        self.kind = kind
        self.producer = producer  # the Action that records it (device-signal events)


class Action:
    """A queue operation on its way through the engine."""

    __slots__ = ("op", "waits", "events", "signal_events", "native", "issued_t", "last", "done", "hold",
                 "resume", "keep", "busy")

    def __init__(self, op: QueueOp, hold: bool = False):
        self.op = op
        self.waits = list(op.wait)
        self.events: list[Event] = []
        self.signal_events: list[Event] = []
        self.native: list = []       # the adapter's per-command handles (for timing)
        self.issued_t = None
        self.last = None             # the native event its completion waits for
        self.done = False            # completed (by the completion thread or a helping host thread)
        self.hold = hold             # Adapter.holds: issued once its waits are reached and its queue is idle
        self.resume = 0              # the command its (next) submit starts at (Adapter.submit's return)
        self.keep: list = []         # what the API's commands use, kept until the action completes
        self.busy = False            # counted in Engine._busy (ready, issued or in flight on its queue)


class _Prefix:
    """The commands of a held action enqueued before an indirect dispatch that needs them completed
    first (``Adapter.submit`` returned where to resume): in flight like an action on its queue; when
    the device reached it, the action goes back to the head of the pending list and is issued on."""

    __slots__ = ("op", "action", "last", "done", "events")

    def __init__(self, action: Action, last):
        self.op = action.op
        self.action = action
        self.last = last
        self.done = False
        self.events = ()
