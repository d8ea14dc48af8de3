"""Dependency edges of a trace: which signal satisfied each wait, queue order, host waits.

:func:`signal_wait_edges` answers, for every operation wait ``(sem, value)``, which event satisfied
it: the first ``signal`` of ``sem`` that reached ``value`` or more (its ``cause``: an op id or
``host:T``), or the semaphore's ``fail`` when that came first (kind ``"fail"``). A wait the initial
value already meets has no edge; a wait nothing satisfied has none either (the checks report it).
:func:`op_graph` puts those edges, queue order on in-order devices (``metal``, ``cuda``, ``opencl``:
consecutive operations of one ``queue``) and host-wait edges into a ``networkx.DiGraph`` of ops.

>>> from reference import hal
>>> with hal.create_device("sim", queues=2) as dev:
...     buf = dev.allocator.allocate_buffer(64)
...     a, b = dev.create_semaphore(), dev.create_semaphore()
...     dev.queue_fill([], [(a, 1)], buf, 0, 64, 1, 1)
...     dev.queue_fill([(a, 1)], [(b, 1)], buf, 0, 64, 2, 1, queue_affinity=2)
...     b.wait(1)
>>> signal_wait_edges(dev.trace)
[Edge(src='0:0', dst='0:1', sem='s0', value=1, kind='semaphore')]
>>> sorted(op_graph(dev.trace).edges(data="kind"))
[('0:0', '0:1', 'semaphore')]
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from typing import NamedTuple

import networkx as nx

from .model import TraceIndex


class Edge(NamedTuple):
    """``src`` (an op id, or ``host:T``) satisfied or ordered ``dst`` (an op id).

    ``kind``: ``"semaphore"`` (a signal reached ``sem`` ≥ ``value``), ``"fail"`` (``sem`` failed
    first: the wait completed with an error), ``"queue"`` (in-order queue: ``dst`` runs after
    ``src``; ``sem`` is None, ``value`` the queue) or ``"program"`` (a host wait on ``dst``'s thread
    saw ``src``'s signal on ``sem`` ≥ ``value`` before ``dst`` was enqueued)."""
    src: str
    dst: str
    sem: str | None
    value: int
    kind: str


class _Satisfier:
    """Looks up the event that first met ``sem >= value`` (bisect over each semaphore's running max)."""

    def __init__(self, ix: TraceIndex):
        self.ix = ix
        self._max: dict[str, list[int]] = {}
        for sem, sigs in ix.signals.items():
            running, m = [], None
            for _seq, _t, value, _cause in sigs:
                m = value if m is None or value > m else m
                running.append(m)
            self._max[sem] = running

    def __call__(self, sem: str, value: int):
        """``(seq, t, cause, kind, i)`` of what satisfied the wait (``i``: the signal's position in
        ``signals[sem]``, -1 for a failure), or None (met initially, or never)."""
        if self.ix.semaphores.get(sem, 0) >= value:
            return None
        found = None
        running = self._max.get(sem)
        if running:
            i = bisect.bisect_left(running, value)
            if i < len(running):
                seq, t, _v, cause = self.ix.signals[sem][i]
                found = (seq, t, cause, "semaphore", i)
        fail = self.ix.fails.get(sem)
        if fail is not None and (found is None or fail[0] < found[0]):
            found = (fail[0], fail[1], fail[4], "fail", -1)
        return found


def signal_wait_edges(trace) -> list[Edge]:
    """One edge per satisfied operation wait, in enqueue order (``trace``: a Trace or TraceIndex)."""
    ix = TraceIndex.of(trace)
    sat = _Satisfier(ix)
    edges = []
    for op in ix.ops:
        for sem, value in op.get("wait", ()):
            s = sat(sem, value)
            # (an op that fails a semaphore it also waits on, e.g. when a sticky failure fails it, did not
            # satisfy its own wait: that edge would be a cycle of one)
            if s is not None and s[2] != op["op"]:
                edges.append(Edge(s[2], op["op"], sem, value, s[3]))
    return edges


def queue_edges(trace, among=None) -> list[Edge]:
    """Consecutive operations of each queue, in the order the device queued them
    (:meth:`TraceIndex.queue_order`), on in-order devices only (empty elsewhere). A host call
    comes after the operation before it but orders nothing after it: its function runs on the host
    while the queue goes on. ``among`` (op ids): only those, each after the last earlier one of its
    queue among them (``halsim difftest``: the ops that ran — past a failed one, which has no device
    interval)."""
    ix = TraceIndex.of(trace)
    if not ix.in_order:
        return []
    last: dict = {}
    edges = []
    for op in ix.queue_order():
        if among is not None and op["op"] not in among:
            continue
        q = op.get("queue")
        prev = last.get(q)
        if prev is not None:
            edges.append(Edge(prev, op["op"], None, q, "queue"))
        if op.get("kind") != "host_call":
            last[q] = op["op"]
    return edges


def host_wait_sources(ix: TraceIndex, sat: _Satisfier, hw: dict) -> list[tuple[str, int, tuple]]:
    """``(sem, value, satisfier)`` for each signal a host wait observed (satisfier as
    :class:`_Satisfier` returns it). ALL: each timepoint's satisfier, if it came by the time the
    wait returned. ANY: only the one met first in the trace (the signal that woke it), and none when
    a timepoint was met by its initial value (the wait returned at once) — as the checks'
    happens-before model (``halsim/checks/hb.py`` ``_any_source``)."""
    if hw.get("mode") == "any":
        best = None
        for sem, value in hw.get("wait", ()):
            if ix.semaphores.get(sem, 0) >= value:
                return []
            s = sat(sem, value)
            if s is not None and s[1] <= hw["t"] and (best is None or s[0] < best[2][0]):
                best = (sem, value, s)
        return [] if best is None else [best]
    out = []
    for sem, value in hw.get("wait", ()):
        s = sat(sem, value)
        if s is not None and s[1] <= hw["t"]:
            out.append((sem, value, s))
    return out


def _host_thread(cause: str) -> int | None:
    """The thread of a ``host:T`` cause (None for an op id or a malformed cause)."""
    if not cause.startswith("host:"):
        return None
    try:
        return int(cause.split(":", 1)[1])
    except ValueError:
        return None


def host_wait_edges(trace) -> list[Edge]:
    """``X → Y`` when a successful host wait on Y's thread saw X's signal before Y was enqueued
    (trace order, not time: a wait that returned at the very instant an op was enqueued before it
    did not happen before that op); a host signal's waiters get edges from the ops the signalling
    thread had seen by then.

    A thread's calls are one ordered sequence, so what it saw carries forward past its later waits
    (its *carry*). To keep the edge count near linear the carry drops what another op it holds
    stands for: when a wait sees X, X happens after everything the thread carried when it enqueued X
    (X got an edge from each) and after the ops whose signals X waited for (semaphore edges)."""
    ix = TraceIndex.of(trace)
    sat = _Satisfier(ix)
    steps: list[tuple] = []  # (trace position, what, thread, payload), sorted below
    for hw in ix.host_waits:
        if hw.get("status", 0) != 0:
            continue  # a timed-out or failed wait tells the host nothing
        seen = [(s[2], sem, value) for sem, value, s in host_wait_sources(ix, sat, hw)
                if not s[2].startswith("host:")]
        if seen:
            steps.append((hw["seq"], 0, hw["thread"], seen))
    if not steps:
        return []
    readers: dict[tuple, list] = {}  # (host thread, its signal's trace position) → ops waiting on it
    for pos, op in enumerate(ix.ops):
        steps.append((ix.op_seq[pos], 1, op.get("thread"), op["op"]))
        for sem, value in op.get("wait", ()):
            s = sat(sem, value)
            thread = _host_thread(s[2]) if s is not None else None
            if thread is not None:
                readers.setdefault((thread, s[0]), []).append(op["op"])
    steps += [(seq, 2, thread, dsts) for (thread, seq), dsts in readers.items()]
    steps.sort(key=lambda st: st[0])
    carries: dict = {}  # thread → OrderedDict op id → (sem, value, trace position of the wait that saw it)
    edges = []
    for seq, what, thread, payload in steps:
        carry = carries.get(thread)
        if what == 0:
            if carry is None:
                carry = carries[thread] = OrderedDict()
            _see(ix, sat, carry, thread, seq, payload)
        elif carry:
            for dst in ([payload] if what == 1 else payload):
                edges.extend(Edge(x, dst, sem, v, "program") for x, (sem, v, _s) in carry.items() if x != dst)
    return edges


def _see(ix: TraceIndex, sat: _Satisfier, carry: OrderedDict, thread, seq: int, seen: list) -> None:
    """Add what a host wait at trace position ``seq`` saw to ``thread``'s carry, then drop what the
    newly seen ops stand for (see :func:`host_wait_edges`)."""
    for x, sem, v in seen:
        carry.pop(x, None)
        carry[x] = (sem, v, seq)
    for x, _sem, _v in seen:
        pos = ix.op_pos.get(x)
        if pos is None:
            continue
        op = ix.ops[pos]
        if op.get("thread") == thread:  # the carry, oldest first: what it held when this thread enqueued x
            enqueued = ix.op_seq[pos]
            while next(iter(carry.values()))[2] < enqueued:
                carry.popitem(last=False)
        for sem, value in op.get("wait", ()):
            s = sat(sem, value)
            if s is not None and s[3] == "semaphore" and s[2] != x:
                carry.pop(s[2], None)


def failed_after_done(ix: TraceIndex, edge: Edge) -> bool:
    """Whether ``edge`` is a ``fail`` edge whose failure came after its waiting operation had
    already finished (in trace order): the failure did not complete that wait, so it orders nothing.
    (An operation that finished without error had no wait completed by a failure either: a failed
    wait fails its operation.) A queue shutting down (a deadlock report, a device closed with work
    pending) cancels each pending operation and then fails what it would have signalled; in a
    deadlock those failures point at operations that were cancelled first, and the edges form the
    very cycle that deadlocked."""
    if edge.kind != "fail":
        return False
    pos = ix.op_pos.get(edge.dst)
    if pos is None or ix.ops[pos].get("end") is None:
        return False  # (never finished: the failure may have been all it waited for)
    if not ix.ops[pos].get("status"):
        return True
    done, fail = ix.failed_done_seq.get(pos), ix.fails.get(edge.sem)
    return done is not None and fail is not None and fail[0] > done


def op_graph(trace) -> nx.DiGraph:
    """The operations as a DAG: nodes are op ids (attributes: the merged op record of
    ``trace.operations()``), edges carry ``kind`` in {"semaphore", "queue", "program"} (a wait
    met by a failure is a ``semaphore`` edge with ``failed=True``), plus ``sem`` and ``value``.
    Edges from host signals (``host:T``) are not op→op and are left out, and so are failures that
    came after the waiting operation had finished (:func:`failed_after_done`: a deadlocked queue's
    cancellations)."""
    ix = TraceIndex.of(trace)
    g = nx.DiGraph()
    for op in ix.ops:
        g.add_node(op["op"], **op)
    for e in signal_wait_edges(ix):
        if e.src in g and not failed_after_done(ix, e):
            g.add_edge(e.src, e.dst, kind="semaphore", sem=e.sem, value=e.value, failed=e.kind == "fail")
    for e in queue_edges(ix) + host_wait_edges(ix):
        if not g.has_edge(e.src, e.dst):  # a semaphore edge already says more
            g.add_edge(e.src, e.dst, kind=e.kind, sem=e.sem, value=e.value, failed=False)
    return g

#: Public name for other trace tools: ``Satisfier(index)(sem, value)``.
Satisfier = _Satisfier
