"""Fixtures of the real-backend tests."""

import pytest

from tests.conftest import open_device


@pytest.fixture(scope="module")
def opencl():
    """The OpenCL device (PoCL here), one per test module; the tests skip where there is none."""
    dev = open_device("opencl", "no OpenCL device")
    yield dev
    dev.close()
