"""``find_device`` takes the first PoCL device that compiles OpenCL C, not merely the first one listed.

PyPI's PoCL 3.0 (LLVM 14) fails every build on CPUs newer than its LLVM ("unknown target CPU
'generic'", AMD Zen 5); a second PoCL installed beside it must then be used. A stand-in for pyopencl
whose platforms build or fail as told checks the choice and the message.
"""

from __future__ import annotations

import pytest

from reference import hal
from real_backends.opencl import adapter


class _Error(Exception):
    pass


class _Device:
    def __init__(self, name: str, builds: bool):
        self.name, self.builds, self.int_ptr = name, builds, id(self)


class _Platform:
    def __init__(self, name: str, version: str, devices):
        self.name, self.version, self._devices = name, version, devices

    def get_devices(self):
        return self._devices


class _FakeCL:
    Error = _Error

    def __init__(self, platforms):
        self.platforms = platforms
        self.builds = []

    def get_platforms(self):
        return self.platforms

    def Context(self, devices):  # noqa: N802 (pyopencl's name)
        return devices[0]

    def Program(self, context, source):  # noqa: N802
        cl = self

        class _Program:
            def build(self):
                cl.builds.append(context.name)
                if not context.builds:
                    raise _Error("clBuildProgram failed: BUILD_PROGRAM_FAILURE\n\nerror: unknown target CPU 'generic'\n")
                return self
        return _Program()


@pytest.fixture
def fake(monkeypatch):
    def install(platforms):
        cl = _FakeCL(platforms)
        monkeypatch.setattr(adapter, "_cl", lambda: cl)
        monkeypatch.setattr(adapter, "_usable", {})
        return cl
    return install


def test_the_first_device_that_builds_is_chosen(fake):
    pypi = _Device("pthread-AMD EPYC", builds=False)
    debian = _Device("pthread-skylake-avx512-AMD EPYC", builds=True)
    cl = fake([_Platform("NVIDIA CUDA", "OpenCL 3.0 CUDA", [_Device("H100", True)]),
               _Platform("Portable Computing Language", "OpenCL 3.0 PoCL 3.0-rc2", [pypi]),
               _Platform("Portable Computing Language", "OpenCL 3.0 PoCL 3.1+debian", [debian])])
    assert adapter.find_device(adapter.PLATFORM) is debian
    assert cl.builds == ["pthread-AMD EPYC", "pthread-skylake-avx512-AMD EPYC"]  # the other vendor untried
    assert adapter.find_device(adapter.PLATFORM) is debian
    assert len(cl.builds) == 2  # each device probed once per process


def test_no_device_that_builds_is_unavailable_with_each_reason(fake):
    fake([_Platform("Portable Computing Language", "OpenCL 3.0 PoCL 3.0-rc2 ", [_Device("pthread-AMD EPYC", False)])])
    with pytest.raises(hal.HalError) as e:
        adapter.find_device(adapter.PLATFORM)
    assert e.value.code == hal.StatusCode.UNAVAILABLE
    assert str(e.value).endswith(
        "opencl: no device of a platform named like 'Portable Computing Language' can build kernels: "
        "pthread-AMD EPYC (OpenCL 3.0 PoCL 3.0-rc2): error: unknown target CPU 'generic' "
        "(on Debian: apt-get install pocl-opencl-icd)")


def test_no_matching_platform_names_those_found(fake):
    fake([_Platform("NVIDIA CUDA", "OpenCL 3.0 CUDA", [_Device("H100", True)])])
    with pytest.raises(hal.HalError) as e:
        adapter.find_device("Portable")
    assert e.value.code == hal.StatusCode.UNAVAILABLE
    assert "no platform named like 'Portable' (found: NVIDIA CUDA)" in str(e.value)
