"""ksearch GPU sandbox: tasks, compiling, correctness, timing, profiling, isolated workers."""
