"""The ``sim`` driver: creates the simulated devices by personality (``sim``, ``sim:sync``, …).

Register it under the ``halsim.drivers`` entry-point group as ``sim = "halsim.sim.driver:driver"``.
The URI path names the personality (empty = ``generic``); options are keyword arguments or URI query
strings (DESIGN §4): ``queues`` (hardware queues, default 1), ``cost_model`` (path or dict, default
the personality's), ``seed`` (default 0), ``max_concurrency`` (operations executing at once per queue,
default 4) and ``retain_resources`` (default True).

>>> dev = driver.create_device("generic", queues=2, max_concurrency=1)
>>> (dev.uri, dev.queue_count, dev.trace.header["clock"])
('sim:generic', 2, 'virtual')
>>> dev.close()
>>> [info.uri for info in driver.query_available_devices()]
['sim', 'sim:sync']
"""

from __future__ import annotations

from reference.hal import DeviceInfo, Driver, HalError, StatusCode

from .device import OPTIONS
from .personalities import PERSONALITIES


class SimDriver(Driver):
    name = "sim"
    options = OPTIONS

    def query_available_devices(self) -> list[DeviceInfo]:
        return [DeviceInfo(p.uri, f"sim:{p.name}", p.capabilities, dict(p.cts_unsupported), p.description)
                for p in PERSONALITIES.values()]

    def _create(self, path: str, options: dict):
        personality = PERSONALITIES.get(path or "generic")
        if personality is None:
            known = ", ".join(sorted(PERSONALITIES))
            raise HalError(StatusCode.NOT_FOUND, f"no simulator personality {path!r} (known: {known})")
        return personality.device_class("sim" + (f":{path}" if path else ""), options)


driver = SimDriver()
