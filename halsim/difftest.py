"""``halsim difftest``: one program on a real backend and on its simulator model, compared (issue 6).

The program runs on the reference device (``local-task``: the NumPy kernels), on the model
(``sim:opencl`` by default) and ``runs`` times on the real device (``opencl``). The report says:

* **outputs** — every buffer read the program makes (``map_read``, in program order) and its return
  value are byte-equal on every device and equal to the reference;
* **ordering** — every happens-before edge the HAL contract requires holds in each real trace's
  device timestamps (a semaphore-satisfied or in-order-queue successor starts no earlier than its
  predecessor ended), and every ordering the real device showed is allowed by the model (no two
  operations of one in-order queue ran in the other order than in the simulated trace);
* **timing** — the trace diff (:mod:`halsim.trace_tools.diff`) of the simulated trace against each
  real one: makespan error and per-operation duration ratios.

Exit status (CLI): 0 when outputs and ordering agree (and, with ``--tolerance``, the makespan error of
every run is within it), 1 otherwise, 2 for bad input.

>>> def program(dev):
...     buf, done = dev.allocator.allocate_buffer(8), dev.create_semaphore()
...     dev.queue_fill([], [(done, 1)], buf, 0, 8, 7, 1)
...     done.wait(1, timeout=10)
...     return buf.map_read()
>>> report = difftest(program, real="local-sync", sim="sim", runs=1)
>>> report["outputs"]["equal"], report["ordering"]["violations"], report["ok"]
(True, [], True)
"""

from __future__ import annotations

import contextlib
import math
import statistics
import threading
from collections import Counter
from typing import Callable

import numpy as np

from reference import hal
from reference.hal.buffer import Buffer

from .deadline import call_program
from .trace_tools.deps import Satisfier, queue_edges, signal_wait_edges
from .trace_tools.diff import diff_traces
from .trace_tools.model import TraceIndex

_capture = threading.local()
_patch_lock = threading.Lock()
_original_map_read = Buffer.map_read


def _recording_map_read(self, offset: int = 0, length: int = hal.WHOLE_BUFFER) -> bytes:
    data = _original_map_read(self, offset, length)
    reads = getattr(_capture, "reads", None)
    if reads is not None:
        reads.append((self.id, offset, bytes(data)))
    return data


@contextlib.contextmanager
def _reads_of(thread_reads: list):
    """Record the calling thread's ``Buffer.map_read`` results into ``thread_reads``."""
    with _patch_lock:
        Buffer.map_read = _recording_map_read
    _capture.reads = thread_reads
    try:
        yield
    finally:
        _capture.reads = None


def _code(error: str | None) -> str | None:
    return None if error is None else error.split(":", 1)[0]


def same_value(a, b) -> bool:
    """Whether two return values of the program agree: NumPy arrays by shape, dtype and bytes (NaNs
    of the same bits agree), floats with NaN equal to NaN, lists, tuples and dicts item by item, any
    other value by ``==`` (a comparison that raises, or answers something not a bool, is a difference).

    >>> import numpy as np
    >>> same_value(np.arange(3.0), np.arange(3.0)), same_value([float("nan"), b"x"], [float("nan"), b"x"])
    (True, True)
    >>> same_value(np.zeros(2, np.float32), np.zeros(2, np.float64)), same_value({"a": 1}, {"a": 2})
    (False, False)
    """
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape \
            and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    try:
        equal = a == b
    except Exception:  # noqa: BLE001 - a value that cannot be compared differs
        return False
    return equal if isinstance(equal, bool) else bool(equal) if isinstance(equal, np.bool_) else False


def run_on(program: Callable, uri: str):
    """Run ``program(device)`` on ``uri``: (trace, reads, return value, error message or None)."""
    reads: list = []
    with _reads_of(reads):
        dev = hal.create_device(uri)
        result, error = None, None
        try:
            result = call_program(program, dev)  # (sys.exit(0) ends the program; sys.exit(N): ProgramExit)
        except hal.HalError as e:
            error = f"{e.code.name}: {e.message.splitlines()[0] if e.message else ''}"
        finally:
            dev.close()
    return dev.trace, reads, result, error


def schedule_program(schedule) -> Callable:
    """A schedule (``docs/schedule-format.md``) as a difftest program: it runs the schedule's steps on
    the device, then reads every buffer the schedule declares (``[buffers]``, in order, whole) — the
    outputs compared — and returns the steps that raised, as ``(step, status)`` pairs. Buffers a
    ``release`` step names are neither kept nor read (the release must drop the last reference);
    transient buffers are not read (their storage is gone after the dealloca).

    >>> from halsim.schedule import parse_schedule
    >>> doc = {"buffers": {"a": 16}, "semaphores": {"s": 0},
    ...        "host": [{"call": "fill", "target": "a", "pattern": 7, "pattern_length": 1, "signal": {"s": 1}},
    ...                 {"call": "wait", "wait": {"s": 1}}]}
    >>> r = difftest(schedule_program(parse_schedule(doc)), real="local-sync", sim="sim")
    >>> r["outputs"]["reference_reads"], r["ok"]
    (1, True)
    """
    from .schedule.run import run_schedule_on

    def program(dev):
        outputs: list = []
        errors = run_schedule_on(dev, schedule, outputs)
        for buf in outputs:
            buf.map_read()
        return [(e.where, hal.StatusCode(e.code).name) for e in errors]
    return program


