"""Export a trace to Perfetto (TrackEvent protobuf) and Chrome JSON.

Perfetto: one track per host thread, queue, worker, stream and encoder track of the trace, split
into lanes where spans overlap without nesting (``layout.py``), all under one root track named
after the device; operations are slices with their commands nested beneath (where they run on the
same track); semaphore values are counter tracks; arrows (flows) go from each signal to the waits it
satisfied (``flows.py``); semaphore failures, failed operations and commands, and optional
``findings`` are instant events on their own tracks. Packets are built with the ``perfetto``
package's ``TraceProtoBuilder`` in chunks and streamed to the file, so a million-command trace does
not sit in memory as protobuf objects. Both writers are atomic (temporary file, then rename).

>>> import os, tempfile
>>> from reference import hal
>>> from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
>>> with hal.create_device("sim", queues=1) as dev:
...     buf = dev.allocator.allocate_buffer(64)
...     s = dev.create_semaphore()
...     dev.queue_fill([], [(s, 1)], buf, 0, 64, 7, 1)
...     s.wait(1)
>>> path = os.path.join(tempfile.mkdtemp(), "t.pftrace")
>>> export_perfetto(dev.trace, path)["slices"]
3
>>> trace = pb.Trace.FromString(open(path, "rb").read())
>>> sorted({p.track_event.name for p in trace.packet if p.track_event.type == p.track_event.TYPE_SLICE_BEGIN})
['0:0 fill', 'fill', 'host wait s0>=1']
"""

from __future__ import annotations

import heapq
import json
import os
from typing import NamedTuple

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from perfetto.trace_builder.proto_builder import TraceProtoBuilder

from reference.trace.atomic import atomic_write

from .flows import handoff_flows, signal_flows
from .layout import INSTANTS, Item, Lane, layout
from .model import TraceIndex

SEQ_ID = 1  # one packet sequence: this writer
ROOT_UUID = 1
_CHUNK = 20_000  # packets per serialized TraceProtoBuilder chunk

_TE = pb.TrackEvent
_BEGIN, _END, _INSTANT, _COUNTER = _TE.TYPE_SLICE_BEGIN, _TE.TYPE_SLICE_END, _TE.TYPE_INSTANT, _TE.TYPE_COUNTER


def _finding_time(ix: TraceIndex, finding: dict) -> int:
    """A finding's time: its ``t``, else the start of its first operation that ran, else trace start."""
    if type(finding.get("t")) is int:  # (not a bool: True is no time)
        return finding["t"]
    for op_id in finding.get("ops", ()) or ():
        pos = ix.op_pos.get(str(op_id).split(".", 1)[0])  # "0:7.2" is command 2 of op 0:7
        if pos is not None and ix.ops[pos].get("start") is not None:
            return ix.ops[pos]["start"]
    return ix.t_min or 0


def _finding_name(finding: dict) -> str:
    rule = finding.get("rule") or finding.get("id") or "finding"
    return f"{rule}: {finding.get('message', '')}".rstrip(": ")


def failures(ix: TraceIndex) -> list[tuple[int, str, dict]]:
    """``(t, name, details)`` of semaphore failures, failed operations and failed commands."""
    out = []
    for sem, (_seq, t, status, message, cause) in ix.fails.items():
        out.append((t, f"{sem} failed", {"sem": sem, "status": status, "message": message, "cause": cause}))
    for op in ix.ops:
        if op.get("status", 0) not in (0, None) and op.get("end") is not None:
            out.append((op["end"], f"{op['op']} failed",
                        {"op": op["op"], "status": op["status"], "message": op.get("message", "")}))
    c = ix.cmds
    for i, status in enumerate(c.status):
        if status:
            out.append((c.end[i], f"{ix.ops[c.op[i]]['op']}#{c.index[i]} {c.name[i]} failed",
                        {"op": ix.ops[c.op[i]]["op"], "index": c.index[i], "status": status}))
    out.sort(key=lambda x: x[0])
    return out


def _counter_points(ix: TraceIndex, sem: str) -> list[tuple[int, int]]:
    points = [(ix.sem_created.get(sem) or 0, ix.semaphores.get(sem, 0))]
    points += [(t, v) for _seq, t, v, _c in ix.signals.get(sem, ())]
    return points


