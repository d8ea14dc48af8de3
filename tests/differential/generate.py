"""Random valid programs (see program.py for the language and the validity rules).

Programs are built in a *logical* order — each new step only waits on semaphore values that earlier
steps already produce (or on semaphores that fail) — with every proposal checked by the model
(:func:`program.analyze`) and dropped if it would make the outcome timing-dependent. Then, for about
half of the programs, queue submissions are moved earlier (:func:`reschedule`): before the host signals
that release them (wait-before-signal) and before the operations that produce their inputs (reverse
order), again keeping only moves the model accepts. Finally the host waits for every semaphore's final
value (or its failure) so every operation's effects are visible before buffers are read.

Choices come from a :class:`Chooser`: hypothesis ``draw`` in the tests (so failures shrink), or
``random.Random`` for the standalone fuzz loop (``python -m tests.differential.generate``).
"""

from __future__ import annotations

import random

from halsim.campaigns.generate import Chooser  # seeded or hypothesis-driven choices

from .program import (
    Alloca,
    Barrier,
    Copy,
    Dealloca,
    Execute,
    Fill,
    HostFail,
    HostSignal,
    HostWait,
    InvalidProgram,
    Program,
    QueueCopy,
    Update,
    analyze,
)

BUFFER_SIZES = (8, 12, 16, 32)
TRANSIENT_SIZES = (8, 16, 24)
WORDS = ("device lost", "bad input", "oom", "timeout in stage", "abort", "user cancelled", "io error")


KINDS = (("execute", 5), ("signal", 4), ("fail", 1), ("wait", 1), ("barrier", 1), ("copy", 2), ("alloca", 2),
         ("dealloca", 2))
FAILURE_HEAVY = (("fail", 3), ("execute", 5), ("signal", 3), ("wait", 1), ("barrier", 2), ("copy", 2),
                 ("alloca", 2), ("dealloca", 2))


