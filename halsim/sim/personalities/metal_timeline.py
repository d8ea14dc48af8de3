"""When each command of a Metal command buffer runs: the planned encoders laid out in virtual time.

:func:`encoder_timeline` takes the plan of :func:`reference.utils.command_segments.plan_segments` and each
command's duration and returns when every command starts and ends, on which *lane* of the queue, and
each encoder's span:

* an **encoder switch** (blit ↔ compute, synchronized through the command buffer's encoder event) costs
  ``encoder_switch_ns`` before the next encoder starts;
* an **execution barrier** ends the encoders and signals and waits the encoder event: it is traced as the
  barrier command, lasting ``encoder_switch_ns``, on lane ``encoders``;
* a **memory barrier** (``memoryBarrierWithScope``) costs ``barrier_ns`` after everything before it in
  its compute encoder has finished (lane ``compute 0``);
* commands of one compute encoder between memory barriers run **concurrently** on up to
  ``max_concurrency`` lanes (``compute 0``, ``compute 1``, …): each starts on the lane that frees first
  (the lowest-numbered on a tie), in command order; the next run starts when all have ended;
* blit commands run one after another on lane ``blit``.

>>> from reference.utils.command_segments import Encoder, EncoderEvent, Step
>>> plan = (Encoder("blit", (Step(0, "fill", "fillBuffer"),)), EncoderEvent(1, "switch"),
...         Encoder("compute", (Step(1, "dispatch", "dispatchThreadgroups"),
...                             Step(2, "dispatch", "dispatchThreadgroups"))))
>>> end, placed, spans = encoder_timeline(plan, {0: 100, 1: 50, 2: 70}, start=1000,
...                                       switch_ns=10, barrier_ns=5, max_concurrency=4)
>>> end, [(p.index, p.start, p.end, p.lane) for p in placed]
(1180, [(0, 1000, 1100, 'blit'), (1, 1110, 1160, 'compute 0'), (2, 1110, 1180, 'compute 1')])
>>> [(s.kind, s.start, s.end, s.commands) for s in spans]
[('blit', 1000, 1100, (0,)), ('compute', 1110, 1180, (1, 2))]
"""

from __future__ import annotations

from typing import Iterable, Mapping, NamedTuple

from reference.utils.command_segments import BLIT, EncoderEvent

ENCODERS_LANE = "encoders"


class Placed(NamedTuple):
    """One command in time: ``index`` in the command list, ``start``/``end`` ns, ``lane`` name."""

    index: int
    start: int
    end: int
    lane: str


class EncoderSpan(NamedTuple):
    """One encoder in time: its position among the command buffer's encoders, kind, span, commands."""

    position: int
    kind: str
    start: int
    end: int
    commands: tuple[int, ...]


def encoder_timeline(plan: Iterable, durations: Mapping[int, int], start: int, switch_ns: int,
                     barrier_ns: int, max_concurrency: int) -> tuple[int, list[Placed], list[EncoderSpan]]:
    """``(end, placed commands in command-index order, encoder spans)`` of ``plan`` starting at ``start``.

    ``durations`` maps each fill/copy/update/dispatch command index to its duration; barriers take
    ``switch_ns`` (execution barrier) or ``barrier_ns`` (memory barrier)."""
    t = start
    placed: list[Placed] = []
    spans: list[EncoderSpan] = []
    for seg in plan:
        if isinstance(seg, EncoderEvent):
            if seg.reason == "barrier":
                placed.append(Placed(seg.index, t, t + switch_ns, ENCODERS_LANE))
            t += switch_ns
            continue
        first = t
        for group in seg.groups():
            if len(group) == 1 and group[0].is_memory_barrier:
                placed.append(Placed(group[0].index, t, t + barrier_ns, "compute 0"))
                t += barrier_ns
            elif seg.kind == BLIT or len(group) == 1 or max_concurrency == 1:
                lane = "blit" if seg.kind == BLIT else "compute 0"
                for step in group:
                    end = t + durations[step.index]
                    placed.append(Placed(step.index, t, end, lane))
                    t = end
            else:
                t = _concurrent(group, durations, t, max_concurrency, placed)
        spans.append(EncoderSpan(len(spans), seg.kind, first, t, tuple(s.index for s in seg.steps)))
    placed.sort(key=lambda p: p.index)
    return t, placed, spans


def _concurrent(group, durations, t: int, lanes: int, placed: list) -> int:
    """List-schedule ``group`` on ``lanes`` lanes from ``t``; return when the last command ends."""
    free = [t] * min(lanes, len(group))
    for step in group:
        lane = min(range(len(free)), key=lambda i: (free[i], i))
        begin = free[lane]
        free[lane] = begin + durations[step.index]
        placed.append(Placed(step.index, begin, free[lane], f"compute {lane}"))
    return max(free)
