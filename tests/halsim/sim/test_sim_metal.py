"""sim:metal: in-order MTLCommandQueues, three-step submission, encoders, shared events, legacy_sync.

Every cost below is exact virtual time (tests/halsim/sim/conftest.py zeroes what a test does not set).
"""

import gc
import threading

import pytest

from halsim.pipeline import staged_pipeline
from halsim.sim import DeadlockError
from halsim.sim.driver import driver
from reference import hal
from tests.conftest import WAIT, join
from tests.halsim.sim.conftest import costs

S = hal.StatusCode
STAGE = hal.ExecutionStage
MEMORY_BARRIER = [(hal.AccessScope.DISPATCH_WRITE, hal.AccessScope.DISPATCH_READ)]

# A fill or copy of 512 bytes takes 488 + 512 = 1000 ns.
PIPE = dict(commit_ns=2000, launch_ns=3000, event_wait_ns=500, event_record_ns=500, listener_ns=15000,
            completion_ns=5000, fill_latency_ns=488, fill_gb_per_s=1, copy_latency_ns=488, copy_gb_per_s=1)
METAL_ZERO = dict(commit_ns=0, encoder_switch_ns=0, event_wait_ns=0, event_record_ns=0, listener_ns=0,
                  completion_ns=0)


def metal(make, **options):
    fields = options.pop("costs", {})
    return make("metal", cost_model=costs(**{**METAL_ZERO, **fields}), **options)


def ops(dev):
    return {o["op"]: o for o in dev.trace.operations()}


def cmds(dev, op="0:0"):
    return [c for c in dev.trace.events("cmd") if c["op"] == op]


def tracks(dev):
    return {e["id"]: e["name"] for e in dev.trace.events("track")}


def fill_then_copy(dev):
    """A fill on queue 0, then a copy on queue 1 waiting for it: a cross-queue wait."""
    buf = dev.allocator.allocate_buffer(1024)
    s, t = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_fill([], [(s, 1)], buf, 0, 512, 0xAB, 1)
    dev.queue_copy([(s, 1)], [(t, 1)], buf, 0, buf, 512, 512, queue_affinity=1 << 1)
    t.wait(1, WAIT)
    assert buf.map_read(512, 512) == b"\xab" * 512


# -- determinism and the legacy_sync comparison --------------------------------------------------------

@pytest.mark.parametrize("legacy", [False, True])
def test_identical_trace_bytes_twice(tmp_path, legacy):
    paths = []
    for run in range(2):
        with hal.create_device("sim:metal", queues=2, legacy_sync=legacy) as dev:
            assert staged_pipeline(dev, stages=4)
            paths.append(tmp_path / f"run{run}.json")
            dev.trace.save(paths[-1])
    assert paths[0].read_bytes() == paths[1].read_bytes()


def test_legacy_sync_makespan_exceeds_async_on_a_cross_queue_wait(make):
    # Async: the fill is committed at 2000 and ends at 2000 + 3000 launch + 1000 + 500 signal = 6500.
    # The copy's wait command buffer is committed at 4000 and stalls queue 1 until s1 = 1 at 6500,
    # + 500 wait; its work (committed at 6000) runs 7000 + 3000 launch → 11000, signals at 11500.
    # The host sees t = 1 through the event listener 15000 ns later.
    dev = metal(make, queues=2, costs=PIPE)
    fill_then_copy(dev)
    o = ops(dev)
    assert [(o[k]["t"], o[k]["ready"], o[k]["start"], o[k]["end"]) for k in ("0:0", "0:1")] == \
        [(0, 2000, 5000, 6500), (2000, 6500, 10000, 11500)]
    assert [(e["op"], e["step"], e["commit"], e["start"], e["t"]) for e in dev.trace.events("metal_cb")] == \
        [("0:0", "work", 2000, 2000, 6500), ("0:1", "wait", 4000, 4000, 7000), ("0:1", "work", 6000, 7000, 11500)]
    assert dev.now() == 11500 + 15000
    async_span = o["0:1"]["end"] - o["0:0"]["t"]

    # legacy_sync: the copy's queue call blocks the host until it sees s1 = 1 (6500 + 15000 listener),
    # then commits the work alone (2000): 23500 + 3000 launch + 1000 + 500 = 28000.
    dev = metal(make, queues=2, legacy_sync=True, costs=PIPE)
    fill_then_copy(dev)
    o = ops(dev)
    assert [(o[k]["t"], o[k]["ready"], o[k]["start"], o[k]["end"]) for k in ("0:0", "0:1")] == \
        [(0, 2000, 5000, 6500), (2000, 21500, 26500, 28000)]
    assert [(e["op"], e["step"], e["commit"]) for e in dev.trace.events("metal_cb")] == \
        [("0:0", "work", 2000), ("0:1", "work", 23500)]
    legacy_span = o["0:1"]["end"] - o["0:0"]["t"]
    assert (async_span, legacy_span) == (11500, 28000)  # legacy - async = listener + commit - event wait


