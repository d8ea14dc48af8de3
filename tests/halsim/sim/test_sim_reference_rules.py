"""The reference drivers' semaphore rules (tests/reference/test_semaphore_rules.py), run unchanged on the
simulated devices: the tests are imported here, and ``ref_device`` is overridden to be a sim device."""

import pytest

from halsim.sim.driver import driver
from tests.reference.test_semaphore_rules import *  # noqa: F401,F403 - collected again, on sim devices


@pytest.fixture(params=["generic", "sync"])
def ref_device(request):
    dev = driver.create_device(request.param)
    yield dev
    dev.close()
