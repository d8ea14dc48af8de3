"""Fixtures of the reference contract tests: every registered device (``dev``), those with an
asynchronous queue (``async_dev``) or indirect bindings (``indirect_dev``); ``expect`` asserts the
exact ``HalError`` a call raises."""

import pytest

from reference import hal
from tests.conftest import open_device  # noqa: F401 (the reference tests import it from here)

INFOS = hal.available_devices()
ASYNC = [info for info in INFOS if "async_queue" in info.capabilities]
INDIRECT = [info for info in INFOS if "indirect" in info.capabilities]


@pytest.fixture(params=INFOS, ids=[info.uri for info in INFOS])
def dev(request):
    device = open_device(request.param.uri)
    yield device
    device.close()


@pytest.fixture(params=ASYNC, ids=[info.uri for info in ASYNC])
def async_dev(request):
    device = open_device(request.param.uri)
    yield device
    device.close()


@pytest.fixture(params=INDIRECT, ids=[info.uri for info in INDIRECT])
def indirect_dev(request):
    device = open_device(request.param.uri)
    yield device
    device.close()


def expect(code, message, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` raises a HalError with exactly this code and message."""
    with pytest.raises(hal.HalError) as ei:
        fn(*args, **kwargs)
    assert (ei.value.code, ei.value.message) == (code, message)
