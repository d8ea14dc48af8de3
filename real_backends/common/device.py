"""The device every real backend is: the HAL contract (``reference.hal.Device``) on the engine.

A backend subclasses :class:`EngineDevice`, supplies its :class:`~.engine.Adapter` and capability tags;
semaphores stay the reference host-side timelines, and every change of one re-runs the engine's scan.
"""

from __future__ import annotations

import time

from reference.hal import Device, HalError, StatusCode
from reference.hal.constants import QUEUE_AFFINITY_ANY
from reference.hal.queue_op import QueueOp
from reference.hal.wait import blocking_wait, evaluate
from reference.utils import gc_tuning

from .engine import Adapter, Engine


def int_option(options: dict, name: str, low: int, high: int) -> int:
    """An integer device option in ``[low, high]`` (INVALID_ARGUMENT naming it otherwise)."""
    value = options[name]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise HalError(StatusCode.INVALID_ARGUMENT, f"option {name}={value!r} must be an int in [{low}, {high}]")
    return value


class EngineDevice(Device):
    capabilities = frozenset({"async_queue", "host_calls", "mapping", "indirect"})

    def __init__(self, uri: str, options: dict, adapter: Adapter, queues: int = 1, pool_capacity: int | None = 32):
        int_option({"queues": queues}, "queues", 1, 64)
        self.queue_count = queues
        super().__init__(uri, options)
        self.trace.header["personality"] = adapter.personality
        self._stream_tracks = [self.recorder.track("stream", f"queue {i} {adapter.stream_name}")
                               for i in range(queues)]
        self.worker_track = self.recorder.track("worker", "issue worker")
        self.adapter = adapter
        self.engine = Engine(self, adapter, pool_capacity)
        self._gc_hold = gc_tuning.hold(self)  # released at close (or when the device is collected)

    def stream_track(self, queue: int) -> int:
        return self._stream_tracks[queue]

    def _host_wait(self, mode, timepoints, timeout) -> None:
        if timeout != 0 and evaluate(mode, timepoints) is False:
            # Drive completions on this thread for a moment (Engine.help) before sleeping on the
            # semaphores; the time it took comes off the timeout.
            start = time.monotonic()
            self.engine.help(lambda: evaluate(mode, timepoints) is not False)
            if timeout is not None:
                timeout = max(0.0, timeout - (time.monotonic() - start))
        blocking_wait(mode, timepoints, timeout)

    def _submit(self, op: QueueOp) -> None:
        self.engine.enqueue(op)

    def _signal_semaphore(self, sem, value: int, cause: str) -> None:
        super()._signal_semaphore(sem, value, cause)
        self.engine.issue()

    def _fail_semaphore(self, sem, error: HalError, cause: str) -> None:
        super()._fail_semaphore(sem, error, cause)
        self.engine.issue()

    def queue_flush(self, *, queue_affinity: int = QUEUE_AFFINITY_ANY) -> None:
        super().queue_flush(queue_affinity=queue_affinity)
        self.engine.issue()

    def _shutdown(self) -> None:
        self.engine.shutdown()
        self._gc_hold()
