"""Deadlocks: operations and host waits that can never proceed.

A trace of a deadlocked run (or one that ended with work still queued) has *stuck* ops: no
``op_done``, or one that reports the deadlock. Their unmet waits are joined into a wait-for graph —
an op waits for the stuck ops whose signal lists would meet its wait and, on in-order queues, for
the stuck op ahead of it — and:

* ``deadlock.cycle`` — stuck ops that wait on each other through semaphores;
* ``deadlock.queue_order`` — a cycle that goes through queue order: an op waits for a value that
  only an op queued *behind* it on the same in-order queue signals (same-queue wait-before-signal);
* ``deadlock.unsignaled`` — a stuck op waits for a value nothing ever signals (no op, pending or
  done, and no host call; a host call that returned DEFERRED and whose list nobody signaled is
  named: it finished, but never signaled);
* ``deadlock.host_wait`` — a host wait failed with a deadlock (or a deadline) for a value no
  operation would ever signal: the host itself was supposed to signal it, or nobody was.

>>> from reference import hal
>>> from halsim.sim import DeadlockError
>>> from halsim.checks import check_trace
>>> dev = hal.create_device("sim")
>>> a, b = dev.create_semaphore(), dev.create_semaphore()
>>> dev.queue_barrier([(a, 1)], [(b, 1)])
>>> dev.queue_barrier([(b, 1)], [(a, 1)])
>>> try:
...     b.wait(1)
... except DeadlockError:
...     pass
>>> [(f.rule, f.ops) for f in check_trace(dev.trace).findings]
[('deadlock.cycle', ['0:0', '0:1'])]
>>> dev.close()
"""

from __future__ import annotations

from bisect import bisect_left

import networkx as nx

from ...sim.deadlock import in_order_head
from ..findings import Finding
from ..model import op_key

RULES = {
    "deadlock.cycle": "stuck operations wait on each other through semaphores",
    "deadlock.queue_order": "an op waits for a value only an op behind it on the same in-order queue signals",
    "deadlock.unsignaled": "a stuck op waits for a semaphore value nothing signals",
    "deadlock.host_wait": "a host wait can never return: no operation would signal what it waits for",
}


class _State:
    """The trace at the moment of the deadlock: the first event that reports one (a host wait or a
    blocked sim:sync call), or the end of the trace. Closing a deadlocked device afterwards cancels
    and even runs ops, which must not hide what was stuck."""

    def __init__(self, model):
        self.model = model
        self.cut = model.deadlock_at

    def stuck(self, op) -> bool:
        if self.cut is None:
            return op.stuck
        return op.enq < self.cut and (op.done is None or op.done >= self.cut)

    def value(self, sem) -> int:
        if self.cut is None:
            return self.model.final_value(sem)
        return max([self.model.initial.get(sem, 0)] +
                   [v for v, _c, i in self.model.signals.get(sem, ()) if i < self.cut])

    def unmet(self, waits) -> list[tuple[str, int]]:
        """Waits never met. A failure counts as met (the waiter fails, it does not hang) unless a
        stuck op caused it (cancelled when the device closed)."""
        def failed(s):
            fail = self.model.fails.get(s)
            if fail is None or (self.cut is not None and fail[3] > self.cut):
                return False
            return not (fail[2] in self.model.ops and self.stuck(self.model.ops[fail[2]]))
        return [(s, v) for s, v in waits if self.value(s) < v and not failed(s)]


