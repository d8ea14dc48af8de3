"""Adversarial pass 6 of ``halsim``'s own commands: ``run --trace`` saves what ``close()`` records;
difftest runs the module afresh per device and keeps --json stdout clean; a cost-model file is an
input; ``async def``/generator programs are refused; demo file names from any URI; a program imports
the modules beside it (and leaves ``sys.path`` as it found it); a reader that stops early is no
error; ``check --rules TYPO`` is refused before the program runs."""

import json
import os
import subprocess
import sys

import pytest

from halsim.cli import main
from tests.halsim.test_cli_errors import FILL

NOWAIT = ("def main(dev):\n"
          "    a = dev.allocator.allocate_buffer(1 << 20)\n"
          "    s = dev.create_semaphore()\n"
          "    dev.queue_fill([], [(s, 1)], a, 0, 1 << 20, 1, 4)\n")
DEADLOCK = ("def main(dev):\n"
            "    s2, s3 = dev.create_semaphore(), dev.create_semaphore()\n"
            "    dev.queue_barrier([(s2, 1)], [(s3, 1)])\n"
            "    dev.queue_barrier([(s3, 1)], [(s2, 1)])\n"
            "    s3.wait(1)\n")


def _events(path, kind):
    return [json.loads(line.rstrip(",\n")) for line in open(path) if line.startswith(f'{{"ev":"{kind}",')]


# -- bug08: run --trace saves the trace after close() --------------------------------------------------

@pytest.mark.parametrize("device", ["sim", "sim:cuda"])
def test_run_trace_has_the_work_in_flight_when_the_program_returned(tmp_path, capsys, device):
    (tmp_path / "p.py").write_text(NOWAIT)
    t = tmp_path / "t.json"
    assert main(["run", str(tmp_path / "p.py"), "--device", device, "--trace", str(t)]) == 0
    assert [e["op"] for e in _events(t, "op")] == ["0:0"]
    assert [(e["op"], e["status"]) for e in _events(t, "op_done")] == [("0:0", 0)]
    assert "never ran" not in capsys.readouterr().out


def test_run_trace_of_a_deadlock_has_its_cancelled_operations(tmp_path, capsys):
    (tmp_path / "p.py").write_text(DEADLOCK)
    t = tmp_path / "t.json"
    assert main(["run", str(tmp_path / "p.py"), "--device", "sim", "--trace", str(t)]) == 1
    assert [(e["op"], e["status"], e["message"]) for e in _events(t, "op_done")] == \
        [("0:0", 1, "queue shutting down"), ("0:1", 1, "queue shutting down")]


# -- bug15, bug14: difftest runs the module afresh per device; --json stdout is the report only ----------

RNG = ("import random\n"
       "print('module ran')\n"
       "R = random.Random(0)\n"
       "def main(dev):\n"
       "    data = R.randbytes(16)\n"
       "    buf = dev.allocator.allocate_buffer(16)\n"
       "    s = dev.create_semaphore()\n"
       "    dev.queue_update([], [(s, 1)], data, 0, buf, 0, 16)\n"
       "    s.wait(1)\n"
       "    return buf.map_read()\n")