class FlowMaps(NamedTuple):
    """Flow ids by item key, one id per arrow (ids from 1: signal → wait, then host hand-offs from
    ``handoffs_from``): leaving an item (``out``, at its start), entering it at its start (``into``),
    or at its end (``into_end``). Perfetto reads events in time order and drops an arrow whose end
    comes before its start, so an arrow into an item that began before its source — a host wait
    blocked before the op that satisfies it started — ends where that item ends (it returned after
    the signal)."""
    out: dict
    into: dict
    into_end: dict
    handoffs_from: int
    lane_order: list  # lane indexes in the order the Perfetto writer writes them (:func:`_lane_order`)


def _flow_maps(ix: TraceIndex, lanes) -> FlowMaps:
    signals = signal_flows(ix)
    flows = signals + handoff_flows(ix)
    ends = {key for src, dst, _what, _value in flows for key in (src, dst)}
    items = {key: (item, k) for k, lane in enumerate(lanes) for item in lane.items
             if (key := (item.cat, item.ref)) in ends}  # (only the arrows' ends: a 1M-span trace has few)
    out_ids: dict = {}
    in_ids: dict = {}
    in_end_ids: dict = {}
    ties = []  # (source lane, destination lane) of arrows whose two ends have one time
    for n, (src, dst, _what, _value) in enumerate(flows, start=1):
        out_ids.setdefault(src, []).append(n)
        (a, la), (b, lb) = items.get(src, (None, None)), items.get(dst, (None, None))
        late = a is not None and b is not None and b.start <= a.start and b.end > b.start
        (in_end_ids if late else in_ids).setdefault(dst, []).append(n)
        if a is not None and b is not None and a.start == (b.end if late else b.start) and la != lb:
            ties.append((la, lb))
    return FlowMaps(out_ids, in_ids, in_end_ids, len(signals) + 1, _lane_order(len(lanes), ties))


def _lane_order(count: int, ties: list) -> list[int]:
    """Lane indexes in writing order: track order, except that a lane holding an arrow's start comes
    before the lane holding its end when both ends have one time (zero-length operations at one
    instant): Perfetto reads events in time order, ties in file order, and drops an arrow whose end
    it meets before its start. (Lanes in a cycle of such ties keep track order.)"""
    if all(a < b for a, b in ties):
        return list(range(count))
    after: dict = {}
    needs = [0] * count
    for a, b in set(ties):
        after.setdefault(a, []).append(b)
        needs[b] += 1
    ready = [k for k in range(count) if not needs[k]]
    heapq.heapify(ready)
    order = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for b in after.get(k, ()):
            needs[b] -= 1
            if not needs[b]:
                heapq.heappush(ready, b)
    done = set(order)
    return order + [k for k in range(count) if k not in done]


def _annotations(ix: TraceIndex, item: Item) -> dict:
    if item.cat == "op":
        op = ix.ops[item.ref]
        d = {"op": op["op"], "kind": op.get("kind"), "queue": op.get("queue"), "thread": op.get("thread"),
             "enqueue": op.get("t"), "ready": op.get("ready"), "status": op.get("status", 0),
             "wait": json.dumps(op.get("wait", [])), "signal": json.dumps(op.get("signal", []))}
        if op.get("message"):
            d["message"] = op["message"]
        return d
    if item.cat == "cmd":
        c = ix.cmds
        return {"op": ix.ops[c.op[item.ref]]["op"], "index": c.index[item.ref], "status": c.status[item.ref]}
    if item.cat == "host_wait":
        hw = ix.host_waits[item.ref]
        return {"thread": hw.get("thread"), "mode": hw.get("mode"), "wait": json.dumps(hw.get("wait", [])),
                "status": hw.get("status", 0)}
    if item.cat == "host_handoff":
        e = ix.host_handoffs[item.ref]
        return {k: e[k] for k in ("thread", "role", "sync", "via", "joined") if k in e}
    return {}


def _set_annotations(te, d: dict) -> None:
    for k, v in d.items():
        if v is None:
            continue
        a = te.debug_annotations.add()
        a.name = k
        if isinstance(v, bool):
            a.bool_value = v
        elif isinstance(v, int):
            a.int_value = v
        else:
            a.string_value = str(v)


class _Writer:
    """Packets go into a TraceProtoBuilder; every _CHUNK packets its bytes go to the file (serialized
    ``Trace`` messages concatenate into one ``Trace``)."""

    def __init__(self, f):
        self.f = f
        self.builder = TraceProtoBuilder()
        self.count = 0
        self.first = True

    def packet(self):
        if self.count and self.count % _CHUNK == 0:
            self.flush()  # the previous packets are complete: the caller fills one packet at a time
        p = self.builder.add_packet()
        p.trusted_packet_sequence_id = SEQ_ID
        if self.first:
            p.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
            self.first = False
        self.count += 1
        return p

    def flush(self):
        if len(self.builder.trace.packet):
            self.f.write(self.builder.serialize())
            self.builder = TraceProtoBuilder()


