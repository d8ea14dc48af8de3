"""Work the API refuses because an event it waits on failed reports the semaphore failure behind it.

A stand-in adapter fails an event when anything it depends on failed (as PoCL fails commands behind a
failed user event) and refuses to enqueue behind a failed one (``WaitFailed``); its completion thread
is held, so the failed predecessor has not completed (nor failed its semaphores) when the next op is
issued. The op then used to fail with the API's own error; the model (``sim:opencl``) and the other
devices report the failure of the semaphore the chain started from.
"""

from __future__ import annotations

import threading

import pytest

from real_backends.common.device import EngineDevice
from real_backends.common.engine import Adapter, WaitFailed
from reference import hal

WAIT = 10.0


class _Handle:
    def __init__(self, deps=()):
        self.deps = list(deps)
        self.set_failed = False

    @property
    def failed(self) -> bool:
        return self.set_failed or any(d.failed for d in self.deps)


class _Adapter(Adapter):
    personality = "stand-in"
    stream_name = "stream"
    wait_policy = "user_event"
    pooled = False
    inline_issue = True

    def __init__(self):
        self.release = threading.Event()
        self.waits: list = []
        self.tail = None

    def create_user_event(self):
        return _Handle()

    def set_user_event(self, handle, error) -> None:
        handle.set_failed = error is not None

    def stream_wait(self, stream, handle) -> None:
        self.waits.append(handle)

    def submit(self, stream, action) -> None:
        if any(w.failed for w in self.waits):
            self.waits = []
            raise WaitFailed(hal.StatusCode.ABORTED, "stand-in: an event this work waits on failed")

    def record(self, stream, handle):
        self.tail = _Handle(self.waits + ([self.tail] if self.tail is not None else []))
        self.waits = []
        return self.tail

    def synchronize(self, handle, backlog: int = 0):
        assert self.release.wait(WAIT), "the test never released the completion thread"
        return hal.HalError(hal.StatusCode.ABORTED, "stand-in: failed") if handle.failed else None


def test_refused_work_reports_the_semaphore_failure_it_comes_from():
    adapter = _Adapter()
    dev = EngineDevice("stand-in", {}, adapter, queues=1, pool_capacity=None)
    try:
        buf = dev.allocator.allocate_buffer(16)
        g, s, t = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
        dev.queue_fill([(g, 1)], [(s, 1)], buf, 0, 16, 1, 1)   # issued behind a user event for g >= 1
        g.fail(hal.StatusCode.DATA_LOSS, "device lost")         # fails it: the fill fails on the device
        dev.queue_fill([(s, 1)], [(t, 1)], buf, 0, 16, 2, 1)   # waits on the fill's (failed) event
        e = pytest.raises(hal.HalError, t.query).value                # failed at its issue
        assert (e.code, e.message) == (hal.StatusCode.DATA_LOSS, "device lost")
        adapter.release.set()
        e = pytest.raises(hal.HalError, s.wait, 1, timeout=WAIT).value  # the first fill, once completed
        assert (e.code, e.message) == (hal.StatusCode.DATA_LOSS, "device lost")
    finally:
        adapter.release.set()
        dev.close()
