"""halsim difftest over generated programs (fifth pass): failed operations in the ordering checks,
schedules' buffers as outputs, why outputs differ."""

import pytest

from halsim.campaigns.generate import generate
from halsim.difftest import difftest, format_report, order_not_allowed, ordering_violations, schedule_program
from halsim.schedule import parse_schedule
from reference import hal
from reference.trace import Trace


def _trace(ops):
    """One in-order OpenCL queue: ``ops`` = (op id, start, end, status) enqueued in that order."""
    t = Trace({"device": "opencl", "clock": "monotonic", "personality": "opencl"})
    for op, *_ in ops:
        t.emit({"ev": "op", "t": 0, "op": op, "kind": "barrier", "thread": 0, "queue": 0, "wait": [], "signal": []})
    for op, start, end, status in ops:
        t.emit({"ev": "op_done", "t": end, "op": op, "ready": start, "start": start, "track": 0, "status": status})
    return t


def test_a_failed_op_is_no_queue_order_inversion():
    """A failed op never ran: its times are when the engine recorded the failure (on opencl, 26 ms
    after a later failed op's in one generated program: '8 queue orders the model does not allow')."""
    aborted = int(hal.StatusCode.ABORTED)
    t = _trace([("0:0", 10, 20, 0), ("0:1", 900, 900, aborted), ("0:2", 30, 30, aborted), ("0:3", 40, 50, 0)])
    assert order_not_allowed(t) == []
    assert ordering_violations(t) == []
    # (a successful op starting before an earlier one still is one)
    t = _trace([("0:0", 10, 20, 0), ("0:1", 900, 900, aborted), ("0:2", 5, 8, 0)])
    assert order_not_allowed(t) == [{"queue": 0, "thread": 0, "count": 1, "examples": [["0:0", "0:2"]]}]


def test_queue_order_is_checked_past_a_failed_op():
    """0:2 comes after 0:0 on the in-order queue even though 0:1 between them failed."""
    t = _trace([("0:0", 10, 50, 0), ("0:1", 60, 60, int(hal.StatusCode.ABORTED)), ("0:2", 40, 70, 0)])
    assert [(v["src"], v["dst"], v["kind"], v["why"], v["src_end"], v["dst_start"]) for v in ordering_violations(t)] \
        == [("0:0", "0:2", "queue", "queue 0 order", 50, 40)]


FILL_TWICE = {"buffers": {"a": 16, "b": 32, "gone": 16}, "semaphores": {"s": 0},
              "host": [{"call": "fill", "target": "a", "pattern": 7, "pattern_length": 1, "signal": {"s": 1}},
                       {"call": "fill", "target": {"buffer": "b", "offset": 16}, "pattern": 9, "pattern_length": 1,
                        "wait": {"s": 1}, "signal": {"s": 2}},
                       {"call": "release", "names": ["gone"]},
                       {"call": "wait", "wait": {"s": 2}}]}


def test_a_schedule_s_buffers_are_its_outputs():
    """Every declared buffer is read at the end (not one a release step dropped): before, a schedule's
    outputs were only the steps that raised ('0 buffer reads compared' for any generated program)."""
    reads = []
    program = schedule_program(parse_schedule(FILL_TWICE))
    with hal.create_device("local-sync") as dev:
        from halsim import difftest as module
        with module._reads_of(reads):
            assert program(dev) == []
    assert [(buf, offset, data) for buf, offset, data in reads] == [
        ("b0", 0, bytes([7] * 16)), ("b1", 0, bytes(16) + bytes([9] * 16))]
    r = difftest(program, real="local-sync", sim="sim", runs=1)
    assert (r["outputs"]["reference_reads"], r["outputs"]["equal"], r["ok"]) == (2, True, True)
    assert "outputs:  OK — 2 buffer reads compared" in format_report(r)


def _racy(dev):
    """Two unordered fills of one range (hazard.waw), and a result only the reference differs on."""
    buf = dev.allocator.allocate_buffer(64)
    a, b = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_fill([], [(a, 1)], buf, 0, 64, 1, 1)
    dev.queue_fill([], [(b, 1)], buf, 0, 64, 2, 1)
    a.wait(1, timeout=10)
    b.wait(1, timeout=10)
    return dev.uri != "local-task"


def test_why_outputs_differ_is_said():
    r = difftest(_racy, real="local-sync", sim="sim", runs=1)
    assert r["ok"] is False and r["outputs"]["equal"] is False
    assert r["outputs"]["findings"] == {"hazard.waw": 1}
    assert [(d["device"], d["equal_result"], d.get("equal_to_model")) for d in r["outputs"]["devices"]] == [
        ("sim", False, None), ("local-sync #1", False, True)]
    text = format_report(r)
    assert "    local-sync #1: reads equal, result differs — as the model's" in text
    assert "    halsim check finds hazard.waw x1 in the model's trace: the program's outputs depend on timing" in text
    assert "first difference at read None" not in text


