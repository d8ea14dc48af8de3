"""Multi-semaphore waits: argument checking shared by every device, and the real-thread blocking wait
used by the reference drivers (HAL_SEMANTICS §A.2 S9, §A.3 L5/L6).

Rules, in order: an empty list is satisfied at once; a failed semaphore makes the wait raise its
failure (failure dominates in both ALL and ANY modes, profile [H]); a satisfied list returns; an
immediate timeout (0) raises DEADLINE_EXCEEDED; otherwise block until one of those holds or the
deadline passes. Relative timeouts become absolute deadlines once, at the start.

>>> import math
>>> normalize_timeout(None), normalize_timeout(0), normalize_timeout(math.inf), normalize_timeout(10**400)
(None, 0.0, None, 4294967296.0)
"""

from __future__ import annotations

import math
import threading
import time
from typing import Sequence

from .constants import MAX_SEMAPHORE_VALUE, WaitMode
from .semaphore import Semaphore, check_payload
from .status import HalError, StatusCode

# Longer finite timeouts are waited as this long (136 years: no difference anyone can observe). Python's
# waits refuse more than threading.TIMEOUT_MAX (~292 years) — time.sleep even a little less, as it
# adds the clock's current value — with an OverflowError; and a simulator's nanoseconds stay int64.
MAX_TIMEOUT_S = float(2**32)


def normalize_timeout(timeout, what: str = "timeout", finite: bool = False) -> float | None:
    """Seconds as float; None for infinite; raise INVALID_ARGUMENT naming the argument (``what``)
    otherwise. ``finite``: None and infinity are refused too (``Device.sleep``'s ``seconds``)."""
    if timeout is None and not finite:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        kind = "a finite number of seconds" if finite else "seconds (float) or None"
        raise HalError(StatusCode.INVALID_ARGUMENT, f"{what} must be {kind}, got {timeout!r}")
    if timeout != timeout or timeout < 0:  # (NaN; not math.isnan, which overflows on a huge int)
        raise HalError(StatusCode.INVALID_ARGUMENT, f"{what} must be >= 0 seconds, got {timeout!r}")
    if timeout == math.inf:
        if finite:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"{what} must be a finite number of seconds, got inf")
        return None
    return float(min(timeout, MAX_TIMEOUT_S))  # (min first: float() of a huge int overflows)


def check_wait_mode(mode) -> WaitMode:
    try:
        return WaitMode(mode)
    except ValueError:
        raise HalError(StatusCode.INVALID_ARGUMENT, f"mode must be WaitMode.ALL or WaitMode.ANY, got {mode!r}") from None


def check_timepoints(device, timepoints, what: str) -> tuple[tuple[Semaphore, int], ...]:
    """Validate a wait/signal list: a sequence of (Semaphore of this device, int value)."""
    if timepoints is None:
        return ()
    # The common case first (every queue call checks two lists): a list or tuple of (Semaphore of
    # this device, plain int in range) tuples is returned as a tuple of those same pairs.
    if type(timepoints) is list or type(timepoints) is tuple:
        for item in timepoints:
            if type(item) is not tuple or len(item) != 2:
                break
            sem, value = item
            if type(sem) is not Semaphore or sem.device is not device or type(value) is not int or \
                    not 0 <= value <= MAX_SEMAPHORE_VALUE:
                break
        else:
            return tuple(timepoints)
    try:
        items = tuple(timepoints)
    except TypeError:
        raise HalError(StatusCode.INVALID_ARGUMENT, f"{what} must be a sequence of (Semaphore, int)") from None
    out = []
    for i, item in enumerate(items):
        try:
            sem, value = item
        except (TypeError, ValueError):
            raise HalError(StatusCode.INVALID_ARGUMENT, f"{what}[{i}] must be a (Semaphore, int) pair, got {item!r}") from None
        if not isinstance(sem, Semaphore):
            raise HalError(StatusCode.INVALID_ARGUMENT, f"{what}[{i}][0] must be a Semaphore, got {type(sem).__name__}")
        if sem.device is not device:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"{what}[{i}]: semaphore {sem.id} belongs to another device")
        out.append((sem, check_payload(value, f"{what}[{i}] value")))
    return tuple(out)


def evaluate(mode: WaitMode, timepoints) -> HalError | bool:
    """One look at the list: the first failure (list order), else whether the wait is satisfied."""
    reached = 0
    for sem, value in timepoints:
        state = sem.poll(value)
        if isinstance(state, HalError):
            return state
        if state:
            reached += 1
    if not timepoints:
        return True
    return reached > 0 if mode == WaitMode.ANY else reached == len(timepoints)


def deadline_exceeded(mode: WaitMode, timepoints) -> HalError:
    pending = ", ".join(f"{s.id}>={v} (now {s.payload})" for s, v in timepoints if s.poll(v) is False)
    return HalError(StatusCode.DEADLINE_EXCEEDED, f"wait-{mode.name.lower()} timed out on {pending}")


def blocking_wait(mode: WaitMode, timepoints: Sequence[tuple[Semaphore, int]], timeout: float | None) -> None:
    """Block the calling (real) thread until the wait resolves; raise on failure or timeout."""
    state = evaluate(mode, timepoints)
    if isinstance(state, HalError):
        raise state.clone()
    if state:
        return
    if timeout == 0:
        raise deadline_exceeded(mode, timepoints)
    deadline = None if timeout is None else time.monotonic() + timeout
    cond = threading.Condition()
    changed = [False]

    def wake(_error):
        with cond:
            changed[0] = True
            cond.notify()

    registered = [s.add_timepoint(v, wake) for s, v in timepoints]
    try:
        with cond:
            while True:
                state = evaluate(mode, timepoints)
                if isinstance(state, HalError):
                    raise state.clone()
                if state:
                    return
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise deadline_exceeded(mode, timepoints)
                changed[0] = False
                cond.wait(remaining)
    finally:
        for tp in registered:
            if tp is not None:
                tp.cancel()
