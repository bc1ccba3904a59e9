"""TrainingJobs the kind suite runs: small, CPU-only, and long enough to be hit by a fault."""

from __future__ import annotations

from typing import Any

from harness.jobs import job_manifest

IMAGE = "phalanx/trainer:0.1.0"


def training_job(name: str, *, steps: int, nodes: tuple[int, int] = (2, 3), nproc: int = 1,
                 tensor: int = 1, sharding: str = "ddp", gpus: int | None = 2,
                 step_delay: float = 0.2, image: str = IMAGE,
                 failure_policy: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """The reference trainer on `nodes` = (min, max) node pods. Each pod asks for `gpus` fake
    GPUs (tests/e2e/cluster.py), which makes one node pod per kind node, as GPUs do on a real
    cluster. Checkpoints every 10 steps and the trainer's step log go to the shared volume."""
    container: dict[str, Any] = {
        "name": "trainer",
        "image": image,
        "args": ["python", "-m", "phalanx.trainer.train", "--step-delay-seconds", str(step_delay),
                 "--log-dir", f"/checkpoints/{name}/log"],
    }  # fmt: skip
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return job_manifest(
        name,
        replicas={"min": nodes[0], "max": nodes[1]},
        nprocPerNode=nproc,
        parallelism={"tensor": tensor},
        checkpoint={"dir": f"/checkpoints/{name}", "intervalSteps": 10, "keep": 3},
        trainer={"steps": steps, "globalBatchSize": 12, "sharding": sharding},
        failurePolicy={
            "hangTimeoutSeconds": 10,
            "scheduleTimeoutSeconds": 15,
            **(failure_policy or {}),
        },
        template={"spec": {"containers": [container]}},
    )
