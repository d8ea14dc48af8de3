"""Signal → wait arrows between laid-out timeline items (for the Perfetto and Chrome exports and
the plot), and hand-off arrows between host threads (:func:`handoff_flows`).

An arrow goes from the item that satisfied a wait — the signalling operation's span, or the host
signal's instant — to the waiting operation's span or host wait's span. Both ends must be on the
timeline (an operation that never ran has no span, so its waits get no arrow).

>>> from reference import hal
>>> with hal.create_device("sim", queues=1) as dev:
...     buf = dev.allocator.allocate_buffer(64)
...     s, done = dev.create_semaphore(), dev.create_semaphore()
...     dev.queue_fill([(s, 1)], [(done, 1)], buf, 0, 64, 7, 1)
...     s.signal(1)
...     done.wait(1)
>>> ix = TraceIndex.of(dev.trace)
>>> signal_flows(ix)
[(('host_signal', ('s0', 0)), ('op', 0), 's0', 1), (('op', 0), ('host_wait', 0), 's1', 1)]
"""

from __future__ import annotations

from .deps import Satisfier, host_wait_sources
from .model import TraceIndex


def signal_flows(ix: TraceIndex) -> list[tuple[tuple, tuple, str, int]]:
    """``(source key, destination key, sem, value)``; keys are ``(cat, ref)`` as in ``layout.Item``."""
    sat = Satisfier(ix)
    out = []

    def source(s, sem):
        _seq, _t, cause, kind, i = s
        if cause.startswith("host:"):
            return ("host_signal", (sem, i)) if kind == "semaphore" else None
        pos = ix.op_pos.get(cause)
        return ("op", pos) if pos is not None and ix.ran(ix.ops[pos]) else None

    for pos, op in enumerate(ix.ops):
        if not ix.ran(op):
            continue
        for sem, value in op.get("wait", ()):
            s = sat(sem, value)
            src = source(s, sem) if s is not None else None
            if src is not None:
                out.append((src, ("op", pos), sem, value))
    for pos, hw in enumerate(ix.host_waits):
        for sem, value, s in host_wait_sources(ix, sat, hw):  # (ANY: only the signal that woke it)
            src = source(s, sem)
            if src is not None:
                out.append((src, ("host_wait", pos), sem, value))
    return out


def handoff_flows(ix: TraceIndex) -> list[tuple[tuple, tuple, str, int]]:
    """``(release key, acquire key, via, sync id)``: from each ``host_sync`` release (a
    ``Queue.put``, ``Event.set``...) to the acquires that received it (the ``get``, ``wait``...)."""
    released = {}
    out = []
    for pos, e in enumerate(ix.host_handoffs):
        if e["ev"] != "host_sync":
            continue
        if e["role"] == "release":
            released[e["sync"]] = pos
        elif e["sync"] in released:
            out.append((("host_handoff", released[e["sync"]]), ("host_handoff", pos), e["via"], e["sync"]))
    return out
