"""DriverTest: query a driver's devices and create each (IREE CTS [H] core/driver_test.cc, C.3.4; classic
driver_test.h, C.1.12). No device fixture: runs once per registered driver; a driver whose hardware is
absent (UNAVAILABLE) is skipped, as IREE skips it."""

import pytest

from reference import hal
from .conftest import S, expect_error


def _driver_and_infos(name):
    try:
        driver = hal.get_driver(name)
        infos = driver.query_available_devices()
    except hal.HalError as e:
        if e.code == S.UNAVAILABLE:
            pytest.skip(f"driver {name} unavailable: {e.message}")
        raise
    return driver, infos


def _create_or_skip(create, *args):
    try:
        return create(*args)
    except hal.HalError as e:
        if e.code == S.UNAVAILABLE:
            pytest.skip(f"device unavailable: {e.message}")
        raise


def _check_device(dev, name, info=None):
    try:
        assert isinstance(dev, hal.Device)
        assert hal.parse_uri(dev.uri)[0] == name  # device_id: an identifier naming its driver
        assert set(dev.capabilities) <= hal.CAPABILITY_TAGS
        if info is not None:
            assert dev.uri == info.uri
            assert frozenset(dev.capabilities) == frozenset(info.capabilities)
    finally:
        dev.close()


DRIVERS = hal.available_drivers()


@pytest.mark.iree("DriverTest.QueryAndCreateAvailableDevicesByID")
@pytest.mark.parametrize("name", DRIVERS)
def test_query_and_create_available_devices_by_id(name):
    _, infos = _driver_and_infos(name)
    for info in infos:
        assert isinstance(info, hal.DeviceInfo)
        assert hal.parse_uri(info.uri)[0] == name
        assert set(info.capabilities) <= hal.CAPABILITY_TAGS
        _check_device(_create_or_skip(hal.create_device, info.uri), name, info)


@pytest.mark.iree("DriverTest.QueryAndCreateAvailableDevicesByOrdinal")
@pytest.mark.parametrize("name", DRIVERS)
def test_query_and_create_available_devices_by_ordinal(name):
    # By ordinal: the i-th device of the driver's list, created through the driver object itself.
    driver, infos = _driver_and_infos(name)
    for i in range(len(infos)):
        _, path, options = hal.parse_uri(infos[i].uri)
        _check_device(_create_or_skip(lambda: driver.create_device(path, **options)), name)


@pytest.mark.iree("DriverTest.QueryAndCreateAvailableDevicesByPath")
@pytest.mark.parametrize("name", DRIVERS)
def test_query_and_create_available_devices_by_path(name):
    _, infos = _driver_and_infos(name)
    if not infos:
        pytest.skip(f"driver {name} offers no device")
    paths = [hal.parse_uri(info.uri)[1] for info in infos]
    if "" not in paths:
        paths.append("")
    for path in paths:
        try:
            dev = hal.create_device(f"{name}:{path}" if path else name)
        except hal.HalError as e:
            if e.code == S.UNAVAILABLE:
                pytest.skip(f"device unavailable: {e.message}")
            assert e.code == S.NOT_FOUND, e  # NOT_FOUND: the driver does not take this path
            continue
        _check_device(dev, name)


@pytest.mark.iree("DriverTest")  # the fixture's driver lookup (registry try_create)
def test_unknown_driver_is_not_found():
    expect_error(S.NOT_FOUND, hal.get_driver, "no-such-driver")
    expect_error(S.NOT_FOUND, hal.create_device, "no-such-driver:0")
