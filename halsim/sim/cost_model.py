"""The cost model: how long things take in virtual time (``docs/cost-model.md`` documents every field).

A cost model is a flat JSON document of integer nanosecond latencies and GB/s bandwidths, plus
per-kernel dispatch overrides. Missing fields take the personality's defaults; an unknown field is
INVALID_ARGUMENT naming it, so a typo never silently falls back to a default.

>>> m = CostModel.from_dict({"fill_latency_ns": 100, "fill_gb_per_s": 2})
>>> m.transfer_ns("fill", 1000)  # 100 ns latency + 1000 bytes at 2 bytes/ns
600
>>> CostModel.from_dict({"fill_latncy_ns": 1})
Traceback (most recent call last):
...
reference.hal.status.HalError: INVALID_ARGUMENT: unknown cost model field 'fill_latncy_ns'
"""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass, field, fields, replace
from fractions import Fraction
from typing import Any, Mapping

from reference.hal import HalError, Range, StatusCode
from reference.kernels import KERNELS
from reference.trace.atomic import NESTED_TOO_DEEPLY, atomic_write

FORMAT = "halsim-cost-model"
VERSION = 1

# Field → default. Integers are nanoseconds; *_gb_per_s are GB/s (= bytes per ns).
DEFAULTS: dict[str, Any] = {
    "host_api_ns": 100,
    "submit_ns": 1_000,
    "wake_ns": 2_000,
    "launch_ns": 3_000,
    "launch_after_issue_ns": None,   # None: launch_ns (stream personalities: sim:cuda, sim:opencl)
    "launch_after_host_ns": None,
    "fill_latency_ns": 1_500,
    "fill_gb_per_s": 200.0,
    "copy_latency_ns": 1_500,
    "copy_gb_per_s": 100.0,
    "update_latency_ns": 2_000,
    "update_gb_per_s": 12.0,
    "dispatch_base_ns": 4_000,
    "dispatch_per_workgroup_ns": 20,
    "barrier_ns": 100,
    "event_ns": 100,
    "host_call_latency_ns": 10_000,
    "alloca_ns": 500,
    "dealloca_ns": 500,
    # Driver-model fields (used by the personalities that model the mechanism; others ignore them).
    "commit_ns": 2_000,
    "dispatch_commit_ns": 0,
    "encoder_switch_ns": 1_000,
    "event_record_ns": 500,
    "event_wait_ns": 500,
    "event_create_ns": 5_000,
    "event_destroy_ns": 2_000,
    "listener_ns": 15_000,
    "completion_ns": 5_000,
    "host_fn_ns": 8_000,
    "device_concurrency": 0,
    "kernels": {
        "spin": {"base_ns": 4_000, "per_workgroup_ns": 0, "per_unit_ns": 1, "unit_constant": 0},
    },
}

# Fields of one entry of ``kernels``; None means "the global dispatch field" (base, per workgroup).
KERNEL_FIELDS: dict[str, Any] = {"base_ns": None, "per_workgroup_ns": None, "per_unit_ns": 0, "unit_constant": None}

_RATES = ("fill_gb_per_s", "copy_gb_per_s", "update_gb_per_s")
_OPTIONAL_NS = ("launch_after_issue_ns", "launch_after_host_ns")  # null: the value of launch_ns
_COUNTS = ("device_concurrency",)  # integer counts, not durations


def _bad(message: str) -> HalError:
    return HalError(StatusCode.INVALID_ARGUMENT, message)


def _ns(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad(f"cost model field {name!r} must be an integer number of nanoseconds >= 0, got {value!r}")
    return value


def _rate(value, name: str) -> float:
    # (an int past a float's range, valid JSON, is no bandwidth either: float() would overflow)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 \
            or (isinstance(value, int) and value > 1e300) or not math.isfinite(value):
        raise _bad(f"cost model field {name!r} must be a bandwidth in GB/s > 0, got {_short(value)}")
    return float(value)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}… ({len(text)} characters)"