class _Gen:
    def __init__(self, ch: Chooser, sems, bufs):
        self.ch = ch
        self.sems = tuple(sems)
        self.bufs = tuple(bufs)
        self.steps: list = []
        self.an = analyze(Program(self.sems, self.bufs, ()), final=False)
        self.fails = 0
        self.transients = 0
        self.kinds = KINDS

    def prog(self, steps) -> Program:
        return Program(self.sems, self.bufs, tuple(steps))

    def step(self) -> None:
        for _ in range(3):
            kind = self._kind()
            cand = getattr(self, "_" + kind)()
            if cand is None:
                continue
            try:
                an = analyze(self.prog(self.steps + [cand]), final=False)
            except InvalidProgram:
                continue
            self.steps.append(cand)
            self.an = an
            if isinstance(cand, HostFail):
                self.fails += 1
            if isinstance(cand, Alloca):
                self.transients += 1
            return

    def _kind(self) -> str:
        total = sum(w for _, w in self.kinds)
        x = self.ch.int(0, total - 1)
        for name, w in self.kinds:
            if x < w:
                return name
            x -= w
        raise AssertionError

    # -- host steps ------------------------------------------------------------------------------------

    def _host_signalable(self):
        an = self.an
        return [s for s in range(len(self.sems))
                if not an.failed(s) and (not an.signals[s] or an.signals[s][-1][1] in an.host_anc)]

    def _signal(self):
        cands = self._host_signalable()
        if not cands:
            return None
        s = self.ch.choice(cands)
        return HostSignal(s, self.an.value[s] + self.ch.int(1, 3))

    def _fail(self):
        an = self.an
        cands = [s for s in range(len(self.sems)) if not an.signals[s] and not an.low_waits[s]]
        if not cands:
            return None
        return HostFail(self.ch.choice(cands), f"f{self.fails}: {self.ch.choice(WORDS)}")

    def _wait_value(self, s) -> int:
        an = self.an
        if an.failed(s):
            return self.sems[s] + self.ch.int(1, 2)
        return an.value[s] if self.ch.pct(70) else self.ch.int(0, an.value[s])

    def _wait(self):
        s = self.ch.int(0, len(self.sems) - 1)
        return HostWait(s, self._wait_value(s))

    # -- queue ops -------------------------------------------------------------------------------------

    def _live(self):
        return [name for name, t in self.an.transients.items() if t.state == "committed" and t.dealloca_step is None]

    def _refs(self):
        return [f"b{i}" for i in range(len(self.bufs))] + self._live()

    def _defined(self, ref, lo, hi) -> bool:
        t = self.an.transients.get(ref)
        return t is None or all(t.defined[lo:hi])

    def _lists(self, accesses):
        """Wait and signal lists for a new op with these accesses: random waits, waits that order it
        after every conflicting earlier op, then signals (and the wait that orders each signal after the
        semaphore's previous signal)."""
        ch, an = self.ch, self.an
        waits: dict[int, int] = {}
        failed = [s for s in range(len(self.sems)) if an.failed(s)]
        for _ in range(ch.int(0, 2)):
            s = ch.choice(failed) if failed and ch.pct(40) else ch.int(0, len(self.sems) - 1)
            waits[s] = max(waits.get(s, 0), self._wait_value(s))
        by_eid = {op.eid: op for op in an.ops.values()}
        for _ in range(4):  # order after conflicting ops (each added wait may cover several)
            anc = an.wait_anc(waits.items(), an.host_anc)
            missing = [e for e, ref, lo, hi, w in an.accesses
                       for ref2, lo2, hi2, w2 in accesses
                       if ref == ref2 and lo < hi2 and lo2 < hi and (w or w2) and e not in anc]
            if not missing:
                break
            s, v = by_eid[missing[0]].st.signal[0]
            waits[s] = max(waits.get(s, 0), v)
        doomed = any(an.failed(s) for s in waits)
        signals = []
        for _ in range(ch.int(1, 2)):
            if doomed:
                cands = [s for s in range(len(self.sems))
                         if not an.signals[s] and not an.low_waits[s] and s not in dict(signals)]
            else:
                cands = [s for s in range(len(self.sems)) if not an.failed(s) and s not in dict(signals)]
            if not cands:
                break
            s = ch.choice(cands)
            if doomed:
                signals.append((s, self.sems[s] + ch.int(1, 2)))
                continue
            signals.append((s, an.value[s] + ch.int(1, 3)))
            if an.signals[s] and (an.signals[s][-1][1] not in an.host_anc or ch.pct(50)):
                waits[s] = max(waits.get(s, 0), an.value[s])
        if not signals:
            return None
        wait = list(waits.items())
        if len(wait) > 1 and ch.pct(50):
            wait.reverse()
        return tuple(wait), tuple(signals)

    def _command(self, taken):
        ch = self.ch
        refs = self._refs()
        size = self.an.size_of
        kind = ch.int(0, 6)
        if kind < 3:
            ref = ch.choice(refs)
            pl = ch.choice((1, 2, 4))
            slots = size(ref) // pl
            first = ch.int(0, slots - 1)
            count = ch.int(1, slots - first)
            cmd = Fill(ref, first * pl, count * pl, ch.int(0, (1 << (8 * pl)) - 1), pl)
        elif kind < 5:
            src, dst = ch.choice(refs), ch.choice(refs)
            n = ch.int(1, min(size(src), size(dst)))
            so, do = ch.int(0, size(src) - n), ch.int(0, size(dst) - n)
            if src == dst and so < do + n and do < so + n:
                return None
            if not self._defined(src, so, so + n):
                return None
            cmd = Copy(src, so, dst, do, n)
        else:
            ref = ch.choice(refs)
            n = ch.int(1, size(ref))
            off = ch.int(0, size(ref) - n)
            cmd = Update(ref, off, ch.bytes(n))
        mine = self.an._ranges(cmd)
        for other in taken:
            if any(r1 == r2 and lo1 < hi2 and lo2 < hi1 and (w1 or w2)
                   for r1, lo1, hi1, w1 in mine for r2, lo2, hi2, w2 in other):
                return None
        return cmd, mine

    def _execute(self):
        cmds, ranges = [], []
        for _ in range(self.ch.int(0, 3)):
            got = self._command(ranges)
            if got is not None:
                cmds.append(got[0])
                ranges.append(got[1])
        lists = self._lists([r for rs in ranges for r in rs])
        if lists is None:
            return None
        direct = len(cmds) == 1 and self.ch.pct(50)
        return Execute(*lists, tuple(cmds), direct)

    def _barrier(self):
        lists = self._lists([])
        return None if lists is None else Barrier(*lists)

    def _copy(self):
        size = self.an.size_of
        refs = self._refs()
        pairs = [(a, b) for a in refs for b in refs
                 if a != b and size(a) <= size(b) and self._defined(a, 0, size(a))]
        if not pairs:
            return None
        src, dst = self.ch.choice(pairs)
        lists = self._lists([(src, 0, size(src), False), (dst, 0, size(src), True)])
        return None if lists is None else QueueCopy(*lists, src, dst)

    def _alloca(self):
        name = f"t{self.transients}"
        size = self.ch.choice(TRANSIENT_SIZES)
        lists = self._lists([])
        return None if lists is None else Alloca(*lists, name, size)

    def _dealloca(self):
        cands = [n for n, t in self.an.transients.items() if t.dealloca_step is None]
        if not cands:
            return None
        name = self.ch.choice(cands)
        lists = self._lists([(name, 0, self.an.transients[name].size, True)])
        return None if lists is None else Dealloca(*lists, name)

    # -- the end -----------------------------------------------------------------------------------------

    def final_waits(self):
        an = self.an
        order = list(range(len(self.sems)))
        if self.ch.pct(50):
            order.reverse()
        return [HostWait(s, self.sems[s] + 1 if an.failed(s) else an.value[s]) for s in order]


