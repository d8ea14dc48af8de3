"""The ``halsim`` command line: demo, run, devices; bad input → one line on stderr and exit code 2."""

import json
import os
import subprocess
import sys

import pytest

from halsim.cli import main
from reference.trace import Trace


def test_demo_compares_metal_async_and_legacy_sync(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "a 6-stage pipeline on sim:metal, 2 queues" in out
    assert "output check: OK (both modes)" in out
    spans = {}
    for mode in ("async", "legacy_sync"):
        trace = Trace.load(tmp_path / f"sim_metal.{mode}.trace.json")
        assert trace.header["options"]["legacy_sync"] == (mode == "legacy_sync")
        ops = trace.operations()
        assert len(ops) == 19 and all(o["status"] == 0 for o in ops)
        assert {o["queue"] for o in ops} == {0, 1}
        spans[mode] = max(o["end"] for o in ops) - min(o["t"] for o in ops)
        assert f"  {mode:<12} {spans[mode] / 1e3:>7.1f} us" in out
    assert spans["legacy_sync"] > spans["async"]
    assert f"legacy_sync / async makespan: {spans['legacy_sync'] / spans['async']:.2f}x" in out


def test_demo_on_a_device_writes_a_trace_and_checks_outputs(tmp_path, capsys):
    assert main(["demo", "--device", "local-task", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "operations: 6 (1 copy, 3 execute, 1 host_call, 1 update)" in out
    assert "output check: OK" in out
    trace = Trace.load(tmp_path / "local-task.trace.json")
    ops = trace.operations()
    assert [o["kind"] for o in ops] == ["host_call", "copy", "execute", "execute", "execute", "update"]
    assert all(o["status"] == 0 for o in ops)


def test_demo_on_local_sync(tmp_path, capsys):
    assert main(["demo", "--device", "local-sync", "--out", str(tmp_path)]) == 0
    assert "output check: OK" in capsys.readouterr().out


def test_run_program(tmp_path, capsys):
    prog = tmp_path / "prog.py"
    prog.write_text(
        "def pipeline(dev):\n"
        "    s = dev.create_semaphore()\n"
        "    b = dev.allocator.allocate_buffer(8)\n"
        "    dev.queue_fill([], [(s, 1)], b, 0, 8, 7, 1)\n"
        "    s.wait(1, 10)\n")
    trace = tmp_path / "t.json"
    assert main(["run", f"{prog}:pipeline", "--device", "local-sync", "--trace", str(trace)]) == 0
    assert "operations: 1 (1 fill)" in capsys.readouterr().out
    assert json.loads(trace.read_text())["header"]["device"] == "local-sync"
    # without --trace: the same summary, nothing written (it used to print nothing at all)
    assert main(["run", f"{prog}:pipeline", "--device", "sim"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [f"{prog}:pipeline on sim (sim, clock virtual)", "  operations: 1 (1 fill)",
                       "  makespan:   4.5 us (first enqueue to last completion)"]
    assert not any(line.startswith("trace:") for line in out) and os.listdir(tmp_path) == ["prog.py", "t.json"]


@pytest.mark.parametrize("argv,needle", [
    (["run", "missing.py"], "no such file"),
    (["run", "prog.txt"], "expected file.py[:function]"),
    (["demo", "--device", "nope"], "no driver named 'nope'"),
    (["demo", "--device", "local-task?bogus=1"], "unknown option 'bogus'"),
])
def test_bad_input_is_one_line_and_exit_2(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and err.startswith("halsim: error: ")


@pytest.mark.parametrize("command", [["run", "--device", "sim"], ["difftest", "--real", "local-sync", "--sim", "sim:sync"]])
def test_a_program_that_raises_shows_its_own_traceback_then_one_line_and_exits_1(tmp_path, capsys, command):
    prog = tmp_path / "prog.py"
    prog.write_text("def helper():\n    raise ValueError('boom')\n\n\ndef main(dev):\n"
                    "    dev.create_semaphore()\n    helper()\n")
    trace = tmp_path / "t.json"
    extra = ["--trace", str(trace)] if command[0] == "run" else []
    assert main([command[0], str(prog), *command[1:], *extra]) == 1
    err = capsys.readouterr().err.splitlines()
    start = err.index("Traceback (most recent call last):")
    assert err[start + 1] == f'  File "{prog}", line 7, in main'  # the program's frames only
    assert [line for line in err[start:] if line.startswith("  File ")] == [
        f'  File "{prog}", line 7, in main', f'  File "{prog}", line 2, in helper']
    what = f"{prog} on sim" if command[0] == "run" else f"{prog} (difftest)"
    assert err[-2:] == ["ValueError: boom", f"halsim: {what} raised ValueError: boom"]
    if command[0] == "run":
        assert [e["ev"] for e in Trace.load(str(trace)).events("semaphore")] == ["semaphore"]  # saved


def test_program_errors(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("raise ValueError('boom')\n")
    assert main(["run", str(bad)]) == 2
    assert "failed to load: ValueError: boom" in capsys.readouterr().err
    ok = tmp_path / "ok.py"
    ok.write_text("x = 1\n")
    assert main(["run", f"{ok}:nothere"]) == 2
    assert "has no function 'nothere'" in capsys.readouterr().err


def test_console_script_help_and_no_command():
    r = subprocess.run([sys.executable, "-m", "halsim.cli", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "halsim demo" in r.stdout
    r = subprocess.run([sys.executable, "-m", "halsim.cli"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    r = subprocess.run([sys.executable, "-m", "halsim.cli", "frobnicate"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_a_deadlocked_program_is_reported_with_its_trace(tmp_path, capsys):
    prog = tmp_path / "dl.py"
    prog.write_text("def main(dev):\n    a, b = dev.create_semaphore(), dev.create_semaphore()\n"
                    "    dev.queue_barrier([(a, 1)], [(b, 1)])\n    dev.queue_barrier([(b, 1)], [(a, 1)])\n"
                    "    b.wait(1)\n")
    trace = tmp_path / "t.json"
    assert main(["run", f"{prog}:main", "--device", "sim", "--trace", str(trace)]) == 1
    err = capsys.readouterr().err
    assert f"halsim: {prog}:main on sim raised ABORTED: deadlock" in err
    assert "two-semaphore cycle s0 -> s1: 0:0 waits s0>=1, signaled by 0:1" in err
    assert [op["op"] for op in Trace.load(trace).operations()] == ["0:0", "0:1"]


@pytest.mark.parametrize("device", ["sim:metal", "sim:opencl"])
def test_demo_on_devices_with_in_order_waits_submits_producers_first(device, tmp_path, capsys):
    assert main(["demo", "--device", device, "--out", str(tmp_path)]) == 0
    assert "output check: OK" in capsys.readouterr().out


HANG = ("import threading\n\n"
        "def wait(s, errors):\n"
        "    try:\n"
        "        s.wait(1)\n"
        "    except Exception as e:\n"
        "        errors.append(e)\n\n"
        "def main(dev):\n"
        "    s, never = dev.create_semaphore(), dev.create_semaphore()\n"
        "    dev.queue_barrier([(never, 1)], [(s, 1)])\n"
        "    errors = []\n"
        "    t = threading.Thread(target=wait, args=(s, errors), name='waiter')\n"
        "    t.start()\n"
        "    t.join()\n"
        "    if errors:\n"
        "        raise errors[0]\n")
WAIT_LINE, JOIN_LINE = 5, 15  # of s.wait(1) and t.join() in HANG


def test_run_timeout_reports_where_the_threads_are_saves_the_trace_and_exits_124(tmp_path):
    """local-task waits forever for a value nobody signals (as IREE does): --timeout ends the command
    (a subprocess: it leaves with os._exit, since the stuck threads cannot be stopped)."""
    prog = tmp_path / "hang.py"
    prog.write_text(HANG)
    trace = tmp_path / "t.json"
    r = subprocess.run([sys.executable, "-m", "halsim.cli", "run", str(prog), "--device", "local-task",
                        "--timeout", "0.5", "--trace", str(trace)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 124, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0] == f"halsim: {prog} on local-task did not finish within 0.5 s of real time; its threads were:"
    assert lines[1] == f"  thread 'halsim program': in Thread.join at hang.py:{JOIN_LINE}"
    assert f"  thread 'waiter': in Semaphore.wait at hang.py:{WAIT_LINE}" in lines
    assert lines[-1] == f"halsim: the trace so far: {trace}"
    assert [op["kind"] for op in Trace.load(trace).operations()] == ["barrier"]


def test_run_timeout_is_not_needed_on_the_sim_and_must_be_positive(tmp_path, capsys):
    prog = tmp_path / "hang.py"
    prog.write_text(HANG)
    assert main(["run", str(prog), "--device", "sim", "--timeout", "30"]) == 1  # the waiter got the report
    assert f"halsim: {prog} on sim raised ABORTED: deadlock: host thread 1 in wait_semaphores(all) can " \
           "never return" in capsys.readouterr().err
    assert main(["run", str(prog), "--timeout", "0"]) == 2
    assert capsys.readouterr().err == "halsim: error: --timeout 0: must be > 0 seconds\n"


def test_difftest_timeout(tmp_path):
    prog = tmp_path / "hang.py"
    prog.write_text(HANG)
    r = subprocess.run([sys.executable, "-m", "halsim.cli", "difftest", str(prog), "--real", "local-sync",
                        "--sim", "sim", "--reference", "local-task", "--timeout", "0.5"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 124, r.stderr
    assert f"halsim: difftest of {prog} did not finish within 0.5 s of real time; its threads were:" in r.stderr
    assert f"  thread 'waiter': in Semaphore.wait at hang.py:{WAIT_LINE}" in r.stderr
