"""Load and validate a schedule file (TOML or JSON; ``docs/schedule-format.md``).

Every problem is a :class:`ScheduleError` whose message is ``file: field.path: reason`` — the
command line prints it and exits with status 2. The result is a :class:`Schedule` of plain,
validated dicts that :mod:`halsim.schedule.run` turns into HAL calls.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "s.toml")
>>> _ = open(path, "w").write('''
... [semaphores]
... done = 0
... [[host]]
... call = "barrier"
... signal = { dome = 1 }
... ''')
>>> try:
...     load_schedule(path)
... except ScheduleError as e:
...     print(str(e).replace(path, "s.toml"))
s.toml: host[0].signal.dome: no semaphore named 'dome' (declared: done)
"""

from __future__ import annotations

import json
import os
import threading
import tomllib
from dataclasses import dataclass, field

from reference.trace import FORMAT as TRACE_FORMAT
from reference.trace.atomic import NESTED_TOO_DEEPLY, input_problem

QUEUE_CALLS = ("execute", "barrier", "fill", "copy", "update", "dispatch", "alloca", "dealloca")
HOST_CALLS = ("signal", "fail", "wait", "sleep", "release", "flush")
COMMANDS = ("fill", "copy", "update", "dispatch", "barrier")
SUFFIXES = (".toml", ".json")
MAX_SECONDS = threading.TIMEOUT_MAX  # the longest sleep or wait timeout a step may ask for


class ScheduleError(ValueError):
    """A schedule file that cannot be used: ``file: field.path: reason``."""


@dataclass
class Schedule:
    path: str
    description: str = ""
    expect: list = field(default_factory=list)
    device: str = "sim"
    options: dict = field(default_factory=dict)
    semaphores: dict = field(default_factory=dict)       # name -> initial value
    buffers: dict = field(default_factory=dict)          # name -> size
    command_buffers: dict = field(default_factory=dict)  # name -> {"reusable": bool, "commands": [...]}
    threads: list = field(default_factory=list)          # [(name, [step, ...])]; the main thread first


def is_schedule_path(path: str) -> bool:
    return path.endswith(SUFFIXES)


class _Checker:
    def __init__(self, path: str):
        self.path = path
        self.transients: set[str] = set()
        self.recorded = False   # checking a command buffer's commands (recorded before any step)

    def fail(self, where: str, reason: str):
        raise ScheduleError(f"{self.path}: {where}: {reason}")

    def table(self, value, where) -> dict:
        if not isinstance(value, dict):
            self.fail(where, f"expected a table, got {_kind(value)}")
        return value

    def int(self, value, where, minimum=0) -> int:
        if value is None:
            self.fail(where, "missing")
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(where, f"expected an integer, got {_kind(value)}")
        if value < minimum:
            self.fail(where, f"must be >= {minimum}, got {value}")
        return value

    def number(self, value, where, maximum: float = MAX_SECONDS) -> float:
        if value is None:
            self.fail(where, "missing")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            self.fail(where, f"expected a non-negative number, got {value!r}")
        if not value <= maximum:
            self.fail(where, f"must be at most {maximum:.4g} seconds (what a thread can wait for), got {value!r}")
        return float(value)

    def str(self, value, where, choices=None) -> str:
        if value is None:
            self.fail(where, "missing")
        if not isinstance(value, str):
            self.fail(where, f"expected a string, got {_kind(value)}")
        if choices is not None and value not in choices:
            self.fail(where, f"unknown value {value!r} (expected one of: {', '.join(choices)})")
        return value

    def keys(self, d: dict, where: str, allowed) -> None:
        for k in d:
            if k not in allowed:
                self.fail(f"{where}.{k}" if where else k, f"unknown field (expected one of: {', '.join(allowed)})")

    def name(self, value, where, known: dict, what: str) -> str:
        self.str(value, where)
        if what == "buffer" and self.recorded and value in self.transients and value not in known:
            self.fail(where, f"{value!r} is a transient buffer (an alloca step's): command buffers are "
                             "recorded before any step runs, so they use buffers declared under [buffers]")
        if value not in known and not (what == "buffer" and value in self.transients):
            names = ", ".join(sorted(set(known) | (self.transients if what == "buffer" else set()))) or "none"
            self.fail(where, f"no {what} named {value!r} (declared: {names})")
        return value


def _kind(value) -> str:
    return {dict: "a table", list: "a list", str: "a string", bool: "a boolean"}.get(type(value), type(value).__name__)


def load_schedule(path: str) -> Schedule:
    """Read and validate ``path``; raises :class:`ScheduleError`. The file is read once: a pipe
    (``<(cat s.toml)``) is read as it comes."""
    problem = input_problem(path, regular=False)
    if problem:
        raise ScheduleError(problem)
    fmt = "TOML" if path.endswith(".toml") else "JSON"
    try:
        with open(path, "rb") as f:
            raw = f.read()
        doc = tomllib.loads(raw.decode("utf-8")) if path.endswith(".toml") else \
            json.loads(raw, object_pairs_hook=_JsonObject.of)
        _no_duplicates(_Checker(path), doc, "")  # (recursive too)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ScheduleError(f"{path}: not valid {fmt}: {e}") from None
    except RecursionError:
        raise ScheduleError(f"{path}: not valid {fmt}: {NESTED_TOO_DEEPLY}") from None
    except OSError as e:
        raise ScheduleError(f"{path}: cannot read: {e.strerror or e}") from None
    if isinstance(doc, dict) and doc.get("format") == TRACE_FORMAT:  # (else "format: unknown field")
        raise ScheduleError(f"{path}: a halsim trace, not a schedule (halsim check, stats, export and plot "
                            f"read traces)")
    return parse_schedule(doc, path)


