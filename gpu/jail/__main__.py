"""`python -m ksearch.gpu.jail`, the jail's former command, runs the jail's launcher (ksearch.gpu.jail.launch)."""

import sys

from ksearch.gpu.jail.launch import main

main(sys.argv[1:])
