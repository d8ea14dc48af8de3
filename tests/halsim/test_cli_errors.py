"""Command-line robustness: a program's sys.exit, outputs that are inputs, threads a program leaves
running, --json with a chatty program, bad numbers, malformed traces and unwritable outputs — each
one clear line on stderr and a documented exit status, never a traceback or a hang."""

import json
import os
import subprocess
import sys

import pytest

from halsim.cli import main
from reference.trace import Trace

RACY_EXIT = ("import sys\n"
             "def main(dev):\n"
             "    b = dev.allocator.allocate_buffer(16)\n"
             "    s = dev.create_semaphore()\n"
             "    dev.queue_fill([], [(s, 1)], b, 0, 16, 7, 4)\n"
             "    b.map_read()\n"
             "    s.wait(1)\n"
             "    sys.exit({code})\n")
FILL = ("def main(dev):\n"
        "    s = dev.create_semaphore()\n"
        "    b = dev.allocator.allocate_buffer(8)\n"
        "    dev.queue_fill([], [(s, 1)], b, 0, 8, 7, 1)\n"
        "    s.wait(1, 10)\n")
LEAK = ("import threading\n"
        "def main(dev):\n"
        "    s = dev.create_semaphore()\n"
        "    threading.Thread(target=lambda: s.wait(1), name='waiter', daemon=False).start()\n")


