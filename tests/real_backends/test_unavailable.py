"""Without the hardware, ``cuda`` and ``metal`` are registered but UNAVAILABLE, with a reason."""

from __future__ import annotations

import sys

import pytest

from reference import hal


def _cuda_present() -> bool:
    from real_backends.cuda import driver

    return bool(driver.query_available_devices())


def test_drivers_are_registered():
    names = set(hal.registered_drivers()) if hasattr(hal, "registered_drivers") else None
    for name in ("cuda", "metal"):
        assert hal.get_driver(name).name == name
    if names is not None:
        assert {"cuda", "metal"} <= names


def test_cuda_unavailable_without_a_driver():
    if _cuda_present():
        pytest.skip("an NVIDIA GPU and driver are present: cuda is available here")
    with pytest.raises(hal.HalError) as e:
        hal.create_device("cuda")
    assert e.value.code == hal.StatusCode.UNAVAILABLE
    assert "cuda:" in str(e.value) and ("driver" in str(e.value) or "not installed" in str(e.value))
    assert hal.get_driver("cuda").query_available_devices() == []
    assert "cuda" not in [d.uri for d in hal.available_devices()]


def test_cuda_options_are_checked_before_the_driver():
    with pytest.raises(hal.HalError) as e:
        hal.create_device("cuda", event_pool_capacity=-1)
    assert e.value.code == hal.StatusCode.INVALID_ARGUMENT
    with pytest.raises(hal.HalError) as e:
        hal.create_device("cuda", bogus=1)
    assert e.value.code == hal.StatusCode.INVALID_ARGUMENT


@pytest.mark.skipif(sys.platform == "darwin", reason="on macOS Metal may be available")
def test_metal_unavailable_off_macos():
    with pytest.raises(hal.HalError) as e:
        hal.create_device("metal")
    assert e.value.code == hal.StatusCode.UNAVAILABLE
    assert "macOS" in str(e.value)
    assert hal.get_driver("metal").query_available_devices() == []


def test_real_backends_never_import_halsim():
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2] / "real_backends"
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert "import halsim" not in text and "from halsim" not in text, path
