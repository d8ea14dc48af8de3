"""QueueHostCallTest: host callbacks ordered on the queue (IREE CTS [H] queue/queue_host_call_test.cc,
C.3.27; classic queue_host_call_test.h, C.1.16). Tag ``host_calls``. ``fn(args, context)`` returns None
(the queue signals), ``StatusCode.DEFERRED`` (fn signals later) or a HalError (the signals fail with it)."""

import threading

import pytest

from reference import hal
from .conftest import FAILURE_VALUE, WAIT, S, expect_error, join, lsig, lwait, sl, spawn

pytestmark = pytest.mark.requires("host_calls")

UINT64_MAX = 2**64 - 1


class Recorder:
    """A callback that counts its calls and keeps the args it received."""

    def __init__(self, result=None):
        self.calls = 0
        self.args = None
        self.result = result

    def __call__(self, args, context):
        self.calls += 1
        self.args = tuple(args)
        return self.result


@pytest.mark.iree("QueueHostCallTest.EnqueueBeforeSignal")
def test_enqueue_before_signal(device):
    call = Recorder()
    w, g = sl(device, [0], [1]), sl(device, [0], [1])
    args = (10, 20, 30, UINT64_MAX)
    started = device.create_semaphore(0)  # "the submitter started", as a HAL wait (virtual-time friendly)

    def submitter():  # may block inside queue_host_call on synchronous devices
        started.signal(1)
        device.queue_host_call(w, g, call, args)

    t = spawn(submitter)
    started.wait(1, WAIT)
    _not_called_while_w_is_unsignaled(device, t, call)
    lsig(w)
    t.finish()
    lwait(device, g)
    assert call.calls == 1
    assert call.args == args


def _not_called_while_w_is_unsignaled(device, submitter, call) -> None:
    """The classic waker: not called, 50 ms later still not called. On an async device the submitter
    has returned from ``queue_host_call`` first, so the call is enqueued when the second look comes (a
    look right after "started" ran before the call was even made, and passed a device ignoring W)."""
    assert call.calls == 0
    device.sleep(0.05)
    if "async_queue" in device.capabilities:
        submitter.finish()
        device.sleep(0.05)
    assert call.calls == 0, "the host call ran before its wait semaphore was signaled"


@pytest.mark.iree("QueueHostCallTest.NoWaitSemaphores")
def test_no_wait_semaphores(device):
    call = Recorder()
    g = sl(device, [0], [1])
    device.queue_host_call([], g, call, (100, 200, 300, 400))
    lwait(device, g)
    assert call.calls == 1
    assert call.args == (100, 200, 300, 400)


@pytest.mark.iree("QueueHostCallTest.NonBlockingFlag")
def test_non_blocking_flag(device):
    w, g, sideband = sl(device, [0], [1]), sl(device, [0], [1]), sl(device, [0], [1])
    seen = {"calls": 0, "signal": None}

    def fn(args, context):
        seen["calls"] += 1
        seen["signal"] = tuple(context.signal)
        lsig(sideband)

    lsig(w)
    device.queue_host_call(w, g, fn, (1, 2, 3, 4), non_blocking=True)
    lwait(device, g)
    lwait(device, sideband)
    assert seen["calls"] == 1
    assert seen["signal"] == ()  # the queue signalled before the call; the callback gets an empty list


@pytest.mark.iree("QueueHostCallTest.AsyncCallback")
def test_async_callback(device):
    w, g = sl(device, [0], [1]), sl(device, [0, 0], [1, 2])
    state = {"calls": 0, "started": False, "completed": False, "thread": None}
    stored = device.create_semaphore(0)  # IREE's promise: fulfilled once the thread handle is stored

    def fn(args, context):
        state["calls"] += 1
        signal = list(context.signal)  # the callback owns signalling: keep its own copy
        assert len(signal) == 2

        def later():
            stored.wait(1, WAIT)
            state["started"] = True
            device.sleep(0.01)
            state["completed"] = True
            lsig(signal)

        state["thread"] = threading.Thread(target=later, daemon=True)
        state["thread"].start()
        stored.signal(1)
        return S.DEFERRED

    lsig(w)
    device.queue_host_call(w, g, fn, (0, 0, 0, 0))
    lwait(device, g)
    join(state["thread"])
    assert state["calls"] == 1
    assert state["started"] and state["completed"]
    assert tuple(s.query() for s, _ in g) == (1, 2)


def _check_failed_with_permission_denied(device, g):
    expect_error(S.PERMISSION_DENIED, lwait, device, g)  # [H]: the callback's code, not ABORTED
    for sem, payload in g:
        expect_error(S.PERMISSION_DENIED, sem.wait, payload, WAIT)
        e = expect_error(S.PERMISSION_DENIED, sem.query)
        assert "test error from callback" in e.message
        assert sem.payload >= FAILURE_VALUE


@pytest.mark.iree("QueueHostCallTest.CallbackReturnsError")
def test_callback_returns_error(device):
    call = Recorder(hal.HalError(S.PERMISSION_DENIED, "test error from callback"))
    w, g = sl(device, [0], [1]), sl(device, [0, 0], [1, 2])
    lsig(w)
    assert device.queue_host_call(w, g, call, (0, 0, 0, 0)) is None  # the call itself succeeds
    _check_failed_with_permission_denied(device, g)
    assert call.calls == 1


@pytest.mark.iree("QueueHostCallTest.CallbackReturnsErrorAfterWait")
def test_callback_returns_error_after_wait(device):
    call = Recorder(hal.HalError(S.PERMISSION_DENIED, "test error from callback"))
    w, g = sl(device, [0], [1]), sl(device, [0, 0], [1, 2])
    started = device.create_semaphore(0)

    def submitter():
        started.signal(1)
        device.queue_host_call(w, g, call, (0, 0, 0, 0))

    t = spawn(submitter)
    started.wait(1, WAIT)
    _not_called_while_w_is_unsignaled(device, t, call)
    lsig(w)
    t.finish()
    _check_failed_with_permission_denied(device, g)
    assert call.calls == 1
