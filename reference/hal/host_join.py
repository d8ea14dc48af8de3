"""``Thread.join`` as an ordering the trace records (``host_join``).

A host program that hands work to threads and joins them knows that everything a joined thread did
happened before what the joiner does next: the classic "workers wait for their results, main joins
them, then reads the buffers". No device call carries that edge, so without it the checks saw the
main thread's reads race with the workers' operations. While a device is open, ``Thread.join`` is
wrapped (once per process, the same call plus a check after it): when it returns with the thread
ended, every open device that knew the joined thread traces ``host_join`` on the joining thread
(deferred to the joiner's first device call if it has made none yet). A device may also vet a join
before it happens (``device._joining``): the simulator refuses, instead of hanging, a join by a host
call it runs of a thread that waits for the device.

>>> import threading
>>> from reference import hal
>>> dev = hal.create_device("local-task")
>>> s = dev.create_semaphore()
>>> t = threading.Thread(target=lambda: s.signal(1))
>>> t.start(); t.join()
>>> [(e["thread"], e["joined"]) for e in dev.trace.events("host_join")]
[(0, 1)]
>>> dev.close()
"""

from __future__ import annotations

import threading
import weakref

_devices: weakref.WeakSet = weakref.WeakSet()
_original_join = threading.Thread.join


def _join(self, timeout=None):
    for device in list(_devices) if _devices else ():
        if device._joining(self, timeout):  # the device joined it itself (or raised)
            break
    else:
        _original_join(self, timeout)
    if _devices and not self.is_alive():
        for device in list(_devices):
            try:
                device._host_joined(self)
            except Exception:  # noqa: BLE001 - tracing never breaks the program's own join
                pass


_join.__doc__ = _original_join.__doc__
_join.__wrapped__ = _original_join


def watch(device) -> None:
    """Trace the joins of ``device``'s host threads until :func:`unwatch` (installs the wrapper)."""
    if threading.Thread.join is not _join:
        threading.Thread.join = _join
    _devices.add(device)


def unwatch(device) -> None:
    _devices.discard(device)
