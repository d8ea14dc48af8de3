"""Traces for the trace-tool tests: deterministic simulator runs of the demo's staged pipeline, a
failure, and host-wait ordering; each saved once per session."""

import pytest

from halsim.pipeline import demo_pipeline, staged_pipeline
from reference import hal

# The staged pipeline with 3 stages: what each op waits for and who signals it (same on every device).
# s0 uploaded, s1 computed, s2 downloaded, s3 zeroed; ops: 0:0 fill, 0:1 upload 0, 0:2 upload 1,
# 0:3 compute 0, 0:4 copy 0, 0:5 upload 2, 0:6 compute 1, 0:7 copy 1, 0:8 compute 2, 0:9 copy 2.
# Compute k >= 1 also waits for compute k-1 (s1 >= k: they share the scratch buffer): 0:3 -> 0:6, 0:6 -> 0:8.
# Upload k >= 1 waits for upload k-1 (s0 >= k): 0:1 -> 0:2, 0:2 -> 0:5; every copy waits for the zero fill
# (s3 >= 1): 0:0 -> 0:4, 0:7, 0:9; copy k >= 1 waits for copy k-1 (s2 >= k): 0:4 -> 0:7, 0:7 -> 0:9.
# 17 edges, one per wait (0:2 1, 0:3 1, 0:4 2, 0:5 2, 0:6 2, 0:7 3, 0:8 3, 0:9 3).
STAGED_SEMAPHORE_EDGES = [
    ("0:1", "0:2", "s0", 1),
    ("0:1", "0:3", "s0", 1), ("0:3", "0:4", "s1", 1), ("0:0", "0:4", "s3", 1), ("0:3", "0:5", "s1", 1),
    ("0:2", "0:5", "s0", 2),
    ("0:2", "0:6", "s0", 2), ("0:3", "0:6", "s1", 1), ("0:6", "0:7", "s1", 2), ("0:0", "0:7", "s3", 1),
    ("0:4", "0:7", "s2", 1), ("0:5", "0:8", "s0", 3),
    ("0:4", "0:8", "s2", 1), ("0:6", "0:8", "s1", 2), ("0:8", "0:9", "s1", 3), ("0:0", "0:9", "s3", 1),
    ("0:7", "0:9", "s2", 2),
]


def _staged(uri, path):
    with hal.create_device(uri) as dev:
        assert staged_pipeline(dev, stages=3)
        dev.trace.save(path)
    return str(path)


@pytest.fixture(scope="session")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("traces")
    out = {
        "generic": _staged("sim?queues=2", d / "generic.json"),
        "metal": _staged("sim:metal?queues=2", d / "metal.json"),
        "metal_sync": _staged("sim:metal?queues=2&legacy_sync=1", d / "metal_sync.json"),
    }
    # local-task runs demo_pipeline, one chain whose edges are the same every run. (staged_pipeline
    # used to race there: compute k and k+1 shared a scratch buffer and both signalled the same
    # timeline with nothing ordering them, so which signal met a wait varied run to run. Compute k now
    # waits for compute k-1, but these traces still avoid it.)
    for name, uri in (("local-task", "local-task"), ("demo-sim", "sim?queues=2")):
        with hal.create_device(uri) as dev:
            assert demo_pipeline(dev)
            dev.trace.save(d / f"{name}.json")
        out[name] = str(d / f"{name}.json")
    # A failure: op 0:0 waits on s0, the host fails s0, the failure propagates to s1.
    with hal.create_device("sim", queues=1) as dev:
        buf = dev.allocator.allocate_buffer(64)
        a, b = dev.create_semaphore(), dev.create_semaphore()
        dev.queue_fill([(a, 1)], [(b, 1)], buf, 0, 64, 1, 1)
        a.fail(hal.StatusCode.ABORTED, "boom")
        with pytest.raises(hal.HalError):
            b.wait(1)
        dev.trace.save(d / "failure.json")
    out["failure"] = str(d / "failure.json")
    # Host ordering: 0:0 signals s0=1; the host waits for it, then enqueues 0:1 and 0:2 (no waits),
    # then signals s1=1 from the host, which 0:3 waits for; s2 starts at 5, so 0:3's wait s2>=5 has no edge.
    with hal.create_device("sim", queues=2) as dev:
        buf = dev.allocator.allocate_buffer(64)
        s0, s1, s2, done = (dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore(5),
                            dev.create_semaphore())
        dev.queue_fill([], [(s0, 1)], buf, 0, 64, 1, 1)
        s0.wait(1)
        dev.queue_fill([], [], buf, 0, 64, 2, 1, queue_affinity=1)
        dev.queue_fill([], [], buf, 0, 64, 3, 1, queue_affinity=2)
        s1.signal(1)
        dev.queue_fill([(s1, 1), (s2, 5)], [(done, 1)], buf, 0, 64, 4, 1)
        done.wait(1)
        dev.trace.save(d / "host.json")
    out["host"] = str(d / "host.json")
    return out


@pytest.fixture(scope="session")
def staged_edges():
    return STAGED_SEMAPHORE_EDGES
