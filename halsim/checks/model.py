"""What the checks need from a trace, read in one streaming pass (``docs/trace-format.md``).

:class:`TraceModel` keeps the queue operations, semaphore signals and failures, and each host
thread's calls in program order, and the commands' buffer accesses for the rules that need them.
Commands are kept as compact tuples (interned ids, about 150 bytes each) up to ``keep_commands``
and read again, streaming, past that. Positions (``enq``, ``done``, ``idx``) are indexes into the
event stream: the order events were recorded is the order things happened, whatever the clocks
say (host and device clocks differ on some devices).

>>> from reference.trace import Trace
>>> t = Trace({"device": "sim", "personality": "generic"})
>>> for e in [{"ev": "semaphore", "t": 0, "sem": "s0", "initial": 0, "thread": 0},
...           {"ev": "op", "t": 1, "op": "0:0", "kind": "barrier", "thread": 0, "queue": 0,
...            "wait": [], "signal": [["s0", 1]]},
...           {"ev": "op_done", "t": 2, "op": "0:0", "status": 0},
...           {"ev": "signal", "t": 2, "sem": "s0", "value": 1, "cause": "0:0"}]:
...     t.emit(e)
>>> m = TraceModel(t)
>>> m.ordering, m.ops["0:0"].signal, m.signals["s0"]
('unordered', (('s0', 1),), [(1, '0:0', 3)])
"""

from __future__ import annotations

from bisect import bisect_left
from sys import intern
from dataclasses import dataclass

from ..trace_tools.model import personality, queue_order, scopes_ok

# Metal command queues and OpenCL in-order queues run submissions in enqueue order (a wait blocks
# the queue). CUDA's HAL queue does not: pending queue actions are issued to the stream when their
# waits resolve, so a later action without waits overtakes an earlier one (sim:cuda does this).
IN_ORDER = ("metal", "opencl")
INLINE = ("sync", "local-sync")
STICKY = ("cuda", "opencl")
# commands that order what comes before them in a command buffer before what comes after
BARRIERS = ("barrier", "wait_events")
# Execution stages (HAL_SEMANTICS CB9), read as IREE's Vulkan driver maps them to pipeline stages
# (direct_command_buffer.cc, iree_hal_vulkan_convert_pipeline_stage_flags): COMMAND_ISSUE = TOP_OF_PIPE,
# COMMAND_PROCESS = DRAW_INDIRECT, DISPATCH = COMPUTE_SHADER, TRANSFER, COMMAND_RETIRE = BOTTOM_OF_PIPE.
COMMAND_ISSUE, COMMAND_PROCESS, DISPATCH, TRANSFER, COMMAND_RETIRE, HOST = 1, 2, 4, 8, 16, 32
ALL_STAGES = 0x3F
WORK = COMMAND_PROCESS | DISPATCH | TRANSFER   # the stages commands run in (top/bottom of pipe: none)
# What a stage named in a barrier holds, as Vulkan reads a stage mask: as a source, the stage and the
# logically earlier ones; as a target, the stage and the logically later ones (pipeline order
# TOP_OF_PIPE < DRAW_INDIRECT < COMPUTE_SHADER < BOTTOM_OF_PIPE; TOP_OF_PIPE < TRANSFER < BOTTOM_OF_PIPE).
# So top of pipe is no stage as a source and every stage as a target; bottom of pipe the reverse.
SCOPE_OF_STAGE = {  # stage: (as a source, as a target)
    COMMAND_ISSUE: (0, WORK),
    COMMAND_PROCESS: (COMMAND_PROCESS, COMMAND_PROCESS | DISPATCH),
    DISPATCH: (COMMAND_PROCESS | DISPATCH, DISPATCH),
    TRANSFER: (TRANSFER, TRANSFER),
    COMMAND_RETIRE: (WORK, 0),
    HOST: (HOST, HOST),
}
# The stage each access runs in: a dispatch writes its bindings in DISPATCH, reads them there or reads
# its indirect workgroup counts in COMMAND_PROCESS (the trace does not tell those reads apart: a scope
# holding either stage holds the read); fill/copy/update run in TRANSFER. Other kinds: every stage.
WRITE_STAGES_OF = {"dispatch": DISPATCH, "fill": TRANSFER, "copy": TRANSFER, "update": TRANSFER}
READ_STAGES_OF = {"dispatch": COMMAND_PROCESS | DISPATCH, "copy": TRANSFER}
STAGE_NAMES = {COMMAND_ISSUE: "COMMAND_ISSUE", COMMAND_PROCESS: "COMMAND_PROCESS", DISPATCH: "DISPATCH",
               TRANSFER: "TRANSFER", COMMAND_RETIRE: "COMMAND_RETIRE", HOST: "HOST"}


