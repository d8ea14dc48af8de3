"""The event-semaphore engine: IREE's CUDA driver design (HAL_SEMANTICS §B.3) against any GPU API.

``sim:cuda``/``sim:opencl`` model exactly this in virtual time (``halsim/sim/streams.py``); here it
runs on real threads and a real API behind an :class:`Adapter`:

* semaphores are the reference host-side timelines; every signal or failure (host threads and
  completions alike), every submission and ``queue_flush`` runs :meth:`Engine.issue`;
* ``issue`` scans the pending actions in FIFO order: a failed wait fails the action; a reached wait is
  dropped; otherwise an already-recorded device-signal event of an issued action for a value ≥ the
  wait is reused (the stream waits on it), or — with ``wait_policy = "user_event"`` — a user event is
  made that the engine sets when the value is reached; else the action stays pending and later ready
  actions are issued past it. More than ``max_wait_events`` events → RESOURCE_EXHAUSTED;
* any failure is **sticky** ([H] ``actions->status``): every pending and later action fails with it;
* ready actions are issued in the order the scans found them (one FIFO, appended under the scan's
  lock), by a **worker thread** — or, with ``Adapter.inline_issue``, by the thread that made them
  ready or the one already issuing: stream waits, the work (``Adapter.submit``), one
  device-signal event per signal from the :class:`~.pool.EventPool` (if the adapter pools events),
  recorded on the stream;
* a **completion thread** synchronizes each action's last event, then — on the host — runs a host
  call, decommits a dealloca, records the op with the device's timestamps, signals or fails the
  semaphores, and releases what the action retained and its events;
* a **host thread blocked in a wait** helps (:meth:`Engine.help`, where the adapter can
  :meth:`~Adapter.query` an event without blocking): for up to ``HELP_S`` it completes the oldest
  issued action itself as soon as its event is reached, instead of sleeping until the completion
  thread has done so and woken it — two thread wake-ups less on a host round trip (the completion
  thread then polls slowly). Completions stay one at a time; host calls are left to the completion
  thread (user code does not run on the waiting thread); with nothing issued or on its way (a wait
  for another host thread's signal) it sleeps at once;
* completions follow issue order where waits are recorded events of earlier actions (``pending``),
  and what the device reached where an earlier action can wait on a later one's user event
  (:meth:`Engine._sweep`); either way an action completes after the earlier actions of its queue and
  its producers.

The completion side (the completion thread, :meth:`Engine.help`) is :mod:`.engine_completion`; the
engine's interface (:class:`Adapter`) and state objects are :mod:`.engine_state`.
"""

from __future__ import annotations

import queue
import threading
from collections import deque

from reference.hal import HalError, StatusCode
from reference.hal.queue_op import QueueOp, fail_all, run_body
from reference.utils.recorded_events import RecordedEvents, producer_ids

from .engine_completion import HOST_COMPLETED, Completion
from .engine_state import MAX_WAIT_EVENTS, Action, Adapter, Backoff, Event, WaitFailed, _Prefix
from .pool import EventPool, Pooled

__all__ = ["MAX_WAIT_EVENTS", "Action", "Adapter", "Backoff", "Engine", "Event", "WaitFailed"]