def reschedule(ch: Chooser, program: Program) -> Program:
    """Move queue submissions earlier (wait-before-signal, reverse dependency order) where still valid."""
    steps = list(program.steps)
    ops = [st for st in steps if isinstance(st, (Execute, Barrier, QueueCopy, Alloca, Dealloca))]
    for op in ops:
        if not ch.pct(50):
            continue
        i = next(k for k, st in enumerate(steps) if st is op)
        lo = 0
        for name in _transients_of(op):  # the buffer handle exists only once its alloca was called
            lo = max(lo, next(k for k, st in enumerate(steps) if isinstance(st, Alloca) and st.transient == name) + 1)
        if lo >= i:
            continue
        j = ch.int(lo, i - 1)
        cand = steps[:j] + [op] + steps[j:i] + steps[i + 1:]
        try:
            analyze(Program(program.semaphores, program.buffers, tuple(cand)))
        except InvalidProgram:
            continue
        steps = cand
    return Program(program.semaphores, program.buffers, tuple(steps))


def _transients_of(op):
    names = set()
    if isinstance(op, Dealloca):
        names.add(op.transient)
    elif isinstance(op, QueueCopy):
        names |= {op.source, op.target}
    elif isinstance(op, Execute):
        for c in op.commands:
            names |= {c.source, c.target} if isinstance(c, Copy) else {c.target}
    return {n for n in names if n.startswith("t")}


def generate(ch: Chooser, max_steps: int = 16) -> Program:
    n_sems = ch.int(1, 5)
    sems = tuple(ch.int(0, 2) for _ in range(n_sems))
    bufs = tuple(ch.bytes(ch.choice(BUFFER_SIZES)) for _ in range(ch.int(1, 3)))
    gen = _Gen(ch, sems, bufs)
    if ch.pct(45):
        gen.kinds = FAILURE_HEAVY  # failures and their propagation are the rarest paths: oversample
    for _ in range(ch.int(1, max_steps)):
        gen.step()
    program = gen.prog(gen.steps + gen.final_waits())
    analyze(program)  # the logical order is valid by construction
    if ch.pct(55):
        program = reschedule(ch, program)
    return program


def programs(max_steps: int = 16):
    """Hypothesis strategy of valid programs."""
    from hypothesis import strategies as st

    @st.composite
    def _programs(draw):
        return generate(Chooser(draw=draw), max_steps)

    return _programs()


if __name__ == "__main__":  # quick look at what the generator makes
    import sys

    from .program import wait_before_signal

    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    for k in range(5):
        p = generate(Chooser(rng=random.Random(seed + k)))
        print(f"--- seed {seed + k} (wait-before-signal: {wait_before_signal(p)})")
        print(p.pretty())
