"""`python -m benchmarks`: every measure of SPEC §7 (see benchmarks/run.py)."""

from benchmarks.run import main

main()
