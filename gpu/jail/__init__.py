"""The jail a worker, nvcc, ncu or a task probe runs in: namespaces, its root and view of the host, limits, a scrubbed environment; the zygotes that fork workers and probes into it.
Imports the standard library and the task record only (a zygote names its programs as data): its launcher runs before anything else is trusted."""
