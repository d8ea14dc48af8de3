"""The completion side of the event-semaphore engine (:mod:`real_backends.common.engine`): a
completion thread — and a host thread blocked in a wait, helping — completes issued actions once the
device reached them: on the host it runs a host call, decommits a dealloca, records the op with the
device's timestamps, signals or fails the semaphores, and releases what the action held.

:class:`Completion` is a mixin of :class:`~real_backends.common.engine.Engine`, which owns the state
it uses (``_completions``, ``_completing``, ``_issued``, ``_queue_issued``, ``_helpers``) and starts
its thread on :meth:`Completion._completion_main`.
"""

from __future__ import annotations

import time

from reference.hal import HalError, StatusCode
from reference.hal.queue_op import QueueOp, fail_all, run_body, signal_all

from .engine_state import Action, Backoff, Event, _Prefix, _yield
from .pool import Pooled

HOST_COMPLETED = ("host_call", "dealloca")  # ops whose work runs on the host, in the completion
HELP_S = 0.0002  # how long a waiting host thread drives completions before it sleeps on the semaphores
_CANNOT_TELL = object()  # (Completion._complete_head: the API cannot query an event)


class Completion:
    """The completion thread and the helping host threads of an :class:`~real_backends.common.engine.Engine`."""

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
            if state is False or state is None or (isinstance(state, HalError) and self._producer_unreached(action)):
                blocked.add(queue)
                continue
            self._finish(action, state if isinstance(state, HalError) else None)
            progressed = True
        return progressed

    def _producer_unreached(self, action: Action) -> bool:
        """Whether ``action`` failed ahead of a producer (an action whose recorded event it waits on)
        that the device has not reached: a failed user event fails the command at once, whatever
        else its wait list holds (PoCL), so its producers are not known to have run — completing them
        with it (_finish_locked) would read a running kernel's profile (INTERNAL) and fail a correct
        op. It completes once they are reached."""
        for event in action.events:
            producer = event.producer
            if producer is not None and not producer.done:
                try:
                    if self.adapter.query(producer.last) is False:
                        return True
                except Exception:  # noqa: BLE001 - (its own completion reports that)
                    continue
        return False

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
        # [H] deferred_work_queue.c process_completion: each callback gets the queue's status; once it
        # is sticky an action the device ran fails its signals with it (a host call's function is not
        # called), as the model does (halsim.sim.stream_gpu)
        sticky = self._status.clone() if error is None and self._status is not None else None
        should_signal = error is None
        if error is None and op.kind in HOST_COMPLETED and not (sticky is not None and op.kind == "host_call"):
            try:
                should_signal = run_body(device, op, op.track, device.now)
            except HalError as e:
                error = e
            if op.kind == "host_call":  # the function's run; a decommit is its own trace event
                op.end_t = device.now()
        if op.kind == "dealloca" and error is None:
            self.adapter.forget(op.buffer)
        if sticky is not None and error is None:  # (no API error: nothing to park)
            device.recorder.op_done(op, sticky if op.kind == "host_call" else None)
            fail_all(device, op, sticky)
            self._cleanup(action)
            return
        device.recorder.op_done(op, error)
        if error is not None:
            if action.native or action.last is not None:  # issued: the API may point at its commands
                self.adapter.park(action)
            if device_error or op.wait_error is not None:
                self._set_status(error)
            fail_all(device, op, error)
        elif should_signal:
            # As IREE's completion callback: a refused signal (one timeline signalled by actions nothing
            # orders) fails the action's list, and the queue status becomes sticky.
            refused = signal_all(device, op)
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
