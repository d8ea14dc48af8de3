"""The recorder every device uses to write its trace, so every device writes the same events.

Event kinds and fields are documented in ``docs/trace-format.md``. Object ids are short strings
(``s3`` semaphore, ``b7`` buffer, ``c2`` command buffer, ``e0`` executable, ``v1`` event); operation
ids are program-order ids ``"T:N"`` — the N-th queue call of host thread T — which are stable across
devices running the same program; a command is ``(op id, index)``.
"""

from __future__ import annotations

import hashlib
from typing import Callable

from .trace import Trace, expander


def _tps(timepoints) -> list:
    return [[s.id, v] for s, v in timepoints]


def _error_fields(error) -> dict:
    if error is None:
        return {"status": 0}
    return {"status": int(error.code), "message": error.message}


class Recorder:
    """Writes trace events stamped with the device's clock (``clock()`` → ns)."""

    def __init__(self, trace: Trace, clock: Callable[[], int]):
        self.trace = trace
        self.clock = clock
        self._tracks: dict[tuple[str, str], int] = {}
        self.emit = trace.emit

    def track(self, kind: str, name: str) -> int:
        """The id of the track (host thread, queue, worker, stream, encoder) named ``name``."""
        key = (kind, name)
        tid = self._tracks.get(key)
        if tid is None:
            tid = self._tracks[key] = len(self._tracks)
            self.emit({"ev": "track", "id": tid, "kind": kind, "name": name})
        return tid

    # -- objects -----------------------------------------------------------------------------------

    def semaphore(self, sem, initial: int, thread: int) -> None:
        self.emit({"ev": "semaphore", "t": self.clock(), "sem": sem.id, "initial": initial, "thread": thread})

    def buffer(self, buf, op: str | None = None) -> None:
        self.emit({"ev": "buffer", "t": self.clock(), "buf": buf.id, "size": buf.byte_length,
                   "memory_type": int(buf.memory_type), "usage": int(buf.allowed_usage),
                   "access": int(buf.allowed_access), "transient": buf.is_transient, "op": op})

    def command_buffer(self, cb) -> None:
        self.emit({"ev": "command_buffer", "t": self.clock(), "cb": cb.id, "mode": int(cb.mode),
                   "categories": int(cb.allowed_categories), "binding_capacity": cb.binding_capacity})

    def executable(self, exe) -> None:
        self.emit({"ev": "executable", "t": self.clock(), "exe": exe.id, "library": exe.library})

    def host_release(self, res_id: str) -> None:
        """The host dropped its last reference to a resource (observed with weakref.finalize)."""
        self.emit({"ev": "host_release", "t": self.clock(), "res": res_id})

    # -- queue operations --------------------------------------------------------------------------

    # The events written for every queue operation are compact records (Trace.emit_record): the
    # expand functions at the end of this module build the same dicts when the trace is read.

    def op(self, op) -> None:
        self.trace.emit_record(("op", op.enqueue_t, op.id, op.kind, op.thread, op.queue,
                                [(s.id, v) for s, v in op.wait], [(s.id, v) for s, v in op.signal],
                                op.fields))

    def enqueued(self, op, res_ids) -> None:
        """:meth:`op` then :meth:`retain`, as one record (the queue call's events)."""
        self.trace.emit_records(("enqueued", op.enqueue_t, op.id, op.kind, op.thread, op.queue,
                                 [(s.id, v) for s, v in op.wait], [(s.id, v) for s, v in op.signal],
                                 op.fields, tuple(res_ids)), 2)

    def finished(self, op, block, res_ids, now: int) -> None:
        """The commands of trace block ``block`` (if not None: ``(block id, ns, commands)``, see
        Trace.add_block; they started at ``op.start_t``), then :meth:`op_done` (success) and, at
        ``now``, :meth:`release` of ``res_ids`` (if not None), as one record: what a successful op
        that ran a static command list writes at its end."""
        if block is None:
            self.trace.emit_records(("finished", op.end_t, op.id, op.ready_t, op.start_t, op.track, None,
                                     res_ids, now), 1 + (res_ids is not None))
        else:
            self.trace.emit_records(("finished", op.end_t, op.id, op.ready_t, op.start_t, op.track, block[0],
                                     res_ids, now), block[2] + 1 + (res_ids is not None))

    def op_done(self, op, error=None) -> None:
        if error is None:
            self.trace.emit_record(("op_done", op.end_t, op.id, op.ready_t, op.start_t, op.track, 0, None))
        else:
            self.trace.emit_record(("op_done", op.end_t, op.id, op.ready_t, op.start_t, op.track,
                                    int(error.code), error.message))

    def command(self, op, cmd, start: int, end: int, track: int, error=None) -> None:
        ev = self._command_fields(cmd)
        ev["t"], ev["op"], ev["start"], ev["track"] = end, op.id, start, track
        if error is not None:
            ev.update(_error_fields(error))
        self.emit(ev)

    @staticmethod
    def _command_fields(cmd) -> dict:
        ev = {"ev": "cmd", "t": 0, "op": "", "index": cmd.index, "kind": cmd.kind, "start": 0, "track": 0,
              "access": [[r.buffer.id, r.offset, r.length, a] for r, a in cmd.accesses]}
        if cmd.kind == "dispatch":
            spec, wg, consts, _binds = cmd.args
            ev["entry"] = spec.name
            # a Range (indirect: the counts are read from a buffer) is a tuple too
            ev["workgroups"] = list(wg) if type(wg) is tuple else None
            ev["constants"] = [c & 0xFFFFFFFF for c in consts]  # cost models scale by them (spin)
        elif cmd.kind == "barrier":
            ev["stages"] = [int(cmd.args[0]), int(cmd.args[1])]  # source, target (the checks order by them)
            barriers = cmd.args[2]
            ev["memory_barrier"] = bool(barriers)
            if barriers:  # the scopes they make visible (the checks; absent: none given, full)
                ev["scopes"] = [[b[0], b[1]] if len(b) == 2 else [b[0], b[1], b[2].buffer.id, b[2].offset, b[2].length]
                                for b in barriers]
        return ev

    def command_template(self, cmd) -> int:
        """Register ``cmd``'s event fields with the trace once (a device replaying a reusable command
        buffer), for :meth:`command_from`."""
        return self.trace.add_template(self._command_fields(cmd))

    def command_from(self, template: int, op, start: int, end: int, track: int, error=None) -> None:
        """The same event as :meth:`command`, for a command registered with :meth:`command_template`."""
        if error is None:
            self.trace.emit_from(template, end, op.id, start, track)
            return
        ev = self.trace.template(template)
        ev["t"], ev["op"], ev["start"], ev["track"] = end, op.id, start, track
        ev.update(_error_fields(error))
        self.emit(ev)

    def retain(self, op, res_ids) -> None:
        self.trace.emit_record(("res", "retain", op.enqueue_t, op.id, tuple(res_ids)))

    def release(self, op, res_ids) -> None:
        self.trace.emit_record(("res", "release", self.clock(), op.id, tuple(res_ids)))

    def commit(self, buf, op) -> None:
        self.emit({"ev": "commit", "t": self.clock(), "buf": buf.id, "op": op.id})

    def decommit(self, buf, op) -> None:
        self.emit({"ev": "decommit", "t": self.clock(), "buf": buf.id, "op": op.id})

    # -- semaphores and host waits -----------------------------------------------------------------

    def signal(self, sem, value: int, cause: str, t: int) -> None:
        self.trace.emit_record(("signal", t, sem.id, value, cause))

    def fail(self, sem, error, cause: str, t: int) -> None:
        self.emit({"ev": "fail", "t": t, "sem": sem.id, "status": int(error.code), "message": error.message,
                   "cause": cause})

    def host_read(self, buf_id: str, offset: int, data: bytes, who: dict) -> None:
        """The host read ``data`` back from a buffer (``map_read``): a digest, so traces of two devices
        can be compared output by output without holding the bytes. ``who``: ``{"thread": n}`` (None: a
        thread that never called the device), or, from inside a host call's function, ``{"op": id}``."""
        ev = {"ev": "host_read", "t": self.clock(), "buf": buf_id, "offset": offset, "length": len(data),
              "digest": hashlib.blake2b(data, digest_size=8).hexdigest()}
        ev.update(who)
        self.emit(ev)

    def host_access(self, buf_id: str, offset: int, length: int, mode: str, who: dict) -> None:
        """Any other host access to a buffer's bytes: ``mode`` ``"w"`` (``map_write``, ``map_fill``,
        the target of ``map_copy``, a writable ``map_range``) or ``"r"`` (a ``map_copy`` source, a
        read-only ``map_range``); ``who`` as for :meth:`host_read`."""
        ev = {"ev": "host_access", "t": self.clock(), "buf": buf_id, "offset": offset, "length": length,
              "mode": mode}
        ev.update(who)
        self.emit(ev)

    def host_query(self, sem, value: int, who: dict) -> None:
        """A ``Semaphore.query`` by host thread ``{"thread": n}`` (or from inside host call ``{"op":
        id}``'s function) saw ``sem`` at ``value``, a value it had not seen in a traced query."""
        ev = {"ev": "host_query", "t": self.clock(), "sem": sem.id, "value": value}
        ev.update(who)
        self.emit(ev)

    def signal_rejected(self, sem, value: int, error, who: dict) -> None:
        """A host ``Semaphore.signal(value)`` the HAL refused: ``value`` was not above the current
        value (INVALID_ARGUMENT). ``who`` as for :meth:`host_query`."""
        ev = {"ev": "signal_rejected", "t": self.clock(), "sem": sem.id, "value": value,
              "status": int(error.code), "message": error.message}
        ev.update(who)
        self.emit(ev)

    def host_wait(self, thread: int, mode: str, timepoints, start: int, error=None, call: str | None = None) -> None:
        ev = {"ev": "host_wait", "t": self.clock(), "thread": thread, "mode": mode, "wait": _tps(timepoints),
              "start": start}
        ev.update(_error_fields(error))
        if call is not None:
            ev["call"] = call
        self.emit(ev)


