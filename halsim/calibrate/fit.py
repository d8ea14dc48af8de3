"""Fit the simulator's cost model from real-backend traces by least squares (``docs/accuracy.md``).

Each parameter group is one ``numpy.linalg.lstsq`` over samples read from the traces:

======================================  ====================================================================
parameters                              samples (``docs/trace-format.md``)
======================================  ====================================================================
``{fill,copy,update}_latency_ns``,      ``cmd`` duration (``t − start``) = latency + bytes / rate, bytes = the
``{fill,copy,update}_gb_per_s``         command's last access length
``kernels.K.base_ns``,                  ``cmd`` duration of dispatches of entry K = base + per_wg·x·y·z
``kernels.K.per_workgroup_ns``          (+ per_unit·constants[unit_constant] for kernels that have one, e.g.
(``per_unit_ns``)                       ``spin``'s ``iterations``)
``launch_ns``,                          op ``start`` − when it could start, by what it waited for last: the
``launch_after_issue_ns``,              end of a device predecessor (the previous op of its queue, a wait's
``launch_after_host_ns``                producer, another queue's op when every queue the device runs at once
                                        was busy): ``launch_ns``; its launch during the issue (issue end − the
                                        fitted per-signal cost · signals, unless a predecessor or host signal
                                        came after that): ``launch_after_issue_ns``; a host signal (a user
                                        event): ``launch_after_host_ns`` (each a mean; a group of fewer than
                                        10 samples is left to ``launch_ns``)
``commit_ns``, ``event_wait_ns``,       ``issue`` ``t − start`` = commit + event_wait·events +
``event_create_ns`` (opencl) or         per-signal·signals + dispatch_commit·dispatches (a host call's
``event_record_ns`` (cuda, metal),      signals: 0). ``event_record_ns`` is set to 0 on ``opencl``: a
``dispatch_commit_ns``                  marker's host cost cannot be told apart from creating its event
``host_fn_ns``                          first ``signal`` caused by an op − the op's ``end``, when the
                                        completion path was idle: the mean of them all (those with the op
                                        alone in flight and a host thread blocked in a wait count from the
                                        later of the end and the wait's start)
``wake_ns``                             ``host_wait`` end − the satisfying ``signal`` (blocked waits), and
                                        ``issue`` start − when the op could be issued (enqueue ``t``, or the
                                        moment its last wait was reached for an issue without wait events)
                                        when the worker was idle and the submitting thread blocked in a
                                        host wait
``device_concurrency``                  the most queues running an op at the same instant (median over the
                                        traces), when at least 3 ops waited for another queue's op (ready
                                        while that many other queues held one; else 0: queues run as if
                                        alone)
``submit_ns``                           gap between consecutive queue calls of one host thread − host_api_ns
                                        (− the first call's issue when it lies in the gap, on personalities
                                        that issue inline: ``opencl``)
======================================  ====================================================================

Before sampling, each trace's device timestamps are shifted onto a causal host clock
(:func:`align_clocks`). ``trim=k`` refits without samples beyond k robust standard deviations (the
real engine's host latencies have millisecond tails; ``docs/accuracy.md``).

A group with no samples keeps the personality's default. A group with 1–2 samples, or a degenerate
design (every fill the same size: latency and bandwidth cannot be separated) is refused with
:class:`CalibrationError` naming it — or, with ``partial=True``, keeps its defaults for what cannot be
separated (a constant column is dropped and its default contribution subtracted). So are the dispatches
of an entry outside the builtin kernel library, or with different numbers of constants.

>>> import numpy as np
>>> s = Samples()
>>> for n in (1000, 2000, 4000):
...     s.add("transfer:fill", [1.0, n], 500 + n / 4)
>>> cal = fit_samples(s, personality="opencl")
>>> cal.model.fill_latency_ns, cal.model.fill_gb_per_s
(500, 4.0)
>>> s2 = Samples()
>>> for _ in range(3):
...     s2.add("transfer:copy", [1.0, 4096], 9000)
>>> fit_samples(s2)
Traceback (most recent call last):
...
halsim.calibrate.CalibrationError: copy_latency_ns/copy_gb_per_s: degenerate design: all 3 copy commands have the same size (4096 bytes): cannot separate latency from bandwidth
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass, field

import numpy as np

from reference.kernels import KERNELS

from ..sim.cost_model import CostModel
from .samples import (LAUNCH_GROUPS, TIMED_KINDS, TRANSFERS, CalibrationError, Samples,  # noqa: F401 (API)
                      align_clocks, load_trace, trace_samples)

PERSONALITIES = ("opencl", "cuda", "metal")
MIN_SAMPLES = 3
SPLIT_SAMPLES = 10  # launch samples of one kind that earn its own launch field
MAX_GB_PER_S = 1e6  # a fitted slope ≤ 0 (no measurable bandwidth term) becomes this rate


@dataclass
class Fitted:
    """One fitted parameter: its (unrounded) value, the RMS residual of its group's fit, the samples."""

    name: str
    value: float
    residual: float
    samples: int
    note: str = ""

    def to_dict(self) -> dict:
        return {"name": self.name, "value": self.value, "residual": self.residual, "samples": self.samples,
                "note": self.note}


