"""SemaphoreThreadTest: semaphore waits racing host threads (IREE CTS [H] core/semaphore_thread_test.cc,
C.3.2; in the classic CTS these were SemaphoreTest cases, C.1.1). Profile [H]: failed waits raise the
failure's own code (CANCELLED here), never ABORTED."""

import pytest

from .conftest import ALL, ANY, FAILURE_VALUE, WAIT, S, expect_error, lsig, lwait, spawn


@pytest.mark.iree("SemaphoreThreadTest.WaitLaterSignaledBeyond", "SemaphoreTest.WaitLaterSignaledBeyond")
def test_wait_later_signaled_beyond(device):
    s = device.create_semaphore(2)

    def signaler():
        device.sleep(0.1)
        s.signal(10)

    t = spawn(signaler)
    s.wait(3, WAIT)
    t.finish()
    assert s.query() == 10


@pytest.mark.iree("SemaphoreThreadTest.WaitAnyLaterSignaled", "SemaphoreTest.WaitAnyLaterSignaled")
def test_wait_any_later_signaled(device):
    a = device.create_semaphore(0)
    b = device.create_semaphore(0)

    def signaler():
        device.sleep(0.1)
        b.signal(1)

    t = spawn(signaler)
    device.wait_semaphores(ANY, [(a, 1), (b, 1)], WAIT)
    t.finish()
    assert (a.query(), b.query()) == (0, 1)


@pytest.mark.iree("SemaphoreThreadTest.PingPong", "SemaphoreTest.PingPong")
def test_ping_pong(device):
    a2b = device.create_semaphore(0)
    b2a = device.create_semaphore(0)

    def other():
        a2b.wait(0, 0)  # value 0 is reached already: OK at once
        b2a.signal(1)
        a2b.wait(4, WAIT)

    t = spawn(other)
    b2a.wait(1, WAIT)
    a2b.signal(4)
    t.finish()
    assert (a2b.query(), b2a.query()) == (4, 1)


@pytest.mark.iree("SemaphoreThreadTest.WaitOnTheSameValueMultipleTimes",
                  "SemaphoreTest.WaitOnTheSameValueMultipleTimes")
def test_wait_on_the_same_value_multiple_times(device):
    s = device.create_semaphore(0)
    t = spawn(s.signal, 1)
    s.wait(1, WAIT)
    assert s.query() == 1
    s.wait(1, WAIT)
    assert s.query() == 1
    t.finish()


# IREE's three wait functions: immediate (T0), absolute deadline now+1ns (Tabs1), relative 1 ns (Trel1).
# In seconds the last two are the same tiny real timeout.
_FINITE_WAITS = {"T0": 0, "Tabs1": 1e-9, "Trel1": 1e-9}


@pytest.mark.iree("SemaphoreThreadTest.WaitForFiniteTime", "SemaphoreTest.WaitForFiniteTime")
def test_wait_for_finite_time(device):
    for name, timeout in _FINITE_WAITS.items():
        s = device.create_semaphore(0)
        expect_error(S.DEADLINE_EXCEEDED, s.wait, 1, timeout)
        assert s.query() == 0, name
        t = spawn(s.signal, 1)
        for _ in range(100_000):  # safety bound only: the loop ends once the signal lands
            try:
                s.wait(1, timeout)
                break  # exactly OK
            except Exception as e:  # noqa: BLE001 - anything but DEADLINE_EXCEEDED fails below
                assert getattr(e, "code", None) == S.DEADLINE_EXCEEDED, f"{name}: {e!r}"
            device.sleep(1e-4)  # let the signaler run (virtual-time devices advance here)
        else:
            pytest.fail(f"{name}: the signal never became visible")
        assert s.query() == 1, name
        t.finish()


@pytest.mark.iree("SemaphoreThreadTest.SimultaneousMultiWaitAll", "SemaphoreTest.SimultaneousMultiWaitAll")
def test_simultaneous_multi_wait_all(device):
    s1 = device.create_semaphore(0)
    s2 = device.create_semaphore(0)
    timepoints = [(s1, 1), (s2, 1)]
    waiters = [spawn(lwait, device, timepoints) for _ in range(2)]
    signaler = spawn(lsig, timepoints)
    for t in waiters + [signaler]:
        assert t.finish() is None
    assert (s1.query(), s2.query()) == (1, 1)


@pytest.mark.iree("SemaphoreThreadTest.WaitThenFail", "SemaphoreTest.WaitThenFail")
def test_wait_then_fail(device):
    s = device.create_semaphore(0)
    t = spawn(s.fail, S.CANCELLED, "WaitThenFail test.")
    expect_error(S.CANCELLED, s.wait, 1, WAIT)
    t.finish()
    e = expect_error(S.CANCELLED, s.query)
    assert "WaitThenFail test." in e.message
    assert s.payload >= FAILURE_VALUE


@pytest.mark.iree("SemaphoreThreadTest.MultiWaitThenFail", "SemaphoreTest.MultiWaitThenFail")
def test_multi_wait_then_fail(device):
    s1 = device.create_semaphore(0)
    s2 = device.create_semaphore(0)
    t = spawn(s1.fail, S.CANCELLED, "MultiWaitThenFail test.")
    # multi-wait returns the actual failure code, even though s2 is not satisfied.
    expect_error(S.CANCELLED, device.wait_semaphores, ALL, [(s1, 1), (s2, 1)], WAIT)
    t.finish()
    e = expect_error(S.CANCELLED, s1.query)
    assert "MultiWaitThenFail test." in e.message
    assert s1.payload >= FAILURE_VALUE
    assert s2.query() == 0  # failing one semaphore never changes another


@pytest.mark.iree("SemaphoreThreadTest.DeviceMultiWaitThenFail", "SemaphoreTest.DeviceMultiWaitThenFail")
def test_device_multi_wait_then_fail(device):
    s1 = device.create_semaphore(0)
    s2 = device.create_semaphore(0)
    t = spawn(s1.fail, S.CANCELLED, "DeviceMultiWaitThenFail test.")
    expect_error(S.CANCELLED, device.wait_semaphores, ANY, [(s1, 1), (s2, 1)], WAIT)
    t.finish()
    e = expect_error(S.CANCELLED, s1.query)
    assert "DeviceMultiWaitThenFail test." in e.message
    assert s1.payload >= FAILURE_VALUE
    assert s2.query() == 0
