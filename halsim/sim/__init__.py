"""The discrete-event simulated GPU devices (DESIGN §5; ``docs/simulator.md``).

Modules, one concept each: :mod:`.device` (the shared device), :mod:`.host` (host threads on virtual
time), :mod:`.history` (when semaphores reached values), :mod:`.events` (SimPy events of the models),
:mod:`.execution` (an operation's body in virtual time), :mod:`.lifetimes` (retained resources),
:mod:`.cost_model`, :mod:`.deadlock`, :mod:`.personalities` (``generic``, ``sync``) and :mod:`.driver`.

>>> from halsim.sim.driver import driver
>>> with driver.create_device("generic") as dev:
...     s = dev.create_semaphore()
...     dev.queue_barrier([], [(s, 1)])
...     s.wait(1)
...     dev.now() > 0
True
"""

from .cost_model import CostModel
from .deadlock import DeadlockError, DeadlockReport

__all__ = ["CostModel", "DeadlockError", "DeadlockReport"]
