"""The engine issues ready actions in the order its scans found them, whichever threads scan.

A scan (``Engine.issue``) runs on every thread that submits, signals or completes. Two threads'
scans used to take their ready actions under the engine's lock but hand them over to the issuer
after releasing it, so a later action could be issued before an earlier one. On an in-order queue
that is a hang when the earlier action signals what the later one waits for (OpenCL: a user event
set only when the earlier action completes, behind the later one on the queue).
"""

from __future__ import annotations

import sys
import threading

import pytest

from real_backends.common.device import EngineDevice
from real_backends.common.engine import Adapter
from reference import hal

WAIT = 30.0


class _Handle:
    reached = True


class _Adapter(Adapter):
    """Records the ops in the order they are submitted; every event is reached at once."""

    personality = "stand-in"
    stream_name = "stream"
    wait_policy = "user_event"
    pooled = False

    def __init__(self, inline_issue: bool):
        self.inline_issue = inline_issue
        self.submitted: list[str] = []

    def create_user_event(self):
        return _Handle()

    def set_user_event(self, handle, error) -> None:
        pass

    def stream_wait(self, stream, handle) -> None:
        pass

    def submit(self, stream, action) -> None:
        self.submitted.append(action.op.id)

    def record(self, stream, handle):
        return _Handle()

    def query(self, handle):
        return True

    def synchronize(self, handle, backlog: int = 0):
        return None


@pytest.fixture
def fast_switching():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # a GIL hand-off between almost any two bytecodes: races show up
    yield
    sys.setswitchinterval(old)


@pytest.mark.parametrize("inline_issue", [True, False], ids=["inline-issue", "worker-issues"])
def test_actions_are_issued_in_submission_order_while_other_threads_scan(inline_issue, fast_switching):
    adapter = _Adapter(inline_issue)
    dev = EngineDevice("stand-in", {}, adapter, queues=1, pool_capacity=None)
    try:
        buf = dev.allocator.allocate_buffer(64)
        s, other = dev.create_semaphore(), dev.create_semaphore()
        stop = threading.Event()

        def signaller():  # every host signal scans (Engine.issue) on this thread
            v = 0
            while not stop.is_set():
                v += 1
                other.signal(v)

        thread = threading.Thread(target=signaller)
        thread.start()
        n = 9000  # the old code issued out of order in about half the runs of 3000
        try:
            for i in range(n):
                dev.queue_fill([(s, i)], [(s, i + 1)], buf, 0, 64, i & 0xFF, 1)
        finally:
            stop.set()
            thread.join(WAIT)
        s.wait(n, timeout=WAIT)  # out of order, a completion signals past a value not yet signalled: fails
        assert s.query() == n
        assert adapter.submitted == [f"0:{i}" for i in range(n)]
    finally:
        dev.close()
