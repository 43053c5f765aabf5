"""Performance harness (SPEC §7)."""
