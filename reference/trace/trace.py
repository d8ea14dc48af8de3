"""The trace: one format for every device (``docs/trace-format.md``).

A trace file is a JSON document written one event per line, so it can be streamed in both
directions and still read by any JSON parser::

    {"format":"halsim-trace","version":1,"header":{...},"events":[
    {"ev":"semaphore","t":0,"sem":"s0","initial":0},
    ...
    ]}

Entries (event dicts, and compact records that stand for one or more events) are kept in memory up
to ``spill_threshold`` — 500,000 entries, about 170 MB of records (a record is ~340 bytes, an event
dict ~410; a queue operation writes two or three records for its dozen events) — and then appended
to a temporary spool file (in
``marshal`` chunks — pickle where an event holds something marshal cannot write: encoding JSON there
would cost ten times more, and only :meth:`Trace.save` needs it), so a million-event trace does not
live in RAM. :meth:`Trace.save` writes atomically (temporary file in the
target directory, then rename): a crash never leaves a truncated trace.

>>> import os, tempfile
>>> t = Trace({"device": "example", "clock": "virtual"})
>>> t.emit({"ev": "semaphore", "t": 0, "sem": "s0", "initial": 0})
>>> path = os.path.join(tempfile.mkdtemp(), "t.json")
>>> t.save(path)
>>> [e["sem"] for e in Trace.load(path)]
['s0']
"""

from __future__ import annotations

import json
import marshal
import os
import pickle
import tempfile
import threading
from typing import Iterator

from .atomic import NESTED_TOO_DEEPLY, atomic_write, input_problem

FORMAT = "halsim-trace"
VERSION = 1

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

# Compact records (Trace.emit_record): key → expand(record, trace), returning the event's dict (or a
# list of dicts). Records hold only plain data (the key is a str), so a spool chunk of them is
# written with marshal, an order of magnitude faster than pickle.
EXPANDERS: dict = {}


def expander(key: str):
    """Register the decorated function as the expander of records whose first item is ``key``."""
    def register(fn):
        if EXPANDERS.setdefault(key, fn) is not fn:
            raise ValueError(f"trace record key {key!r} registered twice")
        return fn
    return register


class TraceFormatError(ValueError):
    """A file that is not a readable halsim trace; the message names the file and the line."""


