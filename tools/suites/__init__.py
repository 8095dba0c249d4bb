"""Suites of searches: what a suite's sources name, its records, and its result table.
May import files (a suite's candidate files) and the tools' foundations."""
