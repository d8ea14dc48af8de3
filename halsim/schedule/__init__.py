"""Schedule files: HAL programs written as data (TOML or JSON), for people who would rather not
write Python (``docs/schedule-format.md``). :func:`load_schedule` validates a file,
:func:`run_schedule` runs it on any device and returns the trace.

>>> s = parse_schedule({"semaphores": {"s": 0}, "host": [{"call": "signal", "semaphore": "s", "value": 1}]})
>>> [e["value"] for e in run_schedule(s).trace.events("signal")]
[1]
"""

from .load import Schedule, ScheduleError, is_schedule_path, load_schedule, parse_schedule
from .run import RunResult, StepError, run_schedule

__all__ = ["RunResult", "Schedule", "ScheduleError", "StepError", "is_schedule_path", "load_schedule",
           "parse_schedule", "run_schedule"]
