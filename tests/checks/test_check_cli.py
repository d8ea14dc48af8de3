"""``halsim check``: exit 0 clean, 1 findings, 2 bad input (one line on stderr); JSON output."""

import json
import os
import subprocess
import sys

from halsim.cli import main
from reference import hal

CORPUS = os.path.join(os.path.dirname(__file__), "corpus")


def corpus(name):
    return os.path.join(CORPUS, name)


def test_clean_schedule_exits_0(capsys):
    assert main(["check", corpus("clean_cross_queue_with_semaphore.toml")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "no findings"
    assert out[0].endswith("clean_cross_queue_with_semaphore.toml on sim (2 ops, 2 commands)")


def test_findings_exit_1_with_one_line_each(capsys):
    assert main(["check", corpus("raw_missing_barrier.toml")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == [
        "error   hazard.raw [0:0.0, 0:0.1]: copy 0:0.1 reads buffer b0[0:1024) written by fill 0:0.0 in the same "
        "command buffer with no execution barrier between them (RAW)",
        "1 finding (1 error, 0 warnings)"]


def test_json_output(capsys):
    assert main(["check", corpus("deadlock_semaphore_cycle.toml"), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [(f["rule"], f["category"], f["severity"], f["ops"], f["semaphores"]) for f in doc["findings"]] == [
        ("deadlock.cycle", "deadlock", "error", ["0:0", "0:1"], ["s0", "s1"])]
    # lanes: host thread 0, two op chains, and the thread that joined the schedule and closed the device
    assert doc["stats"] == {"device": "sim", "ordering": "unordered", "ops": 2, "commands": 0, "lanes": 4}
    assert doc["notes"][0].startswith("host[2] (wait) on main thread raised ABORTED: deadlock")


def test_a_trace_file_is_checked_as_it_is(tmp_path, capsys):
    with hal.create_device("sim", queues=2) as dev:
        b = dev.allocator.allocate_buffer(16)
        s, t = dev.create_semaphore(), dev.create_semaphore()
        dev.queue_fill([], [(s, 1)], b, 0, 16, 1, 1, queue_affinity=1)
        dev.queue_fill([], [(t, 1)], b, 0, 16, 2, 1, queue_affinity=2)
        dev.wait_semaphores(hal.WaitMode.ALL, [(s, 1), (t, 1)])
        dev.trace.save(tmp_path / "t.json")
    assert main(["check", str(tmp_path / "t.json"), "--json", "--rules", "hazard"]) == 1
    assert [f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]] == ["hazard.waw"]
    assert main(["check", str(tmp_path / "t.json"), "--rules", "semaphore"]) == 0


def test_a_python_program_runs_on_sim_and_its_deadlock_is_a_finding(tmp_path, capsys):
    prog = tmp_path / "prog.py"
    prog.write_text(
        "from reference import hal\n"
        "def main(dev):\n"
        "    a, b = dev.create_semaphore(), dev.create_semaphore()\n"
        "    dev.queue_barrier([(a, 1)], [(b, 1)])\n"
        "    dev.queue_barrier([(b, 1)], [(a, 1)])\n"
        "    b.wait(1)\n"
        "def fine(dev):\n"
        "    s = dev.create_semaphore()\n"
        "    dev.queue_barrier([], [(s, 1)])\n"
        "    s.wait(1)\n")
    assert main(["check", str(prog)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "  note: the program deadlocked: deadlock: host thread 0 in wait_semaphores(all) can never return"
    assert out[2].startswith("error   deadlock.cycle [0:0, 0:1]: semaphore cycle s0 -> s1")
    assert main(["check", f"{prog}:fine", "--device", "sim:metal"]) == 0


def test_bad_input_exits_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[host]]\ncall = "fill"\ntarget = "nope"\n')
    notrace = tmp_path / "x.json"
    notrace.write_text('{"format":"halsim-trace","version":99,"header":{},"events":[\n]}\n')
    cases = [
        [str(bad)],
        [str(tmp_path / "missing.toml")],
        [str(notrace)],
        [str(tmp_path / "prog.txt")],
        [corpus("clean_timeline_chain.toml"), "--rules", "hazards"],
        [corpus("clean_timeline_chain.toml"), "--device", "nosuch"],
        [str(tmp_path / "p.py")],
    ]
    for argv in cases:
        assert main(["check", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("halsim: error: ") and err.count("\n") == 1, (argv, err)


def test_device_override_runs_the_schedule_elsewhere(capsys):
    # the same file is clean on an in-order Metal queue and racy on an IREE-semantics one
    assert main(["check", corpus("clean_same_queue_in_order_metal.toml")]) == 0
    assert main(["check", corpus("clean_same_queue_in_order_metal.toml"), "--device", "sim"]) == 1
    assert "hazard.raw" in capsys.readouterr().out


def test_demo_report_writes_the_human_report(tmp_path):
    from halsim.checks.cli import demo_report

    with hal.create_device("sim") as dev:
        s = dev.create_semaphore()
        dev.queue_barrier([], [(s, 1)])
        dev.queue_barrier([], [(s, 2)])
        s.wait(2)
    path = str(tmp_path / "x.check.txt")
    assert demo_report(dev.trace, path) == f"1 finding (1 error, 0 warnings): {path}"
    lines = open(path).read().splitlines()
    assert lines[0] == "halsim check: x.trace.json on sim (2 ops, 0 commands)"
    assert lines[1].startswith("error   semaphore.racing_signals [0:0, 0:1]: ")


HANG = ("import threading\n\n"
        "def main(dev):\n"
        "    s, never = dev.create_semaphore(), dev.create_semaphore()\n"
        "    dev.queue_barrier([(never, 1)], [(s, 1)])\n"
        "    t = threading.Thread(target=lambda: s.wait(1), name='waiter')\n"
        "    t.start()\n"
        "    t.join()\n")
CYCLE = ('[semaphores]\na = 0\nb = 0\n\n'
         '[[host]]\ncall = "barrier"\nwait = { a = 1 }\nsignal = { b = 1 }\n\n'
         '[[host]]\ncall = "barrier"\nwait = { b = 1 }\nsignal = { a = 1 }\n\n'
         '[[host]]\ncall = "wait"\nwait = { b = 1 }\n')


def check_on_local_task(path, source: str, timeout: str, *more):
    """Write ``source`` to ``path`` and run ``halsim check PATH --device local-task --timeout T`` in a
    subprocess (a timed-out check leaves with os._exit): its exit status, stdout and stderr."""
    path.write_text(source)
    r = subprocess.run([sys.executable, "-m", "halsim.cli", "check", str(path), "--device", "local-task",
                        "--timeout", timeout, *more], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def test_a_program_stuck_on_local_task_has_its_trace_so_far_checked_with_timeout(tmp_path):
    """local-task waits forever for a value nobody signals (as IREE does): with --timeout the
    check gets the trace so far and finds why."""
    code, out, err = check_on_local_task(tmp_path / "hang.py", HANG, "0.5", "--json")
    assert code == 1, err
    doc = json.loads(out)
    assert [(f["rule"], f["ops"]) for f in doc["findings"]] == [("deadlock.unsignaled", ["0:0"])]
    assert doc["notes"][0] == "the program did not finish within 0.5 s of real time (the trace so far is " \
                              "checked); its threads were:"
    assert "  thread 'waiter': in Semaphore.wait at hang.py:6" in doc["notes"]

    code, out, err = check_on_local_task(tmp_path / "sleeps.py", "import time\n\ndef main(dev):\n"
                                         "    dev.create_semaphore()\n    time.sleep(30)\n", "0.3")
    assert code == 124, err
    assert "no findings" in out and "  note:   thread 'halsim program': in sleeps.py:5" in out


def test_a_non_positive_timeout_is_bad_input(capsys):
    assert main(["check", corpus("clean_cross_queue_with_semaphore.toml"), "--timeout", "-1"]) == 2
    assert capsys.readouterr().err == "halsim: error: --timeout -1: must be > 0 seconds\n"


def test_a_schedule_stuck_on_local_task_is_checked_with_timeout(tmp_path):
    code, out, err = check_on_local_task(tmp_path / "dl.toml", CYCLE, "0.5", "--json")
    assert (code, [(f["rule"], f["ops"]) for f in json.loads(out)["findings"]]) == \
        (1, [("deadlock.cycle", ["0:0", "0:1"])]), err
    doc = json.loads(out)
    assert doc["notes"][0].startswith("the schedule did not finish within 0.5 s of real time")
    assert [n for n in doc["notes"] if "schedule main" in n][0].endswith(", at schedule step host[2] (wait)")


def test_a_program_that_raises_has_its_trace_so_far_checked(tmp_path, capsys):
    """An assertion on bytes read back too early: the race that explains it is reported (it used to
    be bad input: exit 2, nothing checked)."""
    prog = tmp_path / "race_assert.py"
    prog.write_text("def main(dev):\n"
                    "    buf = dev.allocator.allocate_buffer(64)\n"
                    "    s = dev.create_semaphore()\n"
                    "    dev.queue_fill([], [(s, 1)], buf, 0, 64, 7, 1)\n"
                    "    data = buf.map_read(0, 64)  # no wait on s: a race\n"
                    "    assert data == bytes([7]) * 64, 'wrong bytes'\n")
    assert main(["check", str(prog)]) == 1
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert out[1] == "  note: the program raised AssertionError: wrong bytes"
    assert out[2].startswith("error   hazard.raw [0:0.0, host:0]: map_read by host thread 0 reads buffer b0[0:64)")
    err = captured.err.splitlines()
    assert err[1] == f'  File "{prog}", line 6, in main'
    assert err[-1] == "halsim: the program raised AssertionError: wrong bytes"
