"""The HAL on real GPU APIs (OpenCL, CUDA, Metal). Never imports ``halsim``.

Not implemented yet: see issue "real_backends". ``reference`` is the only dependency.
"""
