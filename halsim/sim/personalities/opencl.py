"""``sim:opencl``: the model the ``opencl`` backend is diffed against — in-order OpenCL command queues.

The stream engine (:mod:`halsim.sim.streams`) with OpenCL's parts: each HAL queue is an in-order
``cl_command_queue``; an action is issued as soon as it is submitted, every wait that is not reached
yet becoming an event in its wait list — the recorded marker event of the action that signals it,
or a ``clCreateUserEvent`` the host sets (``clSetUserEventStatus``) when the semaphore reaches the
value. Events are created and released per use (no pool, no wait-event limit); completions arrive
on one event-callback thread (``clSetEventCallback``, ``host_fn_ns`` each, one at a time).

Because the queue is in order and the waits are in the device's wait lists, an action waiting for a
value only a *later* action on the same queue signals stalls that queue forever: the simulator
reports "same-queue wait-before-signal on in-order queue N" (IREE's ``SemaphoreSubmissionTest``s that
submit consumers first are unsupported here, as on Metal). Failures are sticky, as in the CUDA
design the backend shares.

>>> from halsim.sim.driver import driver
>>> dev = driver.create_device("opencl", queues=2)
>>> a, b = dev.create_semaphore(), dev.create_semaphore()
>>> dev.queue_barrier([(a, 1)], [(b, 1)], queue_affinity=1 << 1)   # issued with a user event
>>> a.signal(1)                                                   # the host sets it
>>> b.wait(1)
>>> [(e["action"], e["kind"], e["sem"]) for e in dev.trace.events("cl_event")][:2]
[('acquire', 'user', 's0'), ('acquire', 'signal', 's1')]
>>> dev.close()
"""

from __future__ import annotations

from reference.utils.cts_exclusions import in_order_queue, sticky_failure

from ..streams import StreamDevice

CAPABILITIES = frozenset({"async_queue", "events", "host_calls", "mapping", "indirect"})

CTS_UNSUPPORTED: dict[str, str] = {**in_order_queue("OpenCL queue"), **sticky_failure()}


class OpenCLDevice(StreamDevice):
    personality = "opencl"
    capabilities = CAPABILITIES
    wait_policy = "user_event"
    in_order_waits = True  # unresolved waits are user events on the in-order queue
    max_wait_events = None
    event_name = "cl_event"
    stream_name = "in-order queue"
    callback_order = "completion"
    callback_track = "event callbacks"
    inline_issue = True  # as the opencl backend: its enqueues never block
    cost_defaults = {"commit_ns": 2_000, "event_record_ns": 500, "event_wait_ns": 500, "event_create_ns": 1_000,
                     "event_destroy_ns": 500, "host_fn_ns": 8_000}
