"""Schedule checks on a trace from any device (DESIGN §8; ``docs/checks.md``).

:func:`check_trace` builds the happens-before model (:mod:`.hb`) and runs every rule: deadlocks,
data hazards, lifetimes, semaphore misuse and CUDA limits. Commands are kept from the first pass as
compact tuples (up to two million; past that they are streamed from the trace a second time).

>>> from reference import hal
>>> dev = hal.create_device("sim")
>>> s = dev.create_semaphore()
>>> dev.queue_barrier([], [(s, 1)])
>>> s.wait(1)
>>> report = check_trace(dev.trace)
>>> report.findings, report.stats["ops"]
([], 1)
>>> dev.close()
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .findings import CATEGORIES, Finding
from .hb import HappensBefore
from .model import TraceModel
from .rules import RULES, deadlock, limit, semaphore
from .rules.hazard import HazardChecker
from .rules.lifetime import LifetimeChecker

__all__ = ["CATEGORIES", "RULES", "CheckReport", "Finding", "HappensBefore", "TraceModel",
           "check_trace", "select_rules"]


@dataclass
class CheckReport:
    findings: list[Finding]
    stats: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"findings": [f.to_json() for f in self.findings], "stats": self.stats}


def select_rules(patterns) -> set[str]:
    """Rule ids matching ``patterns`` (ids, categories or an id's leading dot-separated parts);
    ValueError on an unknown one."""
    chosen = set()
    for p in patterns:
        hit = {r for r in RULES if r == p or r.startswith(p.rstrip(".") + ".")}
        if not hit:
            raise ValueError(f"unknown rule or category {p!r} (known: {', '.join(sorted(RULES))})")
        chosen |= hit
    return chosen


def check_trace(trace, rules=None, keep_commands: int = 2_000_000) -> CheckReport:
    """Every finding of the rules (ids, categories or prefixes; default all) on ``trace``; past
    ``keep_commands`` commands, they are read from the trace a second time instead of kept."""
    wanted = select_rules(rules) if rules else set(RULES)
    model = TraceModel(trace, keep_commands)
    hb = HappensBefore(model)
    streaming = []
    if any(r.startswith("hazard.") for r in wanted):
        streaming.append(HazardChecker(model, hb))
    if any(r.startswith("lifetime.") for r in wanted):
        streaming.append(LifetimeChecker(model, hb))
    host = model.host_accesses if streaming else []
    h = 0  # host accesses are fed in trace order among the commands: by how many commands precede each
    if streaming and model.ncmds:
        for k, command in enumerate(model.commands()):
            while h < len(host) and host[h][0] <= k:
                for checker in streaming:
                    checker.host_access(*host[h][1:])
                h += 1
            for checker in streaming:
                checker.command(*command)
    for access in host[h:]:
        for checker in streaming:
            checker.host_access(*access[1:])
    findings = []
    for checker in streaming:
        findings += checker.findings()
    for module in (deadlock, semaphore, limit):
        if any(r in module.RULES for r in wanted):
            findings += module.check(model, hb)
    findings = sorted((f for f in findings if f.rule in wanted), key=Finding.sort_key)
    stats = {"device": model.device, "ordering": model.ordering, "ops": len(model.ops),
             "commands": model.ncmds, "lanes": hb.lanes}
    return CheckReport(findings, stats)
