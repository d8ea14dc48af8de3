"""A queue op whose first wait is unmet and whose second wait's semaphore has failed.

What each device does follows the IREE driver it models (docs/hal-contract.md, "failed waits"):

* ``local-task`` and ``sim`` — IREE local-task [H] (``task_queue.c``): the call scans the wait list in
  order up to the first unmet wait (``iree_hal_task_queue_try_satisfy_waits``); a failed semaphore met
  first fails the op's signals and is raised by the call. Otherwise every wait gets a timepoint and the
  op resolves when the *last* one resolves, failed or not (``iree_hal_task_queue_wait_resolved``): it
  stays pending until ``a`` is reached, then fails with ``b``'s failure. ``iree.runtime`` 3.13 does so.
* ``sim:metal`` — the wait command buffer's ``encodeWaitForEvent`` passes a failed event (it holds
  FAILURE_VALUE), so the queue stalls until every wait is reached or failed, whatever the order.
* ``sim:cuda`` — ``deferred_work_queue.c`` ``issue()``: per wait, in list order, a failed one fails the
  action, an unresolved one leaves it pending (the scan stops there).
* ``sim:opencl`` and ``opencl`` (PoCL) — a command fails as soon as an event of its wait list failed,
  whatever the others still wait for: the op's signals fail at once in every case.
* ``local-sync``, ``sim:sync``, ``sim:metal?legacy_sync=1`` — the call blocks in a wait-all that a
  failure ends at once: it raises the failure, nothing is signaled.
"""

from __future__ import annotations

import threading

import pytest

from reference import hal
from tests.conftest import WAIT, join

S = hal.StatusCode
CODE, MESSAGE = S.DATA_LOSS, "b failed"
PENDING, FAILED, RAISED, OK = "pending", "failed", "raised", "OK"

# case → (wait order, b failed before the submit)
CASES = {
    "a_unmet_b_failed_before": ("ab", True),
    "a_unmet_b_failed_after": ("ab", False),
    "b_failed_before_a_unmet": ("ba", True),
    "b_failed_after_a_unmet": ("ba", False),
}

# device → case → (the queue call, the signal semaphore before a = 1, after a = 1)
LOCAL_TASK = {
    "a_unmet_b_failed_before": (OK, PENDING, FAILED),
    "a_unmet_b_failed_after": (OK, PENDING, FAILED),
    "b_failed_before_a_unmet": (RAISED, FAILED, FAILED),
    "b_failed_after_a_unmet": (OK, PENDING, FAILED),
}
EXPECTED = {
    "local-task": LOCAL_TASK,
    "sim": LOCAL_TASK,
    "sim:metal": {case: (OK, PENDING, FAILED) for case in CASES},
    "sim:cuda": {
        "a_unmet_b_failed_before": (OK, PENDING, FAILED),   # the scan stops at a, never sees b
        "a_unmet_b_failed_after": (OK, PENDING, FAILED),
        "b_failed_before_a_unmet": (OK, FAILED, FAILED),    # b comes first: the action fails
        "b_failed_after_a_unmet": (OK, FAILED, FAILED),     # b's failure re-runs the scan
    },
    # PoCL fails a command as soon as an event of its wait list failed (the opencl backend, 3 runs
    # stable); the model's stream stops waiting for a's user event when b's fails
    "sim:opencl": {case: (OK, FAILED, FAILED) for case in CASES},
    "opencl": {case: (OK, FAILED, FAILED) for case in CASES},
}


def _state(sem, timeout: float):
    """PENDING (timed out), FAILED (with our failure), or the raised status, after waiting ``timeout``."""
    try:
        sem.wait(1, timeout)
    except hal.HalError as e:
        if e.code == S.DEADLINE_EXCEEDED:
            return PENDING
        assert (e.code, e.message) == (CODE, MESSAGE)
        return FAILED
    return OK


def run_case(dev, case: str):
    order, fail_before = CASES[case]
    a, b, c = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    if fail_before:
        b.fail(CODE, MESSAGE)
    waits = [(a, 1), (b, 1)] if order == "ab" else [(b, 1), (a, 1)]
    try:
        dev.queue_barrier(waits, [(c, 1)])
        call = OK
    except hal.HalError as e:
        assert (e.code, e.message) == (CODE, MESSAGE)
        call = RAISED
    if not fail_before:
        b.fail(CODE, MESSAGE)
    before = _state(c, 0.001)  # (virtual time on sim devices; on local-task nothing is racing)
    a.signal(1)
    after = _state(c, WAIT)
    return call, before, after


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("uri", EXPECTED)
def test_first_wait_unmet_second_failed(uri, case):
    with hal.create_device(uri) as dev:
        assert run_case(dev, case) == EXPECTED[uri][case]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("uri", ["local-sync", "sim:sync", "sim:metal?legacy_sync=1"])
