"""A namespace that enforces the `restricted` Pod Security level: every pod Phalanx makes for a
job whose template meets that level (node pods with the injected agent, the spare) is admitted
by the API server's own PodSecurity admission, and the job runs to Succeeded; the same job with
a template that does not meet it is refused, so the check can fail.

The job runs a plain Python loop in the user image: the suite's torch comes from a hostPath
volume (tests/e2e/cluster.py), which `restricted` forbids.
"""

from __future__ import annotations

from typing import Any

from harness.jobs import job_manifest
from phalanx.models import labels
from tests.e2e.cluster import KindCluster, wait_for
from tests.e2e.user_programs import USER_IMAGE

LOOP = "import time\nfor step in range(120):\n    time.sleep(0.25)\nprint('done')\n"
RESTRICTED_POD = {"runAsNonRoot": True, "runAsUser": 1000,
                  "seccompProfile": {"type": "RuntimeDefault"}}  # fmt: skip
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def job(name: str, restricted: bool) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "train", "image": USER_IMAGE,
                                 "command": ["python3", "-c", LOOP]}  # fmt: skip
    template: dict[str, Any] = {"containers": [container]}
    if restricted:
        template["securityContext"] = RESTRICTED_POD
        container["securityContext"] = RESTRICTED_CONTAINER
    checkpoint = {"dir": "/tmp/checkpoints"}
    spec = {"replicas": {"max": 2}, "spares": 1, "checkpoint": checkpoint}
    return job_manifest(name, template={"spec": template}, **spec)


def refusals(kind: KindCluster, namespace: str) -> list[str]:
    events = kind.core.list_namespaced_event(namespace).items
    return [e.message or "" for e in events if "violates PodSecurity" in (e.message or "")]


def test_a_job_with_a_spare_succeeds_in_a_restricted_namespace(
    kind: KindCluster, namespace: str
) -> None:
    kind.kubectl("label", "namespace", namespace, "--overwrite",
                 "pod-security.kubernetes.io/enforce=restricted")  # fmt: skip
    kind.create_job(namespace, job("restricted", restricted=True))

    def spare_running() -> list[str]:
        pods = kind.core.list_namespaced_pod(
            namespace, label_selector=f"{labels.ROLE}={labels.ROLE_STANDBY}"
        ).items
        return [str(p.metadata.name) for p in pods if p.status.phase == "Running"]

    assert wait_for(spare_running, 180, "the spare Running in the restricted namespace")
    kind.wait_status(namespace, "restricted", lambda s: s.get("phase") == "Succeeded",
                     "Succeeded", 300)  # fmt: skip
    assert refusals(kind, namespace) == []

    kind.create_job(namespace, job("unrestricted", restricted=False))
    refused = wait_for(lambda: refusals(kind, namespace), 120,
                       "the API server to refuse the pods of a template it does not admit")  # fmt: skip
    assert any("unrestricted" in message for message in refused), refused