def _exact_rate(rate) -> tuple[int, int] | None:
    """A bandwidth as the exact fraction ``(numerator, denominator)`` of its shortest decimal form — the
    number a JSON document writes (1.4, not the binary float 1.3999999999999999…) — so that
    ``ceil(n / rate)`` is computed exactly, in integers (a float quotient rounds 21 / 1.4 up to 16, and
    overflows for a tiny rate such as 1e-320). None for a value that is no positive finite number."""
    try:
        f = Fraction(repr(float(rate)))
    except (ValueError, OverflowError, TypeError):
        return None
    return (f.numerator, f.denominator) if f > 0 else None


def _count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad(f"cost model field {name!r} must be an integer count >= 0, got {value!r}")
    return value


def _kernel(name: str, entry, base: Mapping | None = None) -> dict:
    """One ``kernels`` entry, its fields over ``base`` (the entry it overrides: the defaults' or an
    earlier document's for that kernel; else :data:`KERNEL_FIELDS`), checked as a whole."""
    if not isinstance(entry, Mapping):
        raise _bad(f"cost model field 'kernels.{name}' must be an object, got {type(entry).__name__}")
    out = dict(KERNEL_FIELDS)
    if base is not None:
        out.update(base)
    for key, value in entry.items():
        where = f"kernels.{name}.{key}"
        if key not in KERNEL_FIELDS:
            raise _bad(f"unknown cost model field {where!r}")
        if key == "unit_constant":
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise _bad(f"cost model field {where!r} must be a constant index >= 0 or null, got {value!r}")
            out[key] = value
        elif value is None and KERNEL_FIELDS[key] is None:
            out[key] = None
        else:
            out[key] = _ns(value, where)
    index = out["unit_constant"]
    if out["per_unit_ns"] and index is None:
        raise _bad(f"cost model field 'kernels.{name}.unit_constant' must name the constant that scales "
                   f"per_unit_ns={out['per_unit_ns']} (an index >= 0), got null")
    spec = KERNELS.get(name)
    if index is not None and spec is not None and index >= spec.constant_count:
        n = spec.constant_count
        takes = f"{n} constant{'s' if n != 1 else ''} (indices 0..{n - 1})" if n else "no constants"
        raise _bad(f"cost model field 'kernels.{name}.unit_constant' is {index}, out of range: kernel "
                   f"{name!r} takes {takes}")
    return out


