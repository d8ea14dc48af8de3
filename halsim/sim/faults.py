"""Fault injection (options ``faults`` and ``fault_rate``): make chosen or random commands fail.

``faults`` is a list of ``{"op": "T:N", "command": i, "status": "DATA_LOSS", "message": "…"}``
(``command`` omitted: the operation itself — its first command, or its body when it has none;
``status`` a StatusCode name or value other than OK; ``message`` optional). ``fault_rate`` (0–1) fails
each command, and each operation without commands, with that probability, drawn from the device's
``seed``-ed generator in execution order, so a run is reproducible. A fault fails exactly as a device
error would on the modelled driver: the command is traced with the status, the operation's signals
fail with it (on ``sim:cuda``/``sim:opencl`` the queue status becomes sticky), and a ``fault`` trace
event names it.

>>> from halsim.sim.driver import driver
>>> dev = driver.create_device("generic", faults=[{"op": "0:0", "command": 0, "status": "DATA_LOSS"}])
>>> buf, done = dev.allocator.allocate_buffer(16), dev.create_semaphore()
>>> dev.queue_fill([], [(done, 1)], buf, 0, 16, 1, 1)
>>> try:
...     done.wait(1)
... except Exception as e:
...     print(e)
DATA_LOSS: injected fault in command 0:0.0
>>> dev.close()
"""

from __future__ import annotations

from reference.hal import HalError, StatusCode


def _bad(message: str) -> HalError:
    return HalError(StatusCode.INVALID_ARGUMENT, message)


def _status(value, where: str) -> StatusCode:
    try:
        code = StatusCode[value] if isinstance(value, str) else StatusCode(value)
    except (KeyError, ValueError):
        raise _bad(f"option {where}={value!r} is not a status code name or value") from None
    if isinstance(value, bool) or code == StatusCode.OK:
        raise _bad(f"option {where}={value!r} must be an error status (not OK)")
    return code


def parse_faults(faults, rate) -> "Faults | None":
    """Validate the options (INVALID_ARGUMENT naming the entry and field); None when there are none."""
    if faults is None:
        faults = []
    if isinstance(faults, str):  # a URI query string carries JSON
        import json
        try:
            faults = json.loads(faults)
        except ValueError as e:
            raise _bad(f"option faults: not JSON ({e})") from None
    if not isinstance(faults, (list, tuple)):
        raise _bad(f"option faults={faults!r} must be a list of {{op, command?, status, message?}}")
    table: dict[tuple[str, int | None], HalError] = {}
    for i, entry in enumerate(faults):
        where = f"faults[{i}]"
        if not isinstance(entry, dict):
            raise _bad(f"option {where} must be an object, got {type(entry).__name__}")
        unknown = set(entry) - {"op", "command", "status", "message"}
        if unknown:
            raise _bad(f"option {where}: unknown field {sorted(unknown)[0]!r}")
        op = entry.get("op")
        if not isinstance(op, str) or op.count(":") != 1 or not all(p.isdigit() for p in op.split(":")):
            raise _bad(f"option {where}.op={op!r} must be a program-order id 'T:N'")
        command = entry.get("command")
        if command is not None and (isinstance(command, bool) or not isinstance(command, int) or command < 0):
            raise _bad(f"option {where}.command={command!r} must be an int >= 0")
        if "status" not in entry:
            raise _bad(f"option {where}: missing field 'status'")
        code = _status(entry["status"], f"{where}.status")
        message = entry.get("message", "injected fault")
        if not isinstance(message, str):
            raise _bad(f"option {where}.message must be a string")
        table[(op, command)] = HalError(code, message)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
        raise _bad(f"option fault_rate={rate!r} must be a number in [0, 1]")
    if not table and not rate:
        return None
    return Faults(table, float(rate))


class Faults:
    __slots__ = ("table", "rate")

    def __init__(self, table: dict, rate: float):
        self.table = table
        self.rate = rate

    def check(self, device, op, index: int | None) -> None:
        """Raise the fault for command ``index`` of ``op`` (None: the op itself), tracing it."""
        error = self.table.get((op.id, index))
        if error is None and index == 0:  # an op-level fault hits its first command
            error = self.table.get((op.id, None))
        if error is None and self.rate and device.rng.random() < self.rate:
            error = HalError(StatusCode.DATA_LOSS, "injected fault (fault_rate)")
        if error is None:
            return
        where = f"command {op.id}.{index}" if index is not None else f"op {op.id}"
        error = HalError(error.code, f"{error.message} in {where}")
        device.recorder.emit({"ev": "fault", "t": device.now(), "op": op.id, "index": index,
                              "status": int(error.code), "message": error.message})
        raise error
