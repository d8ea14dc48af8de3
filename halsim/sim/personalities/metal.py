"""``sim:metal``: IREE's Metal driver (HAL_SEMANTICS §B.5) in virtual time.

Each hardware queue is an ``MTLCommandQueue``: it executes committed ``MTLCommandBuffer``\\ s one at a
time, in commit order. A queue call commits, each commit costing the host ``commit_ns``:

1. if the op has waits, a **wait command buffer** — ``encodeWaitForEvent`` on each wait semaphore's
   ``MTLSharedEvent``: the queue stalls until every value is reached (then ``event_wait_ns`` per wait);
2. the **work command buffer** — the op's commands encoded into blit/compute encoders by the
   command-segment planner (:mod:`reference.utils.command_segments`, laid out in time by
   :mod:`.metal_timeline`: encoder switches, execution barriers as encoder events, dispatches of one
   compute encoder overlapping until a memory barrier), after the queue's ``launch_ns``; it ends with
   ``encodeSignalEvent`` for each signal semaphore (``event_record_ns`` each), which sets the values when
   the command buffer completes. (IREE makes the last work command buffer, or a new empty one, the
   *signal command buffer*: steps 2 and 3 of the three-step submission share one command buffer.)

Its **completion handler** runs ``completion_ns`` later on the host and releases what the submission
retained (with ``retain_resources=False`` nothing was retained). Semaphores are shared events: a host
thread blocked on a value the GPU signals wakes ``listener_ns`` after the signal (the
``MTLSharedEventListener`` notification), where host-to-host signals take ``wake_ns``.

Because the queue is in order and waits are encoded on the GPU, an op waiting for a value that only an
op committed *later to the same queue* would signal deadlocks the queue: the simulator reports it as
"same-queue wait-before-signal on in-order queue N". A failed wait semaphore passes its GPU wait (its
event is set to the failure value), so the wait command buffer completes once every wait is reached or
failed, whatever their order; the op then fails its signals without running its commands, as the HAL
contract requires (HAL_SEMANTICS Q3; IREE's Metal would run them).

Option ``legacy_sync=True`` is the driver before its async change: the queue call blocks the host
thread until every wait is satisfied (seen through the listener), then commits the work command buffer
only — no wait command buffer. A failed wait is raised by the queue call and nothing is signaled. Such a
device has no ``async_queue`` capability (submit producers first).

Host calls commit a command buffer whose completion handler calls the function
``host_call_latency_ns`` after it completes; the queue goes on meanwhile. ``queue_alloca`` and
``queue_dealloca`` commit their storage on the queue (``alloca_ns``/``dealloca_ns``). HAL events and
barriers involving the HOST stage are UNIMPLEMENTED, as on Metal.

>>> from halsim.sim.driver import driver
>>> dev = driver.create_device("metal", queues=2)
>>> buf = dev.allocator.allocate_buffer(1024)
>>> filled, copied = dev.create_semaphore(), dev.create_semaphore()
>>> dev.queue_fill([], [(filled, 1)], buf, 0, 512, 0xAB, 1)
>>> dev.queue_copy([(filled, 1)], [(copied, 1)], buf, 0, buf, 512, 512, queue_affinity=1 << 1)
>>> copied.wait(1)
>>> [(e["op"], e["step"]) for e in dev.trace.events("metal_cb")]
[('0:0', 'work'), ('0:1', 'wait'), ('0:1', 'work')]
>>> buf.map_read(1020, 4).hex()
'abababab'
>>> dev.close()
"""

from __future__ import annotations


from reference.hal import CommandBufferMode, CommandBuffer, CommandCategory, HalError, StatusCode, WaitMode
from reference.hal.constants import QUEUE_AFFINITY_ANY
from reference.hal.queue_op import QueueOp, fail_all, run_body, signal_all
from reference.utils.command_segments import check_barrier, plan_segments
from reference.utils.cts_exclusions import in_order_queue

from ..device import SimDevice, _api
from ..events import Fifo, WaitsResolved
from ..execution import command_plan, internal_error
from ..history import SemaphoreHistory
from .metal_timeline import encoder_timeline

CAPABILITIES = frozenset({"async_queue", "host_calls", "mapping", "indirect"})

GPU = "gpu"  # the history's actor for values the GPU sets (encodeSignalEvent)

CTS_UNSUPPORTED: dict[str, str] = in_order_queue("MTLCommandQueue")


