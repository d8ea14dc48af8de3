"""The local-task device: a pending set driven by semaphore timepoints, and a pool of worker threads."""

from __future__ import annotations

import collections
import queue
import threading

from ...hal.device import Device
from ...hal.queue_op import QueueOp, fail_all
from ...hal.status import HalError, StatusCode
from ..common import execute_ready_op

_DISPATCHED = -1  # op.pending once the op left the pending set


class TaskDevice(Device):
    capabilities = frozenset({"async_queue", "events", "host_calls", "mapping", "indirect"})

    def __init__(self, uri: str, options: dict):
        workers = options.get("workers", 4)
        if workers < 1:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"option workers={workers} must be >= 1")
        super().__init__(uri, options)
        self._lock = threading.Lock()
        # Set by close() under _lock: from then on no op reaches the workers or the pending set (a
        # submission racing with close is cancelled instead, never left behind the workers' stop).
        self._stopping = False
        self._pending: set[QueueOp] = set()
        self._ready: queue.SimpleQueue = queue.SimpleQueue()
        self._local = threading.local()  # per thread: its worker track, and the inline barriers to retire
        self._workers = []
        for i in range(workers):
            track = self.recorder.track("worker", f"worker {i}")
            t = threading.Thread(target=self._worker, args=(track,), name=f"local-task worker {i}", daemon=True)
            t.start()
            self._workers.append(t)

    def _submit(self, op: QueueOp) -> None:
        if not op.wait:
            op.ready_t = op.enqueue_t
            self._dispatch(op)
            return
        # IREE local-task scans the wait list in order: a failed semaphore met before any unsatisfied one
        # makes the call itself return that failure, after failing the op's signals (differential D1).
        for sem, value in op.wait:
            state = sem.poll(value)
            if state is False:
                break
            if state is not True:
                op.wait_error = state
                op.ready_t = self.now()
                execute_ready_op(self, op, self.recorder.track("host", f"host thread {op.thread}"))
                raise state.clone()
        op.pending = len(op.wait) + 1  # +1 guards against dispatch while timepoints are being added
        if not self._admit(op, self._pending.add):
            return
        for sem, value in op.wait:
            sem.add_timepoint(value, lambda error, op=op: self._resolve_wait(op, error))
        self._resolve_wait(op, None)

    def _resolve_wait(self, op: QueueOp, error: HalError | None) -> None:
        # A failed wait does not dispatch the op early: like IREE, it stays pending until every wait
        # resolved, then fails its signals with the first failure (differential D2).
        with self._lock:
            if op.pending == _DISPATCHED:
                return
            if error is not None and op.wait_error is None:
                op.wait_error = error
            op.pending -= 1
            if op.pending:
                return
            op.pending = _DISPATCHED
            self._pending.discard(op)
        op.ready_t = self.now()
        self._dispatch(op)

    def _dispatch(self, op: QueueOp) -> None:
        """Hand a ready op to the workers; retire a barrier on this thread instead.

        A barrier has no body, so handing it to a worker only adds a thread hop to every signal it
        forwards (the submit -> signal -> host-wake round trip, BENCHMARKS.md). Barriers made ready while
        one is being retired are queued and retired by the outermost call, so a long chain of barriers
        does not recurse.
        """
        if op.kind != "barrier":
            self._admit(op, self._ready.put)
            return
        self._retire_inline(op)

    def _admit(self, op: QueueOp, into) -> bool:
        """``into(op)`` under the lock close() stops the workers with — so an op is pending or queued
        ahead of their stop markers (and runs), or close() has begun and it is cancelled here, on
        this thread (False)."""
        with self._lock:
            stopping = self._stopping
            if not stopping:
                into(op)
        if stopping:
            self._cancel(op)
        return not stopping

    def _cancel(self, op: QueueOp) -> None:
        """Retire an op that close() overtook: its signals fail with CANCELLED, on this thread."""
        if op.wait_error is None:
            op.wait_error = HalError(StatusCode.CANCELLED, "queue shutting down")
        op.ready_t = self.now()
        self._retire_inline(op)

    def _retire_inline(self, op: QueueOp) -> None:
        local = self._local
        inline = getattr(local, "inline", None)
        if inline is not None:
            inline.append(op)
            return
        local.inline = inline = collections.deque((op,))
        track = getattr(local, "track", None)
        try:
            while inline:
                ready = inline.popleft()
                if track is None:
                    track = self.recorder.track("host", f"host thread {self.host_thread()}")
                self._execute(ready, track)
        finally:
            local.inline = None

    def _execute(self, op: QueueOp, track: int) -> None:
        try:
            execute_ready_op(self, op, track)
        except BaseException as e:  # noqa: BLE001 - the queue must survive to serve later ops
            fail_all(self, op, HalError(StatusCode.INTERNAL, f"local-task: {type(e).__name__}: {e}"))

    def _worker(self, track: int) -> None:
        self._local.track = track
        while True:
            op = self._ready.get()
            if op is None:
                return
            self._execute(op, track)
            # Not kept while waiting for the next one: an idle worker held its last op — its
            # command buffer, buffers and semaphores — until the device closed.
            del op

    def _shutdown(self) -> None:
        # IREE [H]: pending operations are cancelled with CANCELLED "queue shutting down". Ops queued
        # for the workers before this still run; the workers stop after them (markers queued under the
        # lock every queueing takes), and an op submitted or made ready from now on is cancelled.
        with self._lock:
            self._stopping = True
            pending = list(self._pending)
            self._pending.clear()
            for op in pending:
                op.pending = _DISPATCHED
            for _ in self._workers:
                self._ready.put(None)
        for op in pending:
            op.wait_error = HalError(StatusCode.CANCELLED, "queue shutting down")
            self._cancel(op)
        for t in self._workers:
            t.join(timeout=10)
