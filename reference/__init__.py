"""halsim's reference package: the HAL contract (``reference.hal``), the reference CPU drivers
(``local-sync``, ``local-task``), the builtin kernel library and the common trace format.

It imports nothing from ``halsim`` or ``real_backends``.
"""
