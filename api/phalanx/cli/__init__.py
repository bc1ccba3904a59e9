"""`phalanx`: the command line. `run`, `validate` and `explain` work without a cluster."""
