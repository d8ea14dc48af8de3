"""One pass over a trace into the indexes every trace tool needs (:class:`TraceIndex`).

Iterating a loaded trace parses its JSON again each time, which for a million-command trace costs
seconds, so the tools read a trace once into this index and work from it. Commands are kept in
columns (lists of ints, operation positions instead of id strings), so a million of them stay small.

>>> from reference import hal
>>> with hal.create_device("sim", queues=1) as dev:
...     buf = dev.allocator.allocate_buffer(64)
...     s = dev.create_semaphore()
...     dev.queue_fill([], [(s, 1)], buf, 0, 64, 7, 1)
...     s.wait(1)
>>> ix = TraceIndex.of(dev.trace)
>>> [op["op"] for op in ix.ops], ix.cmd_count, ix.final_values()
(['0:0'], 1, {'s0': 1})
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field

from reference.trace import Trace, TraceFormatError

#: Device personalities whose queues run their operations in submission order.
IN_ORDER_PERSONALITIES = frozenset({"metal", "cuda", "opencl"})


def queue_order(ops: dict, issued: list, committed: dict) -> list:
    """The order an in-order device put operations on its queues: ``ops`` maps every op id to its
    ``op`` event's time, in trace order; ``issued``: op ids in the order of their ``issue`` events
    (stream devices: the worker put them on their streams in that order); ``committed``: op id → the
    commit time of its Metal work command buffer (``metal_cb``). Trace order alone is not it: a
    simulated host thread's clock runs ahead of the others', so its queue calls reach the device
    later than they reach the trace. Issue order where the trace has it (ops never issued never
    reached a queue and are left out), else commit times, else enqueue times, ties in trace order."""
    if issued:
        return [o for o in issued if o in ops]
    keyed = sorted(((committed.get(o, t), i, o) for i, (o, t) in enumerate(ops.items())))
    return [o for _t, _i, o in keyed]


def personality(header: dict) -> str:
    """The device personality: the header's ``personality`` field, else the device URI's scheme
    (``sim:metal?x=1`` → ``metal``, ``opencl`` → ``opencl``)."""
    if header.get("personality"):
        return str(header["personality"])
    uri = str(header.get("device", "")).split("?", 1)[0]
    return uri.split(":", 1)[1] if uri.startswith("sim:") else (uri or "generic")


#: Events between two progress updates (``progress=`` of :func:`load`, :meth:`TraceIndex.of`, :func:`ticking`).
TICK = 50_000


def load(path: str | os.PathLike, validate: bool = False, progress=None) -> Trace:
    """``Trace.load`` with a missing file reported as a :class:`TraceFormatError` too. ``validate``: also check every
    event's basic shape (:func:`event_problem`) in the pass that reads the file. ``progress``: a
    :class:`halsim.campaigns.executor.Progress` shown ``reading PATH: N events`` during that pass."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise TraceFormatError(f"{path}: no such file")
    check = event_problem if validate else None
    if progress is not None:
        progress.phase(f"reading {path}", unit="events")
        check = _ticking_check(check, progress)
    return Trace.load(path, check=check)


def _ticking_check(check, progress):
    """``check`` (or none) that also counts the events it sees into ``progress``, every :data:`TICK`."""
    n, every = 0, TICK

    def tick(e):
        nonlocal n
        n += 1
        if n == every:
            progress.update(n)
            n = 0
        return check(e) if check is not None else None
    return tick


def ticking(events, progress):
    """The events of ``events``, counted into ``progress`` every :data:`TICK` of them (the last
    chunk counted whole: a display clamps at its total). Chunks of ``islice`` delegated to with
    ``yield from``, not a Python step per event: ~1-3 % of an index pass (a per-event step: ~10 %)."""
    it = iter(events)
    for first in it:
        yield first
        yield from itertools.islice(it, TICK - 1)
        progress.update(TICK)