def access_stages(kind: str, write: bool) -> int:
    return (WRITE_STAGES_OF if write else READ_STAGES_OF).get(kind, ALL_STAGES)


def stage_scopes(stages) -> tuple[int, int, int, int]:
    """A barrier's ``[source, target]`` stage masks as ``(source, target, src, dst)``: the stages its
    first and second scopes hold (:data:`SCOPE_OF_STAGE`), then the masks as named (a trace without
    ``stages``: every stage).

    >>> stage_scopes([TRANSFER, COMMAND_PROCESS])      # DRAW_INDIRECT and the later COMPUTE_SHADER
    (8, 6, 8, 2)
    >>> stage_scopes([COMMAND_ISSUE, COMMAND_RETIRE])   # top of pipe -> bottom of pipe: nothing
    (0, 0, 1, 16)
    """
    src, dst = stages or (ALL_STAGES, ALL_STAGES)
    source = target = 0
    for bit, (as_source, as_target) in SCOPE_OF_STAGE.items():
        if src & bit:
            source |= as_source
        if dst & bit:
            target |= as_target
    return source, target, src, dst


def barrier_scopes(stages) -> tuple[int, int, int, int] | None:
    """A barrier's :func:`stage_scopes`; None when they order every command before it before every
    command after it — both hold DISPATCH and TRANSFER (the common case; also a trace without
    ``stages``).

    >>> barrier_scopes([DISPATCH | TRANSFER, DISPATCH | TRANSFER]) is None
    True
    >>> barrier_scopes([DISPATCH, DISPATCH])   # a fill or copy on either side is not ordered
    (6, 4, 4, 4)
    >>> barrier_scopes([COMMAND_RETIRE, COMMAND_ISSUE]) is None
    True
    >>> barrier_scopes([COMMAND_PROCESS | TRANSFER, DISPATCH | TRANSFER])   # not a dispatch's writes
    (10, 12, 10, 12)
    """
    scope = stage_scopes(stages)
    full = DISPATCH | TRANSFER
    return None if scope[0] & full == full and scope[1] & full == full else scope


def stage_names(mask: int) -> str:
    return "|".join(name for bit, name in STAGE_NAMES.items() if mask & bit) or "NONE"


# Access scopes (HAL_SEMANTICS CB9; Vulkan's access flags) of each command's writes and reads: a
# dispatch's reads are its bindings' (DISPATCH_READ) or its indirect workgroup counts
# (INDIRECT_COMMAND_READ; the trace does not tell them apart: either one covers it).
INDIRECT_COMMAND_READ, DISPATCH_READ, DISPATCH_WRITE, TRANSFER_READ, TRANSFER_WRITE = 1, 4, 8, 16, 32
MEMORY_READ, MEMORY_WRITE = 256, 512
WRITE_SCOPE_OF = {"dispatch": DISPATCH_WRITE, "fill": TRANSFER_WRITE, "copy": TRANSFER_WRITE,
                  "update": TRANSFER_WRITE}
READ_SCOPE_OF = {"dispatch": DISPATCH_READ | INDIRECT_COMMAND_READ, "copy": TRANSFER_READ}
SCOPE_NAMES = {1: "INDIRECT_COMMAND_READ", 2: "CONSTANT_READ", 4: "DISPATCH_READ", 8: "DISPATCH_WRITE",
               16: "TRANSFER_READ", 32: "TRANSFER_WRITE", 64: "HOST_READ", 128: "HOST_WRITE",
               256: "MEMORY_READ", 512: "MEMORY_WRITE"}


def scope_names(mask: int) -> str:
    return "|".join(name for bit, name in SCOPE_NAMES.items() if mask & bit) or "NONE"


def covers(scope: int, need: int, write: bool) -> bool:
    """Whether access scope ``scope`` holds an access of scope ``need`` (MEMORY_WRITE holds every
    write, MEMORY_READ every read)."""
    return bool(scope & need or scope & (MEMORY_WRITE if write else MEMORY_READ))


