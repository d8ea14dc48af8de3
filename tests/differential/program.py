"""The differential check's program language, and its exact model.

A :class:`Program` is a list of host steps over ``N`` timeline semaphores (initial values) and ``M``
host-visible buffers (initial bytes). Host steps: signal, fail, wait, and submitting a queue operation
(``Execute`` of fill/copy/update commands, ``Barrier``, ``QueueCopy``, ``Alloca``, ``Dealloca``), each
queue operation with its own wait and signal lists. Steps run in list order on one host thread; every
runner (IREE's Python runtime, our reference drivers) executes the same list, then queries every
semaphore and reads every buffer.

:func:`analyze` is the model. It runs the program abstractly (an operation completes as soon as its
waits are satisfied, or fails as soon as one of them failed — one legal schedule), builds the
happens-before relation of what really runs (host program order, submission, signal → wait, with one
event per signal-list entry since queues signal a list in order), and rejects (:class:`InvalidProgram`) every program whose outcome could depend on timing or on
behaviour IREE's CTS calls undefined:

* two signals of one semaphore that are not ordered by happens-before (racing / non-monotonic signals);
* a semaphore that is signaled and also fails (HAL_SEMANTICS "timing-dependent case": failing a
  semaphore after it reached a value someone waits on), and signal-after-fail (S8, UB);
* a wait for a value ``<= initial`` on a semaphore that fails, unless the failure is already known to the
  host when the wait is made (failure is checked first, S9.1, so the outcome would race the failure);
* two operations touching overlapping bytes, one writing, without happens-before (data race) — also
  inside one command buffer, whose commands may overlap without a barrier (CB9);
* use of a queue-allocated (transient) buffer outside its alloca → dealloca lifetime, and reading its
  bytes before anything wrote them (contents are undefined after alloca, Q8);
* an operation whose wait fails while another of its waits is unresolved (when that failure reaches
  its signals is the implementation's choice: docs/differential.md, D2);
* an operation that never resolves, or a host wait that would block forever;
* an operation whose completion the host never waits for before it reads buffers.

For valid programs the model's outcome is *the* outcome, so it predicts what every device must report:
final semaphore values (or failure code and the set of messages that may win a failure race), the status
of every host wait, final buffer bytes, and, per submission, whether IREE's queue call itself raises the
failure of a wait (``Expected.submits``; ``None`` where that depends on timing).

``mode="sync"`` models local-sync instead: a queue call blocks until its waits resolve, runs inline,
and a failed wait is raised by the call with nothing signaled (HAL_SEMANTICS profile [H], Q3).
"""

from __future__ import annotations

from dataclasses import dataclass, field

WAIT = 10.0  # seconds: the bound on every host wait (a hang fails a test, it never blocks CI)
FAIL_CODE = "UNKNOWN"  # IREE's Python HalSemaphore.fail(message) always fails with UNKNOWN

# -- commands ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fill:
    target: str
    offset: int
    length: int
    pattern: int
    pattern_length: int


@dataclass(frozen=True)
class Copy:
    source: str
    source_offset: int
    target: str
    target_offset: int
    length: int


@dataclass(frozen=True)
class Update:
    target: str
    offset: int
    data: bytes


# -- steps ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostSignal:
    sem: int
    value: int


@dataclass(frozen=True)
class HostFail:
    sem: int
    message: str


@dataclass(frozen=True)
class HostWait:
    sem: int
    value: int


@dataclass(frozen=True)
class Execute:
    wait: tuple
    signal: tuple
    commands: tuple = ()
    direct: bool = False  # ours: a lone command goes through queue_fill / queue_update / queue_copy


@dataclass(frozen=True)
class Barrier:
    wait: tuple
    signal: tuple


@dataclass(frozen=True)
class QueueCopy:
    """``queue_copy`` of the whole source into the target at offset 0 (IREE's Python signature)."""

    wait: tuple
    signal: tuple
    source: str
    target: str


@dataclass(frozen=True)
class Alloca:
    wait: tuple
    signal: tuple
    transient: str
    size: int


@dataclass(frozen=True)
class Dealloca:
    wait: tuple
    signal: tuple
    transient: str


QUEUE_OPS = (Execute, Barrier, QueueCopy, Alloca, Dealloca)
HOST_STEPS = (HostSignal, HostFail, HostWait)


