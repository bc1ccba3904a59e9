"""What saving costs training: DCP checkpoints and memory snapshots."""
