"""Once the queue status is sticky (a failed wait, a device error), an action already issued — in
flight on the device — fails its signals with that status when its completion runs: IREE [H]
``deferred_work_queue.c`` ``process_completion`` hands each completion callback the queue's status,
and ``execution_device_signal_host_callback`` fails the action's signal list when it is not OK
(HAL_SEMANTICS B.3 names only pending and later actions; IREE's source decides the in-flight ones).
The same in the model (``sim:cuda``, ``sim:opencl``) and the real engine (``opencl``, ``cuda``)."""

from __future__ import annotations

import pytest

from reference import hal
from tests.conftest import WAIT, open_device

S = hal.StatusCode


def _expect_failed(sem, value=1):
    with pytest.raises(hal.HalError) as ei:
        sem.wait(value, WAIT)
    return ei.value.code, ei.value.message


@pytest.mark.parametrize("uri", ["sim:opencl?queues=2", "opencl?queues=2"])
def test_an_action_stalled_on_a_user_event_fails_once_the_queue_is_sticky(uri):
    """OpenCL issues at once: A stalls its in-order queue on h's user event. B's failed wait makes
    the status sticky; when the host then sets h, A runs and its completion fails ``a``."""
    dev = open_device(uri)
    try:
        h, g, a, b = (dev.create_semaphore() for _ in range(4))
        buf = dev.allocator.allocate_buffer(64)
        dev.queue_fill([(h, 1)], [(a, 1)], buf, 0, 64, 7, 1, queue_affinity=1)
        dev.queue_barrier([(g, 1)], [(b, 1)], queue_affinity=2)
        g.fail(S.ABORTED, "gate")
        assert _expect_failed(b) == (S.ABORTED, "gate")
        h.signal(1)
        assert _expect_failed(a) == (S.ABORTED, "gate")
        assert [e["status"] for e in dev.trace.events("op_done") if e["op"] == "0:0"] == [0]  # it ran
    finally:
        dev.close()


def test_a_long_fill_in_flight_on_sim_cuda_fails_once_the_queue_is_sticky():
    """sim:cuda: A (no waits) is issued and runs for 64 MiB; B's wait fails meanwhile (sticky): A's
    callback fails ``a``; a host call issued before the failure is not called."""
    dev = hal.create_device("sim:cuda", queues=2)
    try:
        g, a, b, c = (dev.create_semaphore() for _ in range(4))
        buf = dev.allocator.allocate_buffer(64 << 20)
        called = []
        dev.queue_fill([], [(a, 1)], buf, 0, 64 << 20, 7, 1, queue_affinity=1)
        dev.queue_host_call([(a, 1)], [(c, 1)], lambda args, ctx: called.append(1), queue_affinity=1)
        dev.queue_barrier([(g, 1)], [(b, 1)], queue_affinity=2)
        g.fail(S.ABORTED, "gate")
        assert _expect_failed(b) == (S.ABORTED, "gate")
        assert _expect_failed(a) == (S.ABORTED, "gate")
        assert _expect_failed(c) == (S.ABORTED, "gate")
        assert called == []
        done = {e["op"]: e["status"] for e in dev.trace.events("op_done")}
        assert done["0:0"] == 0 and done["0:1"] == S.ABORTED.value  # the fill ran; the host call did not
    finally:
        dev.close()


def test_the_checks_know_a_sticky_completion_signals_nothing():
    """X (a long fill) signals s=1 and Y (another), behind it on its stream, s=2; a gate failure on the other
    queue makes the status sticky meanwhile. X's completion fails s; Y then completes and fails its
    list too: no signal of Y was lost to s's failure (semaphore.signal_after_failure stays quiet), and
    the host's wait sees the gate's failure."""
    from halsim.checks import check_trace

    dev = hal.create_device("sim:cuda", queues=2)
    try:
        g, s, b = (dev.create_semaphore() for _ in range(3))
        buf = dev.allocator.allocate_buffer(64 << 20)
        dev.queue_fill([], [(s, 1)], buf, 0, 64 << 20, 7, 1, queue_affinity=1)
        dev.queue_fill([(s, 1)], [(s, 2)], buf, 0, 64 << 20, 9, 1, queue_affinity=1)  # ends after X's callback
        dev.queue_barrier([(g, 1)], [(b, 1)], queue_affinity=2)
        dev.sleep(1e-4)      # X's issue recorded its event for s=1 ...
        dev.queue_flush()    # ... which this scan finds: Y is issued behind X (not pending)
        g.fail(S.ABORTED, "gate")
        assert _expect_failed(s, 2) == (S.ABORTED, "gate")
        dev.sleep(1.0)       # (Y completes)
        done = {e["op"]: e["status"] for e in dev.trace.events("op_done")}
        assert done == {"0:0": 0, "0:1": 0, "0:2": S.ABORTED.value}
        assert [(f.rule, f.ops) for f in check_trace(dev.trace).findings] == []
    finally:
        dev.close()


def test_a_host_calls_failed_wait_makes_the_status_sticky_for_the_checks_too():
    """As above with a host call as the gate: its failed wait (not its function's own error) made the
    queue sticky, so the checks keep quiet about the completions that followed."""
    from halsim.checks import check_trace

    dev = hal.create_device("sim:cuda", queues=2)
    try:
        g, s, b = (dev.create_semaphore() for _ in range(3))
        buf = dev.allocator.allocate_buffer(64 << 20)
        dev.queue_fill([], [(s, 1)], buf, 0, 64 << 20, 7, 1, queue_affinity=1)
        dev.queue_fill([(s, 1)], [(s, 2)], buf, 0, 64 << 20, 9, 1, queue_affinity=1)
        dev.queue_host_call([(g, 1)], [(b, 1)], lambda args, ctx: None, queue_affinity=2)
        dev.sleep(1e-4)
        dev.queue_flush()
        g.fail(S.ABORTED, "gate")
        assert _expect_failed(s, 2) == (S.ABORTED, "gate")
        dev.sleep(1.0)
        assert [(f.rule, f.ops) for f in check_trace(dev.trace).findings] == []
    finally:
        dev.close()