def test_legacy_sync_demo_pipeline_is_slower(make):
    spans = {}
    for legacy in (False, True):
        dev = make("metal", queues=2, legacy_sync=legacy)
        assert staged_pipeline(dev, stages=4)
        o = dev.trace.operations()
        spans[legacy] = max(x["end"] for x in o) - min(x["t"] for x in o)
    assert spans[True] > 1.5 * spans[False]


# -- in-order queues and deadlocks ----------------------------------------------------------------------

def test_same_queue_wait_before_signal_deadlocks(make):
    dev = make("metal")
    a, b = dev.create_semaphore(), dev.create_semaphore()   # s0, s1
    dev.queue_barrier([(a, 1)], [(b, 1)])                    # 0:0 waits s0 (its wait cb heads queue 0)
    dev.queue_barrier([], [(a, 1)])                          # 0:1 would signal s0, committed behind it
    with pytest.raises(DeadlockError) as ei:
        b.wait(1)
    e = ei.value
    assert e.code == S.ABORTED
    assert "same-queue wait-before-signal on in-order queue 0: 0:0 waits s0>=1, signaled by 0:1; " \
           "0:1 is queued behind 0:0 on in-order queue 0" in e.message
    assert "op 0:1 (barrier, queue 0) waits for op 0:0 ahead of it on in-order queue 0; signals s0=1" in e.message
    (cycle,) = e.report.cycles
    assert cycle.in_order and cycle.ops == ("0:0", "0:1") and cycle.semaphores == ("s0", None)


def test_the_same_program_on_two_queues_completes(make):
    dev = make("metal", queues=2)
    a, b = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(a, 1)], [(b, 1)])
    dev.queue_barrier([], [(a, 1)], queue_affinity=1 << 1)
    b.wait(1, WAIT)


def test_an_independent_op_waits_behind_a_blocked_one_on_its_queue(make):
    dev = metal(make)
    gate, done = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(gate, 1)], [])
    dev.queue_barrier([], [(done, 1)])                       # no waits, but behind 0:0
    dev.sleep(0.001)
    gate.signal(1)
    done.wait(1, WAIT)
    assert ops(dev)["0:1"]["start"] == 1_000_000
    assert dev.now() == 1_000_000


def test_legacy_sync_blocks_the_queue_call(make):
    dev = make("metal", legacy_sync=True)
    assert "async_queue" not in dev.capabilities
    a, b = dev.create_semaphore(), dev.create_semaphore()
    with pytest.raises(DeadlockError) as ei:
        dev.queue_barrier([(a, 1)], [(b, 1)])                # the host itself must signal a: it never will
    assert ei.value.message.splitlines()[0] == \
        "deadlock: host thread 0 in queue_barrier (op 0:0) can never return"
    assert "no pending operation or host thread signals s0 to >= 1" in ei.value.message


def test_legacy_sync_queue_call_returns_when_another_thread_signals(make):
    dev = metal(make, legacy_sync=True, costs=dict(wake_ns=700, commit_ns=50))
    a, b = dev.create_semaphore(), dev.create_semaphore()
    t = threading.Thread(target=lambda: (dev.sleep(0.00001), a.signal(1)))
    t.start()
    dev.queue_barrier([(a, 1)], [(b, 1)])                    # returns once a = 1 is seen
    # the child starts at the parent's clock + wake (Thread.start), signals 10000 later; the call sees
    # it wake later, then one commit
    assert dev.now() == 700 + 10_000 + 700 + 50
    b.wait(1, WAIT)
    join(t)


