import pytest

from reference import hal

S = hal.StatusCode


def test_reference_drivers_register_through_entry_points():
    assert {"local-sync", "local-task"} <= set(hal.available_drivers())
    infos = {i.uri: i for i in hal.available_devices()}
    assert infos["local-sync"].capabilities == frozenset({"events", "host_calls", "mapping", "indirect"})
    assert infos["local-task"].capabilities == frozenset({"async_queue", "events", "host_calls", "mapping", "indirect"})
    assert "QueueAllocaTest.AllocaWithWaitSemaphores" in infos["local-sync"].cts_unsupported
    assert dict(infos["local-task"].cts_unsupported) == {}


def test_created_devices_report_uri_and_capabilities():
    for uri in ("local-sync", "local-task"):
        with hal.create_device(uri) as dev:
            assert dev.uri == uri
            assert dev.capabilities == hal.get_driver(uri).query_available_devices()[0].capabilities


@pytest.mark.parametrize("uri", ["nope", "sim-x:metal", "cudaa"])
def test_unknown_driver_is_not_found(uri):
    with pytest.raises(hal.HalError) as ei:
        hal.create_device(uri)
    assert ei.value.code == S.NOT_FOUND
    assert repr(uri.split(":")[0]) in ei.value.message


@pytest.mark.parametrize("uri,kwargs,needle", [
    ("local-task?bogus=1", {}, "'bogus'"),
    ("local-task", {"bogus": 1}, "'bogus'"),
    ("local-task?workers=two", {}, "workers"),
    ("local-task", {"workers": 0}, "workers"),
    ("local-task", {"workers": "3x"}, "workers"),
    ("local-sync?workers=2", {}, "'workers'"),
    ("local-task?workers=1&workers=2", {}, "twice"),
    ("", {}, "uri"),
])
def test_bad_options_are_invalid_argument(uri, kwargs, needle):
    with pytest.raises(hal.HalError) as ei:
        hal.create_device(uri, **kwargs)
    assert ei.value.code == S.INVALID_ARGUMENT
    assert needle in ei.value.message


def test_options_from_uri_and_keywords():
    with hal.create_device("local-task?workers=3") as dev:
        assert dev.options == {"workers": 3} and len(dev._workers) == 3
    with hal.create_device("local-task?workers=3", workers=1) as dev:  # keywords win
        assert len(dev._workers) == 1


def test_parse_uri():
    assert hal.parse_uri("local-task") == ("local-task", "", {})
    assert hal.parse_uri("sim:metal?legacy_sync=1&queues=2") == ("sim", "metal", {"legacy_sync": "1", "queues": "2"})


def test_closed_device_rejects_calls():
    dev = hal.create_device("local-task")
    dev.close()
    dev.close()  # idempotent
    with pytest.raises(hal.HalError) as ei:
        dev.create_semaphore()
    assert ei.value.code == S.FAILED_PRECONDITION and "closed" in ei.value.message
