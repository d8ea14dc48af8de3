"""Run a :class:`~halsim.schedule.load.Schedule` as HAL calls on any device.

The main thread creates the semaphores, buffers and command buffers (recording them), starts the
extra host threads, then runs its own steps; each thread runs its steps in order. A step that
raises a ``HalError`` is recorded in :attr:`RunResult.errors` and the thread goes on (a checking
tool wants the rest of the program's trace); a deadlock stops the thread that hit it (a timed wait
that reached its deadline instead returned DEADLINE_EXCEEDED: the thread goes on), and so does
any other exception (recorded too, with ``crashed`` set: never a silently dead thread). The runner
keeps objects only in its name tables, so a ``release`` step really drops the host's last
reference (what ``retain_resources=False`` needs to show an early release).

>>> from halsim.schedule.load import parse_schedule
>>> s = parse_schedule({"semaphores": {"done": 0}, "buffers": {"a": 16},
...                     "host": [{"call": "fill", "target": "a", "pattern": 7, "pattern_length": 1,
...                               "signal": {"done": 1}},
...                              {"call": "wait", "wait": {"done": 1}}]})
>>> result = run_schedule(s)
>>> [op["kind"] for op in result.trace.operations()], result.errors
(['fill'], [])
"""

from __future__ import annotations

import gc
import re
import threading
from dataclasses import dataclass, field

from reference import hal

from .load import Schedule, ScheduleError


@dataclass
class StepError:
    thread: str
    where: str
    call: str
    code: int
    message: str
    deadlock: bool = False
    crashed: bool = False   # a Python exception, not a HAL status: the thread stopped there

    def __str__(self) -> str:
        if self.crashed:
            return f"{self.where} ({self.call}) on {self.thread} thread raised {self.message.splitlines()[0]} " \
                   "(the thread stopped)"
        return f"{self.where} ({self.call}) on {self.thread} thread raised {hal.StatusCode(self.code).name}: " \
               f"{self.message.splitlines()[0] if self.message else ''}"


@dataclass
class RunResult:
    trace: object
    errors: list = field(default_factory=list)

    @property
    def deadlocked(self) -> bool:
        return any(e.deadlock for e in self.errors)


class _Env:
    """The schedule's objects by name, on one device."""

    def __init__(self, dev, schedule: Schedule):
        self.dev = dev
        path = schedule.path
        self.sems, self.bufs = {}, {}
        self.failed: dict[str, hal.HalError] = {}  # transient name → the error its queue_alloca raised
        # a value or size this device refuses is the file's problem: ``file: field.path: reason``
        for table, out, make in (("semaphores", self.sems, dev.create_semaphore),
                                 ("buffers", self.bufs, dev.allocator.allocate_buffer)):
            for n, v in getattr(schedule, table).items():
                try:
                    out[n] = make(v)
                except hal.HalError as e:
                    raise ScheduleError(f"{path}: {table}.{n}: {e}") from None
        self._exe = None
        self.cbs = {}
        for name, cb in schedule.command_buffers.items():
            mode = hal.CommandBufferMode.DEFAULT if cb["reusable"] else hal.CommandBufferMode.ONE_SHOT
            self.cbs[name] = self._record(dev.create_command_buffer(mode=mode), cb["commands"],
                                          f"command_buffers.{name}")

    @property
    def exe(self):
        if self._exe is None:
            self._exe = self.dev.load_executable()
        return self._exe

    def ref(self, r) -> hal.BufferRef:
        name, offset, length = r
        return hal.BufferRef(self.bufs[name], offset, hal.WHOLE_BUFFER if length is None else length)

    def length(self, r) -> int:
        name, offset, length = r
        return length if length is not None else self.bufs[name].byte_length - offset

    def tps(self, pairs) -> list:
        return [(self.sems[n], v) for n, v in pairs]

    def _record(self, cb, commands, where):
        cb.begin()
        for i, c in enumerate(commands):
            try:
                kind = c["cmd"]
                if kind == "barrier":
                    cb.execution_barrier(hal.ExecutionStage.COMMAND_RETIRE | hal.ExecutionStage.DISPATCH |
                                         hal.ExecutionStage.TRANSFER,
                                         hal.ExecutionStage.COMMAND_ISSUE | hal.ExecutionStage.DISPATCH |
                                         hal.ExecutionStage.TRANSFER)
                elif kind == "fill":
                    cb.fill_buffer(self.ref(c["target"]), c["pattern"], c["pattern_length"])
                elif kind == "copy":
                    cb.copy_buffer(self.ref(c["source"]), self.ref(c["target"]))
                elif kind == "update":
                    cb.update_buffer(c["data"], 0, self.ref(c["target"]))
                elif kind == "dispatch":
                    cb.dispatch(self.exe, c["entry"], c["workgroups"], c["constants"],
                                [self.ref(b) for b in c["bindings"]])
            except hal.HalError as e:
                raise ScheduleError(f"{self.dev_path}: {where}.commands[{i}]: {e}") from None
        cb.end()
        return cb

    dev_path = "<schedule>"