# -- the work command buffer: encoders ------------------------------------------------------------------

def test_encoder_switch_and_execution_barrier_costs(make):
    dev = metal(make, costs=dict(launch_ns=1000, fill_latency_ns=984, fill_gb_per_s=1, dispatch_base_ns=2000,
                                 encoder_switch_ns=300, barrier_ns=100))
    exe = dev.load_executable()
    buf = dev.allocator.allocate_buffer(64)
    cb = dev.create_command_buffer()
    cb.begin()
    cb.fill_buffer(hal.BufferRef(buf, 0, 16), 0, 1)                                   # blit
    cb.dispatch(exe, "negate", (1, 1, 1), (), (hal.BufferRef(buf, 0, 16), hal.BufferRef(buf, 16, 16)))
    cb.execution_barrier(STAGE.DISPATCH, STAGE.DISPATCH)                                # encoder event
    cb.dispatch(exe, "negate", (1, 1, 1), (), (hal.BufferRef(buf, 16, 16), hal.BufferRef(buf, 32, 16)))
    cb.end()
    done = dev.create_semaphore()
    dev.queue_execute([], [(done, 1)], cb)
    done.wait(1, WAIT)
    names = tracks(dev)
    # launch 1000; fill 1000; switch 300; dispatch 2000; barrier (end encoder + event) 300; dispatch 2000.
    assert [(c["index"], c["start"], c["t"], names[c["track"]]) for c in cmds(dev)] == [
        (0, 1000, 2000, "queue 0 blit"), (1, 2300, 4300, "queue 0 compute 0"),
        (2, 4300, 4600, "queue 0 encoders"), (3, 4600, 6600, "queue 0 compute 0")]
    assert [(e["encoder"], e["kind"], e["start"], e["t"], e["commands"], names[e["track"]])
            for e in dev.trace.events("encoder")] == [
        (0, "blit", 1000, 2000, [0], "queue 0 encoders"), (1, "compute", 2300, 4300, [1], "queue 0 encoders"),
        (2, "compute", 4600, 6600, [3], "queue 0 encoders")]
    assert ops(dev)["0:0"]["end"] == 6600
    assert buf.map_read(32, 16) == bytes(16)


def _three_dispatches(dev, barrier: bool):
    exe = dev.load_executable()
    buf = dev.allocator.allocate_buffer(256)
    cb = dev.create_command_buffer()
    cb.begin()
    for i, wg in enumerate((2, 3, 1)):
        if barrier and i == 1:
            cb.execution_barrier(STAGE.DISPATCH, STAGE.DISPATCH, MEMORY_BARRIER)
        cb.dispatch(exe, "negate", (wg, 1, 1), (), (hal.BufferRef(buf, 64 * i, 16), hal.BufferRef(buf, 64 * i + 32, 16)))
    cb.end()
    done = dev.create_semaphore()
    dev.queue_execute([], [(done, 1)], cb)
    done.wait(1, WAIT)
    names = tracks(dev)
    return [(c["kind"], c["start"], c["t"], names[c["track"]]) for c in cmds(dev)]


DISPATCH_COSTS = dict(dispatch_per_workgroup_ns=1000, barrier_ns=100)


def test_dispatches_of_one_compute_encoder_overlap(make):
    dev = metal(make, max_concurrency=2, costs=DISPATCH_COSTS)
    assert _three_dispatches(dev, barrier=False) == [
        ("dispatch", 0, 2000, "queue 0 compute 0"), ("dispatch", 0, 3000, "queue 0 compute 1"),
        ("dispatch", 2000, 3000, "queue 0 compute 0")]           # the first lane to free up takes the third
    assert ops(dev)["0:0"]["end"] == 3000


