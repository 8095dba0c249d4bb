"""What a policy or an MCP prompt reads: contexts from the store, the phase prompts and their templates (prompts/), what each phase decides.
May import the loop, the bank's lessons and the tools' foundations."""
