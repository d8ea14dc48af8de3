"""``sim`` (= ``sim:generic``): a simulated asynchronous GPU with IREE's unordered queue semantics.

The device has ``queues`` hardware queues; an operation goes to the queue its ``queue_affinity``
selects (bit i → queue i). Nothing orders submissions except semaphores: an operation becomes *ready*
when its waits are met, then takes one of the
queue's ``max_concurrency`` execution slots (first come, first served), pays the launch latency,
runs its commands one after another with the cost model's durations, and retires — releasing what it
retained, then signalling. Ready operations never wait behind blocked ones (no head-of-line blocking).

A failed wait fails the op without running it, as IREE local-task ([H] ``task_queue.c``) does: once
*every* wait of the op has been reached or has failed (an op waiting on a failed semaphore and on one
still unsignaled stays pending), with the first failure seen — except that a queue call whose wait
list, scanned in order, meets a failed semaphore before any unsatisfied one fails the op at once and
raises that failure itself (``iree_hal_task_queue_try_satisfy_waits``), as ``local-task`` does.

>>> from halsim.sim.driver import driver
>>> dev = driver.create_device("generic", queues=2)
>>> a, b = dev.create_semaphore(), dev.create_semaphore()
>>> dev.queue_barrier([(a, 1)], [(b, 1)], queue_affinity=1 << 1)   # consumer first (wait-before-signal)
>>> dev.queue_barrier([], [(a, 1)])
>>> b.wait(1)
>>> [(o["op"], o["queue"]) for o in dev.trace.operations()]
[('0:0', 1), ('0:1', 0)]
>>> dev.close()
"""

from __future__ import annotations

from collections import deque
from heapq import heappush

from simpy.events import NORMAL

from reference.hal import HalError, StatusCode
from reference.hal.queue_op import QueueOp, signal_all

from ..device import SimDevice
from ..events import Call, Lane, Waits
from ..execution import quick_body, timed_body

CAPABILITIES = frozenset({"async_queue", "events", "host_calls", "mapping", "indirect"})


class HardwareQueue:
    """One hardware queue: its trace track, its free execution slots and the ready ops waiting for one."""

    __slots__ = ("index", "track", "free", "waiting")

    def __init__(self, index: int, concurrency: int, track: int):
        self.index = index
        self.track = track
        self.free = concurrency
        self.waiting: deque[QueueOp] = deque()


class GenericDevice(SimDevice):
    personality = "generic"
    capabilities = CAPABILITIES

    def __init__(self, uri: str, options: dict | None = None):
        super().__init__(uri, options)
        self._queues = [HardwareQueue(i, self.max_concurrency, self.recorder.track("queue", f"queue {i}"))
                        for i in range(self.queue_count)]
        self._pending: dict[QueueOp, Waits] = {}  # insertion (submission) order
        self._arrivals: dict[int, Lane] = {}  # host thread → its queue calls on their way (at its clock)

    # An op moves through plain simulator callbacks (events.Call), not a SimPy process: arrive (at the
    # host's clock) → waits resolved → an execution slot → one event for launch + body → retire.
    # Three simulator events per op, the fewest that keep the order of events (and so traces) fixed.

    def _schedule(self, op: QueueOp) -> None:
        failed = self._failed_before_unmet(op) if op.wait else None
        if failed is not None:
            op.wait_error = failed
        lane = self._arrivals.get(op.thread)
        if lane is None:
            lane = self._arrivals[op.thread] = Lane(self.env, self._arrive)
        lane.push(max(self.env._now, op.enqueue_t), op)
        if failed is not None:  # the call returns the failure, as local-task's submit does
            raise failed.clone()

    def _failed_before_unmet(self, op: QueueOp) -> HalError | None:
        """IREE local-task's submit-time scan (``iree_hal_task_queue_try_satisfy_waits``): the wait
        list in order, up to the first unmet wait; the failure of a failed semaphore met first."""
        for sem, value in op.wait:
            state = sem.poll(value)
            if state is False:
                return None
            if state is True or self.history.reached_before_failure(sem, value, op.enqueue_t) is not None:
                continue
            return state
        return None

    def _arrive(self, op: QueueOp) -> None:
        if not op.wait:
            self._ready(op, None)
            return
        # (one the call's scan failed fails at its semaphore's failure: the waits before it are met)
        self._pending[op] = Waits(self, op, self._waited, settle=op.wait_error is None)

    def _waited(self, event: Call) -> None:
        waits = event.arg
        self._ready(waits.op, waits.value)

    def _ready(self, op: QueueOp, error: HalError | None) -> None:
        self._pending.pop(op, None)
        queue = self._queues[op.queue]
        op.track = queue.track
        op.ready_t = self.env._now
        if error is not None:
            op.wait_error = error
            op.start_t = op.end_t = op.ready_t
            self._finish(op, error, False)
        elif queue.free:
            queue.free -= 1
            self._start(op, queue)
        else:
            queue.waiting.append(op)

    def _start(self, op: QueueOp, queue: HardwareQueue) -> None:
        env = self.env
        launch = self.cost.launch_ns
        op.start_t = env._now + launch
        quick = quick_body(self, op, launch)
        if quick is None:
            self._step(op, queue, timed_body(self, op, queue.track, at=op.start_t))
            return
        ns, block = quick
        ran = Call(self._quick_end, (op, queue, block))
        if ns:
            heappush(env._queue, (env._now + ns, NORMAL, next(env._eid), ran))
        else:
            self._quick_end(ran)

    def _quick_end(self, event: Call) -> None:
        # _end → _finish → retire for an op that ran a static command list (or none), with its trace
        # events (the commands, op_done, release) written as one record.
        op, queue, block = event.arg
        op.end_t = now = self.env._now
        try:
            resources = op.resources
            self.recorder.finished(op, block, [r.id for r in resources] if resources else None, now)
            op.resources = ()
            signal_all(self, op)
        finally:
            if queue.waiting:
                self._start(queue.waiting.popleft(), queue)
            else:
                queue.free += 1

    def _step(self, op: QueueOp, queue: HardwareQueue, body) -> None:
        try:
            ns = next(body)
        except StopIteration as stop:
            self._end(op, queue, bool(stop.value), None)
        except HalError as e:
            self._end(op, queue, False, e)
        except Exception as e:  # noqa: BLE001 - a model bug fails the op, never the host's wait
            self._end(op, queue, False, HalError(StatusCode.INTERNAL, f"simulator: {type(e).__name__}: {e}"))
        else:
            self.env.schedule(Call(self._resume, (op, queue, body)), NORMAL, ns)

    def _resume(self, event: Call) -> None:
        self._step(*event.arg)

    def _end(self, op: QueueOp, queue: HardwareQueue, should_signal: bool, error: HalError | None) -> None:
        op.end_t = self.env._now
        try:
            self._finish(op, error, should_signal)
        finally:
            if queue.waiting:
                self._start(queue.waiting.popleft(), queue)
            else:
                queue.free += 1

    def _pending_ops(self) -> list[QueueOp]:
        return list(self._pending)

    def _cancel_pending(self, error: HalError) -> None:
        for waits in list(self._pending.values()):
            waits.cancel(error.clone())
