"""The fitter against the model it fits: a program run on ``sim:opencl`` with a known cost model gives
that model back (inline issue, launch before the markers, one queue at a time, the completion path)."""

import numpy as np
import pytest

from halsim.calibrate import Samples, fit, fit_samples
from reference import hal
from tests.conftest import WAIT

TRUE = {"host_api_ns": 100, "submit_ns": 7000, "wake_ns": 900, "launch_ns": 1500, "commit_ns": 3000,
        "dispatch_commit_ns": 4000, "event_record_ns": 0, "event_wait_ns": 600, "event_create_ns": 1100,
        "host_fn_ns": 2500, "event_destroy_ns": 0,  # (not fitted: it keeps the callback path busy after a signal)
        "fill_latency_ns": 800, "fill_gb_per_s": 2.0,
        "kernels": {"spin": {"base_ns": 500, "per_workgroup_ns": 30, "per_unit_ns": 2, "unit_constant": 0}}}


def program(dev):
    """Gated chains on two queues (they contend when the device runs one at a time), then round trips."""
    exe = dev.load_executable()
    buf = dev.allocator.allocate_buffer(1 << 16)
    gate, side = dev.create_semaphore(), dev.create_semaphore()
    chains = [dev.create_semaphore(), dev.create_semaphore()]
    for k in range(6):
        for q, sem in enumerate(chains):
            wait = [(gate, 1)] if k == 0 else [(sem, k)]
            signal = [(sem, k + 1)] + ([(side, 2 * k + q + 1)] if k % 2 else [])
            if k % 3 == 2:
                dev.queue_dispatch(wait, signal, exe, "spin", (1 + k, 1, 1), (1000 * k,),
                                   (hal.BufferRef(buf, 0, 4096),), queue_affinity=1 << q)
            else:
                dev.queue_fill(wait, signal, buf, 0, 1024 << k, 7, 1, queue_affinity=1 << q)
    gate.signal(1)
    dev.wait_semaphores(hal.WaitMode.ALL, [(chains[0], 6), (chains[1], 6)], timeout=WAIT)
    trip = dev.create_semaphore()
    for k in range(6):
        if k % 2:
            dev.queue_dispatch([], [(trip, k + 1)], exe, "spin", (2, 1, 1), (500 * k,), (hal.BufferRef(buf, 0, 4096),))
        else:
            dev.queue_fill([], [(trip, k + 1)], buf, 0, 2048 << k, 1, 1)
        trip.wait(k + 1, WAIT)


@pytest.mark.parametrize("concurrency", [0, 1])
def test_a_sim_opencl_trace_gives_its_cost_model_back(concurrency):
    model = dict(TRUE, device_concurrency=concurrency)
    with hal.create_device("sim:opencl", queues=2, cost_model=model) as dev:
        program(dev)
    cal = fit([dev.trace], personality="opencl", partial=True)
    got = {p.name: p.value for p in cal.params}
    for name in ("submit_ns", "launch_ns", "commit_ns", "dispatch_commit_ns", "event_create_ns", "host_fn_ns",
                 "fill_latency_ns", "kernels.spin.per_unit_ns"):
        want = TRUE[name] if "." not in name else TRUE["kernels"]["spin"]["per_unit_ns"]
        assert got[name] == pytest.approx(want, abs=1e-6), name
    assert got["fill_gb_per_s"] == pytest.approx(2.0)
    assert cal.model.device_concurrency == concurrency
    (dc,) = [p for p in cal.params if p.name == "device_concurrency"]
    assert dc.note.startswith(f"most queues running at once: median {concurrency or 2} of 2")


def test_a_negative_coefficient_is_fixed_at_zero_and_the_others_refitted():
    # issue = 5000 + 1000·signals − 300·events: the per-event cost cannot be negative
    s = Samples()
    rows = [(events, signals) for events in (0, 1, 2, 3) for signals in (1, 2)]
    for events, signals in rows:
        s.add("issue", [1.0, events, signals, 0], 5000 + 1000 * signals - 300 * events)
    cal = fit_samples(s, personality="opencl", partial=True)
    got = {p.name: p for p in cal.params}
    X = np.array([[1.0, sig] for _ev, sig in rows])
    y = np.array([5000 + 1000 * sig - 300 * ev for ev, sig in rows], dtype=float)
    (commit, create), *_ = np.linalg.lstsq(X, y, rcond=None)  # the fit without the events column
    assert got["event_wait_ns"].value == 0.0 and "negative fit: fixed at 0" in got["event_wait_ns"].note
    assert got["commit_ns"].value == pytest.approx(commit) and got["event_create_ns"].value == pytest.approx(create)
    assert (cal.model.event_wait_ns, cal.model.commit_ns) == (0, round(commit))