def check(model, hb) -> list[Finding]:
    st = _State(model)
    stuck = [op for op in model.ops.values() if st.stuck(op)]
    out: list[Finding] = []
    if not stuck and st.cut is None and not any(ev.kind == "wait" and ev.status in (4, 10)
                                                 for evs in model.host.values() for ev in evs):
        return out
    # who would signal (sem, >= value): every op in the trace, stuck or not, sorted by value — but
    # not one that finished without getting there (a host call that returned DEFERRED: HAL Q12)
    signalers: dict[str, list] = {}
    unsent: dict[str, list] = {}   # sem -> [(value, op id)] of those
    for op in model.ops.values():
        for sem, v in op.signal:
            if op.status == 0 and not st.stuck(op) and model.final_value(sem) < v:
                unsent.setdefault(sem, []).append((v, op.id))
                continue
            signalers.setdefault(sem, []).append((v, op_key(op.id), op.id))
    stuck_ids = {op.id for op in stuck}
    free_from: dict[str, list] = {}   # sem -> for each position: a non-stuck signaler at or after it?
    for sem, lst in signalers.items():
        lst.sort()
        flags, seen = [False] * len(lst), False
        for i in range(len(lst) - 1, -1, -1):
            seen = seen or lst[i][2] not in stuck_ids
            flags[i] = seen
        free_from[sem] = flags
    # each stuck op's unmet waits: (sem, value, nearest stuck signalers, whether one that ran meets it)
    needs: dict[str, list] = {}
    for op in stuck:
        needs[op.id] = []
        for sem, v in st.unmet(op.wait):
            lst = signalers.get(sem, [])
            i = bisect_left(lst, (v,))
            others = [x for x in lst[i:i + 8] if x[2] != op.id] or [x for x in lst[i:] if x[2] != op.id][:1]
            if not others:
                out.append(Finding("deadlock.unsignaled", "error", [op.id],
                                   f"{op.kind} {op.id} waits for {sem}>={v} but nothing signals {sem} "
                                   f"to >= {v} (it stays at {st.value(sem)})" + _unsent(model, unsent, sem, v),
                                   {"semaphore": sem, "value": v}))
            free = i < len(lst) and free_from[sem][i]   # an op that ran (so not this one) meets it
            nearest = [x[2] for x in others if x[0] == others[0][0]][:4] if others else []
            needs[op.id].append((sem, v, nearest, free))
    ahead: dict[str, tuple[str, int]] = {}   # op -> the stuck op before it on its in-order queue
    if model.ordering == "in_order":
        last: dict[int, str] = {}
        stuck_ids = {op.id for op in stuck}
        for op in (o for o in model.queue_order() if o.id in stuck_ids):
            if op.queue in last:
                ahead[op.id] = (last[op.queue], op.queue)
            last[op.queue] = op.id
    blocked_sem, met_sem = _blocked(stuck, needs, {}, model)
    blocked_all, met_all = _blocked(stuck, needs, ahead, model)
    # semaphores alone deadlock these: cycles among them
    g = _graph(blocked_sem, needs, met_sem, {})
    for comp in _cyclic(g):
        cyc = _shortest_cycle(g, comp)
        sems = sorted({g.edges[a, b]["sem"] for a, b in cyc})
        out.append(Finding("deadlock.cycle", "error", sorted({a for a, _b in cyc}, key=op_key),
                           f"semaphore cycle {' -> '.join(sems)}: " + _steps(g, cyc), {"semaphores": sems}))
    # these only deadlock because an in-order queue runs them in enqueue order
    g = _graph(blocked_all, needs, met_all, ahead)
    for comp in _cyclic(g):
        if comp <= blocked_sem:
            continue
        cyc = _shortest_cycle(g, comp, through_queue=True)
        queues = [g.edges[a, b]["queue"] for a, b in cyc if "queue" in g.edges[a, b]]
        sems = sorted({g.edges[a, b]["sem"] for a, b in cyc if "sem" in g.edges[a, b]})
        out.append(Finding("deadlock.queue_order", "error", sorted({a for a, _b in cyc}, key=op_key),
                           f"{in_order_head(queues)}: " + _steps(g, cyc),
                           {"semaphores": sems, "queue": queues[0]}))
    for thread, events in model.host.items():
        for ev in events:
            if ev.kind != "wait" or ev.status not in (4, 10):
                continue
            unmet = st.unmet(ev.wait)
            orphan = [(s, v) for s, v in unmet if not signalers.get(s) or signalers[s][-1][0] < v]
            # a deadline on any device (local-task's too, which cannot tell that nothing could
            # have signaled in time) counts when no operation signals it and nobody did later
            if orphan and (ev.mode == "any" and len(orphan) == len(unmet) or ev.mode == "all"):
                s, v = orphan[0]
                out.append(Finding("deadlock.host_wait", "error", [],
                                   f"host thread {thread} waits for {s}>={v} but no operation "
                                   f"signals {s} to >= {v} and no other host thread did" + _unsent(model, unsent, s, v),
                                   {"thread": thread, "semaphore": s, "value": v}))
    return out