# -- on opencl (PoCL) ---------------------------------------------------------------------------------

def _opencl():
    pytest.importorskip("pyopencl", reason="the opencl extra (pyopencl[pocl]) is part of `make test`")
    try:
        hal.create_device("opencl").close()
    except hal.HalError as e:
        pytest.skip(f"opencl unavailable: {e}")


@pytest.mark.parametrize("seed", [3, 11, 29])
def test_generated_programs_agree_on_opencl_and_its_model(seed):
    _opencl()
    doc = generate(seed, size=8, queues=2, gates=1, device="opencl")
    r = difftest(schedule_program(parse_schedule(doc)), real="opencl?queues=2", sim="sim:opencl?queues=2", runs=1)
    assert r["outputs"]["reference_reads"] == len(doc["buffers"]) >= 1
    assert r["outputs"]["equal"] is True, r["outputs"]
    assert (r["ordering"]["violations"], r["ordering"]["inversions"]) == ([], [])


def _behind_a_failed_wait(dev):
    buf = dev.allocator.allocate_buffer(64)
    gate, a, b = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(gate, 1)], [(a, 1)])          # A waits for the gate
    dev.queue_fill([], [(b, 1)], buf, 0, 64, 7, 1)     # B waits for nothing, queued behind A
    gate.fail(hal.StatusCode.ABORTED, "cancelled")
    try:
        b.wait(1, timeout=30)
        return "ran"
    except hal.HalError as e:
        return e.code.name


def test_an_op_queued_behind_a_failed_wait_fails_on_opencl_and_its_model():
    """PoCL fails the commands enqueued on an in-order queue behind one whose user event failed."""
    _opencl()
    out = {}
    for uri in ("opencl", "sim:opencl"):
        with hal.create_device(uri) as dev:
            out[uri] = _behind_a_failed_wait(dev)
    assert out == {"opencl": "ABORTED", "sim:opencl": "ABORTED"}


def _barrier_after_host_wait(dev):
    exe = dev.load_executable()
    big, s = dev.allocator.allocate_buffer(1 << 16), dev.create_semaphore()
    dev.queue_fill([], [(s, 1)], big, 0, 64, 1, 1, queue_affinity=1 << 1)
    dev.queue_dispatch([(s, 1)], [(s, 2)], exe, "spin", (64, 1, 1), (20000,), (big,), queue_affinity=1)
    s.wait(2, timeout=30)
    dev.queue_barrier([(s, 2)], [(s, 3)], queue_affinity=1 << 1)   # its wait met on the host already
    s.wait(3, timeout=30)


def test_a_barrier_issued_after_its_wait_was_met_is_stamped_after_what_it_waited_for():
    _opencl()
    dev = hal.create_device("opencl?queues=2")
    _barrier_after_host_wait(dev)
    dev.close()
    assert ordering_violations(dev.trace) == []


_FAILED_AHEAD_OF_ITS_PRODUCER = '''
import sys
from reference import hal
dev = hal.create_device("opencl?queues=2")
exe = dev.load_executable()
big = dev.allocator.allocate_buffer(1 << 16)
s, gate, f = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
dev.queue_dispatch([], [(s, 1)], exe, "spin", (64, 1, 1), (200000,), (big,), queue_affinity=1)
dev.queue_barrier([(s, 1), (gate, 1)], [(f, 1)], queue_affinity=1 << 1)   # reuses the dispatch's event
gate.fail(hal.StatusCode.ABORTED, "cancelled")
try:
    f.wait(1, timeout=30)
except hal.HalError as e:
    print("barrier", e.code.name)
s.wait(1, timeout=30)   # the dispatch waits for nothing: it must succeed
dev.close()
print("dispatch", [o["status"] for o in dev.trace.operations()])
'''


def test_an_op_failing_ahead_of_its_producer_leaves_the_producer_running():
    """The barrier fails through its gate's user event at once, while the dispatch whose signal event
    it also waits on still runs; the engine completed that dispatch with it (its profile not
    available yet: INTERNAL → ABORTED), and PoCL then often corrupted the heap: run in a child."""
    _opencl()
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", _FAILED_AHEAD_OF_ITS_PRODUCER], capture_output=True, text=True,
                       timeout=120)
    assert (p.returncode, p.stdout.split("\n")[:2]) == (0, ["barrier ABORTED", "dispatch [0, 10]"])


def test_cli_schedule_outputs_and_the_default_model_takes_the_queue_count(tmp_path, capsys):
    import json

    from halsim import cli
    path = tmp_path / "s.json"
    path.write_text(json.dumps(FILL_TWICE))
    assert cli.main(["difftest", str(path), "--real", "local-sync", "--sim", "sim", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["outputs"]["reference_reads"], report["ok"]) == (2, True)
    assert cli._default_sim("opencl?platform=Portable&queues=3") == "sim:opencl?queues=3"
