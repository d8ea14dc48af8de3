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

from reference.trace import Trace

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
    """The device personality: the header's ``personality`` field, else the device URI's driver
    (``sim:metal?x=1`` → ``metal``, ``opencl`` → ``opencl``, ``cuda:GPU-…`` → ``cuda``)."""
    if header.get("personality"):
        return str(header["personality"])
    uri = str(header.get("device", "")).split("?", 1)[0]
    return uri.split(":", 1)[1] if uri.startswith("sim:") else (uri.split(":", 1)[0] or "generic")


#: Events between two progress updates (``progress=`` of :func:`load`, :meth:`TraceIndex.of`, :func:`ticking`).
TICK = 50_000


def load(path: str | os.PathLike, validate: bool = False, progress=None) -> Trace:
    """``Trace.load`` (a missing file, a folder or a pipe: a :class:`TraceFormatError` naming it; a trace
    is read more than once, so a pipe must be saved to a file first). ``validate``: also check every
    event's basic shape (:func:`event_problem`) in the pass that reads the file. ``progress``: a
    :class:`halsim.campaigns.executor.Progress` shown ``reading PATH: N events`` during that pass."""
    path = os.fspath(path)
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
#: The largest integer a trace may hold (int64, what the Perfetto export writes; times are ns).
MAX_INT = (1 << 63) - 1


def _nat(v) -> bool:
    return type(v) is int and 0 <= v <= MAX_INT


def _nat_or_null(v) -> bool:
    return v is None or (type(v) is int and 0 <= v <= MAX_INT)


def _str(v) -> bool:
    return type(v) is str


def _str_or_null(v) -> bool:
    return v is None or type(v) is str


def _strs(v) -> bool:
    return type(v) is list and all(type(x) is str for x in v)


def _pairs(v) -> bool:
    return type(v) is list and all(type(p) is list and len(p) == 2 and type(p[0]) is str and type(p[1]) is int
                                   for p in v)


def _stages(v) -> bool:
    return type(v) is list and len(v) == 2 and all(type(x) is int and 0 <= x <= MAX_INT for x in v)


def scopes_ok(v) -> bool:
    """A barrier record's ``scopes``: ``[source_scope, target_scope]`` per memory barrier,
    ``[source_scope, target_scope, buffer or null, offset, length]`` per buffer barrier (the checks
    read only a well-formed one)."""
    return type(v) is list and all(
        type(e) is list and len(e) in (2, 5) and _nat(e[0]) and _nat(e[1])
        and (len(e) == 2 or (_str_or_null(e[2]) and _nat(e[3]) and _nat(e[4])))
        for e in v)


def _accesses(v) -> bool:
    if type(v) is not list:
        return False
    for a in v:
        if type(a) is not list or len(a) != 4 or type(a[0]) is not str or type(a[3]) is not str:
            return False
        off, length = a[1], a[2]
        if type(off) is not int or type(length) is not int or not (0 <= off <= MAX_INT and 0 <= length <= MAX_INT):
            return False
    return True


_NAT = (_nat, "a non-negative integer")
_NAT_OR_NULL = (_nat_or_null, "a non-negative integer or null")
_STR = (_str, "a string")
_STR_OR_NULL = (_str_or_null, "a string or null")
_IDS = (_strs, "a list of ids (strings)")
_PAIRS = (_pairs, "a list of [semaphore, value] pairs")
_ACCESS = (_accesses, "a list of [buffer, offset, length, mode] entries")
_STAGES = (_stages, "a [source, target] pair of execution-stage masks")
_SCOPES = (scopes_ok, "a list of [source_scope, target_scope] or [source_scope, target_scope, buffer, offset, length]")
_TIME = (_nat, "a non-negative integer (nanoseconds)")  # (a start that may not be null)


def _fields(*specs) -> tuple:
    """``(key, (check, what), required)`` → ``(key, check, what, required)`` rows."""
    return tuple((key, check, what, required) for key, (check, what), required in specs)


