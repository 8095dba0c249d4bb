"""Compiling without running: static checks of a candidate's Python, nvcc on its CUDA, occupancy, and extension builds that survive a kill.
May import checks (the tamper scan), jail (nvcc runs jailed) and tasks (FlashInfer-Bench solutions)."""
