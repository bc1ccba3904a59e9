"""Jobs that run to completion on real pods, every shipped example among them: the quickstart
(through kubectl), elastic DDP, FSDP with tensor parallelism, an unmodified script that loses a
pod as torchrun's command, the same script converted with phalanx.resume as `python
resumable_train.py` (one process per pod), the same script with phalanx.progress, and an image
that does not exist.

Examples run as shipped, but for the suite's adaptations (tests/e2e/cluster.py: mounted torch,
the shared checkpoint claim, fake GPUs) and two of this test's: the reference trainer's step
count is capped (the examples' counts are for real training), and no more node pods are asked
for than the cluster has workers (a user with 3 nodes would `kubectl scale` the same way).
"""

from __future__ import annotations

import json
import time
from typing import Any

import yaml

from phalanx.control import views
from phalanx.models import TrainingJob
from tests.e2e.cluster import KindCluster, api_seconds, for_kind, record, wait_for
from tests.e2e.jobs import training_job
from tests.support.manifests import (
    EXAMPLES_DIR,
    KUBECTL_GET_COLUMNS,
    example_paths,
    load_yaml,
)

EXAMPLE_STEPS = 30
RUN_HERE = {
    "quickstart",
    "elastic-ddp",
    "fsdp-tensor-parallel",
    "torchrun-script",
    "python-script",
    "progress-script",
}


def example(kind: KindCluster, name: str) -> dict[str, Any]:
    """deploy/examples/<name>.yaml with this suite's adaptations (module docstring)."""
    manifest = load_yaml(EXAMPLES_DIR / f"{name}.yaml")
    spec = manifest["spec"]
    if "trainer" in spec:
        spec["trainer"]["steps"] = min(spec["trainer"].get("steps", EXAMPLE_STEPS), EXAMPLE_STEPS)
    replicas, workers = spec["replicas"], len(kind.workers())
    if replicas.get("desired", replicas["max"]) > workers:
        replicas["desired"] = max(replicas["min"], workers)
    return for_kind(manifest)


def succeeded(kind: KindCluster, namespace: str, name: str, timeout: float = 420) -> dict[str, Any]:
    return kind.wait_status(
        namespace, name, lambda s: s.get("phase") == "Succeeded", "Succeeded", timeout
    )


def test_every_example_is_run_by_this_suite() -> None:
    assert {p.stem for p in example_paths()} == RUN_HERE


def test_the_quickstart_succeeds_through_kubectl(kind: KindCluster, namespace: str) -> None:
    manifest = yaml.safe_dump(example(kind, "quickstart"))
    kind.kubectl("apply", "-n", namespace, "-f", "-", stdin=manifest)
    done = kind.kubectl("wait", "--for=condition=Succeeded", "tj/quickstart", "-n", namespace,
                        "--timeout=420s", check=False)  # fmt: skip
    assert done.returncode == 0, (
        done.stderr + kind.kubectl("get", "tj", "-n", namespace, "-o", "yaml").stdout
    )
    table = kind.kubectl("get", "tj", "-n", namespace).stdout.splitlines()
    assert table[0].split() == KUBECTL_GET_COLUMNS
    # 4 nodes asked for, 3 workers here: sized down by `example` (nodes = world, 1 process each).
    assert table[1].split()[:7] == [
        "quickstart",
        "Succeeded",
        "3",
        "3",
        "1",
        str(EXAMPLE_STEPS),
        "0",
    ], table


def test_the_elastic_ddp_example_succeeds(kind: KindCluster, namespace: str) -> None:
    kind.create_job(namespace, example(kind, "elastic-ddp"))
    done = succeeded(kind, namespace, "elastic-ddp")
    assert (done["nodes"], done["worldSize"]) == (3, 6), done


def test_the_fsdp_tensor_parallel_example_succeeds(kind: KindCluster, namespace: str) -> None:
    kind.create_job(namespace, example(kind, "fsdp-tensor-parallel"))
    done = succeeded(kind, namespace, "fsdp-tp")
    assert (done["nodes"], done["worldSize"], done["progress"]["step"]) == (3, 6, EXAMPLE_STEPS), (
        done
    )


def test_the_torchrun_example_finishes_after_losing_a_pod(
    kind: KindCluster, namespace: str
) -> None:
    """`torchrun train.py` as the container command, with no flags: the PET_* contract."""
    kind.core.create_namespaced_config_map(namespace, {
        "metadata": {"name": "train-script"},
        "data": {"train.py": (EXAMPLES_DIR / "train.py").read_text()}})  # fmt: skip
    kind.create_job(namespace, example(kind, "torchrun-script"))
    steps = kind.shared_dir(namespace) / "torchrun-script" / "steps.jsonl"

    def records() -> list[dict[str, Any]]:
        return (
            [json.loads(line) for line in steps.read_text().splitlines()] if steps.exists() else []
        )

    wait_for(lambda: any(r.get("step", 0) >= 25 for r in records()), 300,
             "the script to pass step 25 (a checkpoint at 20)")  # fmt: skip
    epoch = kind.status(namespace, "torchrun-script")["epoch"]
    victim = kind.running_pod(namespace, "torchrun-script", epoch, rank=1)
    fault_at = time.time()
    kind.core.delete_namespaced_pod(victim.metadata.name, namespace)
    done = succeeded(kind, namespace, "torchrun-script")
    assert done["epoch"] > epoch
    seen = records()
    resumed = [r for r in seen if "resumed" in r and r["time"] > fault_at]
    assert resumed, seen[-5:]
    assert resumed[0]["resumed"] >= 20, seen[-5:]
    first = next(r for r in seen if "step" in r and r["time"] > resumed[0]["time"])
    assert max(r.get("step", 0) for r in seen) == 200
    record("torchrun-pod-deleted", fault_to_first_step_s=round(first["time"] - fault_at, 1),
           resumed_from_step=resumed[0]["resumed"])  # fmt: skip


