"""SemaphoreTest: single-threaded timeline-semaphore rules (IREE CTS [H] core/semaphore_test.cc, C.3.1;
classic semaphore_test.h, C.1.1). Profile [H]: a wait on a failed semaphore raises the failure's own code."""

import pytest

from .conftest import ALL, ANY, FAILURE_VALUE, WAIT, S, expect_error


@pytest.mark.iree("SemaphoreTest.NoOp")
def test_no_op(device):
    s = device.create_semaphore(123)
    assert s.query() == 123
    assert s.payload == 123
    assert s.failure is None


@pytest.mark.iree("SemaphoreTest.NormalSignaling")
def test_normal_signaling(device):
    s = device.create_semaphore(2)
    assert s.query() == 2
    s.signal(3)
    assert s.query() == 3
    s.signal(40)
    assert s.query() == 40


@pytest.mark.iree("SemaphoreTest.Failure")
def test_failure(device):
    s = device.create_semaphore(2)
    s.signal(3)
    assert s.query() == 3
    s.fail(S.UNKNOWN)
    expect_error(S.UNKNOWN, s.query)
    assert s.payload >= FAILURE_VALUE


@pytest.mark.iree("SemaphoreTest.EmptyWait")
def test_empty_wait(device):
    # IREE waits with an infinite deadline and an infinite relative timeout; both are bounded here.
    # An empty list is satisfied at once for either mode and any timeout (HAL_SEMANTICS L6).
    for mode in (ANY, ALL):
        for timeout in (WAIT, 0):
            assert device.wait_semaphores(mode, [], timeout) is None


@pytest.mark.iree("SemaphoreTest.WaitAlreadySignaled")
def test_wait_already_signaled(device):
    s = device.create_semaphore(2)
    for value in (1, 2, 1, 2):
        assert s.wait(value, WAIT) is None
    for value in (0, 1, 2):  # already reached: satisfied even by an immediate timeout
        assert s.wait(value, 0) is None
    assert s.query() == 2  # waiting never changes the value


@pytest.mark.iree("SemaphoreTest.WaitUnsignaled")
def test_wait_unsignaled(device):
    s = device.create_semaphore(2)
    expect_error(S.DEADLINE_EXCEEDED, s.wait, 3, 0)
    assert s.query() == 2


@pytest.mark.iree("SemaphoreTest.WaitAllButNotAllSignaled")
def test_wait_all_but_not_all_signaled(device):
    a = device.create_semaphore(0)
    b = device.create_semaphore(1)
    expect_error(S.DEADLINE_EXCEEDED, device.wait_semaphores, ALL, [(a, 1), (b, 1)], 0)
    assert (a.query(), b.query()) == (0, 1)


@pytest.mark.iree("SemaphoreTest.WaitAllAndAllSignaled")
def test_wait_all_and_all_signaled(device):
    a = device.create_semaphore(1)
    b = device.create_semaphore(1)
    assert device.wait_semaphores(ALL, [(a, 1), (b, 1)], WAIT) is None


@pytest.mark.iree("SemaphoreTest.WaitAnyAlreadySignaled")
def test_wait_any_already_signaled(device):
    a = device.create_semaphore(0)
    b = device.create_semaphore(1)
    assert device.wait_semaphores(ANY, [(a, 1), (b, 1)], WAIT) is None
    assert (a.query(), b.query()) == (0, 1)


@pytest.mark.iree("SemaphoreTest.FailThenWait")
def test_fail_then_wait(device):
    s = device.create_semaphore(0)
    s.fail(S.CANCELLED, "FailThenWait test.")
    expect_error(S.CANCELLED, s.wait, 1, WAIT)
    e = expect_error(S.CANCELLED, s.query)
    assert "FailThenWait test." in e.message  # the query returns the stored status (S5)
    assert s.payload >= FAILURE_VALUE


@pytest.mark.iree("SemaphoreTest.FailurePreservesStatusCode")
def test_failure_preserves_status_code(device):
    s = device.create_semaphore(0)
    s.fail(S.DATA_LOSS, "device fault")
    expect_error(S.DATA_LOSS, s.query)
    assert s.payload >= FAILURE_VALUE


@pytest.mark.iree("SemaphoreTest.DoubleFailurePreservesFirst")
def test_double_failure_preserves_first(device):
    s = device.create_semaphore(0)
    s.fail(S.DATA_LOSS, "first failure")
    s.fail(S.CANCELLED, "second failure")  # ignored, must not raise
    e = expect_error(S.DATA_LOSS, s.query)
    assert e.message == "first failure"
    assert s.payload >= FAILURE_VALUE
