"""The event-semaphore stream engine: IREE's CUDA driver design (HAL_SEMANTICS §B.3) in virtual time.

``sim:cuda`` and ``sim:opencl`` are this engine with different native events; ``real_backends.common``
is the same design against real APIs. The pieces, named as in IREE's ``deferred_work_queue.c``:

* **Host-side timeline semaphores.** Values live on the host; the GPU only sees *native events*.
* **Pending queue actions.** A queue call appends an *action* to the device's FIFO list and *scans*
  it; so do every semaphore signal or failure (host threads and completion callbacks alike). A scan
  resolves each pending action's waits in order: reached → dropped; failed → the action fails; else
  a native event that will set the value is needed. With ``wait_policy = "pending"`` (CUDA) only an
  already-*recorded* device-signal event of an issued action will do, otherwise the action stays
  pending — and ready actions are issued past it. With ``"user_event"`` (OpenCL) an unresolved wait
  becomes a user event the host sets when the value is reached, so every action is issued at once and
  its in-order queue stalls on it. More than ``max_wait_events`` events → RESOURCE_EXHAUSTED.
* **Sticky failure** ([H] ``actions->status``): a failed wait, the event limit or a device error fails
  the action's signals and the device's queue status; from then on every pending and future action
  fails with that status.
* **The worker thread** issues ready actions one at a time (``wake_ns`` to wake it): waits on the
  events (``event_wait_ns`` each), launches the work (``commit_ns``), acquires one device-signal event
  per signal from the event pool (``event_create_ns`` when the pool is empty) and records it
  (``event_record_ns``).
* **Streams**: one in-order dispatch stream per queue runs issued actions in issue order, each after
  its wait events complete (``launch_ns``, then the commands with the cost model's durations).
* **Completion**: ``host_fn_ns`` after the GPU reaches an action's events, a host callback — on the
  device's callback stream (CUDA, ``cuLaunchHostFunc``: in issue order, as IREE enqueues each host
  function at issue) or its event-callback thread (OpenCL, ``clSetEventCallback``: in the order the
  device reaches them), one at a time — runs host calls, signals (or fails) the semaphores on the
  host, then releases what the action retained and its events.

The engine's state objects (native events, actions, streams, the scan's lookups) are in
:mod:`halsim.sim.stream_state`; the dispatch streams and the completion path (the GPU half) in
:mod:`halsim.sim.stream_gpu`.

>>> from halsim.sim.driver import driver
>>> dev = driver.create_device("cuda")
>>> a, b = dev.create_semaphore(), dev.create_semaphore()
>>> dev.queue_barrier([(a, 1)], [(b, 1)])       # pending: nothing has recorded an event for a >= 1
>>> dev.queue_barrier([], [(a, 1)])             # ready: issued past the pending one
>>> b.wait(1)
>>> [(e["op"], e["t"]) for e in dev.trace.events("issue")]
[('0:1', 6900), ('0:0', 22400)]
>>> dev.close()
"""

from __future__ import annotations

from collections import deque
from functools import partial

from reference.hal import QUEUE_AFFINITY_ANY, Device, HalError, StatusCode
from reference.hal.queue_op import QueueOp, fail_all
from reference.trace.trace import expander
from reference.utils.recorded_events import RecordedEvents, producer_ids

from .device import SimDevice, _api
from .events import Done, Lane, WaitsResolved, call_after
from .stream_gpu import StreamExecution
from .stream_state import Action, Blocked, NativeEvent, Stream

MAX_WAIT_EVENTS = 32  # IREE_HAL_MAX_WAIT_EVENT_COUNT
MAX_LEVEL = 1 << 64