# -- expanding compact records (see Trace.emit_record) --------------------------------------------------

@expander("op")
def _op_event(r, _trace=None) -> dict:
    ev = {"ev": "op", "t": r[1], "op": r[2], "kind": r[3], "thread": r[4], "queue": r[5],
          "wait": [[s, v] for s, v in r[6]], "signal": [[s, v] for s, v in r[7]]}
    ev.update(r[8])
    return ev


@expander("enqueued")
def _enqueued_events(r, _trace=None) -> list:
    return [_op_event(r), {"ev": "retain", "t": r[1], "op": r[2], "res": list(r[9])}]


@expander("finished")
def _finished_events(r, trace) -> list:
    _, end, op, ready, start, track, block, res_ids, now = r
    out = [] if block is None else list(trace.expand_block(block, start, op, track))
    out.append({"ev": "op_done", "t": end, "op": op, "ready": ready, "start": start, "track": track, "status": 0})
    if res_ids is not None:
        out.append({"ev": "release", "t": now, "op": op, "res": list(res_ids)})
    return out


@expander("op_done")
def _op_done_event(r, _trace=None) -> dict:
    ev = {"ev": "op_done", "t": r[1], "op": r[2], "ready": r[3], "start": r[4], "track": r[5], "status": r[6]}
    if r[7] is not None:
        ev["message"] = r[7]
    return ev


@expander("res")
def _res_event(r, _trace=None) -> dict:
    return {"ev": r[1], "t": r[2], "op": r[3], "res": list(r[4])}


@expander("signal")
def _signal_event(r, _trace=None) -> dict:
    return {"ev": "signal", "t": r[1], "sem": r[2], "value": r[3], "cause": r[4]}