@dataclass(frozen=True)
class CostModel:
    """Durations of host calls, submission, queue launch, commands and host callbacks (all in ns)."""

    host_api_ns: int = DEFAULTS["host_api_ns"]
    submit_ns: int = DEFAULTS["submit_ns"]
    wake_ns: int = DEFAULTS["wake_ns"]
    launch_ns: int = DEFAULTS["launch_ns"]
    launch_after_issue_ns: int | None = DEFAULTS["launch_after_issue_ns"]
    launch_after_host_ns: int | None = DEFAULTS["launch_after_host_ns"]
    fill_latency_ns: int = DEFAULTS["fill_latency_ns"]
    fill_gb_per_s: float = DEFAULTS["fill_gb_per_s"]
    copy_latency_ns: int = DEFAULTS["copy_latency_ns"]
    copy_gb_per_s: float = DEFAULTS["copy_gb_per_s"]
    update_latency_ns: int = DEFAULTS["update_latency_ns"]
    update_gb_per_s: float = DEFAULTS["update_gb_per_s"]
    dispatch_base_ns: int = DEFAULTS["dispatch_base_ns"]
    dispatch_per_workgroup_ns: int = DEFAULTS["dispatch_per_workgroup_ns"]
    barrier_ns: int = DEFAULTS["barrier_ns"]
    event_ns: int = DEFAULTS["event_ns"]
    host_call_latency_ns: int = DEFAULTS["host_call_latency_ns"]
    alloca_ns: int = DEFAULTS["alloca_ns"]
    dealloca_ns: int = DEFAULTS["dealloca_ns"]
    commit_ns: int = DEFAULTS["commit_ns"]
    dispatch_commit_ns: int = DEFAULTS["dispatch_commit_ns"]
    encoder_switch_ns: int = DEFAULTS["encoder_switch_ns"]
    event_record_ns: int = DEFAULTS["event_record_ns"]
    event_wait_ns: int = DEFAULTS["event_wait_ns"]
    event_create_ns: int = DEFAULTS["event_create_ns"]
    event_destroy_ns: int = DEFAULTS["event_destroy_ns"]
    listener_ns: int = DEFAULTS["listener_ns"]
    completion_ns: int = DEFAULTS["completion_ns"]
    host_fn_ns: int = DEFAULTS["host_fn_ns"]
    device_concurrency: int = DEFAULTS["device_concurrency"]
    kernels: Mapping[str, Mapping[str, Any]] = field(
        default_factory=lambda: {k: dict(KERNEL_FIELDS, **v) for k, v in DEFAULTS["kernels"].items()})

    def __post_init__(self) -> None:
        # kind → the bandwidth as an exact fraction (not a field: derived, recomputed by ``replace``)
        object.__setattr__(self, "_exact_rates", {kind: _exact_rate(getattr(self, f"{kind}_gb_per_s"))
                                                  for kind in ("fill", "copy", "update")})

    # -- documents ---------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, doc: Mapping, base: "CostModel | None" = None) -> "CostModel":
        """Fields of ``doc`` over ``base`` (default: the built-in defaults); unknown fields rejected."""
        if not isinstance(doc, Mapping):
            raise _bad(f"a cost model must be a JSON object, got {type(doc).__name__}")
        base = base or cls()
        known = {f.name for f in fields(cls)}
        changes: dict[str, Any] = {}
        for key, value in doc.items():
            if key == "format":
                if value != FORMAT:
                    raise _bad(f"cost model field 'format' must be {FORMAT!r}, got {value!r}")
            elif key == "version":
                if isinstance(value, bool) or not isinstance(value, int) or value != VERSION:
                    raise _bad(f"cost model version {value!r} not supported (this reader: {VERSION})")
            elif key == "kernels":
                if not isinstance(value, Mapping):
                    raise _bad(f"cost model field 'kernels' must be an object, got {type(value).__name__}")
                kernels = {k: dict(v) for k, v in base.kernels.items()}
                for name, entry in value.items():  # merged over the base's entry for that kernel
                    if str(name) not in KERNELS:  # nothing else can be dispatched: a typo
                        raise _bad(f"unknown kernel {str(name)!r} in cost model field 'kernels' (the builtin "
                                   f"library's: {', '.join(sorted(KERNELS))})")
                    kernels[str(name)] = _kernel(str(name), entry, kernels.get(str(name)))
                changes["kernels"] = kernels
            elif key not in known:
                raise _bad(f"unknown cost model field {key!r}")
            elif key in _RATES:
                changes[key] = _rate(value, key)
            elif key in _OPTIONAL_NS and value is None:
                changes[key] = None
            elif key in _COUNTS:
                changes[key] = _count(value, key)
            else:
                changes[key] = _ns(value, key)
        return replace(base, **changes)

    def to_dict(self) -> dict:
        """The full document (every field), as :meth:`save` writes it."""
        doc: dict[str, Any] = {"format": FORMAT, "version": VERSION}
        for f in fields(self):
            value = getattr(self, f.name)
            doc[f.name] = {k: dict(v) for k, v in sorted(value.items())} if f.name == "kernels" else value
        return doc

    @classmethod
    def load(cls, path: str | os.PathLike, base: "CostModel | None" = None) -> "CostModel":
        """Read a JSON cost model file (INVALID_ARGUMENT if unreadable, malformed or unknown fields)."""
        return cls.from_dict(cls.read_document(path), base)

    @staticmethod
    def read_document(path: str | os.PathLike) -> dict:
        """A cost model file's own fields, as written — not completed with any defaults (a sweep puts
        its fields over them and the device then fills in its personality's); INVALID_ARGUMENT if it
        cannot be read or is not JSON. :meth:`load` checks the fields."""
        try:
            with open(path, "r", encoding="utf-8") as f:
                doc = json.load(f)
        except OSError as e:
            raise _bad(f"cost model {os.fspath(path)!r} cannot be read: {e.strerror}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise _bad(f"cost model {os.fspath(path)!r} is not valid JSON: {e}") from None
        except RecursionError:  # (a corrupt or hostile file: bad input like any other)
            raise _bad(f"cost model {os.fspath(path)!r} is not valid JSON: {NESTED_TOO_DEEPLY}") from None
        return doc

    def save(self, path: str | os.PathLike) -> None:
        """Write the full document as JSON (every field, so the file documents the model it came from)."""
        def write(f) -> None:
            json.dump(self.to_dict(), f, indent=2, sort_keys=False)
            f.write("\n")
        atomic_write(path, write, mode="w")  # a crash never leaves half a model

    @classmethod
    def from_option(cls, value, base: "CostModel | None" = None) -> "CostModel":
        """The ``cost_model`` device option: None (defaults), a path, a dict, or a CostModel."""
        if value is None:
            return base or cls()
        if isinstance(value, CostModel):
            return value
        if isinstance(value, Mapping):
            return cls.from_dict(value, base)
        if isinstance(value, (str, os.PathLike)):
            return cls.load(value, base)
        raise _bad(f"option cost_model must be a path, a dict or None, got {type(value).__name__}")

    # -- durations ---------------------------------------------------------------------------------

    def launch_after(self, ready_by: str) -> int:
        """Launch latency of an op that became ready by ``ready_by``: "device" (a device predecessor
        ended: the op before it on its queue, the producer of an event it waited on, or the op
        holding the execution slot), "issue" (its issue launched it onto an idle queue) or "host" (a
        host signal set the user event it waited on)."""
        value = {"issue": self.launch_after_issue_ns, "host": self.launch_after_host_ns}.get(ready_by)
        return self.launch_ns if value is None else value

    def transfer_ns(self, kind: str, nbytes: int) -> int:
        """``kind`` in fill/copy/update: latency + ``ceil(nbytes / gb_per_s)``, computed exactly from the
        bandwidth's decimal value (21 bytes at 1.4 GB/s: 15 ns)."""
        latency = getattr(self, f"{kind}_latency_ns")
        exact = self._exact_rates.get(kind)
        if exact is None:  # (a model built without validation)
            return latency + math.ceil(nbytes / getattr(self, f"{kind}_gb_per_s"))
        num, den = exact
        return latency + -(-nbytes * den // num)

    def dispatch_ns(self, kernel: str, workgroups: int, constants=()) -> int:
        """base + per_workgroup × workgroups (+ per_unit × constants[unit_constant] for overrides)."""
        k = self.kernels.get(kernel)
        if k is None:
            return self.dispatch_base_ns + self.dispatch_per_workgroup_ns * workgroups
        base = self.dispatch_base_ns if k["base_ns"] is None else k["base_ns"]
        per_wg = self.dispatch_per_workgroup_ns if k["per_workgroup_ns"] is None else k["per_workgroup_ns"]
        ns = base + per_wg * workgroups
        index = k["unit_constant"]
        if index is not None and index < len(constants) and k["per_unit_ns"]:
            ns += k["per_unit_ns"] * (constants[index] & 0xFFFFFFFF)
        return ns

    def command_ns(self, cmd) -> int:
        """Duration of one resolved command (``reference.hal.Cmd``)."""
        kind = cmd.kind
        if kind in ("fill", "update", "copy"):
            return self.transfer_ns(kind, cmd.accesses[-1][0].length if cmd.accesses else 0)
        if kind == "dispatch":
            spec, wg, constants, _ = cmd.args
            return self.dispatch_ns(spec.name, workgroup_count(wg), constants)
        if kind == "barrier":
            return self.barrier_ns
        return self.event_ns  # signal_event, reset_event, wait_events

    def op_ns(self, kind: str) -> int:
        """Body duration of an op without commands: alloca, dealloca, host_call (latency to the call)."""
        return {"alloca": self.alloca_ns, "dealloca": self.dealloca_ns,
                "host_call": self.host_call_latency_ns}.get(kind, 0)


def workgroup_count(workgroups) -> int:
    """x·y·z of a workgroup tuple, or of the three u32 an indirect dispatch reads (0 if unreadable)."""
    if isinstance(workgroups, Range):
        try:
            workgroups = struct.unpack_from("<3I", workgroups.view("dispatch workgroups"))
        except (HalError, struct.error):
            return 0
    x, y, z = workgroups
    return x * y * z
