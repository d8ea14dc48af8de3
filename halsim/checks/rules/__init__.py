"""The rules, one module per category; ``RULES`` maps every stable rule id to a one-line summary.

>>> sorted(RULES)[:3]
['deadlock.cycle', 'deadlock.host_wait', 'deadlock.queue_order']
"""

from . import deadlock, hazard, lifetime, limit, semaphore

RULES: dict[str, str] = {}
for _module in (deadlock, hazard, lifetime, semaphore, limit):
    RULES.update(_module.RULES)

__all__ = ["RULES", "deadlock", "hazard", "lifetime", "limit", "semaphore"]
