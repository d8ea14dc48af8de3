"""Semaphore misuse: timeline values must grow, in an order the program guarantees.

* ``semaphore.non_monotonic`` — a signal to a value not above one that happens before it (the
  semaphore cannot go back; the signal fails or is lost);
* ``semaphore.racing_signals`` — two signals of one semaphore that nothing orders: which value
  lands last depends on timing;
* ``semaphore.overflow`` — a wait or signal value past ``MAX_SEMAPHORE_VALUE`` (2**31 - 2);
* ``semaphore.signal_after_failure`` — an op that succeeded tried to signal a semaphore that had
  already failed (the signal is lost; waiters see the old failure).

Signals are sorted by value and only neighbours compared — if each happens before the next, all
are ordered — so this is O(n log n) in the number of signals. Where they are not, each signal is
also checked against the highest signal that happens before it (an unordered one in between hides
it from its neighbours). One op signals its list in order (IREE ``iree_hal_semaphore_list_signal``).

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

from bisect import bisect_left

from ..findings import Finding
from ..model import device_sticky, op_key

MAX_SEMAPHORE_VALUE = 2**31 - 2
FULL_CHECK_BUDGET = 1 << 22   # signal x lane lookups per semaphore for _higher_predecessors (~0.5 s)

RULES = {
    "semaphore.non_monotonic": "a signal to a value not above one that happens before it",
    "semaphore.racing_signals": "two signals of one semaphore that nothing orders",
    "semaphore.overflow": "a wait or signal value past MAX_SEMAPHORE_VALUE",
    "semaphore.signal_after_failure": "an op signals a semaphore that already failed",
}


def check(model, hb) -> list[Finding]:
    out: list[Finding] = []
    # sem -> [(value, node, position in the op's signal list, who, op id or None)]
    by_sem: dict[str, list] = {}
    handed_over = _hand_over(model, hb)
    sticky = _sticky(model)
    for op in model.ops.values():
        for s, v in op.wait + op.signal:
            if v > MAX_SEMAPHORE_VALUE:
                out.append(Finding("semaphore.overflow", "error", [op.id],
                                   f"{op.kind} {op.id} uses {s}={v}, past MAX_SEMAPHORE_VALUE "
                                   f"({MAX_SEMAPHORE_VALUE})", {"semaphore": s, "value": v}))
        if op.status != 0 or op.stuck or (model.deadlock_at is not None and op.done > model.deadlock_at):
            continue   # it never signaled (a failed op fails its signals instead), or only as the device closed
        for pos, (s, v) in enumerate(op.signal):
            if handed_over(op, s, v):
                continue   # signaled (or failed) by whoever the function handed it to, not by the op
            by_sem.setdefault(s, []).append((v, hb.node_of_op[op.id], pos, f"{op.kind} {op.id}", op.id))
            fail = model.fails.get(s)
            if fail is not None and fail[3] < op.done and fail[2] != op.id and not _cancelled(model, fail) \
                    and not (sticky is not None and op.done > sticky[2] and fail[:2] == sticky[:2]):
                out.append(Finding("semaphore.signal_after_failure", "error", [op.id],
                                   f"{op.kind} {op.id} signals {s}={v} after {s} failed "
                                   f"(status {fail[0]}: {fail[1]}); the signal is lost",
                                   {"semaphore": s, "value": v}))
    for s, hist in model.signals.items():
        for v, cause, idx in hist:
            if cause.startswith("host:"):
                thread = cause[5:]
                by_sem.setdefault(s, []).append((v, hb.node_of_host[idx], 0, f"host thread {thread}", None))
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
            by_sem.setdefault(s, []).append((v, hb.node_of_host[idx], 0, f"host thread {cause[5:]}", None))
        else:   # (a host call's function runs before the queue signals its list: position -1)
            by_sem.setdefault(s, []).append((v, hb.node_of_op[cause], -1, f"host call {cause}", cause))
    for s, sigs in by_sem.items():
        out += _check_values(model, hb, s, sigs)
    return out


def _hand_over(model, hb):
    """``handed_over(op, sem, value)``: whether a host call's signal entry was handed over. A host
    call whose function returned DEFERRED took over signalling (HAL Q12): the function, or a thread
    it handed ctx.signal to, signals (``list_signal``) or fails (``list_fail``) instead — as itself,
    not as the op. So an entry the trace does not show the op signaling (or failing), that a host
    thread signaled (or tried to), or whose semaphore a host thread failed other than before the
    host call, is not the op's; one nobody else touched stays the op's (a signal the HAL refused:
    its value was not above the semaphore's)."""
    by_host_call: dict[str, set] = {op.id: set() for op in model.ops.values() if op.kind == "host_call"}
    if not by_host_call:
        return lambda op, s, v: False
    by_host: set = set()
    for s, hist in model.signals.items():
        for v, cause, _idx in hist:
            if cause in by_host_call:
                by_host_call[cause].add(s)
            elif cause.startswith("host:"):
                by_host.add((s, v))
    failed_by_host: dict[str, int] = {}   # sem -> node of the host thread's fail
    for s, (_status, _msg, cause, idx) in model.fails.items():
        if cause in by_host_call:
            by_host_call[cause].add(s)
        elif cause.startswith("host:") and idx in hb.node_of_host:
            failed_by_host[s] = hb.node_of_host[idx]
    by_host.update((s, v) for s, v, _cause, _idx, _status in model.rejected)

    def handed_over(op, s, v) -> bool:
        signaled = by_host_call.get(op.id)
        if signaled is None or s in signaled:
            return False
        if (s, v) in by_host:
            return True
        fail = failed_by_host.get(s)
        return fail is not None and not hb.before(fail, hb.node_of_op[op.id])
    return handed_over


def _before(hb, a, b) -> bool:
    """Signal ``a`` happens before signal ``b``: one op signals its list in order (IREE
    ``iree_hal_semaphore_list_signal``), else happens-before between their nodes."""
    if a[1] == b[1]:
        return a[2] < b[2]
    return hb.before(a[1], b[1])


def _check_values(model, hb, s: str, sigs: list) -> list[Finding]:
    """non_monotonic and racing_signals among the signals ``sigs`` of semaphore ``s``."""
    out: list[Finding] = []
    # the initial value happens before every signal: one not above it cannot land (the HAL
    # refuses it). Reported against the initial value, and left out of the comparisons below
    if s in model.initial:
        initial = model.initial[s]
        low = [x for x in sigs if x[0] <= initial]
        if low:
            sigs = [x for x in sigs if x[0] > initial]
            for v, _n, _p, who, op_id in sorted(low, key=lambda x: (x[0], x[1], x[2])):
                out.append(Finding("semaphore.non_monotonic", "error", [op_id] if op_id else [],
                                   f"{who} signals {s}={v}, not above its initial value {initial}: "
                                   f"timeline values must increase",
                                   {"semaphore": s, "value": v, "initial": initial}))
    sigs.sort(key=lambda x: (x[0], x[1], x[2]))
    # neighbours in value order: if each happens before the next, all are ordered (O(n log n))
    late, tangled = set(), False
    for x1, x2 in zip(sigs, sigs[1:]):
        if x1[0] < x2[0] and _before(hb, x1, x2):
            continue
        tangled = True
        if _before(hb, x2, x1) or (x1[0] == x2[0] and _before(hb, x1, x2)):
            first, second = (x2, x1) if _before(hb, x2, x1) else (x1, x2)
            out.append(_non_monotonic(s, first, second))
            late.add(second)
        else:
            ops = sorted([o for o in (x1[4], x2[4]) if o], key=op_key)
            out.append(Finding("semaphore.racing_signals", "error", ops,
                               f"{x1[3]} signals {s}={x1[0]} and {x2[3]} signals {s}={x2[0]} with nothing "
                               f"ordering them: the final value depends on timing",
                               {"semaphore": s, "values": [x1[0], x2[0]]}))
    if tangled:
        # an unordered signal between two values hides, from neighbours, a higher one that
        # happens before a lower one: look for each signal's highest predecessor
        for first, second in _higher_predecessors(hb, sigs):
            if second not in late:
                out.append(_non_monotonic(s, first, second))
    return out


def _non_monotonic(s: str, first, second) -> Finding:
    """``second`` signals ``s`` to a value not above ``first``'s, which happens before it."""
    if first[1] == second[1] and first[4] is not None:   # one op's list, in list order
        message = (f"{second[3]} signals {s}={first[0]} then {s}={second[0]} (its signal list is "
                   f"signaled in order): timeline values must increase, so list them in increasing order")
        return Finding("semaphore.non_monotonic", "error", [second[4]], message,
                       {"semaphore": s, "value": second[0]})
    # the op that signaled first, first (ops: program order, the earlier one first)
    ops = [o for o in (first[4], second[4]) if o]
    return Finding("semaphore.non_monotonic", "error", ops,
                   f"{second[3]} signals {s}={second[0]} after {first[3]} signaled {s}={first[0]}: "
                   f"timeline values must increase", {"semaphore": s, "value": second[0]})


def _higher_predecessors(hb, sigs: list):
    """``(first, second)`` for each signal ``second`` that a signal ``first`` of a value at least
    as high happens before (the highest such one). Per lane (hb's chains of ordered nodes), the
    signals in epoch order with a running maximum: what happens before a node on a lane is a
    prefix of it (its vector clock), so each lookup is a bisection — signals x lanes of them, so
    none past :data:`FULL_CHECK_BUDGET` (thousands of mutually racing signals: racing_signals reports them)."""
    lanes: dict[int, list] = {}
    for x in sigs:
        lanes.setdefault(hb.lane[x[1]], []).append(((hb.epoch[x[1]], x[2]), x))
    if len(sigs) * len(lanes) > FULL_CHECK_BUDGET:
        return
    prefix: dict[int, tuple] = {}   # lane -> (keys, running best)
    for lane, lst in lanes.items():
        lst.sort(key=lambda e: e[0])
        best, tops = None, []
        for _key, x in lst:
            if best is None or x[0] > best[0]:
                best = x
            tops.append(best)
        prefix[lane] = ([k for k, _x in lst], tops)
    for x in sigs:
        vc, own = hb.start[x[1]], hb.lane[x[1]]
        top = None
        for lane, (keys, tops) in prefix.items():
            # on its own lane: earlier nodes, and earlier entries of its own list
            bound = (hb.epoch[x[1]], x[2]) if lane == own else (vc[lane] if lane < len(vc) else 0, 1 << 62)
            i = bisect_left(keys, bound)
            if i and (top is None or tops[i - 1][0] > top[0]):
                top = tops[i - 1]
        if top is not None and top[0] >= x[0]:
            yield top, x


def _sticky(model) -> tuple | None:
    """On a device whose queue status turns sticky (:func:`~halsim.checks.model.device_sticky`): the
    ``(status, message, op_done position)`` of the first failed op — a host call only when its wait
    failed (its function's own error is not sticky). From then on every completion fails its signal list with that
    status (IREE's ``process_completion``), so an op that ran after it signals nothing: a semaphore
    already failed with that very status loses nothing."""
    if not device_sticky(model.header):
        return None
    failed = [op for op in model.ops.values() if op.status and op.done is not None
              and (op.kind != "host_call" or model.wait_failed(op))]
    if not failed:
        return None
    first = min(failed, key=lambda op: op.done)
    return first.status, first.message, first.done


def _cancelled(model, fail) -> bool:
    """A failure that closing the device caused (a stuck op cancelled), not the program."""
    cause = model.ops.get(fail[2])
    return cause is not None and cause.stuck
