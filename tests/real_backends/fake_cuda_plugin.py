"""Opt-in pytest plugin: the CTS port against ``cuda`` on the RECORDING FAKE driver API
(``fake_cuda.py``) — the adapter's logic and call sequence, not CUDA. Not part of the default suite:

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/cts -k "[cuda" -p tests.real_backends.fake_cuda_plugin
"""

from .fake_cuda import FakeCuda

_FAKE = FakeCuda()


def pytest_configure(config):
    from real_backends.cuda import adapter

    adapter._cu = lambda: _FAKE
