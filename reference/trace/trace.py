"""The trace: one format for every device (``docs/trace-format.md``).

A trace file is a JSON document written one event per line, so it can be streamed in both
directions and still read by any JSON parser::

    {"format":"halsim-trace","version":1,"header":{...},"events":[
    {"ev":"semaphore","t":0,"sem":"s0","initial":0},
    ...
    ]}

Events are kept in memory up to ``spill_threshold`` and then appended to a temporary spool file, so a
million-event trace does not live in RAM. :meth:`Trace.save` writes atomically (temporary file in the
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
import os
import tempfile
import threading
from typing import Iterator

FORMAT = "halsim-trace"
VERSION = 1

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


class TraceFormatError(ValueError):
    """A file that is not a readable halsim trace; the message names the file and the line."""


class Trace:
    """An append-only sequence of trace events (dicts) plus a header."""

    def __init__(self, header: dict | None = None, spill_threshold: int = 200_000):
        self.header = dict(header or {})
        self._events: list[dict] = []
        self._spool = None  # temporary file of encoded event lines, oldest first
        self._spooled = 0
        self._source: str | None = None  # a loaded file whose events precede ours
        self._source_count = 0
        self._spill_threshold = spill_threshold
        self._lock = threading.Lock()

    def emit(self, event: dict) -> None:
        self._events.append(event)
        if len(self._events) >= self._spill_threshold:
            self._spill()

    def _spill(self) -> None:
        with self._lock:
            events, self._events = self._events, []
            if not events:
                return
            if self._spool is None:
                self._spool = tempfile.TemporaryFile("w+", encoding="utf-8")
            self._spool.seek(0, os.SEEK_END)
            self._spool.write("".join(_dumps(e) + "\n" for e in events))
            self._spooled += len(events)

    def __len__(self) -> int:
        return self._source_count + self._spooled + len(self._events)

    def __iter__(self) -> Iterator[dict]:
        if self._source is not None:
            yield from _read_events(self._source)[1]
        with self._lock:
            spooled = self._spooled
            if self._spool is not None:
                self._spool.flush()
        if spooled:
            with open(self._spool.fileno(), "r", encoding="utf-8", closefd=False) as f:
                f.seek(0)
                for _ in range(spooled):
                    yield json.loads(f.readline())
        yield from list(self._events)

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
        path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(_dumps({"format": FORMAT, "version": VERSION, "header": self.header})[:-1])
                f.write(',"events":[\n')
                first = True
                for event in self:
                    if not first:
                        f.write(",\n")
                    f.write(_dumps(event))
                    first = False
                f.write("\n]}\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Trace":
        """Open a trace file; events are streamed from it when iterated. Raises TraceFormatError."""
        path = os.fspath(path)
        header, events = _read_events(path)
        count = sum(1 for _ in events)  # validates every line now, so later iteration cannot fail
        trace = cls(header)
        trace._source = path
        trace._source_count = count
        return trace


def _read_events(path: str):
    """(header, iterator of events) of a trace file; the iterator re-opens the file."""
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
    if doc.get("format") != FORMAT:
        raise TraceFormatError(f"{path}:1: not a halsim trace (format {doc.get('format')!r})")
    if doc.get("version") != VERSION:
        raise TraceFormatError(f"{path}:1: trace version {doc.get('version')!r} not supported (this reader: {VERSION})")

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
        raise TraceFormatError(f"{path}: truncated (no closing ']}}' line)")

    return doc.get("header", {}), events()
