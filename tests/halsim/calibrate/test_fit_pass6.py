"""Calibration fixes (pass 6): sim traces of known cost models fitted back exactly — the per-signal
launch shift on ``cuda``, a host-gated op's wake, ``--partial`` with one signal count, a predecessor
ending inside the markers, ``device_concurrency`` above 1, host calls' signals — and unusable
dispatches (ragged constants, entries outside the builtin library) refused in one line."""

import json
import os
import re

import pytest

from halsim.calibrate import fit, fit_samples, Samples
from halsim.calibrate.samples import trace_samples
from halsim.cli import main
from reference import hal
from tests.conftest import WAIT
from tests.halsim.calibrate.test_fit import synthetic_events, write_trace
from tests.halsim.calibrate.test_fit_sim import TRUE as SIM_TRUE, program as two_queue_program

BASE = {"host_api_ns": 100, "submit_ns": 7000, "wake_ns": 900, "launch_ns": 1500, "commit_ns": 3000,
        "event_record_ns": 0, "event_wait_ns": 600, "event_create_ns": 1100, "host_fn_ns": 2500,
        "event_destroy_ns": 0, "fill_latency_ns": 800, "fill_gb_per_s": 2.0}
CUDA = dict(BASE, event_record_ns=700, event_create_ns=0)
ACCURACY_MD = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "accuracy.md")


def fitted(cal) -> dict:
    return {p.name: p.value for p in cal.params}


# -- launch and issue on the stream personalities ----------------------------------------------------

def test_cuda_launch_is_moved_by_the_fitted_per_signal_cost_not_the_default_create_cost():
    """cuda records pooled events: its per-signal issue cost is event_record_ns (fitted 700); the
    launch samples were moved by event_record_ns + the default event_create_ns (5000): 9000."""
    with hal.create_device("sim:cuda", cost_model=dict(CUDA, dispatch_commit_ns=4000)) as dev:
        buf = dev.allocator.allocate_buffer(1 << 16)
        trip, side = dev.create_semaphore(), dev.create_semaphore()
        for k in range(12):  # round trips; every other op signals twice (the per-signal cost separates)
            dev.queue_fill([], [(trip, k + 1)] + ([(side, k + 1)] if k % 2 else []), buf, 0, 1024 << (k % 5), 1, 1)
            trip.wait(k + 1, WAIT)
    cal = fit([dev.trace], personality="cuda", partial=True)
    got = fitted(cal)
    assert got["event_record_ns"] == pytest.approx(700) and got["commit_ns"] == pytest.approx(3000)
    assert got["launch_after_issue_ns"] == pytest.approx(1500) and got["launch_ns"] == pytest.approx(1500)
    assert (cal.model.launch_ns, cal.model.launch_after_issue_ns, cal.model.event_create_ns) == (1500, 1500, 5000)


def test_cuda_wake_of_a_host_gated_op_counts_from_its_gate_not_its_enqueue():
    """cuda keeps an op with an unreached wait pending: its issue starts wake_ns after the host opened
    the gate; counted from the enqueue, the sample held the host's 20 calls too (3000)."""
    with hal.create_device("sim:cuda", cost_model=CUDA) as dev:
        buf = dev.allocator.allocate_buffer(1 << 16)
        done, side = dev.create_semaphore(), dev.create_semaphore()
        for k in range(6):
            gate = dev.create_semaphore()
            dev.queue_fill([(gate, 1)], [(done, k + 1)] + ([(side, k + 1)] if k % 2 else []), buf, 0, 1024 << k, 1, 1)
            for _ in range(20):  # other host work before the gate opens
                dev.create_semaphore()
            gate.signal(1)
            done.wait(k + 1, WAIT)
    rows = trace_samples(list(dev.trace)).rows
    assert rows["wake:issue"][1] == [900.0] * 6 and rows["wake:host"][1] == [900.0] * 6
    assert fit([dev.trace], personality="cuda", partial=True).model.wake_ns == 900


@pytest.mark.parametrize("concurrency", [0, 1])
def test_a_sim_cuda_trace_gives_its_cost_model_back(concurrency):
    """test_fit_sim's program (gated chains on two queues, round trips) on sim:cuda, fitted as cuda:
    wake_ns came back 6486 and launch_ns 8167 (5389 one queue at a time), true 900 and 1500."""
    model = dict(SIM_TRUE, device_concurrency=concurrency, event_record_ns=700, event_create_ns=0)
    with hal.create_device("sim:cuda", queues=2, cost_model=model) as dev:
        two_queue_program(dev)
    cal = fit([dev.trace], personality="cuda", partial=True)
    got = fitted(cal)
    for name in ("submit_ns", "wake_ns", "launch_ns", "launch_after_issue_ns", "commit_ns", "dispatch_commit_ns",
                 "event_record_ns", "event_wait_ns", "host_fn_ns"):
        want = model["launch_ns"] if name == "launch_after_issue_ns" else model[name]
        assert got[name] == pytest.approx(want, abs=1e-6), name
    assert cal.model.device_concurrency == concurrency


