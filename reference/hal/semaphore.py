"""Timeline semaphores (HAL_SEMANTICS §A.2, profile [H]).

A semaphore holds a monotonically increasing value or a sticky failure. Everything that reacts to it
— host waits, queue operations waiting on it — registers a *timepoint*: a callback run once, when the
value reaches the timepoint's value or the semaphore fails (IREE's ``iree_async_semaphore_t`` design).
How a host thread *blocks* is the device's business (real threads on the reference drivers, virtual
time on the simulator), so :meth:`Semaphore.wait` goes through ``device.wait_semaphores``.

>>> from reference import hal
>>> with hal.create_device("local-sync") as dev:
...     s = dev.create_semaphore(2)
...     s.signal(40)
...     s.query()
40
"""

from __future__ import annotations

import heapq
import itertools
import threading
from typing import Callable

from .constants import MAX_SEMAPHORE_VALUE, SEMAPHORE_FAILURE_VALUE
from .host_call_context import current as _current_host_call
from .status import HalError, StatusCode

Callback = Callable[[HalError | None], None]


def check_payload(value, what: str = "value") -> int:
    """Validate a semaphore payload given by the caller (int in [0, MAX_SEMAPHORE_VALUE])."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise HalError(StatusCode.INVALID_ARGUMENT, f"{what} must be an int, got {type(value).__name__}")
    if value < 0 or value > MAX_SEMAPHORE_VALUE:
        raise HalError(
            StatusCode.INVALID_ARGUMENT,
            f"{what} {value} outside [0, MAX_SEMAPHORE_VALUE={MAX_SEMAPHORE_VALUE}]",
        )
    return value


class Timepoint:
    """A registered interest in ``semaphore >= value``; :meth:`cancel` withdraws it."""

    __slots__ = ("value", "callback", "dead")

    def __init__(self, value: int, callback: Callback, dead: list):
        self.value = value
        self.callback = callback  # None once cancelled
        # the semaphore's count of cancelled entries (a one-item list: a reference to the semaphore
        # itself would make a cycle through its heap, and a dropped semaphore's host_release would
        # wait for the cyclic collector)
        self.dead = dead

    def cancel(self) -> None:
        """Withdraw it. The entry leaves the semaphore's heap when popped, or when the next
        ``add_timepoint`` finds most of the heap cancelled (a host polling with short timeouts must not
        grow it without bound; IREE unlinks a cancelled timepoint). It takes no lock (it may be called
        from inside another semaphore's timepoint callback); the count only decides when to compact."""
        if self.callback is not None:
            self.callback = None  # drop what the callback holds (a waiter's condition, an op) now
            if self.dead is not None:
                self.dead[0] += 1


class Semaphore:
    """A timeline semaphore owned by a device. Create with ``device.create_semaphore(initial_value)``."""

    __slots__ = ("device", "id", "_lock", "_value", "_failure", "_timepoints", "_seq", "_initial", "_queried",
                 "_dead", "__weakref__")

    def __init__(self, device, sem_id: str, initial_value: int):
        self.device = device
        self.id = sem_id
        self._lock = threading.Lock()
        self._value = initial_value
        self._failure: HalError | None = None
        self._timepoints: list = []  # heap of (value, seq, Timepoint)
        self._dead = [0]  # about how many of them are cancelled (Timepoint.cancel, compacted in add_timepoint)
        self._seq = itertools.count()
        self._initial = initial_value
        self._queried: dict = {}  # who (host thread index or host call id) -> the value its last traced query saw

    def __repr__(self) -> str:
        state = f"failed {self._failure.code.name}" if self._failure else f"value {self._value}"
        return f"<Semaphore {self.id} {state}>"

    # -- host API ----------------------------------------------------------------------------

    @property
    def payload(self) -> int:
        """The raw timeline value, never raising: ``SEMAPHORE_FAILURE_VALUE`` once failed."""
        return SEMAPHORE_FAILURE_VALUE if self._failure is not None else self._value

    @property
    def last_value(self) -> int:
        """The last value reached (the initial value if never signaled), kept after a failure."""
        return self._value

    @property
    def failure(self) -> HalError | None:
        """The sticky failure (first one wins), or None."""
        return self._failure

    def query(self) -> int:
        """The current value; raises the failure (same code and message) if the semaphore failed.

        A query that sees a value its thread (or host call) has not seen in a traced query before is
        traced (``host_query``): the checks order what the caller does next after the signal that
        brought the semaphore there, as after a wait. A polling loop is traced once per new value."""
        failure = self._failure
        if failure is not None:
            raise failure.clone()
        value = self._value
        if value != self._initial:
            who = _current_host_call()
            if who is None:
                who = self.device.known_host_thread()  # (a thread that never called the device: not traced)
            if who is not None and self._queried.get(who) != value:
                queried = self._queried
                if type(who) is str and len(queried) >= 64:
                    # Host calls come and go: forget those seen so far (a running one that queries
                    # again is traced once more, harmlessly) so the map does not grow per host call.
                    for key in list(queried):  # (list(): one C-level copy, safe against other threads)
                        if type(key) is str:
                            queried.pop(key, None)
                queried[who] = value
                rec = self.device.recorder
                rec.host_query(self, value, {"op": who} if type(who) is str else {"thread": who})
        return value

    def signal(self, value: int) -> None:
        """Host signal: set the value to ``value`` (strictly increasing) and wake waiters. A signal
        refused for a value not above the current one is traced (``signal_rejected``) before raising:
        it raced with, or came after, the signal that got there first."""
        check_payload(value)
        try:
            self.device._host_signal(self, value)
        except HalError as e:
            if e.code == StatusCode.INVALID_ARGUMENT and self._failure is None and value <= self._value:
                self._trace_rejected(value, e)
            raise

    def _trace_rejected(self, value: int, error: HalError) -> None:
        try:
            who = _current_host_call()
            who = {"op": who} if who is not None else {"thread": self.device.known_host_thread()}
            if who.get("thread", 0) is not None:
                self.device.recorder.signal_rejected(self, value, error, who)
        except Exception:  # noqa: BLE001 - tracing never hides the program's own error
            pass

    def fail(self, code: StatusCode | int, message: str = "") -> None:
        """Fail the semaphore with a non-OK status; the first failure wins, later ones are ignored."""
        try:
            code = StatusCode(code)
        except ValueError:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"code {code!r} is not a StatusCode") from None
        if code in (StatusCode.OK, StatusCode.DEFERRED):
            raise HalError(StatusCode.INVALID_ARGUMENT, f"code must be a failure status, got {code.name}")
        if not isinstance(message, str):
            raise HalError(StatusCode.INVALID_ARGUMENT, "message must be a str")
        self.device._host_fail(self, HalError(code, message))

    def wait(self, value: int, timeout: float | None = None) -> None:
        """Block until the value reaches ``value``; raise the failure, or DEADLINE_EXCEEDED on timeout."""
        from .constants import WaitMode

        check_payload(value)  # (named as the caller named it, not as the device's timepoints[0])
        self.device.wait_semaphores(WaitMode.ALL, [(self, value)], timeout)

    # -- engine API (devices, queues, waits) ----------------------------------------------------

    def advance(self, value: int, on_advanced: Callable[[], None] | None = None) -> None:
        """Set the value and run the timepoints it satisfies. Raises like :meth:`signal`.
        ``on_advanced()`` runs once the value is set, before any timepoint: a trace records the signal
        there, so that nothing it wakes (on this or another thread) is recorded before it."""
        with self._lock:
            if self._failure is not None:
                raise self._failure.clone()
            if value <= self._value:
                raise HalError(
                    StatusCode.INVALID_ARGUMENT,
                    f"semaphore {self.id} already signaled past {value} (current value {self._value}); "
                    "values must strictly increase",
                )
            self._value = value
            if on_advanced is not None:
                on_advanced()
            fired = []
            heap = self._timepoints
            while heap and heap[0][0] <= value:
                tp = heapq.heappop(heap)[2]
                tp.dead = None  # out of the heap: a later cancel() counts nothing there
                callback = tp.callback  # (taken under the lock; a cancel racing with us clears it)
                if callback is not None:
                    fired.append(callback)
            if not heap:
                self._dead[0] = 0
        for callback in fired:
            callback(None)

    def fail_with(self, error: HalError, on_failed: Callable[[], None] | None = None) -> bool:
        """Fail with ``error`` unless already failed; run every pending timepoint. True if it took.
        ``on_failed()`` runs once it took, before any timepoint (as ``advance``'s ``on_advanced``)."""
        with self._lock:
            if self._failure is not None:
                return False
            self._failure = error
            if on_failed is not None:
                on_failed()
            fired = [cb for cb in (tp.callback for _, _, tp in self._timepoints) if cb is not None]  # (read once)
            self._timepoints = []
            self._dead[0] = 0
        for callback in fired:
            callback(error)
        return True

    def add_timepoint(self, value: int, callback: Callback) -> Timepoint | None:
        """Call ``callback(None)`` once the value reaches ``value``, or ``callback(failure)`` on failure.

        If that already holds, the callback runs now, on this thread, and None is returned.
        """
        with self._lock:
            failure = self._failure
            if failure is None and self._value < value:
                heap = self._timepoints
                dead = self._dead
                if dead[0] > 32 and 2 * dead[0] > len(heap):
                    heap[:] = [entry for entry in heap if entry[2].callback is not None]
                    heapq.heapify(heap)
                    dead[0] = 0
                tp = Timepoint(value, callback, dead)
                heapq.heappush(heap, (value, next(self._seq), tp))
                return tp
        callback(failure)
        return None

    def poll(self, value: int) -> HalError | None | bool:
        """Non-blocking state: the failure if failed, True if reached, False otherwise."""
        failure = self._failure
        if failure is not None:
            return failure
        return self._value >= value
