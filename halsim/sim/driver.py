"""The ``sim`` driver: creates the simulated devices by personality (``sim``, ``sim:sync``, …).

Register it under the ``halsim.drivers`` entry-point group as ``sim = "halsim.sim.driver:driver"``.
The URI path names the personality (empty = ``generic``); options are keyword arguments or URI query
strings (DESIGN §4): ``queues`` (hardware queues, default 1), ``cost_model`` (path or dict, default
the personality's), ``seed`` (default 0), ``max_concurrency`` (operations executing at once per queue,
default 4) and ``retain_resources`` (default True). A personality may add its own options
(``SimDevice.extra_options``: ``legacy_sync`` on ``sim:metal``); elsewhere they are unknown options.

>>> dev = driver.create_device("generic", queues=2, max_concurrency=1)
>>> (dev.uri, dev.queue_count, dev.trace.header["clock"])
('sim:generic', 2, 'virtual')
>>> dev.close()
>>> {"sim", "sim:sync", "sim:metal"} <= {info.uri for info in driver.query_available_devices()}
True
>>> driver.create_device("generic", legacy_sync=True)      # a personality's own option, elsewhere
Traceback (most recent call last):
...
reference.hal.status.HalError: INVALID_ARGUMENT: unknown option 'legacy_sync' for device 'sim:generic' (known: cost_model, fault_rate, faults, max_concurrency, queues, retain_resources, seed)
"""

from __future__ import annotations

from reference.hal import DeviceInfo, Driver, HalError, StatusCode
from reference.hal.driver import coerce_option

from .device import OPTIONS
from .personalities import PERSONALITIES


class SimDriver(Driver):
    name = "sim"
    options = OPTIONS

    def query_available_devices(self) -> list[DeviceInfo]:
        return [DeviceInfo(p.uri, f"sim:{p.name}", p.capabilities, dict(p.cts_unsupported), p.description)
                for p in PERSONALITIES.values()]

    def create_device(self, path: str = "", **options):
        # Options are per personality: the common OPTIONS plus the device class's extra_options
        # (legacy_sync only on sim:metal), so an option of another personality is INVALID_ARGUMENT.
        personality = self._personality(path)
        known = {**OPTIONS, **personality.device_class.extra_options}
        parsed = dict(known)
        for key, value in options.items():
            if key not in known:
                raise HalError(StatusCode.INVALID_ARGUMENT, f"unknown option {key!r} for device "
                               f"{self._uri(path)!r} (known: {', '.join(sorted(known))})")
            parsed[key] = coerce_option(key, value, known[key])
        return self._create(path, parsed)

    def _create(self, path: str, options: dict):
        return self._personality(path).device_class(self._uri(path), options)

    @staticmethod
    def _personality(path: str):
        personality = PERSONALITIES.get(path or "generic")
        if personality is None:
            known = ", ".join(sorted(PERSONALITIES))
            raise HalError(StatusCode.NOT_FOUND, f"no simulator personality {path!r} (known: {known})")
        return personality

    @staticmethod
    def _uri(path: str) -> str:
        return "sim" + (f":{path}" if path else "")


driver = SimDriver()
