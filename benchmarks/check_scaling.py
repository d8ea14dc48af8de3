"""Check-scaling benchmark (issue 4): seconds and peak RSS of ``check_trace`` on synthetic traces.

Two shapes per size N commands:

* ``cb``: N/100 ``execute`` ops of 100 commands (dispatches reading and writing 8 buffers, a barrier
  every 10), alternating two queues, chained by one timeline semaphore;
* ``ops``: N single-command ``fill`` ops on two independent timelines;
* ``ops_in_order``: the same on ``sim:metal`` (in-order queues: the queue-order edges of
  ``HappensBefore._queue_edges``).

Each check runs in a fresh process (``Trace.load`` + ``check_trace``), so the RSS is its own::

    .venv/bin/python benchmarks/check_scaling.py 10000 100000 1000000
"""

from __future__ import annotations

import functools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time


def make_cb(n_cmds: int, path: str) -> None:
    from reference.trace import Trace

    t = Trace({"device": "sim", "personality": "generic"})
    t.emit({"ev": "semaphore", "t": 0, "sem": "s0", "initial": 0, "thread": 0})
    per, ts = 100, 0
    for i in range(n_cmds // per):
        op = f"0:{i}"
        t.emit({"ev": "op", "t": ts, "op": op, "kind": "execute", "thread": 0, "queue": i % 2,
                "wait": [["s0", i]] if i else [], "signal": [["s0", i + 1]], "cb": f"c{i}", "commands": per})
        for k in range(per):
            ts += 1
            if k % 10 == 9:
                t.emit({"ev": "cmd", "t": ts, "op": op, "index": k, "kind": "barrier", "start": ts, "track": 0,
                        "access": [], "memory_barrier": False})
            else:
                b, row = k % 10, (k // 10) * 4096
                t.emit({"ev": "cmd", "t": ts, "op": op, "index": k, "kind": "dispatch", "start": ts, "track": 0,
                        "access": [[f"b{b}", row, 4096, "r"], [f"b{b}", 65536 + row, 4096, "w"]],
                        "entry": "negate", "workgroups": [1, 1, 1]})
        t.emit({"ev": "op_done", "t": ts, "op": op, "ready": ts, "start": ts, "track": 0, "status": 0})
        t.emit({"ev": "signal", "t": ts, "sem": "s0", "value": i + 1, "cause": op})
    t.save(path)


def make_ops(n: int, path: str, device: str = "sim", personality: str = "generic") -> None:
    from reference.trace import Trace

    t = Trace({"device": device, "personality": personality})
    for s in ("s0", "s1"):
        t.emit({"ev": "semaphore", "t": 0, "sem": s, "initial": 0, "thread": 0})
    for i in range(n):
        op, s, v = f"0:{i}", f"s{i % 2}", i // 2
        t.emit({"ev": "op", "t": i, "op": op, "kind": "fill", "thread": 0, "queue": i % 2,
                "wait": [[s, v]] if v else [], "signal": [[s, v + 1]]})
        t.emit({"ev": "cmd", "t": i, "op": op, "index": 0, "kind": "fill", "start": i, "track": 0,
                "access": [[f"b{i % 2}", (i % 16) * 256, 256, "w"]]})
        t.emit({"ev": "op_done", "t": i, "op": op, "ready": i, "start": i, "track": 0, "status": 0})
        t.emit({"ev": "signal", "t": i, "sem": s, "value": v + 1, "cause": op})
    t.save(path)


def check(path: str) -> dict:
    from halsim.checks import check_trace
    from reference.trace import Trace

    t0 = time.perf_counter()
    report = check_trace(Trace.load(path))
    return {"seconds": round(time.perf_counter() - t0, 2),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "findings": len(report.findings), **report.stats}


def main(sizes) -> None:
    with tempfile.TemporaryDirectory() as d:
        in_order = functools.partial(make_ops, device="sim:metal", personality="metal")
        for shape, make in (("cb", make_cb), ("ops", make_ops), ("ops_in_order", in_order)):
            for n in sizes:
                path = os.path.join(d, f"{shape}{n}.json")
                make(n, path)
                out = subprocess.run([sys.executable, __file__, "--check", path], check=True,
                                     capture_output=True, text=True).stdout
                print(json.dumps({"shape": shape, "commands": n, **json.loads(out)}), flush=True)
                os.unlink(path)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    if sys.argv[1:2] == ["--check"]:
        print(json.dumps(check(sys.argv[2])))
    else:
        main([int(a) for a in sys.argv[1:]] or [10_000, 100_000, 1_000_000])
