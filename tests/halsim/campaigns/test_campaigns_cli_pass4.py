"""Adversarial pass 4 of ``halsim sweep`` and ``halsim fuzz``: a deadlocking program's rows have
their metrics, a results file that is not CSV text, wrongly typed spec values and generator knob
values are one line and exit 2 (the knobs checked by the one function ``fuzz`` uses too), and
Ctrl-C prints one line saying what was kept, exit 130, with no traceback from any process."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from halsim.campaigns import fuzz, generate, sweep_spec
from halsim.campaigns.sweep import read_results
from halsim.cli import main
from tests.conftest import ROOT
from tests.conftest import interrupt as _interrupt

CORPUS = os.path.join(ROOT, "tests", "checks", "corpus")


def write(tmp_path, text, name="spec.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# -- bug01: a deadlocking program's rows ---------------------------------------------------------------

def test_a_deadlocking_schedule_sweeps_to_rows_with_metrics(tmp_path, capsys):
    with open(os.path.join(CORPUS, "deadlock_semaphore_cycle.toml")) as f:
        (tmp_path / "dl.toml").write_text(f.read())
    spec = write(tmp_path, 'metrics = ["makespan", "errors"]\n[program]\nschedule = "dl.toml"\n[grid]\nseed = [0, 1]\n')
    out = str(tmp_path / "r.csv")
    assert main(["sweep", spec, "--out", out, "-q", "--no-plot"]) == 0
    assert "2 points: 2 run, 0 already in" in capsys.readouterr().out
    _header, rows = read_results(out)
    assert [{k: r[k] for k in ("key", "makespan_ns", "ops", "failed_ops", "errors", "deadlocked", "error")}
            for r in sorted(rows, key=lambda r: r["key"])] == [
        {"key": '{"seed":0}', "makespan_ns": "1100", "ops": "2", "failed_ops": "2", "errors": "1", "deadlocked": "1",
         "error": ""},
        {"key": '{"seed":1}', "makespan_ns": "1100", "ops": "2", "failed_ops": "2", "errors": "1", "deadlocked": "1",
         "error": ""}]


# -- bug03: --resume on a file that is not CSV text ------------------------------------------------------

@pytest.mark.parametrize("content, problem", [
    (b"\xff\xfe\x00binary", "r.csv: not a results file (not UTF-8 text)"),
    (b'key,"abc\n', "--resume: r.csv has other columns than this spec (key, 'abc\\n', \u2026): not the same sweep"),
    (b"key,a\x00b\n1,2\n", "--resume: r.csv has other columns than this spec (key, 'a\\x00b', \u2026): not the same sweep"),
])
def test_resume_on_a_file_that_is_not_results_is_one_line(tmp_path, capsys, monkeypatch, content, problem):
    monkeypatch.chdir(tmp_path)
    with open(os.path.join(CORPUS, "clean_timeline_chain.toml")) as f:
        (tmp_path / "p.toml").write_text(f.read())
    write(tmp_path, '[program]\nschedule = "p.toml"\n[grid]\nseed = [0, 1]\n')
    (tmp_path / "r.csv").write_bytes(content)
    assert main(["sweep", "spec.toml", "--out", "r.csv", "--resume", "-q", "--no-plot"]) == 2
    assert capsys.readouterr().err == f"halsim: error: {problem}\n"
    assert (tmp_path / "r.csv").read_bytes() == content  # left as it was


# -- bug04: wrongly typed spec values -----------------------------------------------------------------------

@pytest.mark.parametrize("text, problem", [
    ('metrics = [["makespan"]]\n[program]\ngenerator = {}\n',
     "metrics: expected metric names (strings), got ['makespan']"),
    ('metrics = ["makespan", 3]\n[program]\ngenerator = {}\n', "metrics: expected metric names (strings), got 3"),
    ('[program]\ngenerator = {}\n[sample]\nn = 2\nseed = [1]\nparams = { seed = [0, 1] }\n',
     "sample.seed: expected an integer, got [1]"),
    ('[program]\ngenerator = {}\n[sample]\nn = 2\nseed = 1.5\nparams = { seed = [0, 1] }\n',
     "sample.seed: expected an integer, got 1.5"),
])
def test_wrongly_typed_spec_values_are_one_line(tmp_path, capsys, text, problem):
    spec = write(tmp_path, text)
    assert main(["sweep", spec, "--out", str(tmp_path / "r.csv"), "-q", "--no-plot"]) == 2
    assert capsys.readouterr().err == f"halsim: error: {spec}: {problem}\n"
    assert not (tmp_path / "r.csv").exists()


# -- bug05: generator knob values -------------------------------------------------------------------------------

@pytest.mark.parametrize("program, grid, problem", [
    ("size = 0", "seed = [0, 1]", "program.generator.size: must be >= 1, got 0"),
    ('size = "x"', "seed = [0, 1]", "program.generator.size: must be an integer in [1, 1000000], got 'x'"),
    ("size = 18446744073709551616", "seed = [0]", "program.generator.size: must be <= 1000000, got 18446744073709551616"),
    ("size = 9223372036854775807", "seed = [0]", "program.generator.size: must be <= 1000000, got 9223372036854775807"),
    ("drop_sync = 2.0", "seed = [0, 1]", "program.generator.drop_sync: must be in [0, 1], got 2.0"),
    ("drop_sync = nan", "seed = [0, 1]", "program.generator.drop_sync: must be in [0, 1], got nan"),
    ("fail_prob = true", "seed = [0]", "program.generator.fail_prob: must be a number in [0, 1], got True"),
    ("queues = 1.5", "seed = [0, 1]", "program.generator.queues: must be an integer >= 1, got 1.5"),
    ("gates = 100000", "seed = [0]", "program.generator.gates: must be <= 1000, got 100000"),
    ("timelines = 0", "seed = [0]", "program.generator.timelines: must be >= 1, got 0"),
    ("wait_before_signal = 1", "seed = [0]", "program.generator.wait_before_signal: must be true or false, got 1"),
    ("", '"gen.queues" = [1.5]', "grid.gen.queues: must be an integer >= 1, got 1.5"),
    ("", '"gen.size" = [4, -4]', "grid.gen.size: must be >= 1, got -4"),
    ("", 'seed = ["a"]', "grid.seed: must be an integer, got 'a'"),
])
def test_generator_knob_values_are_checked_with_the_spec(tmp_path, capsys, program, grid, problem):
    spec = write(tmp_path, f"[program]\ngenerator = {{ {program} }}\n[grid]\n{grid}\n")
    assert main(["sweep", spec, "--out", str(tmp_path / "r.csv"), "-q", "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert err == f"halsim: error: {spec}: {problem}\n"
    assert not (tmp_path / "r.csv").exists()


def test_sampled_knob_ranges_are_checked_at_both_ends(tmp_path, capsys):
    spec = write(tmp_path, '[program]\ngenerator = {}\n[sample]\nn = 3\n'
                           'params = { "gen.size" = { min = 2, max = 3 }, "gen.drop_sync" = { min = 0.5, max = 1.5 } }\n')
    assert main(["sweep", spec, "--out", str(tmp_path / "r.csv"), "-q", "--no-plot"]) == 2
    assert capsys.readouterr().err == f"halsim: error: {spec}: sample.params.gen.drop_sync: must be in [0, 1], got 1.5\n"


def test_generator_queues_outside_the_devices_range_is_a_spec_error(tmp_path, capsys):
    spec = write(tmp_path, "[program]\ngenerator = { queues = 100 }\n[grid]\nseed = [0, 1]\n")
    assert main(["sweep", spec, "--out", str(tmp_path / "r.csv"), "-q", "--no-plot"]) == 2
    assert capsys.readouterr().err == (f"halsim: error: {spec}: point {{\"seed\":0}}: INVALID_ARGUMENT: option "
                                       f"queues=100 must be an int in [1, 64]\n")


def test_fuzz_and_sweep_share_one_knob_check(monkeypatch, capsys, tmp_path):
    """Both call generate.knob_problem (not copies of it): one patched rule shows in both."""
    from halsim.campaigns.generate import knob_problem
    assert fuzz.knob_problem is knob_problem and sweep_spec.knob_problem is knob_problem
    assert sweep_spec.GEN_KNOBS == generate.KNOBS
    assert main(["fuzz", "--programs", "1", "--size", "0"]) == 2
    assert main(["fuzz", "--programs", "1", "--fail-prob", "-0.5"]) == 2
    assert main(["fuzz", "--programs", "1", "--size", str(2 ** 64)]) == 2
    assert capsys.readouterr().err.splitlines() == ["halsim: error: --size 0: must be >= 1",
                                                    "halsim: error: --fail-prob -0.5: must be in [0, 1]",
                                                    f"halsim: error: --size {2 ** 64}: must be <= 1000000"]
    monkeypatch.setattr(generate, "MAX_SIZE", 5)
    spec = write(tmp_path, "[program]\ngenerator = { size = 6 }\n")
    assert main(["sweep", spec, "--out", str(tmp_path / "r.csv"), "-q", "--no-plot"]) == 2
    assert main(["fuzz", "--programs", "1", "--size", "6"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"halsim: error: {spec}: program.generator.size: must be <= 5, got 6",
                                                    "halsim: error: --size 6: must be <= 5"]
    # every knob at a valid value (timelines, gates and wait_before_signal included) still sweeps
    spec = write(tmp_path, "[program]\ngenerator = { size = 3, drop_sync = 0.0, queues = 3, gates = 0, "
                           "timelines = 2, wait_before_signal = false, fail_prob = 0 }\n[grid]\n\"gen.seed\" = [4]\n")
    assert main(["sweep", spec, "--out", str(tmp_path / "r.csv"), "-q", "--no-plot"]) == 0
    _h, rows = read_results(str(tmp_path / "r.csv"))
    assert [(r["key"], r["error"]) for r in rows] == [('{"gen.seed":4}', "")]


# -- bug11: a Python program in a folder with a colon -------------------------------------------------------------

def test_a_python_program_under_a_folder_with_a_colon(tmp_path, capsys):
    (tmp_path / "run:1").mkdir()
    (tmp_path / "run:1" / "prog.py").write_text("def step(dev):\n    dev.create_semaphore()\n")
    spec = write(tmp_path, '[program]\npython = "run:1/prog.py:step"\n[grid]\nseed = [0]\n')
    assert main(["sweep", spec, "--out", str(tmp_path / "r.csv"), "-q", "--no-plot"]) == 0
    _h, rows = read_results(str(tmp_path / "r.csv"))
    assert [(r["key"], r["error"], r["errors"]) for r in rows] == [('{"seed":0}', "", "0")]


# -- bug08: Ctrl-C ---------------------------------------------------------------------------------------------------

SLOW = "import time\ndef main(dev):\n    time.sleep(0.05)\n    s = dev.create_semaphore()\n" \
       "    dev.queue_barrier([], [(s, 1)])\n    s.wait(1)\n"


def _rows(path):
    try:
        with open(path) as f:
            return f.read().count("\n") - 1
    except FileNotFoundError:
        return -1


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_in_a_sweep_is_one_line_and_resume_finishes_it(tmp_path, jobs):
    (tmp_path / "slow.py").write_text(SLOW)
    spec = write(tmp_path, '[program]\npython = "slow.py:main"\n[grid]\nseed = [%s]\n' % ", ".join(map(str, range(120))))
    out = str(tmp_path / "r.csv")
    cmd = [sys.executable, "-m", "halsim.cli", "sweep", spec, "--out", out, "--no-plot", "-q", "--jobs", jobs]
    code, err = _interrupt(cmd, lambda: _rows(out) >= 4)
    kept = _rows(out)
    assert (code, err) == (130, f"halsim: interrupted: {kept} of 120 points are in {out}; --resume continues "
                                f"the sweep\n")
    assert 4 <= kept < 120
    done = subprocess.run(cmd + ["--resume"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"120 points: {120 - kept} run, {kept} already in" in done.stdout
    _h, rows = read_results(out)
    assert sorted(int(r["seed"]) for r in rows) == list(range(120)) and all(r["error"] == "" for r in rows)


def test_ctrl_c_before_the_first_point_leaves_no_results_file(tmp_path):
    (tmp_path / "slow.py").write_text("import time\ndef main(dev):\n    open(__file__ + '.ran', 'w').close()\n"
                                      "    time.sleep(60)\n")
    spec = write(tmp_path, '[program]\npython = "slow.py:main"\n[grid]\nseed = [0, 1, 2]\n')
    out = str(tmp_path / "r.csv")
    cmd = [sys.executable, "-m", "halsim.cli", "sweep", spec, "--out", out, "--no-plot", "-q", "--jobs", "2"]
    code, err = _interrupt(cmd, lambda: os.path.exists(str(tmp_path / "slow.py.ran")))
    assert (code, err) == (130, f"halsim: interrupted before the first point finished: nothing written to {out}\n")
    assert not os.path.exists(out)  # (and the workers, each in a 60 s sleep, did not hold it up)


def _finding_files(folder):
    return [f for f in os.listdir(folder) if f.startswith("fuzz_") and f.endswith(".toml")]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_in_fuzz_is_one_line(tmp_path, jobs):
    out = tmp_path / "F"
    cmd = [sys.executable, "-m", "halsim.cli", "fuzz", "--programs", "100000", "--size", "30", "--drop-sync", "0.5",
           "--out", str(out), "--jobs", jobs, "-q"]
    code, err = _interrupt(cmd, lambda: out.is_dir() and len(_finding_files(out)) >= 3)
    files = sorted(os.listdir(out))
    m = re.fullmatch(r"halsim: interrupted: (\d+) of 100000 programs checked, (\d+) with findings; their (\d+) "
                     r"finding files are in (.*)\n", err)
    assert code == 130 and m, err
    checked, with_findings, n_files, where = m.groups()
    assert where == str(out) and int(n_files) == len(files) >= 3
    assert int(checked) >= int(with_findings) >= len(files)
    assert all(f.startswith("fuzz_") and f.endswith(".toml") for f in files)  # (no temporary file left)


@pytest.fixture
def python_sigint():
    """SIGINT at Python's own handler for the test (as in a terminal; a background job's is ignored)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def test_in_process_tasks_take_ctrl_c_after_the_task_in_progress(python_sigint):
    """``--jobs 1``: a Ctrl-C during a task (a KeyboardInterrupt inside the simulator can leave a
    lock of the trace taken, and the next run waits on it forever) ends the campaign after that task,
    whose result is kept; a second Ctrl-C during the task is raised at once."""
    from halsim.campaigns.executor import run_unordered

    got = []
    with pytest.raises(KeyboardInterrupt):
        for item, result in run_unordered(_interrupting_task, 1, [0, 1, 2]):
            got.append((item, result))
    assert got == [(0, 1), (1, 2)]  # task 1 was interrupted once: it finished, and nothing ran after it
    got = []
    with pytest.raises(KeyboardInterrupt):
        for item, result in run_unordered(_interrupting_task, 2, [0, 1, 2]):
            got.append((item, result))
    assert got == [(0, 1)]  # task 1 was interrupted twice: it stopped at the second


def _interrupting_task(times, item):
    """Item 1 sends itself SIGINT ``times`` times (and waits for each to be delivered), then returns."""
    if item == 1:
        for _ in range(times):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
    return item + 1


def test_held_interrupts_raise_after_the_block(python_sigint):
    from halsim.campaigns.executor import HeldInterrupts
    done = []
    with pytest.raises(KeyboardInterrupt):
        with HeldInterrupts(raise_at_exit=True) as held:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            done.append(held.interrupted)
    assert done == [True] and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with HeldInterrupts(raise_at_exit=True) as held:
        pass
    assert held.interrupted is False
