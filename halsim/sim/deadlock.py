"""Deadlock diagnosis: :class:`DeadlockError` and the wait-for report it carries (DESIGN §5).

When every host thread is blocked and no simulated work is pending, nothing can ever change a
semaphore again. The report names the wait-for chain: each blocked host thread and what it waits
for, each pending queue operation and the semaphore values it needs, who could signal them (pending
operations whose signal lists reach the value) or that nobody can, and the cycles among pending
operations (found with networkx).

>>> from reference import hal
>>> from halsim.sim.driver import driver
>>> dev = driver.create_device("generic")
>>> a, b = dev.create_semaphore(), dev.create_semaphore()
>>> dev.queue_barrier([(a, 1)], [(b, 1)])
>>> dev.queue_barrier([(b, 1)], [(a, 1)])
>>> try:
...     b.wait(1)
... except DeadlockError as e:
...     print(e.code.name, [c.semaphores for c in e.report.cycles])
ABORTED [('s0', 's1')]
>>> dev.close()
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from itertools import islice

import networkx as nx

from reference.hal import HalError, StatusCode

MAX_CYCLES = 16
MAX_LISTED_OPS = 40  # pending ops the message lists (the report keeps them all)
_WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}


@dataclass(frozen=True)
class WaitState:
    """One unmet ``semaphore >= value`` and who could still meet it."""

    sem: str
    value: int
    current: int
    # ids of the other pending operations whose signal list reaches the value, nearest value first
    signalers: tuple[str, ...]
    nearest: int = 0  # how many of them signal the smallest such value (would meet the wait first)
    # (op id, host thread) of the host calls among them that are running, not pending: their
    # function (sim:sync, on that host thread) is blocked, and they signal only when it returns
    running: tuple[tuple[str, int], ...] = ()
    # the semaphore's failure ("CODE: message") if it has failed: the wait fails once it is examined
    # (a pending op resolving its waits in list order — sim:cuda — gets to it only after those before
    # it are met); ``current`` is then the raw payload, SEMAPHORE_FAILURE_VALUE
    failure: str | None = None
    # host calls that returned DEFERRED with this value in their signal list, not signaled since: the
    # program took over signalling it (and, with nothing pending to do it, forgot)
    deferred: tuple[str, ...] = ()
    # a pending op's waits resolved in list order (sim:cuda): a failed one is examined once those
    # before it are met, not all the others
    in_list_order: bool = False

    def __str__(self) -> str:
        if self.failure is not None:
            return f"{self.sem}>={self.value} (failed: {self.failure})"
        return f"{self.sem}>={self.value} (now {self.current})"

    @property
    def first(self) -> tuple[str, ...]:
        """The signalers that would meet the wait first (they signal the smallest value >= it)."""
        return self.signalers[:self.nearest]

    def why(self) -> str:
        if self.failure is not None:
            which = "unmet waits before it in the op's wait list" if self.in_list_order else "op's other unmet waits"
            return f"{self.sem} has failed ({self.failure}): the wait fails (and the op with it) once the " \
                   f"{which} are met"
        first = self.first
        if first and all(any(op == r for r, _ in self.running) for op in first):
            names = ", ".join(f"op {op} (the host call running on host thread {t}, blocked in its function)"
                              for op, t in self.running if op in first)
            return f"{self.sem}>={self.value} would be signaled by {names} only when that function returns"
        if self.signalers:
            later = len(self.signalers) - self.nearest
            more = f" (then {later} later op{'s' if later > 1 else ''})" if later else ""
            return f"{self.sem}>={self.value} would be signaled by pending op {', '.join(self.first)}{more}"
        if self.deferred:
            calls = ", ".join(self.deferred)
            return (f"no pending operation or host thread signals {self.sem} to >= {self.value}; host call "
                    f"{calls} returned DEFERRED (its function took over signalling it) and has not signaled it")
        return f"no pending operation or host thread signals {self.sem} to >= {self.value}"


@dataclass(frozen=True)
class BlockedThread:
    """A host thread blocked in a device call."""

    thread: int
    call: str
    mode: str
    waits: tuple[WaitState, ...]
    deadline: int | None
    op: str | None = None  # the queue operation a blocking queue call (sim:sync) waits to run
    inside: str | None = None  # the host call (sim:sync) whose function, on this thread, made the call

    def __str__(self) -> str:
        what = f" {self.mode} of " if len(self.waits) > 1 else " "
        until = "" if self.deadline is None else f", deadline t={self.deadline} ns"
        within = "" if self.inside is None else f" inside host call op {self.inside}"
        return f"host thread {self.thread} blocked in {self.call}{within} waiting for{what}" \
               f"{', '.join(map(str, self.waits)) or 'nothing'}{until}"


@dataclass(frozen=True)
class PendingOp:
    """A queue operation whose waits are not all met."""

    op: str
    kind: str
    queue: int
    waits: tuple[WaitState, ...]
    signals: tuple[tuple[str, int], ...]
    behind: str | None = None  # on an in-order queue: the earlier op this one cannot start before

    def __str__(self) -> str:
        sig = ", ".join(f"{s}={v}" for s, v in self.signals) or "nothing"
        waits = ", ".join(map(str, self.waits))
        if self.behind is not None:
            waits = (waits + " and " if waits else "") + f"op {self.behind} ahead of it on in-order queue {self.queue}"
        return f"op {self.op} ({self.kind}, queue {self.queue}) waits for {waits}; signals {sig}"


@dataclass(frozen=True)
class Cycle:
    """Pending operations that wait on each other: ``ops[i]`` waits for ``semaphores[i]`` >= ``values[i]``,
    which only ``ops[i+1]`` (cyclically) would signal — or, where ``semaphores[i]`` is None, ``ops[i]`` is
    queued behind ``ops[i+1]`` on the in-order queue ``queues[i]`` (same-queue wait-before-signal)."""

    ops: tuple[str, ...]
    semaphores: tuple[str | None, ...]
    values: tuple[int | None, ...]
    queues: tuple[int | None, ...] = ()

    @property
    def in_order(self) -> bool:
        """True when queue order is one of the links (a same-queue wait-before-signal)."""
        return any(s is None for s in self.semaphores)

    def __str__(self) -> str:
        named = [s for s in self.semaphores if s is not None]
        n = len(set(named))
        steps = []
        for i, (op, s, v) in enumerate(zip(self.ops, self.semaphores, self.values)):
            nxt = self.ops[(i + 1) % len(self.ops)]
            if s is None:
                steps.append(f"{op} is queued behind {nxt} on in-order queue {self.queues[i]}")
            else:
                steps.append(f"{op} waits {s}>={v}, signaled by {nxt}")
        if self.in_order:
            head = in_order_head(q for q in self.queues if q is not None)
        else:
            head = f"{_WORDS.get(n, str(n))}-semaphore cycle {' -> '.join(named)}"
        return f"{head}: {'; '.join(steps)}"


def in_order_head(queues) -> str:
    """How a cycle with in-order queue links is named: one queue's wait-before-signal, or a cycle
    through the queue order of several (each waits for what another's later op signals)."""
    queues = sorted(set(queues))
    if len(queues) == 1:
        return f"same-queue wait-before-signal on in-order queue {queues[0]}"
    return f"in-order-queue cycle across queues {', '.join(map(str, queues))}"


@dataclass(frozen=True)
class DeadlockReport:
    """Why nothing can advance: the structured form of a :class:`DeadlockError`'s message."""

    time: int
    threads: tuple[BlockedThread, ...]
    ops: tuple[PendingOp, ...]
    cycles: tuple[Cycle, ...]
    # Running host threads that wait on another host thread in Python (Queue.get, Event.wait,
    # Thread.join...): (thread index, where), e.g. (1, "Queue.get at worker.py:12").
    host_waits: tuple[tuple[int, str], ...] = ()

    @property
    def unsignaled(self) -> tuple[WaitState, ...]:
        """Waits that no pending operation can meet (each semaphore/value once)."""
        seen, out = set(), []
        for w in [w for t in self.threads for w in t.waits] + [w for o in self.ops for w in o.waits]:
            if not w.signalers and w.failure is None and (w.sem, w.value) not in seen:
                seen.add((w.sem, w.value))
                out.append(w)
        return tuple(out)

    def __str__(self) -> str:
        lines = [f"deadlock at t={self.time} ns: every host thread is blocked and no simulated work is pending"]
        for t in self.threads:
            lines.append(f"  {t}")
            lines.extend(f"    {w.why()}" for w in t.waits if w.signalers)
            own = [op for w in t.waits for op, th in w.running if th == t.thread and op in w.first]
            if own:
                lines.append(f"    host thread {t.thread} waits on itself: op {own[0]} signals only when "
                             "the function waiting here returns")
        lines.extend(f"  host thread {i} waits in {where}, for another host thread" for i, where in self.host_waits)
        blocked_ops = {t.op for t in self.threads}
        ops = [o for o in self.ops if o.op not in blocked_ops]
        if ops:
            lines.append("pending queue operations:")
            for o in ops[:MAX_LISTED_OPS]:
                lines.append(f"  {o}")
                lines.extend(f"    {w.why()}" for w in o.waits if w.signalers or w.failure is not None)
            if len(ops) > MAX_LISTED_OPS:
                lines.append(f"  ... and {len(ops) - MAX_LISTED_OPS} more (all in DeadlockError.report.ops)")
        if self.cycles:
            lines.append("cycles:")
            lines.extend(f"  {c}" for c in self.cycles)
        missing = self.unsignaled
        if missing:
            lines.append("waits nothing can meet:")
            lines.extend(f"  {w.why()}" for w in missing)
        return "\n".join(lines)


class DeadlockError(HalError):
    """A blocked host call that can never return. ``code`` is ABORTED, or DEADLINE_EXCEEDED when the call
    had a finite timeout (raised at its deadline); ``report`` is the :class:`DeadlockReport`."""

    def __init__(self, code, message: str, report: DeadlockReport | None = None):
        super().__init__(code, message)
        self.report = report

    def clone(self) -> "DeadlockError":
        return DeadlockError(self.code, self.message, self.report)

    def __reduce__(self):
        return (DeadlockError, (self.code, self.message, self.report))


def deadlock_error(report: DeadlockReport, thread: BlockedThread | None, timed_out: bool) -> DeadlockError:
    """The error one blocked call raises: its own first line, then the whole report."""
    who = f"host thread {thread.thread} in {thread.call}" if thread else "a blocked call"
    if timed_out:
        head = f"deadlock: {who} reached its deadline; nothing could have signaled it"
        code = StatusCode.DEADLINE_EXCEEDED
    else:
        head = f"deadlock: {who} can never return"
        code = StatusCode.ABORTED
    return DeadlockError(code, f"{head}\n{report}", report)


# -- building the report -------------------------------------------------------------------------------

def _current(sem) -> int:
    return sem.payload


def _wait_states(waits, signals: dict, waiter: str | None = None, running=(), deferred=(),
                 in_list_order: bool = False) -> tuple[WaitState, ...]:
    """The unmet waits, each with the pending ops (other than ``waiter``) that would meet it, from
    ``signals`` (semaphore id → sorted ``(value, op key, op id)``); ``running``: ``(op id, host
    thread)`` of the running host calls among those ops; ``deferred``: ``(op id, ((semaphore id,
    value)…))`` of the host calls that returned DEFERRED."""
    out = []
    for sem, value in waits:
        if sem.poll(value) is True:
            continue
        lst = signals.get(sem.id, ())
        found = [(v, op_id) for v, _k, op_id in lst[bisect_left(lst, (value,)):] if op_id != waiter]
        nearest = sum(1 for v, _ in found if v == found[0][0]) if found else 0
        ids = tuple(op_id for _, op_id in found)
        failure = sem.failure
        out.append(WaitState(sem.id, value, _current(sem), ids, nearest,
                             tuple(r for r in running if r[0] in ids),
                             None if failure is None else f"{failure.code.name}: {failure.message}",
                             tuple(op_id for op_id, sigs in deferred
                                   if any(s == sem.id and v >= value for s, v in sigs)),
                             in_list_order))
    return tuple(out)


def build_report(time: int, blocks, ops, behind: dict[str, str] | None = None, running_calls=(),
                 deferred=(), in_list_order: bool = False) -> DeadlockReport:
    """Report for blocked host calls ``blocks`` (objects with ``thread.index``, ``call``, ``mode``,
    ``timepoints``, ``deadline``, ``op``) and pending queue operations ``ops`` (QueueOps).

    ``behind`` maps an op id to the id of the op ahead of it on an in-order queue that it cannot start
    before (personalities with in-order queues: metal, cuda, opencl); ops that are only queued count
    as pending too. ``running_calls``: the host calls whose function runs on a host thread now
    (sim:sync: on the thread that submitted it, ``op.thread``) — every level of nested ones, not only
    the innermost that a block names (``inside``). ``deferred``: ``(op id, ((semaphore id, value)…))``
    of the host calls that returned DEFERRED and whose list is not all signaled. ``in_list_order``:
    the device resolves a pending op's waits in list order (sim:cuda)."""
    behind = behind or {}
    all_ops = list(ops) + [b.op for b in blocks if b.op is not None and b.op not in ops]
    # sim:sync: host calls whose function (on a host thread) made a blocked call — running, not
    # pending, they still signal when it returns (a thread that waits for its own host call's signal
    # waits on itself). A host call whose function made the queue host call that made the blocked
    # call runs too, on the same thread: it signals only when the inner one has returned. (Until
    # 2026-11-25 only the innermost counted, and a wait for the outer one's signal read "no pending
    # operation or host thread signals" it.)
    running = {}
    for b in blocks:
        inside = getattr(b, "inside", None)
        if inside is not None and inside not in all_ops:
            running.setdefault(inside.id, (inside, b.thread.index))
    for op in running_calls:
        if op not in all_ops:
            running.setdefault(op.id, (op, op.thread))
    signals: dict[str, list[tuple[int, tuple, str]]] = {}
    for op in all_ops + [op for op, _ in running.values()]:
        for sem, value in op.signal:
            signals.setdefault(sem.id, []).append((value, _op_key(op.id), op.id))
    for lst in signals.values():
        lst.sort()
    runs = tuple((op_id, t) for op_id, (_, t) in running.items())

    threads = tuple(
        # (a blocked queue call — sim:sync, legacy Metal — waits for its own op's waits: that op is no
        # signaler of them, an op never waits on its own signal)
        BlockedThread(b.thread.index, b.call, b.mode,
                      _wait_states(b.timepoints, signals, b.op.id if b.op is not None else None, runs, deferred),
                      b.deadline,
                      b.op.id if b.op is not None else None,
                      b.inside.id if getattr(b, "inside", None) is not None else None)
        for b in sorted(blocks, key=lambda b: b.thread.index))
    pending = tuple(PendingOp(op.id, op.kind, op.queue, _wait_states(op.wait, signals, op.id, runs, deferred,
                                                                    in_list_order),
                              tuple((s.id, v) for s, v in op.signal), behind.get(op.id)) for op in all_ops)
    return DeadlockReport(time, threads, pending, find_cycles(pending))


def find_cycles(ops: tuple[PendingOp, ...]) -> tuple[Cycle, ...]:
    """Cycles of the wait-for graph among pending operations (op → the ops that would signal its wait
    first, and op → the op ahead of it on its in-order queue). Ops that signal a later value would meet
    the wait too, but only after the first ones on a well-ordered timeline: edges to them would add
    cycles that explain nothing (two consecutive ops of one chain "waiting on each other")."""
    graph = nx.DiGraph()
    for o in ops:
        graph.add_node(o.op)
        for w in o.waits:
            for signaler in w.first:
                if not graph.has_edge(o.op, signaler):
                    graph.add_edge(o.op, signaler, sem=w.sem, value=w.value, queue=None)
        if o.behind is not None and not graph.has_edge(o.op, o.behind):
            graph.add_edge(o.op, o.behind, sem=None, value=None, queue=o.queue)
    out = []
    for nodes in islice(nx.simple_cycles(graph), MAX_CYCLES):
        first = nodes.index(min(nodes, key=_op_key))  # stable start: the earliest op id
        nodes = nodes[first:] + nodes[:first]
        edges = [graph.edges[nodes[i], nodes[(i + 1) % len(nodes)]] for i in range(len(nodes))]
        out.append(Cycle(tuple(nodes), tuple(e["sem"] for e in edges), tuple(e["value"] for e in edges),
                         tuple(e["queue"] for e in edges)))
    return tuple(sorted(out, key=lambda c: [_op_key(o) for o in c.ops]))


def _op_key(op_id: str) -> tuple[int, int]:
    thread, _, seq = op_id.partition(":")
    return int(thread), int(seq)
