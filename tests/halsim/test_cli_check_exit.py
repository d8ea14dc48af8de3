"""``halsim check`` on programs that call sys.exit, print to stdout under --json, or whose schedule
step raises a Python exception; the demo's check report is written atomically."""

import json

import pytest

from halsim.cli import main

RACY_EXIT = ("import sys\n"
             "def main(dev):\n"
             "    b = dev.allocator.allocate_buffer(16)\n"
             "    s = dev.create_semaphore()\n"
             "    dev.queue_fill([], [(s, 1)], b, 0, 16, 7, 4)\n"
             "    print('chatty program')\n"
             "    b.map_read()          # read-back before the wait: hazard.raw\n"
             "    s.wait(1)\n"
             "    sys.exit({code})\n")


@pytest.mark.parametrize("code", ["0", "None"])
def test_check_a_racy_program_that_exits_0_reports_its_hazard(tmp_path, capsys, code):
    prog = tmp_path / "racy_exit.py"
    prog.write_text(RACY_EXIT.format(code=code))
    assert main(["check", str(prog)]) == 1
    out = capsys.readouterr().out
    assert "hazard.raw" in out and out.splitlines()[-1] == "1 finding (1 error, 0 warnings)"


def test_check_a_program_that_exits_3_checks_the_trace_so_far_with_a_note(tmp_path, capsys):
    prog = tmp_path / "racy_exit.py"
    prog.write_text(RACY_EXIT.format(code=3))
    assert main(["check", str(prog)]) == 1
    out, err = capsys.readouterr()
    assert "  note: the program called sys.exit(3)" in out.splitlines() and "hazard.raw" in out
    assert err == "halsim: the program called sys.exit(3)\n"


def test_check_json_is_the_whole_stdout_when_the_program_prints(tmp_path, capsys):
    prog = tmp_path / "racy_exit.py"
    prog.write_text(RACY_EXIT.format(code=0))
    assert main(["check", str(prog), "--json"]) == 1
    out, err = capsys.readouterr()
    assert [f["rule"] for f in json.loads(out)["findings"]] == ["hazard.raw"]
    assert err == "chatty program\n"


def test_check_says_when_a_schedule_step_raised_a_python_exception(tmp_path, capsys, sleep_steps_raise):
    path = tmp_path / "s.toml"
    path.write_text('[semaphores]\ns = 0\n[[host]]\ncall = "sleep"\nseconds = 1\n')
    main(["check", str(path)])
    out, err = capsys.readouterr()
    line = "host[0] (sleep) on main thread raised OverflowError: timeout value is too large (the thread stopped)"
    assert f"  note: {line}" in out.splitlines()
    assert err == f"halsim: the schedule's {line}\n"


def test_demo_check_report_is_written_atomically(tmp_path, monkeypatch):
    from halsim.checks import cli as check_cli
    from reference import hal
    from reference.trace import atomic

    written = []
    real = atomic.atomic_write
    monkeypatch.setattr(atomic, "atomic_write", lambda path, *a, **k: (written.append(str(path)), real(path, *a, **k)))
    with hal.create_device("sim") as dev:
        dev.create_semaphore()
    path = tmp_path / "x.check.txt"
    assert check_cli.demo_report(dev.trace, str(path)) == f"no findings: {path}"
    assert written == [str(path)] and path.read_text().endswith("no findings\n")
