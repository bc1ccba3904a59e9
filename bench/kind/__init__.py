"""Figures read from the kind suite's records (faults, any program, scheduling)."""
