"""Timeline plots: what is drawn, in which mode, in both formats; CLI errors."""

from reference.trace import Trace

from halsim.cli import main
from halsim.trace_tools.plot import plot_diff, plot_trace
from halsim.trace_tools.synth import synthetic_trace


def test_plot_bars_png_and_svg(traces, tmp_path):
    t = Trace.load(traces["generic"])
    info = plot_trace(t, tmp_path / "g.png")
    # 4 lanes (host, queue 0, queue 1 x2); 10 ops + 22 commands + 1 host wait; 18 arrows (17 op waits + the host wait)
    assert info == {"rows": 4, "mode": "bars", "spans": 33, "arrows": 18, "semaphores": 4}
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plot_trace(t, tmp_path / "g.svg", findings=[{"rule": "x", "ops": ["0:3"], "t": 20000}])
    assert b"<svg" in (tmp_path / "g.svg").read_bytes()[:500]
    # the same plot twice is the same bytes (an SVG had a date stamp and random clip-path ids)
    plot_trace(t, tmp_path / "again.svg", findings=[{"rule": "x", "ops": ["0:3"], "t": 20000}])
    assert (tmp_path / "again.svg").read_bytes() == (tmp_path / "g.svg").read_bytes()
    assert b"<dc:date>" not in (tmp_path / "g.svg").read_bytes()


def test_plot_window_and_tracks(traces, tmp_path):
    t = Trace.load(traces["generic"])
    info = plot_trace(t, tmp_path / "w.png", t_from=16000, t_to=30000, tracks=["queue 0"])
    # queue 0's one lane: 0:3 and its first 3 commands (dispatch, barrier, dispatch) overlap the window;
    # its second barrier and fill (from 35202) and 0:6 (from 39803, after 0:3) and 0:8 do not
    assert info == {"rows": 1, "mode": "bars", "spans": 4, "arrows": 0, "semaphores": 4}


def test_plot_dense_traces_are_shaded(tmp_path):
    info = plot_trace(synthetic_trace(300, 10, 4), tmp_path / "d.png")
    assert info == {"rows": 5, "mode": "density", "spans": 3301, "arrows": 0, "semaphores": 4}


def test_plot_diff(traces, tmp_path):
    info = plot_diff(Trace.load(traces["generic"]), Trace.load(traces["metal"]), tmp_path / "d.png", labels=("a", "b"))
    assert (info["a"]["rows"], info["b"]["rows"]) == (4, 8)  # generic: host, queue 0, queue 1 x2
    assert (tmp_path / "d.png").stat().st_size > 10_000


def test_plot_cli(traces, tmp_path, capsys):
    assert main(["plot", traces["metal"], "-o", str(tmp_path / "m.png")]) == 0
    assert capsys.readouterr().out == f"plot: {tmp_path / 'm.png'}  (8 rows, bars)\n"
    assert main(["plot", traces["metal"], "-o", str(tmp_path / "m.jpg")]) == 2
    assert capsys.readouterr().err == f"halsim: error: -o '{tmp_path / 'm.jpg'}': expected a .png or .svg file name\n"
    assert main(["plot", traces["metal"], "-o", str(tmp_path / "m.png"), "--from", "10", "--to", "5"]) == 2
    assert capsys.readouterr().err == "halsim: error: --to must be after --from\n"
    assert main(["plot", str(tmp_path / "missing.json"), "-o", str(tmp_path / "m.png")]) == 2
