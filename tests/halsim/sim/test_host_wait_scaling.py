"""A blocked host wait on N semaphores resolves in O(N) history lookups, not O(N²), with the same
answers: failure dominates in both modes, virtual-time order of reach and failure, timeouts.

(The simulator's ``wait_blocking`` keeps a :class:`~halsim.sim.history.WaitTally` as timepoints fire;
it used to re-resolve the whole list at each fire.)
"""

from __future__ import annotations

import threading

import pytest

from halsim.sim.history import SemaphoreHistory
from reference import hal
from reference.hal import HalError, StatusCode
from tests.conftest import join
from tests.halsim.sim.conftest import ZERO

ALL, ANY = hal.WaitMode.ALL, hal.WaitMode.ANY
N = 300


@pytest.fixture
def lookups(monkeypatch):
    """The number of ``SemaphoreHistory.reached`` calls (one per reached value looked up)."""
    count = [0]
    real = SemaphoreHistory.reached

    def reached(self, sem_id, value):
        count[0] += 1
        return real(self, sem_id, value)
    monkeypatch.setattr(SemaphoreHistory, "reached", reached)
    return count


@pytest.mark.parametrize("uri", ["generic", "cuda"])
def test_all_wait_on_n_semaphores_signalled_one_by_one_looks_each_up_once(uri, lookups, make):
    dev = make(uri, cost_model=ZERO)
    sems = [dev.create_semaphore(0) for _ in range(N)]
    for s in sems:
        dev.queue_barrier([], [(s, 1)])
    lookups[0] = 0
    dev.wait_semaphores(ALL, [(s, 1) for s in sems], 10)
    assert lookups[0] == N  # re-resolving at each fire: N(N+1)/2 = 45150
    assert [s.query() for s in sems] == [1] * N


def test_all_wait_with_most_semaphores_already_signalled_looks_each_up_once(lookups, make):
    dev = make("generic", cost_model=ZERO)
    sems = [dev.create_semaphore(0) for _ in range(N)]
    for s in sems[:-1]:
        s.signal(1)
    dev.queue_barrier([], [(sems[-1], 1)])
    lookups[0] = 0
    dev.wait_semaphores(ALL, [(s, 1) for s in sems], 10)
    assert lookups[0] == N  # the N-1 met ones fire as they register


def _fail_later(dev, sem, seconds):
    def run():
        dev.sleep(seconds)
        sem.fail(StatusCode.DATA_LOSS, "lost")
    t = threading.Thread(target=run)
    t.start()
    return t


def test_all_wait_fails_when_a_reached_member_fails_while_another_is_awaited(make):
    # a reached, then failed at 1 ms; b never signalled: the failure dominates, at its time
    dev = make("generic", cost_model=ZERO)
    a, b = dev.create_semaphore(0), dev.create_semaphore(0)
    a.signal(1)
    t = _fail_later(dev, a, 0.001)
    with pytest.raises(HalError) as e:
        dev.wait_semaphores(ALL, [(a, 1), (b, 1)], 1)
    join(t)
    assert (e.value.code, e.value.message) == (StatusCode.DATA_LOSS, "lost")
    assert dev.now() == 1_000_000 + 0


def test_any_wait_failure_dominates_an_earlier_reach_only_when_earlier(make):
    dev = make("generic", cost_model=ZERO)
    a, b = dev.create_semaphore(0), dev.create_semaphore(0)
    t = _fail_later(dev, b, 0.002)
    dev.sleep(0.001)
    a.signal(1)  # reached at 1 ms, before b fails at 2 ms: the ANY wait is met
    dev.wait_semaphores(ANY, [(a, 1), (b, 1)], 1)
    join(t)
    with pytest.raises(HalError) as e:  # now both: the failure dominates in ANY mode too
        dev.wait_semaphores(ANY, [(a, 1), (b, 1)], 1)
    assert e.value.code == StatusCode.DATA_LOSS


def test_all_wait_times_out_at_its_deadline_with_one_member_unreached(make):
    dev = make("generic", cost_model=ZERO)
    sems = [dev.create_semaphore(0) for _ in range(50)]
    for s in sems[:-1]:
        dev.queue_barrier([], [(s, 1)])
    start = dev.now()
    with pytest.raises(HalError) as e:
        dev.wait_semaphores(ALL, [(s, 1) for s in sems], 0.5)
    assert e.value.code == StatusCode.DEADLINE_EXCEEDED
    assert dev.now() == start + 500_000_000
