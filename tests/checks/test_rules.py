"""Rules on traces from programs and on hand-written traces: exact ids, ops and messages."""

import pytest

from halsim.checks import check_trace, select_rules
from halsim.sim import DeadlockError
from reference import hal
from reference.trace import Trace


def findings(trace, rules=None):
    return [(f.rule, f.ops, f.message) for f in check_trace(trace, rules).findings]


def synthetic(header, events):
    t = Trace(header)
    for e in events:
        t.emit(e)
    return t


def op(op_id, kind="barrier", wait=(), signal=(), queue=0, thread=0, **fields):
    return {"ev": "op", "t": 0, "op": op_id, "kind": kind, "thread": thread, "queue": queue,
            "wait": [list(w) for w in wait], "signal": [list(s) for s in signal], **fields}


def done(op_id, status=0, message=None):
    e = {"ev": "op_done", "t": 0, "op": op_id, "status": status}
    if message:
        e["message"] = message
    return e


def sig(sem, value, cause):
    return {"ev": "signal", "t": 0, "sem": sem, "value": value, "cause": cause}


def cmd(op_id, index, kind, *access):
    return {"ev": "cmd", "t": 0, "op": op_id, "index": index, "kind": kind, "start": 0, "track": 0,
            "access": [list(a) for a in access]}


@pytest.mark.parametrize("uri", ["local-task", "local-sync", "sim", "sim:metal", "sim:sync"])
def test_a_correct_pipeline_is_clean_on_every_device(uri):
    with hal.create_device(uri) as dev:
        exe = dev.load_executable()
        a, b, c = (dev.allocator.allocate_buffer(64) for _ in range(3))
        s = dev.create_semaphore()
        cb = dev.create_command_buffer()
        cb.begin()
        cb.dispatch(exe, "negate", (1, 1, 1), (), (a, b))
        cb.execution_barrier(hal.ExecutionStage.DISPATCH, hal.ExecutionStage.DISPATCH)
        cb.dispatch(exe, "double_it", (1, 1, 1), (), (b, c))
        cb.end()
        dev.queue_fill([], [(s, 1)], a, 0, 64, 3, 4)
        dev.queue_execute([(s, 1)], [(s, 2)], cb)
        dev.queue_copy([(s, 2)], [(s, 3)], c, 0, a, 0, 64)
        s.wait(3, 5.0)
        assert findings(dev.trace) == []


def test_missing_barrier_on_local_task_is_found_from_its_trace():
    with hal.create_device("local-task") as dev:
        a, b = dev.allocator.allocate_buffer(64), dev.allocator.allocate_buffer(64)
        s = dev.create_semaphore()
        cb = dev.create_command_buffer()
        cb.begin()
        cb.fill_buffer(a, 1, 4)
        cb.copy_buffer(a, b)
        cb.end()
        dev.queue_execute([], [(s, 1)], cb)
        s.wait(1, 5.0)
        streamed = check_trace(dev.trace, keep_commands=1).findings   # commands read a second time
        assert streamed == check_trace(dev.trace).findings
        assert findings(dev.trace) == [(
            "hazard.raw", ["0:0.0", "0:0.1"],
            "copy 0:0.1 reads buffer b0[0:64) written by fill 0:0.0 in the same command buffer with no "
            "execution barrier between them (RAW)")]


@pytest.mark.parametrize("uri", ["local-task", "sim", "sim:cuda", "sim:opencl", "sim:metal"])
def test_host_mapping_races_with_device_work(uri):
    with hal.create_device(uri) as dev:
        b = dev.allocator.allocate_buffer(64)
        s, t = dev.create_semaphore(), dev.create_semaphore()
        b.map_write(48, b"\x05" * 16)                 # before the submission that reads it: ordered
        dev.queue_fill([], [(s, 1)], b, 0, 32, 7, 1)
        dev.queue_copy([], [], b, 48, b, 40, 4)       # reads what the host wrote first: fine
        assert b.map_read(0, 16) == b.map_read(0, 16)  # forgot to wait: races with the fill (twice)
        s.wait(1, 5.0)
        b.map_read(16, 16)                             # after the wait: fine
        b.map_fill(0, 8, 1, 1)                         # fine too

        def fn(args, context):
            b.map_read(32, 8)                          # after the host call's wait on s >= 1: fine
            b.map_read(33, 4)                          # its own accesses are in program order
        dev.queue_host_call([(s, 1)], [(t, 1)], fn)
        dev.queue_fill([], [], b, 32, 8, 9, 1)         # no wait for the host call: races with its read
        t.wait(1, 5.0)
        dev.queue_flush()
        assert findings(dev.trace, ["hazard"]) == [
            ("hazard.raw", ["0:0.0", "host:0"], "map_read by host thread 0 reads buffer b0[0:16) written by "
             "fill 0:0.0 with no semaphore wait ordering them (RAW)"),
            ("hazard.war", ["0:2", "0:3.0"], "fill 0:3.0 writes buffer b0[32:40) read by map_read in host call "
             "0:2 with no semaphore wait ordering them (WAR)")]


