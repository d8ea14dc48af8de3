"""``sim`` (= ``sim:generic``): a simulated asynchronous GPU with IREE's unordered queue semantics.

The device has ``queues`` hardware queues; an operation goes to the queue its ``queue_affinity``
selects (bit i → queue i). Nothing orders submissions except semaphores: an operation becomes *ready*
when its waits are met (a failed wait fails it at once, without running), then takes one of the
queue's ``max_concurrency`` execution slots (first come, first served), pays the launch latency,
runs its commands one after another with the cost model's durations, and retires — releasing what it
retained, then signalling. Ready operations never wait behind blocked ones (no head-of-line blocking).

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

import simpy

from reference.hal import HalError, StatusCode
from reference.hal.queue_op import QueueOp

from ..device import SimDevice
from ..events import WaitsResolved
from ..execution import timed_body

CAPABILITIES = frozenset({"async_queue", "events", "host_calls", "mapping", "indirect"})


class HardwareQueue:
    """One hardware queue: its trace track and its execution slots."""

    __slots__ = ("index", "track", "slots")

    def __init__(self, env, index: int, concurrency: int, track: int):
        self.index = index
        self.track = track
        self.slots = simpy.Resource(env, capacity=concurrency)


class GenericDevice(SimDevice):
    personality = "generic"
    capabilities = CAPABILITIES

    def __init__(self, uri: str, options: dict | None = None):
        super().__init__(uri, options)
        self._queues = [HardwareQueue(self.env, i, self.max_concurrency, self.recorder.track("queue", f"queue {i}"))
                        for i in range(self.queue_count)]
        self._pending: dict[QueueOp, WaitsResolved] = {}  # insertion (submission) order

    def _schedule(self, op: QueueOp) -> None:
        self.env.process(self._run(op))

    def _run(self, op: QueueOp):
        env = self.env
        if op.enqueue_t > env.now:  # the host thread's clock runs ahead: the op arrives then
            yield env.timeout(op.enqueue_t - env.now)
        if op.wait:
            waits = WaitsResolved(self, op.wait)
            if not waits.done:
                self._pending[op] = waits
            try:
                op.wait_error = yield waits
            finally:
                self._pending.pop(op, None)
        queue = self._queues[op.queue]
        op.track = queue.track
        op.ready_t = env.now
        if op.wait_error is not None:
            op.start_t = op.end_t = env.now
            self._finish(op, op.wait_error, False)
            return
        with queue.slots.request() as slot:
            yield slot
            if self.cost.launch_ns:
                yield env.timeout(self.cost.launch_ns)
            op.start_t = env.now
            body = timed_body(self, op, queue.track)
            try:
                ns = next(body)
                while True:
                    yield env.timeout(ns)
                    ns = body.send(None)
            except StopIteration as stop:
                should_signal, error = bool(stop.value), None
            except HalError as e:
                should_signal, error = False, e
            except Exception as e:  # noqa: BLE001 - a model bug fails the op, never the host's wait
                should_signal, error = False, HalError(StatusCode.INTERNAL, f"simulator: {type(e).__name__}: {e}")
            op.end_t = env.now
            self._finish(op, error, should_signal)

    def _pending_ops(self) -> list[QueueOp]:
        return list(self._pending)

    def _cancel_pending(self, error: HalError) -> None:
        for waits in list(self._pending.values()):
            waits.cancel(error.clone())
