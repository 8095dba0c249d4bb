"""FlashInfer-Bench: definitions and workloads as tasks, Solutions as candidates, the package a solution is built into, exports.
May import the tasks package and the task record."""
