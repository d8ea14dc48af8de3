"""Status codes and the one exception type of the HAL contract.

IREE's status codes (``runtime/src/iree/base/status.h``) with their numeric values. Every failure the
contract defines is a :class:`HalError` carrying one of these codes and a message naming the argument.

>>> from reference import hal
>>> try:
...     raise hal.HalError(hal.StatusCode.OUT_OF_RANGE, "offset 9 past buffer end 8")
... except hal.HalError as e:
...     (e.code.name, e.message)
('OUT_OF_RANGE', 'offset 9 past buffer end 8')
"""

from __future__ import annotations

import enum


class StatusCode(enum.IntEnum):
    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16
    DEFERRED = 17
    INCOMPATIBLE = 18


class HalError(Exception):
    """A non-OK status: ``.code`` (:class:`StatusCode`) and ``.message``."""

    def __init__(self, code: StatusCode | int, message: str = ""):
        code = StatusCode(code)
        if code == StatusCode.OK:
            raise ValueError("HalError needs a non-OK status code")
        self.code = code
        self.message = message
        super().__init__(f"{code.name}: {message}" if message else code.name)

    def clone(self) -> "HalError":
        """A fresh exception with the same code and message (raising one object twice chains tracebacks)."""
        return HalError(self.code, self.message)

    def __reduce__(self):
        return (HalError, (self.code, self.message))


def check(condition: bool, code: StatusCode, message: str) -> None:
    """Raise ``HalError(code, message)`` unless ``condition`` holds (validation shorthand)."""
    if not condition:
        raise HalError(code, message)
