"""The operator's one room that talks to the API server: its clients and kopf's login (`kube`),
the writes a plan needs (`writer`, `writes`, `status_write`, `job_events`, `report_leases`,
`kueue`), what the API server's answers mean (`answers`), the operator's own watches of the jobs'
pods and Leases (`watch`, `pod_watch`), and leader election (`leader`). Nothing outside it
imports `kubernetes` or `aiohttp` (an import contract says so): the executor dispatches a plan's
actions here, the planner and the builders never see a client."""
