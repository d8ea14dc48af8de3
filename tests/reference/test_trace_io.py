"""The trace file: atomic streamed writes, spill to disk, round trip, clear errors on bad files."""

import json
import os

import pytest

from reference import hal
from reference.trace import Trace, TraceFormatError


def small_program(dev):
    buf = dev.allocator.allocate_buffer(64)
    s = dev.create_semaphore()
    dev.queue_fill([], [(s, 1)], buf, 0, 64, 0x11, 1)
    dev.queue_copy([(s, 1)], [(s, 2)], buf, 0, buf, 32, 16)
    s.wait(2, 10)


def test_round_trip_is_valid_json_and_preserves_events(tmp_path, ref_device):
    small_program(ref_device)
    path = tmp_path / "t.json"
    ref_device.trace.save(path)
    doc = json.loads(path.read_text())  # the whole file is one JSON document
    assert doc["format"] == "halsim-trace" and doc["version"] == 1
    assert doc["header"] == {"device": ref_device.uri, "clock": "monotonic", "options": ref_device.options}
    loaded = Trace.load(path)
    assert list(loaded) == list(ref_device.trace) == doc["events"]
    assert len(loaded) == len(doc["events"])
    ops = loaded.operations()
    assert [(o["op"], o["kind"], o["status"]) for o in ops] == [("0:0", "fill", 0), ("0:1", "copy", 0)]
    assert ops[1]["wait"] == [[ops[1]["signal"][0][0], 1]] and ops[1]["end"] >= ops[1]["start"] >= ops[1]["ready"]
    cmds = list(loaded.events("cmd"))
    assert [c["access"] for c in cmds] == [[["b0", 0, 64, "w"]], [["b0", 0, 16, "r"], ["b0", 32, 16, "w"]]]


def test_spill_to_disk_keeps_order(tmp_path):
    t = Trace({"device": "x"}, spill_threshold=7)
    for i in range(50):
        t.emit({"ev": "n", "i": i})
    assert len(t._events) < 7 and t._spooled > 0
    assert [e["i"] for e in t] == list(range(50)) and len(t) == 50
    t.save(tmp_path / "s.json")
    assert [e["i"] for e in Trace.load(tmp_path / "s.json")] == list(range(50))


def test_save_is_atomic(tmp_path):
    path = tmp_path / "t.json"
    good = Trace({"device": "a"})
    good.emit({"ev": "n", "i": 1})
    good.save(path)
    before = path.read_bytes()

    class Boom(Trace):
        def __iter__(self):
            yield {"ev": "n", "i": 2}
            raise RuntimeError("crash mid-write")

    with pytest.raises(RuntimeError):
        Boom({"device": "b"}).save(path)
    assert path.read_bytes() == before  # the old file is intact
    assert os.listdir(tmp_path) == ["t.json"]  # no temporary left behind


def test_save_through_a_symlink_writes_its_target_and_keeps_the_link(tmp_path):
    """``trace.json -> runs/trace.json``: the link stays a link, the file it points at gets the trace
    (renaming over the link would have replaced it by a plain file, leaving the target stale)."""
    (tmp_path / "runs").mkdir()
    target = tmp_path / "runs" / "t.json"
    target.write_text("old")
    link = tmp_path / "t.json"
    link.symlink_to(target)
    t = Trace({"device": "a"})
    t.emit({"ev": "n", "i": 1})
    t.save(link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert [e["i"] for e in Trace.load(target)] == [1]
    assert sorted(os.listdir(tmp_path / "runs")) == ["t.json"]  # the temporary was next to the target
    dangling = tmp_path / "new.json"
    dangling.symlink_to(tmp_path / "runs" / "new.json")
    t.save(dangling)
    assert dangling.is_symlink() and [e["i"] for e in Trace.load(tmp_path / "runs" / "new.json")] == [1]


@pytest.mark.parametrize("content,needle", [
    (b"", "not a halsim trace"),
    (b"hello\n", "not a halsim trace"),
    (b'{"format":"other","version":1,"header":{},"events":[\n]}\n', "format 'other'"),
    (b'{"format":"halsim-trace","version":9,"header":{},"events":[\n]}\n', "version 9"),
    (b'{"format":"halsim-trace","version":1,"header":{},"events":[\n{"ev":"x"},\n{"ev"\n', ":3: bad event"),
    (b'{"format":"halsim-trace","version":1,"header":{},"events":[\n{"ev":"x"}\n', "truncated"),
    (b"\xff\xfe\x00", "not UTF-8"),
])
def test_bad_files_raise_one_clear_error(tmp_path, content, needle):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceFormatError) as ei:
        Trace.load(path)
    assert needle in str(ei.value) and str(path) in str(ei.value)


