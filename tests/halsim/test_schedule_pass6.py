"""Schedules (docs/schedule-format.md) and deadlock reports: a timed wait that times out lets its
thread go on; an `update` command writes the data's length; a refused [device] option is an error of
that field; `halsim run SCHEDULE` prints a deadlock's whole report; a blocked queue call's own op is no
signaler of its waits."""

from __future__ import annotations

import pytest

from halsim.cli import main
from halsim.schedule import ScheduleError, parse_schedule, run_schedule
from halsim.sim import DeadlockError
from reference import hal

DEADLINE = int(hal.StatusCode.DEADLINE_EXCEEDED)


@pytest.mark.parametrize("uri", ["local-task", "sim", "sim:sync", "sim:cuda", "sim:metal", "sim:opencl"])
def test_a_timed_wait_that_times_out_lets_the_thread_go_on(uri):
    doc = {"semaphores": {"a": 0}, "buffers": {"b": 64},
           "host": [{"call": "wait", "wait": {"a": 1}, "timeout": 0.001},   # nobody signals: times out
                    {"call": "signal", "semaphore": "a", "value": 1},       # then the thread goes on
                    {"call": "fill", "target": "b", "pattern": 7, "wait": {"a": 1}}]}
    r = run_schedule(parse_schedule(doc), uri)
    assert [op["kind"] for op in r.trace.operations()] == ["fill"]
    assert [(e.where, e.code, e.deadlock) for e in r.errors] == [("host[0]", DEADLINE, False)]
    assert not r.deadlocked


@pytest.mark.parametrize("uri", ["local-task", "sim", "sim:cuda"])
def test_a_thread_whose_timed_wait_timed_out_still_releases_the_main_thread(uri):
    doc = {"semaphores": {"s": 0, "x": 0},
           "host": [{"call": "wait", "wait": {"s": 1}, "timeout": 10}],
           "threads": [{"name": "w1", "steps": [{"call": "wait", "wait": {"x": 1}, "timeout": 0.001},
                                                {"call": "signal", "semaphore": "s", "value": 1}]}]}
    r = run_schedule(parse_schedule(doc), uri)
    assert [(e.where, e.code) for e in r.errors] == [("threads[0].steps[0]", DEADLINE)]


def test_an_update_command_writes_the_datas_length():
    doc = {"semaphores": {"done": 0}, "buffers": {"a": 64},
           "command_buffers": {"cb": {"commands": [{"cmd": "update", "target": "a", "data": [1, 2, 3, 4]}]}},
           "host": [{"call": "execute", "command_buffer": "cb", "signal": {"done": 1}},
                    {"call": "wait", "wait": {"done": 1}}]}
    r = run_schedule(parse_schedule(doc), "sim")
    assert r.errors == []
    assert [(c["kind"], c["access"]) for c in r.trace.events("cmd")] == [("update", [["b0", 0, 4, "w"]])]
    bad = {"buffers": {"a": 64},
           "command_buffers": {"cb": {"commands": [{"cmd": "update", "target": {"buffer": "a", "length": 8},
                                                    "data": [1, 2]}]}}}
    with pytest.raises(ScheduleError) as ei:
        parse_schedule(bad)
    assert str(ei.value) == ("<schedule>: command_buffers.cb.commands[0].target: length 8 is not the data's "
                             "(2 bytes): give the buffer and offset only, or the data's length")


@pytest.mark.parametrize("option, message", [
    ("queues = 0", "device.options.queues: INVALID_ARGUMENT: option queues=0 must be an int in [1, 64]"),
    ("bogus = 1", "device.options.bogus: INVALID_ARGUMENT: unknown option 'bogus' for device 'sim'"),
])
def test_a_refused_device_option_is_an_error_of_its_field(tmp_path, capsys, option, message):
    path = tmp_path / "s.toml"
    path.write_text(f'[device]\nuri = "sim"\noptions = {{ {option} }}\n[semaphores]\ns = 0\n'
                    '[[host]]\ncall = "flush"\n')
    assert main(["run", str(path)]) == 2
    assert capsys.readouterr().err.startswith(f"halsim: error: {path}: {message}")


def test_halsim_run_prints_a_schedules_whole_deadlock_report(tmp_path, capsys):
    path = tmp_path / "dl.toml"
    path.write_text('[semaphores]\na = 0\nb = 0\n'
                    '[[host]]\ncall = "barrier"\nwait = { a = 1 }\nsignal = { b = 1 }\n'
                    '[[host]]\ncall = "barrier"\nwait = { b = 1 }\nsignal = { a = 1 }\n'
                    '[[host]]\ncall = "wait"\nwait = { b = 1 }\n')
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].endswith("host[2] (wait) on main thread raised ABORTED: deadlock: host thread 0 in "
                           "wait_semaphores(all) can never return")
    assert "  two-semaphore cycle s0 -> s1: 0:0 waits s0>=1, signaled by 0:1; 0:1 waits s1>=1, signaled by 0:0" in err


@pytest.mark.parametrize("uri", ["sim:sync", "sim:metal?legacy_sync=true"])
def test_a_blocked_queue_calls_op_is_no_signaler_of_its_own_wait(uri):
    dev = hal.create_device(uri)
    try:
        s0 = dev.create_semaphore()
        with pytest.raises(DeadlockError) as ei:
            dev.queue_barrier([(s0, 1)], [(s0, 2)])
        (thread,) = ei.value.report.threads
        assert (thread.op, thread.waits[0].signalers) == ("0:0", ())
        assert "no pending operation or host thread signals s0 to >= 1" in ei.value.message
    finally:
        dev.close()


def test_a_cycle_through_two_in_order_queues_is_not_called_same_queue():
    """q0: A waits s1, then B signals s0; q1: C waits s0, then D signals s1. Nobody waits for an op
    behind it on its own queue: the cycle runs through both queues' order (it was reported as a
    "same-queue wait-before-signal on in-order queue 1", by the report and by the checks)."""
    from halsim.checks import check_trace

    with hal.create_device("sim:metal", queues=2) as dev:
        s0, s1, done = (dev.create_semaphore() for _ in range(3))
        dev.queue_barrier([(s1, 1)], [], queue_affinity=1)
        dev.queue_barrier([], [(s0, 1)], queue_affinity=1)
        dev.queue_barrier([(s0, 1)], [], queue_affinity=2)
        dev.queue_barrier([], [(s1, 1), (done, 1)], queue_affinity=2)
        with pytest.raises(DeadlockError) as ei:
            done.wait(1, 5.0)
        (cycle,) = ei.value.report.cycles
        assert str(cycle) == ("in-order-queue cycle across queues 0, 1: 0:0 waits s1>=1, signaled by 0:3; 0:3 is "
                              "queued behind 0:2 on in-order queue 1; 0:2 waits s0>=1, signaled by 0:1; 0:1 is "
                              "queued behind 0:0 on in-order queue 0")
        trace = dev.trace
    messages = [f.message for f in check_trace(trace).findings if f.rule == "deadlock.queue_order"]
    assert len(messages) == 1 and messages[0].startswith("in-order-queue cycle across queues 0, 1: ")
