"""``sim:cuda``: IREE's CUDA driver (HAL_SEMANTICS §B.3) in virtual time.

The stream engine (:mod:`halsim.sim.streams`) with CUDA's parts: semaphores are host-side timelines;
queue actions whose waits are neither reached nor covered by an already-recorded ``CUevent`` stay
*pending* on the host and are re-scanned on every signal, failure and submission, ready ones being
issued past them; one dispatch stream per queue and the device's one callback stream
(``cuLaunchHostFunc``, ``host_fn_ns``), whose host functions run in issue order; ``CUevent``\\ s come from a pool of ``event_pool_capacity`` (default 32: IREE's
``iree_hal_cuda_device_params_initialize``) — beyond it events are created (``event_create_ns``) and
destroyed (``event_destroy_ns``) unpooled; an action needing more than 32 wait events fails with
RESOURCE_EXHAUSTED; and any failure makes the queue status sticky ([H] ``deferred_work_queue.c``):
every pending and later action fails with it.

Because waits are resolved on the host, a consumer submitted before its producer on the same queue
does not deadlock the stream (unlike ``sim:metal``); it only costs a host round trip. The pool's
activity is traced as ``cuda_event`` events (``docs/sim-cuda.md``).

>>> from halsim.sim.driver import driver
>>> dev = driver.create_device("cuda", event_pool_capacity=1)
>>> s = dev.create_semaphore()
>>> for v in (1, 2, 3):
...     dev.queue_barrier([], [(s, v)])
>>> s.wait(3)
>>> [(e["action"], e["pooled"]) for e in dev.trace.events("cuda_event")][:3]
[('acquire', True), ('acquire', False), ('acquire', False)]
>>> dev.unpooled_events
2
>>> dev.close()
"""

from __future__ import annotations

from reference.utils.cts_exclusions import sticky_failure

from ..streams import MAX_WAIT_EVENTS, StreamDevice

CAPABILITIES = frozenset({"async_queue", "host_calls", "mapping", "indirect"})

# IREE's CUDA CTS configuration at [H] has no HAL events (no `events` tag: EventTest is skipped).
CTS_UNSUPPORTED: dict[str, str] = sticky_failure()


class CudaDevice(StreamDevice):
    personality = "cuda"
    capabilities = CAPABILITIES
    extra_options = {"event_pool_capacity": 32}
    wait_policy = "pending"
    max_wait_events = MAX_WAIT_EVENTS
    event_name = "cuda_event"
    stream_name = "dispatch stream"
    cost_defaults = {"commit_ns": 2_000, "event_record_ns": 500, "event_wait_ns": 500, "event_create_ns": 5_000,
                     "event_destroy_ns": 2_000, "host_fn_ns": 8_000}