def barrier_memory(scopes, stages=None) -> tuple | None:
    """A barrier's trace ``scopes`` (its memory and buffer barriers) as ``(source, target, buffer,
    start, end)`` entries (buffer None: every buffer); None when it makes every command's writes
    visible to every command after it — none given (HAL_SEMANTICS CB9; also a trace without
    ``scopes``) or one global barrier covering every access in a barrier whose named ``stages``
    hold DISPATCH and TRANSFER on both sides (access scopes hold only the stages named).

    >>> barrier_memory(None) is None, barrier_memory([[MEMORY_WRITE, MEMORY_READ | MEMORY_WRITE]]) is None
    (True, True)
    >>> barrier_memory([[DISPATCH_WRITE, DISPATCH_READ], [TRANSFER_WRITE, TRANSFER_READ, "b0", 0, 16]])
    ((8, 4, None, 0, 0), (32, 16, 'b0', 0, 16))
    """
    if not scopes or not scopes_ok(scopes):
        return None   # (a malformed record orders memory: the trace reader names it, no false alarm)
    work = DISPATCH | TRANSFER
    named_all = all(mask & work == work for mask in (stages or (ALL_STAGES, ALL_STAGES)))
    out = []
    for entry in scopes:
        src, dst = entry[0], entry[1]
        if len(entry) == 2:
            if named_all and all(covers(src, w, True) and covers(dst, w, True) for w in WRITE_SCOPE_OF.values()) and \
                    all(covers(dst, r, False) for r in READ_SCOPE_OF.values()):
                return None   # every write to every access: as if none were given
            out.append((src, dst, None, 0, 0))
        else:  # a buffer barrier (its buffer None, in a first version's traces: a table slot, every buffer)
            buf, off, n = entry[2], entry[3], entry[4]
            out.append((src, dst, None if buf is None else intern(buf), off, off + n))
    return tuple(out)


def unseen(memory: dict, scopes: dict, between, written: tuple, access: tuple, buf: str, lo: int,
           hi: int) -> list:
    """Where the barriers ``between`` two commands do not make the first one's write visible to the
    second one's access of bytes ``buf[lo:hi)``, as Vulkan reads memory dependencies: ``[(side, start,
    end)]`` (empty: visible everywhere) for the bytes where no barrier holds the write in a source scope
    (``"source"``), none after that one (or that entry itself) holds the access in a target scope
    (``"target"``), or no memory or buffer barrier holds the bytes at all (``"bytes"``). Memory
    dependencies are per byte: buffer barriers on neighbouring bytes together hold an access.

    ``memory``/``scopes``: the op's entries of :attr:`TraceModel.memory` / :attr:`TraceModel.scopes`;
    ``written``: ``(stages, scope)`` of the write, ``access``: ``(stages, scope, write)`` of the access.

    >>> m = {1: (TRANSFER, TRANSFER, TRANSFER, TRANSFER, ((TRANSFER_WRITE, TRANSFER_READ, "b0", 0, 4),))}
    >>> unseen(m, {}, [1], (TRANSFER, TRANSFER_WRITE), (TRANSFER, TRANSFER_READ, False), "b0", 0, 8)
    [('bytes', 4, 8)]
    >>> unseen(m, {}, [1], (TRANSFER, TRANSFER_WRITE), (TRANSFER, DISPATCH_READ, False), "b0", 0, 4)
    [('target', 0, 4)]
    """
    cuts = {lo, hi}
    for b in between:
        rec = memory.get(b)
        for _s, _d, bb, start, end in rec[4] if rec else ():
            if bb == buf:
                cuts.update(c for c in (start, end) if lo < c < hi)
    out: list = []
    cuts = sorted(cuts)
    for p, q in zip(cuts, cuts[1:]):
        side = _unseen_bytes(memory, scopes, between, written, access, buf, p, q)
        if side is None:
            continue
        if out and out[-1][0] == side and out[-1][2] == p:
            out[-1] = (side, out[-1][1], q)
        else:
            out.append((side, p, q))
    return out