def test_a_memory_barrier_separates_them(make):
    dev = metal(make, max_concurrency=2, costs=DISPATCH_COSTS)
    assert _three_dispatches(dev, barrier=True) == [
        ("dispatch", 0, 2000, "queue 0 compute 0"), ("barrier", 2000, 2100, "queue 0 compute 0"),
        ("dispatch", 2100, 5100, "queue 0 compute 0"), ("dispatch", 2100, 3100, "queue 0 compute 1")]


def test_max_concurrency_one_serializes_them(make):
    dev = metal(make, max_concurrency=1, costs=DISPATCH_COSTS)
    assert [c[1:3] for c in _three_dispatches(dev, barrier=False)] == [(0, 2000), (2000, 5000), (5000, 6000)]


def test_misaligned_transfers_run_as_compute_kernels(make):
    dev = metal(make, costs=dict(copy_latency_ns=100, copy_gb_per_s=1e12))
    buf = dev.allocator.allocate_buffer(64)
    buf.map_write(0, bytes(range(64)))
    done = dev.create_semaphore()
    dev.queue_copy([], [(done, 1)], buf, 1, buf, 34, 7)
    done.wait(1, WAIT)
    assert buf.map_read(34, 7) == bytes(range(1, 8))
    (enc,) = dev.trace.events("encoder")
    assert enc["kind"] == "compute" and tracks(dev)[cmds(dev)[0]["track"]] == "queue 0 compute 0"


# -- shared events, completion handlers, host calls ----------------------------------------------------

def test_host_waiters_see_gpu_signals_through_the_listener(make):
    dev = metal(make, costs=dict(listener_ns=15000, wake_ns=700, fill_latency_ns=1000))
    buf = dev.allocator.allocate_buffer(16)
    s = dev.create_semaphore()
    dev.queue_fill([], [(s, 1)], buf, 0, 16, 1, 1)
    s.wait(1, WAIT)                                    # blocked before the GPU set s0 = 1 at 1001
    assert dev.now() == 1001 + 15000
    dev.queue_fill([], [(s, 2)], buf, 0, 16, 1, 1)
    dev.sleep(0.001)
    s.wait(2, WAIT)                                    # already set when the wait began: no latency
    assert dev.now() == 16001 + 1_000_000


def test_completion_handler_releases_after_the_signal(make):
    dev = metal(make, costs=dict(completion_ns=5000, fill_latency_ns=1000))
    buf = dev.allocator.allocate_buffer(16)
    s = dev.create_semaphore()
    dev.queue_fill([], [(s, 1)], buf, 0, 16, 1, 1)
    s.wait(1, WAIT)
    dev.sleep(0.001)
    events = [(e["ev"], e["t"]) for e in dev.trace if e["ev"] in ("retain", "op_done", "signal", "release")]
    assert events == [("retain", 0), ("op_done", 1001), ("signal", 1001), ("release", 6001)]


def test_retain_resources_false_records_a_release_while_in_flight(make):
    dev = make("metal", retain_resources=False)
    gate, done = dev.create_semaphore(), dev.create_semaphore()
    buf = dev.allocator.allocate_buffer(8)
    dev.queue_fill([(gate, 1)], [(done, 1)], buf, 0, 8, 7, 1)
    del buf
    gc.collect()
    gate.signal(1)
    done.wait(1, WAIT)
    assert [e["ev"] for e in dev.trace if e["ev"] in ("op", "retain", "host_release", "op_done", "release")] == \
        ["op", "host_release", "op_done"]


def test_host_call_runs_from_the_completion_handler_and_the_queue_goes_on(make):
    dev = metal(make, costs=dict(launch_ns=1000, host_call_latency_ns=10000, fill_latency_ns=1000))
    buf = dev.allocator.allocate_buffer(16)
    h, f = dev.create_semaphore(), dev.create_semaphore()
    seen = []
    dev.queue_host_call([], [(h, 1)], lambda args, ctx: seen.append(ctx.device.now()))
    dev.queue_fill([], [(f, 1)], buf, 0, 16, 1, 1)
    dev.wait_semaphores(hal.WaitMode.ALL, [(h, 1), (f, 1)], WAIT)
    assert seen == [11000]                              # cb done at 1000, the handler calls 10000 later
    o = ops(dev)
    assert (o["0:0"]["start"], o["0:0"]["end"]) == (1000, 11000)
    assert (o["0:1"]["start"], o["0:1"]["end"]) == (2000, 3001)


