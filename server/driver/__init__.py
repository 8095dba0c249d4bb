"""The built-in driver: the three-phase loop run on its own (`ksearch run`), its policies (LLM providers,
the offline tuner, replay) and its live display."""