class SharedEventHistory(SemaphoreHistory):
    """Semaphore history of ``MTLSharedEvent``\\ s: a host waiter sees a value the GPU set after the
    listener notification latency (a value set before it started waiting, at once)."""

    __slots__ = ("listener_ns",)

    def __init__(self, wake_ns: int, listener_ns: int):
        super().__init__(wake_ns)
        self.listener_ns = listener_ns

    def effective(self, t: int, actor, me, start: int) -> int:
        if actor == GPU:
            return t + self.listener_ns if t > start else t
        return super().effective(t, actor, me, start)


class MetalCommandBuffer(CommandBuffer):
    """A HAL command buffer that refuses at recording time what Metal cannot encode: HAL events and
    barriers involving the HOST stage (UNIMPLEMENTED, as IREE's Metal direct command buffer)."""

    def execution_barrier(self, source_stages, target_stages, memory_barriers=(), buffer_barriers=()) -> None:
        self._recording(CommandCategory.NONE, "execution_barrier")
        if all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in (source_stages, target_stages)):
            check_barrier(source_stages, target_stages)
        super().execution_barrier(source_stages, target_stages, memory_barriers, buffer_barriers)

    def _event_command(self, kind, events, source_stages, target_stages):
        self._recording(CommandCategory.DISPATCH, kind)
        raise HalError(StatusCode.UNIMPLEMENTED, f"{kind}: Metal does not implement HAL events")


class Committed:
    """One committed ``MTLCommandBuffer``: the op it belongs to, its step (``wait`` or ``work``), the
    host time it was committed and, for work, the planned encoders."""

    __slots__ = ("op", "step", "commit_t", "plan")

    def __init__(self, op: QueueOp, step: str, commit_t: int, plan=()):
        self.op = op
        self.step = step
        self.commit_t = commit_t
        self.plan = plan


class CommandQueue:
    """One ``MTLCommandQueue``: committed command buffers in commit order (the head executes) and the
    wait the head is blocked on, if any."""

    __slots__ = ("index", "track", "fifo", "blocking")

    def __init__(self, env, index: int, track: int):
        self.index = index
        self.track = track
        self.fifo: Fifo = Fifo(env)  # of Committed
        self.blocking: WaitsResolved | None = None


