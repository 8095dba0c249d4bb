"""ksearch operations: one module per tool, plain async functions over (store, sandbox)."""
