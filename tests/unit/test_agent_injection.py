"""The agent injected into node pods of any image (an init container, the command wrapped).

Covers: what an injected pod holds (the init container copying the zipapp, the volume mounted
read-only, the command under the agent with its args unchanged, the annotation); each reason a
pod runs bare, written on it; a warm standby gets the agent too; the injected command is the one
the zipapp runs (its path in the volume is the one the control-plane image builds it at).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.jobs import job_model
from phalanx.models import TrainingJob, labels
from phalanx.operator.builder import BuildSettings, node_pod, standby_pod
from phalanx.operator.builder.agent import AGENT_DIR, AGENT_FILE, BUNDLED_AT, INIT_CONTAINER
from tests.support.manifests import REPO_ROOT

INJECTING = BuildSettings(agent_image="registry/phalanx/controlplane:0.1.0")


def job(container: dict[str, object], **spec: Any) -> TrainingJob:
    train = {"name": "train", "image": "user/own:1", **container}
    sidecar = {"name": "sidecar", "image": "busybox", "command": ["sleep", "inf"]}
    template = {"spec": {"containers": [train, sidecar]}}
    changes: dict[str, Any] = {"replicas": {"min": 1, "max": 2}, "template": template, **spec}
    return job_model(metadata={"uid": "u"}, **changes)


def test_an_injected_pod_runs_the_users_command_and_args_under_the_agent() -> None:
    pod = node_pod(job({"command": ["torchrun"], "args": ["train.py", "--lr", "3"]}), 1, 0, 2,
                   INJECTING)  # fmt: skip
    spec = pod["spec"]
    train, sidecar = spec["containers"]
    assert train["command"] == ["python3", f"{AGENT_DIR}/{AGENT_FILE}", "torchrun"]
    assert train["args"] == ["train.py", "--lr", "3"], "args are the user's, unchanged"
    assert sidecar["command"] == ["sleep", "inf"], "only the first container is the training"
    init = spec["initContainers"][0]
    assert (init["name"], init["image"]) == (INIT_CONTAINER, INJECTING.agent_image)
    assert init["command"] == ["cp", BUNDLED_AT, f"{AGENT_DIR}/{AGENT_FILE}"]
    volume = next(v for v in spec["volumes"] if v["name"] == init["volumeMounts"][0]["name"])
    assert volume == {"name": volume["name"], "emptyDir": {}}
    mount = next(m for m in train["volumeMounts"] if m["name"] == volume["name"])
    assert mount == {"name": volume["name"], "mountPath": AGENT_DIR, "readOnly": True}
    assert pod["metadata"]["annotations"][labels.AGENT] == "injected"


def test_a_template_init_container_runs_after_the_agents_copy() -> None:
    template_init = {"name": "fetch", "image": "busybox", "command": ["true"]}
    spec = job({"command": ["python", "t.py"]}).spec.model_dump(by_alias=True, exclude_none=True)
    spec["template"]["spec"]["initContainers"] = [template_init]
    with_init = TrainingJob.model_validate(
        {"metadata": {"name": "j", "namespace": "ns", "uid": "u"}, "spec": spec}
    )
    names = [c["name"] for c in node_pod(with_init, 1, 0, 1, INJECTING)["spec"]["initContainers"]]
    assert names == [INIT_CONTAINER, "fetch"]


@pytest.mark.parametrize(
    ("container", "spec", "settings", "why"),
    [
        ({"args": ["python", "t.py"]}, {}, INJECTING, "no-command"),
        ({"command": ["python", "t.py"]}, {"agent": {"inject": False}}, INJECTING, "disabled"),
        ({"command": ["python", "t.py"]}, {}, BuildSettings(), "no-agent-image"),
        ({"command": ["phalanx-agent", "python", "t.py"]}, {}, INJECTING, "image"),
    ],
)
def test_a_pod_that_runs_bare_says_why(
    container: dict[str, object], spec: dict[str, object], settings: BuildSettings, why: str
) -> None:
    pod = node_pod(job(container, **spec), 1, 0, 1, settings)
    assert pod["metadata"]["annotations"][labels.AGENT] == why
    assert "initContainers" not in pod["spec"]
    assert pod["spec"]["containers"][0].get("command") == container.get("command")


def test_the_images_python_runs_the_agent_when_named() -> None:
    custom = job({"command": ["python", "t.py"]}, agent={"python": "/opt/conda/bin/python"})
    command = node_pod(custom, 1, 0, 1, INJECTING)["spec"]["containers"][0]["command"]
    assert command[:2] == ["/opt/conda/bin/python", f"{AGENT_DIR}/{AGENT_FILE}"]


def test_a_warm_standby_gets_the_agent_a_cold_one_does_not() -> None:
    user = job({"command": ["python", "t.py"]})
    warm = standby_pod(user, 1, 0, INJECTING, warm=True, nodes=2)
    cold = standby_pod(user, 1, 0, INJECTING)
    assert warm["metadata"]["annotations"][labels.AGENT] == "injected"
    assert warm["spec"]["initContainers"][0]["name"] == INIT_CONTAINER
    assert "initContainers" not in cold["spec"]


def test_the_control_plane_image_builds_the_zipapp_where_init_containers_copy_it() -> None:
    dockerfile = (REPO_ROOT / "operator" / "Dockerfile").read_text()
    assert f"-m phalanx.agent.bundle {BUNDLED_AT}" in dockerfile
    assert Path(BUNDLED_AT).name == AGENT_FILE


def test_a_pod_the_planner_keeps_from_the_agent_runs_bare_and_says_so() -> None:
    """After the agent could not run in the image (the AgentInjected condition)."""
    pod = node_pod(job({"command": ["python", "t.py"]}), 2, 0, 1, INJECTING, agent=False)
    assert pod["metadata"]["annotations"][labels.AGENT] == "cannot-run"
    assert "initContainers" not in pod["spec"]
    assert pod["spec"]["containers"][0]["command"] == ["python", "t.py"]


@pytest.mark.parametrize(
    ("command", "nproc", "expected"),
    [
        (["bash", "-c", "torchrun --nproc-per-node=2 train.py"], 2, "own-launcher"),
        (["bash", "-c", "python train.py"], 1, "injected"),
        (["/usr/bin/python3.11", "train.py"], 2, "injected"),
        (["torchrun", "train.py"], 2, "injected"),
    ],
)
def test_with_several_processes_a_command_that_may_launch_its_own_runs_bare(
    command: list[str], nproc: int, expected: str
) -> None:
    """The agent starts the command once per worker: a shell script that starts the pod's
    workers itself would be started nprocPerNode times."""
    pod = node_pod(job({"command": command}, nprocPerNode=nproc), 1, 0, 1, INJECTING)
    assert pod["metadata"]["annotations"][labels.AGENT] == expected
