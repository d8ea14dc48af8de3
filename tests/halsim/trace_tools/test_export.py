"""Perfetto and Chrome exports, read back with Perfetto's own protobuf classes and json, checked
against the source trace."""

import json
from collections import Counter

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from reference.trace import Trace

from halsim.cli import main
from halsim.trace_tools.perfetto_export import export_chrome, export_perfetto

TE = pb.TrackEvent


def read(path):
    """(track uuid → descriptor, track uuid → [packets in file order])."""
    trace = pb.Trace.FromString(open(path, "rb").read())
    tracks, events = {}, {}
    for p in trace.packet:
        assert p.trusted_packet_sequence_id == 1
        if p.HasField("track_descriptor"):
            tracks[p.track_descriptor.uuid] = p.track_descriptor
        elif p.HasField("track_event"):
            assert p.track_event.track_uuid in tracks, "event before (or without) its track descriptor"
            events.setdefault(p.track_event.track_uuid, []).append(p)
    return tracks, events


def walk(packets):
    """Check begin/end balance and time order on one track; [(name, parent name, start, end)]."""
    stack, out, last = [], [], -1
    for p in packets:
        te = p.track_event
        assert p.timestamp >= last
        last = p.timestamp
        if te.type == TE.TYPE_SLICE_BEGIN:
            stack.append((te.name, p.timestamp))
        elif te.type == TE.TYPE_SLICE_END:
            name, start = stack.pop()
            out.append((name, stack[-1][0] if stack else None, start, p.timestamp))
    assert stack == []
    return out


def test_perfetto_slices_tracks_and_nesting(traces, tmp_path):
    src = Trace.load(traces["generic"])
    path = tmp_path / "g.pftrace"
    stats = export_perfetto(src, path)
    tracks, events = read(path)
    names = {u: d.name for u, d in tracks.items()}
    assert names[1] == "sim (virtual clock)"
    assert all(d.parent_uuid == 1 for u, d in tracks.items() if u != 1)
    lanes = sorted(n for u, n in names.items() if u != 1 and not tracks[u].HasField("counter"))
    # the computes on queue 0 run one after another (one lane); up to 2 transfers overlap on queue 1 (the
    # fill and upload 0, copy 0 and upload 2): upload 1 now waits for upload 0, copies for the previous copy
    assert lanes == ["host thread 0", "queue 0", "queue 1", "queue 1 (lane 2)"]
    assert set(events) <= set(tracks)
    # slices per trace track (summed over lanes) equal the source's ops + cmds on that track
    per_track = Counter()
    for uuid, packets in events.items():
        for name, parent, start, end in walk(packets):
            per_track[names[uuid].split(" (lane")[0]] += 1
            if not name.startswith(("0:", "host wait")):
                assert parent is not None and parent.startswith("0:")  # commands nest under an op
    ops = [e for e in src.events("op_done")]
    cmds = [e for e in src.events("cmd")]
    for q in (0, 1):
        assert per_track[f"queue {q}"] == sum(o["track"] == q for o in ops) + sum(c["track"] == q for c in cmds)
    assert per_track["host thread 0"] == 1
    assert stats["slices"] == sum(per_track.values()) == 10 + 22 + 1