def _script_config_map(kind: KindCluster, namespace: str, name: str, script: str) -> None:
    kind.core.create_namespaced_config_map(namespace, {
        "metadata": {"name": name}, "data": {script: (EXAMPLES_DIR / script).read_text()}})  # fmt: skip


def test_the_python_script_example_resumes_with_the_library_and_shows_its_cadence(
    kind: KindCluster, namespace: str
) -> None:
    """`python resumable_train.py` as the command, one process per pod: RANK and WORLD_SIZE
    from the pod (the PyTorchJob contract). The script uses phalanx.resume, injected with the
    agent: it resumes after a lost pod, saves at the spec's `intervalSteps` (10), and the status
    and the checkpoint view (`GET .../checkpoints` serves `views.checkpoints`) show that cadence
    as the script reported it."""
    _script_config_map(kind, namespace, "train-script", "resumable_train.py")
    kind.create_job(namespace, example(kind, "python-script"))
    wait_for(lambda: any(r.get("step", 0) >= 25 for r in kind.step_log(namespace, "python-script")),
             300, "the script to pass step 25 (a checkpoint at 20)")  # fmt: skip
    epoch = kind.status(namespace, "python-script")["epoch"]
    victim = kind.running_pod(namespace, "python-script", epoch, rank=1)
    fault_at = time.time()
    kind.core.delete_namespaced_pod(victim.metadata.name, namespace)
    done = succeeded(kind, namespace, "python-script")
    assert done["epoch"] > epoch
    seen = kind.step_log(namespace, "python-script")
    resumed = [r for r in seen if "resumed" in r and r["time"] > fault_at]
    assert resumed, seen[-5:]
    assert resumed[0]["resumed"] >= 20, seen[-5:]
    assert resumed[0]["world"] == done["nodes"], "one worker per pod, ranked by the pod's env"
    assert max(r.get("step", 0) for r in seen) == 200
    assert done["progress"]["step"] == 200, "the library reports its steps"
    assert done["checkpointIntervalSteps"] == 10
    view = views.checkpoints(TrainingJob.model_validate(kind.job(namespace, "python-script")))
    assert (view.interval_steps, view.requested_interval_steps) == (10, 10)
    assert view.last is not None
    assert view.last.path == "/checkpoints/python-script/step-200"


def test_the_progress_script_example_shows_its_steps_and_checkpoint(
    kind: KindCluster, namespace: str
) -> None:
    """The same script with phalanx.progress under the agent: its steps, loss and newest
    checkpoint are in the status, through a lost pod."""
    _script_config_map(kind, namespace, "progress-script", "progress_train.py")
    kind.create_job(namespace, example(kind, "progress-script"))
    status = kind.wait_status(
        namespace, "progress-script",
        lambda s: s.get("progress", {}).get("step", 0) >= 25, "step 25 in status", timeout=300,
    )  # fmt: skip
    assert status["lastCheckpoint"]["path"].startswith("/checkpoints/progress-script/step-")
    victim = kind.running_pod(namespace, "progress-script", status["epoch"], rank=1)
    kind.core.delete_namespaced_pod(victim.metadata.name, namespace)
    done = succeeded(kind, namespace, "progress-script")
    assert done["progress"]["step"] == 200
    assert done["lastCheckpoint"]["path"] == "/checkpoints/progress-script/step-200"
    assert done["restarts"]["total"] >= 1
    assert 0 < done["goodput"] <= 1
    reported = next(c for c in done["conditions"] if c["type"] == "ProgressReported")
    assert reported["status"] == "True", reported


def test_an_image_that_does_not_exist_is_a_configuration_error_not_a_restart_loop(
    kind: KindCluster, namespace: str
) -> None:
    job = training_job("noimage", steps=10, image="phalanx/does-not-exist:0.0.0", gpus=None)
    created_at = time.time()
    kind.create_job(namespace, for_kind(job))
    status = kind.wait_status(
        namespace, "noimage",
        lambda s: any(c["type"] == "ConfigurationError" and c["status"] == "True" for c in s.get("conditions", [])),
        "a ConfigurationError condition", timeout=180,
    )  # fmt: skip
    condition = next(c for c in status["conditions"] if c["type"] == "ConfigurationError")
    assert condition["reason"] in ("ErrImagePull", "ImagePullBackOff"), condition
    assert "does-not-exist" in condition["message"], condition
    # No restart loop: over the next kubelet back-off periods nothing is restarted or recreated.
    epoch, restarts = status["epoch"], status.get("restarts")
    pods = {p.metadata.name for p in kind.node_pods(namespace, "noimage")}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        now = kind.status(namespace, "noimage")
        assert (now["epoch"], now.get("restarts")) == (epoch, restarts), now
        assert {p.metadata.name for p in kind.node_pods(namespace, "noimage")} == pods
        time.sleep(2)
    found_at = api_seconds(condition["lastTransitionTime"])
    record("image-missing", fault_to_decision_s=round(found_at - created_at, 1),
           fault_to_first_step_s=None, failures=[],
           found_as=f"ConfigurationError ({condition['reason']})",
           events=[e.reason for e in kind.events(namespace, "noimage")])  # fmt: skip