def _kind(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return "an object" if isinstance(v, dict) else "a list"
    return repr(v)


_TIMES = ("t", "start", "ready", "end")
_NEEDS_T = frozenset({"op", "op_done", "cmd", "encoder", "signal", "fail", "semaphore", "host_wait"})
_OP_EVENTS = frozenset({"op", "op_done", "cmd", "encoder", "issue", "retain", "release", "metal_cb"})
_SEM_EVENTS = frozenset({"signal", "fail", "semaphore"})


def event_problem(e) -> str | None:
    """What is wrong with one event's basic shape (None: nothing): an object whose ``ev`` is a
    string, times (``t``, ``start``, ``ready``, ``end``) non-negative integer nanoseconds, ``op``
    and ``sem`` strings where the tools look them up, ``wait``/``signal`` lists of [sem, value]."""
    if not isinstance(e, dict):
        return f"expected an event object, got {_kind(e)}"
    ev = e.get("ev")
    if not isinstance(ev, str):
        return f"'ev' must be a string, got {_kind(ev)}"
    for key in _TIMES:
        if key in e or (key == "t" and ev in _NEEDS_T):
            v = e.get(key)
            if v is None and key != "t":
                continue
            if type(v) is not int or v < 0:
                return f"{ev} event: {key!r} must be a non-negative integer (nanoseconds), got {_kind(v)}"
    if ev in _OP_EVENTS and not isinstance(e.get("op"), str):
        return f"{ev} event: 'op' must be a string, got {_kind(e.get('op'))}"
    if ev in _SEM_EVENTS and not isinstance(e.get("sem"), str):
        return f"{ev} event: 'sem' must be a string, got {_kind(e.get('sem'))}"
    if ev == "signal" and (type(e.get("value")) is not int):
        return f"signal event: 'value' must be an integer, got {_kind(e.get('value'))}"
    if ev in ("op", "cmd") and not isinstance(e.get("kind"), str):
        return f"{ev} event: 'kind' must be a string, got {_kind(e.get('kind'))}"
    if ev == "cmd" and type(e.get("index")) is not int:
        return f"cmd event: 'index' must be an integer, got {_kind(e.get('index'))}"
    if ev == "track" and "id" not in e:
        return "track event: 'id' missing"
    if ev == "op":
        for key in ("wait", "signal"):
            pairs = e.get(key, [])
            if not isinstance(pairs, list) or not all(
                    isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and type(p[1]) is int
                    for p in pairs):
                return f"op event: {key!r} must be a list of [semaphore, value] pairs, got {_kind(pairs)}"
    if "status" in e and e["status"] is not None and type(e["status"]) is not int:
        return f"{ev} event: 'status' must be an integer, got {_kind(e['status'])}"
    return None


@dataclass
class Commands:
    """Commands (and encoder spans) in columns; ``op`` is a position in :attr:`TraceIndex.ops`."""
    op: list = field(default_factory=list)
    index: list = field(default_factory=list)
    name: list = field(default_factory=list)  # interned: "fill", "dispatch negate", "encoder compute"
    start: list = field(default_factory=list)
    end: list = field(default_factory=list)
    track: list = field(default_factory=list)
    status: list = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.op)


