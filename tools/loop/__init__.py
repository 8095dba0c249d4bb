"""The loop's state read from the records: phases and next steps, who runs a search, declined intents, timing protocols, a call's clock.
May import the tools' foundations (errors, schema, workspace) and the tool modules it reports on (edit_tree, export_kernel)."""
