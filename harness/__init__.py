"""What the tests and the benchmarks both stand on: a real control plane on loopback (etcd and
kube-apiserver built by the project, `controlplane`, with its certificates, `pki`), identities and
grants in it (`rbac`), and the one TrainingJob factory (`jobs`). Neither tests/ nor bench/ owns
it, so a benchmark imports nothing of the tests."""
