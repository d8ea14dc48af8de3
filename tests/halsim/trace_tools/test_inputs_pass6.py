"""Pass 6 of the input files the trace tools, schedules and cost models read: malformed ``--findings``
entries, values nested past the recursion limit, and paths that are folders or pipes — each one line,
exit status 2 (``HalError`` INVALID_ARGUMENT for a cost model). FIFOs are private, under tmp_path,
and every thread is bounded."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from halsim.cli import main
from halsim.schedule import ScheduleError, load_schedule
from reference import hal
from reference.trace.atomic import NESTED_TOO_DEEPLY  # (its wording: tests/reference/test_atomic_pass6.py)

DEEP = "[" * 100_000 + "]" * 100_000


# -- --findings entries --------------------------------------------------------------------------------

@pytest.mark.parametrize("finding, problem", [
    ({"ops": 5}, "'ops' must be a list of operation ids (strings), got 5"),
    ({"ops": ["0:1", 2]}, "'ops' must be a list of operation ids (strings), got [\"0:1\", 2]"),
    ({"t": -5}, "'t' must be a non-negative integer (nanoseconds) below 2**63, got -5"),
    ({"t": 2 ** 70}, "'t' must be a non-negative integer (nanoseconds) below 2**63, got 1180591620717411303424"),
    ({"t": True}, "'t' must be a non-negative integer (nanoseconds) below 2**63, got true"),
    ({"t": 1.5}, "'t' must be a non-negative integer (nanoseconds) below 2**63, got 1.5"),
])
@pytest.mark.parametrize("command", ["export", "plot"])
def test_a_malformed_finding_is_one_line(traces, tmp_path, capsys, command, finding, problem):
    f = tmp_path / "f.json"
    f.write_text(json.dumps([{"rule": "hazard.raw", "message": "m"}, finding]))
    out = str(tmp_path / ("x.pftrace" if command == "export" else "x.png"))
    argv = [command, traces["generic"], "--findings", str(f)] + \
        (["--perfetto", out] if command == "export" else ["-o", out])
    assert main(argv) == 2
    assert capsys.readouterr().err == f"halsim: error: --findings {str(f)!r}: finding 1: {problem}\n"
    assert not os.path.exists(out)


def test_null_ops_and_t_and_the_largest_time_are_taken(traces, tmp_path, capsys):
    f = tmp_path / "f.json"
    f.write_text(json.dumps([{"rule": "a", "ops": None, "t": None}, {"rule": "b", "t": 2 ** 63 - 1}]))
    assert main(["export", traces["generic"], "--findings", str(f), "--perfetto", str(tmp_path / "x.pftrace")]) == 0
    assert capsys.readouterr().err == ""


# -- values nested past the recursion limit --------------------------------------------------------------

def test_a_deeply_nested_findings_file_is_one_line(traces, tmp_path, capsys):
    f = tmp_path / "f.json"
    f.write_text(DEEP)
    assert main(["export", traces["generic"], "--findings", str(f), "--chrome", str(tmp_path / "x.json")]) == 2
    assert capsys.readouterr().err == f"halsim: error: --findings {str(f)!r}: not valid JSON: {NESTED_TOO_DEEPLY}\n"


@pytest.mark.parametrize("command", ["stats", "check"])
def test_a_deeply_nested_trace_event_is_one_line(traces, tmp_path, capsys, command):
    lines = open(traces["generic"]).read().split("\n")
    t = tmp_path / "t.json"
    t.write_text("\n".join(lines[:3] + ['{"ev":"x","v":%s},' % DEEP] + lines[3:]))
    assert main([command, str(t)]) == 2
    assert capsys.readouterr().err == f"halsim: error: {t}:4: bad event: {NESTED_TOO_DEEPLY}\n"


@pytest.mark.parametrize("name, text, fmt", [("s.json", '{"host": %s}' % DEEP, "JSON"),
                                             ("s.toml", "description = %s\n" % DEEP, "TOML")])
def test_a_deeply_nested_schedule_is_one_line(tmp_path, capsys, name, text, fmt):
    s = tmp_path / name
    s.write_text(text)
    assert main(["check", str(s)]) == 2
    assert capsys.readouterr().err == f"halsim: error: {s}: not valid {fmt}: {NESTED_TOO_DEEPLY}\n"


def test_a_deeply_nested_cost_model_is_invalid_argument(tmp_path):
    m = tmp_path / "m.json"
    m.write_text('{"kernels": %s}' % DEEP)
    with pytest.raises(hal.HalError) as e:
        hal.create_device("sim", cost_model=str(m))
    assert e.value.code == hal.StatusCode.INVALID_ARGUMENT
    assert e.value.message == f"cost model {str(m)!r} is not valid JSON: {NESTED_TOO_DEEPLY}"


# -- folders and pipes -----------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["stats", "export"])
def test_a_folder_is_named_a_folder(tmp_path, capsys, command):
    argv = [command, str(tmp_path)] + (["--chrome", str(tmp_path / "x.json")] if command == "export" else [])
    assert main(argv) == 2
    assert capsys.readouterr().err == f"halsim: error: {tmp_path}: is a directory\n"


def test_a_trace_on_a_pipe_must_be_saved_first(tmp_path, capsys):
    fifo = tmp_path / "t.json"
    os.mkfifo(fifo)  # (no writer: the check comes before any open, which would wait for one)
    assert main(["stats", str(fifo)]) == 2
    assert capsys.readouterr().err == f"halsim: error: {fifo}: not a regular file (a pipe): save it to a file first\n"


def feed(fifo: str, data: bytes, seconds: float = 10.0) -> threading.Thread:
    """A thread writing ``data`` into ``fifo`` once a reader has opened it (polled: it never blocks
    on a reader that does not come), then closing it; it gives up after ``seconds``."""
    def write():
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: no reader yet
                time.sleep(0.01)
                continue
            os.set_blocking(fd, True)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            return
    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


SCHEDULE = {"semaphores": {"s": 0}, "host": [{"call": "signal", "semaphore": "s", "value": 1}]}


def test_a_schedule_is_read_from_a_pipe(tmp_path):
    fifo = str(tmp_path / "s.json")
    os.mkfifo(fifo)
    writer = feed(fifo, json.dumps(SCHEDULE).encode())
    schedule = load_schedule(fifo)
    writer.join(10)
    assert not writer.is_alive()
    assert schedule.path == fifo and schedule.semaphores == {"s": 0}
    assert [name for name, _steps in schedule.threads] == ["main"]


def test_a_schedule_folder_is_named_a_folder(tmp_path):
    folder = tmp_path / "s.json"
    folder.mkdir()
    with pytest.raises(ScheduleError) as e:
        load_schedule(str(folder))
    assert str(e.value) == f"{folder}: is a directory"


def test_a_trace_where_a_schedule_is_expected_says_so(traces, tmp_path, capsys):
    assert main(["run", traces["generic"]]) == 2
    assert capsys.readouterr().err == (f"halsim: error: {traces['generic']}: a halsim trace, not a schedule "
                                       f"(halsim check, stats, export and plot read traces)\n")
