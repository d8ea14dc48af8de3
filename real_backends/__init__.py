"""Real GPU backends on one event-semaphore engine (DESIGN §6): ``opencl`` (PoCL in CI), ``cuda``,
``metal``. A backend that cannot run here raises UNAVAILABLE from ``create_device``. This package
never imports ``halsim``: traces are compared by the diff tool, not by sharing objects."""
