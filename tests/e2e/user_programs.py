"""Running a user's own programs in a user's own image on kind: the image, the job around a
command, and the script's own step log (deploy/examples' scripts append `resumed` and `step`
records with their times to `<checkpoint dir>/steps.jsonl`)."""

from __future__ import annotations

from typing import Any

from harness.jobs import job_manifest
from tests.e2e.cluster import KindCluster, for_kind, wait_for
from tests.support.manifests import EXAMPLES_DIR

USER_IMAGE = "phalanx/user-python:0.1.0"
NO_PYTHON_IMAGE = "phalanx/no-python:0.1.0"


def user_job(
    name: str, command: list[str], nodes: int = 3, image: str = USER_IMAGE, *,
    min_nodes: int = 2, spares: int = 0,
) -> dict[str, Any]:  # fmt: skip
    """A job running `command` in `image` on `min_nodes..nodes` pods (and `spares` hot spares),
    one process per pod; in the user image with deploy/examples' scripts mounted at /script
    (`script_config_map`)."""
    container: dict[str, Any] = {"name": "train", "image": image, "command": command}
    template: dict[str, Any] = {"containers": [container]}
    if image == USER_IMAGE:
        container["volumeMounts"] = [{"name": "script", "mountPath": "/script"}]
        template["volumes"] = [{"name": "script", "configMap": {"name": "train-script"}}]
    return for_kind(
        job_manifest(
            name,
            replicas={"min": min_nodes, "max": nodes},
            nprocPerNode=1,
            spares=spares,
            checkpoint={"dir": f"/checkpoints/{name}"},
            template={"spec": template},
        )
    )


def resumed_after(
    kind: KindCluster, namespace: str, job: str, fault_at: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The script's first resume after the fault, and its first step after that resume (a step
    logged just after the fault, still in flight when it struck, does not count)."""

    def found() -> tuple[dict[str, Any], dict[str, Any]] | None:
        seen = kind.step_log(namespace, job)
        resumes = [r for r in seen if "resumed" in r and r["time"] > fault_at]
        if not resumes:
            return None
        steps = [r for r in seen if "step" in r and r["time"] > resumes[0]["time"]]
        return (resumes[0], steps[0]) if steps else None

    resumed, first = wait_for(found, 180, "a resume and a training step after the fault")
    return resumed, first


def script_config_map(kind: KindCluster, namespace: str, *scripts: str) -> None:
    """deploy/examples' `scripts` as the ConfigMap `train-script` that `user_job` mounts."""
    kind.core.create_namespaced_config_map(namespace, {
        "metadata": {"name": "train-script"},
        "data": {script: (EXAMPLES_DIR / script).read_text() for script in scripts}})  # fmt: skip
