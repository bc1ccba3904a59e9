"""The storage examples the other examples rely on (deploy/examples/storage/) are objects the
real API server accepts as they ship: the `phalanx-checkpoints` claim five examples mount, and
the Secret whose keys the AWS SDKs (and s3fs) read for an `s3://` checkpoint URL."""

from __future__ import annotations

from kubernetes import client as k8s
from kubernetes.utils import create_from_yaml

from tests.support.manifests import EXAMPLES_DIR, example_paths, load_yaml

STORAGE = EXAMPLES_DIR / "storage"
CLAIM = "phalanx-checkpoints"


def test_the_claim_the_examples_mount_and_the_s3_secret_are_accepted(
    kube_client: k8s.ApiClient, namespace: str
) -> None:
    for manifest in sorted(STORAGE.glob("*.yaml")):
        create_from_yaml(kube_client, str(manifest), namespace=namespace)
    core = k8s.CoreV1Api(kube_client)
    claim = core.read_namespaced_persistent_volume_claim(CLAIM, namespace)
    assert claim.spec.access_modes == ["ReadWriteMany"], "every node pod sees the same files"
    secret = core.read_namespaced_secret("s3-credentials", namespace)
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(secret.data)


def test_every_example_that_mounts_a_claim_mounts_the_one_shipped() -> None:
    mounted = set()
    for path in example_paths():
        volumes = load_yaml(path)["spec"]["template"]["spec"].get("volumes", [])
        mounted |= {v["persistentVolumeClaim"]["claimName"] for v in volumes
                    if "persistentVolumeClaim" in v}  # fmt: skip
    assert mounted == {CLAIM}