def _unseen_bytes(memory, scopes, between, written, access, buf, p, q) -> str | None:
    """:func:`unseen` for bytes ``[p, q)`` that every buffer barrier holds whole or not at all. Only
    barriers in an execution dependency chain from the write count (Vulkan: a barrier whose first
    scope holds neither the write nor a barrier after it does nothing for it); a memory barrier's
    access scopes hold only accesses in the stages it names (Vulkan's access scopes: no logically
    earlier/later stages); a barrier without memory barriers makes visible everything in its stage
    scopes (CB9). The side is ``"source stages"`` / ``"target stages"`` when a scope holds the
    access but its barrier's stages do not."""
    wstages, wscope = written
    astages, need, write = access
    chain = avail = 0   # the stages ordered after the write / after an availability of it
    held = src_miss = dst_miss = False
    for b in between:
        rec = memory.get(b)
        if rec is None:   # no memory barriers: memory is ordered as execution
            scope = scopes.get(b)
            if scope is None:
                return None   # holds every command on both sides
            source, target = scope[0], scope[1]
            if (wstages | chain) & source:
                held = True
                if (wstages | avail) & source:
                    if astages & target:
                        return None
                    avail |= target
                chain |= target
            continue
        source, target, src, dst, entries = rec
        chained = (wstages | chain) & source
        before = avail & source   # made available earlier, in this barrier's chain
        for esrc, edst, bb, start, end in entries:
            if bb is not None and (bb != buf or p < start or end < q):
                continue   # a buffer barrier on other bytes
            made = covers(esrc, wscope, True)
            src_miss = src_miss or (made and not wstages & src)
            made = made and bool(wstages & src)
            seen = covers(edst, need, write)
            dst_miss = dst_miss or (seen and not astages & dst)
            if not chained:
                continue
            held = True
            if (before or made) and seen and astages & dst:
                return None
            if made:
                avail |= target
        if chained:
            chain |= target
            if before:
                avail |= target
    if not held:
        return "bytes"
    side = "target" if avail else "source"
    return f"{side} stages" if (dst_miss if avail else src_miss) else side


_OP_KEYS = frozenset(("ev", "t", "op", "kind", "thread", "queue", "wait", "signal"))
_NO_FIELDS: dict = {}   # shared by every op without extra fields; never written to


def device_sticky(header: dict) -> bool:
    """Whether the device follows IREE's CUDA design, whose queue status stays failed after a failed
    action (HAL_SEMANTICS B.3): ``cuda``, ``opencl`` and their models."""
    return personality(header) in STICKY


def device_ordering(header: dict) -> str:
    """``in_order`` (Metal command queues, OpenCL in-order queues: ops on one queue run in enqueue
    order), ``inline`` (local-sync and its model: a queue call runs before it returns) or
    ``unordered`` (IREE semantics: only semaphores order submissions)."""
    kind = personality(header)
    return "in_order" if kind in IN_ORDER else "inline" if kind in INLINE else "unordered"


@dataclass(slots=True)
class Op:
    """One queue operation (the ``op`` event, completed by its ``op_done``)."""

    id: str
    kind: str
    thread: int
    queue: int
    wait: tuple
    signal: tuple
    enq: int                      # stream position of the op event
    fields: dict
    done: int | None = None       # stream position of op_done (None: never finished)
    status: int | None = None
    message: str = ""
    retained: frozenset | None = None  # ids in its retain event (None: the device retained nothing)
    ncmds: int = 0
    barriers: list | None = None  # indexes of its barrier commands (None: none; saves memory)
    after: tuple = ()             # ops whose recorded device-signal events it waited on (issue ``after``)
    t: int = 0                    # its op event's time (enqueue)

    def segment(self, index: int) -> int:
        """Which barrier-separated part of the command buffer command ``index`` is in."""
        return bisect_left(self.barriers, index) if self.barriers else 0

    def between(self, i: int, j: int) -> list:
        """The indexes of the barriers between commands ``i < j``."""
        barriers = self.barriers or ()
        return barriers[bisect_left(barriers, i):bisect_left(barriers, j)]

    def barriers_order(self, scopes: dict | None, i: int, first: int, j: int, last: int) -> bool:
        """Whether the barriers between commands ``i < j`` order an access of command i in stages
        ``first`` before one of command j in stages ``last`` (:func:`access_stages`): a chain of
        barriers, each whose first scope meets the previous one's second scope (Vulkan's execution
        dependency chain), from one whose first scope holds ``first`` to one whose second scope
        holds ``last``. ``scopes``: the op's entry of :attr:`TraceModel.scopes`. Memory scopes are
        :func:`unseen`'s."""
        between = self.between(i, j)
        if not between:
            return False
        if scopes is None:
            return True
        reached = 0
        for b in between:
            scope = scopes.get(b)
            if scope is None:  # orders every command before it before every command after it
                return True
            if (first | reached) & scope[0]:
                reached |= scope[1]
        return bool(reached & last)

    @property
    def stuck(self) -> bool:
        """Never ran: no op_done, or an op_done that reports the deadlock (a blocked sim:sync call)
        or a queue shut down under it."""
        if self.done is None:
            return True
        msg = self.message or ""
        return (self.status in (1, 4, 10) and ("deadlock" in msg or "shutting down" in msg))


