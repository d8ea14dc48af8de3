"""``cuda:GPU-<uuid>``: a CUDA device named by its UUID, as IREE's ``create_device_by_path`` takes it
(``runtime/src/iree/hal/drivers/cuda/cuda_driver.c``: the "GPU-" prefix, then
``iree_string_view_parse_hex_bytes`` of 16 bytes, then a scan of every device's ``cuDeviceGetUuid``).
The device is still named by its ordinal (``cuda``, ``cuda:1``), as ``query_available_devices`` lists
it. Fake driver only (``fake_cuda.py``: its default UUIDs are GPU-fa4ec0da-0000-4000-8000-<ordinal>)."""

from __future__ import annotations

import pytest

from reference import hal

pytest.importorskip("cuda.bindings", reason="the 'cuda' extra (cuda-bindings) is not installed")

from .fake_cuda import FakeCuda, _real, install  # noqa: E402

UUID1 = "GPU-fa4ec0da-0000-4000-8000-000000000001"
UUID2 = "GPU-fa4ec0da-0000-4000-8000-000000000002"
FORM = "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, as nvidia-smi -L lists it"


def _refused(uri: str) -> tuple:
    with pytest.raises(hal.HalError) as e:
        hal.create_device(uri)
    return e.value.code, e.value.message


@pytest.mark.parametrize("uri, ordinal, name", [
    (f"cuda:{UUID1}", 1, "cuda:1"),
    (f"cuda://{UUID2}", 2, "cuda:2"),
    ("cuda:GPU-fa4ec0da-0000-4000-8000-000000000000", 0, "cuda"),
    # iree_string_view_parse_hex_bytes: either case, a '-' or ' ' (or nothing) between two bytes
    ("cuda:GPU-FA4EC0DA-0000-4000-8000-000000000001", 1, "cuda:1"),
    ("cuda:GPU-fa4ec0da000040008000000000000001", 1, "cuda:1"),
    ("cuda:GPU-fa 4e c0 da-00-00-40-00-80-00-00-00-00-00-00-01", 1, "cuda:1"),
    # the ordinal option agreeing with the UUID's device, or the default 0 (which contradicts no path)
    (f"cuda:{UUID1}?ordinal=1", 1, "cuda:1"),
    (f"cuda:{UUID2}?ordinal=0", 2, "cuda:2"),
])
def test_a_uuid_path_makes_the_device_of_that_uuid(uri, ordinal, name):
    with install(FakeCuda(device_count=3)) as fake:
        with hal.create_device(uri) as dev:
            assert (int(dev.adapter.cu_device), dev.uri, dev.trace.header["device"]) == (ordinal, name, name)
        # CUDA has no lookup by UUID: every device's UUID was read, as IREE scans them
        assert [c[1] for c in fake.calls if c[0] == "cuDeviceGetUuid"] == [0, 1, 2]


def test_uuids_differing_only_past_their_first_8_bytes_name_their_own_devices():
    """All 16 bytes are compared (IREE's memcmp takes ``sizeof(device_uuid)`` of a pointer: 8 bytes)."""
    uuids = [bytes.fromhex("0123456789abcdef" + tail) for tail in ("00" * 8, "11" * 8)]
    with install(FakeCuda(device_count=2, uuids=uuids)):
        with hal.create_device("cuda:GPU-01234567-89ab-cdef-1111-111111111111") as dev:
            assert (int(dev.adapter.cu_device), dev.uri) == (1, "cuda:1")


def test_a_uuid_no_device_has_is_not_found_naming_the_path_and_the_uuids():
    with install(FakeCuda(device_count=2)):
        assert _refused(f"cuda:{UUID2}") == (
            hal.StatusCode.NOT_FOUND, f"cuda: no device {UUID2} (the driver has 2: "
            "GPU-fa4ec0da-0000-4000-8000-000000000000, GPU-fa4ec0da-0000-4000-8000-000000000001)")


@pytest.mark.parametrize("path", [
    "GPU-1234",
    "GPU-",
    "GPU-fa4ec0da-0000-4000-8000-00000000001",     # 31 digits
    "GPU-fa4ec0da-0000-4000-8000-0000000000010",   # 33 digits
    "GPU-fa4ec0da-0000-4000-8000-00000000000g",
    "GPU-fa4ec0da--0000-4000-8000-000000000001",   # two separators between two bytes
    "GPU-f-a4ec0da-0000-4000-8000-000000000001",   # a separator inside a byte
    "GPU--fa4ec0da-0000-4000-8000-000000000001",   # a separator before the first byte
    "GPU-fa4ec0da-0000-4000-8000-000000000001-",   # ... or after the last
])
def test_a_malformed_uuid_is_not_found_naming_the_path(path):
    with install(FakeCuda(device_count=2)) as fake:
        assert _refused(f"cuda:{path}") == (
            hal.StatusCode.NOT_FOUND,
            f"cuda: unsupported device path {path!r} (a device UUID is 32 hex digits: {FORM})")
        assert "cuDeviceGetUuid" not in fake.names()  # refused before asking the driver


@pytest.mark.parametrize("path", ["gpu-fa4ec0da-0000-4000-8000-000000000001", "0000:01:00.0", "-1", "x"])
def test_a_path_that_is_neither_an_ordinal_nor_a_uuid_is_not_found_naming_it(path):
    """IREE's prefix is "GPU-" exactly; a PCI bus id is no CUDA device path there (UNIMPLEMENTED
    "unsupported device path"; NOT_FOUND here, as every driver's unsupported path)."""
    with install(FakeCuda(device_count=2)):
        assert _refused(f"cuda:{path}") == (
            hal.StatusCode.NOT_FOUND,
            f"cuda: unsupported device path {path!r} (a device ordinal or UUID: cuda:1, cuda:{FORM})")


def test_the_ordinal_option_contradicting_the_uuid_is_invalid_argument():
    with install(FakeCuda(device_count=3)):
        assert _refused(f"cuda:{UUID1}?ordinal=2") == (
            hal.StatusCode.INVALID_ARGUMENT, f"cuda:{UUID1}: option ordinal=2 names another device")


def test_the_device_list_gives_each_uuid_and_it_names_that_device():
    from real_backends.cuda import driver

    with install(FakeCuda(device_count=2)):
        infos = driver.query_available_devices()
        assert [(d.uri, d.description.split(":")[0]) for d in infos] == [
            ("cuda", "GPU-fa4ec0da-0000-4000-8000-000000000000"),
            ("cuda:1", "GPU-fa4ec0da-0000-4000-8000-000000000001")]
        for info in infos:
            with hal.create_device("cuda:" + info.description.split(":")[0]) as dev:
                assert dev.uri == info.uri


def test_a_uuid_path_without_a_device_is_unavailable():
    with install(FakeCuda(device_count=0)):
        assert _refused(f"cuda:{UUID1}") == (hal.StatusCode.UNAVAILABLE, "cuda: the driver reports no CUDA device")


def test_a_failed_uuid_query_is_internal_naming_the_call():
    fake = FakeCuda(device_count=2)
    fake.cuDeviceGetUuid = lambda dev: (_real.CUresult.CUDA_ERROR_INVALID_DEVICE, None)
    with install(fake):
        assert _refused(f"cuda:{UUID1}") == (
            hal.StatusCode.INTERNAL, "cuda: cuDeviceGetUuid failed (CUDA_ERROR_INVALID_DEVICE)")