#: Per event kind, the fields the tools look up or use as keys, and their types (docs/trace-format.md).
#: Ids are strings (``op``, ``sem``, ``buf``, ``cb``, …), tracks, queues and threads non-negative
#: integers (where the format allows it, a thread may be null: a host call's function, a thread that
#: never called the device), offsets, lengths, values and statuses non-negative integers, messages
#: strings. Fields not listed (or absent and not required) are not checked.
_FIELDS = {
    "track": _fields(("id", _NAT, True), ("kind", _STR, False), ("name", _STR, False)),
    "semaphore": _fields(("sem", _STR, True), ("initial", _NAT, False), ("thread", _NAT, False)),
    "buffer": _fields(("buf", _STR, True), ("op", _STR_OR_NULL, False)),
    "command_buffer": _fields(("cb", _STR, True)),
    "executable": _fields(("exe", _STR, True)),
    "op": _fields(("op", _STR, True), ("kind", _STR, True), ("thread", _NAT, False),
                  ("queue", _NAT_OR_NULL, False), ("wait", _PAIRS, False), ("signal", _PAIRS, False),
                  ("cb", _STR_OR_NULL, False), ("buf", _STR_OR_NULL, False), ("call", _STR_OR_NULL, False)),
    "op_done": _fields(("op", _STR, True), ("track", _NAT, False), ("message", _STR, False)),
    "cmd": _fields(("op", _STR, True), ("kind", _STR, True), ("index", _NAT, True), ("start", _TIME, False),
                   ("track", _NAT, False), ("access", _ACCESS, False), ("entry", _STR_OR_NULL, False),
                   ("stages", _STAGES, False), ("scopes", _SCOPES, False), ("message", _STR, False)),
    "encoder": _fields(("op", _STR, True), ("kind", _STR, True), ("start", _TIME, False), ("track", _NAT, False),
                       ("encoder", _NAT, False)),
    "issue": _fields(("op", _STR, True), ("track", _NAT, False), ("after", _IDS, False)),
    "retain": _fields(("op", _STR, True), ("res", _IDS, False)),
    "release": _fields(("op", _STR, True), ("res", _IDS, False)),
    "metal_cb": _fields(("op", _STR, True), ("commit", _TIME, False), ("track", _NAT, False)),
    "signal": _fields(("sem", _STR, True), ("value", _NAT, True), ("cause", _STR, False)),
    "fail": _fields(("sem", _STR, True), ("cause", _STR, False), ("message", _STR, False)),
    "commit": _fields(("buf", _STR, True), ("op", _STR_OR_NULL, False)),
    "decommit": _fields(("buf", _STR, True), ("op", _STR_OR_NULL, False)),
    "host_wait": _fields(("thread", _NAT, True), ("wait", _PAIRS, False), ("start", _TIME, False),
                         ("mode", _STR, False), ("message", _STR, False), ("call", _STR_OR_NULL, False)),
    "host_join": _fields(("thread", _NAT, True), ("joined", _NAT, True)),
    "host_sync": _fields(("thread", _NAT_OR_NULL, True), ("sync", _NAT, True), ("role", _STR, False),
                         ("via", _STR, False), ("op", _STR_OR_NULL, False)),
    "host_query": _fields(("sem", _STR, True), ("value", _NAT, True), ("thread", _NAT_OR_NULL, False),
                          ("op", _STR_OR_NULL, False)),
    "signal_rejected": _fields(("sem", _STR, True), ("value", _NAT, True), ("thread", _NAT_OR_NULL, False),
                               ("op", _STR_OR_NULL, False), ("message", _STR, False)),
    "host_read": _fields(("buf", _STR, True), ("offset", _NAT, True), ("length", _NAT, True),
                         ("digest", _STR, False), ("thread", _NAT_OR_NULL, False), ("op", _STR_OR_NULL, False)),
    "host_access": _fields(("buf", _STR, True), ("offset", _NAT, True), ("length", _NAT, True),
                           ("mode", _STR, False), ("thread", _NAT_OR_NULL, False), ("op", _STR_OR_NULL, False)),
    "host_release": _fields(("res", _STR, True)),
}


def _time_ok(e, key) -> bool:
    """``key`` absent, or a time (``start``/``ready``/``end`` may be null)."""
    v = e.get(key)
    return v is None or (type(v) is int and 0 <= v <= MAX_INT)


_ABSENT = object()


