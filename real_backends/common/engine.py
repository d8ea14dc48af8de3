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
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque

from reference.hal import HalError, StatusCode
from reference.hal.queue_op import QueueOp, fail_all, run_body, signal_or_fail_all
from reference.utils.recorded_events import RecordedEvents, producer_ids

from .engine_state import MAX_WAIT_EVENTS, Action, Adapter, Backoff, Event, WaitFailed, _Prefix, _yield
from .pool import EventPool, Pooled

__all__ = ["MAX_WAIT_EVENTS", "Action", "Adapter", "Backoff", "Engine", "Event", "WaitFailed"]

HOST_COMPLETED = ("host_call", "dealloca")  # ops whose work runs on the host, in the completion
HELP_S = 0.0002  # how long a waiting host thread drives completions before it sleeps on the semaphores
_CANNOT_TELL = object()  # (Engine._complete_head: the API cannot query an event)


class Engine:
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
            handle = adapter.record(stream, got.handle)
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

    # -- the completion thread ------------------------------------------------------------------------

    def _completion_main(self) -> None:
        if self.adapter.wait_policy == "user_event":
            self._complete_reached()
            return
        while True:
            item = self._completions.get()
            if item is None:
                return
            action, handle = item
            if action.done:  # completed by a helping host thread
                continue
            # While a host thread helps, poll as if work were queued behind this (no spinning).
            backlog = self._completions.qsize() or self._helpers
            try:
                error = self.adapter.synchronize(handle, backlog)
            except Exception as e:  # noqa: BLE001
                error = HalError(StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
            self._finish(action, error)

    def _finish(self, action: Action, error: HalError | None) -> None:
        """Complete ``action`` unless a helper did."""
        with self._completing:
            self._finish_locked(action, error)
        self.issue()

    def _finish_locked(self, action: Action, error: HalError | None) -> None:
        if action.done:
            return
        # What the device reached before it completes first — the earlier actions of its in-order
        # queue, and its producers (whose recorded events it waited on) — so that signals stay in
        # order when two threads complete at once or completions do not follow issue order
        # (_complete_reached).
        on_queue = self._queue_issued[action.op.queue]
        while on_queue and on_queue[0] is not action:
            self._finish_locked(on_queue[0], self._reached_error(on_queue[0]))
        for event in action.events:
            producer = event.producer
            if producer is not None and not producer.done:
                self._finish_locked(producer, self._reached_error(producer))
        action.done = True
        if on_queue:
            on_queue.popleft()
        issued = self._issued
        while issued and issued[0].done:
            issued.popleft()
        if type(action) is _Prefix:
            self._resume(action, error)
            return
        try:
            self._complete(action, error)
        except Exception as e:  # noqa: BLE001 - a backend bug fails the action, never hangs a waiter
            self._complete(action, HalError(StatusCode.INTERNAL, f"{type(e).__name__}: {e}"))

    def _reached_error(self, action: Action) -> HalError | None:
        """The outcome of an action the device reached (one ahead of a reached one): its error, if any."""
        try:
            state = self.adapter.query(action.last)
        except Exception as e:  # noqa: BLE001
            return HalError(StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
        return state if isinstance(state, HalError) else None

    # With ``wait_policy = "user_event"`` an issued action can wait, through a user event, for the
    # host-side signal of an action issued after it — a consumer submitted before its producer on
    # another queue. Completing strictly in issue order would wait for the consumer first, forever
    # (the producer's completion, which signals, is behind it). Such devices complete what the
    # device reached: oldest first, looking past an action not reached yet and the rest of its
    # in-order queue; an action's producers complete before it (_finish_locked).

    def _sweep(self, host_calls: bool = True) -> bool | None:
        """Complete every issued action the device reached; True if one was, None if none is in
        flight. ``host_calls=False`` (a helping host thread): host calls are left to the completion
        thread (user code does not run on a waiting thread)."""
        issued = self._issued
        if not issued:  # (done actions leave it from the head: a non-empty one has work in flight)
            return None
        query, blocked, progressed = self.adapter.query, set(), False
        queues, i = self.device.queue_count, 0
        while len(blocked) < queues:  # (a chain on one queue: one look)
            try:
                action = issued[i]
            except IndexError:  # (completions pop from the head meanwhile: a later sweep looks again)
                break
            i += 1
            queue = action.op.queue
            if queue in blocked or action.done:
                continue
            if not host_calls and action.op.kind == "host_call":
                state = False
            else:
                try:
                    state = query(action.last)
                except Exception as e:  # noqa: BLE001 - a backend bug fails the action, never hangs
                    state = HalError(StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
            if state is None and host_calls:  # the API cannot tell: wait for this one (in issue order)
                try:
                    state = self.adapter.synchronize(action.last, self._completions.qsize() or self._helpers)
                except Exception as e:  # noqa: BLE001
                    state = HalError(StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
                state = True if state is None else state
            if state is False or state is None:
                blocked.add(queue)
                continue
            self._finish(action, state if isinstance(state, HalError) else None)
            progressed = True
        return progressed

    def _complete_reached(self) -> None:
        """The completion thread of a user-event device: sweeps while work is in flight, paced by a
        :class:`Backoff` (no bare yields while a host thread helps), and sleeps until an issue otherwise."""
        pace = Backoff(spin=False)
        while True:
            progressed = self._sweep()
            if progressed is None:  # nothing in flight: until something is issued (None: shut down)
                if self._completions.get() is None:
                    return
                while not self._completions.empty():
                    if self._completions.get() is None:
                        return
                pace.restart()
            elif progressed:
                pace.restart()
            else:
                pace.wait(spin=not self._helpers)

    def help(self, satisfied, budget_s: float = HELP_S) -> None:
        """Run on a host thread about to block in a wait: until ``satisfied()`` (or ``budget_s``
        passed), complete issued actions whenever their events are reached — the oldest one, or on a
        user-event device what the device reached (:meth:`_sweep`) — never a host call (module
        docstring). Returns at once when nothing is in flight nor on its way, or the API cannot tell."""
        step = self._sweep if self.adapter.wait_policy == "user_event" else self._complete_head
        deadline = time.perf_counter() + budget_s
        with self._lock:
            self._helpers += 1
        try:
            while not satisfied():
                progressed = step(host_calls=False)
                if progressed is _CANNOT_TELL:  # leave it to the completion thread
                    return
                if progressed is None and not self._ready and not self._issuing.locked():
                    return  # nothing in flight nor on its way: nothing to help with
                if not progressed:
                    if time.perf_counter() >= deadline:
                        return
                    _yield()
        finally:
            with self._lock:
                self._helpers -= 1

    def _complete_head(self, host_calls: bool = True):
        """Complete the oldest issued action if the device reached it: True if it did, False if not
        (or it is a host call and ``host_calls`` is False), None if nothing is in flight,
        ``_CANNOT_TELL`` if the API cannot tell."""
        try:
            head = self._issued[0]
        except IndexError:
            return None
        if head.done or (not host_calls and head.op.kind == "host_call"):
            return False
        state = self.adapter.query(head.last)
        if state is None:
            return _CANNOT_TELL
        if state is False:
            return False
        self._finish(head, state if isinstance(state, HalError) else None)
        return True

    def _complete(self, action: Action, error: HalError | None) -> None:
        op, device = action.op, self.device
        if error is not None:
            error = self._failure_behind(op, error)
        op.track = device.stream_track(op.queue)
        timing = self.adapter.timing(action) if error is None else None
        if timing:
            op.start_t, op.end_t = timing[0], timing[1]
        else:
            # Nothing timed on the device (a barrier, an alloca, a host call): the op ran when the
            # device reached it — its last event's timestamp where the API has one — not when it was
            # issued: issued before its waits were met (OpenCL user events), it would appear to
            # start before the operations it waits for ended.
            reached = self.adapter.reached_at(action) if error is None else None
            op.start_t = op.end_t = reached if reached is not None else device.now()
        if error is None and op.commands:
            # Every command is traced, including those the API needs no work for (barriers on an
            # in-order queue, HAL events): at the end of the command before them, zero long.
            timed = {index: (start, end) for index, start, end in (timing[2] if timing else ())}
            t = op.start_t
            for cmd in op.commands:
                start, end = timed.get(cmd.index, (t, t))
                device.recorder.command(op, cmd, start, end, op.track)
                t = max(t, end)
        device_error = error is not None and op.wait_error is None
        should_signal = error is None
        if error is None and op.kind in HOST_COMPLETED:
            try:
                should_signal = run_body(device, op, op.track, device.now)
            except HalError as e:
                error = e
            if op.kind == "host_call":  # the function's run; a decommit is its own trace event
                op.end_t = device.now()
        device.recorder.op_done(op, error)
        if op.kind == "dealloca" and error is None:
            self.adapter.forget(op.buffer)
        if error is not None:
            if action.native or action.last is not None:  # issued: the API may point at its commands
                self.adapter.park(action)
            if device_error or op.wait_error is not None:
                self._set_status(error)
            fail_all(device, op, error)
        elif should_signal:
            # As IREE's completion callback: a refused signal (one timeline signalled by actions nothing
            # orders) fails the action's list, and the queue status becomes sticky.
            refused = signal_or_fail_all(device, op)
            if refused is not None:
                self._set_status(refused)
        self._cleanup(action)

    def _set_status(self, error: HalError) -> None:
        """Make the queue status sticky ([H] ``actions->status``): the first failure stays."""
        with self._lock:
            if self._status is None:
                self._status = error.clone()

    def _failure_behind(self, op: QueueOp, api_error: HalError) -> HalError:
        """What an op that failed on the device, or was refused behind a failed event, reports: as the
        model does, the semaphore failure it comes from rather than the API's error — its own failed
        wait's, else the sticky status, else (shutting down) the cancellation of the user events it
        stalled on, else the first failure set on a user event (a predecessor that failed through it
        may not have completed yet)."""
        failed = self._failed_wait(op)
        if failed is not None:
            return failed
        root = self._status or self._closing or self._wait_failure
        return root.clone() if root is not None else api_error

    @staticmethod
    def _failed_wait(op: QueueOp) -> HalError | None:
        """The failure of the op's first failed wait semaphore (recorded as the op's wait error)."""
        failed = next((s.failure for s, _ in op.wait if s.failure is not None), None)
        if failed is None:
            return None
        op.wait_error = failed.clone()
        return op.wait_error.clone()

    def _cleanup(self, action: Action) -> None:
        op = action.op
        if op.resources:
            self.device.recorder.release(op, [r.id for r in op.resources])
            op.resources = ()
        with self._lock:
            for event in action.signal_events:
                recorded = self._recorded.get(event.sem)
                if recorded is not None and recorded.remove(event) and not recorded.values:
                    del self._recorded[event.sem]
            # Under the lock a scan takes its references with (_resolve): cleanups can run on two
            # threads at once (a completion, a failure at issue), and ``refs -= 1`` is not atomic.
            released = [event for event in action.signal_events + action.events if self._drop(event)]
        for event in released:
            self._release(event)
        action.signal_events = action.events = []
        action.keep = None
        if op.kind == "alloca" and action.issued_t is None:  # failed before its issue
            self._alloca_settled(action)
        with self._lock:
            self._unbusy(action)
            if op.kind == "dealloca":
                key = id(op.buffer)
                left = self._deallocs.get(key, 1) - 1
                if left:
                    self._deallocs[key] = left
                else:
                    self._deallocs.pop(key, None)
            self._inflight -= 1
            if not self._inflight:
                self._idle.notify_all()

    @staticmethod
    def _drop(event: Event) -> bool:
        """Drop a reference (holding ``_lock``); True at the last one."""
        event.refs -= 1
        return not event.refs

    def _release(self, event: Event) -> None:
        if event.kind == "signal" and self.pool is not None:
            self.pool.release(Pooled(event.handle, event.pooled))

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
