"""The API service: REST job control for people and programs, authorised by Kubernetes RBAC for
the caller, served from a watch cache so that it stays fast with thousands of jobs."""