@dataclass(slots=True)
class HostEvent:
    """One host-thread call that matters for ordering, in program order."""

    kind: str          # enqueue | signal | fail | wait | access | join (value: the joined thread) |
                       # release | acquire (value: the host_sync id) | query (a Semaphore.query that
                       # saw sem reach value) | rejected (a host signal of sem to value the HAL refused)
    idx: int           # stream position
    op: str | None = None
    sem: str | None = None
    value: int | None = None
    wait: list | tuple = ()
    mode: str = "all"
    status: int = 0
    message: str = ""
    call: str | None = None  # made inside this host call's function (a wait): ordered as that op


class Enqueue:
    """The host call that enqueued an op (a lighter :class:`HostEvent`: there is one per op)."""

    __slots__ = ("idx", "op")
    kind = "enqueue"
    status = 0
    message = ""
    call = None   # (an op enqueued inside a host call's function has no Enqueue: see Op.fields["call"])

    def __init__(self, idx: int, op: str):
        self.idx, self.op = idx, op


class TraceModel:
    """Operations, semaphore histories and host programs of one trace (see module docstring)."""

    def __init__(self, trace, keep_commands: int = 2_000_000):
        self.trace = trace
        self.keep_commands = keep_commands
        self.header = dict(getattr(trace, "header", {}) or {})
        self.ordering = device_ordering(self.header)
        self.device = str(self.header.get("device", "?"))
        self.ops: dict[str, Op] = {}
        self.initial: dict[str, int] = {}
        self.signals: dict[str, list] = {}      # sem -> [(value, cause, idx)] in stream order
        self.fails: dict[str, tuple] = {}       # sem -> (status, message, cause, idx) of the first failure
        self.host: dict[int, list[HostEvent]] = {}
        self.host_releases: list[tuple[str, int]] = []   # (resource, idx)
        self.buffers: dict[str, dict] = {}
        self.cuda_events: list[dict] = []
        # host accesses to buffer bytes (map_read, map_write, …), in trace order:
        # (commands before it, thread or None, host-call op id or None, buf, offset, length, mode, idx)
        self.host_accesses: list[tuple] = []
        # made inside a host call's function, so ordered as that op: (role, sync id, op) of host_sync
        # events, (op, sem, value) of host_query events; its waits are HostEvents with ``call``, and
        # the ops it enqueued have ``fields["call"]`` (and no Enqueue on the function's thread)
        self.op_syncs: list[tuple] = []
        self.op_queries: list[tuple] = []
        # host signals the HAL refused (signal_rejected): (sem, value, cause "host:T" or op id, idx, status)
        self.rejected: list[tuple] = []
        self.ncmds = 0
        # op id → {barrier index: barrier_scopes} of its barriers that do not order every command;
        # ops whose barriers all do are not in it (most: no memory per op)
        self.scopes: dict[str, dict] = {}
        # op id → {barrier index: stage_scopes + (barrier_memory entries,)} of its barriers with
        # memory or buffer barriers that do not make every write visible; likewise only ops with one
        self.memory: dict[str, dict] = {}
        self._maxes: dict[str, list] = {}
        self._commands: list | None = []
        self._issued: list[str] = []           # op ids in issue-event order
        self._committed: dict[str, int] = {}   # op id -> commit time of its Metal work command buffer
        self._read()
        for op in self.ops.values():
            if op.barriers:
                op.barriers.sort()
        # a wait that reached its deadline while nothing could signal it (DEADLINE_EXCEEDED) marks
        # one only if no host thread acted afterwards: a program that polled with a timeout, then
        # signaled or submitted what was missing, recovered
        acted = max((ev.idx for evs in self.host.values() for ev in evs
                     if ev.kind in ("enqueue", "signal", "fail")), default=-1)
        marks = [ev.idx for evs in self.host.values() for ev in evs
                 if ev.kind == "wait" and "deadlock" in ev.message and (ev.status != 4 or ev.idx > acted)]
        marks += [op.done for op in self.ops.values() if op.done is not None and "deadlock" in (op.message or "")]
        # stream position of the first event that reports a deadlock (None: the run did not deadlock);
        # what happens after it is the device being closed under stuck work
        self.deadlock_at: int | None = min(marks, default=None)

    def queue_order(self) -> list[Op]:
        """The ops in the order the device queued them (in-order queues; see
        :func:`halsim.trace_tools.model.queue_order`: not always trace order)."""
        order = queue_order({o.id: o.t for o in self.ops.values()}, self._issued, self._committed)
        return [self.ops[o] for o in order]

    def _host(self, thread: int) -> list:
        return self.host.setdefault(thread, [])

    def commands(self):
        """Every command as ``(op, index, kind, access)`` in trace order: kept from the first
        pass (compact tuples of interned ids) up to ``keep_commands``, else streamed again."""
        if self._commands is not None:
            return iter(self._commands)
        return ((e["op"], e["index"], e.get("kind", "command"), e.get("access") or ())
                for e in self.trace if e.get("ev") == "cmd")

    def _read(self) -> None:
        ops, signals, host = self.ops, self.signals, self._host
        cmds = self._commands
        for idx, e in enumerate(self.trace):
            ev = e.get("ev")
            if ev == "cmd":
                self.ncmds += 1
                op = ops.get(e["op"])
                if cmds is not None:
                    if len(cmds) < self.keep_commands:
                        cmds.append((op.id if op is not None else e["op"], e["index"], intern(e.get("kind", "command")),
                                     tuple([(intern(b), o, n, intern(m)) for b, o, n, m in e.get("access") or ()])))
                    else:
                        cmds = self._commands = None   # too many to keep: re-read the trace instead
                if op is not None:
                    op.ncmds += 1
                    kind = e.get("kind")
                    if kind in BARRIERS:
                        if op.barriers is None:
                            op.barriers = []
                        op.barriers.append(e["index"])
                        scope = barrier_scopes(e.get("stages")) if kind == "barrier" else None
                        if scope is not None:
                            self.scopes.setdefault(op.id, {})[e["index"]] = scope
                        memory = barrier_memory(e.get("scopes"), e.get("stages")) if kind == "barrier" else None
                        if memory is not None:   # (its stages too: they limit its access scopes)
                            self.memory.setdefault(op.id, {})[e["index"]] = \
                                stage_scopes(e.get("stages")) + (memory,)
            elif ev == "op":
                fields = {k: v for k, v in e.items() if k not in _OP_KEYS} or _NO_FIELDS
                # tuples of interned names: a million ops must not hold a million copies of "s0"
                op = Op(e["op"], intern(e["kind"]), e["thread"], e.get("queue", 0),
                        tuple([(intern(s), v) for s, v in e["wait"]]),
                        tuple([(intern(s), v) for s, v in e["signal"]]), idx, fields, t=e.get("t", 0))
                ops[op.id] = op
                if fields.get("call") is None:
                    host(op.thread).append(Enqueue(idx, op.id))
            elif ev == "issue":
                self._issued.append(e["op"])
                after = e.get("after")
                op = ops.get(e["op"]) if after else None
                if op is not None:
                    op.after = tuple(after)
            elif ev == "metal_cb":
                if e.get("step") == "work":
                    self._committed[e["op"]] = e.get("commit", e.get("t", 0))
            elif ev == "op_done":
                op = ops.get(e["op"])
                if op is not None:
                    op.done, op.status, op.message = idx, e.get("status", 0), e.get("message", "")
            elif ev == "signal":
                cause = e.get("cause", "")
                known = ops.get(cause)
                cause = known.id if known is not None else intern(cause)   # share the op's id string
                signals.setdefault(e["sem"], []).append((e["value"], cause, idx))
                if cause.startswith("host:"):
                    host(int(cause[5:])).append(HostEvent("signal", idx, sem=e["sem"], value=e["value"]))
            elif ev == "fail":
                cause = e.get("cause", "")
                self.fails.setdefault(e["sem"], (e.get("status"), e.get("message", ""), cause, idx))
                if cause.startswith("host:"):
                    host(int(cause[5:])).append(HostEvent("fail", idx, sem=e["sem"]))
            elif ev == "host_join":
                host(e["thread"]).append(HostEvent("join", idx, value=e["joined"]))
            elif ev == "host_sync":
                op_id = e.get("op")
                if op_id is not None:   # made inside that host call's function: ordered as the op
                    if op_id in ops:
                        self.op_syncs.append((e["role"], e["sync"], ops[op_id].id))
                elif e.get("thread") is not None:
                    host(e["thread"]).append(HostEvent(e["role"], idx, value=e["sync"]))
            elif ev == "host_query":
                if e.get("thread") is not None:
                    host(e["thread"]).append(HostEvent("query", idx, sem=intern(e["sem"]), value=e["value"]))
                elif e.get("op") in ops:
                    self.op_queries.append((ops[e["op"]].id, intern(e["sem"]), e["value"]))
            elif ev == "signal_rejected":
                thread, op_id = e.get("thread"), e.get("op")
                if thread is not None:
                    host(thread).append(HostEvent("rejected", idx, sem=e["sem"], value=e["value"],
                                                  status=e.get("status", 0), message=e.get("message", "")))
                    self.rejected.append((e["sem"], e["value"], f"host:{thread}", idx, e.get("status", 0)))
                elif op_id in ops:
                    self.rejected.append((e["sem"], e["value"], ops[op_id].id, idx, e.get("status", 0)))
            elif ev == "host_wait":
                call = e.get("call")
                host(e["thread"]).append(HostEvent(
                    "wait", idx, wait=[(s, v) for s, v in e["wait"]], mode=e.get("mode", "all"),
                    status=e.get("status", 0), message=e.get("message", ""),
                    call=ops[call].id if call in ops else None))
            elif ev == "retain":
                op = ops.get(e["op"])
                if op is not None:
                    op.retained = frozenset(e["res"])
            elif ev == "semaphore":
                self.initial[e["sem"]] = e.get("initial", 0)
            elif ev == "buffer":
                self.buffers[e["buf"]] = e
            elif ev == "host_release":
                self.host_releases.append((e["res"], idx))
            elif ev == "cuda_event":
                self.cuda_events.append(e)
            elif ev == "host_read" or ev == "host_access":
                thread, op_id = e.get("thread"), e.get("op")
                if thread is None and op_id is None:
                    continue  # a trace from before these fields: who accessed is unknown
                mode = e.get("mode", "r")
                self.host_accesses.append((self.ncmds, thread, op_id, intern(e["buf"]), e["offset"], e["length"],
                                           mode, idx))
                if op_id is None:
                    host(thread).append(HostEvent("access", idx))

    # -- semaphore values -------------------------------------------------------------------------

    def final_value(self, sem: str) -> int:
        """The highest value ``sem`` reached (its initial value if never signaled)."""
        hist = self.signals.get(sem)
        base = self.initial.get(sem, 0)
        return max([base] + [v for v, _c, _i in hist]) if hist else base

    def wait_failed(self, op) -> bool:
        """Whether one of ``op``'s waits failed before it was met (so the op never ran)."""
        for sem, value in op.wait:
            fail = self.fails.get(sem)
            if fail is not None and fail[3] < op.done and self.first_signal(sem, value, fail[3]) is False:
                return True
        return False

    def first_signal(self, sem: str, value: int, before: int | None = None):
        """The signal event ``(value, cause, idx)`` that first brought ``sem`` to ``>= value``;
        None when the initial value already met it, or nothing did (before stream position
        ``before``, if given). ``False`` means it was never met."""
        if self.initial.get(sem, 0) >= value:
            return None
        hist = self.signals.get(sem)
        if not hist:
            return False
        maxes = self._maxes.get(sem)
        if maxes is None or len(maxes) != len(hist):
            # running maximum: values only grow on a healthy semaphore, but stay safe if not
            maxes, top = [], -1
            for v, _c, _i in hist:
                top = max(top, v)
                maxes.append(top)
            self._maxes[sem] = maxes
        i = bisect_left(maxes, value)
        if i == len(hist) or (before is not None and hist[i][2] > before):
            return False
        return hist[i]

    def uses(self, op: Op) -> set:
        """Resource ids an op references that the trace names without its commands."""
        out = {s for s, _v in op.wait} | {s for s, _v in op.signal}
        for key in ("cb", "buf", "exe"):
            if op.fields.get(key):
                out.add(op.fields[key])
        return out


def op_key(op_id: str) -> tuple:
    """Sort key for program-order ids ``"T:N"`` (thread, then number)."""
    t, _, n = op_id.partition(":")
    try:
        return (int(t), int(n))
    except ValueError:
        return (1 << 30, op_id)
