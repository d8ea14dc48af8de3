"""Semaphore rules beyond the CTS (HAL_SEMANTICS §A.2 S6–S9, §A.3 L6; profile [H])."""

import pytest

from reference import hal

S = hal.StatusCode
ALL, ANY = hal.WaitMode.ALL, hal.WaitMode.ANY


def err(fn, *args):
    with pytest.raises(hal.HalError) as ei:
        fn(*args)
    return ei.value


def test_signal_must_strictly_increase(ref_device):
    s = ref_device.create_semaphore(5)
    for v in (5, 4, 0):
        e = err(s.signal, v)
        assert e.code == S.INVALID_ARGUMENT and "already signaled past" in e.message
    assert s.query() == 5


def test_signal_after_fail_raises_the_stored_failure_and_stays_failed(ref_device):
    s = ref_device.create_semaphore()
    s.fail(S.DATA_LOSS, "first failure")
    s.fail(S.CANCELLED, "second failure")  # ignored: first wins
    e = err(s.signal, 10)
    assert (e.code, e.message) == (S.DATA_LOSS, "first failure")
    e = err(s.query)
    assert (e.code, e.message) == (S.DATA_LOSS, "first failure")
    assert s.payload == hal.SEMAPHORE_FAILURE_VALUE


@pytest.mark.parametrize("code", [S.OK, S.DEFERRED, 99, "x"])
def test_fail_needs_a_failure_code(ref_device, code):
    s = ref_device.create_semaphore()
    assert err(s.fail, code).code == S.INVALID_ARGUMENT
    assert s.failure is None


@pytest.mark.parametrize("value", [-1, hal.MAX_SEMAPHORE_VALUE + 1, 1.5, True, None])
def test_values_outside_the_range_are_rejected(ref_device, value):
    s = ref_device.create_semaphore()
    assert err(s.signal, value).code == S.INVALID_ARGUMENT
    assert err(ref_device.create_semaphore, value).code == S.INVALID_ARGUMENT
    assert err(s.wait, value, 0).code == S.INVALID_ARGUMENT


def test_signal_to_max_value_is_allowed(ref_device):
    s = ref_device.create_semaphore()
    s.signal(hal.MAX_SEMAPHORE_VALUE)
    assert s.query() == hal.MAX_SEMAPHORE_VALUE


@pytest.mark.parametrize("timeout", [-1, float("nan"), "1", True])
def test_bad_timeouts(ref_device, timeout):
    s = ref_device.create_semaphore()
    e = err(s.wait, 1, timeout)
    assert e.code == S.INVALID_ARGUMENT and "timeout" in e.message


def test_wait_order_failed_then_reached_then_deadline(ref_device):
    s = ref_device.create_semaphore(3)
    s.wait(3, 0)
    s.wait(0, 0)
    e = err(s.wait, 4, 0)
    assert e.code == S.DEADLINE_EXCEEDED and f"{s.id}>=4" in e.message
    assert err(s.wait, 4, 0.001).code == S.DEADLINE_EXCEEDED
    s.fail(S.CANCELLED, "gone")
    assert err(s.wait, 0, 0).code == S.CANCELLED  # failure checked before the value


def test_multi_wait_failure_dominates_in_both_modes(ref_device):
    a, b = ref_device.create_semaphore(1), ref_device.create_semaphore()
    ref_device.wait_semaphores(ANY, [(a, 1), (b, 1)], 0)
    b.fail(S.ABORTED, "b broke")
    for mode in (ALL, ANY):
        e = err(ref_device.wait_semaphores, mode, [(a, 1), (b, 1)], 0)
        assert (e.code, e.message) == (S.ABORTED, "b broke")
    assert a.query() == 1  # failing one semaphore never changes another


def test_empty_waits_succeed_for_any_timeout(ref_device):
    for mode in (ALL, ANY):
        for timeout in (None, 0, 1.0):
            ref_device.wait_semaphores(mode, [], timeout)
    assert err(ref_device.wait_semaphores, 7, [], 0).code == S.INVALID_ARGUMENT


def test_host_waits_are_traced(ref_device):
    s = ref_device.create_semaphore()
    err(s.wait, 1, 0)
    s.signal(1)
    s.wait(1, 0)
    waits = [(e["wait"], e["status"]) for e in ref_device.trace.events("host_wait")]
    assert waits == [([[s.id, 1]], int(S.DEADLINE_EXCEEDED)), ([[s.id, 1]], 0)]
    sig = [e for e in ref_device.trace.events("signal")]
    assert [(e["sem"], e["value"], e["cause"]) for e in sig] == [(s.id, 1, "host:0")]