def test_perfetto_counters_flows_and_failures(traces, tmp_path):
    src = Trace.load(traces["generic"])
    path = tmp_path / "g.pftrace"
    export_perfetto(src, path)
    tracks, events = read(path)
    counters = {d.name: u for u, d in tracks.items() if d.HasField("counter")}
    assert sorted(counters) == ["semaphore s0", "semaphore s1", "semaphore s2", "semaphore s3"]
    for sem in ("s0", "s1", "s2", "s3"):
        got = [(p.timestamp, p.track_event.counter_value) for p in events[counters[f"semaphore {sem}"]]]
        created = next(e["t"] for e in src.events("semaphore") if e["sem"] == sem)
        assert got == [(created, 0)] + [(e["t"], e["value"]) for e in src.events("signal") if e["sem"] == sem]
    out, into = Counter(), Counter()
    for packets in events.values():
        for p in packets:
            out.update(p.track_event.flow_ids)
            into.update(p.track_event.terminating_flow_ids)
    # 17 op waits + the host wait on s2>=3; every flow has exactly one source and one destination
    assert set(out) == set(into) == set(range(1, 19))
    assert max(out.values()) == max(into.values()) == 1
    # Perfetto reads events in time order and drops an arrow whose end it meets before its start:
    # the host wait began before the op that satisfied it, so its arrow ends where the wait ends
    times = flow_times(events)
    assert all(src < dst for src, dst in times.values()), times
    (host,) = [u for u, d in tracks.items() if d.name == "host thread 0"]
    ends = [p for p in events[host] if p.track_event.type == TE.TYPE_SLICE_END and p.track_event.terminating_flow_ids]
    assert len(ends) == 1 and ends[0].timestamp == times[ends[0].track_event.terminating_flow_ids[0]][1]

    path = tmp_path / "f.pftrace"
    findings = [{"rule": "hazard.raw", "message": "racy read", "ops": ["0:0"]},
                {"rule": "hazard.waw", "message": "racy write", "ops": ["0:0.0"], "range": [0, 4]},  # a command id
                {"rule": "semaphore.x", "message": "late", "ops": [], "t": 1700}]
    stats = export_perfetto(Trace.load(traces["failure"]), path, findings=findings)
    tracks, events = read(path)
    by_name = {d.name: u for u, d in tracks.items()}
    assert [p.track_event.name for p in events[by_name["failures"]]] == ["s0 failed", "s1 failed", "0:0 failed"]
    assert [(p.track_event.name, p.timestamp) for p in events[by_name["findings"]]] == [
        ("hazard.raw: racy read", 1500), ("hazard.waw: racy write", 1500), ("semaphore.x: late", 1700)]
    waw = events[by_name["findings"]][1].track_event
    assert {a.name: a.string_value for a in waw.debug_annotations}["range"] == "[0, 4]"
    assert stats["instants"] == 3 + 3  # 3 failures + 3 findings; the host's fail is not a signal instant


def flow_times(events) -> dict:
    """flow id → (time of its source event, time of its terminating event)."""
    src, dst = {}, {}
    for packets in events.values():
        for p in packets:
            for n in p.track_event.flow_ids:
                src[n] = p.timestamp
            for n in p.track_event.terminating_flow_ids:
                dst[n] = p.timestamp
    return {n: (src[n], dst.get(n)) for n in src}


def test_metal_encoders_and_host_signal_instant(traces, tmp_path):
    path = tmp_path / "h.pftrace"
    export_perfetto(Trace.load(traces["host"]), path)
    tracks, events = read(path)
    host = next(u for u, d in tracks.items() if d.name == "host thread 0")
    kinds = [(p.track_event.type, p.track_event.name) for p in events[host]]
    assert (TE.TYPE_INSTANT, "signal s1=1") in kinds
    instant = next(p for p in events[host] if p.track_event.type == TE.TYPE_INSTANT)
    assert len(instant.track_event.flow_ids) == 1

    path = tmp_path / "m.pftrace"
    export_perfetto(Trace.load(traces["metal"]), path)
    tracks, events = read(path)
    names = sorted(d.name for d in tracks.values() if not d.HasField("counter"))
    assert "queue 0 compute 0" in names and "queue 1 blit" in names
    enc = next(u for u, d in tracks.items() if d.name == "queue 0 encoders")
    assert [s[0] for s in walk(events[enc])] == ["encoder compute", "barrier", "encoder blit"] * 3


