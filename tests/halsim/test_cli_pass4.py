"""Adversarial pass 4 of ``halsim``'s own commands: a program path may contain ``:`` (split at the
last colon before a function name), and Ctrl-C prints one line and exits 130, never a traceback."""

import sys

import pytest

from halsim.cli import main
from tests.conftest import interrupt as _interrupt



@pytest.mark.parametrize("spec, expected", [
    ("prog.py", ("prog.py", None)),
    ("prog.py:main", ("prog.py", "main")),
    ("prog.py:", ("prog.py", None)),
    ("run:1/prog.py:step", ("run:1/prog.py", "step")),
    ("run:1/prog.py", ("run:1/prog.py", None)),
    ("/a:b/c:d/prog.py:_f2", ("/a:b/c:d/prog.py", "_f2")),
    ("a:b.py", ("a:b.py", None)),             # what follows the colon is no identifier: all of it is the path
    ("prog.py:1x", ("prog.py:1x", None)),
    ("nofile:main", ("nofile:main", None)),   # not .py and no such file: all of it
    ("sched.toml", ("sched.toml", None)),
])
def test_split_program(spec, expected):
    from halsim.cli import split_program
    assert split_program(spec) == expected


def test_split_program_takes_an_existing_file_without_py(tmp_path):
    from halsim.cli import split_program
    (tmp_path / "prog").write_text("")
    assert split_program("prog:main", str(tmp_path)) == ("prog", "main")
    assert split_program("prog:main") == ("prog:main", None)  # (not in the working folder)


@pytest.fixture
def colon_dir(tmp_path):
    d = tmp_path / "run:1"
    d.mkdir()
    (d / "prog.py").write_text("def main(dev):\n    dev.create_semaphore().signal(1)\n\n"
                               "def other(dev):\n    raise ValueError('from other')\n")
    return d


@pytest.mark.parametrize("suffix", ["", ":main"])
def test_run_a_program_in_a_folder_with_a_colon(colon_dir, capsys, suffix):
    prog = str(colon_dir / "prog.py") + suffix
    assert main(["run", prog, "--device", "sim", "--trace", str(colon_dir / "t.json")]) == 0
    out, err = capsys.readouterr()
    assert err == "" and f"trace: {colon_dir / 't.json'}" in out


def test_run_names_the_function_after_the_last_colon(colon_dir, capsys):
    prog = str(colon_dir / "prog.py")
    assert main(["run", prog + ":other", "--device", "sim"]) == 1
    err = capsys.readouterr().err
    assert err.endswith(f"halsim: {prog}:other on sim raised ValueError: from other\n")
    assert f'File "{prog}", line 5, in other' in err  # the traceback starts at the program's own frame
    assert main(["run", prog + ":nope", "--device", "sim"]) == 2
    assert capsys.readouterr().err == f"halsim: error: program {prog!r} has no function 'nope'\n"


def test_run_refuses_a_trace_over_the_program_in_a_folder_with_a_colon(colon_dir, capsys):
    prog = str(colon_dir / "prog.py")
    assert main(["run", prog + ":main", "--device", "sim", "--trace", prog]) == 2
    assert capsys.readouterr().err == f"halsim: error: --trace {prog!r} is the input file {prog!r}: refusing to overwrite it\n"


def test_check_a_program_in_a_folder_with_a_colon(colon_dir, capsys):
    prog = str(colon_dir / "prog.py") + ":main"
    assert main(["check", prog]) == 0
    assert capsys.readouterr().out.startswith(f"halsim check: {prog} on sim ")


def test_difftest_a_program_in_a_folder_with_a_colon(colon_dir, capsys):
    prog = str(colon_dir / "prog.py") + ":main"
    assert main(["difftest", prog, "--real", "local-sync", "--sim", "sim:sync", "--reference", "local-sync",
                 "--json"]) == 0
    assert '"ok": true' in capsys.readouterr().out


@pytest.mark.parametrize("extra", [[], ["--timeout", "100"]])
def test_ctrl_c_in_run_is_one_line(tmp_path, extra):
    started = tmp_path / "started"
    (tmp_path / "p.py").write_text(f"import time\ndef main(dev):\n    open({str(started)!r}, 'w').close()\n"
                                   f"    time.sleep(60)\n")
    cmd = [sys.executable, "-m", "halsim.cli", "run", str(tmp_path / "p.py"), "--device", "sim",
           "--trace", str(tmp_path / "t.json")] + extra
    assert _interrupt(cmd, started.exists) == (130, "halsim: interrupted\n")
