"""Recovery and detection on the local backend and torchrun: time to recover, to decide, goodput against the failure interval, resharding."""
