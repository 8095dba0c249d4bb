"""A task at run time inside a worker or probe: the runtime per ecosystem (native, GPU MODE, FlashInfer-Bench), its smoke inputs, facts and rounding.
May import the tasks package, its draws and FlashInfer-Bench rooms, checks and the public helpers."""