def halsim(*argv, timeout=60):
    return subprocess.run([sys.executable, "-m", "halsim.cli", *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def prog(tmp_path):
    def make(text, name="prog.py"):
        path = tmp_path / name
        path.write_text(text)
        return path
    return make


@pytest.fixture
def trace(tmp_path, prog):
    path = tmp_path / "t.json"
    assert main(["run", str(prog(FILL)), "--device", "sim", "--trace", str(path)]) == 0
    return path


# -- 1. sys.exit in the program ------------------------------------------------------------------------

def test_run_sys_exit_0_is_the_end_of_the_program(prog, tmp_path, capsys):
    trace = tmp_path / "t.json"
    assert main(["run", str(prog(RACY_EXIT.format(code=0))), "--device", "sim", "--trace", str(trace)]) == 0
    assert "operations: 1 (1 fill)" in capsys.readouterr().out


def test_run_sys_exit_3_is_a_failed_program(prog, tmp_path, capsys):
    p = prog(RACY_EXIT.format(code=3))
    trace = tmp_path / "t.json"
    assert main(["run", str(p), "--device", "sim", "--trace", str(trace)]) == 1
    assert capsys.readouterr().err == f"halsim: {p} on sim called sys.exit(3)\n"
    assert [op["kind"] for op in Trace.load(trace).operations()] == ["fill"]  # saved either way


def test_difftest_sys_exit(prog, capsys):
    assert main(["difftest", str(prog(FILL + "    raise SystemExit(0)\n")), "--real", "local-sync", "--sim", "sim"]) == 0
    assert "result: OK" in capsys.readouterr().out
    p = prog(RACY_EXIT.format(code=3), "three.py")
    assert main(["difftest", str(p), "--real", "local-sync", "--sim", "sim"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == f"halsim: {p} (difftest) called sys.exit(3)"


def test_sys_exit_on_import_is_bad_input(prog, capsys):
    p = prog("import sys\nsys.exit(4)\n")
    assert main(["run", str(p)]) == 2
    assert capsys.readouterr().err == f"halsim: error: program {str(p)!r} failed to load: it called sys.exit(4) on import\n"


def test_sweep_python_program_sys_exit_is_a_failed_row(prog, tmp_path, capsys):
    prog(RACY_EXIT.format(code=3), "x.py")
    spec = tmp_path / "spec.toml"
    spec.write_text('[program]\npython = "x.py:main"\n[grid]\nseed = [1]\n')
    out = tmp_path / "r.csv"
    assert main(["sweep", str(spec), "-q", "--no-plot", "--out", str(out)]) == 0
    assert "1 failed" in capsys.readouterr().out
    assert "ProgramExit: sys.exit(3)" in out.read_text()


# -- 2. outputs that are inputs --------------------------------------------------------------------------

def test_run_trace_over_the_program_is_refused(prog, capsys):
    p = prog(FILL)
    before = p.read_text()
    assert main(["run", str(p), "--device", "sim", "--trace", str(p)]) == 2
    assert capsys.readouterr().err == f"halsim: error: --trace {str(p)!r} is the input file {str(p)!r}: " \
                                      "refusing to overwrite it\n"
    assert p.read_text() == before


def test_export_over_its_input_and_two_outputs_in_one_file(trace, tmp_path, capsys):
    before = trace.read_bytes()
    assert main(["export", str(trace), "--chrome", str(trace)]) == 2
    assert capsys.readouterr().err == f"halsim: error: --chrome {str(trace)!r} is the input file {str(trace)!r}: " \
                                      "refusing to overwrite it\n"
    assert trace.read_bytes() == before
    x = tmp_path / "x.out"
    assert main(["export", str(trace), "--perfetto", str(x), "--chrome", str(x)]) == 2
    assert capsys.readouterr().err == f"halsim: error: --chrome {str(x)!r} is also --perfetto: give each output " \
                                      "its own file\n"
    assert not x.exists()


def test_calibrate_over_its_input(trace, capsys):
    before = trace.read_bytes()
    assert main(["calibrate", str(trace), "-o", str(trace)]) == 2
    assert capsys.readouterr().err == f"halsim calibrate: error: -o {str(trace)!r} is the input file " \
                                      f"{str(trace)!r}: refusing to overwrite it\n"
    assert trace.read_bytes() == before


# -- 3. threads the program leaves running ---------------------------------------------------------------

@pytest.mark.parametrize("argv", [["run", "--device", "local-task", "--timeout", "5"],
                                  ["run", "--device", "local-task"],
                                  ["check", "--device", "local-task", "--timeout", "5"]])
def test_leftover_program_threads_do_not_hold_the_process(prog, argv, tmp_path):
    p = prog(LEAK)
    r = halsim(argv[0], p, *argv[1:], timeout=60)
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines()[-2:] == ["halsim: 1 program thread still running; exiting without waiting for it:",
                                          "  thread 'waiter': in Semaphore.wait at prog.py:4"]


# -- 4. --json with a program that prints ----------------------------------------------------------------

def test_difftest_json_is_the_whole_stdout(prog, capsys):
    p = prog(FILL.replace("def main(dev):\n", "def main(dev):\n    print('hello from the program')\n"))
    assert main(["difftest", str(p), "--real", "local-sync", "--sim", "sim", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["ok"] is True
    assert "hello from the program" in err


# -- 5., 6d. numbers ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_diff_tolerance_must_be_finite(trace, value, capsys):
    assert main(["diff", str(trace), str(trace), "--tolerance", value]) == 2
    assert capsys.readouterr().err == f"halsim: error: --tolerance {float(value)}: must be a finite number >= 0\n"


def test_difftest_tolerance_inf(prog, capsys):
    assert main(["difftest", str(prog(FILL)), "--real", "local-sync", "--sim", "sim", "--tolerance", "inf"]) == 2
    assert capsys.readouterr().err == "halsim: error: --tolerance inf: must be a finite number >= 0\n"


def test_difftest_out_under_a_file_is_refused_before_any_run(prog, tmp_path, capsys):
    """--out is created after the runs: a folder that cannot be made is refused before them."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    out = afile / "traces"
    assert main(["difftest", str(prog(FILL)), "--real", "local-sync", "--sim", "sim", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"halsim: error: --out {str(out / 'reference.trace.json')!r}: {str(afile)!r} is not a directory\n"
    assert "difftest:" not in err   # (no progress line: nothing ran)


@pytest.mark.parametrize("value", ["inf", "1e10"])
def test_huge_timeouts_mean_no_limit(prog, value, capsys):
    assert main(["run", str(prog(FILL)), "--device", "local-task", "--timeout", value]) == 0
    assert capsys.readouterr().err == ""


# -- 6a. malformed traces ------------------------------------------------------------------------------------

def _bad_trace(tmp_path, events, header='{"device":"sim","clock":"virtual"}', version="1"):
    path = tmp_path / "bad.json"
    path.write_text(f'{{"format":"halsim-trace","version":{version},"header":{header},"events":[\n'
                    + ",\n".join(events) + "\n]}\n")
    return path


SEM = '{"ev":"semaphore","t":0,"sem":"s0","initial":0,"thread":0}'
BAD_EVENTS = [
    ('["ev","op"]', "event 1: expected an event object, got a list"),
    ('{"ev":"op","t":"x","op":"0:0","kind":"fill","wait":[],"signal":[]}',
     "event 1: op event: 't' must be a non-negative integer (nanoseconds), got 'x'"),
    ('{"ev":"op","t":-5,"op":"0:0","kind":"fill","wait":[],"signal":[]}',
     "event 1: op event: 't' must be a non-negative integer (nanoseconds), got -5"),
    ('{"ev":"signal","t":NaN,"sem":"s0","value":1}',
     "event 1: signal event: 't' must be a non-negative integer (nanoseconds), got nan"),
    ('{"ev":"signal","t":1e400,"sem":"s0","value":1}',
     "event 1: signal event: 't' must be a non-negative integer (nanoseconds), got inf"),
    ('{"ev":"op","t":5,"op":null,"kind":"fill","wait":[],"signal":[]}', "event 1: op event: 'op' must be a string, got null"),
]


@pytest.mark.parametrize("command", [["stats"], ["check"], ["export", "--chrome", "OUT"], ["plot", "-o", "OUT.png"],
                                     ["diff", "SAME"], ["calibrate", "-o", "OUT.json"]])
@pytest.mark.parametrize("event,problem", BAD_EVENTS)
def test_malformed_events_are_one_line_naming_file_event_and_field(tmp_path, capsys, command, event, problem):
    path = _bad_trace(tmp_path, [SEM, event])
    argv = [command[0], str(path)] + [str(path) if a == "SAME" else str(tmp_path / a) if a.startswith("OUT")
                                      else a for a in command[1:]]
    assert main(argv) == 2
    prefix = "halsim calibrate: error: " if command[0] == "calibrate" else "halsim: error: "
    assert capsys.readouterr().err == f"{prefix}{path}:3: {problem}\n"


@pytest.mark.parametrize("header,version,message", [
    ("5", "1", "the trace's 'header' must be an object, got 5"),
    ('{"device":"sim"}', "true", "trace version true not supported (this reader: 1)"),
])
def test_malformed_header_and_version(tmp_path, capsys, header, version, message):
    path = _bad_trace(tmp_path, [SEM], header=header, version=version)
    for argv in (["stats", str(path)], ["check", str(path)]):
        assert main(argv) == 2
        assert capsys.readouterr().err == f"halsim: error: {path}:1: {message}\n"


def test_findings_that_are_binary(trace, tmp_path, capsys):
    binary = tmp_path / "f.json"
    binary.write_bytes(b"\xff\xfe\x00\x81garbage")
    assert main(["export", str(trace), "--chrome", str(tmp_path / "c.json"), "--findings", str(binary)]) == 2
    assert capsys.readouterr().err == f"halsim: error: --findings {str(binary)!r}: not a JSON file (not UTF-8 text)\n"


# -- 6c. unwritable outputs -----------------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["dir", "missing", "under_a_file"])
def test_run_outputs_that_cannot_be_written(prog, tmp_path, capsys, where):
    p = prog(FILL)
    path = {"dir": tmp_path, "missing": tmp_path / "nope" / "t.json",
            "under_a_file": tmp_path / "prog.py" / "t.json"}[where]
    for flag in ("--trace", "--perfetto", "--plot"):
        target = path if flag != "--plot" or where == "dir" else path.with_suffix(".png")
        if flag == "--plot" and where == "dir":
            continue  # (a folder has no .png name)
        assert main(["run", str(p), "--device", "sim", flag, str(target)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"halsim: error: {flag} {str(target)!r}: "), err
        assert ".tmp-" not in err


def test_atomic_write_names_the_users_path(tmp_path):
    from reference.trace.atomic import atomic_write
    with pytest.raises(FileNotFoundError) as e:
        atomic_write(tmp_path / "nope" / "x.json", lambda f: f.write(b"x"))
    assert e.value.filename == str(tmp_path / "nope" / "x.json")
    with pytest.raises(IsADirectoryError) as e:
        atomic_write(tmp_path, lambda f: f.write(b"x"))
    assert e.value.filename == str(tmp_path)
    assert os.listdir(tmp_path) == []


def test_atomic_write_failing_midway_names_the_users_path_and_keeps_the_old_file(tmp_path):
    """A full disk fails the write itself (ENOSPC, from a write or the flush): the error names the
    path asked for, the previous file stays, no temporary file is left."""
    import errno

    from reference.trace.atomic import atomic_write
    path = tmp_path / "out.json"
    path.write_bytes(b"old")

    def full(f):
        f.write(b"partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    with pytest.raises(OSError) as e:
        atomic_write(path, full)
    assert (e.value.errno, e.value.filename) == (errno.ENOSPC, str(path))
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["out.json"]


def test_demo_out_that_is_a_file(tmp_path, capsys):
    f = tmp_path / "f"
    f.write_text("x")
    assert main(["demo", "--out", str(f)]) == 2
    assert capsys.readouterr().err == f"halsim: error: --out {str(f)!r}: File exists\n"


def test_sweep_plot_in_a_missing_folder_is_refused_before_any_point(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text('[program]\ngenerator = { size = 4 }\n[grid]\nseed = [0]\n')
    out = tmp_path / "r.csv"
    plot = tmp_path / "nope" / "p.png"
    assert main(["sweep", str(spec), "-q", "--out", str(out), "--plot", str(plot)]) == 2
    assert capsys.readouterr().err == f"halsim: error: --plot {str(plot)!r}: no such directory " \
                                      f"{str(tmp_path / 'nope')!r}\n"
    assert not out.exists()


# -- 7. a schedule step that raises a Python exception ---------------------------------------------------------

@pytest.mark.parametrize("step,message", [
    ('call = "sleep"\nseconds = 1e300', "host[0].seconds: must be at most 9.223e+09 seconds (what a thread can "
                                        "wait for), got 1e+300"),
    ('call = "wait"\ntimeout = 1e12\nwait = { s = 1 }', "host[0].timeout: must be at most 9.223e+09 seconds (what "
                                                         "a thread can wait for), got 1000000000000.0"),
    ('call = "sleep"\nseconds = nan', "host[0].seconds: expected a non-negative number, got nan"),
])
def test_schedule_numbers_past_what_a_thread_can_wait_are_bad_input(tmp_path, capsys, step, message):
    path = tmp_path / "s.toml"
    path.write_text(f"[semaphores]\ns = 0\n[[host]]\n{step}\n")
    assert main(["check", str(path)]) == 2
    assert capsys.readouterr().err == f"halsim: error: {path}: {message}\n"


def test_a_step_that_raises_a_python_exception_is_recorded(sleep_steps_raise):
    from halsim.schedule import parse_schedule, run_schedule
    s = parse_schedule({"semaphores": {"s": 0}, "host": [{"call": "sleep", "seconds": 1},
                                                          {"call": "signal", "semaphore": "s", "value": 1}]})
    result = run_schedule(s)
    assert [str(e) for e in result.errors] == [
        "host[0] (sleep) on main thread raised OverflowError: timeout value is too large (the thread stopped)"]
    assert list(result.trace.events("signal")) == []  # the thread stopped there


# -- 8. a failed sweep leaves no results file ------------------------------------------------------------------

def test_a_sweep_that_fails_before_its_first_point_leaves_no_file(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text('[program]\ngenerator = { size = 4 }\n[grid]\nseed = [0]\n')
    out = tmp_path / "d1.csv"
    assert main(["sweep", str(spec), "-q", "--dask", "bogus", "--out", str(out)]) == 2
    assert capsys.readouterr().err == "halsim: error: --dask 'bogus': expected 'local' or a scheduler address " \
                                      "tcp://host:port\n"
    assert not out.exists()
    assert main(["sweep", str(spec), "-q", "--no-plot", "--out", str(out)]) == 0  # the retry is not blocked


# -- 9. fuzz option ranges ------------------------------------------------------------------------------------

def test_fuzz_queues_out_of_the_devices_range(capsys):
    assert main(["fuzz", "--programs", "3", "--queues", "1000", "-q"]) == 2
    assert capsys.readouterr().err == "halsim: error: --queues 1000: option queues=1000 must be an int in [1, 64]\n"


# -- 10. run and difftest take schedules -----------------------------------------------------------------------

SCHEDULE = '[semaphores]\ns = 0\n[buffers]\na = 64\n[[host]]\ncall = "fill"\ntarget = "a"\nsignal = { s = 1 }\n' \
           '[[host]]\ncall = "wait"\nwait = { s = 1 }\n'


def test_run_and_difftest_a_schedule(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text(SCHEDULE)
    trace = tmp_path / "t.json"
    assert main(["run", str(path), "--trace", str(trace)]) == 0
    assert f"{path} on sim (sim, clock virtual)" in capsys.readouterr().out
    assert [op["kind"] for op in Trace.load(trace).operations()] == ["fill"]
    assert main(["run", str(path), "--device", "local-task"]) == 0
    assert main(["difftest", str(path), "--real", "local-sync", "--sim", "sim"]) == 0
    assert "result: OK" in capsys.readouterr().out


def test_run_a_schedule_whose_step_fails(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text('[semaphores]\ns = 0\n[[host]]\ncall = "signal"\nsemaphore = "s"\nvalue = 0\n')
    assert main(["run", str(path)]) == 1
    assert capsys.readouterr().err == f"halsim: {path} on sim: host[0] (signal) on main thread raised " \
                                      "INVALID_ARGUMENT: semaphore s0 already signaled past 0 (current value 0); values must strictly " \
                                      "increase\n"


# -- 11. every subcommand's --help teaches ---------------------------------------------------------------------

@pytest.mark.parametrize("command", ["demo", "run", "devices", "difftest", "export", "stats", "plot", "diff",
                                     "check", "calibrate", "sweep", "fuzz"])
def test_every_subcommand_has_a_description_and_an_example(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    body = out.split("\n\n")
    assert len(body) >= 3 and not body[1].startswith(("positional", "options")), out  # a description paragraph
    assert f"halsim {command}" in out.split("Example", 1)[1], out


# -- 12. smaller ----------------------------------------------------------------------------------------------------

def test_diff_plot_name_is_checked_before_the_report(trace, capsys):
    assert main(["diff", str(trace), str(trace), "--json", "--plot", "d.jpg"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "halsim: error: --plot 'd.jpg': expected a .png or .svg file name\n"


def test_plot_of_a_trace_without_rows_warns_nothing(tmp_path):
    path = _bad_trace(tmp_path, [SEM])
    r = halsim("plot", path, "-o", tmp_path / "p.png")
    assert r.returncode == 0 and r.stderr == "", r.stderr


@pytest.mark.parametrize("command", ["run", "check"])
def test_main_with_the_wrong_signature(prog, capsys, command):
    p = prog("def main():\n    pass\n")
    assert main([command, str(p)]) == 2
    assert capsys.readouterr().err == f"halsim: error: program {str(p)!r}: main() must take one argument, the " \
                                      "device (e.g. def main(dev): ...)\n"


def test_sweep_plot_leaves_out_points_without_x_and_labels_an_unset_hue(tmp_path):
    from halsim.campaigns.sweep import plot_results
    rows = [{"queues": "1", "event_pool_capacity": "2", "makespan_ns": "10", "error": ""},
            {"queues": "2", "event_pool_capacity": "2", "makespan_ns": "8", "error": ""},
            {"queues": "1", "event_pool_capacity": "", "makespan_ns": "12", "error": ""},
            {"queues": "", "event_pool_capacity": "", "makespan_ns": "99", "error": ""}]   # a [sample] point
    line = plot_results(rows, {"x": "queues", "y": "makespan_ns", "hue": "event_pool_capacity"},
                        str(tmp_path / "p.png"))
    assert line == f"plot: {tmp_path / 'p.png'} (2 lines, 2 x values)"