class Engine(Completion):
    def __init__(self, device, adapter: Adapter, pool_capacity: int | None):
        self.device = device
        self.adapter = adapter
        self.pool = EventPool(pool_capacity or 0, adapter.create_event, adapter.destroy_event) \
            if adapter.pooled else None
        self._lock = threading.Lock()
        self._pending: list[Action] = []
        self._recorded: dict[str, RecordedEvents] = {}  # semaphore id → its recorded signal events
        self._unset: dict[Event, bool] = {}  # user events not set yet
        self._status: HalError | None = None
        self._wait_failure: HalError | None = None  # the first semaphore failure set on a user event
        self._closing: HalError | None = None  # shutting down: what work failing on the device then reports
        self._inflight = 0
        self._idle = threading.Condition(self._lock)
        self._work: queue.SimpleQueue = queue.SimpleQueue()  # the worker's wake-ups
        self._ready: deque[Action] = deque()  # ready, not issued yet: in the order the scans found them
        self._issuing = threading.Lock()      # one issuer at a time: the worker or an inline caller
        self._completions: queue.SimpleQueue = queue.SimpleQueue()
        self._issued: deque[Action] = deque()  # issued and not completed yet, in issue order
        self._queue_issued: dict[int, deque] = {}  # the same, per queue
        self._completing = threading.Lock()    # one completion at a time
        self._helpers = 0                      # host threads helping (Engine.help)
        self._sweeps = adapter.wait_policy == "user_event"  # completes what the device reached (_sweep)
        self._busy: dict[int, int] = {}        # queue → its actions ready, issued or in flight (under _lock)
        self._holding: set[int] = set()        # queues with a _Prefix in flight: later actions wait
        self._deallocs: dict[int, int] = {}    # id(allocation) → deallocas of it enqueued, not completed
        self._allocas: dict[int, int] = {}     # id(allocation) → allocas of it enqueued, not issued
        self._worker = threading.Thread(target=self._worker_main, name=f"{device.uri} worker", daemon=True)
        self._completer = threading.Thread(target=self._completion_main, name=f"{device.uri} completion",
                                           daemon=True)
        self._worker.start()
        self._completer.start()

    # -- the host side ---------------------------------------------------------------------------------

    def enqueue(self, op: QueueOp) -> None:
        action = Action(op, self.adapter.holds(op))
        with self._lock:
            self._pending.append(action)
            self._inflight += 1
            if op.kind == "dealloca":
                key = id(op.buffer)
                self._deallocs[key] = self._deallocs.get(key, 0) + 1
            elif op.kind == "alloca":
                key = id(op.buffer)
                self._allocas[key] = self._allocas.get(key, 0) + 1
        self.issue()

    def issue(self) -> None:
        """IREE's ``issue()``: resolve what can be resolved, issue what is ready, fail what failed."""
        failed, ready = [], []
        with self._lock:
            still = []
            held = set(self._holding) if self._holding else None  # queues whose later actions wait
            busy, deallocs = self._busy, self._deallocs
            for action in self._pending:
                # (A resumed action — its prefix ran — is issued work, not pending: it completes.)
                if self._status is not None and not action.resume:
                    failed.append((action, self._status.clone()))
                    continue
                if held is not None and action.op.queue in held:
                    still.append(action)  # in-order behind a held action of its queue
                    continue
                if action.hold or ((deallocs or self._allocas) and self._near_transient(action)):
                    outcome = self._held(action)
                    if outcome is True:
                        still.append(action)
                        if held is None:
                            held = set()
                        held.add(action.op.queue)
                        continue
                else:
                    outcome = None
                if outcome is None:
                    outcome = self._resolve(action)
                if outcome is False:
                    still.append(action)
                elif isinstance(outcome, HalError):
                    failed.append((action, outcome))
                    self._status = outcome.clone()
                else:
                    ready.append(action)
                    queue = action.op.queue
                    busy[queue] = busy.get(queue, 0) + 1
                    action.busy = True
                    if action.hold:
                        # Later actions of its queue wait until it is issued (its events recorded:
                        # their waits must not resolve against later actions' events meanwhile, nor
                        # be issued ahead of the rest of a split command buffer): _issue_action scans
                        # again then.
                        self._holding.add(queue)
                        if held is None:
                            held = set()
                        held.add(queue)
            if self._status is not None:  # [H]: the ready list fails with the status too
                failed.extend((a, self._status.clone()) for a in ready if not a.resume)
                ready = [a for a in ready if a.resume]
            self._pending = still
            # Queued for issue in this scan's order, under the lock the scan held: a scan on another
            # thread queues its ready actions before or after these, never among them.
            self._ready.extend(ready)
        if ready:
            self._hand_over()
        for action, error in failed:
            self._fail(action, error)

    def _hand_over(self) -> None:
        """Issue the ready actions, oldest first: wake the worker — or, with ``Adapter.inline_issue``,
        issue them on this thread (one thread hop less per submission) unless another thread is
        issuing, which then issues them too. Issue order is the scans' order (``_ready``, filled
        under ``_lock`` by each scan), whoever issues."""
        if not self.adapter.inline_issue:
            self._work.put(True)
            return
        self._issue_ready()

    def _issue_ready(self) -> None:
        """Issue ``_ready`` until it is empty, unless another thread holds ``_issuing`` (it will)."""
        while self._issuing.acquire(blocking=False):
            try:
                while True:
                    with self._lock:
                        if not self._ready:
                            break
                        action = self._ready.popleft()
                    self._issue_guarded(action)
            finally:
                self._issuing.release()
            with self._lock:  # queued between our last look and the release: its scan saw us issuing
                if not self._ready:
                    return

    def _held(self, action: Action):
        """(Holding ``_lock``.) Whether a held action must wait: True while a wait is not reached on
        the host (or, ``Action.hold``, while an action of its queue is ready, issued or in flight);
        a failed wait's error; else None (issue it: its waits then resolve on the host)."""
        unreached = False
        for sem, value in action.waits:
            state = sem.poll(value)
            if isinstance(state, HalError):
                return state.clone()
            if not state:
                unreached = True
        if unreached or (action.hold and self._busy.get(action.op.queue)):
            return True
        return None

    def _near_transient(self, action: Action) -> bool:
        """Whether the action's commands use an allocation a dealloca enqueued before it may release,
        or whose alloca is not issued yet (held behind an action of its queue): then it is issued only
        once its waits are reached on the host — its storage is checked when it runs (Q9:
        FAILED_PRECONDITION after the dealloca, whatever the timing), not behind user events while
        the storage is still committed, or not committed yet."""
        deallocs, allocas = self._deallocs, self._allocas
        for cmd in action.op.commands:
            for rng, _ in cmd.accesses:
                key = id(rng.buffer.root)
                if key in deallocs or key in allocas:
                    return True
        return False

    def _resolve(self, action: Action):
        waits = action.waits
        while waits:
            sem, value = waits[0]
            state = sem.poll(value)
            if isinstance(state, HalError):
                return state.clone()
            if state:
                waits.pop(0)
                continue
            recorded = self._recorded.get(sem.id)
            event = recorded.find(value) if recorded is not None else None
            if event is not None and self._gated(event, action):
                event = None
            if event is not None:
                event.refs += 1
            elif self.adapter.wait_policy == "user_event":
                event = self._user_event(sem, value)
            else:
                return False
            limit = self.adapter.max_wait_events
            if limit is not None and len(action.events) >= limit:
                if self._drop(event):
                    self._release(event)
                return HalError(StatusCode.RESOURCE_EXHAUSTED,
                                f"exceeded maximum queue action wait event limit ({limit}) in op {action.op.id}")
            action.events.append(event)
            waits.pop(0)
        return None

    def _gated(self, event: Event, action: Action) -> bool:
        """(Holding ``_lock``.) Whether ``event``'s producer, on another queue, or an action before it
        on that in-order queue, still waits on a user event the host has not set: reusing the event
        could wait on this very action (its consumer submitted first: C waits s>=2 and records s=3 —
        or P behind C records it; A, to signal s=2, would take that event for its s>=1 and wait on C,
        which waits on A). Only such events are refused, so by induction every reused event is one
        the device reaches without the host. (On the same queue, order decides anyway.)"""
        producer = event.producer
        if producer is None or producer.op.queue == action.op.queue or not self._unset:
            return False
        unset = self._unset
        # (a snapshot: the issuing thread appends to the deque without this lock)
        on_queue = tuple(self._queue_issued.get(producer.op.queue, ()))
        if producer not in on_queue:  # completed (its event reached), or being issued right now:
            return not producer.done  # then its queue is not known to be clear (a host round trip more)
        for earlier in on_queue:
            if any(e.kind == "user" and unset.get(e, False) for e in earlier.events):
                return True
            if earlier is producer:
                return False
        return False

    def _user_event(self, sem, value: int) -> Event:
        event = Event(self.adapter.create_user_event(), False, sem.id, value, "user")
        adapter = self.adapter

        def reached(error):  # a semaphore timepoint: runs on whichever thread signals or fails it
            if self._unset.pop(event, False):
                if error is not None and self._wait_failure is None:
                    self._wait_failure = error.clone()  # (first wins, near enough: no lock here)
                adapter.set_user_event(event.handle, error)
        self._unset[event] = True
        tp = sem.add_timepoint(value, reached)
        if tp is None:  # reached (or failed) while we were looking
            state = sem.poll(value)
            reached(state if isinstance(state, HalError) else None)
        return event

    def _fail(self, action: Action, error: HalError) -> None:
        op = action.op
        device = self.device
        op.ready_t = op.start_t = op.end_t = device.now()
        op.track = device.stream_track(op.queue)
        device.recorder.op_done(op, error)
        fail_all(device, op, error)
        self._cleanup(action)

    # -- the worker thread: issue ------------------------------------------------------------------

    def _worker_main(self) -> None:
        while self._work.get() is not None:  # a wake-up (_hand_over), or None: shut down
            self._issue_ready()

    def _issue_guarded(self, action: Action) -> None:
        """Issue one action; a failure fails it (and, from the API, makes the status sticky). A held
        action issued whole (or failed) lets the later actions of its queue go: a scan follows."""
        try:
            self._issue_action(action)
            if action.hold and not self._split(action):
                self._release_queue(action)
        except HalError as e:
            self._release_queue(action, scan=False)  # (the scan below, once the failure is recorded)
            # Refused behind a failed event: report the failure it comes from; another API error
            # (an unsupported command, say) stands, unless the op's own wait failed.
            if isinstance(e, WaitFailed):
                e = self._failure_behind(action.op, e)
            else:
                e = self._failed_wait(action.op) or e
            self._set_status(e)
            self._fail(action, e)
            self.issue()
        except Exception as e:  # noqa: BLE001 - a backend bug fails the action, never hangs a waiter
            self._release_queue(action, scan=False)
            self._fail(action, HalError(StatusCode.INTERNAL, f"{type(e).__name__}: {e}"))
            self.issue()

    def _issue_action(self, action: Action) -> None:
        op, adapter, device = action.op, self.adapter, self.device
        stream = op.queue
        if action.issued_t is None:
            action.issued_t = op.ready_t = device.now()
        for event in action.events if not action.resume else ():
            adapter.stream_wait(stream, event.handle)
        if op.kind == "alloca":
            run_body(device, op, device.stream_track(stream), device.now)  # storage before any user is issued
            self._alloca_settled(action)
        elif op.commands:
            if adapter.submit(stream, action) is not None:
                self._issue_prefix(action)
                return
        last = None
        # A host call's or dealloca's signals come from the host, after its function or decommit
        # (in the completion): no device-signal event is recorded that a later wait could reuse and
        # pass before then — the completion waits for a plain marker.
        for sem, value in op.signal if op.kind not in HOST_COMPLETED else ():
            got = self.pool.acquire() if self.pool is not None else Pooled(None, False)
            try:
                handle = adapter.record(stream, got.handle)
            except BaseException:  # never recorded: back to the pool (or destroyed beyond its capacity)
                if self.pool is not None:
                    self.pool.release(got)
                raise
            event = Event(handle, got.pooled, sem.id, value, "signal", action)
            action.signal_events.append(event)
            with self._lock:
                recorded = self._recorded.get(sem.id)
                if recorded is None:
                    recorded = self._recorded[sem.id] = RecordedEvents()
                recorded.add(event)
            last = handle
        if last is None:
            last = adapter.record(stream, None)
            action.native.append(("completion", last))
        issued = {"ev": "issue", "t": device.now(), "op": op.id, "start": action.issued_t,
                  "track": device.worker_track, "events": len(action.events)}
        after = producer_ids(action.events)
        if after:
            issued["after"] = list(after)
        device.recorder.emit(issued)
        action.last = last
        on_queue = self._queue_issued.get(stream)
        if on_queue is None:
            on_queue = self._queue_issued[stream] = deque()
        on_queue.append(action)      # (before _issued, where the completion thread finds it)
        self._issued.append(action)  # in issue order: issuing is serialized (_issuing)
        # (A sweeping completion thread only needs a wake-up: an item naming the action would keep
        # it, and the buffers its commands name, alive until that thread next drains its queue.)
        self._completions.put(True if self._sweeps else (action, last))

    def _split(self, action: Action) -> bool:
        """Whether the action's commands were split: its prefix is in flight, the rest to come."""
        prefix = self._issued[-1] if self._issued else None
        return type(prefix) is _Prefix and prefix.action is action and not prefix.done

    def _release_queue(self, action: Action, scan: bool = True) -> None:
        if action.hold:
            with self._lock:
                self._holding.discard(action.op.queue)
            if scan:
                self.issue()

    def _alloca_settled(self, action: Action) -> None:
        """An alloca was issued (its storage committed) or failed unissued: users of its buffer go
        behind user events again."""
        with self._lock:
            key = id(action.op.buffer)
            left = self._allocas.get(key, 1) - 1
            if left > 0:
                self._allocas[key] = left
            else:
                self._allocas.pop(key, None)

    def _issue_prefix(self, action: Action) -> None:
        """``Adapter.submit`` enqueued the commands before an indirect dispatch that must read what they
        wrote: a marker after them goes in flight (a _Prefix); the rest is issued once it was reached."""
        stream = action.op.queue
        last = self.adapter.record(stream, None)
        action.native.append(("completion", last))  # (kept with the action: park, timing skips it)
        prefix = _Prefix(action, last)
        with self._lock:
            self._holding.add(stream)
        on_queue = self._queue_issued.get(stream)
        if on_queue is None:
            on_queue = self._queue_issued[stream] = deque()
        on_queue.append(prefix)
        self._issued.append(prefix)
        self._completions.put(True if self._sweeps else (prefix, last))

    def _resume(self, prefix: _Prefix, error: HalError | None) -> None:
        """The device reached a held action's prefix: issue the rest (from the head of the pending
        list: everything before it on its queue completed, everything after it waits), or fail it."""
        action, queue = prefix.action, prefix.op.queue
        with self._lock:
            self._holding.discard(queue)
            if error is None:
                self._unbusy(action)
                self._pending.insert(0, action)
                return
        self._complete(action, error)

    def _unbusy(self, action: Action) -> None:
        """(Holding ``_lock``.) The action no longer counts as ready or in flight on its queue."""
        if action.busy:
            action.busy = False
            self._busy[action.op.queue] -= 1

    # -- shutdown ------------------------------------------------------------------------------------

    def shutdown(self, timeout: float = 30.0) -> None:
        """IREE [H]: work in flight completes; actions still pending are cancelled."""
        cancelled = HalError(StatusCode.CANCELLED, "queue shutting down")
        with self._lock:
            pending, self._pending = self._pending, []
            self._closing = cancelled
        for action in pending:
            self._fail(action, cancelled.clone())
        for event in list(self._unset):  # issued work stalled on user events nobody will set
            if self._unset.pop(event, False):
                self.adapter.set_user_event(event.handle, cancelled.clone())
        with self._lock:
            self._idle.wait_for(lambda: not self._inflight, timeout)
        self._work.put(None)
        self._completions.put(None)
        self._worker.join(timeout)
        self._completer.join(timeout)
        if self.pool is not None:
            self.pool.close()
        self.adapter.close()
