"""A candidate as a file that runs where ksearch is not installed: the source rewrite and the standalone NVRTC and extension loaders it embeds.
Imports no other room (pure text)."""