class StreamDevice(StreamExecution, SimDevice):
    """Base of ``sim:cuda`` and ``sim:opencl``. Subclasses set the class attributes below."""

    wait_policy = "pending"       # or "user_event"
    max_wait_events: int | None = MAX_WAIT_EVENTS
    event_name = "native_event"   # trace event name for event-pool activity
    stream_name = "stream"
    # The completion path is one per device: CUDA's callback stream, whose host functions were enqueued at
    # issue and so run in issue order ("issue"); OpenCL's event-callback thread, called as the device
    # reaches each action ("completion").
    callback_order = "issue"
    callback_track = "callback stream"
    inline_issue = False          # the submitting thread issues what its queue call made ready

    @property
    def waits_in_list_order(self) -> bool:
        """IREE's ``issue()`` with pending actions: the first unresolved wait blocks the action (the
        deadlock report's wording); OpenCL's user events leave no op pending on an unmet wait."""
        return self.wait_policy == "pending"

    def __init__(self, uri: str, options: dict | None = None):
        super().__init__(uri, options)
        capacity = self.options.get("event_pool_capacity")
        if capacity is not None and (isinstance(capacity, bool) or capacity < 0):
            raise HalError(StatusCode.INVALID_ARGUMENT, f"option event_pool_capacity={capacity!r} must be an int >= 0")
        self.pool_capacity = capacity          # None: no pool, every event created and destroyed
        self.pool_free = capacity or 0
        self.events_in_use = 0
        self.peak_events_in_use = 0
        self.unpooled_events = 0
        self._seq = 0
        self._arriving = 0  # submitted, not yet arrived in simulated time (host clocks run ahead)
        self._arrivals: dict[int, Lane] = {}  # host thread → its queue calls on their way (at its clock)
        self._pending: dict[int, Action] = {}  # submission order
        self._recorded: dict[str, RecordedEvents] = {}  # semaphore id → its recorded device-signal events
        self._scans: dict[int, set] = {}          # time → semaphores changed then
        self._completing: set | None = None       # during a completion callback: the semaphores it changed
        # semaphore id → pending actions blocked waiting for it to reach a value
        self._blocked: dict[str, Blocked] = {}
        self._recorded_since_scan: set[str] = set()
        self._sticky: HalError | None = None
        self._closing: HalError | None = None
        self._user_waits: dict[WaitsResolved, None] = {}  # user events not set yet, in creation order
        self._worker: deque[Action] = deque()
        self._worker_busy = False
        self._worker_track = self.recorder.track("worker", "issue worker")
        kind = "stream" if self.callback_order == "issue" else "host"
        shared = self.recorder.track(kind, self.callback_track)
        # cost model device_concurrency: how many queues' operations run at once (0: each as if alone);
        # None, or [free slots, streams waiting for one (first come, first served)]
        n = self.cost.device_concurrency
        self._slots: list | None = [n, deque()] if n and n < self.queue_count else None
        self._streams = []
        for i in range(self.queue_count):
            track = self.recorder.track("stream", f"queue {i} {self.stream_name}")
            self._streams.append(Stream(i, track, shared))
        for stream in self._streams:  # the callback a stream waiting on an event registers (made once)
            stream.waited = partial(self._stream_waited, stream)
        self._callback_path = Stream(-1, shared, shared)  # the completion path (its callback_free)
        self._callback_waiting: deque | None = None  # callbacks behind the scheduled one (None: idle)
        # CUDA: issued actions whose host callback has not been scheduled yet, in issue order
        # (one queue: its stream already completes them in issue order)
        self._callback_fifo: deque[Action] | None = \
            deque() if self.callback_order == "issue" and self.queue_count > 1 else None
        self._stepper = self._steps()
        next(self._stepper)
        self._launch = {by: self.cost.launch_after(by) for by in ("issue", "device", "host")}

    # -- scans: host-side pending queue actions -------------------------------------------------------

    def _schedule(self, op: QueueOp) -> None:
        action = Action(op, self._seq)
        self._seq += 1
        if self.inline_issue and not self.threads.in_sim():
            # The real engine issues on the calling thread when its worker is idle (Adapter.inline_issue):
            # the queue call returns after the issue. Waits not reached now are counted as events.
            events = sum(1 for sem, value in op.wait if sem.poll(value) is not True)
            action.issue_ns = self._issue_ns(op, events, len(_device_signals(op)))
            self.threads.charge(action.issue_ns)
        self._arriving += 1
        lane = self._arrivals.get(op.thread)
        if lane is None:
            lane = self._arrivals[op.thread] = Lane(self.env, self._arrive)
        lane.push(max(self.env._now, op.enqueue_t), action)

    def _arrive(self, action: Action) -> None:
        self._arriving -= 1
        self._pending[action.seq] = action
        self._scan((), action)

    @_api()
    def queue_flush(self, *, queue_affinity: int = QUEUE_AFFINITY_ANY) -> None:
        """IREE's ``queue_flush`` re-runs ``issue()``: a pending action may now find a device-signal
        event recorded since the last scan (recording one triggers no scan of its own)."""
        Device.queue_flush(self, queue_affinity=queue_affinity)
        self._poke(self.now(), None)

    def _signal_semaphore(self, sem, value: int, cause: str) -> None:
        super()._signal_semaphore(sem, value, cause)
        if self._pending or self._arriving:  # (_poke's own test, before the clock is read)
            # In a completion callback the caller is the simulator (API calls hold the device lock).
            self._poke(self.env._now if self._completing is not None else self.now(), sem.id)

    def _fail_semaphore(self, sem, error: HalError, cause: str) -> None:
        super()._fail_semaphore(sem, error, cause)
        self._poke(self.now(), sem.id)

    def _poke(self, t: int, sem_id: str | None) -> None:
        """Scan at virtual time ``t`` for a change of ``sem_id`` (one scan per time, however many)."""
        if not self._pending and not self._arriving:
            return
        sems = self._scans.get(t)
        if sems is not None:
            sems.add(sem_id)
            return
        if self._completing is not None and t == self.env._now:  # scanned when the callback ends
            self._completing.add(sem_id)
            return
        sems = self._scans[t] = {sem_id}

        def scan(_ev):
            del self._scans[t]
            self._scan(sems)
        call_after(self.env, max(0, t - self.env._now), scan)

    def _scan(self, sems, new: Action | None = None) -> None:
        """IREE's ``issue()``: resolve pending actions in submission order; issue the ready ones.

        Equivalent to re-examining the whole list, but only actions whose blocking wait may have
        changed are looked at: those blocked on a semaphore that changed (``sems``) or that got a
        recorded device-signal event since the last scan, and the new arrival."""
        if self._sticky is not None:
            self._fail_all_pending()
            return
        candidates = None
        blocked = self._blocked
        recorded = self._recorded_since_scan
        if blocked and (sems or recorded):
            candidates = {}
            all_recorded = self._recorded
            for sem_id in recorded.union(sems) if sems else recorded:
                waiting = blocked.get(sem_id)
                if not waiting:
                    continue
                # The highest value a scan could now find the semaphore at or covered by a recorded
                # event (everything, once it failed): actions blocked waiting for more stay blocked.
                sem = waiting.any_action().waits[0][0]
                if sem.failure is not None:
                    level = MAX_LEVEL
                else:
                    level = sem.payload
                    r = all_recorded.get(sem_id)
                    if r is not None and r.values[-1] > level:
                        level = r.values[-1]
                waiting.take(level, candidates)
                if not waiting:  # (a dropped semaphore's entry must not stay: one per semaphore, for ever)
                    del blocked[sem_id]
        if recorded:
            recorded.clear()
        if candidates:  # in submission order
            if new is not None:
                candidates[new.seq] = new
            order = [candidates[seq] for seq in sorted(candidates)] if len(candidates) > 1 else candidates.values()
        elif new is not None:
            order = (new,)
        else:
            return
        ready = []
        resolve = self._resolve
        for action in order:
            outcome = resolve(action)
            if outcome is False:
                sem, value = action.waits[0]
                waiting = blocked.get(sem.id)
                if waiting is None:
                    waiting = blocked[sem.id] = Blocked()
                waiting.add(value, action.seq, action)
                continue
            del self._pending[action.seq]
            if isinstance(outcome, HalError):
                self._fail_action(action, outcome)
                self._set_sticky(outcome)
                break
            ready.append(action)
        if self._sticky is not None:  # [H]: the rest of the list, and the ready list, fail with it
            for action in ready:
                self._fail_action(action, self._sticky.clone())
            self._fail_all_pending()
            return
        if ready:
            if ready[0].issue_ns is not None and not self._worker_busy and not self._worker:
                self._worker_busy = True  # issuing inline (no wake-up); the worker takes the rest
                self._issue(ready.pop(0))
            self._worker.extend(ready)
            if ready and not self._worker_busy:
                self._worker_busy = True
                call_after(self.env, self.cost.wake_ns, self._worker_wakes)

    def _fail_all_pending(self) -> None:
        pending = list(self._pending.values())
        self._pending.clear()
        self._blocked.clear()
        for action in pending:
            self._fail_action(action, (self._sticky or self._closing).clone())

    def _resolve(self, action: Action):
        """None: ready; False: still pending; a HalError: the action fails with it."""
        waits = action.waits
        if not waits:
            return None
        now, history, all_recorded = self.env._now, self.history, self._recorded
        while waits:
            sem, value = waits[0]
            sem_id = sem.id
            state = sem.poll(value)  # the failure, True (reached) or False
            if state is True:
                if history.reached_at(sem_id, value) <= now:
                    del waits[0]
                    continue
            elif state is not False:
                if history.failure(sem_id)[0] <= now:
                    return state.clone()
                reached = history.reached_before_failure(sem, value, now)  # failed later in virtual time
                if reached is not None and reached <= now:
                    del waits[0]
                    continue
            recorded = all_recorded.get(sem_id)
            event = None
            if recorded is not None:
                event = recorded.find(value)
                if event is not None and self.wait_policy == "user_event" and self._gated(event, action):
                    event = None
            if event is not None:
                event.refs += 1
            elif self.wait_policy == "user_event":
                event = self._user_event(sem, value)
            else:
                return False
            if self.max_wait_events is not None and len(action.events) >= self.max_wait_events:
                self._unref(event)
                return HalError(StatusCode.RESOURCE_EXHAUSTED,
                                f"exceeded maximum queue action wait event limit ({self.max_wait_events}) "
                                f"in op {action.op.id}")
            action.events.append(event)
            del waits[0]
        return None

    def _gated(self, event: NativeEvent, action: Action) -> bool:
        """Whether ``event``'s producer, on another queue, or an action before it on that in-order
        queue, still waits on a user event the host has not set: reusing the event could wait on this
        very action (its consumer submitted first — C waits s>=2 and records s=3, or P behind C does;
        A, to signal s=2, would take that event for its s>=1 and wait on C, which waits on A).
        Refusing only those keeps every reused event one the device reaches without the host (as
        ``real_backends.common.engine``)."""
        producer = event.producer
        if producer is None or producer.op.queue == action.op.queue:
            return False
        fifo = self._streams[producer.op.queue].fifo  # issued, not ended, in queue order
        if producer not in fifo:
            return False  # ended on the device: its event is reached or about to be
        for earlier in fifo:
            if any(e.kind == "user" and not e.done.done for e in earlier.events):
                return True
            if earlier is producer:
                return False
        return False

    def _user_event(self, sem, value: int) -> NativeEvent:
        waits = WaitsResolved(self, [(sem, value)])
        if self._closing is not None:
            waits.cancel(self._closing.clone())
        elif not waits.done:
            self._user_waits[waits] = None
            waits.callbacks.append(lambda ev: self._user_waits.pop(ev, None))
        event = NativeEvent("user", sem.id, value, None, waits, self._acquire())
        self._native("acquire", event)
        return event

    def _set_sticky(self, error: HalError) -> None:
        if self._sticky is None:
            self._sticky = error.clone()
            self._poke(self.env.now, None)

    def _fail_action(self, action: Action, error: HalError) -> None:
        op = action.op
        op.ready_t = op.start_t = op.end_t = self.env.now
        op.track = self._streams[op.queue].track
        self.recorder.op_done(op, error)
        fail_all(self, op, error)
        self._cleanup(action)

    # -- the worker thread: issue ready actions -------------------------------------------------------

    def _issue_ns(self, op: QueueOp, events: int, created: int) -> int:
        """Issue cost: launch (``commit_ns``, plus ``dispatch_commit_ns`` per dispatch: binding its
        arguments), a wait per event, and per signal an event recorded (``created`` of them new)."""
        cost = self.cost
        ns = cost.commit_ns + cost.event_wait_ns * events + (cost.event_record_ns * len(_device_signals(op))
                                                              + cost.event_create_ns * created)
        if cost.dispatch_commit_ns and op.commands:
            ns += cost.dispatch_commit_ns * sum(1 for cmd in op.commands if cmd.kind == "dispatch")
        return ns

    def _worker_wakes(self, _event) -> None:
        if self._worker:
            self._issue(self._worker.popleft())
        else:
            self._worker_busy = False

    def _issue(self, action: Action) -> None:
        """Issue one action (the worker, or the submitting thread inline), then the worker's next."""
        env, op, cost = self.env, action.op, self.cost
        start = action.issue_start = env._now
        if self._callback_fifo is not None:  # its host function goes on the callback stream now
            self._callback_fifo.append(action)
        created = 0
        # A host call signals from the host after its function ran (in the completion callback): no
        # device-signal event a later wait could reuse and pass before then (as real_backends).
        for sem, value in _device_signals(op):
            pooled = self._acquire()
            created += not pooled
            event = NativeEvent("signal", sem.id, value, action, Done(), pooled)
            action.signal_events.append(event)
            self._native("acquire", event)
        ns = action.issue_ns
        if ns is None:
            ns = self._issue_ns(op, len(action.events), created)
        # The work is launched first and its signal events recorded after it (IREE: the graph launch,
        # then cuEventRecord per signal), so the stream may start it before the issue ends.
        markers = cost.event_record_ns * len(_device_signals(op)) + cost.event_create_ns * created
        action.launch_at = start + max(0, ns - markers)
        action.issue_end = start + ns
        # Queued on its stream at once (a busy stream needs no event for it, an idle one a wake-up):
        # the stream takes it at its launch point.
        stream = self._streams[op.queue]
        stream.fifo.append(action)
        if stream.idle:
            stream.idle = False
            call_after(env, max(0, action.launch_at - start), self._stream_wakes, stream)
        call_after(env, ns, self._issued, action)

    def _issued(self, call) -> None:
        """The issue ended: its signal events are recorded (seen by the next scan: recording does not
        scan); the worker takes its next action."""
        action = call.arg
        events = action.events
        self.trace.emit_record(("issue", self.env._now, action.op.id, action.issue_start, self._worker_track,
                                len(events), producer_ids(events)))
        all_recorded, since_scan = self._recorded, self._recorded_since_scan
        for event in action.signal_events:  # (its completion comes after: not before the issue ended)
            sem_id = event.sem
            recorded = all_recorded.get(sem_id)
            if recorded is None:
                recorded = all_recorded[sem_id] = RecordedEvents()
            recorded.add(event)
            since_scan.add(sem_id)
        if self._worker:
            self._issue(self._worker.popleft())
        else:
            self._worker_busy = False

    # -- native events and the pool --------------------------------------------------------------------

    def _acquire(self) -> bool:
        """Take an event: from the pool when it has one (True), else a new unpooled one (False)."""
        self.events_in_use += 1
        self.peak_events_in_use = max(self.peak_events_in_use, self.events_in_use)
        if self.pool_free:
            self.pool_free -= 1
            return True
        self.unpooled_events += 1
        return False

    def _unref(self, event: NativeEvent) -> bool:
        """Drop a reference; at the last one release the event. True when it was destroyed."""
        event.refs -= 1
        if event.refs:
            return False
        self.events_in_use -= 1
        # Back to the pool while it has room; otherwise destroyed ("extra events ... without pooling").
        event.pooled = self.pool_capacity is not None and self.pool_free < self.pool_capacity
        if event.pooled:
            self.pool_free += 1
        self._native("release", event)
        return not event.pooled

    def _native(self, what: str, event: NativeEvent) -> None:
        """Trace pool activity: ``pooled`` False on acquire = created, on release = destroyed."""
        self.trace.emit_record(("native_event", self.event_name, self.env._now, what, event.kind, event.sem,
                                event.value, event.producer.op.id if event.producer is not None else None,
                                event.pooled, self.events_in_use, self.pool_free))

    # -- deadlocks and shutdown -------------------------------------------------------------------

    def _pending_ops(self) -> list[QueueOp]:
        ops = [a.op for a in self._pending.values()]
        for stream in self._streams:
            ops.extend(a.op for a in stream.fifo)
        return ops

    def _queued_behind(self) -> dict[str, str]:
        behind = {}
        for stream in self._streams:
            previous = None
            for action in stream.fifo:
                if previous is not None:
                    behind[action.op.id] = previous.op.id
                previous = action
        return behind

    def _cancel_pending(self, error: HalError) -> None:
        self._closing = error
        sticky, self._sticky = self._sticky, None
        self._fail_all_pending()
        self._sticky = sticky
        for waits in list(self._user_waits):
            waits.cancel(error.clone())


def _device_signals(op: QueueOp) -> tuple:
    """The signals an op's issue records a device-signal event for: all, but none of a host call's."""
    return op.signal if op.kind != "host_call" else ()


# -- trace records (Trace.emit_record) ------------------------------------------------------------------

@expander("issue")
def _issue_event(r, _trace=None) -> dict:
    out = {"ev": "issue", "t": r[1], "op": r[2], "start": r[3], "track": r[4], "events": r[5]}
    if len(r) > 6 and r[6]:
        out["after"] = list(r[6])
    return out


@expander("native_event")
def _native_event(r, _trace=None) -> dict:
    return {"ev": r[1], "t": r[2], "action": r[3], "kind": r[4], "sem": r[5], "value": r[6], "op": r[7],
            "pooled": r[8], "in_use": r[9], "free": r[10]}