def _start(trace, with_commands: bool, progress, label: str):
    """(index, lanes, flow maps) of ``trace``, the phases shown on ``progress`` (``laying out
    tracks``, then ``label`` counting the lanes' spans as they are written)."""
    ix = TraceIndex.of(trace, progress)
    if progress is not None:
        progress.phase("laying out tracks")
    lanes = layout(ix, with_commands)
    flows = _flow_maps(ix, lanes)
    if progress is not None:
        progress.phase(label, total=sum(len(lane.items) for lane in lanes), unit="spans")
    return ix, lanes, flows


def export_perfetto(trace, path: str | os.PathLike, findings: list[dict] | None = None,
                    with_commands: bool = True, progress=None) -> dict:
    """Write ``trace`` (a Trace or TraceIndex) as a Perfetto trace; returns counts
    (``tracks``, ``slices``, ``counters``, ``flows``, ``instants``). ``progress``: a
    :class:`halsim.campaigns.executor.Progress` shown the phases (``writing perfetto``: spans)."""
    ix, lanes, flows = _start(trace, with_commands, progress, "writing perfetto")
    stats = {"tracks": 0, "slices": 0, "counters": 0, "flows": 0, "instants": 0}

    def write(f):
        w = _Writer(f)
        p = w.packet()
        p.track_descriptor.uuid = ROOT_UUID
        p.track_descriptor.name = f"{ix.header.get('device', 'device')} ({ix.header.get('clock', '?')} clock)"
        p.track_descriptor.child_ordering = pb.TrackDescriptor.EXPLICIT
        rank = 0
        next_uuid = ROOT_UUID + 1

        def declare(name, counter=False, at=None):
            nonlocal rank, next_uuid
            uuid = next_uuid
            next_uuid += 1
            p = w.packet()
            d = p.track_descriptor
            d.uuid, d.parent_uuid, d.name = uuid, ROOT_UUID, name
            d.sibling_order_rank = rank if at is None else at  # (lanes: shown in track order, whatever the file's)
            if counter:
                d.counter.SetInParent()
            rank += 1
            stats["tracks"] += 1
            return uuid

        for k in flows.lane_order:
            lane = lanes[k]
            uuid = declare(lane.name, at=k)
            _write_lane(w, ix, lane, uuid, flows, stats)
            if progress is not None:
                progress.update(len(lane.items))
        for sem in sorted(set(ix.semaphores) | set(ix.signals), key=_natural):
            uuid = declare(f"semaphore {sem}", counter=True)
            for t, v in _counter_points(ix, sem):
                p = w.packet()
                p.timestamp = t
                te = p.track_event
                te.type, te.track_uuid, te.counter_value = _COUNTER, uuid, v
                stats["counters"] += 1
        for name, events in (("failures", [(t, n, d) for t, n, d in failures(ix)]),
                             ("findings", [(_finding_time(ix, fd), _finding_name(fd), fd) for fd in findings or ()])):
            if not events:
                continue
            uuid = declare(name)
            for t, label, details in sorted(events, key=lambda e: e[0]):
                p = w.packet()
                p.timestamp = t
                te = p.track_event
                te.type, te.track_uuid, te.name = _INSTANT, uuid, label
                _set_annotations(te, {k: (v if isinstance(v, (int, str, bool)) else json.dumps(v))
                                      for k, v in details.items()})
                stats["instants"] += 1
        w.flush()

    atomic_write(path, write)
    stats["flows"] = sum(len(v) for v in flows.out.values())
    return stats


def _natural(s: str):
    return (len(s), s)


def _write_lane(w, ix, lane: Lane, uuid, flows: FlowMaps, stats) -> None:
    annotate = len(ix.ops) <= 200_000  # arguments on every op slice; skip for huge traces
    for t, what, item in _nest(lane):
        p = w.packet()
        p.timestamp = t
        te = p.track_event
        te.track_uuid = uuid
        key = (item.cat, item.ref)
        if what == "E":
            te.type = _END
            if key in flows.into_end:
                te.terminating_flow_ids.extend(flows.into_end[key])
            continue
        te.type = _BEGIN if what == "B" else _INSTANT
        te.name = item.name
        if key in flows.out:
            te.flow_ids.extend(flows.out[key])
        if key in flows.into:
            te.terminating_flow_ids.extend(flows.into[key])
        if item.cat != "cmd" and annotate:
            _set_annotations(te, _annotations(ix, item))
        if what == "B":
            stats["slices"] += 1
        else:
            stats["instants"] += 1


