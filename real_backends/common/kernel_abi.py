"""The kernel ABI the real backends share: how a builtin kernel is launched (DESIGN §3, §6).

Every kernel of the builtin library (``reference.kernels.LIBRARY``) exists in OpenCL C
(``kernels/builtin.cl``), CUDA C (``builtin.cu``) and MSL (``builtin.metal``), named ``hal_<name>``
(:func:`symbol`: ``abs`` is a builtin function in all three languages), with one signature shape:
for each binding a byte pointer and a byte offset, then the 32-bit constants, then ``n`` — the number
of work items, computed on the host by :func:`reference.kernels.work_items` exactly as the NumPy reference bounds its
loop, so every language guards ``if (i >= n) return;`` and nothing else. (Metal passes the offsets,
constants and ``n`` as one ``constant uint*`` array after the buffers.)

Widths (:func:`launch_arguments` checks them; a value that does not fit is OUT_OF_RANGE naming it,
never wrapped): a binding offset is 64-bit in CUDA C (``unsigned long long``) and OpenCL C (``ulong``)
— a binding may start past 4 GiB of its allocation — and 32-bit in MSL (:data:`OFFSET_BITS`); the
constants are the HAL's 32-bit words; ``n`` is 32-bit everywhere (the kernels index with a 32-bit
``i``, Metal's ``thread_position_in_grid`` is ``uint``), so a dispatch of 2^32 or more work items —
bindings of 16 GiB and more — is refused.

"""

from __future__ import annotations

import os

from reference.hal import HalError, StatusCode
from reference.kernels import LIBRARY, KernelSpec

SOURCES = os.path.join(os.path.dirname(__file__), "kernels")
# Bits of a binding's byte offset per kernel language. MSL keeps 32: its offsets share the `uint`
# params array with the constants, and a wider layout could not be compiled or run where CI runs.
OFFSET_BITS = {"cu": 64, "cl": 64, "metal": 32}
N_BITS = 32  # work items: the kernels' index `i` is 32-bit in every language


def fits(value: int, bits: int, what: str) -> int:
    """``value`` if it is an unsigned ``bits``-bit integer, else OUT_OF_RANGE naming ``what``."""
    if not 0 <= value < 1 << bits:
        raise HalError(StatusCode.OUT_OF_RANGE, f"{what} = {value} does not fit the kernel ABI's "
                       f"{bits}-bit parameter (at most {(1 << bits) - 1})")
    return value


def launch_arguments(spec: KernelSpec, offsets, constants, n: int, language: str):
    """``(offsets, constants, n)`` as a ``language`` launch passes them: offsets and ``n`` checked
    against their widths (see the module doc), the constants as 32-bit two's complement words.

    >>> from reference.kernels import KERNELS
    >>> launch_arguments(KERNELS["axpy"], [0, 1 << 32], [-1], 8, "cu")
    ([0, 4294967296], [4294967295], 8)
    >>> launch_arguments(KERNELS["axpy"], [0, 1 << 32], [-1], 8, "metal")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    reference.hal.status.HalError: OUT_OF_RANGE: axpy binding 1 offset = 4294967296 does not fit ... 32-bit ...
    """
    bits = OFFSET_BITS[language]
    offsets = [fits(o, bits, f"{spec.name} binding {k} offset") for k, o in enumerate(offsets)]
    fits(n, N_BITS, f"{spec.name} work items (n)")
    return offsets, [c & 0xFFFFFFFF for c in constants], n


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
