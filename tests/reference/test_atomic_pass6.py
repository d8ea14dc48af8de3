"""Files that are not regular files: an output that is a FIFO or a device is written in place (never
replaced by a plain file), an input that is a folder or a pipe is named as such, and a JSON value
nested past the recursion limit is a bad trace, not a RecursionError. No test writes to /dev/null:
the FIFOs are private, under tmp_path, and every reader or writer thread is bounded."""

from __future__ import annotations

import os
import stat
import threading
import time

import pytest

from reference.trace import Trace, TraceFormatError
from reference.trace.atomic import NESTED_TOO_DEEPLY, atomic_write, output_problem, same_file_problem

DEEP = "[" * 100_000 + "]" * 100_000


def drain(fifo: str, got: list, seconds: float = 10.0) -> threading.Thread:
    """A thread reading ``fifo`` (opened non-blocking: it never waits for a writer that does not
    come) into ``got`` until a writer has written and closed it, or ``seconds`` pass."""
    def read():
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:  # a writer, no data yet
                    chunk = None
                if chunk:
                    got.append(chunk)
                elif chunk == b"" and got:  # the writer closed it
                    return
                time.sleep(0.01)
        finally:
            os.close(fd)
    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


def test_atomic_write_to_a_fifo_writes_through_it(tmp_path):
    fifo = str(tmp_path / "out.pipe")
    os.mkfifo(fifo)
    got: list = []
    reader = drain(fifo, got)
    atomic_write(fifo, lambda f: f.write("hello\n"), mode="w")
    reader.join(10)
    assert not reader.is_alive()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the FIFO: not renamed over
    assert b"".join(got) == b"hello\n"
    assert sorted(os.listdir(tmp_path)) == ["out.pipe"]  # no temporary file left behind


def test_output_problem_of_a_fifo_is_none_and_a_device_takes_several_outputs(tmp_path):
    fifo = str(tmp_path / "out.pipe")
    os.mkfifo(fifo)
    assert output_problem(fifo, "--chrome") is None
    # (only stat'ed: nothing here opens /dev/null)
    assert same_file_problem({"--chrome": "/dev/null", "--perfetto": "/dev/null"}, []) is None
    assert same_file_problem({"--chrome": fifo, "--perfetto": fifo}, []) == \
        f"--perfetto {fifo!r} is also --chrome: give each output its own file"


def test_input_problem_names_what_the_path_is(tmp_path):
    from reference.trace.atomic import input_problem
    fifo = str(tmp_path / "in.pipe")
    os.mkfifo(fifo)
    (tmp_path / "t.json").write_text("x")
    assert input_problem(str(tmp_path / "nope.json")) == f"{tmp_path / 'nope.json'}: no such file"
    assert input_problem(str(tmp_path)) == f"{tmp_path}: is a directory"
    assert input_problem(fifo) == f"{fifo}: not a regular file (a pipe): save it to a file first"
    assert input_problem(fifo, regular=False) is None
    assert input_problem(str(tmp_path / "t.json")) is None


def _load_bounded(path: str):
    """``Trace.load(path)`` in a thread (opening a FIFO without a writer would block for ever):
    what it returned or raised, or 'hung' after 10 s."""
    out: list = []

    def load():
        try:
            out.append(Trace.load(path))
        except Exception as e:  # noqa: BLE001 - handed to the test
            out.append(e)
    t = threading.Thread(target=load, daemon=True)
    t.start()
    t.join(10)
    return out[0] if out else "hung"


def test_a_trace_on_a_fifo_or_a_folder_is_refused_by_name(tmp_path):
    fifo = str(tmp_path / "t.json")
    os.mkfifo(fifo)
    got = _load_bounded(fifo)
    assert isinstance(got, TraceFormatError)
    assert str(got) == f"{fifo}: not a regular file (a pipe): save it to a file first"
    got = _load_bounded(str(tmp_path))
    assert isinstance(got, TraceFormatError) and str(got) == f"{tmp_path}: is a directory"


@pytest.fixture
def trace_file(tmp_path):
    from reference import hal
    with hal.create_device("local-sync") as dev:
        dev.create_semaphore().signal(1)
    path = tmp_path / "t.json"
    dev.trace.save(path)
    return path


def test_a_deeply_nested_event_is_a_bad_event(trace_file):
    lines = trace_file.read_text().split("\n")
    trace_file.write_text("\n".join(lines[:2] + ['{"ev":"x","v":%s},' % DEEP] + lines[2:]))
    with pytest.raises(TraceFormatError) as e:
        Trace.load(trace_file)
    assert str(e.value) == f"{trace_file}:3: bad event: {NESTED_TOO_DEEPLY}"


def test_a_deeply_nested_header_is_a_bad_header(trace_file):
    lines = trace_file.read_text().split("\n")
    lines[0] = lines[0].replace('"header":{', '"header":{"x":%s,' % DEEP, 1)
    trace_file.write_text("\n".join(lines))
    with pytest.raises(TraceFormatError) as e:
        Trace.load(trace_file)
    assert str(e.value) == f"{trace_file}:1: bad header: {NESTED_TOO_DEEPLY}"
    # (the one place the wording is pinned; the other tests import it)
    assert NESTED_TOO_DEEPLY == "nested too deeply (thousands of levels of lists or objects)"
