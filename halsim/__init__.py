"""halsim: the simulated GPU devices, the schedule checks and the trace tools.

Until the simulator lands, this package holds the ``halsim`` command line (``halsim demo``).
"""

__version__ = "0.1.0"
