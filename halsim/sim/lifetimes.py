"""Resource lifetimes in the model: what an operation keeps alive while it is in flight.

By default a simulated device retains everything a submission references until the operation
retires (the trace shows ``retain`` at enqueue and ``release`` at retirement), as IREE requires. With
``retain_resources=False`` it reproduces the bug the Metal driver's async change fixed: the device
holds only weak references to buffers, records no retain/release for the operation, and a buffer the
host drops while the operation is in flight shows up in the trace as a ``host_release`` between the
operation's ``op`` and ``op_done`` events. The commands then still run on the bytes the buffer had
(GPU memory is not reclaimed at once) — for a transient, the bytes its ``queue_alloca`` committed,
also when the alloca ran after the submission; a buffer that never had storage (its alloca had not
committed when it was dropped), or whose ``queue_dealloca`` released it, fails the command with
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
    """Stands in for a buffer in an operation's commands without keeping it alive. It keeps the
    buffer's bytes (not the buffer): the storage it had at submit, or — for a transient whose
    ``queue_alloca`` had not committed yet — the storage the alloca commits later
    (:meth:`SimRecorder.commit`), so a command that runs after the host dropped the buffer still runs
    on the bytes the buffer had."""

    __slots__ = ("id", "_ref", "_storage", "__weakref__")

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


def unretain(op, recorder: "SimRecorder | None" = None) -> None:
    """Drop the op's strong references to buffers, command buffers and executables.
    A stand-in for a transient buffer is registered with ``recorder``, which hands it the storage when
    the buffer's ``queue_alloca`` commits it (one submitted before that had none) and takes it back
    when its ``queue_dealloca`` decommits it."""
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
            if recorder is not None and rng.buffer.is_transient:
                recorder.awaits_storage(rng.buffer, s)
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
    """The common recorder, except that ``retain`` is skipped when the device does not retain, and
    that a semaphore the host dropped leaves the history of ``device`` (a weak reference: the device
    holds its recorder; and a personality may replace its ``history``)."""

    def __init__(self, trace, clock, retains: bool, device: weakref.ref | None = None):
        super().__init__(trace, clock)
        self.retains = retains
        self._device = device
        # transient buffer id → the stand-ins (weak) of operations that use it
        self._awaiting: dict[str, weakref.WeakSet] = {}
        self._purge_at = 64  # (a transient the host dropped without queue_dealloca leaves its entry)

    def awaits_storage(self, root, standin: UnretainedBuffer) -> None:
        waiting = self._awaiting.get(root.id)
        if waiting is None:
            if len(self._awaiting) >= self._purge_at:  # amortized: the entries whose stand-ins all died
                self._awaiting = {k: w for k, w in self._awaiting.items() if len(w)}
                self._purge_at = max(64, 2 * len(self._awaiting))
            waiting = self._awaiting[root.id] = weakref.WeakSet()
        waiting.add(standin)

    def commit(self, buf, op) -> None:
        super().commit(buf, op)
        waiting = self._awaiting.get(buf.id)
        if waiting is not None:  # they run on these bytes even once the host dropped the buffer
            storage = buf.root._storage
            for standin in waiting:
                standin._storage = storage

    def decommit(self, buf, op) -> None:
        super().decommit(buf, op)
        waiting = self._awaiting.pop(buf.id, None)
        if waiting is not None:  # the bytes are gone: a command after this fails, as with the buffer
            for standin in waiting:
                standin._storage = None

    def host_release(self, res_id: str) -> None:
        # The finalizer the device puts on every resource it creates (Device._watch) calls this: a
        # semaphore's history goes with it (nothing can ask about it any more — a queue operation or
        # a blocked wait that uses it holds it), without a second finalizer per semaphore.
        super().host_release(res_id)
        device = self._device() if self._device is not None else None
        if device is not None:
            device.history.forget(res_id)

    def retain(self, op, res_ids) -> None:
        if self.retains:
            super().retain(op, res_ids)

    def enqueued(self, op, res_ids) -> None:
        if self.retains:
            super().enqueued(op, res_ids)
        else:
            self.op(op)
