"""`python -m benchmarks`: every performance measure (see benchmarks/run.py)."""

from benchmarks.run import main

main()