def test_chrome_json(traces, tmp_path):
    src = Trace.load(traces["generic"])
    path = tmp_path / "g.json"
    stats = export_chrome(src, path)
    doc = json.load(open(path))
    evs = doc["traceEvents"]
    ph = Counter(e["ph"] for e in evs)
    assert ph["X"] == stats["slices"] == 33
    assert ph["s"] == ph["f"] == stats["flows"] == 18  # 17 op waits + the host wait
    starts = {e["id"]: e["ts"] for e in evs if e["ph"] == "s"}
    assert all(e["ts"] > starts[e["id"]] for e in evs if e["ph"] == "f")  # (read in time order)
    assert ph["C"] == 4 + 10  # initial value per semaphore + each signal
    threads = {e["tid"]: e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
    assert all(e["tid"] in threads for e in evs if e["ph"] in "Xsf")
    # on each tid, X slices nest or follow (never partially overlap)
    for tid in threads:
        ns = [(round(e["ts"] * 1000), round(e["dur"] * 1000)) for e in evs if e["ph"] == "X" and e["tid"] == tid]
        xs = sorted(((ts, -dur), ts + dur) for ts, dur in ns)
        stack = []
        for (ts, _), end in xs:
            while stack and stack[-1] <= ts:
                stack.pop()
            assert not stack or end <= stack[-1]
            stack.append(end)


def test_export_cli(traces, tmp_path, capsys):
    p, c = tmp_path / "x.pftrace", tmp_path / "x.json"
    assert main(["export", traces["metal"], "--perfetto", str(p), "--chrome", str(c)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"perfetto: {p}") and p.exists() and json.load(open(c))["traceEvents"]
    assert main(["export", traces["metal"]]) == 2
    assert capsys.readouterr().err == "halsim: error: export: give --perfetto F and/or --chrome F\n"
    assert main(["export", str(tmp_path / "none.json"), "--perfetto", str(p)]) == 2
    assert capsys.readouterr().err.strip().endswith("none.json: no such file")
    bad = tmp_path / "bad.json"
    bad.write_text("hello\n")
    assert main(["export", str(bad), "--chrome", str(c)]) == 2
    assert "not a halsim trace" in capsys.readouterr().err
    assert main(["export", traces["metal"], "--perfetto", str(tmp_path / "no" / "dir.pftrace")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert sorted(x.name for x in tmp_path.iterdir()) == ["bad.json", "x.json", "x.pftrace"]  # no temp files left


def test_run_writes_plot_and_perfetto(tmp_path, capsys):
    prog = tmp_path / "prog.py"
    prog.write_text("def main(dev):\n"
                    "    buf = dev.allocator.allocate_buffer(64)\n"
                    "    s = dev.create_semaphore()\n"
                    "    dev.queue_fill([], [(s, 1)], buf, 0, 64, 7, 1)\n"
                    "    s.wait(1)\n")
    png, pf = tmp_path / "t.png", tmp_path / "t.pftrace"
    assert main(["run", str(prog), "--device", "sim", "--plot", str(png), "--perfetto", str(pf)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == [f"perfetto: {pf}  (3 tracks, 3 slices, 1 flows)", f"plot: {png}  (2 rows, bars)"]
    assert out[0] == f"{prog} on sim (sim, clock virtual)"  # the summary, also without --trace
    tracks, events = read(pf)
    assert sorted(d.name for d in tracks.values()) == ["host thread 0", "queue 0", "semaphore s0", "sim (virtual clock)"]
    assert main(["run", str(prog), "--device", "sim", "--plot", str(tmp_path / "t.bmp")]) == 2


def test_perfetto_large_trace_is_written_in_chunks(tmp_path):
    from halsim.trace_tools.synth import synthetic_trace
    path = tmp_path / "big.pftrace"
    stats = export_perfetto(synthetic_trace(1000, 10, 4), path)  # ~23,000 packets: two chunks
    assert stats == {"tracks": 9, "slices": 11001, "counters": 1004, "flows": 1000, "instants": 0}
    tracks, events = read(path)
    packets = [p for ps in events.values() for p in ps]
    assert len(packets) == 2 * 11001 + 1004 == 23006 and len(tracks) == 10  # root + 5 lanes + 4 counters
    assert sum(len(walk(ps)) for ps in events.values()) == 11001


def _handoff_trace():
    """Main puts an item in a Queue; a worker gets it; then main joins the worker (local-task)."""
    import queue
    import threading

    from reference import hal

    with hal.create_device("local-task") as dev:
        dev.create_semaphore()                                     # main: host thread 0
        q = queue.Queue()

        def worker():
            dev.create_semaphore()                                 # host thread 1
            q.get(timeout=10)

        t = threading.Thread(target=worker)
        t.start()
        q.put("work")
        t.join(10)
        return dev.trace


def test_host_hand_offs_are_instants_with_an_arrow_from_put_to_get(tmp_path):
    trace = _handoff_trace()
    path = tmp_path / "h.pftrace"
    export_perfetto(trace, path)
    tracks, events = read(path)
    by_name = {d.name: u for u, d in tracks.items()}
    main_ = [p.track_event for p in events[by_name["host thread 0"]] if p.track_event.type == TE.TYPE_INSTANT]
    work = [p.track_event for p in events[by_name["host thread 1"]] if p.track_event.type == TE.TYPE_INSTANT]
    # Thread.start is a hand-off too: main's start → the worker's first device call
    assert [te.name for te in main_] == ["Thread.start #0", "Queue.put #1", "join host thread 1"]
    assert [te.name for te in work] == ["Thread.start #0", "Queue.get #1"]
    for i in (0, 1):
        assert list(main_[i].flow_ids) == list(work[i].terminating_flow_ids) and len(main_[i].flow_ids) == 1
    assert {a.name: (a.string_value or a.int_value) for a in work[1].debug_annotations} == {
        "thread": 1, "role": "acquire", "sync": 1, "via": "Queue.get"}

    path = tmp_path / "h.json"
    stats = export_chrome(trace, path)
    evs = json.load(open(path))["traceEvents"]
    assert [e["name"] for e in evs if e["ph"] == "i"] == [
        "Thread.start #0", "Queue.put #1", "join host thread 1", "Thread.start #0", "Queue.get #1"]
    assert [(e["ph"], e["name"]) for e in evs if e["ph"] in "sf"] == [("s", "hand-off"), ("f", "hand-off")] * 2
    assert stats["flows"] == 2


def test_the_plot_draws_the_hand_off_arrow(tmp_path):
    from halsim.trace_tools.plot import plot_trace

    info = plot_trace(_handoff_trace(), tmp_path / "h.png")
    assert (info["rows"], info["arrows"]) == (2, 2)  # host threads 0 and 1; start → first call, put → get


def test_a_hand_off_made_inside_a_host_calls_function_has_its_own_row(tmp_path):
    """A host call's function starting the thread that signals for it (it returned DEFERRED): the
    Thread.start is the host call's (no thread), drawn on a "host call functions" row, not "None"."""
    import threading

    from halsim.trace_tools.plot import plot_trace
    from reference import hal

    with hal.create_device("sim") as dev:
        s = dev.create_semaphore()

        def fn(args, ctx):
            sig = list(ctx.signal)
            threading.Thread(target=lambda: [sem.signal(v) for sem, v in sig]).start()
            return hal.StatusCode.DEFERRED
        dev.queue_host_call([], [(s, 1)], fn)
        s.wait(1, 10)
        trace = dev.trace
    (rel,) = [e for e in trace.events("host_sync") if e["role"] == "release"]
    assert (rel["thread"], rel["op"], rel["via"]) == (None, "0:0", "Thread.start")
    export_perfetto(trace, tmp_path / "h.pftrace")
    tracks, events = read(tmp_path / "h.pftrace")
    by_name = {d.name: u for u, d in tracks.items()}
    assert "host thread None" not in by_name
    (te,) = [p.track_event for p in events[by_name["host call functions"]] if p.track_event.type == TE.TYPE_INSTANT]
    assert te.name == "Thread.start #0 (in 0:0)"
    assert plot_trace(trace, tmp_path / "h.png")["arrows"] == 2   # the start, and the signal → the wait


def test_a_started_threads_hand_off_arrow_points_forward_in_time_on_the_sim(tmp_path):
    """On sim the started thread's acquire was traced at t=0, before its parent's release: a new
    thread's clock now starts at its parent's at ``start()`` (plus ``wake_ns``)."""
    import threading

    from reference import hal

    with hal.create_device("sim") as dev:
        dev.create_semaphore()
        t = threading.Thread(target=dev.create_semaphore)
        t.start()
        t.join(10)
    (release, acquire) = dev.trace.events("host_sync")
    assert (release["role"], acquire["role"]) == ("release", "acquire")
    assert acquire["t"] == release["t"] + dev.cost.wake_ns
    path = tmp_path / "t.pftrace"
    export_perfetto(dev.trace, path)
    _tracks, events = read(path)
    assert list(flow_times(events).values()) == [(release["t"], acquire["t"])]
