"""Pure helpers shared by devices that model or drive a real GPU API (no simulator, no GPU bindings).

They import only the standard library and :mod:`reference.hal`, so both the simulator
(``halsim.sim.personalities.metal``) and the real Metal backend (``real_backends.metal``, which never
imports ``halsim``) use the same decisions:

* :mod:`.command_segments` — how a resolved command list becomes Metal blit/compute encoders,
  encoder events and memory barriers (IREE ``direct_command_buffer.m``).
* :mod:`.metal_storage` — the ``MTLStorageMode`` and CPU cache mode of each HAL memory type
  (IREE ``direct_allocator.m``).
"""

from .command_segments import (
    BLIT,
    COMPUTE,
    IOS,
    MACOS,
    Encoder,
    EncoderEvent,
    MetalFacts,
    Step,
    check_barrier,
    describe,
    plan_segments,
    repeated_byte,
)
from .metal_storage import ResourceOptions, compatible_memory_type, resource_options

__all__ = [
    "BLIT", "COMPUTE", "IOS", "MACOS", "Encoder", "EncoderEvent", "MetalFacts", "ResourceOptions", "Step",
    "check_barrier", "compatible_memory_type", "describe", "plan_segments", "repeated_byte", "resource_options",
]
