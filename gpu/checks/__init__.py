"""Judging a candidate: outputs against the reference, identities it must not replace, tampering, degenerate answers, the audit's kernel names.
May import the task record, dtypes and inputs only."""
