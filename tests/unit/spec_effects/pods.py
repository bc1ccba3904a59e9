"""Fields that show on the pods the builder makes: the template they are made from, and where
and how urgently they schedule."""

from __future__ import annotations

from phalanx.models import TrainingJob, labels
from phalanx.operator.builder import BuildSettings, node_pod, standby_pod
from tests.unit.spec_effects.build import Effect, Observer, built_pod


def _made_from_template(job: TrainingJob) -> tuple[str, str | None, list[str]]:
    """The node pod's image, its `team` label and its volumes."""
    pod = built_pod(job)
    volumes = [v["name"] for v in pod["spec"].get("volumes", [])]
    return pod["spec"]["containers"][0]["image"], pod["metadata"]["labels"].get("team"), volumes


def _scheduling(key: str) -> Observer:
    """`key` of the node pod's spec and of a (cold) standby pod's spec."""

    def observe(job: TrainingJob) -> tuple[object, object]:
        standby = standby_pod(job, 1, 0, BuildSettings())
        return built_pod(job)["spec"].get(key), standby["spec"].get(key)

    return observe


INJECTING = BuildSettings(agent_image="phalanx/controlplane:test")
"""An operator that injects the agent (the chart's operator.agentInjection.enabled)."""
WITH_COMMAND = {
    "spec": {"containers": [{"name": "t", "image": "img", "command": ["python", "t.py"]}]}
}


def _agent(job: TrainingJob) -> tuple[str, list[str]]:
    """What runs the node pod's command, and the command (under an injecting operator)."""
    pod = node_pod(job, 1, 0, 1, INJECTING)
    return pod["metadata"]["annotations"][labels.AGENT], pod["spec"]["containers"][0]["command"]


TEMPLATE = {
    "metadata": {"labels": {"team": "vision"}},
    "spec": {
        "containers": [{"name": "t", "image": "registry/train:2"}],
        "volumes": [{"name": "data", "emptyDir": {}}],
    },
}

EFFECTS: dict[str, Effect] = {
    "agent.inject": Effect(
        {"agent.inject": False, "template": WITH_COMMAND},
        _agent,
        ("disabled", ["python", "t.py"]),
        baseline={"template": WITH_COMMAND},
    ),
    "agent.python": Effect(
        {"agent.python": "/opt/conda/bin/python", "template": WITH_COMMAND},
        lambda j: _agent(j)[1][0],
        "/opt/conda/bin/python",
        baseline={"template": WITH_COMMAND},
    ),
    "template": Effect(
        {"template": TEMPLATE},
        _made_from_template,
        ("registry/train:2", "vision", ["data", "phalanx-shm"]),
    ),
    "schedulerName": Effect(
        {"schedulerName": "volcano"}, _scheduling("schedulerName"), ("volcano", "volcano")
    ),
    "priorityClassName": Effect(
        {"priorityClassName": "training-high"},
        _scheduling("priorityClassName"),
        ("training-high", "training-high"),
    ),
}