def _cmd_ok(e) -> bool:
    """A ``cmd`` event that :func:`event_problem` would pass, checked at once (most of a big trace's
    events are commands); False sends it through the field table, which names the problem. A command
    of exactly ``ev``, ``t``, ``op``, ``index``, ``kind``, ``start``, ``track`` and ``access`` (a fill,
    copy or update) needs no look-up of the optional fields."""
    t, index, start, track, acc = (e.get("t"), e.get("index"), e.get("start", _ABSENT), e.get("track", _ABSENT),
                                   e.get("access", _ABSENT))
    if not (type(t) is int and type(index) is int and 0 <= t <= MAX_INT and 0 <= index <= MAX_INT
            and type(e.get("op")) is str and type(e.get("kind")) is str):
        return False
    if start is not _ABSENT and (type(start) is not int or not 0 <= start <= MAX_INT):
        return False
    if track is not _ABSENT and (type(track) is not int or not 0 <= track <= MAX_INT):
        return False
    if acc is not _ABSENT:
        if not _accesses(acc):
            return False
        if len(e) == 8 and start is not _ABSENT and track is not _ABSENT:
            return True
    return (("entry" not in e or _str_or_null(e["entry"])) and ("message" not in e or type(e["message"]) is str)
            and ("stages" not in e or _stages(e["stages"])) and ("scopes" not in e or scopes_ok(e["scopes"]))
            and ("status" not in e or _nat_or_null(e["status"]))
            and ("ready" not in e or _time_ok(e, "ready")) and ("end" not in e or _time_ok(e, "end")))


def _op_ok(e) -> bool:
    """An ``op`` event that :func:`event_problem` would pass (see :func:`_cmd_ok`)."""
    t, thread, queue = e.get("t"), e.get("thread", 0), e.get("queue")
    return (type(t) is int and 0 <= t <= MAX_INT and type(e.get("op")) is str and type(e.get("kind")) is str
            and type(thread) is int and 0 <= thread <= MAX_INT
            and (queue is None or (type(queue) is int and 0 <= queue <= MAX_INT))
            and ("wait" not in e or _pairs(e["wait"])) and ("signal" not in e or _pairs(e["signal"]))
            and ("cb" not in e or _str_or_null(e["cb"])) and ("buf" not in e or _str_or_null(e["buf"]))
            and ("call" not in e or _str_or_null(e["call"])) and ("status" not in e or _nat_or_null(e["status"]))
            and ("start" not in e or _time_ok(e, "start")) and ("ready" not in e or _time_ok(e, "ready"))
            and ("end" not in e or _time_ok(e, "end")))


def _op_done_ok(e) -> bool:
    """An ``op_done`` event that :func:`event_problem` would pass (see :func:`_cmd_ok`)."""
    t, track, start, ready, status = e.get("t"), e.get("track", 0), e.get("start"), e.get("ready"), e.get("status")
    return (type(t) is int and 0 <= t <= MAX_INT and type(track) is int and 0 <= track <= MAX_INT
            and type(e.get("op")) is str
            and (start is None or (type(start) is int and 0 <= start <= MAX_INT))
            and (ready is None or (type(ready) is int and 0 <= ready <= MAX_INT))
            and (status is None or (type(status) is int and 0 <= status <= MAX_INT))
            and ("message" not in e or type(e["message"]) is str) and ("end" not in e or _time_ok(e, "end")))


def _signal_ok(e) -> bool:
    """A ``signal`` event that :func:`event_problem` would pass (see :func:`_cmd_ok`)."""
    t, value = e.get("t"), e.get("value")
    return (type(t) is int and type(value) is int and 0 <= t <= MAX_INT and 0 <= value <= MAX_INT
            and type(e.get("sem")) is str and ("cause" not in e or type(e["cause"]) is str)
            and ("status" not in e or _nat_or_null(e["status"]))
            and ("start" not in e or _time_ok(e, "start")) and ("ready" not in e or _time_ok(e, "ready"))
            and ("end" not in e or _time_ok(e, "end")))


#: Whole-event checks of the commonest kinds: True is a pass; False, the field table's verdict.
_FAST = {"cmd": _cmd_ok, "op": _op_ok, "op_done": _op_done_ok, "signal": _signal_ok}


