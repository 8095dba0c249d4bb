"""The `ksearch` command line: one module per area (run, tree, tasks, steer, ui, sandbox), each a thin
layer that parses arguments, calls tools/ and prints the result."""

from ksearch.server.cli.main import app, main

__all__ = ["app", "main"]
