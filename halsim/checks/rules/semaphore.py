"""Semaphore misuse: timeline values must grow, in an order the program guarantees.

* ``semaphore.non_monotonic`` — a signal to a value not above one that happens before it (the
  semaphore cannot go back; the signal fails or is lost);
* ``semaphore.racing_signals`` — two signals of one semaphore that nothing orders: which value
  lands last depends on timing;
* ``semaphore.overflow`` — a wait or signal value past ``MAX_SEMAPHORE_VALUE`` (2**31 - 2);
* ``semaphore.signal_after_failure`` — an op that succeeded tried to signal a semaphore that had
  already failed (the signal is lost; waiters see the old failure).

Signals are sorted by value and only neighbours compared — if each happens before the next, all
are ordered — so this is O(n log n) in the number of signals.

>>> from reference import hal
>>> from halsim.checks import check_trace
>>> dev = hal.create_device("sim", queues=2)
>>> s = dev.create_semaphore()
>>> dev.queue_barrier([], [(s, 1)], queue_affinity=1)
>>> dev.queue_barrier([], [(s, 2)], queue_affinity=2)
>>> s.wait(2)
>>> [f.message for f in check_trace(dev.trace).findings]   # doctest: +NORMALIZE_WHITESPACE
['barrier 0:0 signals s0=1 and barrier 0:1 signals s0=2 with nothing ordering them: the
  final value depends on timing']
>>> dev.close()
"""

from __future__ import annotations

from ..findings import Finding
from ..model import op_key

MAX_SEMAPHORE_VALUE = 2**31 - 2

RULES = {
    "semaphore.non_monotonic": "a signal to a value not above one that happens before it",
    "semaphore.racing_signals": "two signals of one semaphore that nothing orders",
    "semaphore.overflow": "a wait or signal value past MAX_SEMAPHORE_VALUE",
    "semaphore.signal_after_failure": "an op signals a semaphore that already failed",
}


def check(model, hb) -> list[Finding]:
    out: list[Finding] = []
    by_sem: dict[str, list] = {}   # sem -> [(value, node, who, op id or None)]
    # A host call whose function returned DEFERRED took over signalling (HAL Q12): the function, or a
    # thread it handed ctx.signal to, signals instead — as itself, not as the op. So a host call's
    # (sem, value) that the trace does not show it signaling (or failing), and that a host thread
    # signaled (or tried to), is not the op's; one nobody else signaled stays the op's (a signal
    # the HAL refused: its value was not above the semaphore's).
    by_host_call: dict[str, set] = {op.id: set() for op in model.ops.values() if op.kind == "host_call"}
    by_host: set = set()
    if by_host_call:
        for s, hist in model.signals.items():
            for v, cause, _idx in hist:
                if cause in by_host_call:
                    by_host_call[cause].add(s)
                elif cause.startswith("host:"):
                    by_host.add((s, v))
        for s, fail in model.fails.items():
            if fail[2] in by_host_call:
                by_host_call[fail[2]].add(s)
        by_host.update((s, v) for s, v, _cause, _idx, _status in model.rejected)
    for op in model.ops.values():
        for s, v in op.wait + op.signal:
            if v > MAX_SEMAPHORE_VALUE:
                out.append(Finding("semaphore.overflow", "error", [op.id],
                                   f"{op.kind} {op.id} uses {s}={v}, past MAX_SEMAPHORE_VALUE "
                                   f"({MAX_SEMAPHORE_VALUE})", {"semaphore": s, "value": v}))
        if op.status != 0 or op.stuck or (model.deadlock_at is not None and op.done > model.deadlock_at):
            continue   # it never signaled (a failed op fails its signals instead), or only as the device closed
        signaled = by_host_call.get(op.id)
        for s, v in op.signal:
            if signaled is None or s in signaled or (s, v) not in by_host:
                by_sem.setdefault(s, []).append((v, hb.node_of_op[op.id], f"{op.kind} {op.id}", op.id))
            fail = model.fails.get(s)
            if fail is not None and fail[3] < op.done and fail[2] != op.id and not _cancelled(model, fail):
                out.append(Finding("semaphore.signal_after_failure", "error", [op.id],
                                   f"{op.kind} {op.id} signals {s}={v} after {s} failed "
                                   f"(status {fail[0]}: {fail[1]}); the signal is lost",
                                   {"semaphore": s, "value": v}))
    for s, hist in model.signals.items():
        for v, cause, idx in hist:
            if cause.startswith("host:"):
                thread = cause[5:]
                by_sem.setdefault(s, []).append((v, hb.node_of_host[idx], f"host thread {thread}", None))
                if v > MAX_SEMAPHORE_VALUE:
                    out.append(Finding("semaphore.overflow", "error", [],
                                       f"host thread {thread} signals {s}={v}, past MAX_SEMAPHORE_VALUE",
                                       {"semaphore": s, "value": v}))
    # host signals the HAL refused (the value was not above the current one): they still raced with,
    # or came after, the signal that got there first — on every device, whichever won the race
    for s, v, cause, idx, status in model.rejected:
        if status != 3:   # INVALID_ARGUMENT (not increasing); a failed semaphore's refusal is not one
            continue
        if cause.startswith("host:"):
            by_sem.setdefault(s, []).append((v, hb.node_of_host[idx], f"host thread {cause[5:]}", None))
        else:
            by_sem.setdefault(s, []).append((v, hb.node_of_op[cause], f"host call {cause}", cause))
    for s, sigs in by_sem.items():
        # the initial value happens before every signal: one not above it cannot land (the HAL
        # refuses it). Reported against the initial value, and left out of the comparisons below
        if s in model.initial:
            initial = model.initial[s]
            low = [x for x in sigs if x[0] <= initial]
            if low:
                sigs = [x for x in sigs if x[0] > initial]
                for v, _n, who, op_id in sorted(low, key=lambda x: (x[0], x[1])):
                    out.append(Finding("semaphore.non_monotonic", "error", [op_id] if op_id else [],
                                       f"{who} signals {s}={v}, not above its initial value {initial}: "
                                       f"timeline values must increase",
                                       {"semaphore": s, "value": v, "initial": initial}))
        sigs.sort(key=lambda x: (x[0], x[1]))
        for (v1, n1, who1, op1), (v2, n2, who2, op2) in zip(sigs, sigs[1:]):
            if v1 < v2 and hb.before(n1, n2):
                continue
            if hb.before(n2, n1) or (v1 == v2 and hb.before(n1, n2)):
                earlier_2 = hb.before(n2, n1)
                first, second = ((who2, v2), (who1, v1)) if earlier_2 else ((who1, v1), (who2, v2))
                # the op that signaled first, first (ops: program order, the earlier one first)
                ops = [o for o in ((op2, op1) if earlier_2 else (op1, op2)) if o]
                out.append(Finding("semaphore.non_monotonic", "error", ops,
                                   f"{second[0]} signals {s}={second[1]} after {first[0]} signaled "
                                   f"{s}={first[1]}: timeline values must increase",
                                   {"semaphore": s, "value": second[1]}))
            else:
                ops = sorted([o for o in (op1, op2) if o], key=op_key)
                out.append(Finding("semaphore.racing_signals", "error", ops,
                                   f"{who1} signals {s}={v1} and {who2} signals {s}={v2} with nothing "
                                   f"ordering them: the final value depends on timing",
                                   {"semaphore": s, "values": [v1, v2]}))
    return out


def _cancelled(model, fail) -> bool:
    """A failure that closing the device caused (a stuck op cancelled), not the program."""
    cause = model.ops.get(fail[2])
    return cause is not None and cause.stuck