def test_difftest_runs_the_module_afresh_for_each_device(tmp_path, capsys):
    (tmp_path / "rng.py").write_text(RNG)
    assert main(["difftest", str(tmp_path / "rng.py"), "--real", "local-sync", "--sim", "sim:sync",
                 "--runs", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("module ran\n") == 4  # reference, model, 2 real runs: once each
    assert out.endswith("result: OK\n")


def test_difftest_json_stdout_is_json_when_the_module_prints_on_load(tmp_path, capsys):
    (tmp_path / "rng.py").write_text(RNG)
    assert main(["difftest", str(tmp_path / "rng.py"), "--real", "local-sync", "--sim", "sim:sync", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["ok"] is True
    assert err.count("module ran\n") == 3


# -- bug06: the device's cost-model file is an input ---------------------------------------------------------

def test_run_refuses_to_write_over_the_devices_cost_model(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.json").write_text('{"launch_ns": 5000}')
    (tmp_path / "p.py").write_text(FILL)
    assert main(["run", "p.py", "--device", "sim:opencl?cost_model=m.json", "--trace", "m.json"]) == 2
    assert capsys.readouterr().err == \
        "halsim: error: --trace 'm.json' is the input file 'm.json': refusing to overwrite it\n"
    assert (tmp_path / "m.json").read_text() == '{"launch_ns": 5000}'


def test_run_refuses_to_write_over_a_schedules_cost_model(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.json").write_text('{"launch_ns": 5000}')
    (tmp_path / "s.toml").write_text('[device]\nuri = "sim:opencl"\noptions = { cost_model = "m.json" }\n'
                                     '[semaphores]\ns = 0\n[[host]]\ncall = "barrier"\nsignal = { s = 1 }\n')
    assert main(["run", "s.toml", "--perfetto", "m.json"]) == 2
    assert capsys.readouterr().err == \
        "halsim: error: --perfetto 'm.json' is the input file 'm.json': refusing to overwrite it\n"
    assert (tmp_path / "m.json").read_text() == '{"launch_ns": 5000}'


# -- bug16: a function whose call runs none of the program ------------------------------------------------

NEVER_RUNS = ("async def a(dev):\n    open('ran', 'w')\n"
              "def g(dev):\n    open('ran', 'w')\n    yield\n"
              "async def ag(dev):\n    open('ran', 'w')\n    yield\n")


@pytest.mark.parametrize("func, kind, verb", [("a", "an async function", "await"),
                                              ("g", "a generator function", "iterate"),
                                              ("ag", "an async function", "await")])
@pytest.mark.parametrize("command", [["run", "--device", "sim"], ["check"],
                                     ["difftest", "--real", "local-sync", "--sim", "sim"]])
def test_async_and_generator_programs_are_refused(tmp_path, capsys, monkeypatch, func, kind, verb, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.py").write_text(NEVER_RUNS)
    assert main([command[0], f"p.py:{func}", *command[1:]]) == 2
    assert capsys.readouterr().err == (f"halsim: error: program 'p.py': {func} is {kind}; halsim calls it once "
                                       f"and does not {verb} it: make it a plain function (def {func}(dev): ...)\n")
    assert not (tmp_path / "ran").exists()


# -- bug02: demo's trace file name from a URI with a path in it ----------------------------------------------

def test_demo_names_its_trace_after_any_uri(tmp_path, capsys):
    model = tmp_path / "models" / "model.json"
    model.parent.mkdir()
    model.write_text('{"launch_ns": 3000}')
    out = tmp_path / "out"
    assert main(["demo", "--device", f"sim:opencl?cost_model={model}", "--out", str(out)]) == 0
    name = ("sim_opencl_cost_model=" + str(model).replace("/", "_"))[:100] + ".trace.json"
    assert os.listdir(out) == [name]
    assert capsys.readouterr().out.splitlines()[-2:] == ["output check: OK", f"trace: {out / name}"]


# -- bug09: the program's folder is on sys.path while it loads and runs ---------------------------------------

def _two_files(folder, n, lazy=False):
    folder.mkdir()
    (folder / "helper.py").write_text(f"N = {n}\nCALLS = []\n")
    body = "    import helper as h\n    h.CALLS.append(1)\n    print('helper', h.N, helper.CALLS)\n" if lazy \
        else "    print('helper', helper.N)\n"
    (folder / "prog.py").write_text("import helper\ndef main(dev):\n" + body)
    return folder / "prog.py"


@pytest.mark.parametrize("command", [["run", "--device", "sim"], ["check"]])
def test_a_program_imports_the_module_beside_it_from_any_folder(tmp_path, capsys, command):
    prog = _two_files(tmp_path / "sub", 3)
    path = list(sys.path)
    assert main([command[0], str(prog), *command[1:]]) == 0
    assert capsys.readouterr().out.startswith("helper 3\n")
    assert sys.path == path and "helper" not in sys.modules


def test_programs_in_two_folders_each_import_their_own_helper(tmp_path, capsys):
    for n in (3, 4):
        assert main(["run", str(_two_files(tmp_path / f"d{n}", n)), "--device", "sim"]) == 0
        assert capsys.readouterr().out.startswith(f"helper {n}\n")


def test_a_helper_imported_when_the_function_runs_is_the_one_the_module_loaded(tmp_path, capsys):
    prog = _two_files(tmp_path / "sub", 5, lazy=True)
    assert main(["difftest", str(prog), "--real", "local-sync", "--sim", "sim", "--runs", "2"]) == 0
    # (one helper per run, shared by the module and its function; none carried to the next run)
    assert capsys.readouterr().out.count("helper 5 [1]\n") == 4
    assert "helper" not in sys.modules


# -- bug05: stdout's reader stops early ---------------------------------------------------------------------

@pytest.mark.parametrize("argv", [["devices"], ["check", "{trace}", "--json"], ["stats", "{trace}", "--json"]])
def test_a_reader_that_stops_early_is_no_error(tmp_path, argv):
    t = tmp_path / "t.json"
    (tmp_path / "p.py").write_text(FILL)
    assert main(["run", str(tmp_path / "p.py"), "--device", "sim", "--trace", str(t)]) == 0
    p = subprocess.Popen([sys.executable, "-m", "halsim.cli", *(a.format(trace=t) for a in argv)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # (before halsim writes anything: `halsim devices | true`)
    try:
        err = p.stderr.read().decode()
        assert p.wait(timeout=60) == 141
    finally:
        p.kill()
    assert err == ""


# -- bug07: --rules is checked before the program runs -------------------------------------------------------

def test_check_refuses_an_unknown_rule_before_running_the_program(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.py").write_text("def main(dev):\n    open('ran', 'w')\n")
    assert main(["check", "p.py", "--rules", "hazard", "hazrd"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("halsim: error: unknown rule or category 'hazrd' (known: deadlock.cycle, ")
    assert err.count("\n") == 1
    assert not (tmp_path / "ran").exists()



# -- bug09 and bug16 in a sweep (patch 01: halsim/campaigns/sweep.py, sweep_spec.py) -------------------------

@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_sweeps_program_imports_the_module_beside_it(tmp_path, capsys, jobs):
    _two_files(tmp_path / "sub", 3, lazy=True)
    (tmp_path / "spec.toml").write_text('[program]\npython = "sub/prog.py"\n[grid]\nseed = [0, 1]\n')
    import csv
    path = list(sys.path)
    assert main(["sweep", str(tmp_path / "spec.toml"), "--jobs", jobs, "-o", str(tmp_path / "r.csv")]) == 0
    assert ": 2 run, 0 already in " in capsys.readouterr().out
    with open(tmp_path / "r.csv") as f:
        assert [row["error"] for row in csv.DictReader(f)] == ["", ""]
    assert sys.path == path and "helper" not in sys.modules


def test_a_sweep_of_an_async_program_is_refused(tmp_path, capsys):
    (tmp_path / "p.py").write_text(NEVER_RUNS)
    (tmp_path / "spec.toml").write_text('[program]\npython = "p.py:a"\n[grid]\nseed = [0]\n')
    assert main(["sweep", str(tmp_path / "spec.toml"), "-o", str(tmp_path / "r.csv")]) == 2
    assert capsys.readouterr().err.endswith(
        f"program.python: '{tmp_path / 'p.py'}': a is an async function; halsim calls it once and does not "
        "await it: make it a plain function (def a(dev): ...)\n")


# -- difftest --real: a simulator is refused naming it; a reference driver gets its own model -------------

def test_difftest_real_must_not_be_a_simulator(tmp_path, capsys):
    (tmp_path / "p.py").write_text(FILL)
    assert main(["difftest", str(tmp_path / "p.py"), "--real", "sim:opencl"]) == 2
    assert capsys.readouterr().err == ("halsim: error: --real 'sim:opencl': a simulator, not a real device (opencl, "
                                       "cuda, metal, or a reference driver); the model to compare with is --sim\n")


def test_difftest_real_reference_driver_is_modelled_by_its_sim(tmp_path, capsys):
    from halsim.cli import _default_sim

    assert [_default_sim(u) for u in ("local-task", "local-sync?queues=1", "opencl?queues=2", "cuda:1")] == [
        "sim", "sim:sync?queues=1", "sim:opencl?queues=2", "sim:cuda"]
    (tmp_path / "p.py").write_text(FILL)
    assert main(["difftest", str(tmp_path / "p.py"), "--real", "local-sync"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "result: OK"
