"""The simulator's personalities: one module per device model, listed here once.

A personality is a :class:`~halsim.sim.device.SimDevice` subclass plus what the driver advertises
about it (URI, CTS capability tags, CTS tests IREE does not run there). Adding ``sim:metal``,
``sim:cuda`` or ``sim:opencl`` means adding a module and one entry to :data:`PERSONALITIES`.

>>> sorted(PERSONALITIES)
['cuda', 'generic', 'metal', 'opencl', 'sync']
>>> PERSONALITIES["generic"].uri, sorted(PERSONALITIES["sync"].capabilities)
('sim', ['events', 'host_calls', 'indirect', 'mapping'])
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

from . import cuda, generic, metal, opencl, sync


class Personality(NamedTuple):
    name: str
    uri: str
    device_class: type
    cts_unsupported: Mapping[str, str]
    description: str

    @property
    def capabilities(self) -> frozenset:
        return self.device_class.capabilities


PERSONALITIES: dict[str, Personality] = {
    "generic": Personality("generic", "sim", generic.GenericDevice, {},
                           "simulated async GPU: IREE unordered queue semantics, virtual time"),
    "sync": Personality("sync", "sim:sync", sync.SyncDevice, dict(sync.CTS_UNSUPPORTED),
                        "local-sync model in virtual time: queue calls block the host thread"),
    "metal": Personality("metal", "sim:metal", metal.MetalDevice, dict(metal.CTS_UNSUPPORTED),
                         "Metal driver model: in-order MTLCommandQueues, encoders, MTLSharedEvents; "
                         "option legacy_sync"),
    "cuda": Personality("cuda", "sim:cuda", cuda.CudaDevice, dict(cuda.CTS_UNSUPPORTED),
                        "CUDA driver model: host-side timelines, pending queue actions, CUevent pools, "
                        "dispatch + callback streams; option event_pool_capacity"),
    "opencl": Personality("opencl", "sim:opencl", opencl.OpenCLDevice, dict(opencl.CTS_UNSUPPORTED),
                          "OpenCL model: in-order queues, marker and user events, event callbacks"),
}