class Trace:
    """An append-only sequence of trace events (dicts) plus a header."""

    def __init__(self, header: dict | None = None, spill_threshold: int = 500_000):
        self.header = dict(header or {})
        self._events: list[dict] = []
        self._spool = None  # temporary file of marshalled (or pickled) event chunks, oldest first
        self._chunks: list[tuple[int, int, str]] = []  # (offset, size, "m"arshal/"p"ickle) per chunk
        self._templates: list[dict] = []  # see add_template
        self._blocks: list[tuple] = []  # see add_block
        # what is registered already → its index: an operation's plan registers its commands anew
        # (every one-shot queue_fill...), and these stay in memory (they are not spilled)
        self._template_ids: dict[bytes, int] = {}
        self._block_ids: dict[tuple, int] = {}
        self._block_extra = 0  # events that block entries and records stand for, beyond one each
        self._spooled = 0
        self._source: str | None = None  # a loaded file whose events precede ours
        self._source_count = 0
        self._spill_threshold = spill_threshold
        self._lock = threading.Lock()

    def emit(self, event: dict) -> None:
        self._events.append(event)
        if len(self._events) >= self._spill_threshold:
            self._spill()

    def emit_sorted_run(self, event: dict, field: str) -> None:
        """:meth:`emit` one of a run of events of one kind by one thread at one instant whose order
        means nothing, keeping the run sorted by ``field`` (emits by other threads meanwhile only
        land on either side of it: list operations are atomic): e.g. the
        joins of ``ThreadPoolExecutor.shutdown``, made in the order of a set of threads (by address).
        (A run cut by a spill to disk, every ``spill_threshold`` events, is sorted on each side.)"""
        events = self._events
        i = len(events)
        ev, t, thread, key = event["ev"], event["t"], event["thread"], event[field]
        while i:
            prev = events[i - 1]
            if not (isinstance(prev, dict) and prev.get("ev") == ev and prev.get("t") == t
                    and prev.get("thread") == thread and prev[field] > key):
                break
            i -= 1
        events.insert(i, event)
        if len(events) >= self._spill_threshold:
            self._spill()

    def emit_record(self, record: tuple) -> None:
        """Emit one event as a compact record ``(key, value, ...)`` of plain data: the function
        registered with ``@expander(key)`` returns the event's dict when the trace is read
        (``expand(record, trace)``). A tuple of atoms is cheaper to build, keep and spool than a dict
        (the recorder writes several events per queue operation)."""
        self._events.append(record)
        if len(self._events) >= self._spill_threshold:
            self._spill()

    def emit_records(self, record: tuple, count: int) -> None:
        """:meth:`emit_record` for ``count`` events in one record: ``expand(record, trace)`` returns
        their list."""
        self._events.append(record)
        self._block_extra += count - 1
        if len(self._events) >= self._spill_threshold:
            self._spill()

    def add_template(self, fields: dict) -> int:
        """Register an event whose ``t``/``op``/``start``/``track`` change from one occurrence to the
        next (a command of a reusable command buffer); :meth:`emit_from` then records an occurrence
        as a small tuple of atoms (no dict to build or for the garbage collector to scan)."""
        try:
            key = marshal.dumps(fields, 2)  # (version 2: no back-references, whose flags vary with refcounts)
        except ValueError:  # something marshal cannot write: not shared
            key = None
        else:
            index = self._template_ids.get(key)
            if index is not None:
                return index
        self._templates.append(fields)
        index = len(self._templates) - 1
        if key is not None:
            self._template_ids[key] = index
        return index

    def template(self, template: int) -> dict:
        """A copy of the fields registered as ``template``."""
        return self._templates[template].copy()

    def emit_from(self, template: int, t: int, op: str, start: int, track: int) -> None:
        """Emit ``add_template``'s event ``template`` with these fields; iteration yields the dict."""
        self._events.append((template, t, op, start, track))
        if len(self._events) >= self._spill_threshold:
            self._spill()

    def add_block(self, entries) -> int:
        """Register a block: ``[(template, start offset, end offset), ...]`` of commands that always run
        back to back with these durations (a reusable command list); :meth:`emit_block` records one run."""
        entries = tuple(entries)
        index = self._block_ids.get(entries)
        if index is None:
            self._blocks.append(entries)
            index = self._block_ids[entries] = len(self._blocks) - 1
        return index

    def emit_block(self, block: int, start: int, op: str, track: int) -> None:
        """Emit every command of ``block`` for op ``op`` starting at ``start``; iteration yields the dicts."""
        self._events.append((block, start, op, track))
        self._block_extra += len(self._blocks[block]) - 1
        if len(self._events) >= self._spill_threshold:
            self._spill()

    def block_size(self, block: int) -> int:
        """How many events one :meth:`emit_block` of ``block`` stands for."""
        return len(self._blocks[block])

    def expand_block(self, block: int, start: int, op: str, track: int) -> Iterator[dict]:
        """The events of one run of ``block`` (what :meth:`emit_block` records)."""
        templates = self._templates
        for template, begin, end in self._blocks[block]:
            d = templates[template].copy()
            d["t"], d["op"], d["start"], d["track"] = start + end, op, start + begin, track
            yield d

    def _expand(self, events) -> Iterator[dict]:
        templates = self._templates
        for e in events:
            if type(e) is tuple:
                head = e[0]
                if type(head) is str:  # emit_record(s)
                    out = EXPANDERS[head](e, self)
                    if type(out) is dict:
                        yield out
                    else:
                        yield from out
                    continue
                if len(e) == 4:
                    yield from self.expand_block(*e)
                    continue
                d = templates[e[0]].copy()
                d["t"], d["op"], d["start"], d["track"] = e[1], e[2], e[3], e[4]
                yield d
            else:
                yield e

    def _spill(self) -> None:
        with self._lock:
            events, self._events = self._events, []
            if not events:
                return
            if self._spool is None:
                self._spool = tempfile.TemporaryFile("w+b")
            try:
                data, kind = marshal.dumps(events), "m"
            except ValueError:  # something marshal cannot write (an enum member, say)
                data, kind = pickle.dumps(events, protocol=pickle.HIGHEST_PROTOCOL), "p"
            offset = self._spool.seek(0, os.SEEK_END)
            self._spool.write(data)
            self._chunks.append((offset, len(data), kind))
            self._spooled += len(events)

    def __len__(self) -> int:
        return self._source_count + self._spooled + len(self._events) + self._block_extra

    def __iter__(self) -> Iterator[dict]:
        if self._source is not None:
            yield from _read_events(self._source)[1]
        with self._lock:
            chunks = list(self._chunks)
            if self._spool is not None:
                self._spool.flush()
        for offset, size, kind in chunks:
            data = os.pread(self._spool.fileno(), size, offset)
            yield from self._expand(marshal.loads(data) if kind == "m" else pickle.loads(data))
        yield from self._expand(list(self._events))

    def events(self, kind: str | None = None) -> Iterator[dict]:
        """Events in order, optionally only those whose ``ev`` is ``kind``."""
        return iter(self) if kind is None else (e for e in self if e.get("ev") == kind)

    def operations(self) -> list[dict]:
        """Queue operations in enqueue order, each the ``op`` record merged with its ``op_done``."""
        ops: dict[str, dict] = {}
        for e in self:
            ev = e.get("ev")
            if ev == "op":
                ops[e["op"]] = dict(e)
            elif ev == "op_done" and e["op"] in ops:
                done = dict(e)
                done.pop("ev")
                ops[e["op"]].update(done, end=done.pop("t"))
        return list(ops.values())

    # -- files -------------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> None:
        """Write the trace to ``path`` atomically."""
        def write(f) -> None:
            f.write(_dumps({"format": FORMAT, "version": VERSION, "header": self.header})[:-1])
            f.write(',"events":[\n')
            first = True
            for event in self:
                if not first:
                    f.write(",\n")
                f.write(_dumps(event))
                first = False
            f.write("\n]}\n")
        atomic_write(path, write, mode="w")

    @classmethod
    def load(cls, path: str | os.PathLike, check=None) -> "Trace":
        """Open a trace file; events are streamed from it when iterated. Raises TraceFormatError.
        ``check``: a function of one event saying what is wrong with it (None: nothing), run on every
        event in the same pass (a tool's own shape rules, at no second parse of the file)."""
        path = os.fspath(path)
        header, events = _read_events(path)
        if check is None:
            count = sum(1 for _ in events)  # validates every line now, so later iteration cannot fail
        else:
            count = 0
            for e in events:
                problem = check(e)
                if problem:
                    raise TraceFormatError(f"{path}:{count + 2}: event {count}: {problem}")
                count += 1
        trace = cls(header)
        trace._source = path
        trace._source_count = count
        return trace


