"""The state objects of the event-semaphore stream engine (:mod:`halsim.sim.streams`): native events,
queue actions, the blocked actions of one semaphore (one of the two lookups a scan makes; the other,
its recorded device-signal events, is :class:`reference.utils.recorded_events.RecordedEvents`, shared
with the real engine), and the in-order streams."""

from __future__ import annotations

from collections import deque
from heapq import heappop, heappush

from reference.hal import HalError
from reference.hal.queue_op import QueueOp


class NativeEvent:
    """A CUevent / cl_event. ``done`` is a simulator event (events.Done, or WaitsResolved for a user
    event) whose value is None (reached) or the HalError the waiter fails with; a device-signal
    event is recorded by ``producer`` for ``sem >= value``."""

    __slots__ = ("kind", "sem", "value", "producer", "done", "refs", "pooled")

    def __init__(self, kind: str, sem: str, value: int, producer, done, pooled: bool):
        self.kind = kind          # "signal" (recorded on a stream) or "user" (set by the host)
        self.sem = sem
        self.value = value
        self.producer = producer  # the Action that records it (signal events)
        self.done = done
        self.refs = 1
        self.pooled = pooled


class Action:
    """A queue operation on its way through the engine (IREE: ``iree_hal_deferred_work_queue_action_t``)."""

    __slots__ = ("op", "seq", "waits", "events", "signal_events", "issue_ns", "issue_start", "issue_end",
                 "launch_at", "ready_by", "outcome")

    def __init__(self, op: QueueOp, seq: int):
        self.op = op
        self.seq = seq
        self.launch_at = 0  # when its stream may take it: the work's launch inside the issue
        self.ready_by = "issue"  # what it waited for last: "issue", "device" or "host" (cost launch_after)
        self.issue_ns: int | None = None  # inline issue: fixed (and charged to the host) at the queue call
        self.issue_start = 0  # when its issue started
        self.issue_end = 0    # when it ended: its signal events recorded, its host callback enqueued
        self.waits = list(op.wait)      # not yet resolved, in list order
        self.events: list[NativeEvent] = []
        self.signal_events: list[NativeEvent] = []
        self.outcome: tuple | None = None  # (error, should_signal) once its stream ran it (CUDA callback order)


class Blocked:
    """The pending actions blocked waiting for one semaphore to reach a value, as ``(value, seq,
    action)``; a scan takes those up to a level. Values mostly come in order (arrivals wait for
    their queue's next value): those are appended to ``run`` (sorted), the others go to ``heap``
    (small: actions re-blocked near the front). A heap alone cost a sift of thousands per push and pop."""

    __slots__ = ("run", "heap")

    def __init__(self):
        self.run: deque = deque()
        self.heap: list = []

    def __bool__(self) -> bool:
        return bool(self.run) or bool(self.heap)

    def add(self, value: int, seq: int, action) -> None:
        run = self.run
        if not run or run[-1][0] <= value:
            run.append((value, seq, action))
        else:
            heappush(self.heap, (value, seq, action))

    def any_action(self):
        return self.run[0][2] if self.run else self.heap[0][2]

    def take(self, level: int, into: dict) -> None:
        """Move the actions waiting for a value <= ``level`` into ``into`` (seq → action)."""
        run, heap = self.run, self.heap
        while run and run[0][0] <= level:
            _, seq, action = run.popleft()
            into[seq] = action
        while heap and heap[0][0] <= level:
            _, seq, action = heappop(heap)
            into[seq] = action


class Stream:
    """An in-order dispatch stream (CUDA stream, OpenCL in-order command queue) and its callback path.
    ``fifo``: the issued actions, the head running; ``idle``: nothing to run (a push wakes it)."""

    __slots__ = ("index", "track", "fifo", "idle", "held", "held_event", "held_outcome", "held_error",
                 "callback_track", "callback_free", "slot", "last_end", "wait_i", "wait_error", "wait_since",
                 "wait_by", "waiting", "block", "waited", "failed_behind")

    def __init__(self, index: int, track: int, callback_track: int):
        self.index = index
        self.track = track
        self.fifo: deque[Action] = deque()
        self.idle = True
        # The action, native event, wait outcome and failure the stream is looking at (the stream was a
        # SimPy process, whose frame held them until the next ones); dropped when the stream goes idle.
        self.held: Action | None = None
        self.held_event: NativeEvent | None = None
        self.held_outcome: HalError | None = None
        self.held_error: HalError | None = None
        self.callback_track = callback_track
        self.callback_free = 0
        self.slot = False  # holds one of the device's execution slots (cost model device_concurrency)
        self.last_end = -1  # when its last action ended
        # The wait for the head's events in progress (StreamDevice._stream_wait): the next event's
        # index, the error so far, since when and for what; its callback (the device sets it).
        self.wait_i = 0
        self.wait_error: HalError | None = None
        self.wait_since = 0
        self.wait_by = "device"
        self.waiting: NativeEvent | None = None  # the event whose callbacks hold ``waited`` now
        self.waited = None
        self.block: tuple | None = None  # the running quick body's trace block
        # OpenCL: (error, n) — the n actions queued behind one that failed through a failed event
        # fail with it (PoCL fails an in-order queue's commands enqueued behind a failed one)
        self.failed_behind: tuple | None = None
