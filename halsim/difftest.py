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
import statistics
import threading
from typing import Callable

from reference import hal
from reference.hal.buffer import Buffer

from .deadline import call_program
from .trace_tools.deps import queue_edges, signal_wait_edges
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


def ordering_violations(trace) -> list[dict]:
    """Happens-before edges between operations that the trace's timestamps contradict."""
    ix = TraceIndex.of(trace)
    ops = {op["op"]: op for op in ix.ops if ix.ran(op) and op.get("status", 0) == 0}
    out = []
    for edge in list(signal_wait_edges(ix)) + list(queue_edges(ix)):
        src, dst = ops.get(edge.src), ops.get(edge.dst)
        if src is None or dst is None or edge.kind == "fail":
            continue  # host signals, failed ops: no device interval to compare
        if dst["start"] < src["end"]:
            what = f"{edge.sem}>={edge.value}" if edge.kind != "queue" else f"queue {edge.value} order"
            out.append({"src": edge.src, "dst": edge.dst, "kind": edge.kind, "why": what,
                        "src_end": src["end"], "dst_start": dst["start"]})
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
                "equal_reads": reads == ref_reads, "equal_result": result == ref_result,
                "first_difference": next((k for k, (a, b) in enumerate(zip(reads, ref_reads)) if a != b),
                                         None if len(reads) == len(ref_reads) else min(len(reads), len(ref_reads)))}
    outputs = [outputs_of(sim, sim_reads, sim_result, sim_error)] + \
              [outputs_of(f"{real} #{i + 1}", r[1], r[2], r[3]) for i, r in enumerate(real_runs)]
    outputs_equal = ref_error is None and all(o["equal_reads"] and o["equal_result"] and o["error"] is None
                                              for o in outputs)

    violations, inversions, timings = [], [], []
    for i, (trace, *_rest) in enumerate(real_runs):
        for v in ordering_violations(trace):
            violations.append({"run": i + 1, **v})
        d = diff_traces(sim_trace, trace, tolerance if tolerance is not None else 1e9)
        if TraceIndex.of(sim_trace).in_order:
            for inv in d["order_inversions"]:
                inversions.append({"run": i + 1, **inv})
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
                    "devices": outputs},
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
        if not (dev["equal_reads"] and dev["equal_result"]) or dev["error"]:
            lines.append(f"    {dev['device']}: reads {'equal' if dev['equal_reads'] else 'differ'} "
                         f"(first difference at read {dev['first_difference']}), result "
                         f"{'equal' if dev['equal_result'] else 'differs'}"
                         + (f", raised {dev['error']}" if dev["error"] else ""))
    ordv, inv = r["ordering"]["violations"], r["ordering"]["inversions"]
    lines.append(f"  ordering: {'OK' if not ordv and not inv else 'VIOLATED'} — {len(ordv)} required edges broken, "
                 f"{sum(i['count'] for i in inv)} in-order inversions vs the model")
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
