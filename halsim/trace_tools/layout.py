"""Lay a trace's spans out on timeline tracks: one track per trace track and lane.

Operations on one hardware queue may overlap (``max_concurrency`` > 1), and a timeline viewer
nests slices on a track by time, so overlapping spans that do not nest are moved to extra *lanes*
of the same track. Every lane is a properly nested sequence: a span either starts after the
previous sibling ended or lies inside its parent. Commands prefer their operation's lane so they
nest under it. The Perfetto and Chrome exporters and the plot all use this layout.

Operations and host waits are always outermost (an operation drawn inside another would read as
its child). Item kinds: ``op`` (ref: position in ``TraceIndex.ops``), ``cmd`` (ref: position in
``TraceIndex.cmds``; encoder spans included), ``host_wait`` (ref: position in ``host_waits``) and
``host_signal`` (an instant; ref: ``(sem, position in signals[sem])``) and ``host_handoff`` (an
instant: a ``Queue.put``/``get``, ``Event.set``/``wait``, ``Thread.join``...; ref: position in
``host_handoffs``).

>>> items = [Item(0, 10, "a", "op", 0), Item(5, 15, "b", "op", 1), Item(2, 4, "c", "cmd", 0)]
>>> [[i.name for i in lane] for lane in assign_lanes(items)]
[['a', 'c'], ['b']]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, NamedTuple

from .model import TraceIndex


class Item(NamedTuple):
    start: int
    end: int
    name: str
    cat: str  # op, cmd, host_wait, host_signal, host_handoff
    ref: object


_PRIORITY = {"op": 0, "host_wait": 0, "cmd": 1, "host_signal": 2, "host_handoff": 2}
_TOP_LEVEL = frozenset({"op", "host_wait"})
INSTANTS = frozenset({"host_signal", "host_handoff"})


def _stays_open(item: Item, outermost: Item) -> bool:
    """Whether a lane's outermost open span, ending at ``item``'s start, stays open for ``item``: a
    zero-length command at its operation's end instant still belongs inside it (spans are half-open,
    but such a command, e.g. a final barrier, ran at the last instant of its operation)."""
    return (outermost.cat == "op" and outermost.end == item.start and item.start == item.end
            and item.cat == "cmd")


_LATEST = 1 << 64  # later than any time: sorts a closing command first


def _sort_key(items: list[Item], owner):
    """Begin order: by start, longer first, then ``_PRIORITY``; but a zero-length command at its
    operation's end instant (``owner(item)``: its op's ref) first of all that start then, before
    the next operation's span opens there and takes its place."""
    if owner is None:
        return lambda i: (i.start, -i.end, _PRIORITY.get(i.cat, 1))
    op_span = {i.ref: (i.start, i.end) for i in items if i.cat == "op"}

    def key(i):
        if i.start == i.end and i.cat == "cmd":
            span = op_span.get(owner(i))
            if span is not None and span[0] < i.start == span[1]:
                return (i.start, -_LATEST, 1)
        return (i.start, -i.end, _PRIORITY.get(i.cat, 1))
    return key


def assign_lanes(items: list[Item], prefer=None, owner=None) -> list[list[Item]]:
    """Split ``items`` into lanes, each properly nested, in begin order. ``prefer(item, placed)``
    may name a lane to try first (``placed`` maps op refs to their lanes); ``owner(item)``: the op
    ref of a command (so a zero-length command at its operation's end nests under it)."""
    items = sorted(items, key=_sort_key(items, owner))
    lanes: list[list[Item]] = []
    stacks: list[list[Item]] = []  # per lane: its open spans
    placed: dict = {}
    for item in items:
        end = item.end if item.end >= item.start else item.start
        top_level = item.cat in _TOP_LEVEL  # an op never nests inside another op: its own lane
        order = range(len(lanes))
        if prefer is not None:
            first = prefer(item, placed)
            if first is not None and first < len(lanes):
                order = [first, *(k for k in range(len(lanes)) if k != first)]
        for k in order:
            stack = stacks[k]
            while stack and stack[-1].end <= item.start and not (len(stack) == 1 and _stays_open(item, stack[0])):
                stack.pop()
            if not stack or (stack[-1].end >= end and not top_level):
                break
        else:
            k = len(lanes)
            lanes.append([])
            stacks.append([])
        placed_item = item if end == item.end else item._replace(end=end)
        stacks[k].append(placed_item)
        lanes[k].append(placed_item)
        if item.cat == "op":
            placed[item.ref] = k
    return lanes


