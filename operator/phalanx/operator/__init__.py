"""The Phalanx operator: turns TrainingJobs into rank-assigned node pods and closes ranks when
they fail. `planner` decides (pure); `observe`, `execute` and `handlers` talk to Kubernetes."""