def _one_signal_program(dev):
    buf = dev.allocator.allocate_buffer(1 << 20)
    done, gate = dev.create_semaphore(), dev.create_semaphore()
    gate.signal(1)
    for k in range(12):  # one signal each: the signal column is constant
        dev.queue_fill([(gate, 1)] * (k % 3), [(done, k + 1)], buf, 0, 1024 << (k % 8), 1, 1)
        done.wait(k + 1, WAIT)


def test_partial_with_one_signal_count_subtracts_the_per_signal_cost_the_model_keeps():
    """opencl charges event_record_ns + event_create_ns per signal (no pool); --partial subtracted only
    event_create_ns, so commit_ns absorbed event_record_ns and every issue came back 500 ns slow."""
    with hal.create_device("sim:opencl") as dev:
        _one_signal_program(dev)
    cal = fit([dev.trace], personality="opencl", partial=True)
    m = cal.model
    assert (m.commit_ns, m.event_record_ns, m.event_create_ns) == (2000, 500, 1000)
    with hal.create_device("sim:opencl", cost_model=m.to_dict()) as again:
        _one_signal_program(again)
    issue_ns = [[e["t"] - e["start"] for e in d.trace.events("issue")] for d in (dev, again)]
    assert issue_ns[0] == issue_ns[1] == [3500] * 12


def test_a_queue_predecessor_ending_inside_the_markers_is_a_device_launch():
    """B launches at issue end − 2 × 4000 (its markers); A, before it on the queue, ends inside that
    window: the model starts B launch_ns after A ("device"), the fitter sampled it after its issue
    from the launch point (launch_ns came back 4100)."""
    model = dict(BASE, submit_ns=2000, event_create_ns=4000, fill_gb_per_s=1.0)
    with hal.create_device("sim:opencl", cost_model=model) as dev:
        buf = dev.allocator.allocate_buffer(1 << 20)
        s, t2 = dev.create_semaphore(), dev.create_semaphore()
        for k in range(12):
            dev.queue_fill([], [(s, 2 * k + 1)], buf, 0, 12000, 1, 1)  # A
            dev.queue_fill([], [(s, 2 * k + 2), (t2, k + 1)], buf, 0, 1024 * (1 + k % 3), 1, 1)  # B
            s.wait(2 * k + 2, WAIT)
    cal = fit([dev.trace], partial=True)
    got = {p.name: p for p in cal.params}
    assert got["event_create_ns"].value == pytest.approx(4000)
    assert (got["launch_ns"].value, got["launch_ns"].samples) == (pytest.approx(1500), 12)
    assert (got["launch_after_issue_ns"].value, got["launch_after_issue_ns"].samples) == (pytest.approx(1500), 12)
    assert (cal.model.launch_ns, cal.model.launch_after("issue")) == (1500, 1500)


def test_host_calls_signals_cost_nothing_at_issue():
    """A host call's issue records no device-signal event; counting its signals gave event_create_ns
    825 and launch_ns 1088 (true 1100 and 1500)."""
    with hal.create_device("sim:opencl", cost_model=BASE) as dev:
        buf = dev.allocator.allocate_buffer(1 << 20)
        s, side = dev.create_semaphore(), dev.create_semaphore()
        v = 0
        for k in range(12):
            v += 1
            dev.queue_fill([], [(s, v)] + ([(side, v)] if k % 2 else []), buf, 0, 1024 << (k % 6), 1, 1)
            s.wait(v, WAIT)
            if k % 3 == 0:
                v += 1
                dev.queue_host_call([], [(s, v)] + ([(side, v)] if k % 2 else []), lambda *a: None)
                s.wait(v, WAIT)
    m = fit([dev.trace], personality="opencl", partial=True).model
    assert (m.commit_ns, m.event_create_ns, m.launch_ns) == (3000, 1100, 1500)


# -- device_concurrency ----------------------------------------------------------------------------

def _three_gated_chains(concurrency: int):
    with hal.create_device("sim:opencl", queues=3, cost_model=dict(BASE, device_concurrency=concurrency)) as dev:
        buf = dev.allocator.allocate_buffer(1 << 20)
        gate = dev.create_semaphore()
        chains = [dev.create_semaphore() for _ in range(3)]
        for k in range(6):
            for q, sem in enumerate(chains):
                wait = [(gate, 1)] if k == 0 else [(sem, k)]
                dev.queue_fill(wait, [(sem, k + 1)], buf, 0, 20000 + 1000 * k + 300 * q, 1, 1, queue_affinity=1 << q)
        gate.signal(1)
        dev.wait_semaphores(hal.WaitMode.ALL, [(c, 6) for c in chains], timeout=WAIT)
    return dev.trace