def _affinity(dev, queue) -> int:
    if queue is None:
        return hal.QUEUE_AFFINITY_ANY
    return 1 << (queue % max(1, getattr(dev, "queue_count", 1)))


def _step(env: _Env, st: dict) -> None:
    dev, call = env.dev, st["call"]
    if call in ("signal", "fail", "wait", "sleep", "release", "flush"):
        if call == "signal":
            env.sems[st["semaphore"]].signal(st["value"])
        elif call == "fail":
            env.sems[st["semaphore"]].fail(st["status"], st["message"])
        elif call == "wait":
            mode = hal.WaitMode.ALL if st["mode"] == "all" else hal.WaitMode.ANY
            dev.wait_semaphores(mode, env.tps(st["wait"]), st["timeout"])
        elif call == "sleep":
            dev.sleep(st["seconds"])
        elif call == "flush":
            dev.queue_flush()
        else:
            for name in st["names"]:
                for table in (env.bufs, env.cbs, env.sems):
                    table.pop(name, None)
            gc.collect()
        return
    wait, signal = env.tps(st["wait"]), env.tps(st["signal"])
    if env.failed:
        _uses_failed_transient(env, st, signal)
    kw = {"queue_affinity": _affinity(dev, st["queue"])}
    if call == "execute":
        dev.queue_execute(wait, signal, env.cbs[st["command_buffer"]], **kw)
    elif call == "barrier":
        dev.queue_barrier(wait, signal, **kw)
    elif call == "fill":
        t = st["target"]
        # (to the end: WHOLE_BUFFER, so an offset past the end is the HAL's OUT_OF_RANGE on the offset)
        dev.queue_fill(wait, signal, env.bufs[t[0]], t[1], hal.WHOLE_BUFFER if t[2] is None else t[2],
                       st["pattern"], st["pattern_length"], **kw)
    elif call == "copy":
        src, dst = st["source"], st["target"]
        n = st["length"] or min(env.length(src), env.length(dst))
        if n < 0:   # an offset past its buffer's end: the HAL says so (OUT_OF_RANGE naming it)
            n = hal.WHOLE_BUFFER
        dev.queue_copy(wait, signal, env.bufs[src[0]], src[1], env.bufs[dst[0]], dst[1], n, **kw)
    elif call == "update":
        t = st["target"]
        dev.queue_update(wait, signal, st["data"], 0, env.bufs[t[0]], t[1], env.length(t), **kw)
    elif call == "dispatch":
        dev.queue_dispatch(wait, signal, env.exe, st["entry"], st["workgroups"], st["constants"],
                           [env.ref(b) for b in st["bindings"]], **kw)
    elif call == "alloca":
        try:
            env.bufs[st["name"]] = dev.queue_alloca(wait, signal, st["size"], **kw)
            env.failed.pop(st["name"], None)
        except hal.HalError as e:
            env.bufs.pop(st["name"], None)  # (the name's earlier buffer, if any, is not this one)
            env.failed[st["name"]] = e
            raise
    elif call == "dealloca":
        dev.queue_dealloca(wait, signal, env.bufs[st["buffer"]], **kw)


def _uses_failed_transient(env: _Env, st: dict, signal: list) -> None:
    """A step using a transient whose ``queue_alloca`` raised (no buffer to name) does what a program
    propagating that error does: it fails the step's signal semaphores with the alloca's status and
    raises it — rather than vanish (its waiters would wait for ever: a false deadlock)."""
    names = [st[key][0] for key in ("target", "source") if isinstance(st.get(key), tuple)]
    names += [st["buffer"]] if isinstance(st.get("buffer"), str) else []
    names += [b[0] for b in st.get("bindings", ()) if isinstance(b, tuple)]
    failed = next((n for n in names if n in env.failed), None)
    if failed is None:
        return
    error = env.failed[failed]
    for sem, _value in signal:
        try:
            sem.fail(error.code, error.message)
        except hal.HalError:
            pass  # (already failed)
    raise hal.HalError(error.code, f"{failed!r}: its queue_alloca failed: {error.message}")


