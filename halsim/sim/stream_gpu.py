"""The GPU half of the stream engine (:mod:`halsim.sim.streams`): each queue's in-order dispatch stream
runs its issued actions, and the device's one completion path (CUDA's callback stream, OpenCL's
event-callback thread) runs their host callbacks, which signal on the host and release what the
action held.

:class:`StreamExecution` is a mixin of :class:`halsim.sim.streams.StreamDevice`, which owns the state
it uses (``_streams``, ``_slots``, ``_callback_path``, ``_callback_fifo``, ``_callback_waiting``) and
calls :meth:`StreamExecution._stream_wakes` when an issue queues an action on an idle stream.

>>> from halsim.sim.driver import driver
>>> dev = driver.create_device("cuda")
>>> s = dev.create_semaphore()
>>> dev.queue_barrier([], [(s, 1)])
>>> s.wait(1)
>>> done, = dev.trace.events("op_done")         # on the queue's dispatch stream
>>> signal, = dev.trace.events("signal")        # host_fn_ns later, by the host callback
>>> done["start"], done["t"], signal["t"] - done["t"] == dev.cost.host_fn_ns
(8200, 8700, True)
>>> dev.close()
"""

from __future__ import annotations

from collections import deque
from functools import partial

from reference.hal import HalError
from reference.hal.queue_op import fail_all, signal_all

from .events import call_after
from .execution import internal_error, quick_body, timed_body
from .stream_state import Action, Stream