def _read_events(path: str):
    """(header, iterator of events) of a trace file; the iterator re-opens the file (so a pipe,
    read once, cannot be a trace: it is refused by name, as are a missing file and a folder)."""
    problem = input_problem(path)
    if problem:
        raise TraceFormatError(problem)
    try:
        with open(path, "r", encoding="utf-8") as f:
            first = f.readline()
    except OSError as e:
        raise TraceFormatError(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise TraceFormatError(f"{path}: not a halsim trace (not UTF-8 text)") from None
    prefix = first.rstrip("\n")
    if not prefix.endswith('"events":['):
        raise TraceFormatError(f"{path}:1: not a halsim trace (expected a '{FORMAT}' header line)")
    try:
        doc = json.loads(prefix + "]}")
    except json.JSONDecodeError as e:
        raise TraceFormatError(f"{path}:1: bad header: {e.msg}") from None
    except RecursionError:  # (a value nested thousands deep: a corrupt or hostile file)
        raise TraceFormatError(f"{path}:1: bad header: {NESTED_TOO_DEEPLY}") from None
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if fmt != FORMAT:
        raise TraceFormatError(f"{path}:1: not a halsim trace (format {fmt!r})")
    version = doc.get("version")
    if type(version) is not int or version != VERSION:   # (True == 1: a bool is no version)
        shown = json.dumps(version) if isinstance(version, bool) or version is None else repr(version)
        raise TraceFormatError(f"{path}:1: trace version {shown} not supported (this reader: {VERSION})")
    if not isinstance(doc.get("header", {}), dict):
        raise TraceFormatError(f"{path}:1: the trace's 'header' must be an object, got {json.dumps(doc['header'])}")

    def events():
        with open(path, "r", encoding="utf-8") as f:
            f.readline()
            lineno = 1
            for line in f:
                lineno += 1
                text = line.rstrip("\n")
                if text == "]}":
                    return
                if text.endswith(","):
                    text = text[:-1]
                try:
                    yield json.loads(text)
                except json.JSONDecodeError as e:
                    raise TraceFormatError(f"{path}:{lineno}: bad event: {e.msg}") from None
                except RecursionError:
                    raise TraceFormatError(f"{path}:{lineno}: bad event: {NESTED_TOO_DEEPLY}") from None
        raise TraceFormatError(f"{path}: truncated (no closing ']}}' line)")

    return doc.get("header", {}), events()
