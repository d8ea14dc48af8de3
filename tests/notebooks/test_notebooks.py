"""The notebooks in ``notebooks/`` run top to bottom and print what their text explains.

Each one is executed with nbclient on the ``python3`` kernel of the interpreter running the tests
(jupyter_client starts a kernel spec whose argv is ``python`` with ``sys.executable``; a check cell
prepended to the in-memory copy asserts the kernel runs in this environment). Nothing is written
back: the committed notebooks keep empty outputs, which the last test checks.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the test extra (nbformat, nbclient, ipykernel) is not installed")
nbclient = pytest.importorskip("nbclient", reason="the test extra (nbformat, nbclient, ipykernel) is not installed")
pytest.importorskip("ipykernel", reason="the test extra (nbformat, nbclient, ipykernel) is not installed")

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
CELL_TIMEOUT = 60  # seconds per cell (each notebook runs in a few seconds on a 2-core machine)

# At least one exact value per notebook (the simulated ones are deterministic: virtual time).
EXPECTED = {
    "01_simulate_a_schedule": [
        "all 6 operations submitted at t = 7800 ns (virtual); semaphores now [0, 0]",
        "both chunks copied; the host returns at t = 34490 ns",
        "makespan (first enqueue to last completion): 30390 ns",
        "result correct: True [-10 -13 -16 -19] ...",
        "critical path: 0:2 -> 0:1 -> 0:0",
        "DeadlockError ABORTED",
        "  two-semaphore cycle s0 -> s1: 0:0 waits s0>=1, signaled by 0:1; 0:1 waits s1>=1, signaled by 0:0",
        "after a.signal(1): a = 1 b = 1 at t = 7600 ns",
    ],
    "02_metal_async_vs_legacy_sync": [
        "legacy_sync / async makespan: 1.78x",
        "makespan ratio (diff): 1.783919",
        "median per-op duration ratio: 1.0",
        "happens-before edges: 0 only in A, 0 only in B",
    ],
    "03_cuda_pending_queue_actions": [
        "  {'ev': 'issue', 't': 7000, 'op': '0:1', 'start': 4500, 'track': 0, 'events': 0}",
        "  {'ev': 'issue', 't': 24600, 'op': '0:0', 'start': 22100, 'track': 0, 'events': 0}",
        "  copy 0:0: issued at 39486 with 0 wait event(s), ready 38986, ran 41986..64958",
        "  copy 0:1: issued at 12500 with 1 wait event(s), ready 20886, ran 23886..46858",
        "       1        23           24    204.0 us",
        "      32         0           25    100.0 us",
        "wait on 33 events: RESOURCE_EXHAUSTED - exceeded maximum queue action wait event limit (32) in op 0:34",
        "a later, unrelated action: RESOURCE_EXHAUSTED (sticky)",
    ],
    "04_finding_bugs": [
        "findings in the buggy schedules: 7",
        "findings in the fixed schedules: 0",
        "missing barrier: 1 finding(s)",
        "with the barrier: 0 finding(s)",
        "exit status: 1",
    ],
    "05_sim_vs_hardware": [
        "program result on the reference device: [-10, -13, -16, -19]",
        "outputs equal: True",
        "required orderings broken per real run: [0, 0, 0]",
        "queue orders the model does not allow: []",
        "result: OK",
        "calibrated closer to the real runs than the default: True",
        "5 training and 4 held-out programs, 5 kept real runs each",
        "calibrated better than the default on held-out makespan: True",
    ],
    "06_sweeps_and_fuzzing": [
        "{'points': 18, 'skipped': 0, 'ran': 18, 'errors': 0}",
        "      5.0      4     1     162.6 us       15   0.29",
        "     50.0      4    32      75.8 us        0   0.30",
        'fastest: {"cost.copy_gb_per_s":50.0,"event_pool_capacity":32,"queues":4} 75811 ns',
        "pool  1: 1 -> 4 queues 218.7 -> 156.7 us (-28%)",   # the prose: a quarter with a 1-event pool,
        "pool 32: 1 -> 4 queues 214.5 -> 83.2 us (-61%)",    # more than half with 32 events
        "20 programs, 18 with findings",  # (program 16: dropped-sync hazards since generated transients must be written before they are read)
        "replayed: ['hazard.raw'] exit status: 1 same: True",
    ],
}
IMAGES = {"01_simulate_a_schedule": 1, "02_metal_async_vs_legacy_sync": 2, "03_cuda_pending_queue_actions": 1,
          "04_finding_bugs": 1, "05_sim_vs_hardware": 4,
          "06_sweeps_and_fuzzing": 1}

KERNEL_CHECK = "import sys\nprint('KERNEL-PREFIX', sys.prefix)"


def notebook_paths():
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def test_every_notebook_is_tested():
    assert [p.stem for p in notebook_paths()] == sorted(EXPECTED)


def _text(nb) -> tuple[list[str], int]:
    """Every line the code cells printed or returned as text, and the number of PNG images shown."""
    lines, images = [], 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.output_type == "stream" and out.name == "stdout":
                lines += out.text.splitlines()
            elif out.output_type in ("execute_result", "display_data"):
                images += "image/png" in out.data
                if "image/png" not in out.data:
                    lines += out.data.get("text/plain", "").splitlines()
    return lines, images


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_runs_and_prints_its_values(name):
    if name == "05_sim_vs_hardware":
        if importlib.util.find_spec("pyopencl") is None:
            pytest.skip("the opencl extra (pyopencl[pocl]) is not installed")
        from reference import hal
        try:
            hal.create_device("opencl").close()
        except hal.HalError as e:
            pytest.skip(f"no OpenCL device: {e}")
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(KERNEL_CHECK))
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()  # raises CellExecutionError (with the traceback) if any cell fails
    errors = [out for cell in nb.cells for out in cell.get("outputs", []) if out.output_type == "error"]
    assert not errors, errors
    lines, images = _text(nb)
    assert lines[0] == f"KERNEL-PREFIX {sys.prefix}", "the notebook kernel is not this environment's python"
    missing = [want for want in EXPECTED[name] if want not in lines]
    assert not missing, f"{name}: lines not printed: {missing}\n--- output ---\n" + "\n".join(lines)
    assert images == IMAGES[name]


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.stem)
def test_committed_notebooks_have_no_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, \
                f"{path.name} cell {i} has outputs: clear them before committing"
