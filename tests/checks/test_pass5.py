"""Fifth pass: semaphore signals against the initial value, host use of a transient before its
alloca, and the schedule runner's and loader's messages (``docs/checks.md``,
``docs/schedule-format.md``)."""

import json

import pytest

from halsim.checks.cli import main_check
from halsim.schedule import ScheduleError, load_schedule
from reference import hal
from tests.checks.barrier_programs import findings



@pytest.mark.parametrize("uri", ["local-sync", "local-task", "sim", "sim:metal"])
def test_a_signal_not_above_the_initial_value_is_non_monotonic_on_every_device(uri):
    dev = hal.create_device(uri)
    s, t, u = dev.create_semaphore(5), dev.create_semaphore(), dev.create_semaphore(5)
    if uri == "local-sync":  # the op's signal of s is refused: s and t fail (local-sync: the call raises)
        with pytest.raises(hal.HalError) as e:
            dev.queue_barrier([], [(s, 3), (t, 1)])
        assert e.value.code == hal.StatusCode.INVALID_ARGUMENT
    else:
        dev.queue_barrier([], [(s, 3), (t, 1)])
    with pytest.raises(hal.HalError) as e:
        t.wait(1, 5.0)
    assert e.value.code == hal.StatusCode.INVALID_ARGUMENT
    with pytest.raises(hal.HalError) as e:
        u.signal(4)
    assert e.value.code == hal.StatusCode.INVALID_ARGUMENT
    dev.close()
    assert findings(dev.trace) == [
        ("semaphore.non_monotonic", ["0:0"],
         "barrier 0:0 signals s0=3, not above its initial value 5: timeline values must increase"),
        ("semaphore.non_monotonic", [],
         "host thread 0 signals s2=4, not above its initial value 5: timeline values must increase"),
    ]


def test_a_signal_above_the_initial_value_is_clean():
    with hal.create_device("sim") as dev:
        s = dev.create_semaphore(5)
        dev.queue_barrier([], [(s, 6)])
        s.wait(6, 5.0)
        s.signal(7)
    assert findings(dev.trace) == []


def _host_visible_transient(dev, s):
    return dev.queue_alloca([], [(s, 1)], 64, memory_type=hal.MemoryType.HOST_LOCAL | hal.MemoryType.DEVICE_VISIBLE,
                            usage=hal.BufferUsage.DEFAULT | hal.BufferUsage.MAPPING)


@pytest.mark.parametrize("uri", ["sim", "local-task"])
def test_a_host_write_to_a_transient_before_its_alloca_signals_is_use_before_alloca(uri):
    dev = hal.create_device(uri)
    s, t = dev.create_semaphore(), dev.create_semaphore()
    tmp = _host_visible_transient(dev, s)
    dev.sleep(0.001)
    tmp.map_write(0, b"abcd")     # never waited for s >= 1: the storage may not exist yet
    dev.queue_dealloca([(s, 1)], [(t, 1)], tmp)
    t.wait(1, 5.0)
    dev.close()
    assert findings(dev.trace) == [
        ("lifetime.use_before_alloca", ["0:0"],
         "host thread 0's map_write of transient buffer b0 is not ordered after its alloca 0:0: wait for the "
         "alloca's signal before touching its bytes")]


def test_a_host_write_to_a_transient_after_waiting_for_its_alloca_is_clean():
    with hal.create_device("sim") as dev:
        s, t = dev.create_semaphore(), dev.create_semaphore()
        tmp = _host_visible_transient(dev, s)
        s.wait(1, 5.0)
        tmp.map_write(0, b"abcd")
        s.signal(2)
        dev.queue_dealloca([(s, 2)], [(t, 1)], tmp)
        t.wait(1, 5.0)
    assert findings(dev.trace) == []


def _check(path, capsys, *args):
    code = main_check([str(path), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("schedule, message", [
    ('[semaphores]\ns = 0\n[[host]]\ncall = "signal"\nsemaphore = "s"\nvalue = 5\n'
     '[[host]]\ncall = "signal"\nsemaphore = "s"\nvalue = 3\n',
     "host thread 0 signals s0=3 after host thread 0 signaled s0=5: timeline values must increase"),
    ('[semaphores]\ns = 5\n[[host]]\ncall = "signal"\nsemaphore = "s"\nvalue = 5\n',
     "host thread 0 signals s0=5, not above its initial value 5: timeline values must increase"),
], ids=["below_an_earlier_signal", "not_above_the_initial_value"])
def test_one_rejected_host_signal_in_a_schedule_is_one_finding(tmp_path, capsys, schedule, message):
    path = tmp_path / "s.toml"
    path.write_text(schedule)
    code, out, _err = _check(path, capsys, "--json")
    assert code == 1
    assert [(f["rule"], f["message"]) for f in json.loads(out)["findings"]] == [("semaphore.non_monotonic", message)]


@pytest.mark.parametrize("table, value, status", [
    ("semaphores", 2**31, "INVALID_ARGUMENT"),    # past MAX_SEMAPHORE_VALUE
    ("buffers", 2**62, "RESOURCE_EXHAUSTED"),     # past the allocator's limit
])
def test_a_value_the_device_refuses_names_the_schedules_field(tmp_path, capsys, table, value, status):
    path = tmp_path / "s.toml"
    path.write_text(f'[{table}]\nx = {value}\n[[host]]\ncall = "flush"\n')
    code, out, err = _check(path, capsys)
    # (the HAL's own message follows; it is the reference's, tested there)
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert err.startswith(f"halsim: error: {path}: {table}.x: {status}: "), err


def test_a_fill_step_past_the_buffer_end_is_the_hals_out_of_range(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text('[buffers]\na = 64\n[[host]]\ncall = "fill"\ntarget = { buffer = "a", offset = 100 }\n'
                    '[[host]]\ncall = "copy"\nsource = { buffer = "a", offset = 65 }\ntarget = "a"\n')
    code, out, _err = _check(path, capsys, "--json")
    assert code == 0
    assert json.loads(out)["notes"] == [
        "host[0] (fill) on main thread raised OUT_OF_RANGE: fill_buffer target offset 100 past buffer length 64",
        "host[1] (copy) on main thread raised OUT_OF_RANGE: copy_buffer source offset 65 past buffer length 64"]


def test_a_json_schedule_with_a_duplicate_key_is_an_error(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"semaphores": {"s": 0}, "host": [{"call": "barrier", "signal": {"s": 1}, '
                    '"signal": {"s": 2}}]}')
    with pytest.raises(ScheduleError) as e:
        load_schedule(str(path))
    assert str(e.value) == f"{path}: host[0].signal: duplicate key (the object names it twice)"


def test_a_command_buffer_naming_a_transient_is_a_schedule_error(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text('[command_buffers.cb]\ncommands = [ { cmd = "fill", target = "tmp" } ]\n'
                    '[[host]]\ncall = "alloca"\nname = "tmp"\nsize = 64\n'
                    '[[host]]\ncall = "execute"\ncommand_buffer = "cb"\n')
    code, out, err = _check(path, capsys)
    assert (code, out, err) == (2, "", (
        f"halsim: error: {path}: command_buffers.cb.commands[0].target: 'tmp' is a transient buffer (an alloca "
        "step's): command buffers are recorded before any step runs, so they use buffers declared under "
        "[buffers]\n"))
