"""Differential check: random and hand-written HAL programs run on IREE's own runtime and on ours."""