def test_partial_overlap_reports_only_the_shared_bytes():
    t = synthetic({"device": "sim"}, [
        op("0:0", "fill"), op("0:1", "fill"),
        cmd("0:0", 0, "fill", ("b0", 0, 100, "w")), cmd("0:1", 0, "fill", ("b0", 60, 100, "w")),
        cmd("0:1", 0, "fill", ("b1", 0, 8, "w")), done("0:0"), done("0:1")])
    assert findings(t) == [("hazard.waw", ["0:0.0", "0:1.0"],
                            "fill 0:1.0 writes buffer b0[60:100) written by fill 0:0.0 on queue 0 with no "
                            "semaphore or barrier ordering them (WAW)")]


def test_reads_never_conflict_and_rw_is_both():
    t = synthetic({"device": "sim"}, [
        op("0:0", "dispatch"), op("0:1", "dispatch"), op("0:2", "dispatch"),
        cmd("0:0", 0, "dispatch", ("b0", 0, 16, "r")), cmd("0:1", 0, "dispatch", ("b0", 0, 16, "r")),
        cmd("0:2", 0, "dispatch", ("b0", 8, 4, "rw"))])
    assert [(r, o) for r, o, _m in findings(t)] == [("hazard.war", ["0:0.0", "0:2.0"]),
                                                   ("hazard.war", ["0:1.0", "0:2.0"])]


def test_deadlock_findings_from_a_program_that_deadlocked():
    dev = hal.create_device("sim")
    a, b, c = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(a, 1)], [(b, 1)])
    dev.queue_barrier([(b, 1)], [(a, 1)])
    dev.queue_barrier([(c, 7)], [])
    with pytest.raises(DeadlockError):
        dev.wait_semaphores(hal.WaitMode.ALL, [(b, 1)])
    dev.close()
    assert findings(dev.trace) == [
        ("deadlock.cycle", ["0:0", "0:1"],
         "semaphore cycle s0 -> s1: 0:0 waits s0>=1, signaled by 0:1; 0:1 waits s1>=1, signaled by 0:0"),
        ("deadlock.unsignaled", ["0:2"], "barrier 0:2 waits for s2>=7 but nothing signals s2 to >= 7 (it stays at 0)")]


def test_host_wait_deadlock_on_sim_sync():
    dev = hal.create_device("sim:sync")
    s = dev.create_semaphore()
    with pytest.raises(DeadlockError):
        dev.queue_barrier([(s, 1)], [])
    dev.close()
    assert [f[0] for f in findings(dev.trace)] == ["deadlock.unsignaled"]


def test_semaphore_rules_on_a_synthetic_trace():
    big = 2**31
    t = synthetic({"device": "sim"}, [
        {"ev": "semaphore", "t": 0, "sem": "s0", "initial": 0, "thread": 0},
        op("0:0", signal=[("s0", 1)]), done("0:0"), sig("s0", 1, "0:0"),
        op("0:1", signal=[("s0", 2)]), done("0:1"), sig("s0", 2, "0:1"),
        op("0:2", signal=[("s1", big)]), done("0:2", 3, "bad value"),
        {"ev": "fail", "t": 0, "sem": "s2", "status": 10, "message": "boom", "cause": "host:0"},
        op("0:3", signal=[("s2", 1)]), done("0:3")])
    assert findings(t) == [
        ("semaphore.overflow", ["0:2"], "barrier 0:2 uses s1=2147483648, past MAX_SEMAPHORE_VALUE (2147483646)"),
        ("semaphore.racing_signals", ["0:0", "0:1"],
         "barrier 0:0 signals s0=1 and barrier 0:1 signals s0=2 with nothing ordering them: the final value "
         "depends on timing"),
        ("semaphore.signal_after_failure", ["0:3"],
         "barrier 0:3 signals s2=1 after s2 failed (status 10: boom); the signal is lost")]


