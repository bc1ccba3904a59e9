"""Fields that show on the pods the builder makes: the template they are made from, and where
and how urgently they schedule."""

from __future__ import annotations

from phalanx.models import TrainingJob
from phalanx.operator.builder import BuildSettings, standby_pod
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


TEMPLATE = {
    "metadata": {"labels": {"team": "vision"}},
    "spec": {
        "containers": [{"name": "t", "image": "registry/train:2"}],
        "volumes": [{"name": "data", "emptyDir": {}}],
    },
}

EFFECTS: dict[str, Effect] = {
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
