"""Inputs drawn ahead and kept: seeds, the machine's draws store, GPU fills of CPU generators, lazy fills, the input cache.
May import the task runtime (tasks.rt) and the task record."""