def test_limits_only_on_cuda_traces():
    events = [op("0:0", wait=[(f"s{i}", 1) for i in range(33)]), done("0:0", 8, "exceeded")]
    assert findings(synthetic({"device": "sim"}, events)) == []
    assert findings(synthetic({"device": "sim:cuda", "personality": "cuda"}, events)) == [
        ("limit.cuda_wait_events", ["0:0"], "barrier 0:0 waits on 33 semaphores, more than the 32 events a "
                                            "CUDA queue action can wait for: it failed with RESOURCE_EXHAUSTED")]


def test_unknown_events_and_an_empty_trace_are_fine():
    assert findings(synthetic({}, [{"ev": "something_new", "t": 0}])) == []


def test_rule_selection():
    assert select_rules(["deadlock.cycle", "limit"]) == {"deadlock.cycle", "limit.cuda_event_pool",
                                                         "limit.cuda_wait_events"}
    with pytest.raises(ValueError, match="unknown rule or category 'hazards'"):
        select_rules(["hazards"])
    t = synthetic({"device": "sim"}, [op("0:0", "fill"), op("0:1", "fill"),
                                      cmd("0:0", 0, "fill", ("b0", 0, 4, "w")), cmd("0:1", 0, "fill", ("b0", 0, 4, "w"))])
    assert findings(t, ["semaphore"]) == []
    assert [f[0] for f in findings(t, ["hazard.waw"])] == ["hazard.waw"]


def test_finding_json_carries_its_details():
    t = synthetic({"device": "sim"}, [op("0:0", "fill"), op("0:1", "copy"),
                                      cmd("0:0", 0, "fill", ("b0", 0, 4, "w")), cmd("0:1", 0, "copy", ("b0", 0, 4, "r"))])
    (f,) = check_trace(t).findings
    assert f.to_json() == {"rule": "hazard.raw", "category": "hazard", "severity": "error",
                           "ops": ["0:0.0", "0:1.0"], "message": f.message, "buffer": "b0", "range": [0, 4],
                           "scope": "queue"}


def test_a_chain_submitted_backwards_deadlocks_an_in_order_queue_only():
    def program(dev):
        s, done = dev.create_semaphore(), dev.create_semaphore()
        dev.queue_barrier([(s, 3)], [(done, 1)])
        dev.queue_barrier([(s, 2)], [(s, 3)])
        dev.queue_barrier([(s, 1)], [(s, 2)])
        dev.queue_barrier([], [(s, 1)])
        dev.wait_semaphores(hal.WaitMode.ALL, [(done, 1)])

    with hal.create_device("sim") as dev:
        program(dev)
        assert findings(dev.trace) == []
    dev = hal.create_device("sim:metal")
    with pytest.raises(DeadlockError):
        program(dev)
    dev.close()
    # 0:1 also "could" meet 0:0's s0>=2 wait and so on: such would-be cycles are not deadlocks
    assert findings(dev.trace) == [
        ("deadlock.queue_order", ["0:0", "0:1"],
         "same-queue wait-before-signal on in-order queue 0: 0:0 waits s0>=3, signaled by 0:1; "
         "0:1 is queued behind 0:0 on in-order queue 0")]


def test_race_free_programs_have_no_findings_from_a_multithreaded_device():
    # local-task runs ops on worker threads: a signal woke its waiters before it was traced, so a
    # waiter's own signal (or an op it made ready) could come first in the trace, and the checks —
    # which read causality from the trace's order — saw races in race-free programs (300+ findings
    # over 60 generated programs, until 2026-11-24). The signal is now traced before anyone wakes.
    from halsim.campaigns.generate import generate
    from halsim.schedule import parse_schedule, run_schedule

    for seed in range(8):
        doc = generate(seed, size=30, queues=3, device="sim")
        result = run_schedule(parse_schedule(doc), "local-task")
        assert (seed, findings(result.trace)) == (seed, [])
