"""The operator at scale on a real API server and kwok nodes: many jobs, storms, one large job, and the baselines (the Job controller, Kubeflow's training operator)."""
