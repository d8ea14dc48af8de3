"""ExecutableCacheTest and ExecutableTest (IREE CTS [H] core/executable_cache_test.cc and
core/executable_test.cc, C.3.5/C.3.6; classic C.1.13/C.1.14).

IREE prepares compiled test executables (``executable_cache_test``: an ``abs`` kernel; ``executable_test``:
one export ``export0`` with 2 constants and 2 bindings). Here executables come from
``device.load_executable(name)``; the tests run against the builtin library, whose exports are IREE's CTS
kernels (``scale_and_offset`` has the 2-constant, 2-binding layout of ``export0``)."""

import pytest

from reference import hal
from .conftest import S, expect_error

BUILTIN_EXPORTS = ("abs", "write_constants", "scale_and_offset", "write_workgroup_ids", "negate", "double_it",
                   "write_dispatch_params", "spin", "axpy")


# -- ExecutableCacheTest ------------------------------------------------------------------------------

@pytest.mark.iree("ExecutableCacheTest.Create")
def test_cache_create(device):
    exe = device.load_executable()
    assert isinstance(exe, hal.Executable)
    assert exe.export_count > 0


@pytest.mark.iree("ExecutableCacheTest.CantPrepareUnknownFormat")
def test_cache_cant_prepare_unknown_format(device):
    expect_error(S.NOT_FOUND, device.load_executable, "FOO?")


@pytest.mark.iree("ExecutableCacheTest.PrepareExecutable")
def test_cache_prepare_executable(device):
    exe = device.load_executable("builtin")
    assert isinstance(exe, hal.Executable)
    # executable_cache_test's kernel is a scalar abs.
    info = exe.export_info(exe.lookup_export("abs"))
    assert (info.name, info.constant_count, info.binding_count) == ("abs", 0, 2)


# -- ExecutableTest -----------------------------------------------------------------------------------

@pytest.mark.iree("ExecutableTest.ExportCount")
def test_export_count(executable):
    assert executable.export_count == len(BUILTIN_EXPORTS) == 9
    assert [executable.export_info(i).name for i in range(executable.export_count)] == list(BUILTIN_EXPORTS)


@pytest.mark.iree("ExecutableTest.ExportInfoOutOfRange")
def test_export_info_out_of_range(executable):
    expect_error(S.OUT_OF_RANGE, executable.export_info, 100)
    expect_error(S.OUT_OF_RANGE, executable.export_info, executable.export_count)


@pytest.mark.iree("ExecutableTest.ExportInfo")
def test_export_info(executable):
    info = executable.export_info(executable.lookup_export("scale_and_offset"))
    assert isinstance(info, hal.ExportInfo)
    assert info.name == "scale_and_offset"
    assert info.constant_count == 2
    assert info.binding_count == 2


@pytest.mark.iree("ExecutableTest.LookupExportByNameNotFound")
def test_lookup_export_by_name_not_found(executable):
    expect_error(S.NOT_FOUND, executable.lookup_export, "NOT_FOUND")


@pytest.mark.iree("ExecutableTest.LookupExportByName")
def test_lookup_export_by_name(executable):
    first = executable.export_info(0).name
    assert first == "abs"
    assert executable.lookup_export(first) == 0
    assert executable.lookup_export("scale_and_offset") == 2