def _run_thread(env: _Env, name: str, steps: list, errors: list) -> None:
    from halsim.sim import DeadlockError

    me = threading.current_thread()
    for st in steps:
        me.halsim_step = f"{st['where']} ({st['call']})"  # for halsim.deadline's report of a stuck run
        try:
            _step(env, st)
        except hal.HalError as e:
            # A deadlock stops the thread; a timed wait that reached its deadline (nothing could have
            # signaled it: DeadlockError DEADLINE_EXCEEDED) returned, as on every device, and it goes on.
            dead = isinstance(e, DeadlockError) and e.code != hal.StatusCode.DEADLINE_EXCEEDED
            errors.append(StepError(name, st["where"], st["call"], int(e.code), e.message, deadlock=dead))
            if dead:
                return
        except KeyError as e:   # a name whose object the program released or never allocated
            errors.append(StepError(name, st["where"], st["call"], int(hal.StatusCode.NOT_FOUND),
                                    f"{e.args[0]!r} was released or not allocated yet"))
        except Exception as e:  # noqa: BLE001 - not a HAL status: recorded (the thread stops), never lost
            errors.append(StepError(name, st["where"], st["call"], int(hal.StatusCode.INTERNAL),
                                    f"{type(e).__name__}: {e}", crashed=True))
            return


def _main(dev, schedule: Schedule, errors: list, failures: list, envs: list) -> None:
    """The schedule's main thread: create the objects, start the other threads, run its steps.
    It does not join the others (the calling thread does): its own steps run meanwhile."""
    try:
        env = _Env.__new__(_Env)
        env.dev_path = schedule.path
        _Env.__init__(env, dev, schedule)
    except Exception as e:  # noqa: BLE001 - handed to the calling thread
        failures.append(e)
        return
    envs.append(env)
    (main_name, main_steps), *others = schedule.threads
    for n, st in others:
        w = threading.Thread(target=_run_thread, args=(env, n, st, errors), name=f"schedule {n}")
        failures.append(w)
        w.start()
    _run_thread(env, main_name, main_steps, errors)


def run_schedule(schedule: Schedule, device: str | None = None, opened=None) -> RunResult:
    """Run ``schedule`` on ``device`` (a URI; default: the schedule's own device and options) and
    return its trace and the calls that raised. Raises ``HalError`` if the device cannot be
    created and :class:`~halsim.schedule.load.ScheduleError` if a command cannot be recorded, or
    the device refuses a semaphore's initial value or a buffer's size (``semaphores.s: …``).
    ``opened(device)``, if given, is called with the device once it is created (``halsim check
    --timeout`` keeps it to check the trace of a schedule that never finishes)."""
    dev = hal.create_device(device) if device else _create_own_device(schedule)
    if opened is not None:
        opened(dev)
    try:
        errors = run_schedule_on(dev, schedule)
    finally:
        dev.close()
    return RunResult(dev.trace, errors)


def _create_own_device(schedule: Schedule):
    """The schedule's ``[device]``; an option the device refuses is an error of that field
    (``file: device.options.queues: …``), as a semaphore's refused initial value is."""
    try:
        return hal.create_device(schedule.device, **schedule.options)
    except hal.HalError as e:
        if e.code != hal.StatusCode.INVALID_ARGUMENT:
            raise  # (UNAVAILABLE here, NOT_FOUND...: the device, not the file)
        named = [k for k in schedule.options if re.search(rf"\boption '?{re.escape(k)}\b", e.message)]
        where = f"device.options.{named[0]}" if named else "device"
        raise ScheduleError(f"{schedule.path}: {where}: {e}") from None


def run_schedule_on(dev, schedule: Schedule, buffers: list | None = None) -> list:
    """Run ``schedule``'s steps on an open device (left open) and return its :class:`StepError` list
    (``halsim difftest`` runs a schedule as a program this way). ``buffers``, if given, gets the
    buffers of ``[buffers]`` (in order) that no ``release`` step dropped."""
    errors: list[StepError] = []
    started: list = []   # the worker threads, or the exception that stopped set-up
    envs: list = []
    main = threading.Thread(target=_main, args=(dev, schedule, errors, started, envs), name="schedule main")
    main.start()
    main.join()
    for w in list(started):
        if isinstance(w, BaseException):
            raise w
        w.join()
    if buffers is not None and envs:
        kept = envs[0].bufs
        buffers.extend(kept[name] for name in schedule.buffers if name in kept)
    envs.clear()
    gc.collect()   # objects the program dropped: their host_release lands before close
    return errors
