"""Calibration: fit the simulator's cost model from real-backend traces (``docs/accuracy.md``).

>>> from halsim.calibrate import fit, CalibrationError
>>> callable(fit)
True
"""

from .fit import Calibration, CalibrationError, Fitted, Samples, fit, fit_samples, personality_defaults, trace_samples

__all__ = ["Calibration", "CalibrationError", "Fitted", "Samples", "fit", "fit_samples", "personality_defaults",
           "trace_samples"]
