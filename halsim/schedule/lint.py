"""Findings a schedule shows before (or instead of) its trace: calls the HAL rejected leave no
trace event, so the schedule itself says what they tried.

* values past ``MAX_SEMAPHORE_VALUE`` anywhere in a wait or signal (``semaphore.overflow``);
* a host ``signal`` step that raised: ``INVALID_ARGUMENT`` is a value not above the current one
  (``semaphore.non_monotonic``; only where the trace has no ``signal_rejected`` event for it, which
  the trace's own rules report), any other status the semaphore's stored failure
  (``semaphore.signal_after_failure``).

>>> from halsim.schedule import parse_schedule
>>> s = parse_schedule({"semaphores": {"s": 0},
...                     "host": [{"call": "barrier", "signal": {"s": 2**31}}]})
>>> [f.message for f in static_findings(s)]
['host[0] (barrier) uses s=2147483648, past MAX_SEMAPHORE_VALUE (2147483646): the HAL rejects the call']
"""

from __future__ import annotations

from halsim.checks.findings import Finding
from halsim.checks.rules.semaphore import MAX_SEMAPHORE_VALUE


def static_findings(schedule) -> list[Finding]:
    out = []
    for _name, steps in schedule.threads:
        for st in steps:
            pairs = list(st.get("wait", [])) + list(st.get("signal", []))
            if st["call"] == "signal":
                pairs.append((st["semaphore"], st["value"]))
            for sem, value in pairs:
                if value > MAX_SEMAPHORE_VALUE:
                    out.append(Finding("semaphore.overflow", "error", [],
                                       f"{st['where']} ({st['call']}) uses {sem}={value}, past "
                                       f"MAX_SEMAPHORE_VALUE ({MAX_SEMAPHORE_VALUE}): the HAL rejects the call",
                                       {"semaphore": sem, "value": value, "step": st["where"]}))
    return out


def error_findings(errors, schedule=None, trace=None) -> list[Finding]:
    """Findings for host ``signal`` steps that raised. A refusal the trace itself records (a
    ``signal_rejected`` event: the trace's rules report it, with what it raced with) is left to
    them, given the ``schedule`` and its run's ``trace``: one bug, one finding."""
    out = []
    traced = _traced_rejections(schedule, trace) if errors else set()
    for e in errors:
        if e.call != "signal" or "MAX_SEMAPHORE_VALUE" in e.message:
            continue
        first = e.message.splitlines()[0] if e.message else ""
        if e.code == 3 and e.where in traced:
            continue
        if e.code == 3:
            out.append(Finding("semaphore.non_monotonic", "error", [],
                               f"host signal at {e.where} ({e.thread} thread) was rejected: {first}",
                               {"step": e.where}))
        else:
            from reference.hal import StatusCode
            why = StatusCode(e.code).name + (f": {first}" if first else "")
            out.append(Finding("semaphore.signal_after_failure", "error", [],
                               f"host signal at {e.where} ({e.thread} thread) hit a failed semaphore ({why})",
                               {"step": e.where}))
    return out


def _traced_rejections(schedule, trace) -> set:
    """``where`` of each host ``signal`` step whose refusal the trace records (``signal_rejected``
    with its semaphore and value; the schedule's semaphores are the trace's first ones, created
    in the order the file declares them)."""
    if schedule is None or trace is None:
        return set()
    ids = [e["sem"] for e in trace.events("semaphore")][:len(schedule.semaphores)]
    of_name = dict(zip(schedule.semaphores, ids))
    rejected = {(e["sem"], e["value"]) for e in trace.events("signal_rejected") if e.get("status") == 3}
    return {st["where"] for _name, steps in schedule.threads for st in steps
            if st["call"] == "signal" and (of_name.get(st["semaphore"]), st["value"]) in rejected}