# -- failures ------------------------------------------------------------------------------------------

def test_failed_wait_fails_the_signals_and_skips_the_commands(make):
    dev = make("metal")
    buf = dev.allocator.allocate_buffer(16)
    gate, done = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_fill([(gate, 1)], [(done, 1)], buf, 0, 16, 0xAB, 1)
    gate.fail(S.CANCELLED, "upstream broke")
    with pytest.raises(hal.HalError) as ei:
        done.wait(1, WAIT)
    assert (ei.value.code, ei.value.message) == (S.CANCELLED, "upstream broke")
    assert buf.map_read() == bytes(16) and not cmds(dev)
    assert ops(dev)["0:0"]["status"] == S.CANCELLED


def test_legacy_sync_raises_a_failed_wait_and_signals_nothing(make):
    dev = make("metal", legacy_sync=True)
    gate, done = dev.create_semaphore(), dev.create_semaphore()
    gate.fail(S.DATA_LOSS, "gone")
    with pytest.raises(hal.HalError) as ei:
        dev.queue_barrier([(gate, 1)], [(done, 1)])
    assert ei.value.code == S.DATA_LOSS
    assert done.query() == 0
    assert ops(dev)["0:0"]["status"] == S.DATA_LOSS and not list(dev.trace.events("metal_cb"))


def test_close_cancels_a_blocked_wait_command_buffer(make):
    dev = make("metal")
    gate, done = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(gate, 1)], [(done, 1)])
    dev.close()
    (fail,) = dev.trace.events("fail")
    assert (fail["sem"], fail["status"], fail["message"]) == ("s1", S.CANCELLED, "queue shutting down")


def test_what_metal_cannot_encode_is_unimplemented(make):
    dev = make("metal")
    cb = dev.create_command_buffer()
    cb.begin()
    for call in (lambda: cb.execution_barrier(STAGE.HOST, STAGE.DISPATCH),
                 lambda: cb.execution_barrier(STAGE.DISPATCH, STAGE.HOST),
                 lambda: cb.signal_event(None, STAGE.DISPATCH),
                 lambda: cb.wait_events([], STAGE.DISPATCH, STAGE.DISPATCH),
                 dev.create_event):
        with pytest.raises(hal.HalError) as ei:
            call()
        assert ei.value.code == S.UNIMPLEMENTED
    assert cb.command_count == 0
    with pytest.raises(hal.HalError) as ei:
        cb.execution_barrier("soon", STAGE.DISPATCH)
    assert ei.value.code == S.INVALID_ARGUMENT and "source_stages" in ei.value.message


# -- options ------------------------------------------------------------------------------------------

def test_legacy_sync_is_a_metal_option_only(make):
    dev = hal.create_device("sim:metal?legacy_sync=1&queues=2")
    assert (dev.legacy_sync, dev.queue_count, dev.trace.header["options"]["legacy_sync"]) == (True, 2, True)
    dev.close()
    assert make("metal").trace.header["options"]["legacy_sync"] is False
    for uri in ("sim", "sim:sync"):
        with pytest.raises(hal.HalError) as ei:
            hal.create_device(uri, legacy_sync=True)
        assert ei.value.code == S.INVALID_ARGUMENT and "legacy_sync" in ei.value.message
    for bad in ("maybe", 1):
        with pytest.raises(hal.HalError) as ei:
            make("metal", legacy_sync=bad)
        assert ei.value.code == S.INVALID_ARGUMENT and "legacy_sync" in ei.value.message


def test_metal_cost_defaults_are_in_the_header(make):
    model = make("metal").trace.header["cost_model"]
    assert {k: model[k] for k in ("commit_ns", "encoder_switch_ns", "listener_ns", "completion_ns")} == \
        {"commit_ns": 2000, "encoder_switch_ns": 1000, "listener_ns": 15000, "completion_ns": 5000}