class TraceIndex:
    """Everything the tools read from a trace, gathered in one pass (see the module docstring)."""

    def __init__(self, header: dict):
        self.header = header
        self.personality = personality(header)
        self.in_order = self.personality in IN_ORDER_PERSONALITIES
        self.tracks: dict[int, tuple[str, str]] = {}  # id → (kind, name)
        self.host_tracks: dict[int, int] = {}  # host thread → track id
        self.ops: list[dict] = []  # op merged with op_done (``end`` = op_done's t), enqueue order
        self.op_seq: list[int] = []  # each op's position in the trace (its ``op`` event)
        self.op_pos: dict[str, int] = {}
        self.semaphores: dict[str, int] = {}  # sem → initial value
        self.sem_created: dict[str, int] = {}  # sem → creation time
        self.signals: dict[str, list[tuple[int, int, int, str]]] = {}  # sem → [(seq, t, value, cause)]
        self.fails: dict[str, tuple[int, int, int, str, str]] = {}  # sem → (seq, t, status, message, cause)
        self.host_waits: list[dict] = []  # host_wait events plus ``seq``
        self.host_handoffs: list[dict] = []  # host_join and host_sync events (hand-offs between threads)
        self.host_reads: list[tuple[str, int, int, str]] = []  # (buf, offset, length, digest), in order
        self.cmds = Commands()
        self.cmd_count = 0  # ``cmd`` events only (cmds also holds encoder spans)
        self.t_min: int | None = None
        self.t_max: int | None = None
        self.issued: list[str] = []  # op ids in the order of their issue events
        self.committed: dict[str, int] = {}  # op id → commit time of its Metal work command buffer

    @classmethod
    def of(cls, trace, progress=None, label: str = "indexing") -> "TraceIndex":
        """The index of ``trace`` (a :class:`Trace`, or an index, returned as is). ``progress``: a
        :class:`halsim.campaigns.executor.Progress` shown as ``label`` with the events read so far."""
        if isinstance(trace, TraceIndex):
            return trace
        ix = cls(dict(trace.header))
        if progress is not None:
            progress.phase(label, total=len(trace) if hasattr(trace, "__len__") else None, unit="events")
            ix._scan(ticking(trace, progress))
        else:
            ix._scan(trace)
        return ix

    def _scan(self, trace) -> None:
        ops, op_pos, cmds = self.ops, self.op_pos, self.cmds
        names: dict = {}
        c_op, c_index, c_name, c_start, c_end, c_track, c_status = (
            cmds.op, cmds.index, cmds.name, cmds.start, cmds.end, cmds.track, cmds.status)
        t_min, t_max = None, None
        for seq, e in enumerate(trace):
            ev = e.get("ev")
            t = e.get("t")
            if t is not None:
                if t_max is None or t > t_max:
                    t_max = t
                if t_min is None or t < t_min:
                    t_min = t
            if ev == "cmd" or ev == "encoder":
                pos = op_pos.get(e["op"])
                if pos is None:
                    continue
                if ev == "cmd":
                    key = e["kind"] if e.get("entry") is None else ("dispatch", e["entry"])
                    index = e["index"]
                    self.cmd_count += 1
                else:
                    key = ("encoder", e["kind"])
                    index = -1 - e.get("encoder", 0)  # encoder spans: negative indexes
                name = names.get(key)
                if name is None:
                    name = names[key] = key if isinstance(key, str) else " ".join(key)
                c_op.append(pos)
                c_index.append(index)
                c_name.append(name)
                start = e.get("start", t)
                c_start.append(start)
                c_end.append(t)
                c_track.append(e.get("track", -1))
                c_status.append(e.get("status", 0))
                if start < t_min:
                    t_min = start
            elif ev == "op":
                rec = dict(e)
                rec.pop("ev")
                op_pos[e["op"]] = len(ops)
                ops.append(rec)
                self.op_seq.append(seq)
            elif ev == "op_done":
                pos = op_pos.get(e["op"])
                if pos is not None:
                    done = dict(e)
                    done.pop("ev")
                    ops[pos].update(done, end=done.pop("t"))
            elif ev == "issue":
                self.issued.append(e["op"])
            elif ev == "metal_cb":
                if e.get("step") == "work":
                    self.committed[e["op"]] = e.get("commit", t)
            elif ev == "host_read":
                self.host_reads.append((e["buf"], e["offset"], e["length"], e["digest"]))
            elif ev == "signal":
                self.signals.setdefault(e["sem"], []).append((seq, t, e["value"], e.get("cause", "")))
            elif ev == "fail":
                self.fails.setdefault(e["sem"], (seq, t, e.get("status", 0), e.get("message", ""),
                                                 e.get("cause", "")))
            elif ev == "semaphore":
                self.semaphores[e["sem"]] = e.get("initial", 0)
                self.sem_created[e["sem"]] = t
            elif ev == "host_sync" or ev == "host_join":
                self.host_handoffs.append(e)
            elif ev == "host_wait":
                hw = dict(e)
                hw["seq"] = seq
                self.host_waits.append(hw)
                if "start" in e and e["start"] < t_min:
                    t_min = e["start"]
            elif ev == "track":
                self.tracks[e["id"]] = (e.get("kind", ""), e.get("name", str(e["id"])))
                if e.get("kind") == "host" and e.get("name", "").startswith("host thread "):
                    try:
                        self.host_tracks[int(e["name"].rsplit(" ", 1)[1])] = e["id"]
                    except ValueError:
                        pass
        self.t_min, self.t_max = t_min, t_max

    # -- derived views -----------------------------------------------------------------------------

    def queue_order(self) -> list[dict]:
        """The ops in the order the device queued them (:func:`queue_order`)."""
        order = queue_order({op["op"]: op.get("t", 0) for op in self.ops}, self.issued, self.committed)
        return [self.ops[self.op_pos[o]] for o in order]

    def host_track(self, thread: int | None) -> int:
        """The track of host thread ``thread``, declaring one when the trace has none. ``None``: the
        functions of host calls (a hand-off made inside one is the host call's, with no thread)."""
        tid = self.host_tracks.get(thread)
        if tid is None:
            tid = max(self.tracks, default=-1) + 1
            self.tracks[tid] = ("host", "host call functions" if thread is None else f"host thread {thread}")
            self.host_tracks[thread] = tid
        return tid

    def ran(self, op: dict) -> bool:
        """Whether an operation has a time span (it reached ``op_done`` with a start)."""
        return op.get("end") is not None and op.get("start") is not None

    def final_values(self) -> dict[str, int]:
        """Each semaphore's last value (its initial value when never signalled)."""
        out = dict(self.semaphores)
        for sem, sigs in self.signals.items():
            out[sem] = sigs[-1][2]
        return out

    def makespan(self) -> int:
        """Last operation end minus first operation enqueue (0 with no finished operation)."""
        ends = [op["end"] for op in self.ops if op.get("end") is not None]
        if not ends:
            return 0
        return max(ends) - min(op["t"] for op in self.ops)
