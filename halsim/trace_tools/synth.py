"""Synthetic traces of any size, written straight as trace events (no device run): for the trace
tools' benchmark and for tests that need many spans.

``synthetic_trace(ops, commands_per_op, queues)``: ``ops`` execute operations round-robin over
``queues`` queue tracks, each a command buffer of ``commands_per_op`` fills of ``cmd_ns`` each
(``scale`` stretches every duration: a second trace to diff against). Operation k on queue q
signals queue q's timeline semaphore to its per-queue count n and, from its second round on, waits
for the previous queue's semaphore to reach n - 1, so the queues run side by side, chained by
cross-queue dependencies. One host thread enqueues everything, then waits for the
last value of every semaphore.

>>> t = synthetic_trace(ops=4, commands_per_op=2, queues=2, scale=1.5)
>>> [(op["op"], op["queue"], op["wait"], op["signal"], op["start"], op["end"]) for op in t.operations()]
[('0:0', 0, [], [['s0', 1]], 0, 3000), ('0:1', 1, [], [['s1', 1]], 0, 3000), ('0:2', 0, [['s1', 1]], [['s0', 2]], 3000, 6000), ('0:3', 1, [['s0', 1]], [['s1', 2]], 3000, 6000)]
"""

from __future__ import annotations

from reference.trace import Trace


def synthetic_trace(ops: int, commands_per_op: int = 10, queues: int = 8, cmd_ns: int = 1000,
                    scale: float = 1.0, device: str = "synthetic") -> Trace:
    """A trace of ``ops`` operations of ``commands_per_op`` commands (see the module docstring)."""
    t = Trace({"device": device, "clock": "virtual", "personality": "generic", "options": {"queues": queues}})
    emit = t.emit
    for q in range(queues):
        emit({"ev": "track", "id": q, "kind": "queue", "name": f"queue {q}"})
    emit({"ev": "track", "id": queues, "kind": "host", "name": "host thread 0"})
    emit({"ev": "buffer", "t": 0, "buf": "b0", "size": 1 << 20, "memory_type": 50, "usage": 0, "access": 7,
          "transient": False, "op": None})
    for q in range(queues):
        emit({"ev": "semaphore", "t": 0, "sem": f"s{q}", "initial": 0, "thread": 0})
    dur = max(1, round(cmd_ns * scale))
    template = t.add_template({"ev": "cmd", "t": 0, "op": "", "index": 0, "kind": "fill", "start": 0, "track": 0,
                               "access": [["b0", 0, 4096, "w"]]})
    templates = [template]
    for i in range(1, commands_per_op):
        templates.append(t.add_template({"ev": "cmd", "t": 0, "op": "", "index": i, "kind": "fill", "start": 0,
                                         "track": 0, "access": [["b0", 4096 * i, 4096, "w"]]}))
    free = [0] * queues  # when each queue is next idle
    done: dict[tuple[int, int], int] = {}  # (queue, count) → signal time
    for k in range(ops):
        q = k % queues
        n = k // queues + 1  # this op's count on its queue
        op_id = f"0:{k}"
        wait = []
        ready = 0
        if k >= queues:
            p = (q - 1) % queues
            need = n - 1  # the previous queue's previous round: the queues run side by side, one round apart
            if need > 0:
                wait = [[f"s{p}", need]]
                ready = done[(p, need)]
        emit({"ev": "op", "t": 0, "op": op_id, "kind": "execute", "thread": 0, "queue": q, "wait": wait,
              "signal": [[f"s{q}", n]], "cb": "c0", "commands": commands_per_op})
        start = max(ready, free[q])
        s = start
        for tpl in templates:
            t.emit_from(tpl, s + dur, op_id, s, q)
            s += dur
        free[q] = s
        done[(q, n)] = s
        emit({"ev": "op_done", "t": s, "op": op_id, "ready": ready, "start": start, "track": q, "status": 0})
        emit({"ev": "signal", "t": s, "sem": f"s{q}", "value": n, "cause": op_id})
    last = max(free, default=0)
    emit({"ev": "host_wait", "t": last, "thread": 0, "mode": "all", "start": 0, "status": 0,
          "wait": [[f"s{q}", (ops - q + queues - 1) // queues] for q in range(queues) if q < ops]})
    return t
