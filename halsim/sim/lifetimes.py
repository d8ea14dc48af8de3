"""Resource lifetimes in the model: what an operation keeps alive while it is in flight.

By default a simulated device retains everything a submission references until the operation
retires (the trace shows ``retain`` at enqueue and ``release`` at retirement), as IREE requires. With
``retain_resources=False`` it reproduces the bug the Metal driver's async change fixed: the device
holds only weak references to buffers, records no retain/release for the operation, and a buffer the
host drops while the operation is in flight shows up in the trace as a ``host_release`` between the
operation's ``op`` and ``op_done`` events. The commands then still run on the bytes the buffer had
(GPU memory is not reclaimed at once); a buffer that never had storage fails the command with
FAILED_PRECONDITION.

Not covered by ``retain_resources=False``: the wait and signal semaphores (the operation must signal
them) and the buffer of a ``queue_alloca``/``queue_dealloca`` (the operation's subject).

>>> from halsim.sim.driver import driver
>>> dev = driver.create_device("generic", retain_resources=False)
>>> gate, done = dev.create_semaphore(), dev.create_semaphore()
>>> buf = dev.allocator.allocate_buffer(8)
>>> dev.queue_fill([(gate, 1)], [(done, 1)], buf, 0, 8, 7, 1)
>>> del buf                                    # the host lets go while the fill is pending
>>> gate.signal(1); done.wait(1)
>>> [e["ev"] for e in dev.trace if e["ev"] in ("op", "host_release", "op_done")]
['op', 'host_release', 'op_done']
>>> dev.close()
"""

from __future__ import annotations

import weakref

from reference.hal import Cmd, HalError, Range, StatusCode
from reference.trace import Recorder


class UnretainedBuffer:
    """Stands in for a buffer in an operation's commands without keeping it alive."""

    __slots__ = ("id", "_ref", "_storage")

    def __init__(self, root):
        self.id = root.id
        self._ref = weakref.ref(root)
        self._storage = root._storage

    def __repr__(self) -> str:
        return f"<UnretainedBuffer {self.id} {'alive' if self._ref() is not None else 'released'}>"

    def storage(self, what: str = "buffer") -> bytearray:
        root = self._ref()
        if root is not None:
            self._storage = root.storage(what)
            return self._storage
        if self._storage is None:
            raise HalError(StatusCode.FAILED_PRECONDITION,
                           f"{what} {self.id} was released by the host before the device used it "
                           "(retain_resources=False)")
        return self._storage


def unretain(op) -> None:
    """Drop the op's strong references to buffers, command buffers and executables."""
    op.resources = ()
    if not op.commands:
        return
    standins: dict[int, UnretainedBuffer] = {}

    def swap(rng):
        if not isinstance(rng, Range):
            return rng
        key = id(rng.buffer)
        s = standins.get(key)
        if s is None:
            s = standins[key] = UnretainedBuffer(rng.buffer)
        return Range(s, rng.offset, rng.length)

    commands = []
    for cmd in op.commands:
        accesses = tuple((swap(r), a) for r, a in cmd.accesses)
        args = cmd.args
        if cmd.kind == "dispatch":
            spec, wg, consts, binds = args
            args = (spec, swap(wg), consts, tuple(swap(b) for b in binds))
        commands.append(Cmd(cmd.index, cmd.kind, accesses, args))
    op.commands = tuple(commands)


class SimRecorder(Recorder):
    """The common recorder, except that ``retain`` is skipped when the device does not retain."""

    def __init__(self, trace, clock, retains: bool):
        super().__init__(trace, clock)
        self.retains = retains

    def retain(self, op, res_ids) -> None:
        if self.retains:
            super().retain(op, res_ids)

    def enqueued(self, op, res_ids) -> None:
        if self.retains:
            super().enqueued(op, res_ids)
        else:
            self.op(op)