@dataclass
class Calibration:
    model: CostModel
    params: list[Fitted]
    defaults_kept: list[str] = field(default_factory=list)
    personality: str = "opencl"

    def to_dict(self) -> dict:
        return {"personality": self.personality, "params": [p.to_dict() for p in self.params],
                "defaults_kept": self.defaults_kept, "model": self.model.to_dict()}

    def save(self, path: str | os.PathLike) -> None:
        """Write the model atomically (temporary file in the same directory, then rename)."""
        CostModel.from_dict(self.model.to_dict())  # what we write loads back
        self.model.save(path)


def _device_class(personality: str):
    if personality not in PERSONALITIES:
        raise CalibrationError(f"unknown personality {personality!r} (one of: {', '.join(PERSONALITIES)})")
    module = importlib.import_module(f"halsim.sim.personalities.{personality}")
    for obj in vars(module).values():
        if isinstance(obj, type) and getattr(obj, "personality", None) == personality and \
                isinstance(getattr(obj, "cost_defaults", None), dict):
            return obj
    return None


def personality_defaults(personality: str) -> CostModel:
    """``DEFAULTS`` with the personality's ``cost_defaults`` over them."""
    cls = _device_class(personality)
    return CostModel.from_dict(cls.cost_defaults if cls is not None else {})


def inline_issue(personality: str) -> bool:
    """Whether the personality's queue calls issue on the calling thread (its host pays the issue)."""
    return bool(getattr(_device_class(personality), "inline_issue", False))


# -- fitting --------------------------------------------------------------------------------------------

