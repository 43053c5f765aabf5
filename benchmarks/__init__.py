"""Performance harness ."""
