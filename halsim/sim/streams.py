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
:mod:`halsim.sim.stream_state`.

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
from reference.hal.queue_op import QueueOp, fail_all, run_body, signal_or_fail_all
from reference.trace.trace import expander
from reference.utils.recorded_events import RecordedEvents, producer_ids

from .device import SimDevice, _api
from .events import Done, Lane, WaitsResolved, call_after
from .execution import internal_error, quick_body, timed_body
from .stream_state import Action, Blocked, NativeEvent, Stream

MAX_WAIT_EVENTS = 32  # IREE_HAL_MAX_WAIT_EVENT_COUNT
MAX_LEVEL = 1 << 64


class StreamDevice(SimDevice):
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
        for event in action.signal_events:  # () when the op already completed and was cleaned up
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

    # -- the GPU: each dispatch stream runs its issued actions in order ------------------------------
    # Once a SimPy process per stream; now plain simulator callbacks (events.Call), at the same virtual
    # times as the process's events were, with fewer steps: an action is queued on its stream when its
    # issue starts (taken at its launch point), a quick body and its signal events' recording are one
    # step, and streams waiting on a signal event go on in the step that reaches it (~5 simulator
    # events per action instead of ~9; same times, same makespans; only the order of work at one
    # instant can differ). A step that finishes an action synchronously returns True; one that must
    # wait registers a callback that finishes the action and then runs the stream on (_stream_resume).
    # The hot steps carry their state in the Call's ``arg`` and on the Stream (the wait in progress,
    # the running quick body's block), not in closures made per action; a quick body's commands and
    # its op_done are one trace record (Recorder.finished).

    def _stream_wakes(self, call) -> None:
        self._stream_run(call.arg)

    def _stream_run(self, stream: Stream) -> None:
        fifo = stream.fifo
        while fifo:
            action = fifo[0]
            if action.launch_at > self.env._now:  # still being launched by the issue
                call_after(self.env, action.launch_at - self.env._now, self._stream_wakes, stream)
                return
            stream.held = action
            action.op.track = stream.track
            action.ready_by = "device" if action.launch_at < stream.last_end else "issue"
            stream.held_error = None
            if not self._stream_wait(stream, action, 0, None):
                return  # continued by a callback
        stream.idle = True

    def _stream_resume(self, stream: Stream, finished: bool) -> None:
        if finished:
            self._stream_run(stream)

    def _stream_wait(self, stream: Stream, action: Action, i: int, error: HalError | None) -> bool:
        """Wait for the action's events from the ``i``-th on (each one's value: None or the error the
        action fails with, the first one kept), then run it."""
        events = action.events
        while i < len(events):
            event = stream.held_event = events[i]
            done = event.done
            i += 1
            if done.callbacks is not None:  # not processed yet: _stream_waited goes on
                stream.wait_i, stream.wait_error, stream.wait_since = i, error, self.env._now
                stream.wait_by = "host" if event.kind == "user" else "device"
                done.callbacks.append(stream.waited)
                return False
            outcome = stream.held_outcome = done._value
            if outcome is not None and error is None:
                error = outcome
        # Ready: run it.
        env, op = self.env, action.op
        op.ready_t = env._now
        if error is None and op.kind != "host_call":
            return self._stream_launch(stream, action)
        op.start_t = op.end_t = env._now
        if error is not None:
            op.wait_error = error
        # (A host call's function runs in the completion callback.)
        return self._stream_done(stream, action, error, True)

    def _stream_waited(self, stream: Stream, ev) -> None:
        """The event the stream's head waited for (``ev``) was reached: wait for the next ones."""
        action = stream.held
        if self.env._now > stream.wait_since:
            action.ready_by = stream.wait_by
        outcome = stream.held_outcome = ev._value
        error, stream.wait_error = stream.wait_error, None
        if self._stream_wait(stream, action, stream.wait_i, outcome if error is None else error):
            self._stream_run(stream)

    def _stream_launch(self, stream: Stream, action: Action) -> bool:
        """Launch the ready action's body — once it holds an execution slot, on a device that runs
        fewer queues at once than it has (PoCL's CPU device: one)."""
        env, op = self.env, action.op
        slots = self._slots
        if slots is not None and not stream.slot:
            if not slots[0]:
                slots[1].append(stream)  # resumed by _stream_done of the slot's holder
                return False
            slots[0] -= 1
            stream.slot = True
        launch = self._launch[action.ready_by]
        op.start_t = env._now + launch
        quick = quick_body(self, op, launch)
        if quick is None:
            return self._stream_step(stream, action, timed_body(self, op, stream.track, at=op.start_t))
        ns, block = quick
        # The body and the recording of its signal events as one simulator event: nothing happens on
        # the stream between them (the timed path, below, keeps the two steps).
        record = self.cost.event_record_ns * len(op.signal)
        if not ns and not record:
            op.end_t = env._now
            self.recorder.finished(op, block, None, 0)  # the block's commands, then op_done
            return self._stream_done(stream, action, None, True, True)
        stream.block = block
        call_after(env, ns + record, self._stream_ran, stream)
        return False

    def _stream_ran(self, call) -> None:
        """A quick body ran and its signal events were recorded."""
        stream = call.arg
        action, op = stream.held, stream.held.op
        op.end_t = self.env._now
        self.recorder.finished(op, stream.block, None, 0)  # the block's commands, then op_done
        self._stream_done(stream, action, None, True, True)
        self._stream_run(stream)

    def _stream_step(self, stream: Stream, action: Action, body) -> bool:
        box = self._stepper.send(body)
        ns, should_signal, error = box
        box.clear()
        if ns is None:
            return self._stream_record(stream, action, should_signal, error)
        call_after(self.env, ns, lambda _ev: self._stream_resume(stream, self._stream_step(stream, action, body)))
        return False

    @staticmethod
    def _steps():
        """Advance bodies: ``send(body)`` → ``[ns, None, None]`` or, when it ended, ``[None,
        should_signal, error]`` (the caller empties the list). A generator that never ends, so that the
        traceback a body failure keeps (in the op's failure, in waiters' outcomes) holds no frames of
        the callers — which would keep the host program's objects alive — only this one (as it held
        the stream process's frame)."""
        box: list = []
        while True:
            body = yield box
            box = []
            try:
                box.extend((next(body), None, None))
            except StopIteration as stop:
                box.extend((None, bool(stop.value), None))
            except HalError as e:
                box.extend((None, True, e))
            except Exception as e:  # noqa: BLE001 - (timed_body converts these; a safety net)
                box.extend((None, True, internal_error(e)))

    def _stream_record(self, stream: Stream, action: Action, should_signal: bool, error: HalError | None) -> bool:
        """The body ran: record the signal events, then the action is done."""
        op = action.op
        if op.signal and self.cost.event_record_ns:
            def recorded(_ev):
                op.end_t = self.env._now
                self._stream_resume(stream, self._stream_done(stream, action, error, should_signal))
            call_after(self.env, self.cost.event_record_ns * len(op.signal), recorded)
            return False
        op.end_t = self.env._now
        return self._stream_done(stream, action, error, should_signal)

    def _stream_done(self, stream: Stream, action: Action, error: HalError | None, should_signal: bool,
                     traced: bool = False) -> bool:
        """The action ended (``traced``: its op_done is already in the trace): a completion callback
        follows; streams waiting on its signal events go on."""
        env, op = self.env, action.op
        if stream.slot:  # the slot goes to the first stream waiting for one, now
            stream.slot = False
            waiting = self._slots[1]
            if waiting:
                other = waiting.popleft()
                other.slot = True
                other.held.ready_by = "device"  # it waited for this action's slot
                call_after(env, 0, lambda _ev: self._stream_resume(other, self._stream_launch(other, other.held)))
            else:
                self._slots[0] += 1
        stream.held_error = error
        stream.last_end = env._now
        stream.fifo.popleft()
        if not traced and (op.kind != "host_call" or error is not None):
            self.recorder.op_done(op, error)
        fifo = self._callback_fifo  # CUDA: the callback stream runs host functions in issue order
        if fifo is not None and fifo[0] is not action:  # behind one issued earlier, not ended yet
            action.outcome = (error, should_signal)
        else:
            self._callback_after(action, error, should_signal)
            if fifo is not None:
                fifo.popleft()
                while fifo and fifo[0].outcome is not None:
                    head = fifo.popleft()
                    self._callback_after(head, *head.outcome)
        # The GPU reached the signal events: streams waiting on them go on now (as the event's own
        # simulator step at this instant would have let them, one step later).
        for event in action.signal_events:
            stream.held_event = event
            event.done.fire(error)
        return True

    def _callback_after(self, action: Action, error: HalError | None, should_signal: bool) -> None:
        """Queue the action's host callback on the one completion path: ``host_fn_ns`` after now, or
        after the callback before it has run — and destroyed its unpooled events (``_cleanup``), which
        is known only then."""
        if self._callback_waiting is not None:
            self._callback_waiting.append((action, error, should_signal))
            return
        self._callback_waiting = deque()
        self._callback_next((action, error, should_signal))

    def _callback_next(self, call) -> None:
        env, path = self.env, self._callback_path
        at = max(env._now, path.callback_free) + self.cost.host_fn_ns
        path.callback_free = at
        call_after(env, at - env._now, self._completes, call)

    def _completes(self, call) -> None:
        """The host callback: run a host call, signal or fail on the host, clean up, then scan the
        pending actions for what its signals changed (IREE scans from the signalling thread)."""
        action, error, should_signal = call.arg
        self._completing = sems = set()
        try:
            op = action.op
            if error is None and should_signal and op.kind != "host_call":  # the usual case, inlined
                refused = signal_or_fail_all(self, op)
                if refused is not None:
                    self._set_sticky(refused)
                self._cleanup(action)
            else:
                self._callback(action, error, should_signal)
        finally:
            self._completing = None
            waiting = self._callback_waiting
            if waiting:
                self._callback_next(waiting.popleft())
            else:
                self._callback_waiting = None  # the path is idle
        if sems:
            self._scan(sems)

    def _callback(self, action: Action, error: HalError | None, should_signal: bool) -> None:
        op = action.op
        device_error = error is not None and op.wait_error is None
        if op.kind == "host_call" and error is None:
            previous, self._host_call_op = self._host_call_op, op
            try:
                should_signal = self._faulted_body(op)
            except HalError as e:
                error = e
            finally:
                self._host_call_op = previous
                self.threads.user_code_ran()
            op.end_t = self.env.now
            self.recorder.op_done(op, error)
        if error is not None:
            fail_all(self, op, error)
            if device_error or op.wait_error is not None:
                self._set_sticky(error)
        elif should_signal:
            # [H] execution_device_signal_host_callback: callbacks of different queues can finish out
            # of value order; a refused signal fails the action's list, and the queue.
            refused = signal_or_fail_all(self, op)
            if refused is not None:
                self._set_sticky(refused)
        self._cleanup(action)

    def _cleanup(self, action: Action) -> None:
        op = action.op
        if op.resources:
            self.recorder.release(op, [r.id for r in op.resources])
            op.resources = ()
        destroyed = 0
        all_recorded = self._recorded
        for event in action.signal_events:
            recorded = all_recorded.get(event.sem)  # (None, or without it: its issue had not ended)
            if recorded is not None and recorded.remove(event) and not recorded.values:
                del all_recorded[event.sem]
            destroyed += self._unref(event)
        for event in action.events:
            destroyed += self._unref(event)
        action.events = action.signal_events = ()
        if destroyed and self.cost.event_destroy_ns:  # unpooled events are destroyed by the callback path
            path = self._callback_path
            path.callback_free = max(path.callback_free, self.env.now) + destroyed * self.cost.event_destroy_ns

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
