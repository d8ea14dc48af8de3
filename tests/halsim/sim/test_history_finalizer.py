"""A simulated device forgets a semaphore's history when the host drops the semaphore, through the one
finalizer every device puts on it (``Device._watch``, which traces ``host_release``): no second one."""

import weakref

import pytest

from reference import hal
from reference.hal import StatusCode

SIMS = ["sim", "sim:metal", "sim:cuda", "sim:opencl", "sim:sync"]


def _finalizers(obj) -> int:
    return sum(1 for f in list(weakref.finalize._registry) if (info := f.peek()) is not None and info[0] is obj)


@pytest.mark.parametrize("uri", SIMS)
def test_one_finalizer_per_semaphore_and_its_history_goes_with_it(uri, no_gc):
    dev = hal.create_device(uri)
    a, b = dev.create_semaphore(), dev.create_semaphore()
    a.signal(1)
    b.fail(StatusCode.ABORTED, "x")
    ids = (a.id, b.id)
    assert (_finalizers(a), _finalizers(b)) == (1, 1)
    assert (set(dev.history._signals), set(dev.history._failed)) == ({a.id}, {b.id})
    del a, b
    assert (dev.history._signals, dev.history._failed) == ({}, {})
    assert [e["res"] for e in dev.trace if e["ev"] == "host_release"] == list(ids)
    dev.close()


def test_a_semaphore_dropped_after_close_is_forgotten_too(no_gc):
    dev = hal.create_device("sim")
    s = dev.create_semaphore()
    s.signal(3)
    dev.close()
    sid = s.id
    del s
    assert dev.history._signals == {}
    assert [e["res"] for e in dev.trace if e["ev"] == "host_release"] == [sid]