def event_problem(e) -> str | None:
    """What is wrong with one event's basic shape (None: nothing): an object whose ``ev`` is a
    string, times (``t``, ``start``, ``ready``, ``end``) non-negative integer nanoseconds, and, for
    each known event kind, the fields the tools look up or key on (:data:`_FIELDS`): ids (``op``,
    ``sem``, ``buf``, ``cb``, ``res``, a ``track`` event's ``id`` and ``name``, …), tracks, threads,
    queues, values, ``wait``/``signal`` lists of [sem, value] and ``access`` lists of [buf, offset,
    length, mode]; integers at most :data:`MAX_INT`. One dict lookup and a few type tests per field:
    this runs on every event a tool reads."""
    if type(e) is not dict:
        return f"expected an event object, got {_kind(e)}"
    ev = e.get("ev")
    if type(ev) is not str:
        return f"'ev' must be a string, got {_kind(ev)}"
    fast = _FAST.get(ev)
    if fast is not None and fast(e):
        return None
    for key in _TIMES:
        if key in e or (key == "t" and ev in _NEEDS_T):
            v = e.get(key)
            if v is None and key != "t":
                continue
            if type(v) is not int or not 0 <= v <= MAX_INT:
                return f"{ev} event: {key!r} must be a non-negative integer (nanoseconds), got {_kind(v)}"
    fields = _FIELDS.get(ev)
    if fields is not None:
        for key, check, what, required in fields:
            if key in e:
                v = e[key]
                if not check(v):
                    return f"{ev} event: {key!r} must be {what}, got {_kind(v)}"
            elif required:
                return f"{ev} event: {key!r} missing"
    if "status" in e:
        v = e["status"]
        if v is not None and (type(v) is not int or not 0 <= v <= MAX_INT):
            return f"{ev} event: 'status' must be a non-negative integer, got {_kind(v)}"
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
        self.failed_done_seq: dict[int, int] = {}  # failed op's position → its ``op_done``'s trace position
        self.op_pos: dict[str, int] = {}
        self.semaphores: dict[str, int] = {}  # sem → initial value
        self.sem_created: dict[str, int] = {}  # sem → creation time
        self.signals: dict[str, list[tuple[int, int, int, str]]] = {}  # sem → [(seq, t, value, cause)]
        self.fails: dict[str, tuple[int, int, int, str, str]] = {}  # sem → (seq, t, status, message, cause)
        self.host_waits: list[dict] = []  # host_wait events plus ``seq``
        self.host_handoffs: list[dict] = []  # host_join and host_sync events (hand-offs between threads)
        # (reader, buf, offset, length, digest) in trace order; reader: (host thread, None), or
        # (None, op id) of the host call whose function read it
        self.host_reads: list[tuple[object, str, int, int, str]] = []
        self.sem_keys: dict[str, tuple] = {}  # sem → (creating thread, n-th it created): see sem_key
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
        sem_count: dict = {}  # creating thread → semaphores it created so far
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
                    if e.get("status"):
                        self.failed_done_seq[pos] = seq
                    done = dict(e)
                    done.pop("ev")
                    ops[pos].update(done, end=done.pop("t"))
            elif ev == "issue":
                self.issued.append(e["op"])
            elif ev == "metal_cb":
                if e.get("step") == "work":
                    self.committed[e["op"]] = e.get("commit", t)
            elif ev == "host_read":
                thread = e.get("thread")
                reader = (thread, e.get("op") if thread is None else None)
                self.host_reads.append((reader, e["buf"], e["offset"], e["length"], e["digest"]))
            elif ev == "signal":
                self.signals.setdefault(e["sem"], []).append((seq, t, e["value"], e.get("cause", "")))
            elif ev == "fail":
                self.fails.setdefault(e["sem"], (seq, t, e.get("status", 0), e.get("message", ""),
                                                 e.get("cause", "")))
            elif ev == "semaphore":
                self.semaphores[e["sem"]] = e.get("initial", 0)
                self.sem_created[e["sem"]] = t
                self.sem_keys[e["sem"]] = (e.get("thread"), sem_count.get(e.get("thread"), 0))
                sem_count[e.get("thread")] = self.sem_keys[e["sem"]][1] + 1
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

    def sem_key(self, sem: str) -> tuple:
        """A semaphore's identity in the program: ``(creating thread, n)`` for the n-th semaphore that
        thread created. Ids (``s<n>``) count creations on all threads, so where threads race to create
        them they differ between runs; this does not (while host thread numbers agree)."""
        return self.sem_keys.get(sem, (None, sem))

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