def test_blocking_queue_call_raises_the_failure_at_once(uri, case):
    """The call blocks in a wait-all ([H] local-sync ``queue_op_begin``: ``list_wait``) that a failed
    member ends at once, whatever the order and whether ``a`` is ever reached; nothing is signaled."""
    order, fail_before = CASES[case]
    with hal.create_device(uri) as dev:
        a, b, c = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
        waits = [(a, 1), (b, 1)] if order == "ab" else [(b, 1), (a, 1)]
        if fail_before:
            b.fail(CODE, MESSAGE)
        raised = []

        def submit():
            with pytest.raises(hal.HalError) as ei:
                dev.queue_barrier(waits, [(c, 1)])
            raised.append((ei.value.code, ei.value.message))

        t = threading.Thread(target=submit)
        t.start()
        if not fail_before:
            dev.sleep(0.001)  # (virtual on sim:*) the call is blocked by now, or fails at once anyway
            b.fail(CODE, MESSAGE)
        join(t)  # a is never signaled: the failure alone ends the call
        assert raised == [(CODE, MESSAGE)]
        assert c.query() == 0


@pytest.mark.parametrize("uri", ["sim", "sim:metal"])
def test_the_op_fails_when_its_last_wait_is_met(uri):
    """In virtual time: the failure is seen at 1 µs, the op resolves (failed) at a's signal, 1 ms later."""
    with hal.create_device(uri) as dev:
        a, b, c = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
        dev.queue_barrier([(a, 1), (b, 1)], [(c, 1)])
        dev.sleep(0.000001)
        b.fail(CODE, MESSAGE)
        dev.sleep(0.001)
        t_signal = dev.now()
        a.signal(1)
        assert _state(c, WAIT) == FAILED
        (op,) = dev.trace.operations()
        assert op["status"] == CODE
        assert op["ready"] == t_signal + dev.cost.host_api_ns  # the signal's time: no earlier


def _iree_case(rt, device, case: str):
    """The same program on iree.runtime's local-task (its fail() takes a message: code UNKNOWN)."""
    order, fail_before = CASES[case]
    a, b, c = (device.create_semaphore(0) for _ in range(3))
    if fail_before:
        b.fail(MESSAGE)
    waits = [(a, 1), (b, 1)] if order == "ab" else [(b, 1), (a, 1)]

    def state(timeout_s: float):
        try:
            return OK if c.wait(1, timeout=int(timeout_s * 1e9)) else PENDING
        except Exception as e:  # noqa: BLE001 - iree.runtime raises RuntimeError/ValueError
            assert f"UNKNOWN; {MESSAGE}" in str(e)
            return FAILED

    cb = rt.HalCommandBuffer(device)
    cb.end()
    try:
        device.queue_execute(cb, waits, [(c, 1)])
        call = OK
    except Exception as e:  # noqa: BLE001
        assert f"UNKNOWN; {MESSAGE}" in str(e)
        call = RAISED
    if not fail_before:
        b.fail(MESSAGE)
    before = state(0.05)  # pending is no race in IREE: nothing resolves the op before a is reached
    a.signal(1)
    return call, before, state(WAIT)


@pytest.mark.parametrize("case", CASES)
def test_sim_and_local_task_agree_with_iree_local_task(case):
    rt = pytest.importorskip("iree.runtime")
    iree = _iree_case(rt, rt.get_device("local-task"), case)
    assert iree == LOCAL_TASK[case]
    for uri in ("sim", "local-task"):
        with hal.create_device(uri) as dev:
            assert run_case(dev, case) == iree, uri


def test_sim_opencl_watches_each_pending_event_once(monkeypatch):
    """The stream watches the head action's pending events for a failure once per action (it added a
    watcher per later event at every event it blocked on: 40 host-signalled waits cost 780 calls)."""
    from halsim.sim.stream_gpu import StreamExecution

    calls = []
    watch = StreamExecution._stream_event_failed
    monkeypatch.setattr(StreamExecution, "_stream_event_failed", lambda *a: calls.append(1) or watch(*a))
    with hal.create_device("sim:opencl") as dev:
        sems = [dev.create_semaphore() for _ in range(40)]
        out = dev.create_semaphore()
        dev.queue_barrier([(s, 1) for s in sems], [(out, 1)])
        for s in sems:
            s.signal(1)
        out.wait(1, WAIT)
    assert len(calls) == 40
