"""Events: split barriers inside one command buffer (HAL_SEMANTICS §A.5 CB10).

On the reference CPU devices commands run in order, so signal/reset/wait of events are recorded and
traced but have no further effect (as in IREE's local-sync and local-task drivers).
"""

from __future__ import annotations


class Event:
    __slots__ = ("device", "id", "__weakref__")

    def __init__(self, device, event_id: str):
        self.device = device
        self.id = event_id

    def __repr__(self) -> str:
        return f"<Event {self.id}>"
