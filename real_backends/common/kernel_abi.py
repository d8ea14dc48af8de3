"""The kernel ABI the real backends share: how a builtin kernel is launched (DESIGN §3, §6).

Every kernel of the builtin library (``reference.kernels.LIBRARY``) exists in OpenCL C
(``kernels/builtin.cl``), CUDA C (``builtin.cu``) and MSL (``builtin.metal``), named ``hal_<name>``
(:func:`symbol`: ``abs`` is a builtin function in all three languages), with one signature shape:
for each binding a byte pointer and a byte offset, then the 32-bit constants, then ``n`` — the number
of work items, computed on the host by :func:`work_items` exactly as the NumPy reference bounds its
loop, so every language guards ``if (i >= n) return;`` and nothing else. (Metal passes the offsets,
constants and ``n`` as one ``constant uint*`` array after the buffers.)

>>> from reference.kernels import KERNELS
>>> work_items(KERNELS["scale_and_offset"], (1, 1, 1), (3, 10), [16, 8])   # min(4, 2) elements
2
>>> work_items(KERNELS["write_workgroup_ids"], (5, 1, 1), (), [64])
5
"""

from __future__ import annotations

import os

from reference.kernels import LIBRARY, KernelSpec

SOURCES = os.path.join(os.path.dirname(__file__), "kernels")
ELEMENT = 4  # every binding of the builtin library holds 32-bit elements


def work_items(spec: KernelSpec, workgroups, constants, lengths) -> int:
    """Work items for a dispatch of ``spec`` over bindings of ``lengths`` bytes (see the module doc)."""
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


def source(language: str) -> str:
    """The library's source: ``"cl"``, ``"cu"`` or ``"metal"``."""
    with open(os.path.join(SOURCES, f"builtin.{language}"), encoding="utf-8") as f:
        return f.read()


def symbol(name: str) -> str:
    """The entry point's symbol in every kernel source."""
    return "hal_" + name


def entry_points() -> list[str]:
    """The symbols every source must define, in library (export ordinal) order."""
    return [symbol(k.name) for k in LIBRARY]