def ordering_violations(trace) -> list[dict]:
    """Happens-before edges between operations that the trace's timestamps contradict."""
    ix = TraceIndex.of(trace)
    ops = {op["op"]: op for op in ix.ops if ix.ran(op) and op.get("status", 0) == 0}
    out = []
    for edge in list(signal_wait_edges(ix)) + queue_edges(ix, ops):
        src, dst = ops.get(edge.src), ops.get(edge.dst)
        if src is None or dst is None or edge.kind == "fail":
            continue  # host signals, failed ops: no device interval to compare
        if dst["start"] < src["end"]:
            what = f"{edge.sem}>={edge.value}" if edge.kind != "queue" else f"queue {edge.value} order"
            out.append({"src": edge.src, "dst": edge.dst, "kind": edge.kind, "why": what,
                        "src_end": src["end"], "dst_start": dst["start"]})
    return out


def order_not_allowed(trace) -> list[dict]:
    """Pairs of one in-order queue's operations that ran in an order the driver model cannot produce:
    ``X`` enqueued before ``Y`` by the same host thread, and ``Y`` started before ``X``, where ``X``
    must have reached the queue first — always on ``opencl`` and ``metal`` (every queue call is
    enqueued or committed as it is made), on ``cuda`` when ``X`` was ready when enqueued (its waits
    met by then: an action ready at arrival is issued before any later arrival; a pending one may
    legally be issued after later ready ones). Operations of different host threads, or ``X``
    pending on ``cuda``, may run in either order: their order is a matter of timing, which the
    real device and the model are free to settle differently. ``{queue, thread, count, examples}``
    per queue and thread with any."""
    ix = TraceIndex.of(trace)
    if not ix.in_order:
        return []
    sat = Satisfier(ix)
    every = ix.personality in ("opencl", "metal")

    def ready_at_enqueue(pos, op) -> bool:
        for sem, value in op.get("wait", ()):
            s = sat(sem, value)
            if s is not None and not (s[3] == "semaphore" and s[0] < ix.op_seq[pos]):
                return False
        return True

    lanes: dict = {}
    for pos, op in enumerate(ix.ops):
        # (a failed operation never ran: its start is when its failure was recorded, on the host)
        if ix.ran(op) and op.get("queue") is not None and not op.get("status"):
            lanes.setdefault((op["queue"], op.get("thread")), []).append(pos)
    out = []
    for (queue, thread), positions in sorted(lanes.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        latest = None  # (start, op id) of the latest-starting earlier op that had to reach the queue first
        count, examples = 0, []
        for pos in positions:
            op = ix.ops[pos]
            if latest is not None and op["start"] < latest[0]:
                count += 1
                if len(examples) < 10:
                    examples.append([latest[1], op["op"]])
            if (every or ready_at_enqueue(pos, op)) and (latest is None or op["start"] > latest[0]):
                latest = (op["start"], op["op"])
        if count:
            out.append({"queue": queue, "thread": thread, "count": count, "examples": examples})
    return out


def difftest(program: Callable, real: str = "opencl", sim: str = "sim:opencl", runs: int = 1,
             reference: str = "local-task", tolerance: float | None = None, progress=None) -> dict:
    """Run and compare (see the module docstring); returns the JSON-able report."""
    say = progress or (lambda _msg: None)
    say(f"reference {reference}")
    ref_trace, ref_reads, ref_result, ref_error = run_on(program, reference)
    say(f"model {sim}")
    sim_trace, sim_reads, sim_result, sim_error = run_on(program, sim)
    real_runs = []
    for i in range(runs):
        say(f"real {real} run {i + 1}/{runs}")
        real_runs.append(run_on(program, real))

    def outputs_of(name, reads, result, error):
        return {"device": name, "reads": len(reads), "error": error,
                "equal_reads": reads == ref_reads, "equal_result": same_value(result, ref_result),
                "equal_error": _code(error) == _code(ref_error),
                "first_difference": next((k for k, (a, b) in enumerate(zip(reads, ref_reads)) if a != b),
                                         None if len(reads) == len(ref_reads) else min(len(reads), len(ref_reads)))}
    outputs = [outputs_of(sim, sim_reads, sim_result, sim_error)] + \
              [outputs_of(f"{real} #{i + 1}", r[1], r[2], r[3]) for i, r in enumerate(real_runs)]
    for o, r in zip(outputs[1:], real_runs):
        # (a device that follows its model where both depart from the reference, e.g. sticky failures)
        o["equal_to_model"] = r[1] == sim_reads and same_value(r[2], sim_result) and _code(r[3]) == _code(sim_error)
    # A HalError the program raised is an output too: the same status code everywhere is agreement
    # (drivers word their messages differently; the report shows each one)
    outputs_equal = all(o["equal_reads"] and o["equal_result"] and o["equal_error"] for o in outputs)
    findings = None
    if not outputs_equal:
        # Why they may differ: a racy program (halsim check's findings on the model's trace) has no
        # one right output
        from .checks import check_trace
        findings = dict(Counter(f.rule for f in check_trace(sim_trace).findings))

    violations, inversions, timings = [], [], []
    for i, (trace, *_rest) in enumerate(real_runs):
        for v in ordering_violations(trace):
            violations.append({"run": i + 1, **v})
        for inv in order_not_allowed(trace):
            inversions.append({"run": i + 1, **inv})
        d = diff_traces(sim_trace, trace, tolerance if tolerance is not None else 1e9)
        timings.append({"run": i + 1, "makespan_sim_ns": d["makespan"]["a"], "makespan_real_ns": d["makespan"]["b"],
                        "makespan_error": d["makespan"]["error"],
                        "duration_ratio_median": d["timing"]["duration_ratio_median"],
                        "largest": d["timing"]["largest"][:5]})
    errors = [abs(t["makespan_error"]) for t in timings if t["makespan_error"] is not None]
    timing_ok = tolerance is None or (bool(errors) and max(errors) <= tolerance)
    ok = outputs_equal and not violations and not inversions and timing_ok
    return {
        "program_devices": {"reference": reference, "sim": sim, "real": real, "runs": runs},
        "outputs": {"equal": outputs_equal, "reference_reads": len(ref_reads), "reference_error": ref_error,
                    "devices": outputs, "findings": findings},
        "ordering": {"violations": violations, "inversions": inversions},
        "timing": {"tolerance": tolerance, "runs": timings,
                   "makespan_error_median": round(statistics.median(errors), 6) if errors else None,
                   "within_tolerance": timing_ok},
        "ok": ok,
        "traces": {"reference": ref_trace, "sim": sim_trace, "real": [r[0] for r in real_runs]},
    }


def format_report(r: dict) -> str:
    d = r["program_devices"]
    lines = [f"difftest: {d['real']} x{d['runs']} vs model {d['sim']} (reference {d['reference']})"]
    o = r["outputs"]
    lines.append(f"  outputs:  {'OK' if o['equal'] else 'DIFFER'} — {o['reference_reads']} buffer reads compared"
                 + (f"; reference failed: {o['reference_error']}" if o["reference_error"] else ""))
    for dev in o["devices"]:
        if not (dev["equal_reads"] and dev["equal_result"] and dev["equal_error"]) or dev["error"]:
            lines.append(f"    {dev['device']}: reads {'equal' if dev['equal_reads'] else 'differ'}"
                         + ("" if dev["equal_reads"] else f" (first difference at read {dev['first_difference']})")
                         + f", result {'equal' if dev['equal_result'] else 'differs'}"
                         + (f", raised {dev['error']}" if dev["error"] else "")
                         + (" — as the model's" if dev.get("equal_to_model") and not o["equal"] else ""))
    if o.get("findings"):
        lines.append("    halsim check finds " + ", ".join(f"{rule} x{n}" for rule, n in sorted(o["findings"].items()))
                     + " in the model's trace: the program's outputs depend on timing")
    ordv, inv = r["ordering"]["violations"], r["ordering"]["inversions"]
    lines.append(f"  ordering: {'OK' if not ordv and not inv else 'VIOLATED'} — {len(ordv)} required edges broken, "
                 f"{sum(i['count'] for i in inv)} queue orders the model does not allow")
    for i in inv[:10]:
        lines.append(f"    run {i['run']}: queue {i['queue']}, host thread {i['thread']}: {i['count']} ops started "
                     f"before one it enqueued earlier (e.g. {' before '.join(reversed(i['examples'][0]))})")
    for v in ordv[:10]:
        lines.append(f"    run {v['run']}: {v['dst']} started at {v['dst_start']} before {v['src']} ended at "
                     f"{v['src_end']} ({v['why']})")
    t = r["timing"]
    for run in t["runs"]:
        err = run["makespan_error"]
        lines.append(f"  timing run {run['run']}: makespan sim {run['makespan_sim_ns'] / 1e3:.1f} us, real "
                     f"{run['makespan_real_ns'] / 1e3:.1f} us, error {'n/a' if err is None else f'{100 * err:+.1f}%'}; "
                     f"median duration ratio real/sim {run['duration_ratio_median']}")
    if t["tolerance"] is not None:
        lines.append(f"  timing:   {'within' if t['within_tolerance'] else 'OUTSIDE'} tolerance "
                     f"{100 * t['tolerance']:.0f}%")
    lines.append("result: " + ("OK" if r["ok"] else "MISMATCH"))
    return "\n".join(lines)
