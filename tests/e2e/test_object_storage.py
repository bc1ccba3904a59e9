"""Checkpoints in an S3 bucket on kind: the reference trainer on 3 node pods saves to
`s3://training/<job>` on an S3 server inside the cluster (versitygw, built from its Go module:
`tests/tools/kind.sh object-store`), its credentials from a Secret by `envFrom` and its endpoint
in AWS_ENDPOINT_URL, as the AWS SDKs read them. A node is lost; the job resumes from the bucket
(memory snapshots off, so the resume is storage's) on 2 nodes, skipping the prefix's newest
object, a partial upload (shards, no `.metadata`); it finishes, and every sample is used exactly
once per data epoch over the kept steps.

The server keeps its objects as files in the namespace's shared folder (a hostPath every worker
has), so the test lays the partial upload down as an interrupted upload leaves it, and reads what
the job wrote. The server runs on one worker; the node lost is another.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.e2e import faults
from tests.e2e.cluster import KIND_SH, SHARED_IN_NODE, KindCluster, for_kind, record, run, wait_for
from tests.e2e.jobs import training_job
from tests.support.gang import check_exactly_once, trajectory

pytestmark = pytest.mark.e2e
JOB, BUCKET, STEPS = "bucketed", "training", 150
GLOBAL_BATCH, DATASET = 12, 240  # training_job's batch; the reference trainer's synthetic set
PARTIAL = 1_000_000
"""A step far ahead of the run's: the partial upload stays the prefix's newest object."""
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "phalanx-e2e", "AWS_SECRET_ACCESS_KEY": "phalanx-e2e-secret"}


def lines(path: Path) -> list[dict[str, Any]]:
    found = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError:  # a worker stopped mid-line
            continue
    return found


@pytest.fixture
def object_store(kind: KindCluster, namespace: str) -> tuple[str, Path]:
    """The S3 server in `namespace` (Service `s3`, port 7070), pinned to the first worker; its
    node and its folder on this machine."""
    image = run(["bash", str(KIND_SH), "object-store"], timeout=900).stdout.strip().splitlines()[-1]
    node = kind.workers()[0]
    core = kind.core
    core.create_namespaced_secret(namespace, {
        "metadata": {"name": "s3-credentials"}, "stringData": CREDENTIALS})  # fmt: skip
    labels = {"app": "s3"}
    secret = {"name": "s3-credentials"}
    k8s.AppsV1Api(kind.api).create_namespaced_deployment(namespace, {
        "metadata": {"name": "s3"},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {
                "nodeName": node,
                "containers": [{
                    "name": "versitygw", "image": image, "imagePullPolicy": "Never",
                    "args": ["--port", ":7070", "posix", "/data"],
                    "env": [
                        {"name": "ROOT_ACCESS_KEY", "valueFrom": {"secretKeyRef": {
                            **secret, "key": "AWS_ACCESS_KEY_ID"}}},
                        {"name": "ROOT_SECRET_KEY", "valueFrom": {"secretKeyRef": {
                            **secret, "key": "AWS_SECRET_ACCESS_KEY"}}},
                    ],
                    "ports": [{"name": "s3", "containerPort": 7070}],
                    "readinessProbe": {"tcpSocket": {"port": 7070}},
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }],
                "volumes": [{"name": "data", "hostPath": {
                    "path": f"{SHARED_IN_NODE}/{namespace}/s3", "type": "DirectoryOrCreate"}}],
            },
        }},
    })  # fmt: skip
    core.create_namespaced_service(namespace, {
        "metadata": {"name": "s3"},
        "spec": {"selector": labels, "ports": [{"name": "s3", "port": 7070, "targetPort": 7070}]},
    })  # fmt: skip
    kind.kubectl("-n", namespace, "rollout", "status", "deployment/s3", "--timeout=180s")
    return node, kind.shared_dir(namespace) / "s3"


def bucketed_job(namespace: str) -> dict[str, Any]:
    job = for_kind(training_job(JOB, steps=STEPS, nodes=(2, 3)))
    spec = job["spec"]
    spec["checkpoint"] = {"url": f"s3://{BUCKET}/{JOB}", "intervalSteps": 10, "keep": 3,
                          "memoryIntervalSteps": 0}  # fmt: skip
    container = spec["template"]["spec"]["containers"][0]
    container["envFrom"] = [{"secretRef": {"name": "s3-credentials"}}]
    container["env"] = [
        {"name": "AWS_ENDPOINT_URL", "value": f"http://s3.{namespace}.svc.cluster.local:7070"},
        {"name": "AWS_DEFAULT_REGION", "value": "us-east-1"},
    ]
    return job


def test_a_job_resumes_from_an_s3_bucket_after_losing_a_node(
    kind: KindCluster, namespace: str, object_store: tuple[str, Path]
) -> None:
    store_node, folder = object_store
    partial = folder / BUCKET / JOB / f"step-{PARTIAL}"
    partial.mkdir(parents=True)
    (partial / "__0_0.distcp").write_bytes(b"\0" * 4096)  # an upload cut short
    kind.create_job(namespace, bucketed_job(namespace))
    log = kind.shared_dir(namespace) / JOB / "log"
    before = kind.wait_status(
        namespace, JOB,
        lambda s: s.get("phase") == "Running" and s.get("nodes") == 3
        and (s.get("lastCheckpoint") or {}).get("step", 0) >= 20,
        "training on 3 nodes, past two checkpoints in the bucket", timeout=300,
    )  # fmt: skip
    assert before["lastCheckpoint"]["path"].startswith(f"s3://{BUCKET}/{JOB}/step-"), before
    epoch = before["epoch"]
    victim = next(
        pod for rank in (2, 1, 0)
        if (pod := kind.running_pod(namespace, JOB, epoch, rank)).spec.node_name != store_node
    )  # fmt: skip
    try:
        faults.lose_node(kind, victim)
        resumed = wait_for(
            lambda: next((r for r in lines(log / "losses.jsonl")
                          if r.get("event") == "resume" and r.get("from") is not None), None),
            300, "the resume after the lost node",
        )  # fmt: skip
        done = kind.wait_status(namespace, JOB, lambda s: s.get("phase") == "Succeeded",
                                "Succeeded", timeout=600)  # fmt: skip
    finally:
        kind.start_node(victim.spec.node_name)

    assert resumed["source"] == "storage", resumed
    assert resumed["world"] == 2, resumed
    assert 20 <= int(resumed["from"]) < PARTIAL, resumed
    assert done["progress"]["step"] == STEPS
    saved = sorted(p.name for p in (folder / BUCKET / JOB).iterdir())
    assert f"step-{STEPS}" in saved, saved
    assert f"step-{PARTIAL}" in saved, "a newer partial upload is skipped, not deleted"
    assert (folder / BUCKET / JOB / f"step-{STEPS}" / ".metadata").is_file()
    samples = [r for path in sorted(log.glob("samples-*.jsonl")) for r in lines(path)]
    losses, by_step = trajectory(lines(log / "losses.jsonl"), samples)
    assert sorted(losses) == list(range(1, STEPS + 1))
    check_exactly_once(by_step, DATASET, GLOBAL_BATCH, STEPS)
    record("s3-node-lost", resumed_from_step=resumed["from"], world=resumed["world"])