class _JsonObject(dict):
    """A JSON object that remembers the keys it named twice (``json`` keeps the last silently;
    TOML refuses them): a duplicate is an error, as a typo is."""

    duplicates: tuple = ()

    @classmethod
    def of(cls, pairs):
        obj = cls(pairs)
        if len(obj) != len(pairs):
            seen: set = set()
            obj.duplicates = tuple(k for k, _v in pairs if k in seen or seen.add(k))
        return obj


def _no_duplicates(c: "_Checker", value, where: str) -> None:
    if isinstance(value, dict):
        for k in getattr(value, "duplicates", ()):
            c.fail(f"{where}.{k}" if where else k, "duplicate key (the object names it twice)")
        for k, v in value.items():
            _no_duplicates(c, v, f"{where}.{k}" if where else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _no_duplicates(c, v, f"{where}[{i}]")


def parse_schedule(doc, path: str = "<schedule>") -> Schedule:
    """Validate an already-parsed document (see :func:`load_schedule`)."""
    from .steps import check_command, check_step

    c = _Checker(path)
    c.table(doc, "(top level)")
    c.keys(doc, "", ("description", "expect", "device", "semaphores", "buffers", "command_buffers",
                     "host", "threads"))
    s = Schedule(path)
    s.description = c.str(doc.get("description", ""), "description")
    expect = doc.get("expect", [])
    if not isinstance(expect, list):
        c.fail("expect", f"expected a list of rule ids, got {_kind(expect)}")
    from halsim.checks.rules import RULES
    for i, rule in enumerate(expect):
        c.str(rule, f"expect[{i}]", list(RULES))
    s.expect = list(expect)
    dev = doc.get("device", {})
    if isinstance(dev, str):
        dev = {"uri": dev}
    c.table(dev, "device")
    c.keys(dev, "device", ("uri", "options"))
    s.device = c.str(dev.get("uri", "sim"), "device.uri")
    s.options = dict(c.table(dev.get("options", {}), "device.options"))
    for name, value in c.table(doc.get("semaphores", {}), "semaphores").items():
        s.semaphores[name] = c.int(value, f"semaphores.{name}")
    for name, value in c.table(doc.get("buffers", {}), "buffers").items():
        if isinstance(value, dict):
            c.keys(value, f"buffers.{name}", ("size",))
            value = value.get("size")
        s.buffers[name] = c.int(value, f"buffers.{name}", minimum=1)
    host = doc.get("host", [])
    threads = doc.get("threads", [])
    if not isinstance(host, list):
        c.fail("host", f"expected a list of steps ([[host]] tables), got {_kind(host)}")
    if not isinstance(threads, list):
        c.fail("threads", f"expected a list of threads ([[threads]] tables), got {_kind(threads)}")
    # transient buffers are named by their alloca steps, wherever those are
    for where, steps in [("host", host)] + [(f"threads[{i}].steps", t.get("steps", []) if isinstance(t, dict) else [])
                                            for i, t in enumerate(threads)]:
        for i, st in enumerate(steps if isinstance(steps, list) else []):
            if isinstance(st, dict) and st.get("call") == "alloca" and isinstance(st.get("name"), str):
                if st["name"] in s.buffers:
                    c.fail(f"{where}[{i}].name", f"{st['name']!r} is already a buffer")
                c.transients.add(st["name"])
    for name, cb in c.table(doc.get("command_buffers", {}), "command_buffers").items():
        where = f"command_buffers.{name}"
        c.table(cb, where)
        c.keys(cb, where, ("commands", "reusable"))
        cmds = cb.get("commands", [])
        if not isinstance(cmds, list):
            c.fail(f"{where}.commands", f"expected a list of commands, got {_kind(cmds)}")
        reusable = cb.get("reusable", False)
        if not isinstance(reusable, bool):
            c.fail(f"{where}.reusable", f"expected true or false, got {_kind(reusable)}")
        c.recorded = True
        s.command_buffers[name] = {"reusable": reusable,
                                   "commands": [check_command(c, s, cmd, f"{where}.commands[{i}]")
                                                for i, cmd in enumerate(cmds)]}
        c.recorded = False
    s.threads.append(("main", [check_step(c, s, st, f"host[{i}]") for i, st in enumerate(host)]))
    for i, t in enumerate(threads):
        where = f"threads[{i}]"
        c.table(t, where)
        c.keys(t, where, ("name", "steps"))
        name = c.str(t.get("name", f"thread {i + 1}"), f"{where}.name")
        steps = t.get("steps", [])
        if not isinstance(steps, list):
            c.fail(f"{where}.steps", f"expected a list of steps, got {_kind(steps)}")
        s.threads.append((name, [check_step(c, s, st, f"{where}.steps[{j}]") for j, st in enumerate(steps)]))
    if not any(steps for _n, steps in s.threads):
        c.fail("host", "the schedule has no steps (add [[host]] tables)")
    return s
