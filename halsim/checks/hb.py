"""The happens-before model of a trace, as vector clocks (DESIGN §8).

Nodes are queue operations and host-thread calls (enqueue, host signal, host fail, host wait).
Edges, each from what the device and the HAL *guarantee* (never from observed timing):

* program order of each host thread: its calls, in order;
* enqueue: the call that enqueued an op happens before the op starts (never the other way: the host
  does not wait for the op) — except on ``inline`` devices (local-sync, ``sim:sync``), where the op
  runs inside the call, so it also happens before the thread's next call;
* queue order on ``in_order`` devices (Metal command queues, OpenCL in-order queues; not CUDA,
  whose pending queue actions are issued as their waits resolve, so a later one can overtake):
  an op on a queue starts after the previous op on that queue finished — except a host call, which
  holds the queue only until its waits are met (its function runs on the host while the queue
  goes on); none on IREE-semantics devices (``sim``, ``local-task``), where only semaphores order
  submissions;
* semaphore signal → wait: a wait for ``v`` is satisfied by the signal that first brought the
  semaphore to ``>= v`` (an op's signals happen at its end; a host signal at that call);
* host waits: a wait that returned OK happens after the signals that satisfied it (ANY: the one
  satisfied first in the stream); a ``host_query`` (``Semaphore.query`` seeing a new value) after
  the signal that first brought the semaphore there;
* host hand-offs: a ``host_join`` after everything the joined thread did; a ``host_sync`` acquire
  (``Queue.get``, ``Event.wait``, a started thread's first call...) after its release — which, made
  inside a host call's function (``op``), is the host call's node.

Inside an op's command buffer, commands before a ``barrier`` (or ``wait_events``) happen before the
commands after it; commands between two barriers may run concurrently (``Op.segment``).

Each node gets an *epoch* ``(lane, n)`` on a lane — a chain of nodes already known to be ordered:
a host thread, an in-order queue, or (on unordered devices) a chain picked greedily among ops — and
a vector clock over lanes. ``A`` happens before ``B`` iff ``start(B)[lane(A)] >= n(A)``: one
comparison, so rules never need all pairs (FastTrack's epoch trick).

>>> from reference import hal
>>> from halsim.checks.model import TraceModel
>>> dev = hal.create_device("sim", queues=2)
>>> s = dev.create_semaphore()
>>> dev.queue_barrier([], [(s, 1)], queue_affinity=1)
>>> dev.queue_barrier([(s, 1)], [(s, 2)], queue_affinity=2)
>>> dev.queue_barrier([], [], queue_affinity=2)
>>> s.wait(2)
>>> hb = HappensBefore(TraceModel(dev.trace))
>>> hb.op_before("0:0", "0:1"), hb.op_before("0:1", "0:0"), hb.op_before("0:1", "0:2")
(True, False, False)
>>> dev.close()
"""

from __future__ import annotations

from array import array
from bisect import bisect_left

from .model import TraceModel

QUEUE_WINDOW = 64   # how far back on an in-order queue _queue_edges looks for ops enqueued before


