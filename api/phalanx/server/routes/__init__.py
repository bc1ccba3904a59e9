"""The API's routers: jobs (control), observe (events, logs, checkpoints, progress), health."""