def _nest(lane):
    from .layout import nest_events
    return nest_events(lane.items)


# -- Chrome JSON ----------------------------------------------------------------------------------

def _us(ns: int) -> float:
    return ns / 1000.0


def export_chrome(trace, path: str | os.PathLike, findings: list[dict] | None = None,
                  with_commands: bool = True, progress=None) -> dict:
    """Write ``trace`` as Chrome JSON (``{"traceEvents": [...]}``; times in µs): ``X`` slices per
    lane (one ``tid`` each, named by ``M`` metadata), ``C`` semaphore counters, ``s``/``f`` flow
    pairs from signal to wait, ``i`` instants for failures and findings. Returns counts.
    ``progress``: as for :func:`export_perfetto` (``writing chrome``)."""
    ix, lanes, flows = _start(trace, with_commands, progress, "writing chrome")
    out_ids, handoffs_from = flows.out, flows.handoffs_from
    stats = {"tracks": 0, "slices": 0, "counters": 0, "flows": 0, "instants": 0}
    dumps = json.JSONEncoder(separators=(",", ":")).encode

    def write(f):
        first = [True]

        def emit(ev):
            f.write(("" if first[0] else ",\n") + dumps(ev))
            first[0] = False

        f.write('{"displayTimeUnit":"ns","traceEvents":[\n')
        emit({"ph": "M", "pid": 1, "name": "process_name", "args": {"name": ix.header.get("device", "device")}})
        flow_src: dict = {}  # flow id → (tid, ts) of its source, written when both ends are known
        flow_dst: dict = {}
        tid = 0
        for lane in lanes:
            tid += 1
            stats["tracks"] += 1
            emit({"ph": "M", "pid": 1, "tid": tid, "name": "thread_name", "args": {"name": lane.name}})
            emit({"ph": "M", "pid": 1, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}})
            for item in lane.items:
                key = (item.cat, item.ref)
                for n in out_ids.get(key, ()):
                    flow_src[n] = (tid, item.start)
                for n in flows.into.get(key, ()):
                    flow_dst[n] = (tid, item.start, item.end)
                for n in flows.into_end.get(key, ()):
                    flow_dst[n] = (tid, None, item.end)
                args = _annotations(ix, item) if item.cat != "cmd" else {}
                if item.cat in INSTANTS:
                    emit({"ph": "i", "s": "t", "pid": 1, "tid": tid, "ts": _us(item.start), "name": item.name})
                    stats["instants"] += 1
                else:
                    emit({"ph": "X", "pid": 1, "tid": tid, "ts": _us(item.start), "dur": _us(item.end - item.start),
                          "name": item.name, "cat": item.cat, "args": args})
                    stats["slices"] += 1
            if progress is not None:
                progress.update(len(lane.items))
        for n in sorted(flow_src):
            if n in flow_dst:
                (stid, sts), (dtid, dstart, dend) = flow_src[n], flow_dst[n]
                # 'f' binds to the slice enclosing its time: inside the destination, after the source
                # (1 ns after it when the destination began first: a tie can be read in either order)
                dts = dstart if dstart is not None else min(dend, sts + 1)
                name = "signal" if n < handoffs_from else "hand-off"
                emit({"ph": "s", "id": n, "pid": 1, "tid": stid, "ts": _us(sts), "name": name, "cat": "flow"})
                emit({"ph": "f", "bp": "e", "id": n, "pid": 1, "tid": dtid, "ts": _us(dts), "name": name,
                      "cat": "flow"})
                stats["flows"] += 1
        for sem in sorted(set(ix.semaphores) | set(ix.signals), key=_natural):
            for t, v in _counter_points(ix, sem):
                emit({"ph": "C", "pid": 1, "ts": _us(t), "name": f"semaphore {sem}", "args": {"value": v}})
                stats["counters"] += 1
        for t, label, details in failures(ix) + [(_finding_time(ix, fd), _finding_name(fd), fd) for fd in findings or ()]:
            emit({"ph": "i", "s": "g", "pid": 1, "tid": 0, "ts": _us(t), "name": label,
                  "args": {k: v for k, v in details.items() if isinstance(v, (int, str, bool, list))}})
            stats["instants"] += 1
        f.write("\n]}\n")

    atomic_write(path, write, mode="w")
    return stats
