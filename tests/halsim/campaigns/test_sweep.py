"""``halsim sweep``: the spec, the results file, resume after a kill, Dask vs local results."""

import os
import signal
import subprocess
import sys
import time

import pytest

from halsim.campaigns.sweep import load_spec, parse_spec, point_key, read_results, run_sweep
from halsim.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

TINY = """
[program]
generator = { size = 3 }
[device]
uri = "sim:cuda"
[grid]
queues = [1, 2]
event_pool_capacity = [1, 4]
"cost.fill_gb_per_s" = [1.0, 10.0, 100.0, 200.0, 400.0]
seed = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
"""


def write(tmp_path, text, name="spec.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def rows_by_key(path):
    _header, rows = read_results(path)
    return {r["key"]: {k: v for k, v in r.items() if k != "wall_s"} for r in rows}


def test_grid_points_keys_and_columns(tmp_path):
    spec = load_spec(write(tmp_path, TINY))
    assert len(spec.points) == 200
    assert point_key(spec.points[0]) == '{"cost.fill_gb_per_s":1.0,"event_pool_capacity":1,"queues":1,"seed":0}'
    assert spec.columns[:5] == ["key", "cost.fill_gb_per_s", "event_pool_capacity", "queues", "seed"]
    assert spec.plot == {"x": "cost.fill_gb_per_s", "y": "makespan_ns", "hue": "event_pool_capacity"}


def test_sample_is_seeded():
    doc = {"program": {"generator": {"size": 2}},
           "sample": {"n": 5, "seed": 3, "params": {"queues": [1, 2, 4], "cost.launch_ns": {"min": 100, "max": 900}}}}
    a, b = parse_spec(doc).points, parse_spec(doc).points
    assert a == b and len(a) == 5
    assert all(isinstance(p["cost.launch_ns"], int) and 100 <= p["cost.launch_ns"] <= 900 for p in a)


def test_one_point_values(tmp_path):
    spec = parse_spec({"program": {"generator": {"size": 4}}, "device": {"uri": "sim:cuda"},
                       "grid": {"queues": [2], "event_pool_capacity": [1], "seed": [7]}})
    out = str(tmp_path / "r.csv")
    assert run_sweep(spec, out, progress=False) == {"points": 1, "skipped": 0, "ran": 1, "errors": 0}
    (row,) = rows_by_key(out).values()
    assert {k: row[k] for k in ("makespan_ns", "ops", "findings", "peak_events_in_use", "unpooled_events",
                                 "error")} == EXPECTED_POINT


# capacity 1: one CUevent is created outside the pool (limit.cuda_event_pool, a warning)
EXPECTED_POINT = {"makespan_ns": "11680", "ops": "2", "findings": "1", "peak_events_in_use": "2",
                  "unpooled_events": "1", "error": ""}


def test_dask_local_cluster_matches_jobs_1(tmp_path):
    pytest.importorskip("distributed", reason="the campaigns extra (dask[distributed]) is not installed")
    spec = write(tmp_path, TINY)
    one, dsk = str(tmp_path / "one.csv"), str(tmp_path / "dask.csv")
    assert main(["sweep", spec, "--out", one, "--jobs", "1", "-q", "--no-plot"]) == 0
    assert main(["sweep", spec, "--out", dsk, "--dask", "local", "--jobs", "2", "-q", "--no-plot"]) == 0
    a, b = rows_by_key(one), rows_by_key(dsk)
    assert len(a) == 200 and a == b
    assert not any(r["error"] for r in a.values())


def test_local_pool_matches_jobs_1(tmp_path):
    spec = write(tmp_path, TINY.replace("seed = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]", "seed = [0]"))
    one, two = str(tmp_path / "one.csv"), str(tmp_path / "two.csv")
    assert main(["sweep", spec, "--out", one, "-q", "--no-plot"]) == 0
    assert main(["sweep", spec, "--out", two, "--jobs", "2", "-q", "--no-plot"]) == 0
    assert rows_by_key(one) == rows_by_key(two)


def test_resume_after_kill_loses_and_recomputes_nothing(tmp_path):
    spec = write(tmp_path, TINY.replace("size = 3", "size = 10").replace("seed = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]",
                                                                          "seed = [0, 1]"))
    out = str(tmp_path / "r.csv")
    cmd = [sys.executable, "-m", "halsim.cli", "sweep", spec, "--out", out, "-q", "--no-plot"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if os.path.exists(out) and open(out).read().count("\n") >= 1 + 10:
                break
            assert proc.poll() is None, "the sweep ended before it could be killed"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(10)
    with open(out) as f:
        before = f.read()
    _h, first = read_results(out)
    assert 10 <= len(first) < 40
    done = subprocess.run(cmd + ["--resume"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"40 points: {40 - len(first)} run, {len(first)} already in" in done.stdout
    with open(out) as f:
        after = f.read()
    complete = before[:before.rfind("\n") + 1]
    assert after.startswith(complete)            # nothing finished was lost or rewritten
    _h, rows = read_results(out)
    keys = [r["key"] for r in rows]
    assert len(keys) == 40 and len(set(keys)) == 40   # nothing recomputed twice


def test_existing_results_need_resume(tmp_path, capsys):
    spec = write(tmp_path, TINY.replace("seed = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]", "seed = [0]"))
    out = str(tmp_path / "r.csv")
    assert main(["sweep", spec, "--out", out, "-q", "--no-plot"]) == 0
    assert main(["sweep", spec, "--out", out, "-q", "--no-plot"]) == 2
    assert capsys.readouterr().err.strip() == f"halsim: error: {out} exists: use --resume to continue it, or remove it"
    assert main(["sweep", spec, "--out", out, "-q", "--no-plot", "--resume"]) == 0
    assert "20 points: 0 run, 20 already in" in capsys.readouterr().out


def test_plot_is_written(tmp_path, capsys):
    spec = write(tmp_path, TINY.replace("seed = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]", "seed = [0]"))
    out = str(tmp_path / "r.csv")
    assert main(["sweep", spec, "--out", out, "-q"]) == 0
    text = capsys.readouterr().out
    assert f"plot: {tmp_path / 'r.png'} (2 lines, 5 x values)" in text
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("text, message", [
    ("[program]\nschedule = 'nope.toml'\n", "program.schedule: "),
    ("[program]\ngenerator = { sise = 3 }\n", "program.generator.sise: unknown knob"),
    ("[program]\ngenerator = {}\n[grid]\n'cost.copy_gbps' = [1]\n", "grid.cost.copy_gbps: 'cost.copy_gbps': unknown cost model field"),
    ("[program]\ngenerator = {}\n[grid]\nqueues = []\n", "grid.queues: expected a non-empty list of values"),
    ("metrics = ['speed']\n[program]\ngenerator = {}\n", "metrics: unknown metric 'speed'"),
    ("[program]\ngenerator = {}\n[plot]\nx = 'queues'\n", "plot.x: 'queues' is not a parameter"),
    ("[progam]\n", "progam: unknown field"),
    ("[program\n", "not valid TOML"),
])
def test_bad_specs_exit_2_with_one_line(tmp_path, capsys, text, message):
    spec = write(tmp_path, text)
    assert main(["sweep", spec, "--out", str(tmp_path / "r.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("halsim: error: ") and message in err, err


def test_bad_arguments_exit_2(tmp_path, capsys):
    spec = write(tmp_path, TINY)
    assert main(["sweep", spec, "--out", str(tmp_path / "r.txt")]) == 2
    assert main(["sweep", spec, "--out", str(tmp_path / "r.csv"), "--jobs", "0"]) == 2
    assert main(["sweep", spec, "--out", str(tmp_path / "r.csv"), "--dask", "nowhere:1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"halsim: error: --out {str(tmp_path / 'r.txt')!r}: expected a .csv or .parquet file",
                   "halsim: error: --jobs 0: must be >= 1",
                   "halsim: error: --dask 'nowhere:1': expected 'local' or a scheduler address tcp://host:port"]


def test_python_program_and_bad_device_option(tmp_path, capsys):
    (tmp_path / "prog.py").write_text(
        "def main(dev):\n"
        "    s = dev.create_semaphore()\n"
        "    b = dev.allocator.allocate_buffer(4096)\n"
        "    dev.queue_fill([], [(s, 1)], b, 0, 4096, 1, 1)\n"
        "    s.wait(1)\n")
    text = ('metrics = ["makespan", "errors"]\n[program]\npython = "prog.py:main"\n'
            '[grid]\n"cost.fill_gb_per_s" = [1.0, 10.0]\n')
    out = str(tmp_path / "r.csv")
    assert main(["sweep", write(tmp_path, text), "--out", out, "-q", "--no-plot"]) == 0
    rows = rows_by_key(out)
    assert [(r["cost.fill_gb_per_s"], r["makespan_ns"], r["errors"]) for r in rows.values()] == \
        [("1.0", "8596", "0"), ("10.0", "4910", "0")]
    bad = write(tmp_path, text + "bogus = [1]\n", "bad.toml")
    assert main(["sweep", bad, "--out", str(tmp_path / "b.csv"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "INVALID_ARGUMENT: unknown option 'bogus' for device 'sim'" in err


FILL_PROG = ("import itertools\n"
             "calls = itertools.count(1)   # module state: a row must not see the points run before it\n"
             "def main(dev):\n"
             "    s = dev.create_semaphore()\n"
             "    b = dev.allocator.allocate_buffer(1024 * next(calls))\n"
             "    dev.queue_fill([], [(s, 1)], b, 0, b.byte_length, 1, 1)\n"
             "    s.wait(1)\n")


def _makespan_by_hand(uri, cost_model, size=1024):
    from reference import hal
    with hal.create_device(uri, cost_model=cost_model) as dev:
        s = dev.create_semaphore()
        b = dev.allocator.allocate_buffer(size)
        dev.queue_fill([], [(s, 1)], b, 0, size, 1, 1)
        s.wait(1)
    from halsim.trace_tools.stats import trace_stats
    return trace_stats(dev.trace)["makespan_ns"]  # (the sweep's makespan column: the trace's)


def test_python_rows_keep_the_fixed_cost_model_and_start_from_a_fresh_module(tmp_path):
    """The point's cost fields go over ``[device] options.cost_model`` (they replaced it), and the
    module runs afresh at every point (its first run's state leaked into later points of a worker)."""
    (tmp_path / "prog.py").write_text(FILL_PROG)
    text = ('metrics = ["makespan"]\n[program]\npython = "prog.py:main"\n'
            '[device]\noptions = { cost_model = { fill_latency_ns = 100000 } }\n'
            '[grid]\n"cost.fill_gb_per_s" = [1.0]\nseed = [0, 1, 2]\n')
    out = str(tmp_path / "r.csv")
    assert main(["sweep", write(tmp_path, text), "--out", out, "-q", "--no-plot", "--jobs", "1"]) == 0
    expected = _makespan_by_hand("sim", {"fill_latency_ns": 100000, "fill_gb_per_s": 1.0})
    assert expected > 100000
    assert [r["makespan_ns"] for r in rows_by_key(out).values()] == [str(expected)] * 3


def test_a_schedules_cost_model_file_is_loaded_under_the_swept_fields(tmp_path):
    """``options = { cost_model = "model.json" }`` (a calibrated model) with ``cost.*`` swept: the
    sweep died with ``TypeError: 'str' object is not a mapping``."""
    from halsim.sim.cost_model import CostModel
    model = tmp_path / "model.json"
    CostModel.from_dict({"fill_latency_ns": 50000}).save(model)
    (tmp_path / "prog.toml").write_text(
        f'[device]\nuri = "sim"\noptions = {{ cost_model = "{model}" }}\n[semaphores]\ns = 0\n[buffers]\nb = 1024\n'
        '[[host]]\ncall = "fill"\ntarget = "b"\npattern = 1\npattern_length = 1\nsignal = { s = 1 }\n'
        '[[host]]\ncall = "wait"\nwait = { s = 1 }\n')
    text = 'metrics = ["makespan"]\n[program]\nschedule = "prog.toml"\n[grid]\n"cost.fill_gb_per_s" = [1.0, 10.0]\n'
    out = str(tmp_path / "r.csv")
    assert main(["sweep", write(tmp_path, text), "--out", out, "-q", "--no-plot"]) == 0
    rows = rows_by_key(out)
    for rate in (1.0, 10.0):
        fields = {**CostModel.load(model).to_dict(), "fill_gb_per_s": rate}
        expected = _makespan_by_hand("sim", fields)
        assert rows[f'{{"cost.fill_gb_per_s":{rate}}}']["makespan_ns"] == str(expected)
    assert rows['{"cost.fill_gb_per_s":1.0}']["makespan_ns"] != rows['{"cost.fill_gb_per_s":10.0}']["makespan_ns"]
