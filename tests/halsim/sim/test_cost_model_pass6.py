"""The timing model against its documentation (docs/cost-model.md, docs/sim-cuda.md): exact times."""

from __future__ import annotations

import pytest

from reference import hal
from tests.conftest import WAIT


@pytest.mark.parametrize("uri, options, cost, issue_end, signaled", [
    # 4 signals, no pool: commit 2000 + 4 x (record 500 + create 5000) from the issue's start at 3500
    ("sim:cuda", {"event_pool_capacity": 0}, {}, 27_500, 27_500 + 8_000),
    ("sim:opencl", {}, {"event_create_ns": 10_000}, 45_500, 45_500 + 8_000),
])
def test_a_completion_never_comes_before_its_issue_ended(uri, options, cost, issue_end, signaled):
    """The stream may run the work while the issue still creates and records the signal events, but
    the host function / event callback is enqueued after them (IREE ``issue_execution``): the
    semaphores are signalled host_fn_ns after the issue's end, not after the stream's."""
    dev = hal.create_device(uri, cost_model=cost, **options)
    try:
        sems = [dev.create_semaphore() for _ in range(4)]
        dev.queue_barrier([], [(s, 1) for s in sems])
        sems[0].wait(1, WAIT)
        (issue,) = dev.trace.events("issue")
        assert issue["t"] == issue_end
        assert sorted({e["t"] for e in dev.trace.events("signal")}) == [signaled]
    finally:
        dev.close()
