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


def test_a_launch_latency_below_0_says_it_was_clamped_next_to_its_group_note():
    """Too few device samples: launch_ns is the mean of every launch sample; when that is negative the
    table said only "every launch sample …" and showed the negative value as if it were the model's."""
    s = Samples()
    for y in (-4000, -3000, -2000, -5000):
        s.add("launch:host", [1.0, 0], y)
    cal = fit_samples(s, personality="opencl", partial=True)
    (got,) = [p for p in cal.params if p.name == "launch_ns"]
    assert (got.value, got.samples) == (-3500.0, 4)
    assert got.note == "every launch sample (fewer than 10 after a device predecessor); clamped to 0"
    assert cal.model.launch_ns == 0


def test_host_fn_is_the_mean_of_every_completion_waited_for_or_not():
    # a waiting host thread completes its work itself (opencl: ~15 us); the completion thread polls
    # (~100 us): one latency for both, their mean
    s = Samples()
    for y in (14_000, 16_000) * 6:
        s.add("host_fn", [1.0], y)
    for y in (90_000, 110_000) * 3:
        s.add("host_fn:other", [1.0], y)
    cal = fit_samples(s, personality="opencl", partial=True)
    (got,) = [p for p in cal.params if p.name == "host_fn_ns"]
    assert (got.samples, cal.model.host_fn_ns) == (18, (12 * 15_000 + 6 * 100_000) // 18)


def test_launch_latency_by_what_the_op_waited_for_is_modelled_and_fitted_back():
    """Three launch latencies: after a device predecessor (``launch_ns``), after the issue launched the
    op onto an idle queue (``launch_after_issue_ns``), after a host signal set its user event
    (``launch_after_host_ns``); sim:opencl applies each, and the fit gives each back."""
    model = dict(TRUE, launch_after_issue_ns=4200, launch_after_host_ns=9100)
    with hal.create_device("sim:opencl", cost_model=model) as dev:
        buf = dev.allocator.allocate_buffer(1 << 16)
        trip, chain, gated, side = (dev.create_semaphore() for _ in range(4))
        sides = iter(range(1, 100))

        def signal(sem, value):  # every other op signals a second semaphore: the per-signal cost separates
            return [(sem, value)] + ([(side, next(sides))] if value % 2 else [])
        for k in range(12):  # round trips: each op issued onto an idle queue
            dev.queue_fill([], signal(trip, k + 1), buf, 0, 1024, 1, 1)
            trip.wait(k + 1, WAIT)
        for k in range(12):  # each op behind a host signal (a user event)
            gate = dev.create_semaphore()
            dev.queue_fill([(gate, 1)], signal(gated, k + 1), buf, 0, 2048, 1, 1)
            gate.signal(1)
            gated.wait(k + 1, WAIT)
        gate = dev.create_semaphore()
        for k in range(12):  # a chain behind one gate: all but the first after their device predecessor
            dev.queue_fill([(gate, 1)] if k == 0 else [(chain, k)], signal(chain, k + 1), buf, 0, 4096, 1, 1)
        gate.signal(1)
        chain.wait(12, WAIT)
    ops = {e["op"]: e for e in dev.trace.events("op_done")}
    gaps = [ops[f"0:{k}"]["start"] - ops[f"0:{k - 1}"]["t"] for k in range(25, 36)]
    assert set(gaps) == {1500}  # each chained op starts launch_ns after its predecessor ends
    gate_opened = {e["sem"]: e["t"] for e in dev.trace.events("signal") if e["cause"] == "host:0"}
    gated_ops = [e for e in dev.trace.events("op") if e["op"] in {f"0:{k}" for k in range(12, 24)}]
    assert {ops[e["op"]]["start"] - gate_opened[e["wait"][0][0]] for e in gated_ops} == {9100}
    cal = fit([dev.trace], personality="opencl", partial=True)
    got = {p.name: p for p in cal.params}
    assert (got["launch_ns"].value, got["launch_ns"].samples) == (pytest.approx(1500), 11)
    assert (got["launch_after_issue_ns"].value, got["launch_after_issue_ns"].samples) == (pytest.approx(4200), 12)
    assert (got["launch_after_host_ns"].value, got["launch_after_host_ns"].samples) == (pytest.approx(9100), 13)
    assert (cal.model.launch_ns, cal.model.launch_after_issue_ns, cal.model.launch_after_host_ns) == (1500, 4200, 9100)


def test_a_wait_on_a_barrier_of_another_queue_is_a_device_predecessor_not_a_host_signal():
    """A copy on queue 1 waiting for a ``queue_barrier`` of queue 0 waits on the barrier's recorded
    event (the issue's ``after``): it was sampled as "after a host signal" from the barrier's
    completion-callback signal, which comes later, so launch_after_host_ns and launch_ns were fitted
    far below 0 (clamped) and the model fitted worse than the defaults."""
    with hal.create_device("sim:opencl", queues=2, cost_model={"launch_after_host_ns": 45000}) as dev:
        buf = dev.allocator.allocate_buffer(1 << 16)
        done, bar = dev.create_semaphore(), dev.create_semaphore()
        for k in range(12):  # each op behind a host signal (a user event)
            gate = dev.create_semaphore()
            dev.queue_fill([(gate, 1)], [(done, k + 1)], buf, 0, 4096, 7, 4, queue_affinity=1)
            dev.sleep(0.0002)
            gate.signal(1)
            done.wait(k + 1, WAIT)
        for k in range(60):  # hand-offs to queue 1 through a barrier on queue 0, submitted back to back
            dev.queue_barrier([], [(bar, k + 1)], queue_affinity=1)
            dev.queue_copy([(bar, k + 1)], [], buf, 0, buf, 1 << 15, 4096, queue_affinity=2)
        dev.queue_barrier([], [(bar, 61)], queue_affinity=2)
        bar.wait(61, WAIT)
    cal = fit([dev.trace], personality="opencl", partial=True)
    got = {p.name: p for p in cal.params}
    launch = dev.cost.launch_ns
    assert (got["launch_after_host_ns"].value, got["launch_after_host_ns"].samples) == (pytest.approx(45000), 12)
    assert (got["launch_after_issue_ns"].value, got["launch_after_issue_ns"].samples) == (pytest.approx(launch), 60)
    assert (cal.model.launch_after_issue_ns, cal.model.launch_after_host_ns) == (launch, 45000)
