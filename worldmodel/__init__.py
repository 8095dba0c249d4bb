"""ksearch world model: the persistent search state (no torch, no LLM SDK)."""
