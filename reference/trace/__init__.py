"""The common trace: format, streaming storage and the recorder every device uses."""

from .recorder import Recorder
from .trace import FORMAT, VERSION, Trace, TraceFormatError

__all__ = ["FORMAT", "VERSION", "Recorder", "Trace", "TraceFormatError"]
