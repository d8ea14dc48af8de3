"""The fitter on synthetic traces with known parameters, and its refusals (``halsim calibrate``)."""

import json

import pytest

from halsim.calibrate import CalibrationError, fit
from halsim.cli import main
from reference import hal
from reference.trace import Trace

TRUE = {
    "fill_latency_ns": 1500, "fill_gb_per_s": 4.0,
    "copy_latency_ns": 2500, "copy_gb_per_s": 2.0,
    "update_latency_ns": 3500, "update_gb_per_s": 0.5,
    "axpy.base_ns": 3000, "axpy.per_workgroup_ns": 25,
    "spin.base_ns": 4000, "spin.per_workgroup_ns": 7, "spin.per_unit_ns": 3,
    "launch_ns": 1234, "commit_ns": 2000, "event_wait_ns": 700, "event_create_ns": 1100,
    "host_fn_ns": 5678, "wake_ns": 999,
}


def synthetic_events(p=TRUE):
    """A one-queue program where every op runs alone: submit, issue, run, signal, host wait."""
    events = [{"ev": "track", "id": 0, "kind": "stream", "name": "queue 0 in-order queue"}]
    t = 1_000_000
    ops = []
    for n in (4096, 65536, 262144, 1048576):
        ops.append(("fill", {"kind": "fill", "access": [["b0", 0, n, "w"]]},
                    p["fill_latency_ns"] + n / p["fill_gb_per_s"]))
        ops.append(("copy", {"kind": "copy", "access": [["b0", 0, n, "r"], ["b1", 0, n, "w"]]},
                    p["copy_latency_ns"] + n / p["copy_gb_per_s"]))
        ops.append(("update", {"kind": "update", "access": [["b0", 0, n // 16, "w"]]},
                    p["update_latency_ns"] + n // 16 / p["update_gb_per_s"]))
    for wg in (1, 16, 256, 1024):
        ops.append(("dispatch", {"kind": "dispatch", "entry": "axpy", "workgroups": [wg, 1, 1], "constants": [2],
                                 "access": []}, p["axpy.base_ns"] + p["axpy.per_workgroup_ns"] * wg))
    for wg, it in ((1, 1000), (4, 50000), (16, 20000), (64, 100)):
        ops.append(("dispatch", {"kind": "dispatch", "entry": "spin", "workgroups": [wg, 1, 1], "constants": [it],
                                 "access": []},
                    p["spin.base_ns"] + p["spin.per_workgroup_ns"] * wg + p["spin.per_unit_ns"] * it))
    for k, (kind, cmd, dur) in enumerate(ops):
        op_id = f"0:{k}"
        waits = k % 3                   # 0..2 wait events
        signals = 1 + k % 2            # 1..2 signals
        wait = [[f"w{j}", 1] for j in range(waits)]
        signal = [[f"s{j}", k + 1] for j in range(signals)]
        events.append({"ev": "op", "t": t, "op": op_id, "kind": kind, "thread": 0, "queue": 0, "wait": wait,
                       "signal": signal})
        issue_start = t + p["wake_ns"]
        launched = issue_start + p["commit_ns"] + p["event_wait_ns"] * waits  # then the signal events
        issue_end = launched + p["event_create_ns"] * signals
        events.append({"ev": "issue", "t": issue_end, "op": op_id, "start": issue_start, "track": 1,
                       "events": waits})
        start = launched + p["launch_ns"]
        end = start + round(dur)
        assert end - start == dur  # integral by construction: exact recovery is possible
        events.append(dict(cmd, ev="cmd", t=end, op=op_id, index=0, start=start, track=0))
        events.append({"ev": "op_done", "t": end, "op": op_id, "ready": issue_start, "start": start, "track": 0,
                       "status": 0})
        sig_t = end + p["host_fn_ns"]
        for sem, value in signal:
            events.append({"ev": "signal", "t": sig_t, "sem": sem, "value": value, "cause": op_id})
        wait_end = sig_t + p["wake_ns"]
        events.append({"ev": "host_wait", "t": wait_end, "thread": 0, "mode": "all", "wait": [["s0", k + 1]],
                       "start": t + 10, "status": 0})
        t = wait_end + 50_000
    # the "w" semaphores were signaled by the host before everything
    for j in range(2):
        events.insert(1, {"ev": "signal", "t": 10, "sem": f"w{j}", "value": 1, "cause": "host:0"})
    return events


def write_trace(path, events):
    with open(path, "w") as f:
        f.write('{"format":"halsim-trace","version":1,"header":{"device":"opencl","clock":"monotonic"},"events":[\n')
        f.write(",\n".join(json.dumps(e) for e in events))
        f.write("\n]}\n")
    return path


def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def test_exact_recovery_of_known_parameters():
    cal = fit([synthetic_events()], personality="opencl")
    got = {p.name: p.value for p in cal.params}
    expect = {k if "." not in k else f"kernels.{k}": v for k, v in TRUE.items()}
    for name, value in expect.items():
        assert name in got, name
        assert close(got[name], value), (name, got[name], value)
    for p in cal.params:
        assert p.residual <= 1e-6 * max(1.0, abs(p.value)) + 1e-3, p
        assert p.samples >= 3
    m = cal.model
    assert (m.fill_latency_ns, m.copy_gb_per_s, m.launch_ns, m.event_record_ns) == (1500, 2.0, 1234, 0)
    assert m.kernels["spin"] == {"base_ns": 4000, "per_workgroup_ns": 7, "per_unit_ns": 3, "unit_constant": 0}
    assert m.kernels["axpy"]["per_workgroup_ns"] == 25
    assert m.dispatch_ns("spin", 4, (50000,)) == 4000 + 28 + 150000


def test_trace_file_round_trip_and_cli(tmp_path, capsys):
    path = write_trace(tmp_path / "t.trace.json", synthetic_events())
    assert len(list(Trace.load(path).events("issue"))) == 20
    out = tmp_path / "model.json"
    assert main(["calibrate", str(path), "-o", str(out)]) == 0
    table = capsys.readouterr().out
    assert "kernels.spin.per_unit_ns" in table and "residual" in table
    with hal.create_device("sim:opencl", cost_model=str(out)) as dev:
        assert dev.cost.fill_latency_ns == 1500
    assert main(["calibrate", str(path), "-o", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["model"]["launch_ns"] == 1234 and doc["personality"] == "opencl"


def test_personality_defaults_kept_for_unfitted(tmp_path):
    events = [e for e in synthetic_events() if not (e.get("kind") == "update" or e.get("ev") == "host_wait")]
    drop = {e["op"] for e in synthetic_events() if e.get("ev") == "op" and e["kind"] == "update"}
    events = [e for e in events if e.get("op") not in drop]
    cal = fit([events], personality="cuda")
    assert cal.model.update_latency_ns == 2000 and cal.model.event_create_ns == 5000  # cuda defaults
    assert any(k.startswith("update_latency_ns") for k in cal.defaults_kept)
    assert cal.model.event_record_ns == 1100  # per-signal issue cost goes to event_record_ns off opencl


def _only(events, keep_kinds):
    drop = {e["op"] for e in events if e.get("ev") == "op" and e["kind"] not in keep_kinds}
    return [e for e in events if e.get("op") not in drop and e.get("cause") not in drop]


def test_refuses_too_few_samples():
    events = synthetic_events()
    copies = [e["op"] for e in events if e.get("ev") == "op" and e["kind"] == "copy"][2:]
    events = [e for e in events if e.get("op") not in copies]
    with pytest.raises(CalibrationError, match=r"copy_latency_ns/copy_gb_per_s: too few samples: 2 copy commands"):
        fit([events])
    assert fit([events], partial=True).model.copy_latency_ns == 1500  # the opencl default


def test_refuses_degenerate_design_naming_it(tmp_path, capsys):
    events = synthetic_events()
    for e in events:
        if e.get("ev") == "cmd" and e["kind"] == "fill":
            e["access"] = [["b0", 0, 4096, "w"]]
    with pytest.raises(CalibrationError, match="all 4 fill commands have the same size .4096 bytes.: cannot "
                                               "separate latency from bandwidth"):
        fit([events])
    cal = fit([events], partial=True)
    assert cal.model.fill_gb_per_s == 200.0  # the default bandwidth, latency fitted
    assert any("fill_gb_per_s" in k for k in cal.defaults_kept)


def test_refuses_same_signal_count():
    events = synthetic_events()
    for e in events:
        if e.get("ev") == "op":
            e["signal"] = e["signal"][:1]
    with pytest.raises(CalibrationError, match="same signal count .1.: cannot separate commit_ns from event_create_ns"):
        fit([events])


def test_cli_bad_files_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("not json\n")
    assert main(["calibrate", str(bad), "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a readable trace" in err
    assert main(["calibrate", str(tmp_path / "missing.json"), "-o", str(tmp_path / "m.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()


def test_cli_refusal_exit_2(tmp_path, capsys):
    events = synthetic_events()
    ops = [e["op"] for e in events if e.get("ev") == "op"][:2]
    events = [e for e in events if e.get("ev") == "track" or e.get("op") in ops or e.get("cause") in ops]
    path = write_trace(tmp_path / "t.json", events)
    assert main(["calibrate", str(path), "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert "too few samples" in err and err.count("\n") == 1


def test_trim_drops_outliers_plain_keeps_them():
    events = synthetic_events()
    # three ops hit a 5 ms stall between their issue and their start (later ops are not delayed)
    stalled = {"0:3", "0:9", "0:15"}
    for e in events:
        if e.get("op") in stalled and e.get("ev") in ("cmd", "op_done"):
            e["start"] += 5_000_000
            e["t"] += 5_000_000
    plain = {p.name: p for p in fit([events], align=False).params}
    trimmed = {p.name: p for p in fit([events], trim=5, align=False).params}
    assert abs(plain["launch_ns"].value - 1234) > 100_000 and plain["launch_ns"].samples == 20
    assert close(trimmed["launch_ns"].value, 1234) and "outliers dropped" in trimmed["launch_ns"].note
    assert close(trimmed["fill_latency_ns"].value, 1500) and close(trimmed["kernels.spin.per_unit_ns"].value, 3)


def test_align_clocks_shifts_a_real_trace_to_causal():
    from halsim.calibrate.fit import align_clocks

    events = synthetic_events()
    early = []
    for e in events:  # device clock 300 us early, as PoCL's offset can be
        if e.get("ev") in ("cmd", "op_done"):
            e = dict(e, t=e["t"] - 300_000, start=e["start"] - 300_000)
        early.append(e)
    fixed, shift = align_clocks(early)
    # the smallest causal shift: no op starts before its issue started (the earliest start: an op with
    # no wait events, launched after commit 2000, then launch 1234)
    assert shift == 300_000 - 1234 - 2000
    assert align_clocks(synthetic_events())[1] == 0
    assert fit([early]).model.fill_gb_per_s == 4.0  # durations do not move
