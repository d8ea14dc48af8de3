"""The ``halsim sweep`` spec: the TOML document's fields, validated, and the points it names
(``docs/campaigns.md``; the format is in :mod:`halsim.campaigns.sweep`'s docstring).

>>> spec = parse_spec({"program": {"generator": {"size": 4}}, "grid": {"queues": [1, 2], "seed": [0]}})
>>> spec.params, [point_key(p) for p in spec.points]
(['queues', 'seed'], ['{"queues":1,"seed":0}', '{"queues":2,"seed":0}'])
>>> parse_spec({"program": {"generator": {}}, "grid": {"gen.nope": [1]}})
Traceback (most recent call last):
...
halsim.campaigns.executor.CampaignError: <spec>: grid.gen.nope: 'gen.nope': unknown generator knob (expected one of: seed, size, drop_sync, queues, timelines, gates, fail_prob, wait_before_signal)
"""

from __future__ import annotations

import itertools
import json
import os
import random
import tomllib

from reference.trace.atomic import NESTED_TOO_DEEPLY, input_problem

from .. import programs
from ..programs import split_program
from .executor import CampaignError
from .generate import KNOBS, knob_problem

METRICS = {
    "makespan": ["makespan_ns", "ops", "commands", "failed_ops"],
    "utilization": ["utilization_mean", "utilization_max", "utilization"],
    "findings": ["findings", "findings_deadlock", "findings_hazard", "findings_lifetime", "findings_semaphore",
                 "findings_limit", "rules"],
    "semaphores": ["semaphores", "peak_pending_waits"],
    "pool": ["peak_events_in_use", "unpooled_events"],
    "errors": ["errors", "deadlocked"],
}
DEFAULT_METRICS = list(METRICS)
#: Metric columns that hold text (rule ids; per-track utilization as JSON), not one number.
TEXT_COLUMNS = frozenset({"rules", "utilization"})
SPEC_KEYS = ("program", "device", "grid", "sample", "metrics", "plot", "description")


class Spec:
    def __init__(self, payload, points, params, metrics, plot, path):
        self.payload = payload      # what every worker needs to run a point (picklable)
        self.points = points        # [{param: value}]
        self.params = params        # parameter names, sorted
        self.metrics = metrics
        self.plot = plot
        self.path = path

    @property
    def columns(self) -> list[str]:
        return ["key"] + self.params + [c for m in self.metrics for c in METRICS[m]] + ["error", "wall_s"]


