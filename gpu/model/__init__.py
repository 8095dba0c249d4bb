"""A whole model: its operators captured and profiled, the hot ones written as task files, winning kernels plugged back.
May import tasks (their tolerance and shrink rules), timing and gpu's public helpers; runs in its own process (torch).

`python -m ksearch.gpu.model` reads a request (report.py's Request, JSON on stdin) and prints one JSON report: the
profile of a model (profile.py over load.py, capture.py and write.py) or its plug-back (plug.py). runtime.py stands
alone (torch only): it is copied into every plugged model file. Importing this package needs no torch.
"""
