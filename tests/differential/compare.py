"""Comparing outcomes: a device against the model's prediction, and ours against IREE.

Values must be equal. Failures compare by code, and by message where the message is determined: when
the model says a failure may carry one of several messages (two failures racing to reach one semaphore),
each side's message must be one of them.
"""

from __future__ import annotations

from .program import QUEUE_OPS, Dealloca, Expect, Expected, Program, Status
from .runners import Outcome


def _fmt(x) -> str:
    return str(x)


def _matches(expect, got) -> bool:
    if isinstance(expect, Expect):
        return isinstance(got, Status) and expect.matches(got)
    return expect == got


def _same(a, b, expect) -> bool:
    """Ours == IREE, tolerating a message race the model allows."""
    if a == b:
        return True
    return isinstance(expect, Expect) and expect.messages is not None and len(expect.messages) > 1 \
        and _matches(expect, a) and _matches(expect, b)


def check_expected(out: Outcome, exp: Expected, program: Program, *, queue_calls: bool = True) -> list[str]:
    """Where ``out`` differs from the model's prediction ``exp``."""
    bad = []
    for i, want in sorted(exp.submits.items()):
        if want is None or (not queue_calls and isinstance(program.steps[i], QUEUE_OPS)):
            continue
        got = out.submits.get(i)
        if not _matches(want, got):
            bad.append(f"{out.device}: step {i} call returned {_fmt(got)}, model says {want}")
    for i, want in sorted(exp.waits.items()):
        got = out.waits.get(i)
        if not _matches(want, got):
            bad.append(f"{out.device}: step {i} host wait returned {_fmt(got)}, model says {want}")
    for s, (want, got) in enumerate(zip(exp.finals, out.finals)):
        if not _matches(want, got):
            bad.append(f"{out.device}: s{s} final {_fmt(got)}, model says {want}")
    for b, (want, got) in enumerate(zip(exp.buffers, out.buffers)):
        if want != got:
            bad.append(f"{out.device}: b{b} bytes {got.hex()}, model says {want.hex()}")
    return bad


def diff(ours: Outcome, iree: Outcome, exp: Expected, program: Program, *, queue_calls: bool) -> list[str]:
    """Where ours differs from IREE. ``queue_calls``: compare what queue calls return (only where the
    model says it is determined); otherwise compare everything else."""
    bad = []
    if queue_calls:
        for i, st in enumerate(program.steps):
            # A dealloca whose wait failed may return the failure or fail its signals: the CTS accepts
            # either (QueueAllocaTest.FailedDeallocaWaitDoesNotDealloca), so it is not compared.
            if isinstance(st, QUEUE_OPS) and not isinstance(st, Dealloca) and exp.submits.get(i) is not None:
                a, b = ours.submits.get(i), iree.submits.get(i)
                if not _same(a, b, exp.submits[i]):
                    bad.append(f"step {i} ({type(st).__name__}) call: ours {_fmt(a)}, IREE {_fmt(b)}")
        return bad
    for i, st in enumerate(program.steps):
        if not isinstance(st, QUEUE_OPS) and i in exp.submits:
            a, b = ours.submits.get(i), iree.submits.get(i)
            if a != b:
                bad.append(f"step {i} host call: ours {_fmt(a)}, IREE {_fmt(b)}")
    for i in sorted(exp.waits):
        a, b = ours.waits.get(i), iree.waits.get(i)
        if not _same(a, b, exp.waits[i]):
            bad.append(f"step {i} host wait: ours {_fmt(a)}, IREE {_fmt(b)}")
    for s, (a, b) in enumerate(zip(ours.finals, iree.finals)):
        if not _same(a, b, exp.finals[s]):
            bad.append(f"s{s} final: ours {_fmt(a)}, IREE {_fmt(b)}")
    if len(ours.finals) != len(iree.finals):
        bad.append("semaphore count differs")
    for k, (a, b) in enumerate(zip(ours.buffers, iree.buffers)):
        if a != b:
            bad.append(f"b{k} bytes: ours {a.hex()}, IREE {b.hex()}")
    return bad


def report(program: Program, problems: list[str], *outcomes: Outcome) -> str:
    parts = ["differences:", *("  " + p for p in problems), "program:", program.pretty()]
    parts += [o.pretty() for o in outcomes]
    return "\n".join(parts)