def test_missing_file(tmp_path):
    with pytest.raises(TraceFormatError) as ei:
        Trace.load(tmp_path / "nope.json")
    assert str(ei.value) == f"{tmp_path / 'nope.json'}: no such file"  # (input_problem's wording)


def test_host_release_is_recorded_with_ids_only(ref_device):
    buf = ref_device.allocator.allocate_buffer(8)
    bid = buf.id
    del buf
    assert [e["res"] for e in ref_device.trace.events("host_release")] == [bid]
    for e in ref_device.trace:
        json.dumps(e)  # only plain data: the trace never holds objects


def test_blocks_expand_to_one_event_per_command(tmp_path):
    t = Trace({"device": "x"})
    a = t.add_template({"ev": "cmd", "t": 0, "op": "", "index": 0, "kind": "fill", "start": 0, "track": 0})
    b = t.add_template({"ev": "cmd", "t": 0, "op": "", "index": 1, "kind": "copy", "start": 0, "track": 0})
    block = t.add_block([(a, 0, 10), (b, 10, 25)])
    t.emit({"ev": "op", "t": 5, "op": "0:0"})
    t.emit_block(block, 100, "0:0", 3)
    t.emit_from(a, 7, "0:1", 2, 1)
    assert len(t) == 4
    assert [(e.get("index"), e["t"], e["op"], e.get("start"), e.get("track")) for e in t] == [
        (None, 5, "0:0", None, None), (0, 110, "0:0", 100, 3), (1, 125, "0:0", 110, 3), (0, 7, "0:1", 2, 1)]
    t.save(tmp_path / "t.json")
    assert [e["t"] for e in Trace.load(tmp_path / "t.json")] == [5, 110, 125, 7]


def test_a_sorted_run_orders_only_its_own_kind_thread_and_instant():
    trace = Trace()
    trace.emit({"ev": "host_join", "t": 5, "thread": 0, "joined": 9})  # an earlier instant: stays first
    trace.emit({"ev": "op", "t": 7, "op": "1:0"})
    for joined in (3, 1, 4, 2):
        trace.emit_sorted_run({"ev": "host_join", "t": 7, "thread": 0, "joined": joined}, "joined")
    trace.emit_sorted_run({"ev": "host_join", "t": 7, "thread": 1, "joined": 0}, "joined")  # another thread
    trace.emit_sorted_run({"ev": "host_join", "t": 7, "thread": 0, "joined": 2}, "joined")  # a new run
    got = [(e["ev"], e.get("thread"), e.get("joined")) for e in trace.events()]
    assert got == [("host_join", 0, 9), ("op", None, None), ("host_join", 0, 1), ("host_join", 0, 2),
                   ("host_join", 0, 3), ("host_join", 0, 4), ("host_join", 1, 0), ("host_join", 0, 2)]


def test_query_and_rejected_signal_records_round_trip(tmp_path):
    from reference import hal

    with hal.create_device("local-task") as dev:
        s = dev.create_semaphore()
        s.signal(3)
        assert s.query() == 3 and s.query() == 3              # traced once
        try:
            s.signal(2)
        except hal.HalError:
            pass
    dev.trace.save(tmp_path / "t.json")
    back = Trace.load(tmp_path / "t.json")
    assert [(e["thread"], e["sem"], e["value"]) for e in back.events("host_query")] == [(0, "s0", 3)]
    assert [(e["thread"], e["sem"], e["value"], e["status"]) for e in back.events("signal_rejected")] == [
        (0, "s0", 2, 3)]
