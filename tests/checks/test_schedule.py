"""Schedule files: loader errors name the file, field path and reason; the runner works on any device."""

import json
import os

import pytest

from halsim.schedule import ScheduleError, load_schedule, parse_schedule, run_schedule

CORPUS = os.path.join(os.path.dirname(__file__), "corpus")


def error_of(doc) -> str:
    with pytest.raises(ScheduleError) as e:
        parse_schedule(doc, "s.toml")
    return str(e.value)


BASE = {"semaphores": {"s": 0}, "buffers": {"a": 64}}


@pytest.mark.parametrize("doc, message", [
    ({**BASE, "host": [{"call": "fill", "target": "b"}]},
     "s.toml: host[0].target: no buffer named 'b' (declared: a)"),
    ({**BASE, "host": [{"call": "barrier", "signal": {"s": -1}}]}, "s.toml: host[0].signal.s: must be >= 0, got -1"),
    ({**BASE, "host": [{"call": "jump"}]},
     "s.toml: host[0].call: unknown value 'jump' (expected one of: execute, barrier, fill, copy, update, "
     "dispatch, alloca, dealloca, signal, fail, wait, sleep, release, flush)"),
    ({**BASE, "host": [{"call": "wait", "wait": {"s": 1}, "tmeout": 1}]},
     "s.toml: host[0].tmeout: unknown field (expected one of: call, wait, mode, timeout)"),
    ({**BASE, "host": [{"call": "signal", "semaphore": "s"}]}, "s.toml: host[0].value: missing"),
    ({**BASE, "command_buffers": {"cb": {"commands": [{"cmd": "fill", "target": "a", "pattern_length": 3}]}},
      "host": [{"call": "execute", "command_buffer": "cb"}]},
     "s.toml: command_buffers.cb.commands[0].pattern_length: must be 1, 2 or 4, got 3"),
    ({**BASE, "host": [{"call": "execute", "command_buffer": "cb"}]},
     "s.toml: host[0].command_buffer: no command buffer named 'cb' (declared: none)"),
    ({**BASE, "expect": ["hazard.rw"], "host": [{"call": "flush"}]},
     "s.toml: expect[0]: unknown value 'hazard.rw' (expected one of: deadlock.cycle, deadlock.queue_order, "
     "deadlock.unsignaled, deadlock.host_wait, hazard.raw, hazard.war, hazard.waw, lifetime.use_after_dealloca, "
     "lifetime.dealloca_race, lifetime.use_before_alloca, lifetime.host_release_in_flight, "
     "semaphore.non_monotonic, semaphore.racing_signals, semaphore.overflow, semaphore.signal_after_failure, "
     "limit.cuda_event_pool, limit.cuda_wait_events)"),
    ({**BASE, "threads": [{"name": "t", "steps": [{"call": "sleep", "seconds": "1"}]}]},
     "s.toml: threads[0].steps[0].seconds: expected a non-negative number, got '1'"),
    ({**BASE}, "s.toml: host: the schedule has no steps (add [[host]] tables)"),
    ({"semaphore": {}}, "s.toml: semaphore: unknown field (expected one of: description, expect, device, "
                        "semaphores, buffers, command_buffers, host, threads)"),
])
def test_loader_errors(doc, message):
    assert error_of(doc) == message


def test_file_level_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[semaphores\n")
    with pytest.raises(ScheduleError, match=r"bad\.toml: not valid TOML: "):
        load_schedule(str(bad))
    with pytest.raises(ScheduleError, match=r"nope\.json: no such file"):
        load_schedule(str(tmp_path / "nope.json"))


def test_a_recording_error_names_the_command(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"buffers": {"a": 8}, "command_buffers": {"cb": {"commands": [
        {"cmd": "fill", "target": {"buffer": "a", "offset": 4, "length": 8}}]}},
        "host": [{"call": "execute", "command_buffer": "cb"}]}))
    with pytest.raises(ScheduleError, match=r"s\.json: command_buffers\.cb\.commands\[0\]: OUT_OF_RANGE"):
        run_schedule(load_schedule(str(path)))


@pytest.mark.parametrize("uri", ["local-task", "local-sync", "sim", "sim:metal", "sim:sync"])
def test_the_runner_runs_a_schedule_on_any_device(uri):
    s = load_schedule(os.path.join(CORPUS, "clean_timeline_chain.toml"))
    result = run_schedule(s, uri)
    ops = result.trace.operations()
    assert [(o["op"], o["kind"], o["status"]) for o in ops] == [
        ("0:0", "fill", 0), ("0:1", "fill", 0), ("0:2", "update", 0), ("0:3", "dispatch", 0)]
    assert result.errors == []


def test_threads_get_program_order_ids_in_order():
    s = load_schedule(os.path.join(CORPUS, "clean_two_threads_ping_pong.toml"))
    result = run_schedule(s)
    assert [(o["op"], o["kind"]) for o in result.trace.operations()] == [("0:0", "fill"), ("1:0", "copy")]


def test_errors_are_recorded_and_the_thread_goes_on():
    s = parse_schedule({"semaphores": {"s": 0}, "host": [
        {"call": "signal", "semaphore": "s", "value": 2}, {"call": "signal", "semaphore": "s", "value": 1},
        {"call": "barrier", "wait": {"s": 2}, "signal": {"s": 3}}, {"call": "wait", "wait": {"s": 3}}]})
    result = run_schedule(s)
    assert [str(e) for e in result.errors] == [
        "host[1] (signal) on main thread raised INVALID_ARGUMENT: semaphore s0 already signaled past 1 "
        "(current value 2); values must strictly increase"]
    assert [o["op"] for o in result.trace.operations()] == ["0:0"]


def test_json_and_toml_forms_are_the_same_program(tmp_path):
    toml_s = load_schedule(os.path.join(CORPUS, "raw_cross_queue_without_semaphore.toml"))
    path = tmp_path / "same.json"
    path.write_text(json.dumps({
        "expect": ["hazard.raw"], "device": {"uri": "sim", "options": {"queues": 2}},
        "buffers": {"a": 4096, "b": 4096}, "semaphores": {"filled": 0, "copied": 0},
        "host": [{"call": "fill", "target": "a", "pattern": 7, "signal": {"filled": 1}, "queue": 0},
                 {"call": "copy", "source": "a", "target": "b", "signal": [["copied", 1]], "queue": 1},
                 {"call": "wait", "wait": {"filled": 1, "copied": 1}}]}))
    json_s = load_schedule(str(path))
    strip = [[{k: v for k, v in st.items() if k != "where"} for st in steps] for _n, steps in json_s.threads]
    assert strip == [[{k: v for k, v in st.items() if k != "where"} for st in steps] for _n, steps in toml_s.threads]


def test_the_example_schedule_of_the_docs_runs_clean(tmp_path):
    """docs/schedule-format.md's example is a schedule a reader copies: it loads, runs, and has the
    findings its ``expect`` names (it once copied 4096 bytes into 1024 and failed to load)."""
    import re

    from halsim.checks import check_trace

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "schedule-format.md"), encoding="utf-8") as f:
        (block,) = re.findall(r"```toml\n(.*?)```", f.read(), re.S)
    path = tmp_path / "example.toml"
    path.write_text(block)
    schedule = load_schedule(str(path))
    result = run_schedule(schedule)
    assert result.errors == []
    assert [f.rule for f in check_trace(result.trace).findings] == schedule.expect == []
    assert [e["kind"] for e in result.trace.events("op")] == ["fill", "copy"]
