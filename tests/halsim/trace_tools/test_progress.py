"""Progress of the trace tools and ``halsim check`` on a trace: phases on stderr when it is a terminal
(``executor.Progress``), nothing off a terminal or with ``-q``, never anything on stdout."""

import io
import json
import sys
import types

import pytest

from halsim.campaigns import executor
from halsim.campaigns.executor import Progress
from halsim.cli import main
from halsim.trace_tools import cli as trace_cli
from halsim.trace_tools import model
from halsim.trace_tools.synth import synthetic_trace


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


class Clock:
    def __init__(self, t=100.0):
        self.t = t

    def monotonic(self):
        return self.t


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """``t.json`` (27 events: 4 ops of 2 commands on 2 queues) in the working directory; progress
    every 10 events, redrawn at every update, on a clock that stands still (rates: 0)."""
    monkeypatch.chdir(tmp_path)
    synthetic_trace(ops=4, commands_per_op=2, queues=2).save("t.json")
    monkeypatch.setattr(model, "TICK", 10)
    monkeypatch.setattr(trace_cli, "PROGRESS_INTERVAL", 0)
    monkeypatch.setattr(executor, "time", types.SimpleNamespace(monotonic=Clock().monotonic))
    return "t.json"


def run(argv, monkeypatch, tty=True):
    """(exit status, stdout, stderr) of ``halsim ARGV`` with stderr a terminal or not."""
    out, err = io.StringIO(), (FakeTTY() if tty else io.StringIO())
    with monkeypatch.context() as m:
        m.setattr(sys, "stdout", out)
        m.setattr(sys, "stderr", err)
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


BAR0 = "|                         |"
READ_INDEX = (
    "\rreading t.json: 0 events"
    "\rreading t.json: 10 events"
    "\rreading t.json: 20 events"
    "\rindexing t.json:   0%|                         | 0/27 [0s<0s, 0 events/s]"
    "\rindexing t.json:  37%|█████████                | 10/27 [0s<0s, 0 events/s]"
    "\rindexing t.json:  74%|██████████████████       | 20/27 [0s<0s, 0 events/s]"
    "\rindexing t.json: 100%|█████████████████████████| 27/27 [0s<0s, 0 events/s]")
INDEX_WIDTH = len("indexing t.json: 100%|█████████████████████████| 27/27 [0s<0s, 0 events/s]")


def test_stats_on_a_terminal_shows_each_phase_and_erases_it(tiny, monkeypatch):
    code, out, err = run(["stats", tiny, "--json"], monkeypatch)
    assert code == 0
    assert err == (READ_INDEX + "\rcomputing stats" + " " * (INDEX_WIDTH - len("computing stats"))
                   + "\r" + " " * len("computing stats") + "\r")
    # stdout: the JSON document alone, the same as off a terminal
    assert json.loads(out)["ops"] == 4
    assert "\r" not in out
    assert run(["stats", tiny, "--json"], monkeypatch, tty=False)[1] == out


def test_check_on_a_terminal(tiny, monkeypatch):
    code, out, err = run(["check", tiny, "--json", "--rules", "lifetime"], monkeypatch)
    assert code == 0
    rules = "checking t.json: running the rules"
    checking_width = len("checking t.json: 100%|█████████████████████████| 27/27 [0s<0s, 0 events/s]")
    assert err == ("\rreading t.json: 0 events"
                   "\rreading t.json: 10 events"
                   "\rreading t.json: 20 events"
                   "\rchecking t.json:   0%|                         | 0/27 [0s<0s, 0 events/s]"
                   "\rchecking t.json:  37%|█████████                | 10/27 [0s<0s, 0 events/s]"
                   "\rchecking t.json:  74%|██████████████████       | 20/27 [0s<0s, 0 events/s]"
                   "\rchecking t.json: 100%|█████████████████████████| 27/27 [0s<0s, 0 events/s]"
                   "\r" + rules + " " * (checking_width - len(rules)) + "\r" + " " * len(rules) + "\r")
    doc = json.loads(out)  # stdout: the JSON document alone
    assert (doc["target"], doc["findings"], doc["stats"]["ops"], doc["stats"]["commands"]) == ("t.json", [], 4, 8)
    assert run(["check", tiny, "--json", "--rules", "lifetime"], monkeypatch, tty=False)[1:] == (out, "")