@pytest.mark.parametrize("concurrency, waited", [(2, 16), (1, 17), (0, 0)])
def test_device_concurrency_above_one_is_fitted_with_its_launches(concurrency, waited):
    """Only a fully serial trace counted ops waiting for another queue: a device running 2 of 3
    queues at once was fitted 0. Each waiting op's launch counts from the end that freed its slot."""
    trace = _three_gated_chains(concurrency)
    assert set(trace_samples(list(trace)).rows["launch:device"][1]) == {1500.0}
    cal = fit([trace], partial=True)
    (dc,) = [p for p in cal.params if p.name == "device_concurrency"]
    most = concurrency or 3
    assert cal.model.device_concurrency == concurrency
    assert dc.note == (f"most queues running at once: median {most} of 3 (max {most}); "
                       f"{waited} ops waited for another queue's op")
    assert cal.model.launch_ns == 1500


# -- unusable dispatches: one line, exit 2 (--partial: skipped) -------------------------------------

def _calibrate(tmp_path, capsys, events, *extra):
    path = write_trace(tmp_path / "t.json", events)
    out = tmp_path / "m.json"
    code = main(["calibrate", str(path), "-o", str(out), *extra])
    return code, capsys.readouterr(), out


def test_dispatches_with_different_numbers_of_constants_are_refused_naming_the_entry(tmp_path, capsys):
    events = synthetic_events()
    spins = [e for e in events if e.get("ev") == "cmd" and e.get("entry") == "spin"]
    spins[1]["constants"] = spins[1]["constants"] + [5]
    code, out, _ = _calibrate(tmp_path, capsys, events)
    assert code == 2
    assert out.err == "halsim calibrate: error: kernels.spin: the spin dispatches carry different numbers of " \
                      "constants (1, 2)\n"
    code, out, model = _calibrate(tmp_path, capsys, events, "--partial")
    assert code == 0
    assert "kernels.spin (the spin dispatches carry different numbers of constants (1, 2))" in out.out
    assert json.loads(model.read_text())["kernels"]["spin"] == {"base_ns": 4000, "per_workgroup_ns": 0,
                                                                 "per_unit_ns": 1, "unit_constant": 0}


def test_an_entry_outside_the_builtin_library_is_refused_or_skipped(tmp_path, capsys):
    events = synthetic_events()
    for e in events:
        if e.get("ev") == "cmd" and e.get("entry") == "axpy":
            e["entry"] = "matmul"
    code, out, _ = _calibrate(tmp_path, capsys, events)
    assert code == 2
    assert out.err == ("halsim calibrate: error: kernels.matmul: entry 'matmul' is not in the builtin kernel "
                       "library (one of: abs, axpy, double_it, negate, scale_and_offset, spin, write_constants, "
                       "write_dispatch_params, write_workgroup_ids): its dispatches cannot be modelled\n")
    code, out, model = _calibrate(tmp_path, capsys, events, "--partial")
    assert code == 0 and out.err == ""
    assert "defaults kept (opencl): kernels.matmul (entry 'matmul' is not in the builtin kernel library" in out.out
    assert "matmul" not in json.loads(model.read_text()).get("kernels", {})


def test_partial_spin_without_its_constant_keeps_the_unit_term_and_its_constant(tmp_path, capsys):
    events = synthetic_events()
    for e in events:
        if e.get("ev") == "cmd" and e.get("entry") == "spin":
            e["constants"] = []
    code, out, model = _calibrate(tmp_path, capsys, events, "--partial")
    assert (code, out.err) == (0, "")
    assert "kernels.spin.per_unit_ns (spin dispatches lack constant 0)" in out.out
    spin = json.loads(model.read_text())["kernels"]["spin"]
    assert (spin["per_unit_ns"], spin["unit_constant"]) == (1, 0)


# -- docs ----------------------------------------------------------------------------------------------

def test_the_accuracy_page_says_host_fn_is_the_mean_of_every_idle_path_completion():
    s = Samples()
    for _ in range(12):
        s.add("host_fn", [1.0], 15_000)  # waited for
    for _ in range(6):
        s.add("host_fn:other", [1.0], 100_000)  # not
    assert fit_samples(s, partial=True).model.host_fn_ns == 43_333
    with open(ACCURACY_MD, encoding="utf-8") as f:
        (row,) = [line for line in f if line.startswith("| `host_fn_ns`")]
    assert re.search(r"for every such op, waited for or not", row) and "constant (the mean)" in row
    assert "for ops that were alone in flight and whose signal a blocked host wait received" not in row
