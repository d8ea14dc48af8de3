"""halsim: the simulated GPU devices (:mod:`halsim.sim`), the schedule checks (:mod:`halsim.checks`),
the trace tools (:mod:`halsim.trace_tools`), calibration, campaigns and the ``halsim`` command line.

The devices are created through the HAL (``reference.hal.create_device("sim:cuda")``); a blocked
call that nothing can ever satisfy raises :class:`halsim.DeadlockError` (DESIGN §5):

>>> import halsim
>>> from reference import hal
>>> with hal.create_device("sim") as dev:
...     s = dev.create_semaphore()
...     try:
...         s.wait(1)
...     except halsim.DeadlockError as e:
...         print(e.code.name, e.report.threads[0].call)
ABORTED wait_semaphores(all)
"""

__version__ = "0.1.0"

__all__ = ["DeadlockError", "DeadlockReport", "__version__"]


def __getattr__(name: str):
    # (lazily: ``import halsim`` — the command line's start — does not import SimPy and the simulator)
    if name in ("DeadlockError", "DeadlockReport"):
        from halsim.sim import deadlock
        return getattr(deadlock, name)
    raise AttributeError(f"module 'halsim' has no attribute {name!r}")