def point_key(params: dict) -> str:
    """The point's parameters as canonical JSON (sorted keys, no spaces): the resume key."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


def load_spec(path: str) -> Spec:
    problem = input_problem(path, regular=False)  # (read once: a pipe is read as it comes)
    if problem:
        raise CampaignError(problem)
    try:
        with open(path, "rb") as f:
            doc = tomllib.loads(f.read().decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise CampaignError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:
        raise CampaignError(f"{path}: not valid TOML: {NESTED_TOO_DEEPLY}") from None
    except OSError as e:
        raise CampaignError(f"{path}: cannot read: {e.strerror or e}") from None
    return parse_spec(doc, path)


def compile_program(source: bytes, file: str):
    """:func:`halsim.programs.compile_program`, its error a :class:`CampaignError` (a sweep worker
    compiles once and runs the code afresh at every point)."""
    try:
        return programs.compile_program(source, file)
    except programs.ProgramError as e:
        raise CampaignError(str(e)) from None


def program_function(code, file: str, func: str, own: dict | None = None):
    """``func`` of a fresh run of the module ``code`` (module-level state starts over each time):
    :func:`halsim.programs.load_function`, its error a :class:`CampaignError`."""
    try:
        return programs.load_function(code, file, func, own)
    except programs.ProgramError as e:
        raise CampaignError(str(e)) from None


def _check_program(where: str, source: bytes, file: str, func: str) -> None:
    """Load the program once, as ``halsim run`` does, so a program that cannot run (a syntax error,
    an error on import, no such function, one that does not take the device) is a spec error (exit 2),
    not a sweep of failed rows."""
    try:
        programs.load_function(source, file, func)
    except programs.ProgramError as e:
        raise CampaignError(f"{where}: {e}") from None


def _shown(v) -> str:
    """A TOML value in a message: its repr, or its type for a table or a long list."""
    text = repr(v)
    return text if len(text) <= 40 else f"a {type(v).__name__}"


def _fail(path, where, reason):
    raise CampaignError(f"{path}: {where}: {reason}")


def _values(path, where, v):
    if not isinstance(v, list) or not v:
        _fail(path, where, "expected a non-empty list of values")
    for x in v:
        if not isinstance(x, (int, float, str, bool)):
            _fail(path, where, f"values must be numbers, strings or booleans, got {type(x).__name__}")
    return v


def _check_param(path, where, name, program_kind):
    if not isinstance(name, str) or not name:
        _fail(path, where, "parameter names must be non-empty strings")
    if name.startswith("gen.") and program_kind != "generator":
        _fail(path, where, f"{name!r}: gen.* parameters need [program] generator")
    if name.startswith("cost."):
        from halsim.sim.cost_model import DEFAULTS
        if name[5:] not in DEFAULTS:
            _fail(path, where, f"{name!r}: unknown cost model field {name[5:]!r}")
    if name.startswith("gen."):
        if name[4:] not in GEN_KNOBS:
            _fail(path, where, f"{name!r}: unknown generator knob (expected one of: {', '.join(GEN_KNOBS)})")


def _check_knob(path, where, name, value, program_kind):
    """A generator knob's value (``gen.KNOB``, or ``seed``, which seeds a generated program too):
    :func:`halsim.campaigns.generate.knob_problem`, the check ``halsim fuzz`` makes of its options."""
    knob = name[4:] if name.startswith("gen.") else name if name == "seed" and program_kind == "generator" else None
    if knob is not None:
        problem = knob_problem(knob, value)
        if problem:
            _fail(path, where, f"{problem}, got {_shown(value)}")


GEN_KNOBS = KNOBS  # (the generator's knobs; the name this module has always exported)


def parse_spec(doc: dict, path: str = "<spec>") -> Spec:
    """Validate a spec document; :class:`CampaignError` ``path: field: reason`` on any problem."""
    base = os.path.dirname(os.path.abspath(path)) if path != "<spec>" else os.getcwd()
    for k in doc:
        if k not in SPEC_KEYS:
            _fail(path, k, f"unknown field (expected one of: {', '.join(SPEC_KEYS)})")
    prog = doc.get("program")
    if not isinstance(prog, dict) or len([k for k in ("schedule", "python", "generator") if k in prog]) != 1 \
            or set(prog) - {"schedule", "python", "generator"}:
        _fail(path, "program", "expected exactly one of schedule = FILE, python = 'file.py:function', "
                                "generator = {knobs}")
    dev = doc.get("device", {})
    if not isinstance(dev, dict) or set(dev) - {"uri", "options", "cost_model"}:
        _fail(path, "device", "expected a table with uri, options, cost_model")
    uri = dev.get("uri")
    if uri is not None and not isinstance(uri, str):
        _fail(path, "device.uri", "expected a string")
    options = dev.get("options", {})
    cost = dev.get("cost_model", {})
    if not isinstance(options, dict):
        _fail(path, "device.options", "expected a table")
    if not isinstance(cost, dict):
        _fail(path, "device.cost_model", "expected a table of cost-model fields")
    if "schedule" in prog:
        from halsim.schedule import ScheduleError, load_schedule
        file = prog["schedule"]
        if not isinstance(file, str):
            _fail(path, "program.schedule", "expected a file name")
        file = os.path.join(base, file)
        try:
            with open(file, "rb") as f:
                raw = f.read()
            load_schedule(file)
            sdoc = tomllib.loads(raw.decode()) if file.endswith(".toml") else json.loads(raw)
        except (OSError, ScheduleError) as e:
            _fail(path, "program.schedule", str(e))
        payload = {"kind": "schedule", "doc": sdoc, "file": file}
        kind = "schedule"
    elif "python" in prog:
        spec = prog["python"]
        if not isinstance(spec, str):
            _fail(path, "program.python", "expected 'file.py[:function]'")
        file, func = split_program(spec, base)  # (at the last colon: a folder may be named run:1)
        file = os.path.join(base, file)
        if not file.endswith(".py") or not os.path.exists(file):
            _fail(path, "program.python", f"{file!r}: no such .py file")
        problem = input_problem(file, regular=False)
        if problem:
            _fail(path, "program.python", problem)
        try:
            with open(file, "rb") as f:  # (bytes: compile() reads the file's coding line)
                source = f.read()
        except OSError as e:
            _fail(path, "program.python", f"{file!r}: cannot read: {e.strerror or e}")
        _check_program(f"{path}: program.python", source, file, func or "main")
        payload = {"kind": "python", "source": source, "func": func or "main", "file": file}
        kind = "python"
    else:
        knobs = prog["generator"]
        if not isinstance(knobs, dict):
            _fail(path, "program.generator", "expected a table of knobs")
        for k, v in knobs.items():
            if k not in GEN_KNOBS:
                _fail(path, f"program.generator.{k}", f"unknown knob (expected one of: {', '.join(GEN_KNOBS)})")
            _check_knob(path, f"program.generator.{k}", f"gen.{k}", v, "generator")
        payload = {"kind": "generator", "knobs": dict(knobs)}
        kind = "generator"
    payload.update(uri=uri, options=dict(options), cost=dict(cost))

    points: list[dict] = []
    grid = doc.get("grid")
    sample = doc.get("sample")
    if grid is None and sample is None:
        grid = {"seed": [0]}
    if grid is not None:
        if not isinstance(grid, dict) or not grid:
            _fail(path, "grid", "expected a table of parameter = [values]")
        names = list(grid)
        for n in names:
            _check_param(path, f"grid.{n}", n, kind)
            for v in _values(path, f"grid.{n}", grid[n]):
                _check_knob(path, f"grid.{n}", n, v, kind)
        points += [dict(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]
    if sample is not None:
        if not isinstance(sample, dict) or set(sample) - {"n", "seed", "params"}:
            _fail(path, "sample", "expected a table with n, seed, params")
        n = sample.get("n")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            _fail(path, "sample.n", f"expected an integer >= 1, got {n!r}")
        params = sample.get("params")
        if not isinstance(params, dict) or not params:
            _fail(path, "sample.params", "expected a table of parameter = [choices] or {min, max}")
        seed = sample.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            _fail(path, "sample.seed", f"expected an integer, got {_shown(seed)}")
        rng = random.Random(seed)
        for name, dom in params.items():
            _check_param(path, f"sample.params.{name}", name, kind)
            if isinstance(dom, dict):
                if set(dom) != {"min", "max"} or not all(isinstance(dom[k], (int, float)) and not isinstance(dom[k], bool)
                                                          for k in dom) or dom["min"] > dom["max"]:
                    _fail(path, f"sample.params.{name}", "expected {min = A, max = B} with A <= B")
                for v in (dom["min"], dom["max"]):  # (every knob's valid values are a range)
                    _check_knob(path, f"sample.params.{name}", name, v, kind)
            else:
                for v in _values(path, f"sample.params.{name}", dom):
                    _check_knob(path, f"sample.params.{name}", name, v, kind)
        for _ in range(n):
            pt = {}
            for name, dom in params.items():
                if isinstance(dom, list):
                    pt[name] = rng.choice(dom)
                elif isinstance(dom["min"], int) and isinstance(dom["max"], int):
                    pt[name] = rng.randint(dom["min"], dom["max"])
                else:
                    pt[name] = round(rng.uniform(dom["min"], dom["max"]), 6)
            points.append(pt)
    seen, unique = set(), []
    for pt in points:
        k = point_key(pt)
        if k not in seen:
            seen.add(k)
            unique.append(pt)
    params = sorted({n for pt in unique for n in pt})
    metrics = doc.get("metrics", DEFAULT_METRICS)
    if not isinstance(metrics, list) or not metrics:
        _fail(path, "metrics", f"expected a list of: {', '.join(METRICS)}")
    for m in metrics:
        if not isinstance(m, str):
            _fail(path, "metrics", f"expected metric names (strings), got {_shown(m)}")
        if m not in METRICS:
            _fail(path, "metrics", f"unknown metric {m!r} (expected: {', '.join(METRICS)})")
    plot = doc.get("plot", {})
    if not isinstance(plot, dict) or set(plot) - {"x", "y", "hue"}:
        _fail(path, "plot", "expected a table with x, y, hue")
    columns = [c for m in metrics for c in METRICS[m]]
    plot = {"x": plot.get("x", params[0] if params else None),
            "y": plot.get("y", "makespan_ns" if "makespan_ns" in columns else columns[0]),
            "hue": plot.get("hue", params[1] if len(params) > 1 else None)}
    for k in ("x", "hue"):
        if plot[k] is not None and plot[k] not in params:
            _fail(path, f"plot.{k}", f"{plot[k]!r} is not a parameter (parameters: {', '.join(params)})")
    if plot["y"] not in columns:
        _fail(path, "plot.y", f"{plot['y']!r} is not a metric column (columns: {', '.join(columns)})")
    if plot["y"] in TEXT_COLUMNS:  # (the plot draws means: it would be empty)
        _fail(path, "plot.y", f"{plot['y']!r} is not a numeric column (numeric columns: "
                              f"{', '.join(c for c in columns if c not in TEXT_COLUMNS)})")
    return Spec(payload, unique, params, list(metrics), plot, path)
