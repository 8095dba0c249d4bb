"""The sandbox's parent side: the API the tools call, evaluations assembled step by step, the worker pool and its spares, the GPU lease, Ray.
May import every other room of ksearch.gpu; nothing imports it but the tools (and Ray actors)."""
