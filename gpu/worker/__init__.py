"""Inside a worker process: its request loop, the loaded candidate's checks, timing protocols, kernel audit and dry run.
May import build, checks, jail, tasks, timing and the public helpers; never the sandbox (its parent)."""
