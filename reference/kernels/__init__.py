"""The builtin kernel library: IREE's CTS kernels plus ``spin`` and ``axpy`` (DESIGN §3).

Each kernel declares its bindings (element type and access) and its 32-bit constants, and has a NumPy
reference implementation ``fn(workgroups, constants, *arrays)`` that writes its outputs in place.
Element-wise kernels cover the whole bound range whatever the workgroup count.

>>> import numpy as np
>>> out = np.zeros(4, np.int32)
>>> KERNELS["scale_and_offset"].fn((1, 1, 1), (3, 10), np.array([1, 2, 3, 4], np.int32), out)
>>> out.tolist()
[13, 16, 19, 22]
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np


class Binding(NamedTuple):
    name: str
    dtype: str  # numpy dtype name: float32, int32, uint32
    access: str  # "r", "w" or "rw"


class KernelSpec(NamedTuple):
    name: str
    bindings: tuple[Binding, ...]
    constants: tuple[str, ...]
    fn: Callable

    @property
    def binding_count(self) -> int:
        return len(self.bindings)

    @property
    def constant_count(self) -> int:
        return len(self.constants)


def _as_i32(c: int) -> np.int32:
    return np.array([c & 0xFFFFFFFF], np.uint32).view(np.int32)[0]


def _elementwise(fn):
    def kernel(workgroups, constants, src, dst):
        n = min(len(src), len(dst))
        dst[:n] = fn(src[:n], constants)
    return kernel


def _write_constants(workgroups, constants, out):
    n = min(4, len(out))
    out[:n] = np.array([c & 0xFFFFFFFF for c in constants[:n]], np.uint32).view(np.int32)


def _scale_and_offset(workgroups, constants, src, dst):
    n = min(len(src), len(dst))
    with np.errstate(over="ignore"):
        dst[:n] = src[:n] * _as_i32(constants[0]) + _as_i32(constants[1])


def _write_workgroup_ids(workgroups, constants, out):
    n = min(workgroups[0], len(out))
    out[:n] = np.arange(n, dtype=np.uint32)


def _write_dispatch_params(workgroups, constants, out):
    n = min(3, len(out))
    out[:n] = np.array([4, 1, 1], np.uint32)[:n]


def _spin(workgroups, constants, scratch):
    # The busy loop only costs time (modelled by devices); its observable effect is the write.
    n = min(workgroups[0], len(scratch))
    scratch[:n] = constants[0] & 0xFFFFFFFF


def _axpy(workgroups, constants, x, y):
    n = min(len(x), len(y))
    y[:n] = np.float32(_as_i32(constants[0])) * x[:n] + y[:n]


def _negate(src, _c):
    with np.errstate(over="ignore"):
        return -src


def _double(src, _c):
    with np.errstate(over="ignore"):
        return src * np.int32(2)


_F = "float32"
_I = "int32"
_U = "uint32"

# Library order is the export ordinal order.
LIBRARY: tuple[KernelSpec, ...] = (
    KernelSpec("abs", (Binding("in", _F, "r"), Binding("out", _F, "w")), (),
               _elementwise(lambda a, c: np.abs(a))),
    KernelSpec("write_constants", (Binding("out", _I, "w"),), ("c0", "c1", "c2", "c3"), _write_constants),
    KernelSpec("scale_and_offset", (Binding("in", _I, "r"), Binding("out", _I, "w")), ("scale", "offset"),
               _scale_and_offset),
    KernelSpec("write_workgroup_ids", (Binding("out", _U, "w"),), (), _write_workgroup_ids),
    KernelSpec("negate", (Binding("in", _I, "r"), Binding("out", _I, "w")), (), _elementwise(_negate)),
    KernelSpec("double_it", (Binding("in", _I, "r"), Binding("out", _I, "w")), (), _elementwise(_double)),
    KernelSpec("write_dispatch_params", (Binding("out", _U, "w"),), (), _write_dispatch_params),
    KernelSpec("spin", (Binding("scratch", _U, "rw"),), ("iterations",), _spin),
    KernelSpec("axpy", (Binding("x", _F, "r"), Binding("y", _F, "rw")), ("a",), _axpy),
)

KERNELS: dict[str, KernelSpec] = {k.name: k for k in LIBRARY}

# Executable libraries a device can load by name (``device.load_executable(name)``).
LIBRARIES: dict[str, tuple[KernelSpec, ...]] = {"builtin": LIBRARY}


ELEMENT = 4  # every binding of the library holds 32-bit elements


def work_items(spec: KernelSpec, workgroups, constants, lengths) -> int:
    """The elements a dispatch of ``spec`` over bindings of ``lengths`` bytes computes — how far the
    NumPy implementations above go, and the ``n`` every real backend's kernel guards with
    (``real_backends.common.kernel_abi``); a dispatch writes that many elements from the start of
    each binding it writes (the program generator's transients rely on it).

    >>> work_items(KERNELS["scale_and_offset"], (1, 1, 1), (3, 10), [16, 8])   # min(4, 2) elements
    2
    >>> work_items(KERNELS["write_workgroup_ids"], (5, 1, 1), (), [64])
    5
    """
    elems = [n // ELEMENT for n in lengths]
    name = spec.name
    if name in ("abs", "scale_and_offset", "negate", "double_it", "axpy"):
        return min(elems[0], elems[1])
    if name == "write_constants":
        return min(4, elems[0])
    if name == "write_dispatch_params":
        return min(3, elems[0])
    if name in ("write_workgroup_ids", "spin"):
        return min(int(workgroups[0]), elems[0])
    raise KeyError(f"no launch rule for kernel {name!r}")


def run_kernel(spec: KernelSpec, workgroups, constants, views) -> None:
    """Run ``spec`` on byte views of its bindings (element arrays are views: writes land in place)."""
    arrays = []
    for binding, view in zip(spec.bindings, views):
        itemsize = np.dtype(binding.dtype).itemsize
        usable = len(view) - len(view) % itemsize
        arrays.append(np.frombuffer(view[:usable], dtype=binding.dtype) if usable else
                      np.zeros(0, binding.dtype))
    spec.fn(tuple(workgroups), tuple(constants), *arrays)
