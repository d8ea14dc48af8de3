"""Random valid HAL programs as schedule documents (``docs/campaigns.md``).

:func:`generate` builds a program from a seed — semaphores, buffers, host signals and fails, queue
operations over several queues (fill, copy, update, dispatch, barrier, execute of command buffers
with fills/copies/updates/dispatches/barriers, alloca/dealloca) — as a plain dict that
:func:`halsim.schedule.parse_schedule` accepts, so any program (and any finding) replays with
``halsim check FILE``. :func:`programs` is a hypothesis strategy built on the same code.

Validity by construction. Every queue operation signals the next value of one *timeline* semaphore
``t<k>`` and waits for that timeline's previous value (so signals of one semaphore are ordered).
For every byte range it touches, the generator adds a wait on the latest earlier operation it
conflicts with (a write against a read or write of overlapping bytes) that is not already an
ancestor; inside a command buffer it inserts an execution barrier before a command that conflicts
with one since the last barrier. An ``alloca`` counts as a write of the whole transient buffer and a
``dealloca`` too, so uses are ordered between them (and none follows a ``dealloca``, also one that
fails); but a transient's contents are undefined until something writes them (HAL_SEMANTICS Q8: a
real GPU returns whatever the memory held), so an operation reads only the bytes of a transient that
an earlier operation, which it is then ordered after, wrote (a dispatch's ``work_items`` elements,
not its whole binding). Gate semaphores ``g<k>`` are signaled by the host *after* operations that
wait for them were submitted (wait-before-signal), or failed (``fail_prob``); the program ends with
one host wait per timeline. With ``drop_sync = 0`` a program has no findings on any ``sim``
personality; ``drop_sync = p`` drops each needed wait or barrier with probability ``p``, which makes
buggy programs on purpose.

>>> doc = generate(7, size=6, drop_sync=0.0)
>>> sorted(doc)
['buffers', 'command_buffers', 'description', 'device', 'expect', 'host', 'semaphores']
>>> from halsim.schedule import parse_schedule, run_schedule
>>> from halsim.checks import check_trace
>>> check_trace(run_schedule(parse_schedule(doc)).trace).findings
[]
>>> generate(7, size=6) == generate(7, size=6)
True
"""

from __future__ import annotations

import random

from reference.kernels import ELEMENT, KERNELS as SPECS, work_items

# kernels and the access of each binding (reference/kernels)
KERNELS = {
    "negate": ("r", "w"),
    "double_it": ("r", "w"),
    "scale_and_offset": ("r", "w"),
    "write_constants": ("w",),
    "write_workgroup_ids": ("w",),
    "spin": ("rw",),
}
CONSTANTS = {"scale_and_offset": 2, "write_constants": 4, "spin": 1}
BUFFER_SIZES = (64, 128, 256, 512, 1024)
STEP_WEIGHTS = (("execute", 6), ("fill", 2), ("copy", 2), ("update", 1), ("dispatch", 3), ("barrier", 1),
                ("alloca", 1), ("dealloca", 1), ("signal", 2), ("fail", 0), ("wait", 1))
FAIL_MESSAGES = ("device lost", "bad input", "out of memory", "user cancelled")


#: The knobs of :func:`generate` a campaign may set (``halsim fuzz`` options, a sweep spec's
#: ``[program] generator`` table and ``gen.*`` parameters).
KNOBS = ("seed", "size", "drop_sync", "queues", "timelines", "gates", "fail_prob", "wait_before_signal")
#: Most steps a program may propose: a step costs about 0.4 ms to generate and run, so this is minutes.
MAX_SIZE = 1_000_000
#: Most timeline or gate semaphores.
MAX_SEMAPHORES = 1_000