class StreamExecution:
    """The dispatch streams and the completion path of a :class:`~halsim.sim.streams.StreamDevice`."""

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
            behind = stream.failed_behind
            if behind is not None:
                # Enqueued behind a command that failed through its wait list: PoCL fails it too,
                # whatever it waits for (as the opencl backend reports: the failure it comes from)
                error, n = behind
                stream.failed_behind = (error, n - 1) if n > 1 else None
                op = action.op
                op.ready_t = op.start_t = op.end_t = self.env._now
                op.wait_error = error  # (failed by a wait's failure, not a device error)
                self._stream_done(stream, action, error.clone(), True)
                continue
            if self.wait_policy == "user_event":  # PoCL: any failed event of the wait list fails it
                watch = None
                for event in action.events:
                    if event.done.callbacks is not None:
                        watch = watch or partial(self._stream_event_failed, stream, action)
                        event.done.callbacks.append(watch)
            if not self._stream_wait(stream, action, 0, None):
                return  # continued by a callback
        stream.idle = True
        # An idle stream holds nothing: the finished action's resources go when the host drops them
        # (it used to keep its last action until the next one, delaying their host_release)
        stream.held = stream.held_event = stream.held_outcome = stream.held_error = None

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
                if self.wait_policy == "user_event":
                    # PoCL fails a command as soon as an event of its wait list failed, whatever
                    # the others still wait for (as the opencl backend reports; a later failure
                    # reaches _stream_event_failed, watching since _stream_run)
                    error = error or _failed_later(events, i)
                    if error is not None:
                        break
                stream.wait_i, stream.wait_error, stream.wait_since = i, error, self.env._now
                stream.wait_by = "host" if event.kind == "user" else "device"
                stream.waiting = event
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
            if self.wait_policy == "user_event" and len(stream.fifo) > 1:
                stream.failed_behind = (error, len(stream.fifo) - 1)
        # (A host call's function runs in the completion callback.)
        return self._stream_done(stream, action, error, True)

    def _stream_waited(self, stream: Stream, ev) -> None:
        """The event the stream's head waited for (``ev``) was reached: wait for the next ones."""
        action = stream.held
        stream.waiting = None
        if self.env._now > stream.wait_since:
            action.ready_by = stream.wait_by
        outcome = stream.held_outcome = ev._value
        error, stream.wait_error = stream.wait_error, None
        if self._stream_wait(stream, action, stream.wait_i, outcome if error is None else error):
            self._stream_run(stream)

    def _stream_event_failed(self, stream: Stream, action: Action, ev) -> None:
        """(OpenCL) an event after the one the stream's head waits for completed: if it failed and
        the head still waits for an earlier one, the head fails now (PoCL), not once that one is set."""
        waiting = stream.waiting
        if ev._value is None or stream.held is not action or waiting is None or waiting.done is ev:
            return  # reached; or the stream went on (or waits for this very event: _stream_waited)
        waiting.done.callbacks.remove(stream.waited)
        stream.waiting = None
        error, stream.wait_error = stream.wait_error, None
        stream.held_outcome = ev._value
        if self._stream_wait(stream, action, len(action.events), error or ev._value):
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
        # Not before the issue ended: the host function (CUDA) or event callback (OpenCL) is enqueued
        # after the signal events are recorded, and an event completes no earlier than its record call
        # (a stream that ran the work while the issue was still creating events waits for that).
        at = max(env._now, path.callback_free, call[0].issue_end) + self.cost.host_fn_ns
        path.callback_free = at
        call_after(env, at - env._now, self._completes, call)

    def _completes(self, call) -> None:
        """The host callback: run a host call, signal or fail on the host, clean up, then scan the
        pending actions for what its signals changed (IREE scans from the signalling thread)."""
        action, error, should_signal = call.arg
        self._completing = sems = set()
        try:
            op = action.op
            # [H] deferred_work_queue.c process_completion: each callback gets the queue's status; once
            # it is sticky an action the device ran fails its signals with it
            sticky = self._sticky.clone() if error is None and self._sticky is not None else None
            if error is None and sticky is None and should_signal and op.kind != "host_call":  # the usual case
                refused = signal_all(self, op)
                if refused is not None:
                    self._set_sticky(refused)
                self._cleanup(action)
            else:
                self._callback(action, error, should_signal, sticky)
        finally:
            self._completing = None
            waiting = self._callback_waiting
            if waiting:
                self._callback_next(waiting.popleft())
            else:
                self._callback_waiting = None  # the path is idle
        if sems:
            self._scan(sems)

    def _callback(self, action: Action, error: HalError | None, should_signal: bool,
                  sticky: HalError | None = None) -> None:
        """``sticky``: the queue's status, which fails the signals of an action the device ran (a host
        call's function is then not called)."""
        op = action.op
        device_error = error is not None and op.wait_error is None
        if op.kind == "host_call" and error is None:
            if sticky is None:
                previous, self._host_call_op = self._host_call_op, op
                try:
                    should_signal = self._faulted_body(op)
                except HalError as e:
                    error = e
                finally:
                    self._host_call_op = previous
                    self.threads.user_code_ran()
            else:
                error = sticky
            op.end_t = self.env.now
            self.recorder.op_done(op, error)
        elif sticky is not None:
            error = sticky
        if error is not None:
            fail_all(self, op, error)
            if device_error or op.wait_error is not None:
                self._set_sticky(error)
        elif should_signal:
            # [H] execution_device_signal_host_callback: callbacks of different queues can finish out
            # of value order; a refused signal fails the action's list, and the queue.
            refused = signal_all(self, op)
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
            recorded = all_recorded.get(event.sem)  # (None only for an action failed before its issue)
            if recorded is not None and recorded.remove(event) and not recorded.values:
                del all_recorded[event.sem]
            destroyed += self._unref(event)
        for event in action.events:
            destroyed += self._unref(event)
        action.events = action.signal_events = ()
        if destroyed and self.cost.event_destroy_ns:  # unpooled events are destroyed by the callback path
            path = self._callback_path
            path.callback_free = max(path.callback_free, self.env.now) + destroyed * self.cost.event_destroy_ns


def _failed_later(events, i: int) -> HalError | None:
    """The first failure among ``events[i:]`` already completed (their values), else None."""
    for event in events[i:]:
        done = event.done
        if done.callbacks is None and done._value is not None:
            return done._value
    return None
