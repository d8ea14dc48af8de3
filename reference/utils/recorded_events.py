"""Recorded device-signal events of one semaphore, by value — the lookup of IREE's CUDA-style queues.

A wait for ``sem >= value`` may reuse a native event already recorded after the work that signals
``sem`` to some value ``>= value`` (HAL_SEMANTICS §B.3). A long pipeline keeps thousands of them
issued ahead of the GPU, so the lookup is a bisection, not a scan. Shared by the simulated stream
devices (``halsim.sim.streams``) and the real engine (``real_backends.common.engine``).

>>> r = RecordedEvents()
>>> class E:
...     def __init__(self, value): self.value = value
>>> a, b = E(3), E(5)
>>> r.add(b); r.add(a)
>>> r.find(4) is b, r.find(1) is a, r.find(6)
(True, True, None)
>>> r.remove(a), r.remove(a), r.values
(True, False, [5])
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right


class RecordedEvents:
    """Events (anything with a ``value``) in value order; equal values in insertion order."""

    __slots__ = ("values", "events")

    def __init__(self):
        self.values: list[int] = []
        self.events: list = []

    def add(self, event) -> None:
        values, value = self.values, event.value
        if not values or values[-1] <= value:  # the usual case: values are recorded in order
            values.append(value)
            self.events.append(event)
            return
        i = bisect_right(values, value)
        values.insert(i, value)
        self.events.insert(i, event)

    def find(self, value: int):
        """The event of the smallest recorded value >= ``value`` (the first recorded of equals)."""
        i = bisect_left(self.values, value)
        return self.events[i] if i < len(self.events) else None

    def remove(self, event) -> bool:
        """Remove ``event`` (by identity); False if it is not here."""
        events = self.events
        if events and events[0] is event:  # the usual case: the oldest completes first
            del self.values[0], events[0]
            return True
        i = bisect_left(self.values, event.value)
        while i < len(self.events) and self.events[i] is not event:
            i += 1
        if i == len(self.events):
            return False
        del self.values[i], self.events[i]
        return True


def producer_ids(events) -> tuple:
    """The ops whose recorded device-signal events a queue action waits on — ``events``: its wait
    events, each with a ``producer`` action (or None: a user event) — once each, in wait order: the
    ``issue`` trace event's ``after`` (its stream waits on them even if their host-side signal never
    comes, refused after a failure).

    >>> class A:
    ...     def __init__(self, op_id): self.op = type("Op", (), {"id": op_id})
    >>> class E:
    ...     def __init__(self, producer): self.producer = producer
    >>> p, q = A("0:1"), A("0:4")
    >>> producer_ids([E(p), E(None), E(q), E(p)]), producer_ids([])
    (('0:1', '0:4'), ())
    """
    if len(events) == 1:  # the usual case
        producer = events[0].producer
        return (producer.op.id,) if producer is not None else ()
    return tuple(dict.fromkeys([e.producer.op.id for e in events if e.producer is not None]))
