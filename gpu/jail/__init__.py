"""The jail a worker, nvcc, ncu or a task probe runs in: namespaces, its root and view of the host, limits, a scrubbed environment.
Imports the standard library and the task record only: its launcher runs before anything else is trusted."""
