"""Measurement primitives: timing one callable, robust statistics and comparisons, the GPU's ceilings, Nsight Compute's report.
Imports no other room: the worker and the sandbox build on it."""
