"""What runs inside a node pod: the agent (the image's entrypoint), the checkpoint manager and the
reference trainer. It reads the env contract of `phalanx.models.env` and never imports the
operator or the API service (an import-linter contract holds it to that)."""
