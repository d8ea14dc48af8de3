"""Pass 6 of ``halsim sweep`` (and ``fuzz``): a program that leaves a thread running does not hang
``--jobs N``; a program that cannot load is a spec error (exit 2), not a sweep of failed rows; a
program's bytes are compiled as ``halsim run`` does (its PEP 263 coding line honoured); bad spec
files (nested past the recursion limit, a folder, a text column as plot.y) are one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from halsim.campaigns import fuzz
from halsim.campaigns.sweep import read_results
from halsim.cli import main
from reference.trace.atomic import NESTED_TOO_DEEPLY  # (its wording: tests/reference/test_atomic_pass6.py)
from tests.conftest import ROOT


def write(tmp_path, text, name="spec.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# -- bug13: a thread the program leaves running ---------------------------------------------------------

LEAK = ("import threading\n"
        "def main(dev):\n"
        "    threading.Thread(target=threading.Event().wait, name='helper').start()\n"
        "    dev.create_semaphore().signal(1)\n")


def test_jobs_2_ends_although_the_program_leaves_a_thread_waiting(tmp_path):
    (tmp_path / "leak.py").write_text(LEAK)
    spec = write(tmp_path, '[program]\npython = "leak.py"\n[grid]\nseed = [0, 1]\n')
    out = str(tmp_path / "r.csv")
    cmd = [sys.executable, "-m", "halsim.cli", "sweep", spec, "-o", out, "-q", "--no-plot", "--jobs", "2"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # (hung: stop it and its workers, its process group)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert proc.returncode == 0
    # (one worker or both may have run the two points: the pool starts workers as tasks wait)
    assert stderr in ("halsim: 1 worker process still running a program thread after the last task; stopped it\n",
                      "halsim: 2 worker processes still running a program thread after the last task; stopped them\n")
    assert stdout.startswith("sweep: 2 points: 2 run, 0 already in")
    _h, rows = read_results(out)
    assert sorted((r["seed"], r["error"]) for r in rows) == [("0", ""), ("1", "")]


# -- bug12: a program that cannot load ------------------------------------------------------------------

@pytest.mark.parametrize("program, problem", [
    ("syntax.py", "'{d}/syntax.py' failed to load: SyntaxError: '(' was never closed (syntax.py, line 1)"),
    ("prog.py:nope", "'{d}/prog.py' has no function 'nope'"),
    ("prog.py:two", "'{d}/prog.py': two(a, b) must take one argument, the device (e.g. def two(dev): ...)"),
    ("raises.py", "'{d}/raises.py' failed to load: ZeroDivisionError: division by zero"),
    ("exits.py", "'{d}/exits.py' failed to load: it called sys.exit(3) on import"),
])
def test_a_program_that_cannot_load_is_a_spec_error(tmp_path, capsys, program, problem):
    (tmp_path / "syntax.py").write_text("def main(dev:\n")
    (tmp_path / "prog.py").write_text("def main(dev):\n    pass\ndef two(a, b):\n    pass\n")
    (tmp_path / "raises.py").write_text("x = 1 / 0\ndef main(dev):\n    pass\n")
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(3)\n")
    spec = write(tmp_path, f'[program]\npython = "{program}"\n[grid]\nseed = [0, 1, 2]\n')
    out = tmp_path / "r.csv"
    assert main(["sweep", spec, "-o", str(out), "-q", "--no-plot"]) == 2
    assert capsys.readouterr().err == f"halsim: error: {spec}: program.python: {problem.format(d=tmp_path)}\n"
    assert not out.exists()


# -- bug11: the program's bytes ------------------------------------------------------------------------

def test_a_latin1_program_with_its_coding_line_sweeps(tmp_path, capsys):
    (tmp_path / "latin.py").write_bytes(
        "# -*- coding: latin-1 -*-\nNAME = 'caf\u00e9'\ndef main(dev):\n"
        "    assert NAME == 'caf\\xe9'\n    dev.create_semaphore()\n".encode("latin-1"))
    spec = write(tmp_path, '[program]\npython = "latin.py"\n[grid]\nseed = [0, 1]\n')
    out = str(tmp_path / "r.csv")
    assert main(["sweep", spec, "-o", out, "-q", "--no-plot", "--jobs", "1"]) == 0
    _h, rows = read_results(out)
    assert [(r["seed"], r["error"]) for r in rows] == [("0", ""), ("1", "")]


def test_a_program_that_is_not_text_in_its_encoding_is_a_spec_error(tmp_path, capsys):
    (tmp_path / "junk.py").write_bytes(b"\xff\xfe\xf5 not python \x80\n")
    spec = write(tmp_path, '[program]\npython = "junk.py"\n[grid]\nseed = [0]\n')
    assert main(["sweep", spec, "-o", str(tmp_path / "r.csv"), "-q", "--no-plot"]) == 2
    assert capsys.readouterr().err == (
        f"halsim: error: {spec}: program.python: '{tmp_path}/junk.py' failed to load: SyntaxError: (unicode error) "
        f"'utf-8' codec can't decode byte 0xff in position 0: invalid start byte (junk.py, line 1)\n")


# -- bug03, bug10 and [plot]: the spec file -------------------------------------------------------------

def test_a_deeply_nested_spec_is_one_line(tmp_path, capsys):
    spec = write(tmp_path, "metrics = " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert main(["sweep", spec, "-o", str(tmp_path / "r.csv")]) == 2
    assert capsys.readouterr().err == f"halsim: error: {spec}: not valid TOML: {NESTED_TOO_DEEPLY}\n"


def test_a_spec_or_program_that_is_a_folder_is_named_so(tmp_path, capsys):
    (tmp_path / "d.toml").mkdir()
    assert main(["sweep", str(tmp_path / "d.toml"), "-o", str(tmp_path / "r.csv")]) == 2
    (tmp_path / "p.py").mkdir()
    spec = write(tmp_path, '[program]\npython = "p.py"\n')
    assert main(["sweep", spec, "-o", str(tmp_path / "r.csv")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"halsim: error: {tmp_path}/d.toml: is a directory",
        f"halsim: error: {spec}: program.python: {tmp_path}/p.py: is a directory"]


@pytest.mark.parametrize("column", ["rules", "utilization"])
def test_plot_y_must_be_a_numeric_column(tmp_path, capsys, column):
    spec = write(tmp_path, f'metrics = ["makespan", "utilization", "findings"]\n'
                           f'[program]\ngenerator = {{ size = 2 }}\n[plot]\ny = "{column}"\n')
    assert main(["sweep", spec, "-o", str(tmp_path / "r.csv")]) == 2
    assert capsys.readouterr().err == (
        f"halsim: error: {spec}: plot.y: {column!r} is not a numeric column (numeric columns: makespan_ns, ops, "
        f"commands, failed_ops, utilization_mean, utilization_max, findings, findings_deadlock, findings_hazard, "
        f"findings_lifetime, findings_semaphore, findings_limit)\n")


# -- fuzz: help and progress ---------------------------------------------------------------------------

def test_fuzz_help_gives_every_default(capsys):
    with pytest.raises(SystemExit):
        main(["fuzz", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "failed by the host (default: 0.0)" in text
    assert "the device's fault_rate option (default: 0.0)" in text


def test_fuzz_progress_counts_programs(tmp_path):
    import io
    stream = io.StringIO()
    fuzz.run_fuzz(2, 0, {"size": 3}, None, progress=True, stream=stream)
    assert [line.split(" (")[0] for line in stream.getvalue().splitlines()] == ["fuzz: 1/2 programs",
                                                                                "fuzz: 2/2 programs"]


def test_a_swept_cost_field_over_a_cost_model_file_keeps_the_personalitys_defaults(tmp_path):
    """docs/cost-model.md: fields a file leaves out keep the personality's defaults — also when a sweep
    puts a cost.FIELD over the file (it loaded the file over the generic defaults: sim:opencl got
    sim:cuda's event_create_ns 5000)."""
    from halsim.campaigns.sweep import parse_spec, point_device
    from reference import hal

    path = tmp_path / "model.json"
    path.write_text('{"launch_ns": 2000}')
    spec = parse_spec({"program": {"generator": {"size": 4}},
                       "device": {"uri": "sim:opencl", "options": {"cost_model": str(path)}},
                       "grid": {"cost.commit_ns": [3000]}})
    uri, options = point_device(spec.payload, spec.points[0], None)
    dev = hal.create_device(uri, **options)
    try:
        cost = dev.cost
        assert (cost.launch_ns, cost.commit_ns, cost.event_create_ns, cost.event_destroy_ns) == (2000, 3000, 1000, 500)
    finally:
        dev.close()