def test_export_erases_the_line_before_each_report_line(tiny, monkeypatch):
    code, out, err = run(["export", tiny, "--perfetto", "t.pftrace"], monkeypatch)
    assert code == 0
    last = "writing perfetto: 100%|█████████████████████████| 13/13 [0s<0s, 0 spans/s]"
    assert err == (READ_INDEX + "\rlaying out tracks" + " " * (INDEX_WIDTH - len("laying out tracks"))
                   + "\rwriting perfetto:   0%" + BAR0 + " 0/13 [0s<0s, 0 spans/s]"
                   "\rwriting perfetto:  46%|███████████              | 6/13 [0s<0s, 0 spans/s]"
                   "\rwriting perfetto:  92%|███████████████████████  | 12/13 [0s<0s, 0 spans/s]"
                   "\r" + last + "\r" + " " * len(last) + "\r")
    assert out == "perfetto: t.pftrace  (5 tracks, 13 slices, 6 counter values, 4 flows, 0 instants)\n"


def test_plot_phases(tiny, monkeypatch):
    code, out, err = run(["plot", tiny, "-o", "t.png"], monkeypatch)
    assert code == 0
    assert err == (READ_INDEX + "\rlaying out tracks" + " " * (INDEX_WIDTH - len("laying out tracks"))
                   + "\rdrawing" + " " * (len("laying out tracks") - len("drawing"))
                   + "\rsaving t.png" + "\r" + " " * len("saving t.png") + "\r")
    assert out == "plot: t.png  (3 rows, bars)\n"


def test_diff_reads_both_traces(tiny, monkeypatch):
    code, out, err = run(["diff", tiny, tiny, "--json"], monkeypatch)
    assert code == 0
    again = READ_INDEX.replace("\rreading t.json: 0 events", "\rreading t.json: 0 events"
                               + " " * (INDEX_WIDTH - len("reading t.json: 0 events")), 1)
    assert err == (READ_INDEX + again + "\rcomparing" + " " * (INDEX_WIDTH - len("comparing"))
                   + "\r" + " " * len("comparing") + "\r")
    assert json.loads(out)["within_tolerance"] is True


@pytest.mark.parametrize("argv, status", [(["stats", "t.json"], 0), (["check", "t.json"], 1),  # (hazards: 1)
                                          (["export", "t.json", "--chrome", "t.cj"], 0),
                                          (["diff", "t.json", "t.json"], 0), (["plot", "t.json", "-o", "t.svg"], 0)])
def test_nothing_off_a_terminal_or_with_quiet(tiny, monkeypatch, argv, status):
    code, out, err = run(argv, monkeypatch, tty=False)
    assert (code, err) == (status, "")
    assert out.endswith("\n") and "\r" not in out
    assert run([*argv, "-q"], monkeypatch) == (status, out, "")
    assert run([*argv, "--quiet"], monkeypatch) == (status, out, "")


def test_progress_display_only_on_a_terminal():
    assert trace_cli.progress_display(stream=io.StringIO()) is None
    assert trace_cli.progress_display(quiet=True, stream=FakeTTY()) is None
    assert isinstance(trace_cli.progress_display(stream=FakeTTY()), Progress)


def test_updates_are_throttled_phases_are_not(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(executor, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    tty = FakeTTY()
    bar = Progress(None, "", tty, unit="", tty_only=True, interval=0.1)
    bar.phase("reading t", unit="events")
    bar.update(10)  # 0 s after the last draw: skipped
    clock.t += 0.05
    bar.update(10)  # 0.05 s: skipped
    clock.t += 0.06
    bar.update(10)  # 0.11 s: drawn
    bar.update(10)
    bar.phase("sorting")  # a new phase is drawn at once
    bar.close(clear=True)
    assert tty.getvalue() == ("\rreading t: 0 events\rreading t: 30 events"
                              "\rsorting" + " " * (len("reading t: 30 events") - len("sorting"))
                              + "\r" + " " * len("sorting") + "\r")


def test_tty_only_progress_is_silent_off_a_terminal():
    log = io.StringIO()
    bar = Progress(None, "", log, unit="", tty_only=True)
    bar.phase("reading", unit="events")
    bar.update(5)
    bar.close(clear=True)
    assert log.getvalue() == ""


def test_sweep_progress_unchanged(monkeypatch):
    monkeypatch.setattr(executor, "time", types.SimpleNamespace(monotonic=Clock().monotonic))
    tty = FakeTTY()
    bar = Progress(2, "sweep", tty)
    bar.update()
    bar.update()
    bar.close()
    assert tty.getvalue() == ("\rsweep:  50%|████████████             | 1/2 [0s<0s, 0.0 pt/s]"
                              "\rsweep: 100%|█████████████████████████| 2/2 [0s<0s, 0.0 pt/s]\n")
    log = io.StringIO()
    bar = Progress(2, "fuzz", log)
    bar.update()
    bar.update()
    bar.close()
    assert log.getvalue() == "fuzz: 1/2 points (0.0 s)\nfuzz: 2/2 points (0.0 s)\n"