@dataclass(frozen=True)
class Program:
    semaphores: tuple  # initial values
    buffers: tuple  # initial bytes
    steps: tuple

    def pretty(self) -> str:
        lines = [f"semaphores (initial): {list(self.semaphores)}"]
        lines += [f"b{i}: {len(b)} B {b.hex()}" for i, b in enumerate(self.buffers)]
        for i, st in enumerate(self.steps):
            lines.append(f"{i:3d} {_fmt(st)}")
        return "\n".join(lines)


def _tp(lst) -> str:
    return "[" + ", ".join(f"s{s}>={v}" for s, v in lst) + "]"


def _fmt(st) -> str:
    if isinstance(st, HostSignal):
        return f"host signal s{st.sem} = {st.value}"
    if isinstance(st, HostFail):
        return f"host fail s{st.sem} ({st.message!r})"
    if isinstance(st, HostWait):
        return f"host wait s{st.sem} >= {st.value}"
    head = f"{type(st).__name__.lower()} wait {_tp(st.wait)} signal " + \
        "[" + ", ".join(f"s{s}={v}" for s, v in st.signal) + "]"
    if isinstance(st, Execute):
        cmds = "; ".join(_fmt_cmd(c) for c in st.commands)
        return head + (" direct" if st.direct else "") + f" {{{cmds}}}"
    if isinstance(st, QueueCopy):
        return head + f" {st.source} -> {st.target}"
    if isinstance(st, Alloca):
        return head + f" {st.transient} ({st.size} B)"
    if isinstance(st, Dealloca):
        return head + f" {st.transient}"
    return head


def _fmt_cmd(c) -> str:
    if isinstance(c, Fill):
        return f"fill {c.target}[{c.offset}:+{c.length}] {c.pattern:#x}/{c.pattern_length}"
    if isinstance(c, Copy):
        return f"copy {c.source}[{c.source_offset}:+{c.length}] -> {c.target}[{c.target_offset}]"
    return f"update {c.target}[{c.offset}:+{len(c.data)}] {c.data.hex()}"


# -- statuses (what runners record) and expectations (what the model predicts) -------------------------


@dataclass(frozen=True)
class Status:
    """A call's result: code name ("OK", "DEADLINE_EXCEEDED", "UNKNOWN", …) and message (failures)."""

    code: str
    message: str | None = None

    def __str__(self) -> str:
        return self.code if self.message is None else f"{self.code}({self.message!r})"


OK = Status("OK")
TIMEOUT = Status("DEADLINE_EXCEEDED")


@dataclass(frozen=True)
class Expect:
    """An expected status: the code, and for failures the messages that may win (a failure race)."""

    code: str
    messages: frozenset | None = None

    def matches(self, st: Status) -> bool:
        if st.code != self.code:
            return False
        return self.messages is None or st.message in self.messages

    def __str__(self) -> str:
        return self.code if self.messages is None else f"{self.code}{sorted(self.messages)}"


EXPECT_OK = Expect("OK")
EXPECT_TIMEOUT = Expect("DEADLINE_EXCEEDED")


class _FailOf:
    """Placeholder for "the failure of semaphore s": its possible messages are known at the end."""

    __slots__ = ("sem",)

    def __init__(self, sem):
        self.sem = sem


class InvalidProgram(Exception):
    """The program's outcome could depend on timing or on undefined behaviour (see module doc)."""


@dataclass
class Expected:
    mode: str
    eligible: bool = True  # sync mode: False when a queue call would block on an unresolved wait
    reason: str = ""
    submits: dict = field(default_factory=dict)  # step -> Expect | None (timing-dependent)
    doomed: set = field(default_factory=set)  # queue-op steps that fail instead of running
    waits: dict = field(default_factory=dict)  # HostWait step -> Expect
    timeouts: dict = field(default_factory=dict)  # HostWait step -> seconds
    finals: list = field(default_factory=list)  # per semaphore: int value or Expect (failure)
    buffers: list = field(default_factory=list)  # final bytes per buffer


# -- the model -----------------------------------------------------------------------------------------


class _Transient:
    __slots__ = ("size", "alloca_step", "dealloca_step", "state", "data", "defined")

    def __init__(self, size, alloca_step):
        self.size = size
        self.alloca_step = alloca_step
        self.dealloca_step = None
        self.state = "reserved"
        self.data = None
        self.defined = None


