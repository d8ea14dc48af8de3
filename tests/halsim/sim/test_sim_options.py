"""The sim driver: personalities it offers, options, queues and affinities."""

import pytest

from halsim.sim.driver import driver
from reference import hal
from reference.drivers.sync import CTS_UNSUPPORTED
from tests.conftest import WAIT

S = hal.StatusCode


def test_available_devices_are_the_personalities_that_exist():
    infos = {i.uri: i for i in driver.query_available_devices()}
    assert {"sim", "sim:sync", "sim:metal"} <= set(infos)
    assert infos["sim"].capabilities == {"async_queue", "events", "host_calls", "mapping", "indirect"}
    assert infos["sim:sync"].capabilities == {"events", "host_calls", "mapping", "indirect"}
    assert infos["sim"].cts_unsupported == {}
    assert infos["sim:sync"].cts_unsupported == CTS_UNSUPPORTED
    assert infos["sim:metal"].capabilities == {"async_queue", "host_calls", "mapping", "indirect"}
    for uri in infos:  # each is creatable from its URI, options in the query string included
        _, path, options = hal.parse_uri(uri + "?queues=2&retain_resources=false")
        dev = driver.create_device(path, **options)
        assert dev.capabilities == infos[uri].capabilities
        assert (dev.queue_count, dev.retain_resources) == (2, False)
        dev.close()


def test_generic_is_the_default_personality(make):
    dev = make("")
    assert (dev.uri, dev.personality) == ("sim", "generic")
    assert make("generic").uri == "sim:generic"


def test_unknown_personality_is_not_found():
    with pytest.raises(hal.HalError) as ei:
        driver.create_device("vulkan")
    assert ei.value.code == S.NOT_FOUND and "generic, metal" in ei.value.message


@pytest.mark.parametrize("options, named", [
    ({"queues": 0}, "queues"), ({"queues": 65}, "queues"), ({"queues": True}, "queues"),
    ({"queues": "two"}, "queues"), ({"max_concurrency": 0}, "max_concurrency"),
    ({"retain_resources": 1}, "retain_resources"), ({"retain_resources": "maybe"}, "retain_resources"),
    ({"seed": 1.5}, "seed"), ({"seed": True}, "seed"), ({"cost_model": 42}, "cost_model"),
    ({"queue": 2}, "queue"), ({"legacy_sync": True}, "legacy_sync"),
])
def test_bad_options_are_invalid_argument(options, named):
    with pytest.raises(hal.HalError) as ei:
        driver.create_device("generic", **options)
    assert ei.value.code == S.INVALID_ARGUMENT
    assert named in ei.value.message


def test_string_options_from_a_uri_are_parsed(make):
    dev = make("sync", queues="3", max_concurrency="2", seed="9", retain_resources="0")
    assert (dev.queue_count, dev.max_concurrency, dev.retain_resources) == (3, 2, False)
    assert dev.trace.header["options"]["seed"] == 9


def test_affinity_selects_the_queue(make):
    dev = make("generic", queues=4)
    done = []
    for affinity in (1 << 2, 0b1100, hal.QUEUE_AFFINITY_ANY, 1 << 3):
        done.append((dev.create_semaphore(), 1))
        dev.queue_barrier([], [done[-1]], queue_affinity=affinity)
    dev.wait_semaphores(hal.WaitMode.ALL, done, WAIT)
    assert [o["queue"] for o in dev.trace.operations()] == [2, 2, 0, 3]
    buf = dev.queue_alloca([], [], 16, queue_affinity=1 << 1)
    assert buf.placement.queue_affinity == 1 << 1


@pytest.mark.parametrize("personality", ["generic", "sync", "cuda", "metal"])
def test_affinity_outside_the_queues_is_hashed_onto_them(make, personality):
    """Never refused (IREE's drivers take any mask; local-task: ``queue_affinity % queue_count``): the
    lowest bit's index modulo the queue count, 0 on queue 0 — a program written for 8 queues runs on 2."""
    dev = make(personality, queues=2)
    done = []
    for affinity in (1 << 2, 1 << 5, 0, 1 << 63, 0b1100):
        done.append((dev.create_semaphore(), 1))
        dev.queue_barrier([], [done[-1]], queue_affinity=affinity)
    dev.wait_semaphores(hal.WaitMode.ALL, done, WAIT)
    assert [o["queue"] for o in dev.trace.operations()] == [0, 1, 0, 1, 0]
    assert dev.create_command_buffer(queue_affinity=1 << 5).queue_affinity == 1 << 5
    with pytest.raises(hal.HalError) as ei:  # (still a 64-bit mask)
        dev.queue_barrier([], [], queue_affinity=1 << 64)
    assert (ei.value.code, ei.value.message) == (S.INVALID_ARGUMENT,
                                                 f"queue_affinity must be a 64-bit mask, got {1 << 64}")


def test_queue_tracks_are_named_by_index(make):
    dev = make("generic", queues=3)
    names = [e["name"] for e in dev.trace.events("track") if e["kind"] == "queue"]
    assert names == ["queue 0", "queue 1", "queue 2"]


def test_closed_device_rejects_calls(make):
    dev = make("generic")
    dev.close()
    with pytest.raises(hal.HalError) as ei:
        dev.create_semaphore()
    assert ei.value.code == S.FAILED_PRECONDITION