def knob_problem(name: str, value) -> str | None:
    """What is wrong with ``value`` for generator knob ``name`` (None: nothing), checked before any
    program is generated: the one check behind ``halsim fuzz``'s options and a sweep spec's knobs.
    The reason names no value (the caller shows it its own way).

    >>> knob_problem("size", 0), knob_problem("drop_sync", 2.0), knob_problem("queues", 1.5)
    ('must be >= 1', 'must be in [0, 1]', 'must be an integer >= 1')
    >>> knob_problem("size", 2**64), knob_problem("timelines", None), knob_problem("gates", 0)
    ('must be <= 1000000', None, None)
    """
    def integer(lo, hi=None):
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be an integer >= {lo}" if hi is None else f"must be an integer in [{lo}, {hi}]"
        if value < lo:
            return f"must be >= {lo}"
        if hi is not None and value > hi:
            return f"must be <= {hi}"
        return None

    if name == "seed":  # (>= 0: random.Random(-k) is random.Random(k), a negative seed would repeat one)
        return "must be an integer" if isinstance(value, bool) or not isinstance(value, int) else integer(0)
    if name == "size":
        return integer(1, MAX_SIZE)
    if name == "queues":
        return integer(1)
    if name == "timelines":
        return None if value is None else integer(1, MAX_SEMAPHORES)
    if name == "gates":
        return integer(0, MAX_SEMAPHORES)
    if name in ("drop_sync", "fail_prob"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "must be a number in [0, 1]"
        return None if 0 <= value <= 1 else "must be in [0, 1]"  # (NaN too)
    if name == "wait_before_signal":
        return None if isinstance(value, bool) else "must be true or false"
    return f"unknown knob (expected one of: {', '.join(KNOBS)})"


class Chooser:
    """Random choices from ``random.Random`` or from hypothesis's ``draw`` (so failures shrink)."""

    def __init__(self, rng: random.Random | None = None, draw=None):
        self._rng, self._draw = rng, draw
        if draw is not None:
            from hypothesis import strategies as st
            self._st = st

    def int(self, lo: int, hi: int) -> int:
        if self._draw is not None:
            return self._draw(self._st.integers(lo, hi))
        return self._rng.randint(lo, hi)

    def prob(self, p: float) -> bool:
        """True with probability ``p`` (resolution 1/1000)."""
        if p <= 0:
            return False
        if p >= 1:
            return True
        return self.int(0, 999) < round(p * 1000)

    def pct(self, p: int) -> bool:
        """True with probability ``p`` percent."""
        return self.int(0, 99) < p

    def choice(self, seq):
        seq = list(seq)
        return seq[self.int(0, len(seq) - 1)]

    def bytes(self, n: int) -> bytes:
        if self._draw is not None:
            return self._draw(self._st.binary(min_size=n, max_size=n))
        return bytes(self._rng.getrandbits(8) for _ in range(n))

    def weighted(self, pairs):
        pairs = [(k, w) for k, w in pairs if w > 0]
        x = self.int(0, sum(w for _, w in pairs) - 1)
        for k, w in pairs:
            if x < w:
                return k
            x -= w
        raise AssertionError


class _Op:
    __slots__ = ("tl", "value", "anc", "gates", "failed")

    def __init__(self, tl, value, anc, gates, failed):
        self.tl, self.value, self.anc, self.gates, self.failed = tl, value, anc, gates, failed


class _Gen:
    def __init__(self, ch: Chooser, size: int, drop_sync: float, queues: int, timelines: int, gates: int,
                 fail_prob: float, wait_before_signal: bool):
        self.ch, self.size, self.drop, self.queues = ch, size, drop_sync, queues
        self.fail_prob, self.wbs = fail_prob, wait_before_signal
        self.tl_count = timelines
        self.gate_count = gates if wait_before_signal else 0
        self.tl_last = [0] * timelines       # last value assigned on each timeline
        self.tl_op: dict[tuple[int, int], int] = {}   # (timeline, value) -> op index
        self.gate_signaled = [0] * self.gate_count
        self.gate_pending = [0] * self.gate_count
        self.gate_failed = [False] * self.gate_count
        self.gate_doomed = [ch.prob(fail_prob) for _ in range(self.gate_count)]
        self.doomed = 0
        self.doomed_waits: list[str] = []
        self.ops: list[_Op] = []
        self.accesses: list[tuple[int, str, int, int, bool]] = []   # (op, buffer, lo, hi, write)
        self.buffers: dict[str, int] = {}
        # name -> {"size", "state": "doomed"|"live"|"dead", "written": bit i set = byte i defined}
        self.transients: dict[str, dict] = {}
        self.host: list[dict] = []
        self.cbs: dict[str, dict] = {}

    # -- buffers and ranges ---------------------------------------------------------------------------

    def live(self) -> list[str]:
        return list(self.buffers) + [n for n, t in self.transients.items() if t["state"] == "live"]

    def size_of(self, name: str) -> int:
        return self.buffers[name] if name in self.buffers else self.transients[name]["size"]

    def readable(self, names: list[str]) -> list[str]:
        """``names`` less the transients with no 16-byte block written yet."""
        return [n for n in names if n not in self.transients or self.written_blocks(n)]

    def written_blocks(self, name: str) -> list[int]:
        written = self.transients[name]["written"]
        return [b for b in range(self.size_of(name) // 16) if _covers(written, b * 16, b * 16 + 16)]

    def span(self, name: str, max_len: int | None = None, read: bool = False) -> tuple[int, int]:
        """A random 16-byte-aligned (lo, hi) of ``name``; one that ``read``s a transient lies in
        blocks already written (see :meth:`readable`)."""
        blocks = self.size_of(name) // 16
        most = (max_len or blocks * 16) // 16 or 1
        if read and name in self.transients:
            written = self.written_blocks(name)
            off = self.ch.choice(written)
            run = 1
            while off + run in written:
                run += 1
            n = self.ch.int(1, min(run, most))
        else:
            n = self.ch.int(1, min(blocks, most))
            off = self.ch.int(0, blocks - n)
        return off * 16, (off + n) * 16

    def rng_ref(self, name: str, max_len: int | None = None, read: bool = False):
        """A random 16-byte-aligned range of ``name`` (see :meth:`span`): (ref, lo, hi)."""
        lo, hi = self.span(name, max_len, read)
        if lo == 0 and hi == self.size_of(name) and self.ch.prob(0.5):
            return name, lo, hi
        return {"buffer": name, "offset": lo, "length": hi - lo}, lo, hi

    # -- one command's accesses -----------------------------------------------------------------------

    def command(self, kind=None, transients=True):
        """(command dict, [(buffer, lo, hi, write)], [(buffer, lo, hi) it stores]) of a random
        fill/copy/update/dispatch, or None. Command buffers are recorded before any step runs, so
        they use declared buffers only."""
        ch, bufs = self.ch, (self.live() if transients else list(self.buffers))
        kind = kind or ch.weighted((("fill", 3), ("copy", 3), ("update", 1), ("dispatch", 3)))
        if kind == "fill":
            name = ch.choice(bufs)
            ref, lo, hi = self.rng_ref(name)
            return {"cmd": "fill", "target": ref, "pattern": ch.int(0, 255), "pattern_length": ch.choice((1, 2, 4))}, \
                [(name, lo, hi, True)], [(name, lo, hi)]
        if kind == "update":
            name = ch.choice(bufs)
            ref, lo, hi = self.rng_ref(name, 64)
            data = [ch.int(0, 255) for _ in range(hi - lo)]
            return {"cmd": "update", "target": {"buffer": name, "offset": lo, "length": hi - lo}, "data": data}, \
                [(name, lo, hi, True)], [(name, lo, hi)]
        if kind == "copy":
            src, dst = ch.choice(self.readable(bufs)), ch.choice(bufs)
            so, hi = self.span(src, self.size_of(dst), read=True)
            n = hi - so
            do = 16 * ch.int(0, (self.size_of(dst) - n) // 16)
            if src == dst and so < do + n and do < so + n:
                return None
            return {"cmd": "copy", "source": {"buffer": src, "offset": so, "length": n},
                    "target": {"buffer": dst, "offset": do, "length": n}}, \
                [(src, so, so + n, False), (dst, do, do + n, True)], [(dst, do, do + n)]
        entry = ch.choice(sorted(KERNELS))
        refs, acc, spans = [], [], []
        for access in KERNELS[entry]:
            name = ch.choice(self.readable(bufs) if "r" in access else bufs)
            ref, lo, hi = self.rng_ref(name, read="r" in access)
            refs.append(ref)
            spans.append((name, lo, hi))
            acc.append((name, lo, hi, access != "r"))
            if "r" in access and access != "r":
                acc.append((name, lo, hi, False))
        if _conflict(acc, acc, same=True):
            return None
        cmd = {"cmd": "dispatch", "entry": entry, "workgroups": [ch.int(1, 4), 1, 1],
               "constants": [ch.int(0, 9) for _ in range(CONSTANTS.get(entry, 0))], "bindings": refs}
        stored = ELEMENT * work_items(SPECS[entry], cmd["workgroups"], cmd["constants"],
                                      [hi - lo for _, lo, hi in spans])
        return cmd, acc, [(name, lo, lo + stored) for (name, lo, _), access in zip(spans, KERNELS[entry])
                          if "w" in access]

    # -- waits ------------------------------------------------------------------------------------------

    def ancestors(self, waits: dict) -> set[int]:
        anc: set[int] = set()
        for sem, v in waits.items():
            if sem.startswith("t"):
                i = self.tl_op.get((int(sem[1:]), v))
                if i is not None:
                    anc |= self.ops[i].anc | {i}
        return anc

    def queue_op(self, call: dict, acc: list) -> None:
        """Add waits and a signal to ``call`` (a queue step) touching ``acc``, then append it."""
        ch = self.ch
        tl = ch.int(0, self.tl_count - 1)
        value = self.tl_last[tl] + 1
        waits: dict[str, int] = {}
        if value > 1 and not ch.prob(self.drop):
            waits[f"t{tl}"] = value - 1
        for g in range(self.gate_count):   # wait-before-signal: wait for a value the host signals later
            if not self.gate_failed[g] and ch.prob(0.08 if self.gate_doomed[g] else 0.15):
                self.gate_pending[g] = max(self.gate_pending[g], self.gate_signaled[g] + 1)
                waits[f"g{g}"] = self.gate_pending[g]
        if self.tl_count > 1 and self.ops and ch.prob(0.2):   # an extra, unneeded wait
            t2 = ch.int(0, self.tl_count - 1)
            if self.tl_last[t2] and t2 != tl:
                waits[f"t{t2}"] = ch.int(1, self.tl_last[t2])
        anc = self.ancestors(waits)
        for _ in range(len(acc) * 4 + 1):   # order after the latest conflicting op not yet ordered
            need = None
            for i, name, lo, hi, w in reversed(self.accesses):
                if i not in anc and any(name == n2 and lo < hi2 and lo2 < hi and (w or w2) for n2, lo2, hi2, w2 in acc):
                    need = i
                    break
            if need is None:
                break
            op = self.ops[need]
            anc |= op.anc | {need}      # counted as ordered even when dropped: one chance per conflict
            if not ch.prob(self.drop):
                waits[f"t{op.tl}"] = max(waits.get(f"t{op.tl}", 0), op.value)
        doomed = [f"g{g}" for g in range(self.gate_count) if self.gate_doomed[g] and f"g{g}" in waits]
        if doomed:
            # it will fail: it signals a semaphore of its own (a failure poisons every value of a
            # semaphore) and nothing waits for it or counts its accesses; the host fails the gate later
            for sem in list(waits):
                if sem.startswith("g") and sem not in doomed:
                    del waits[sem]
            sem = f"f{self.doomed}"
            self.doomed += 1
            call["wait"], call["signal"], call["queue"] = waits, {sem: 1}, ch.int(0, self.queues - 1)
            self.host.append(call)
            self.doomed_waits.append(sem)
            return False
        anc = self.ancestors(waits)
        gates = {}
        for sem, v in waits.items():
            if sem.startswith("g"):
                gates[int(sem[1:])] = max(gates.get(int(sem[1:]), 0), v)
            else:
                i = self.tl_op.get((int(sem[1:]), v))
                if i is not None:
                    for g, gv in self.ops[i].gates.items():
                        gates[g] = max(gates.get(g, 0), gv)
        index = len(self.ops)
        self.ops.append(_Op(tl, value, anc, gates, False))
        self.tl_last[tl] = value
        self.tl_op[(tl, value)] = index
        self.accesses += [(index, n, lo, hi, w) for n, lo, hi, w in acc]
        call["wait"] = waits
        call["signal"] = {f"t{tl}": value}
        call["queue"] = ch.int(0, self.queues - 1)
        self.host.append(call)
        return True

    # -- steps ------------------------------------------------------------------------------------------

    def step(self) -> None:
        ch = self.ch
        weights = dict(STEP_WEIGHTS)
        weights["fail"] = 2 if self.fail_prob > 0 and self.gate_count else 0
        kind = ch.weighted(weights.items())
        if kind in ("fill", "update", "dispatch", "copy"):
            got = self.command(kind)
            if got is None:
                return
            cmd, acc, stored = got
            call = {"call": kind, **{k: v for k, v in cmd.items() if k != "cmd"}}
            if self.queue_op(call, acc):
                self.wrote(stored)
        elif kind == "execute":
            self.execute()
        elif kind == "barrier":
            self.queue_op({"call": "barrier"}, [])
        elif kind == "alloca":
            name = f"tmp{len(self.transients)}"
            size = ch.choice(BUFFER_SIZES[:3])
            self.transients[name] = {"size": size, "state": "doomed", "written": 0}
            if self.queue_op({"call": "alloca", "name": name, "size": size}, [(name, 0, size, True)]):
                self.transients[name]["state"] = "live"
        elif kind == "dealloca":
            live = [n for n, t in self.transients.items() if t["state"] == "live"]
            if live:
                name = ch.choice(live)
                self.queue_op({"call": "dealloca", "buffer": name}, [(name, 0, self.size_of(name), True)])
                # dead even when doomed: the checks count a dealloca that failed as one that freed
                # (and sim:metal runs its command buffer past the failed wait)
                self.transients[name]["state"] = "dead"
        elif kind == "signal":
            # never a gate chosen to fail: its waiters must fail, not run once it reached their value
            pending = [g for g in range(self.gate_count) if not self.gate_doomed[g]
                       and not self.gate_failed[g] and self.gate_pending[g] > self.gate_signaled[g]]
            if pending:
                self.signal_gate(ch.choice(pending))
        elif kind == "fail":
            doomed = [g for g in range(self.gate_count)
                      if self.gate_doomed[g] and not self.gate_failed[g] and self.gate_pending[g]]
            if doomed:
                self.fail_gate(ch.choice(doomed))
        elif kind == "wait":
            # a host wait mid-program: only for an op every gate of which is already signaled
            done = [i for i, op in enumerate(self.ops)
                    if all(self.gate_signaled[g] >= v or self.gate_failed[g] for g, v in op.gates.items())]
            if done and not any(self.gate_pending[g] > self.gate_signaled[g] and not self.gate_failed[g]
                                for g in range(self.gate_count)):
                op = self.ops[ch.choice(done)]
                self.host.append({"call": "wait", "wait": {f"t{op.tl}": op.value}})

    def wrote(self, stored: list) -> None:
        """Count the bytes an operation (one that runs) stores as defined."""
        for name, lo, hi in stored:
            if name in self.transients:
                self.transients[name]["written"] |= ((1 << (hi - lo)) - 1) << lo

    def fail_gate(self, g: int) -> None:
        self.host.append({"call": "fail", "semaphore": f"g{g}", "status": "ABORTED",
                          "message": self.ch.choice(FAIL_MESSAGES)})
        self.gate_failed[g] = True

    def signal_gate(self, g: int) -> None:
        self.host.append({"call": "signal", "semaphore": f"g{g}", "value": self.gate_pending[g]})
        self.gate_signaled[g] = self.gate_pending[g]

    def execute(self) -> None:
        ch = self.ch
        commands, acc, segment = [], [], []
        for _ in range(ch.int(1, 4)):
            got = self.command(transients=False)
            if got is None:
                continue
            cmd, mine, _ = got
            if _conflict(mine, segment):
                if not ch.prob(self.drop):
                    commands.append({"cmd": "barrier"})
                    segment = []
            elif segment and ch.prob(0.1):
                commands.append({"cmd": "barrier"})
                segment = []
            commands.append(cmd)
            segment += mine
            acc += mine
        if not commands:
            return
        name = f"cb{len(self.cbs)}"
        self.cbs[name] = {"commands": commands}
        self.queue_op({"call": "execute", "command_buffer": name}, acc)

    def finish(self) -> None:
        for g in range(self.gate_count):
            if self.gate_doomed[g] and not self.gate_failed[g] and self.gate_pending[g]:
                self.fail_gate(g)
            elif not self.gate_failed[g] and self.gate_pending[g] > self.gate_signaled[g]:
                self.signal_gate(g)
        order = list(range(self.tl_count))
        if self.ch.prob(0.5):
            order.reverse()
        for t in order:
            if self.tl_last[t]:
                self.host.append({"call": "wait", "wait": {f"t{t}": self.tl_last[t]}})
        for sem in self.doomed_waits:    # each raises the gate's failure
            self.host.append({"call": "wait", "wait": {sem: 1}})


def _covers(written: int, lo: int, hi: int) -> bool:
    """Whether bitmask ``written`` has every byte of [lo, hi)."""
    full = (1 << (hi - lo)) - 1
    return (written >> lo) & full == full


def _conflict(a, b, same=False) -> bool:
    for i, (n1, lo1, hi1, w1) in enumerate(a):
        for j, (n2, lo2, hi2, w2) in enumerate(b):
            if same and j <= i:
                continue
            if n1 == n2 and lo1 < hi2 and lo2 < hi1 and (w1 or w2) and not (same and lo1 == lo2 and hi1 == hi2
                                                                              and w1 != w2):
                return True
    return False


def generated_device(device: str = "sim", queues: int = 2, options: dict | None = None, **_knobs) -> dict:
    """The ``[device]`` section of the program :func:`generate` makes from these knobs (the others
    are ignored), without generating it.

    >>> generated_device(queues=3, options={"seed": 1}, size=40)
    {'uri': 'sim', 'options': {'queues': 3, 'seed': 1}}
    """
    opts = {"queues": max(1, queues)}
    opts.update(options or {})
    return {"uri": device, "options": opts}


def build(ch: Chooser, size: int = 12, drop_sync: float = 0.0, queues: int = 2, timelines: int | None = None,
          gates: int = 2, fail_prob: float = 0.0, wait_before_signal: bool = True, device: str = "sim",
          options: dict | None = None, description: str = "") -> dict:
    """A program from the choices of ``ch`` (see :func:`generate` for the knobs)."""
    for name, value in (("size", size), ("drop_sync", drop_sync)):
        problem = knob_problem(name, value)
        if problem:
            raise ValueError(f"{name} {problem}, got {value!r}")
    timelines = timelines or max(1, min(4, queues + 1))
    gen = _Gen(ch, size, drop_sync, max(1, queues), timelines, gates, fail_prob, wait_before_signal)
    for i in range(ch.int(1, 3)):
        gen.buffers[f"b{i}"] = ch.choice(BUFFER_SIZES)
    for _ in range(size):
        gen.step()
    if not gen.ops:
        gen.queue_op({"call": "barrier"}, [])
    gen.finish()
    sems = {f"t{t}": 0 for t in range(timelines)}
    sems.update({f"g{g}": 0 for g in range(gen.gate_count)})
    sems.update({sem: 0 for sem in gen.doomed_waits})
    return {"description": description, "expect": [], "device": generated_device(device, queues, options),
            "semaphores": sems, "buffers": dict(gen.buffers), "command_buffers": gen.cbs, "host": gen.host}


def generate(seed: int, size: int = 12, drop_sync: float = 0.0, queues: int = 2, timelines: int | None = None,
             gates: int = 2, fail_prob: float = 0.0, wait_before_signal: bool = True, device: str = "sim",
             options: dict | None = None) -> dict:
    """A random valid program as a schedule document, a pure function of its arguments.

    ``size``: host steps proposed (each becomes at most one queue operation or host call);
    ``drop_sync``: probability of dropping each needed wait or barrier; ``queues``: queues used (and
    the device's ``queues`` option); ``timelines``: timeline semaphores (default ``min(4, queues + 1)``);
    ``gates``: host-signaled semaphores; ``fail_prob``: probability that a host step fails a gate
    instead of signalling it; ``wait_before_signal=False``: no gates (programs that also run on
    ``sim:sync`` without deadlocking); ``device``/``options``: the document's ``[device]``.
    """
    if seed < 0:  # (random.Random(-k) is random.Random(k): program -k would be program k)
        raise ValueError(f"seed {seed}: must be >= 0")
    desc = f"generated: seed={seed} size={size} drop_sync={drop_sync} queues={queues}"
    return build(Chooser(rng=random.Random(seed)), size, drop_sync, queues, timelines, gates, fail_prob,
                 wait_before_signal, device, options, desc)


def programs(size: int = 12, drop_sync: float = 0.0, queues: int = 2, **kw):
    """Hypothesis strategy of program documents (the same construction, choices drawn by hypothesis)."""
    from hypothesis import strategies as st

    @st.composite
    def _programs(draw):
        return build(Chooser(draw=draw), size, drop_sync, queues, description="generated (hypothesis)", **kw)

    return _programs()
