"""Executables: a loaded kernel library with reflection (HAL_SEMANTICS §A.7).

>>> from reference import hal
>>> with hal.create_device("local-sync") as dev:
...     exe = dev.load_executable()
...     exe.export_info(exe.lookup_export("scale_and_offset"))
ExportInfo(name='scale_and_offset', constant_count=2, binding_count=2)
"""

from __future__ import annotations

from typing import NamedTuple

from ..kernels import LIBRARIES, KernelSpec
from .status import HalError, StatusCode


class ExportInfo(NamedTuple):
    name: str
    constant_count: int
    binding_count: int


class Executable:
    __slots__ = ("device", "id", "library", "_kernels", "_by_name", "__weakref__")

    def __init__(self, device, exe_id: str, library: str):
        if library not in LIBRARIES:
            raise HalError(StatusCode.NOT_FOUND, f"no executable library named {library!r} "
                           f"(available: {', '.join(sorted(LIBRARIES))})")
        self.device = device
        self.id = exe_id
        self.library = library
        self._kernels: tuple[KernelSpec, ...] = LIBRARIES[library]
        self._by_name = {k.name: i for i, k in enumerate(self._kernels)}

    def __repr__(self) -> str:
        return f"<Executable {self.id} {self.library!r}>"

    @property
    def export_count(self) -> int:
        return len(self._kernels)

    def export_info(self, ordinal: int) -> ExportInfo:
        k = self.kernel(ordinal)
        return ExportInfo(k.name, k.constant_count, k.binding_count)

    def lookup_export(self, name: str) -> int:
        try:
            return self._by_name[name]
        except (KeyError, TypeError):
            raise HalError(StatusCode.NOT_FOUND, f"executable {self.id} has no export named {name!r}") from None

    def kernel(self, ordinal: int) -> KernelSpec:
        if isinstance(ordinal, bool) or not isinstance(ordinal, int):
            raise HalError(StatusCode.INVALID_ARGUMENT, f"export ordinal must be an int, got {ordinal!r}")
        if not 0 <= ordinal < len(self._kernels):
            raise HalError(StatusCode.OUT_OF_RANGE, f"export ordinal {ordinal} out of range [0, {len(self._kernels)})")
        return self._kernels[ordinal]

    def resolve(self, entry_point) -> int:
        """An entry point given by ordinal or name, as its ordinal."""
        if isinstance(entry_point, str):
            return self.lookup_export(entry_point)
        self.kernel(entry_point)
        return entry_point