def _lstsq(X: np.ndarray, y: np.ndarray, trim: float | None = None):
    """Least squares; with ``trim`` = k, samples whose residual exceeds k robust standard deviations
    (1.4826 × the median absolute residual, at least 1 ns) are dropped and the fit redone (at most 5
    rounds, never below half the samples or the design's rank). Returns (coef, RMS residual of the
    samples kept, how many were dropped)."""
    keep = np.ones(len(y), dtype=bool)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    if trim:
        start = coef
        for _ in range(20):  # a robust start: least absolute deviations by reweighted least squares
            w = 1.0 / np.sqrt(np.maximum(np.abs(X @ start - y), 1.0))
            start, *_ = np.linalg.lstsq(X * w[:, None], y * w, rcond=None)
        coef = start
        for _ in range(5):
            r = np.abs(X @ coef - y)
            scale = max(1.4826 * float(np.median(r[keep])), 1.0)
            new = r <= trim * scale
            if new.sum() < max(len(y) // 2, X.shape[1], MIN_SAMPLES) or \
                    np.linalg.matrix_rank(X[new]) < np.linalg.matrix_rank(X) or (new == keep).all():
                break
            keep = new
            coef, *_ = np.linalg.lstsq(X[keep], y[keep], rcond=None)
    residual = float(np.sqrt(np.mean((X[keep] @ coef - y[keep]) ** 2))) if keep.any() else 0.0
    return coef, residual, int(len(y) - keep.sum())


def _constant_columns(X: np.ndarray, cols: list[int]) -> list[int]:
    return [c for c in cols if np.ptp(X[:, c]) == 0]


class _Fitter:
    def __init__(self, samples: Samples, personality: str, partial: bool, trim: float | None = None):
        self.trim = trim
        self._dropped = 0
        self._zeroed: set[int] = set()
        self.samples = samples
        self.personality = personality
        self.partial = partial
        self.base = personality_defaults(personality)
        self.doc: dict = {}
        self.kernels: dict = {}
        self.params: list[Fitted] = []
        self.kept: list[str] = []
        self.per_signal_ns = self.default_per_signal()  # the issue's per-signal cost (fitted by issue())

    def lstsq(self, X, y):
        """Least squares with every coefficient >= 0: a negative one is fixed at 0 and the others
        refitted (the most negative first) — clamping it afterwards would bias the others, e.g. a
        negative per-wait cost clamped to 0 adds that much to every op that waits."""
        cols = list(range(X.shape[1]))
        self._zeroed = set()
        while True:
            sub, res, self._dropped = _lstsq(X[:, cols], y, self.trim)
            negative = [(v, c) for v, c in zip(sub, cols) if v < 0]
            if not negative or len(cols) == 1:
                break
            worst = min(negative)[1]
            cols.remove(worst)
            self._zeroed.add(worst)
        coef = np.zeros(X.shape[1])
        coef[cols] = sub
        return coef, res

    def negative(self, column: int, value: float) -> str:
        if column in self._zeroed:
            return "negative fit: fixed at 0, the others refitted"
        return "clamped to 0" if value < 0 else ""

    def param(self, p: Fitted) -> None:
        if self._dropped:
            p.note = "; ".join(x for x in (p.note, f"{self._dropped} outliers dropped") if x)
            p.samples -= self._dropped
        self.params.append(p)

    def refuse_or_keep(self, names: list[str], why: str, kept: list[str] | None = None) -> None:
        """Refuse (names the parameters) or, with ``partial``, keep the defaults of ``kept`` (all)."""
        if not self.partial:
            raise CalibrationError(f"{'/'.join(names)}: {why}")
        self.kept.extend(f"{n} ({why})" for n in (names if kept is None else kept))

    def rows(self, group: str):
        xs, ys = self.samples.rows.get(group, ([], []))
        return np.array(xs, dtype=float).reshape(len(ys), -1) if ys else np.zeros((0, 1)), np.array(ys, dtype=float)

    def too_few(self, group: str, names: list[str], what: str) -> bool:
        n = self.samples.count(group)
        if n == 0:
            self.kept.extend(f"{name} (no {what})" for name in names)
            return True
        if n < MIN_SAMPLES:
            self.refuse_or_keep(names, f"too few samples: {n} {what} (need {MIN_SAMPLES})")
            return True
        return False

    def ns(self, value: float) -> int:
        return max(0, int(round(value)))

    # one intercept-only group → one field
    def constant(self, group_names: list[str], field_name: str, what: str) -> None:
        ys = []
        for g in group_names:
            ys.extend(self.samples.rows.get(g, ([], []))[1])
        n = len(ys)
        if n == 0:
            self.kept.append(f"{field_name} (no {what})")
            return
        if n < MIN_SAMPLES:
            self.refuse_or_keep([field_name], f"too few samples: {n} {what} (need {MIN_SAMPLES})")
            return
        y = np.array(ys, dtype=float)
        coef, res = self.lstsq(np.ones((n, 1)), y)
        note = "clamped to 0" if coef[0] < 0 else ""
        self.doc[field_name] = self.ns(coef[0])
        self.param(Fitted(field_name, float(coef[0]), res, n, note))

    def transfer(self, kind: str) -> None:
        lat, rate = f"{kind}_latency_ns", f"{kind}_gb_per_s"
        group = f"transfer:{kind}"
        if self.too_few(group, [lat, rate], f"{kind} commands"):
            return
        X, y = self.rows(group)
        if np.ptp(X[:, 1]) == 0:
            why = (f"degenerate design: all {len(y)} {kind} commands have the same size ({int(X[0, 1])} bytes): "
                   "cannot separate latency from bandwidth")
            self.refuse_or_keep([lat, rate], why, kept=[rate])
            if self.partial:  # latency only, the default bandwidth kept
                default_rate = getattr(self.base, rate)
                coef, res = self.lstsq(X[:, :1], y - X[:, 1] / default_rate)
                self.doc[lat] = self.ns(coef[0])
                self.param(Fitted(lat, float(coef[0]), res, len(y), "bandwidth kept at default"))
            return
        coef, res = self.lstsq(X[:, :2], y)
        latency, slope = float(coef[0]), float(coef[1])
        gbps = 1.0 / slope if slope > 1.0 / MAX_GB_PER_S else MAX_GB_PER_S
        self.doc[lat] = self.ns(latency)
        self.doc[rate] = float(f"{gbps:.6g}")  # the raw fit is in params
        self.param(Fitted(lat, latency, res, len(y), self.negative(0, latency)))
        self.param(Fitted(rate, gbps, res, len(y), "no measurable bandwidth term" if slope <= 1.0 / MAX_GB_PER_S
                                  else ""))

    def dispatch(self, kernel: str) -> None:
        group = f"dispatch:{kernel}"
        prefix = f"kernels.{kernel}"
        default = dict(self.base.kernels.get(kernel) or {})
        unit = default.get("unit_constant")
        names = [f"{prefix}.base_ns", f"{prefix}.per_workgroup_ns"] + ([f"{prefix}.per_unit_ns"] if unit is not None
                                                                       else [])
        if kernel not in KERNELS:  # the model can time only what the simulator can dispatch
            self.refuse_or_keep([prefix], f"entry {kernel!r} is not in the builtin kernel library (one of: "
                                f"{', '.join(sorted(KERNELS))}): its dispatches cannot be modelled")
            return
        if self.too_few(group, names, f"{kernel} dispatches"):
            return
        counts = sorted({len(x) - 2 for x in self.samples.rows[group][0]})
        if len(counts) > 1:  # e.g. traces of two builds of the kernel fitted together
            self.refuse_or_keep([prefix], f"the {kernel} dispatches carry different numbers of constants "
                                f"({', '.join(map(str, counts))})")
            return
        X_all, y = self.rows(group)
        cols = [X_all[:, 0], X_all[:, 1]]
        if unit is not None:
            if X_all.shape[1] <= 2 + unit:
                self.refuse_or_keep(names[2:], f"{kernel} dispatches lack constant {unit}")
                unit, names = None, names[:2]
            else:
                cols.append(X_all[:, 2 + unit])
        X = np.stack(cols, axis=1)
        keep = [0]
        defaults_used = {}
        for c in range(1, X.shape[1]):
            if np.ptp(X[:, c]) == 0:
                what = "workgroup count" if c == 1 else f"constant {unit} ({names[c].rsplit('.', 1)[1]})"
                why = (f"degenerate design: all {len(y)} {kernel} dispatches have the same {what} "
                       f"({int(X[0, c])}): cannot separate base_ns from {names[c].rsplit('.', 1)[1]}")
                self.refuse_or_keep([names[0], names[c]], why, kept=[names[c]])
                field_name = names[c].rsplit(".", 1)[1]
                dv = default.get(field_name)
                if dv is None:
                    dv = self.base.dispatch_per_workgroup_ns
                defaults_used[c] = dv
            else:
                keep.append(c)
        y_adj = y - sum(X[:, c] * v for c, v in defaults_used.items())
        if np.linalg.matrix_rank(X[:, keep]) < len(keep):
            self.refuse_or_keep([names[c] for c in keep], f"degenerate design: the {kernel} dispatches' workgroup "
                                "counts and constants are collinear")
            return
        coef, res = self.lstsq(X[:, keep], y_adj)
        # (a unit term the dispatches lacked the constant for keeps its default, constant index included)
        entry = {"base_ns": None, "per_workgroup_ns": None, "per_unit_ns": default.get("per_unit_ns", 0),
                 "unit_constant": default.get("unit_constant")}
        for c, v in defaults_used.items():
            entry[names[c].rsplit(".", 1)[1]] = int(v)
        for c, v in zip(keep, coef):
            field_name = names[c].rsplit(".", 1)[1]
            entry[field_name] = self.ns(v)
            self.param(Fitted(names[c], float(v), res, len(y), self.negative(keep.index(c), v)))
        self.kernels[kernel] = entry

    def default_per_signal(self) -> float:
        """The defaults' per-signal issue cost: opencl records an event it creates (no pool); cuda and
        metal record one from their pool."""
        b = self.base
        return b.event_record_ns + (b.event_create_ns if self.personality == "opencl" else 0)

    def issue(self) -> None:
        per_signal = "event_create_ns" if self.personality == "opencl" else "event_record_ns"
        names = ["commit_ns", "event_wait_ns", per_signal, "dispatch_commit_ns"]
        if self.too_few("issue", names, "issue events"):
            return
        X, y = self.rows("issue")
        keep, fixed = [0], {}
        for c, name in ((1, "event_wait_ns"), (2, per_signal), (3, "dispatch_commit_ns")):
            if c == 3 and not X[:, 3].any():  # no dispatches: nothing to fit it from
                self.kept.append("dispatch_commit_ns (no dispatches issued)")
                fixed[c] = self.base.dispatch_commit_ns
            elif np.ptp(X[:, c]) == 0:
                what = {1: "wait-event count", 2: "signal count", 3: "dispatch count"}[c]
                self.refuse_or_keep(["commit_ns", name], f"degenerate design: all {len(y)} issued ops have the same "
                                    f"{what} ({int(X[0, c])}): cannot separate commit_ns from {name}", kept=[name])
                # (the per-signal term as the kept model charges it: on opencl record + create)
                fixed[c] = self.default_per_signal() if c == 2 else getattr(self.base, name)
            else:
                keep.append(c)
        y_adj = y - sum(X[:, c] * v for c, v in fixed.items())
        coef, res = self.lstsq(X[:, keep], y_adj)
        for c, v in zip(keep, coef):
            self.doc[names[c]] = self.ns(v)
            self.param(Fitted(names[c], float(v), res, len(y), self.negative(keep.index(c), v)))
        self.per_signal_ns = float(coef[keep.index(2)]) if 2 in keep else fixed[2]
        if self.personality == "opencl" and 2 in keep:
            self.doc["event_record_ns"] = 0  # inside event_create_ns (and launch_ns on the device)

    def launch(self) -> None:
        """``launch_ns`` and, where their ops are numerous enough, ``launch_after_issue_ns`` and
        ``launch_after_host_ns``: the mean of each launch group ("device": after a device predecessor;
        "issue": after the issue launched it onto an idle queue; "host": after a host signal set its
        user event), fitted after the issue group. An op issued ready is launched before its signal
        events are recorded (the model's issue), so its sample is start − (issue end − per-signal
        cost · signals). A group gets a field of its own from SPLIT_SAMPLES samples on (fewer could
        not be trimmed of outliers); otherwise its field stays null (the value of ``launch_ns``), and
        ``launch_ns`` is fitted on every sample unless the "device" group has enough of its own."""
        groups = self.launch_samples()
        n = sum(len(y) for y in groups.values())
        if n == 0:
            self.kept.append("launch_ns (no launch samples (timed ops))")
            return
        if n < MIN_SAMPLES:
            self.refuse_or_keep(["launch_ns"], f"too few samples: {n} launch samples (timed ops) (need {MIN_SAMPLES})")
            return

        def mean(field, y, note=""):
            coef, res = self.lstsq(np.ones((len(y), 1)), y)
            self.doc[field] = self.ns(coef[0])
            notes = [note] if note else []
            if coef[0] < 0:  # (with the group's note, not instead of it: the table shows the raw value)
                notes.append("clamped to 0")
            self.param(Fitted(field, float(coef[0]), res, len(y), "; ".join(notes)))

        for group, field in (("launch:issue", "launch_after_issue_ns"), ("launch:host", "launch_after_host_ns")):
            if len(groups.get(group, ())) >= SPLIT_SAMPLES:
                mean(field, groups[group])
        device = groups.get("launch:device", ())
        if len(device) >= SPLIT_SAMPLES:
            mean("launch_ns", device)
        else:
            mean("launch_ns", np.concatenate(list(groups.values())),
                 "every launch sample (fewer than %d after a device predecessor)" % SPLIT_SAMPLES)

    def launch_samples(self) -> dict:
        """Launch samples by group, each measured from its launch point: an op issued ready launches at
        issue end − per-signal cost · signals; when its last device predecessor ended (or a host signal
        came) after that point, it waited for that instead (the model's ``launch_at < last_end``)."""
        groups = {g: [self.rows(g)[1]] for g in LAUNCH_GROUPS}
        X, y = self.rows("launch:issue")
        if len(y):
            markers = self.per_signal_ns * X[:, 1]
            issue = y + markers
            if X.shape[1] >= 4:  # (how long before the issue end the device got free, a host signal came)
                device, host = X[:, 2], X[:, 3]
                to_device = (device < markers) & (device <= host)
                to_host = (host < markers) & ~to_device
                groups["launch:device"].append(y[to_device] + device[to_device])
                groups["launch:host"].append(y[to_host] + host[to_host])
                issue = issue[~(to_device | to_host)]
            groups["launch:issue"] = [issue]
        groups = {g: np.concatenate(parts) for g, parts in groups.items()}
        return {g: v for g, v in groups.items() if len(v)}

    def concurrency(self) -> None:
        """``device_concurrency``: the most queues seen running at once (the median over traces: PoCL
        now and then overlaps two queues' kernels on its threads), if ops waited for another queue's op
        (at least MIN_SAMPLES of them); else every queue runs as if alone (0)."""
        X, y = self.rows("queues")
        if not len(y):
            self.kept.append("device_concurrency (no traces with more than one queue)")
            return
        waited = int(X[:, 2].sum())
        most, queues = int(np.percentile(y, 50, method="lower")), int(X[:, 1].max())
        value = most if waited >= MIN_SAMPLES and most < queues else 0
        self.doc["device_concurrency"] = value
        self.params.append(Fitted("device_concurrency", float(value), 0.0, len(y),
                                  f"most queues running at once: median {most} of {queues} (max {int(y.max())}); "
                                  f"{waited} ops waited for another queue's op"))

    def run(self) -> Calibration:
        for kind in TRANSFERS:
            self.transfer(kind)
        kernels = sorted(g.split(":", 1)[1] for g in self.samples.rows if g.startswith("dispatch:"))
        for k in kernels:
            self.dispatch(k)
        self.issue()
        self.launch()
        self.concurrency()
        # One completion latency, the mean of every idle-path completion: on the opencl backend a
        # host thread blocked in a wait completes work itself (Engine.help, ~15 us) while the
        # completion thread polls (~100 us); fitted from the waited-for ones alone, the model made
        # every other completion too fast (held-out error 8-10 % against 5-6 % this way, 8-10 runs
        # each, docs/accuracy.md).
        self.constant(["host_fn", "host_fn:other"], "host_fn_ns", "completion samples (op end → signal)")
        self.constant(["wake:host", "wake:issue"], "wake_ns", "wake samples (blocked host waits, idle-worker issues)")
        n = self.samples.count("submit")
        if n:
            X, ys = self.rows("submit")
            ys = ys - self.base.host_api_ns
            if inline_issue(self.personality):  # the host thread issued (column 1: that issue's duration)
                ys = ys - X[:, 1]
            if n < MIN_SAMPLES:
                self.refuse_or_keep(["submit_ns"], f"too few samples: {n} consecutive queue calls (need {MIN_SAMPLES})")
            else:
                coef, res = self.lstsq(np.ones((n, 1)), ys)
                self.doc["submit_ns"] = self.ns(coef[0])
                note = "gap − host_api_ns" + (" − inline issue" if inline_issue(self.personality) else "")
                self.param(Fitted("submit_ns", float(coef[0]), res, n, note))
        else:
            self.kept.append("submit_ns (no consecutive queue calls)")
        doc = dict(self.doc)
        if self.kernels:
            doc["kernels"] = self.kernels
        model = CostModel.from_dict(doc, self.base)
        return Calibration(model, self.params, self.kept, self.personality)


def fit_samples(samples: Samples, personality: str = "opencl", partial: bool = False,
                trim: float | None = None) -> Calibration:
    """Fit every parameter group that has samples (see the module docstring); ``trim``: drop outliers
    beyond that many robust standard deviations (None: plain least squares over every sample)."""
    return _Fitter(samples, personality, partial, trim).run()


def fit(traces, personality: str = "opencl", partial: bool = False, trim: float | None = None,
        align: bool = True) -> Calibration:
    """Fit from traces: paths, ``Trace`` objects or lists of event dicts (``align``: see
    :func:`align_clocks`)."""
    samples = Samples()
    for t in traces:
        if isinstance(t, (str, os.PathLike)):
            t = load_trace(t)
        events = list(t)
        if align:
            events, _delta = align_clocks(events)
        samples.extend(trace_samples(events))
    if not samples.rows:
        raise CalibrationError("no samples: the traces have no timed operations")
    return fit_samples(samples, personality, partial, trim)


def format_table(cal: Calibration) -> str:
    lines = [f"{'parameter':<34} {'value':>14} {'residual':>12} {'samples':>8}  note"]
    for p in cal.params:
        value = f"{p.value:.4g}" if p.name.endswith("gb_per_s") else f"{p.value:.1f}"
        lines.append(f"{p.name:<34} {value:>14} {p.residual:>12.1f} {p.samples:>8}  {p.note}".rstrip())
    if cal.defaults_kept:
        lines.append(f"defaults kept ({cal.personality}): " + "; ".join(cal.defaults_kept))
    return "\n".join(lines)


def dumps(cal: Calibration) -> str:
    return json.dumps(cal.to_dict(), indent=2, default=float)
