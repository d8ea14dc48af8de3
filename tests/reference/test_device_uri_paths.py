"""The path of a device URI (``scheme:path?options``), per driver, against IREE.

IREE splits a URI with ``iree_uri_split`` (runtime/src/iree/base/internal/path.c): the scheme up to the
first ``:``, then a leading ``//`` (or else one ``/``) is dropped, then the path up to ``?``. What
``iree.runtime.get_device(uri, cache=False)`` (IREE 3.x, in this venv) answered:

* ``local-task``, ``local-task://`` → a device; ``local-task://0``, ``local-task://foo``, ``local-task:0``
  → NOT_FOUND "device paths not yet implemented" (task_driver.c:166; local-sync alike, sync_driver.c:144).
* CUDA (cuda_driver.c ``create_device_by_path``): empty → the default device, an integer → that index
  (out of range: NOT_FOUND "default device %d not found"), ``GPU-<uuid>`` → by UUID, else "unsupported
  device path". Metal (metal_driver.m): empty → the default device, an integer → a registry ID or index.

Here every driver decides deliberately: ``local-task``, ``local-sync``, ``opencl`` and ``metal`` make
one device and take only the empty path; ``cuda`` takes an ordinal; anything else is NOT_FOUND naming
the path and what is accepted (the code the CTS's DriverTest.QueryAndCreateAvailableDevicesByPath
accepts for an unsupported path).
"""

from __future__ import annotations

import pytest

from reference import hal

S = hal.StatusCode


def _error(uri: str) -> hal.HalError:
    with pytest.raises(hal.HalError) as e:
        hal.create_device(uri).close()
    return e.value


@pytest.mark.parametrize("uri, want", [
    ("local-task", ("local-task", "", {})),
    ("local-task:", ("local-task", "", {})),
    ("local-task://", ("local-task", "", {})),
    ("local-task:/", ("local-task", "", {})),
    ("cuda:1", ("cuda", "1", {})),
    ("cuda:/1", ("cuda", "1", {})),
    ("cuda://1?graphs=0", ("cuda", "1", {"graphs": "0"})),
    ("local-task:///x", ("local-task", "/x", {})),  # only the first "//" goes
    ("sim://metal?queues=2", ("sim", "metal", {"queues": "2"})),
])
def test_uri_split_as_iree(uri, want):
    assert hal.parse_uri(uri) == want


@pytest.mark.parametrize("scheme", ["local-task", "local-sync"])
def test_cpu_drivers_take_only_the_empty_path(scheme):
    for uri in (scheme, f"{scheme}:", f"{scheme}://"):
        with hal.create_device(uri) as dev:
            assert dev.uri == scheme
    for path in ("0", "foo", "/0"):
        e = _error(f"{scheme}://{path}")
        assert (e.code, e.message) == (S.NOT_FOUND, f"{scheme}: unsupported device path {path!r} "
                                       f"({scheme} has one device: the empty path, {scheme} or {scheme}://)")


def test_opencl_takes_only_the_empty_path():
    e = _error("opencl://0")  # refused before the platform is looked for: the same without PoCL
    assert (e.code, e.message) == (S.NOT_FOUND, "opencl: unsupported device path '0' (opencl has one device, "
                                   "the first of the platform option's platform: the empty path, opencl or "
                                   "opencl?platform=NAME)")
    try:
        dev = hal.create_device("opencl://")
    except hal.HalError as err:
        assert err.code == S.UNAVAILABLE, err
        return
    with dev:
        assert dev.uri == "opencl"


def test_metal_takes_only_the_empty_path():
    e = _error("metal:0")  # refused before the hardware check: the same off macOS
    assert (e.code, e.message) == (S.NOT_FOUND, "metal: unsupported device path '0' (metal has one device, "
                                   "the system default: the empty path, metal)")


def test_sim_personality_after_slashes():
    with hal.create_device("sim://metal") as dev:
        assert dev.uri == "sim:metal"