class HappensBefore:
    """Vector clocks of every op and host call of a :class:`TraceModel`."""

    def __init__(self, model: TraceModel):
        self.model = model
        self.lane_names: list[str] = []
        self.node_of_op: dict[str, int] = {}
        self.node_of_host: dict[int, int] = {}    # stream position of a host signal, fail or access -> node
        self.host_nodes: dict[int, list[int]] = {}  # thread -> its nodes in program order
        self.lane: list[int] = []
        self.epoch: list[int] = []
        self.start: list[tuple] = []   # vector clock of everything that happens before the node
        self._deps: list[list[int]] = []
        self._build_graph()
        self._compute()
        del self._deps, self._enq, self._held, self._queues, self._queue_of, self._queue_pos  # (construction)

    # -- queries ----------------------------------------------------------------------------------

    def before(self, a: int, b: int) -> bool:
        """Node ``a`` (its end, for an op) happens before node ``b`` (its start)."""
        if a == b:
            return False
        vc, lane = self.start[b], self.lane[a]
        return lane < len(vc) and vc[lane] >= self.epoch[a]

    def op_before(self, a: str, b: str) -> bool:
        """Op ``a`` finished before op ``b`` started, by a guarantee."""
        return self.before(self.node_of_op[a], self.node_of_op[b])

    def ordered(self, a: int, b: int) -> bool:
        """Either node happens before the other."""
        return self.before(a, b) or self.before(b, a)

    def signal_node(self, cause: str, idx: int) -> int | None:
        """The node of the signal event at stream position ``idx`` with this ``cause``."""
        if cause.startswith("host:"):
            return self.node_of_host.get(idx)
        return self.node_of_op.get(cause)

    @property
    def lanes(self) -> int:
        return len(self.lane_names)

    def graph(self):
        """The ordering edges among ops as a ``networkx.DiGraph`` (for reports on small traces):
        an edge ``a -> b`` when op ``a`` happens before op ``b`` and nothing ordered lies between."""
        import networkx as nx

        g = nx.DiGraph()
        ids = list(self.node_of_op)
        g.add_nodes_from(ids)
        for b in ids:
            for a in ids:
                if self.op_before(a, b):
                    g.add_edge(a, b)
        return nx.transitive_reduction(g) if nx.is_directed_acyclic_graph(g) else g

    # -- construction -----------------------------------------------------------------------------

    def _new(self) -> int:
        self._deps.append([])
        return len(self._deps) - 1

    def _build_graph(self) -> None:
        m = self.model
        for op_id in m.ops:
            self.node_of_op[op_id] = self._new()
        released: dict[int, int] = {}  # host_sync id → its release's node
        event_nodes: dict[int, list] = {}  # thread → node of each of its events (None: made in a host call)
        for thread, events in m.host.items():
            nodes = self.host_nodes.setdefault(thread, [])
            of_event = event_nodes[thread] = []
            for ev in events:
                if ev.call is not None:  # a wait inside a host call's function
                    of_event.append(None)
                    continue
                n = self._new()
                if ev.kind in ("signal", "fail", "access", "rejected"):  # what signal_node and the
                    self.node_of_host[ev.idx] = n                        # rules look up; not every call
                elif ev.kind == "release":
                    released[ev.value] = n
                if nodes:
                    self._deps[n].append(nodes[-1])
                nodes.append(n)
                of_event.append(n)
        for role, sync, op_id in m.op_syncs:   # a host call's function released (started a thread...)
            if role == "release":
                released[sync] = self.node_of_op[op_id]
        self._thread_of = [-1] * len(self._deps)   # host thread of each host node
        for t, ns in self.host_nodes.items():
            for n in ns:
                self._thread_of[n] = t
        # the node each op was enqueued by: a host call, or — inside a host call's function — that op
        # (a host call's function is ordered as the op: after its waits, before its signals)
        in_order = m.ordering == "in_order"
        # (in-order queues only, for _queue_edges; arrays: a million ops must not hold dicts of them)
        self._enq = array("l", [-1]) * (len(self._deps) if in_order else 0)
        for op in m.ops.values():
            call = op.fields.get("call")
            if call is not None and call in self.node_of_op:
                on, by = self.node_of_op[op.id], self.node_of_op[call]
                if by != on:
                    self._deps[on].append(by)
                    if in_order:
                        self._enq[on] = by
        for thread, events in m.host.items():
            nodes = event_nodes[thread]
            for k, ev in enumerate(events):
                n = nodes[k]
                if n is None:  # a wait inside a host call's function: that op is after its source
                    if ev.kind == "wait" and ev.status == 0:
                        on = self.node_of_op[ev.call]
                        for src in self._wait_sources(ev):
                            if src != on:
                                self._deps[on].append(src)
                    continue
                if ev.kind == "enqueue":
                    op = m.ops[ev.op]
                    on = self.node_of_op[op.id]
                    self._deps[on].append(n)
                    if in_order:
                        self._enq[on] = n
                    elif m.ordering == "inline":
                        j = k + 1  # the thread's next node (an index walk: no copy of the rest)
                        while j < len(nodes) and nodes[j] is None:
                            j += 1
                        if j < len(nodes):
                            self._deps[nodes[j]].append(on)
                elif ev.kind == "join":  # Thread.join: after everything the joined thread did
                    joined = m.host.get(ev.value)
                    if joined:
                        k_last = bisect_left([e.idx for e in joined], ev.idx) - 1
                        while k_last >= 0 and event_nodes[ev.value][k_last] is None:
                            k_last -= 1
                        if k_last >= 0:
                            self._deps[n].append(event_nodes[ev.value][k_last])
                elif ev.kind == "acquire":  # Queue.get, Event.wait...: after the matching put, set...
                    src = released.get(ev.value)
                    if src is not None:
                        self._deps[n].append(src)
                elif ev.kind == "wait" and ev.status == 0:
                    self._deps[n].extend(self._wait_sources(ev))
                elif ev.kind == "query":  # Semaphore.query saw the value: as a wait it satisfied
                    src = self._source(ev.sem, ev.value, None)
                    if src is not None:
                        self._deps[n].append(src)
        for role, sync, op_id in m.op_syncs:   # a host call's function received a hand-off
            src = released.get(sync) if role == "acquire" else None
            on = self.node_of_op[op_id]
            if src is not None and src != on:
                self._deps[on].append(src)
        for op_id, sem, value in m.op_queries:
            src = self._source(sem, value, None)
            on = self.node_of_op[op_id]
            if src is not None and src != on:
                self._deps[on].append(src)
        self._held: dict[int, list[int]] = {}   # host call → what it waits for (see _queue_edges)
        for op in m.ops.values():
            on = self.node_of_op[op.id]
            sources = []
            for sem, value in op.wait:
                src = self._source(sem, value, None)
                if src is not None and src != on:
                    sources.append(src)
            for producer in op.after:  # waited on the producer's recorded event, on the device
                src = self.node_of_op.get(producer)
                if src is not None and src != on:
                    sources.append(src)
            self._deps[on].extend(sources)
            if op.kind == "host_call":
                self._held[on] = sources
        # In-order queues: each op's place on its queue (queue order, not trace order: see
        # TraceModel.queue_order); the edges themselves are decided in _compute (_queue_edges).
        self._queues: dict[int, array] = {}   # queue → its op nodes in queue order
        self._queue_of = array("l", [-1]) * (len(self._deps) if in_order else 0)  # op node → its queue
        self._queue_pos = array("l", [-1]) * len(self._queue_of)                  # → its index there
        if in_order:
            for op in m.queue_order():
                on = self.node_of_op[op.id]
                seq = self._queues.get(op.queue)
                if seq is None:
                    seq = self._queues[op.queue] = array("l")
                elif seq:  # the op before it there comes first in _compute's order (its last dep,
                    self._deps[on].append(seq[-1])  # not merged: _queue_edges decides)
                self._queue_pos[on] = len(seq)
                self._queue_of[on] = op.queue
                seq.append(on)

    def _wait_sources(self, ev) -> list[int]:
        """What a host wait that returned OK is ordered after (ANY: see :meth:`_any_source`)."""
        if ev.mode == "any":
            src = self._any_source(ev.wait, ev.idx)
            return [] if src is None else [src]
        out = []
        for sem, value in ev.wait:
            src = self._source(sem, value, ev.idx)
            if src is not None:
                out.append(src)
        return out

    def _any_source(self, waits, before: int) -> int | None:
        """What an ANY wait that returned OK at stream position ``before`` is ordered after: the
        signal that satisfied one of its timepoints first in the stream (the one that woke it), or
        nothing if a timepoint was met by its initial value (the wait returned at once)."""
        best = None
        for sem, value in waits:
            sig = self.model.first_signal(sem, value, before)
            if sig is None:
                return None
            if sig and (best is None or sig[2] < best[2]):
                best = sig
        return None if best is None else self.signal_node(best[1], best[2])

    def _source(self, sem: str, value: int, before: int | None) -> int | None:
        sig = self.model.first_signal(sem, value, before)
        if not sig:
            return None
        return self.signal_node(sig[1], sig[2])

    def _topological(self) -> list[int]:
        deps = self._deps
        state = bytearray(len(deps))
        order: list[int] = []
        for root in range(len(deps)):
            if state[root]:
                continue
            state[root] = 1
            stack = [(root, iter(deps[root]))]
            while stack:
                node, it = stack[-1]
                for d in it:
                    if not state[d]:   # a grey node here is a cycle (a stuck trace): ignore it
                        state[d] = 1
                        stack.append((d, iter(deps[d])))
                        break
                else:
                    stack.pop()
                    state[node] = 2
                    order.append(node)
        return order

    def _lane(self, name: str) -> int:
        self.lane_names.append(name)
        self._counter.append(0)
        return len(self.lane_names) - 1

    def _compute(self) -> None:
        m = self.model
        n = len(self._deps)
        # machine-word arrays: a million nodes, not a million int objects
        self.lane, self.epoch, self.start = array("l", bytes(8 * n)), array("l", bytes(8 * n)), [()] * n
        self._counter: list[int] = []
        host_lane = {t: self._lane(f"host thread {t}") for t in sorted(self.host_nodes)}
        queue_lane: dict[int, int] = {}
        chains: list[int] = []            # lanes of greedy op chains (unordered devices)
        preferred: dict[int, int] = {}    # queue -> the chain its last op went on
        op_of_node = list(self.node_of_op) + [None] * (n - len(self.node_of_op))  # op nodes come first
        lane_arr, epoch_arr, start_arr, counter = self.lane, self.epoch, self.start, self._counter
        queue_pos, merge = self._queue_pos, self._merge
        covered = bytearray(n)   # in-order ops after every earlier op of their queue (_queue_edges)
        last_vc = ()
        for node in self._topological():
            vc: list[int] = []
            deps = self._deps[node]
            at = queue_pos[node] if queue_pos else -1
            if at > 0:
                deps = deps[:-1]   # the op before it on its queue: _queue_edges below
            for d in deps:
                merge(vc, d)
            op_id = op_of_node[node]
            covers = False
            if at >= 0:
                covers = self._queue_edges(node, vc, covered)
            if op_id is None:
                lane = host_lane[self._thread_of[node]]
            else:
                op = m.ops[op_id]
                if covers and op.kind != "host_call":  # (a host call orders nothing after it: a chain of
                    lane = queue_lane.get(op.queue)    # its own; an op some earlier one races with too)
                    if lane is None:
                        lane = queue_lane[op.queue] = self._lane(f"queue {op.queue}")
                elif m.ordering == "inline":
                    lane = host_lane.setdefault(op.thread, None)
                    if lane is None:
                        lane = host_lane[op.thread] = self._lane(f"host thread {op.thread}")
                else:
                    lane = self._pick_chain(vc, chains, preferred, op.queue)
            epoch = counter[lane] + 1
            counter[lane] = epoch
            vc = tuple(vc)
            # consecutive nodes often see the same clock: share the tuple instead of a copy each
            if vc == last_vc:
                vc = last_vc
            last_vc = vc
            self._deps[node] = None
            lane_arr[node], epoch_arr[node], start_arr[node] = lane, epoch, vc

    def _merge(self, vc: list, d: int) -> None:
        """Add node ``d`` (its end) and what happens before it to the clock ``vc``."""
        dv, dl, de = self.start[d], self.lane[d], self.epoch[d]
        if len(dv) > len(vc):
            vc.extend([0] * (len(dv) - len(vc)))
        for i, x in enumerate(dv):
            if x > vc[i]:
                vc[i] = x
        if dl >= len(vc):
            vc.extend([0] * (dl + 1 - len(vc)))
        if de > vc[dl]:
            vc[dl] = de

    def _queue_edges(self, node: int, vc: list, covered: bytearray) -> bool:
        """Queue order of an in-order queue, into ``vc``: an op starts after the earlier ops of its
        queue — but only those *enqueued before it* by a guarantee. Which of two unordered host
        threads reached the queue first is timing, not a guarantee (their ops race). A host call
        holds the queue until its waits are met: what follows comes after what it waited for.
        Walks back from the op before it to the first earlier op that itself came after everything
        before it (``covered``; usually the op just before: one step), at most ``QUEUE_WINDOW`` ops
        (past that, the queue's order is taken as it ran). True: this op is after every earlier op
        of its queue (so the queue's lane stays a chain)."""
        seq, i = self._queues[self._queue_of[node]], self._queue_pos[node]
        enq, held = self._enq, self._held
        mine = enq[node]
        covers = True
        j = i - 1
        while j >= 0:
            prev = seq[j]
            far = i - j > QUEUE_WINDOW
            theirs = enq[prev]
            if far or theirs < 0 or mine < 0 or theirs == mine or self.before(theirs, mine):
                if prev in held:
                    for src in held[prev]:
                        self._merge(vc, src)
                else:
                    self._merge(vc, prev)
                    if covered[prev]:
                        break
                if far:
                    return False
            else:
                covers = False
            j -= 1
        if covers:
            covered[node] = 1
        return covers

    def _pick_chain(self, vc, chains, preferred, queue) -> int:
        """A chain whose last op happens before this one (so the chain stays totally ordered):
        the queue's last chain if it fits, else the first that fits, else a new chain."""
        counter = self._counter

        def fits(lane):
            return lane < len(vc) and vc[lane] >= counter[lane]

        lane = preferred.get(queue)
        if lane is None or not fits(lane):
            lane = next((c for c in chains if fits(c)), None)
            if lane is None:
                lane = self._lane(f"ops chain {len(chains)}")
                chains.append(lane)
        preferred[queue] = lane
        return lane