class _Op:
    __slots__ = ("step", "st", "sub_anc", "eid", "last_eid", "doomed", "accesses", "known", "failing")

    def __init__(self, step, st, sub_anc):
        self.step = step
        self.st = st
        self.sub_anc = sub_anc
        self.eid = None  # the op's body (or failure) event
        self.last_eid = None  # its last signal (or fail) event
        self.doomed = False
        self.accesses = ()
        self.known = ()  # per wait: its semaphore's failure was known to the host at submission
        self.failing = ()  # indices of the waits that had failed when the op failed


class Analysis:
    """Incremental model of a program (use :func:`analyze`). Public state is read by the generator."""

    def __init__(self, semaphores, buffers, mode="async"):
        assert mode in ("async", "sync")
        self.mode = mode
        self.initial = list(semaphores)
        self.value = list(semaphores)
        self.signals = [[] for _ in semaphores]  # per sem: [(value, eid)] in order
        self.fails = [[] for _ in semaphores]  # per sem: [(eid, ("msg", text) | ("op", step))]
        self.low_waits = [[] for _ in semaphores]  # waits with value <= initial: [where]
        self.buffers = [bytearray(b) for b in buffers]
        self.sizes = {f"b{i}": len(b) for i, b in enumerate(buffers)}
        self.transients: dict[str, _Transient] = {}
        self.anc: list[frozenset] = []  # per event id: its happens-before ancestors (event ids)
        self.host_anc: frozenset = frozenset()  # everything that happened before the host's next step
        self.ops: dict[int, _Op] = {}
        self.pending: list[_Op] = []
        self.accesses: list = []  # (eid, ref, lo, hi, write) of every op that ran or failed, run order
        self.exp = Expected(mode)
        self.steps: list = []

    # -- helpers -------------------------------------------------------------------------------------

    def _event(self, anc) -> int:
        self.anc.append(frozenset(anc))
        return len(self.anc) - 1

    def failed(self, s) -> bool:
        return bool(self.fails[s])

    def _minimal_fails(self, s):
        evs = self.fails[s]
        return [(e, m) for e, m in evs if not any(o != e and o in self.anc[e] for o, _ in evs)]

    def possible_messages(self) -> list:
        """Per semaphore, the messages its failure may carry. The first failure wins, so any failer that
        no other failer certainly precedes (``_minimal_fails``) may be the one. An op that fails its
        signals passes on the failure of its first failed wait (list order) when that one was already
        failed at submission, else that of whichever failed wait failed first. (Least fixpoint: an op
        re-failing a semaphore that failed it adds nothing.)"""
        out = [frozenset() for _ in self.initial]
        changed = True
        while changed:
            changed = False
            for s in range(len(self.initial)):
                msgs = set()
                for _, src in self._minimal_fails(s):
                    if src[0] == "msg":
                        msgs.add(src[1])
                        continue
                    op = self.ops[src[1]]
                    firsts = op.failing[:1] if op.known[op.failing[0]] else op.failing
                    for i in firsts:
                        msgs |= out[op.st.wait[i][0]]
                if msgs != out[s]:
                    out[s] = frozenset(msgs)
                    changed = True
        return out

    def _fail_anc(self, s) -> frozenset:
        """What certainly happened before anyone observes the semaphore failed."""
        sets = [self.anc[e] | {e} for e, _ in self._minimal_fails(s)]
        return frozenset.intersection(*sets) if sets else frozenset()

    def _release(self, s, v):
        """The signal event that first brings ``s`` to ``>= v`` (None if the initial value does)."""
        if v <= self.initial[s]:
            return None
        for val, e in self.signals[s]:
            if val >= v:
                return e
        return None

    def _release_anc(self, s, v) -> frozenset:
        e = self._release(s, v)
        return frozenset() if e is None else self.anc[e] | {e}

    def known_failed(self, s, anc) -> bool:
        return any(e in anc for e, _ in self.fails[s])

    def resolved(self, s, v) -> bool:
        return self.failed(s) or self.value[s] >= v

    def wait_anc(self, waits, base) -> frozenset:
        """Happens-before ancestors of an op with these waits submitted at ``base`` (if it runs)."""
        anc = set(base)
        for s, v in waits:
            anc |= self._release_anc(s, v)
        return frozenset(anc)

    def size_of(self, ref) -> int:
        if ref in self.sizes:
            return self.sizes[ref]
        if ref in self.transients:
            return self.transients[ref].size
        raise InvalidProgram(f"unknown buffer {ref}")

    # -- steps ---------------------------------------------------------------------------------------

    def feed(self, step: int, st) -> None:
        self.steps.append(st)
        if isinstance(st, HostSignal):
            self._host_signal(step, st)
        elif isinstance(st, HostFail):
            self._host_fail(step, st)
        elif isinstance(st, HostWait):
            self._host_wait(step, st)
        elif isinstance(st, QUEUE_OPS):
            self._submit(step, st)
        else:
            raise InvalidProgram(f"step {step}: unknown step {st!r}")
        if self.mode == "async":
            self._run_ready()

    def _check_sem(self, s, where):
        if not (isinstance(s, int) and 0 <= s < len(self.initial)):
            raise InvalidProgram(f"{where}: no semaphore s{s}")

    def _host_signal(self, step, st):
        s, v = st.sem, st.value
        self._check_sem(s, f"step {step}")
        if self.failed(s):
            raise InvalidProgram(f"step {step}: signal of failed s{s} (signal after fail is UB, S8)")
        if v <= self.value[s]:
            raise InvalidProgram(f"step {step}: non-increasing signal s{s} {self.value[s]} -> {v}")
        if self.signals[s] and self.signals[s][-1][1] not in self.host_anc:
            raise InvalidProgram(f"step {step}: host signal of s{s} races the queue's earlier signal of it")
        e = self._event(self.host_anc)
        self.signals[s].append((v, e))
        self.value[s] = v
        self.host_anc = self.host_anc | {e}
        self.exp.submits[step] = EXPECT_OK

    def _host_fail(self, step, st):
        s = st.sem
        self._check_sem(s, f"step {step}")
        e = self._event(self.host_anc)
        self._fail(s, e, ("msg", st.message), f"step {step}")
        self.host_anc = self.host_anc | {e}
        self.exp.submits[step] = EXPECT_OK

    def _fail(self, s, e, src, where):
        if self.signals[s]:
            raise InvalidProgram(f"{where}: s{s} fails after being signaled (timing-dependent waits)")
        if self.low_waits[s]:
            raise InvalidProgram(f"{where}: s{s} fails but {self.low_waits[s][0]} waits for a value <= its "
                                 "initial value (satisfied or failed depending on timing)")
        self.fails[s].append((e, src))

    def _note_wait(self, s, v, anc, where):
        """A wait for a value <= initial on a semaphore that fails races the failure (S9 checks failure
        first) unless the failure is known to the host when the wait is made. (Host waits too: IREE fails
        an op's signals inside the queue call that raises, ours on a worker thread.)"""
        if v <= self.initial[s]:
            if self.failed(s):
                if not self.known_failed(s, anc):
                    raise InvalidProgram(f"{where}: waits s{s}>={v} (<= initial) while s{s} fails unobserved")
            else:
                self.low_waits[s].append(where)

    def _host_wait(self, step, st):
        s, v = st.sem, st.value
        self._check_sem(s, f"step {step}")
        self._note_wait(s, v, self.host_anc, f"host wait (step {step})")
        self.exp.timeouts[step] = WAIT
        if self.failed(s):
            self.exp.waits[step] = _FailOf(s)
            self.host_anc = self.host_anc | self._fail_anc(s)
        elif self.value[s] >= v:
            self.exp.waits[step] = EXPECT_OK
            self.host_anc = self.host_anc | self._release_anc(s, v)
        elif self.mode == "sync":
            # Nothing else runs while the only host thread waits: a deterministic timeout.
            self.exp.waits[step] = EXPECT_TIMEOUT
            self.exp.timeouts[step] = 0.0
        else:
            raise InvalidProgram(f"step {step}: host wait s{s}>={v} would block forever")

    def _submit(self, step, st):
        where = f"step {step} ({type(st).__name__})"
        for lst in (st.wait, st.signal):
            for s, v in lst:
                self._check_sem(s, where)
                if not (isinstance(v, int) and 0 <= v <= 2**31 - 2):
                    raise InvalidProgram(f"{where}: payload {v!r}")
        if len({s for s, _ in st.signal}) != len(st.signal):
            raise InvalidProgram(f"{where}: a semaphore appears twice in the signal list")
        if not st.signal:
            raise InvalidProgram(f"{where}: an op that signals nothing cannot be waited for")
        self._static_checks(step, st, where)
        op = _Op(step, st, self.host_anc)
        op.known = tuple(self.known_failed(s, self.host_anc) for s, _ in st.wait)
        self.ops[step] = op
        for s, v in st.wait:
            self._note_wait(s, v, self.host_anc, where)
        if self.mode == "sync":
            unresolved = [(s, v) for s, v in st.wait if not self.resolved(s, v)]
            if unresolved:
                self.exp.eligible = False
                self.exp.reason = f"{where} waits on unresolved {_tp(unresolved)} (local-sync would block)"
                raise _Ineligible()
            failing = [s for s, v in st.wait if self.failed(s)]
            if failing:
                # [H] local-sync: the failed wait is returned by the call; nothing runs or is signaled.
                self.exp.submits[step] = _FailOf(failing[0])
                op.doomed = True
                op.eid = op.last_eid = self._event(self.host_anc)
                self.exp.doomed.add(step)
                self.host_anc = self.host_anc | {op.eid}
                return
            self.exp.submits[step] = EXPECT_OK
            self._execute(op)
            self.host_anc = self.host_anc | self.anc[op.last_eid] | {op.last_eid}  # returned after it ran
            return
        self.exp.submits[step] = self._predict_submit(st.wait)
        self.pending.append(op)

    def _predict_submit(self, waits):
        """IREE local-task (3.13): the queue call scans its waits in order and raises the first failed
        one met before any unsatisfied one (the signals are failed too). None = depends on timing."""
        uncertain = False
        for s, v in waits:
            if self.known_failed(s, self.host_anc):
                return None if uncertain else _FailOf(s)
            if self.failed(s):
                return None  # fails, but maybe not yet when the call looks
            rel = self._release(s, v)
            if v <= self.initial[s] or (rel is not None and rel in self.host_anc):
                continue  # certainly satisfied
            if self.value[s] >= v:
                uncertain = True  # satisfied or still pending, depending on timing
                continue
            return EXPECT_OK  # certainly pending: the call returns and the op waits
        return EXPECT_OK

    def _static_checks(self, step, st, where):
        if isinstance(st, Alloca):
            if st.transient in self.transients or st.transient in self.sizes:
                raise InvalidProgram(f"{where}: buffer name {st.transient} reused")
            if st.size <= 0:
                raise InvalidProgram(f"{where}: alloca size {st.size}")
            self.transients[st.transient] = _Transient(st.size, step)
            return
        refs = []
        if isinstance(st, Dealloca):
            refs = [st.transient]
            if st.transient not in self.transients:
                raise InvalidProgram(f"{where}: dealloca of {st.transient}, which no earlier alloca returned")
            t = self.transients[st.transient]
            if t.dealloca_step is None:  # (a second one is valid only if the first fails: _body checks)
                t.dealloca_step = step
        elif isinstance(st, QueueCopy):
            refs = [st.source, st.target]
            if st.source == st.target:
                raise InvalidProgram(f"{where}: queue_copy of a buffer onto itself")
            if self.size_of(st.source) > self.size_of(st.target):
                raise InvalidProgram(f"{where}: queue_copy source larger than target")
        elif isinstance(st, Execute):
            for c in st.commands:
                self._check_command(c, where)
                refs += [c.source, c.target] if isinstance(c, Copy) else [c.target]
            if st.direct and len(st.commands) != 1:
                raise InvalidProgram(f"{where}: direct needs exactly one command")
            ranges = [self._ranges(c) for c in st.commands]
            for i in range(len(ranges)):
                for j in range(i):
                    if _conflict(ranges[i], ranges[j]):
                        raise InvalidProgram(f"{where}: commands {j} and {i} race (no barrier inside a command "
                                             "buffer, CB9)")
        for r in refs:
            self.size_of(r)

    def _check_command(self, c, where):
        if isinstance(c, Fill):
            size = self.size_of(c.target)
            pl = c.pattern_length
            if pl not in (1, 2, 4) or not 0 <= c.pattern < 1 << (8 * pl):
                raise InvalidProgram(f"{where}: bad fill pattern")
            if c.length <= 0 or c.offset % pl or c.length % pl or c.offset + c.length > size:
                raise InvalidProgram(f"{where}: bad fill range")
        elif isinstance(c, Copy):
            if c.length <= 0 or c.source_offset + c.length > self.size_of(c.source) or \
                    c.target_offset + c.length > self.size_of(c.target):
                raise InvalidProgram(f"{where}: bad copy range")
            if c.source == c.target and c.source_offset < c.target_offset + c.length and \
                    c.target_offset < c.source_offset + c.length:
                raise InvalidProgram(f"{where}: overlapping copy (INVALID_ARGUMENT, CB8)")
        elif isinstance(c, Update):
            if not c.data or c.offset + len(c.data) > self.size_of(c.target):
                raise InvalidProgram(f"{where}: bad update range")
        else:
            raise InvalidProgram(f"{where}: unknown command {c!r}")

    def _ranges(self, c):
        """(ref, lo, hi, write) accessed by a command."""
        if isinstance(c, Fill):
            return [(c.target, c.offset, c.offset + c.length, True)]
        if isinstance(c, Update):
            return [(c.target, c.offset, c.offset + len(c.data), True)]
        return [(c.source, c.source_offset, c.source_offset + c.length, False),
                (c.target, c.target_offset, c.target_offset + c.length, True)]

    def op_ranges(self, st):
        if isinstance(st, Execute):
            return [r for c in st.commands for r in self._ranges(c)]
        if isinstance(st, QueueCopy):
            n = self.size_of(st.source)
            return [(st.source, 0, n, False), (st.target, 0, n, True)]
        if isinstance(st, (Alloca, Dealloca)):
            return [(st.transient, 0, self.transients[st.transient].size, True)]
        return []

    # -- execution -----------------------------------------------------------------------------------

    def _run_ready(self):
        progress = True
        while progress:
            progress = False
            for op in list(self.pending):
                if all(self.resolved(s, v) for s, v in op.st.wait) or any(self.failed(s) for s, _ in op.st.wait):
                    self.pending.remove(op)
                    self._execute(op)
                    progress = True

    def _execute(self, op: _Op):
        st = op.st
        where = f"step {op.step} ({type(st).__name__})"
        failing = [s for s, v in st.wait if self.failed(s)]
        if failing:
            unresolved = [(s, v) for s, v in st.wait if not self.resolved(s, v)]
            if unresolved:
                # When its failure propagates is the implementation's choice: ours at the first failed
                # wait, IREE's local-task only once every wait resolved (or in the queue call, D1).
                raise InvalidProgram(f"{where}: a wait fails while {_tp(unresolved)} are unresolved")
            op.doomed = True
            op.failing = tuple(i for i, (s, _) in enumerate(st.wait) if self.failed(s))
            self.exp.doomed.add(op.step)
            anc = frozenset.intersection(*(self._fail_anc(s) for s in failing)) | op.sub_anc
            op.eid = self._event(anc)  # a failed op touches no buffer: it races nothing
            # The queue fails its signal list in order (IREE list_fail): one event per semaphore.
            prev = op.eid
            for s, _ in st.signal:
                e = self._event(self.anc[prev] | {prev})
                self._fail(s, e, ("op", op.step), where)
                prev = e
            op.last_eid = prev
            return
        op.eid = self._event(self.wait_anc(st.wait, op.sub_anc))
        self._record_accesses(op, where)
        self._body(op, where)
        # The queue signals its list in order (IREE list_signal): a waiter released by the first
        # semaphore may run before the later ones are signaled, so each signal is its own event.
        prev = op.eid
        for s, v in st.signal:
            e = self._event(self.anc[prev] | {prev})
            if self.failed(s):
                raise InvalidProgram(f"{where}: signals failed s{s} (signal after fail is UB, S8)")
            if v <= self.value[s]:
                raise InvalidProgram(f"{where}: non-increasing signal s{s} {self.value[s]} -> {v}")
            if self.signals[s] and self.signals[s][-1][1] not in self.anc[e]:
                raise InvalidProgram(f"{where}: its signal of s{s} races an earlier signal of s{s}")
            self.signals[s].append((v, e))
            self.value[s] = v
            prev = e
        op.last_eid = prev

    def _record_accesses(self, op, where):
        """Conflicting accesses of two ops that both run must be ordered by happens-before."""
        mine = [(op.eid, *r) for r in self.op_ranges(op.st)]
        anc = self.anc[op.eid]
        for e, ref, lo, hi, w in self.accesses:
            for _, ref2, lo2, hi2, w2 in mine:
                if ref == ref2 and lo < hi2 and lo2 < hi and (w or w2) and e not in anc:
                    raise InvalidProgram(f"{where}: data race on {ref}[{max(lo, lo2)}:{min(hi, hi2)}] with an "
                                         "unordered operation")
        self.accesses += mine
        op.accesses = mine

    def _store(self, ref, where, reading=None):
        if ref in self.transients:
            t = self.transients[ref]
            if t.state != "committed":
                raise InvalidProgram(f"{where}: uses transient {ref} while it is {t.state}")
            if reading is not None:
                lo, hi = reading
                if not all(t.defined[lo:hi]):
                    raise InvalidProgram(f"{where}: reads {ref}[{lo}:{hi}] before anything wrote it (undefined)")
            return t.data, t.defined
        return self.buffers[int(ref[1:])], None

    def _write(self, ref, off, data, where):
        store, defined = self._store(ref, where)
        store[off:off + len(data)] = data
        if defined is not None:
            defined[off:off + len(data)] = b"\x01" * len(data)

    def _body(self, op, where):
        st = op.st
        if isinstance(st, Alloca):
            t = self.transients[st.transient]
            if t.state != "reserved":
                raise InvalidProgram(f"{where}: alloca of {st.transient} runs twice")
            t.state, t.data, t.defined = "committed", bytearray(t.size), bytearray(t.size)
        elif isinstance(st, Dealloca):
            t = self.transients[st.transient]
            if t.state != "committed":
                raise InvalidProgram(f"{where}: dealloca of {st.transient} while it is {t.state}")
            t.state, t.data, t.defined = "decommitted", None, None
        elif isinstance(st, QueueCopy):
            n = self.size_of(st.source)
            src, _ = self._store(st.source, where, reading=(0, n))
            self._write(st.target, 0, bytes(src[:n]), where)
        elif isinstance(st, Execute):
            for c in st.commands:
                if isinstance(c, Fill):
                    pat = c.pattern.to_bytes(c.pattern_length, "little")
                    self._write(c.target, c.offset, pat * (c.length // c.pattern_length), where)
                elif isinstance(c, Update):
                    self._write(c.target, c.offset, c.data, where)
                else:
                    src, _ = self._store(c.source, where, reading=(c.source_offset, c.source_offset + c.length))
                    self._write(c.target, c.target_offset, bytes(src[c.source_offset:c.source_offset + c.length]),
                                where)

    # -- end of program ------------------------------------------------------------------------------

    def finish(self) -> Expected:
        if self.pending:
            op = self.pending[0]
            raise InvalidProgram(f"step {op.step}: waits {_tp(op.st.wait)} are never resolved")
        for op in self.ops.values():
            if not op.doomed and op.eid not in self.host_anc:
                raise InvalidProgram(f"step {op.step}: the host never waits for this op before reading buffers")
        for s in range(len(self.initial)):
            self.exp.finals.append(_FailOf(s) if self.failed(s) else self.value[s])
        possible = self.possible_messages()

        def resolve(x):
            return Expect(FAIL_CODE, possible[x.sem]) if isinstance(x, _FailOf) else x

        self.exp.submits = {k: resolve(v) for k, v in self.exp.submits.items()}
        self.exp.waits = {k: resolve(v) for k, v in self.exp.waits.items()}
        self.exp.finals = [resolve(v) for v in self.exp.finals]
        self.exp.buffers = [bytes(b) for b in self.buffers]
        return self.exp


class _Ineligible(Exception):
    pass


def _conflict(a, b) -> bool:
    return any(r1 == r2 and lo1 < hi2 and lo2 < hi1 and (w1 or w2)
               for r1, lo1, hi1, w1 in a for r2, lo2, hi2, w2 in b)


def analyze(program: Program, mode: str = "async", final: bool = True):
    """Model ``program``; raise InvalidProgram if its outcome is not determined (async mode).

    Returns :class:`Expected` (``final``) or the :class:`Analysis` itself (``final=False``, a prefix).
    In sync mode a program that local-sync cannot run without blocking returns ``eligible=False``.
    """
    an = Analysis(program.semaphores, program.buffers, mode)
    try:
        for i, st in enumerate(program.steps):
            an.feed(i, st)
    except _Ineligible:
        return an.exp  # (placeholders unresolved: nothing of it is compared)
    return an.finish() if final else an


def wait_before_signal(program: Program) -> bool:
    """True when some queue op is submitted before a wait of it is resolved (local-sync would block)."""
    return not analyze(program, "sync").eligible