def _unsent(model, unsent, sem: str, value: int) -> str:
    """Why an op whose list names ``sem`` >= ``value`` did not signal it, for the message."""
    for v, op_id in sorted(unsent.get(sem, ()), key=lambda x: (x[0], op_key(x[1]))):
        if v < value:
            continue
        op = model.ops[op_id]
        if op.kind == "host_call":
            return (f"; host call {op_id} finished without signaling {sem}={v} (its function returned "
                    f"DEFERRED, taking the signal over) and nothing signaled it since: signal or fail "
                    f"ctx.signal when the deferred work ends")
        return f"; {op.kind} {op_id} finished without signaling {sem}={v}"
    return ""


def _blocked(stuck, needs, ahead, model) -> tuple[set, set]:
    """Stuck ops that could never run, and the waits (op, index) that would be met: the least
    fixpoint of "can complete" (every unmet wait has a signaler that can complete, and so has the
    op ahead on its queue). Ops that merely *could* signal each other in a cycle never enter it.
    A worklist over waits sorted by value: linear-logarithmic, even for a long stuck chain."""
    remaining: dict[str, int] = {}
    pending: dict[str, list] = {}   # sem -> [(value, op, wait index)] not yet met, sorted
    behind: dict[str, list] = {}    # op -> the op queued right behind it
    ready = []
    for op in stuck:
        count = 0
        for i, (sem, v, _nearest, free) in enumerate(needs[op.id]):
            if not free:
                count += 1
                pending.setdefault(sem, []).append((v, op_key(op.id), op.id, i))
        if op.id in ahead:
            count += 1
            behind.setdefault(ahead[op.id][0], []).append(op.id)
        remaining[op.id] = count
        if count == 0:
            ready.append(op.id)
    for lst in pending.values():
        lst.sort(reverse=True)   # smallest value last: pop() meets waits in value order
    met, done = set(), set()
    while ready:
        x = ready.pop()
        done.add(x)
        woken = list(behind.get(x, ()))
        for sem, val in model.ops[x].signal:
            lst = pending.get(sem)
            while lst and lst[-1][0] <= val:
                _v, _k, y, i = lst.pop()
                if y != x:
                    met.add((y, i))
                    woken.append(y)
        for y in woken:
            remaining[y] -= 1
            if remaining[y] == 0:
                ready.append(y)
    return {op.id for op in stuck} - done, met


def _graph(blocked: set, needs, met: set, ahead) -> nx.DiGraph:
    """Wait-for edges among ``blocked`` ops: from each wait never met to the stuck ops with the
    nearest value that would meet it, and to the op ahead on the same in-order queue."""
    g = nx.DiGraph()
    g.add_nodes_from(blocked)
    for a in blocked:
        for i, (sem, v, nearest, free) in enumerate(needs[a]):
            if not free and (a, i) not in met:
                for o in nearest:
                    if o in blocked and not g.has_edge(a, o):
                        g.add_edge(a, o, sem=sem, value=v)
        if a in ahead and ahead[a][0] in blocked and not g.has_edge(a, ahead[a][0]):
            g.add_edge(a, ahead[a][0], queue=ahead[a][1])
    return g


def _cyclic(g) -> list[set]:
    comps = [c for c in nx.strongly_connected_components(g)
             if len(c) > 1 or any(g.has_edge(n, n) for n in c)]
    return sorted(comps, key=lambda c: min(op_key(n) for n in c))


def _shortest_cycle(g, comp, through_queue=False) -> list[tuple[str, str]]:
    """The shortest cycle in ``comp`` (through a queue edge, if asked), as edges from the
    earliest op in program order."""
    sub = g.subgraph(comp)
    best = None
    edges = [(a, b) for a, b, data in sub.edges(data=True) if not through_queue or "queue" in data]
    # the first edges in program order are enough to explain it; all of a huge SCC would be slow
    for a, b in sorted(edges, key=lambda e: (op_key(e[0]), op_key(e[1])))[:64]:
        path = nx.shortest_path(sub, b, a)
        if best is None or len(path) < len(best):
            best = [a] + path[:-1] if a != b else [a]
    start = min(range(len(best)), key=lambda i: op_key(best[i]))
    best = best[start:] + best[:start]
    return [(best[i], best[(i + 1) % len(best)]) for i in range(len(best))]


def _steps(g, cyc) -> str:
    steps = []
    for a, b in cyc:
        data = g.edges[a, b]
        if "sem" in data:
            steps.append(f"{a} waits {data['sem']}>={data['value']}, signaled by {b}")
        else:
            steps.append(f"{a} is queued behind {b} on in-order queue {data['queue']}")
    return "; ".join(steps)
