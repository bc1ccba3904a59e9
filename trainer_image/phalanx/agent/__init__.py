"""The agent: a node pod's entrypoint. It spawns the pod's workers with their ranks, supervises
them as a gang, turns what happened into a meaningful exit code, asks workers to checkpoint on
SIGTERM, and (on node rank 0) publishes the heartbeat."""
