"""`python -m ksearch.gpu.worker`, the worker's former command, runs the worker (ksearch.gpu.worker.main)."""

from ksearch.gpu.worker.main import main

main()