class MetalDevice(SimDevice):
    personality = "metal"
    capabilities = CAPABILITIES
    extra_options = {"legacy_sync": False}
    in_order_waits = True  # waits are encoded on the in-order MTLCommandQueue
    # The Metal-specific fields, spelled out (docs/sim-metal.md says what each does here).
    cost_defaults = {"commit_ns": 2_000, "encoder_switch_ns": 1_000, "event_wait_ns": 500,
                     "event_record_ns": 500, "listener_ns": 15_000, "completion_ns": 5_000}

    def _make_history(self) -> SemaphoreHistory:
        return SharedEventHistory(self.cost.wake_ns, self.cost.listener_ns)

    def __init__(self, uri: str, options: dict | None = None):
        super().__init__(uri, options)
        self.legacy_sync = self.options["legacy_sync"]
        if self.legacy_sync:
            self.capabilities = CAPABILITIES - {"async_queue"}
        self._gpu = False  # True while the GPU sets semaphore values
        self._closing: HalError | None = None
        self._queues = []
        for i in range(self.queue_count):
            q = CommandQueue(self.env, i, self.recorder.track("queue", f"queue {i}"))
            self._queues.append(q)
            self.env.process(self._run_queue(q))

    def _actor(self):
        return GPU if self._gpu else super()._actor()

    # -- objects Metal does not have ---------------------------------------------------------------

    def _create_command_buffer(self, mode=CommandBufferMode.ONE_SHOT, categories=CommandCategory.ANY,
                               binding_capacity: int = 0, queue_affinity: int = QUEUE_AFFINITY_ANY):
        self._check_open()
        self._queue_index(queue_affinity)
        cb = MetalCommandBuffer(self, self._new_id("c"), mode, categories, binding_capacity, queue_affinity)
        self.recorder.command_buffer(cb)
        self._watch(cb, cb.id)
        return cb

    create_command_buffer = _api()(_create_command_buffer)

    @_api()
    def create_event(self):
        self._check_open()
        raise HalError(StatusCode.UNIMPLEMENTED, "create_event: Metal does not implement HAL events")

    # -- host side: the queue call ------------------------------------------------------------------

    def _schedule(self, op: QueueOp) -> None:
        queue = self._queues[op.queue]
        op.track = queue.track
        try:
            plan = plan_segments(op.commands) if op.commands else ()
        except HalError as e:  # cannot be encoded: [H] fails the signals, nothing is committed
            op.ready_t = op.start_t = op.end_t = self.now()
            self._complete(op, e, False, gpu=False)
            return
        if self.legacy_sync and op.wait:
            self._legacy_wait(op)
        steps = ("wait", "work") if op.wait and not self.legacy_sync else ("work",)
        for step in steps:
            self.threads.charge(self.cost.commit_ns)
            committed = Committed(op, step, self.now(), plan if step == "work" else ())
            self.env.timeout(max(0, committed.commit_t - self.env.now)).callbacks.append(
                lambda _ev, c=committed: self._arrive(queue, c))

    def _legacy_wait(self, op: QueueOp) -> None:
        """The driver before async: block the host until every wait is met, raising a failed wait."""
        try:
            self.wait_blocking(WaitMode.ALL, op.wait, None, f"queue_{op.kind} (op {op.id})", op=op)
        except HalError as e:
            op.ready_t = op.start_t = op.end_t = self.now()
            self.recorder.op_done(op, e)
            self._release(op)
            raise
        op.ready_t = self.now()

    # -- the GPU: one process per MTLCommandQueue ---------------------------------------------------

    def _arrive(self, queue: CommandQueue, committed: Committed) -> None:
        queue.fifo.push(committed)

    def _run_queue(self, queue: CommandQueue):
        env = self.env
        while True:
            committed = yield from queue.fifo.head()
            start = env.now
            if committed.step == "wait":
                yield from self._wait_step(queue, committed.op)
            else:
                yield from self._work_step(queue, committed)
            self.recorder.emit({"ev": "metal_cb", "t": env.now, "op": committed.op.id, "step": committed.step,
                                "commit": committed.commit_t, "start": start, "track": queue.track})
            queue.fifo.popleft()
            committed = None  # (this frame waits for the next one: the finished op must not stay alive)

    def _wait_step(self, queue: CommandQueue, op: QueueOp):
        """encodeWaitForEvent for each wait: the queue stalls until every one is reached or failed (a
        failed MTLSharedEvent holds FAILURE_VALUE, which passes the GPU wait); then a failure fails the op."""
        waits = WaitsResolved(self, op.wait, settle=True)
        queue.blocking = waits
        if self._closing is not None:
            waits.cancel(self._closing.clone())
        error = yield waits
        queue.blocking = None
        op.ready_t = self.env.now
        if error is not None:
            op.wait_error = error
        elif self.cost.event_wait_ns:
            yield self.env.timeout(self.cost.event_wait_ns * len(op.wait))

    def _work_step(self, queue: CommandQueue, committed: Committed):
        op = committed.op
        env = self.env
        if op.ready_t is None:
            op.ready_t = env.now
        if op.wait_error is not None:  # a failed wait: the commands do not run, the signals fail
            op.start_t = op.end_t = env.now
            self._complete(op, op.wait_error, False)
            return
        op.start_t = env.now + self.cost.launch_ns
        if op.kind == "host_call":
            if self.cost.launch_ns:
                yield env.timeout(self.cost.launch_ns)
            # The completion handler calls the function on the host; the queue goes on meanwhile.
            env.timeout(self.cost.host_call_latency_ns).callbacks.append(lambda _ev: self._host_call(op))
            return
        if op.kind in ("alloca", "dealloca"):
            yield env.timeout(self.cost.launch_ns + self.cost.op_ns(op.kind))
            try:
                if self.faults is not None:
                    self.faults.check(self, op, None)
                should_signal, error = run_body(self, op, queue.track, self.now), None
            except Exception as e:  # noqa: BLE001 - a Python error (MemoryError...) fails it INTERNAL
                should_signal, error = False, e if isinstance(e, HalError) else internal_error(e)
            end = env.now
        else:
            end, error, record = self._encode(queue, op, committed.plan, op.start_t)
            if end > env.now:
                yield env.timeout(end - env.now)
            record()
            should_signal = error is None
        if error is None and op.signal and self.cost.event_record_ns:
            yield env.timeout(self.cost.event_record_ns * len(op.signal))
        op.end_t = env.now
        self._complete(op, error, should_signal)

    def _encode(self, queue: CommandQueue, op: QueueOp, plan, start: int):
        """Apply the commands' effects (in command order, when the command buffer starts) and lay the
        encoders out in time. Returns ``(end, error, record)``; ``record()`` traces what ran."""
        cost = self.cost
        durations, templates = {}, {}
        error = failed = None
        if self.faults is not None and not op.commands:
            try:
                self.faults.check(self, op, None)
            except HalError as e:
                error = e
        for cmd, ns, apply, template in command_plan(self, op.commands):
            templates[cmd.index] = template
            if error is None:
                try:
                    if self.faults is not None:
                        self.faults.check(self, op, cmd.index)
                    apply()
                except Exception as e:  # noqa: BLE001 - a Python error fails the command INTERNAL
                    error, failed = e if isinstance(e, HalError) else internal_error(e), cmd.index
            if error is not None and failed != cmd.index:
                ns = 0
            elif ns is None:
                try:
                    ns = cost.command_ns(cmd)
                except Exception as e:  # noqa: BLE001
                    ns = 0
                    if error is None:
                        error, failed = internal_error(e), cmd.index
            durations[cmd.index] = ns
        end, placed, spans = encoder_timeline(plan, durations, start, cost.encoder_switch_ns, cost.barrier_ns,
                                              self.max_concurrency)
        if failed is not None:
            placed = [p for p in placed if p.index <= failed]
            end = max([start] + [p.end for p in placed])
            spans = [s for s in spans if s.start < end]

        def record() -> None:
            tracks = {}
            for p in placed:
                track = tracks.get(p.lane)
                if track is None:
                    track = tracks[p.lane] = self.recorder.track("encoder", f"queue {queue.index} {p.lane}")
                self.recorder.command_from(templates[p.index], op, p.start, p.end, track,
                                           error if p.index == failed else None)
            lane = self.recorder.track("encoder", f"queue {queue.index} encoders") if spans else None
            for s in spans:
                self.recorder.emit({"ev": "encoder", "t": min(s.end, end), "op": op.id, "encoder": s.position,
                                    "kind": s.kind, "start": s.start, "track": lane, "commands": list(s.commands)})
        return end, error, record

    def _host_call(self, op: QueueOp) -> None:
        previous, self._host_call_op = self._host_call_op, op
        try:
            should_signal, error = self._faulted_body(op), None
        except HalError as e:
            should_signal, error = False, e
        finally:
            self._host_call_op = previous
            self.threads.user_code_ran()
        op.end_t = self.env.now
        self._complete(op, error, should_signal, gpu=False)

    def _complete(self, op: QueueOp, error: HalError | None, should_signal: bool, gpu: bool = True) -> None:
        """The op is done: trace it, set or fail its signals (as the GPU, or as the host), and let the
        completion handler release what it retained ``completion_ns`` later."""
        self.recorder.op_done(op, error)
        self._gpu = gpu
        try:
            if error is not None:
                fail_all(self, op, error)
            elif should_signal:
                signal_all(self, op)
        finally:
            self._gpu = False
        if op.resources:
            if gpu and self.cost.completion_ns:
                self.env.timeout(self.cost.completion_ns).callbacks.append(lambda _ev: self._release(op))
            else:
                self._release(op)

    def _release(self, op: QueueOp) -> None:
        if op.resources:
            self.recorder.release(op, [r.id for r in op.resources])
            op.resources = ()

    # -- deadlocks and shutdown -------------------------------------------------------------------

    def _pending_ops(self) -> list[QueueOp]:
        out, seen = [], set()
        for queue in self._queues:
            for committed in queue.fifo:
                if committed.op not in seen:
                    seen.add(committed.op)
                    out.append(committed.op)
        return out

    def _queued_behind(self) -> dict[str, str]:
        # An op cannot start before the op owning the command buffer committed just ahead of its first.
        behind = {}
        for queue in self._queues:
            seen, previous = set(), None
            for committed in queue.fifo:
                op = committed.op
                if op not in seen:
                    seen.add(op)
                    if previous is not None and previous is not op:
                        behind[op.id] = previous.id
                previous = op
        return behind

    def _cancel_pending(self, error: HalError) -> None:
        self._closing = error
        for queue in self._queues:
            if queue.blocking is not None:
                queue.blocking.cancel(error.clone())