def nest_events(lane: list[Item]) -> Iterator[tuple[int, str, Item]]:
    """``(time, "B"|"E"|"I", item)`` for a lane from :func:`assign_lanes`, in time order and
    balanced: instants (zero-length host signals) are ``I``."""
    stack: list[Item] = []
    for item in lane:
        while stack and stack[-1].end <= item.start and not (len(stack) == 1 and _stays_open(item, stack[0])):
            top = stack.pop()
            yield top.end, "E", top
        if item.cat in INSTANTS:
            yield item.start, "I", item
            continue
        stack.append(item)
        yield item.start, "B", item
    while stack:
        top = stack.pop()
        yield top.end, "E", top


@dataclass
class Lane:
    track: int  # the trace's track id
    lane: int  # 0 for the track itself
    kind: str  # the trace track's kind: host, queue, worker, stream, encoder
    name: str  # "queue 1", "queue 1 (lane 2)"
    items: list[Item]


def op_name(op: dict) -> str:
    return f"{op['op']} {op.get('kind', '?')}"


def track_items(ix: TraceIndex, with_commands: bool = True) -> dict[int, list[Item]]:
    """The spans of each trace track (host threads' tracks get their host waits and host signals)."""
    per: dict[int, list[Item]] = {}
    for pos, op in enumerate(ix.ops):
        if ix.ran(op):
            per.setdefault(op.get("track", -1), []).append(Item(op["start"], op["end"], op_name(op), "op", pos))
    if with_commands:
        c = ix.cmds
        for i, (track, start, end, name) in enumerate(zip(c.track, c.start, c.end, c.name)):
            lst = per.get(track)
            if lst is None:
                lst = per[track] = []
            lst.append(Item(start, end, name, "cmd", i))
    for pos, hw in enumerate(ix.host_waits):
        track = ix.host_track(hw.get("thread", 0))
        label = " ".join(f"{s}>={v}" for s, v in hw.get("wait", ()))
        per.setdefault(track, []).append(Item(hw.get("start", hw["t"]), hw["t"], f"host wait {label}", "host_wait", pos))
    for sem, sigs in ix.signals.items():
        for k, (_seq, t, value, cause) in enumerate(sigs):
            if cause.startswith("host:"):
                try:
                    track = ix.host_track(int(cause.split(":", 1)[1]))
                except ValueError:
                    continue
                per.setdefault(track, []).append(Item(t, t, f"signal {sem}={value}", "host_signal", (sem, k)))
    for pos, e in enumerate(ix.host_handoffs):
        name = f"join host thread {e['joined']}" if e["ev"] == "host_join" else f"{e['via']} #{e['sync']}"
        if e.get("thread") is None and e.get("op") is not None:
            name += f" (in {e['op']})"
        per.setdefault(ix.host_track(e.get("thread")), []).append(Item(e["t"], e["t"], name, "host_handoff", pos))
    return per


def layout(ix: TraceIndex, with_commands: bool = True) -> list[Lane]:
    """All lanes, ordered by trace track id then lane (tracks with no spans are left out)."""
    per = track_items(ix, with_commands)
    c_op = ix.cmds.op

    def prefer(item, placed):
        return placed.get(c_op[item.ref]) if item.cat == "cmd" else None

    def owner(item):
        return c_op[item.ref]

    out = []
    for track in sorted(per):
        kind, name = ix.tracks.get(track, ("unknown", f"track {track}"))
        for k, items in enumerate(assign_lanes(per[track], prefer, owner)):
            out.append(Lane(track, k, kind, name if k == 0 else f"{name} (lane {k + 1})", items))
    return out
