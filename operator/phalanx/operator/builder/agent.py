"""The agent, injected into a node pod of any image: an init container copies it into a volume,
and the training container's command runs under it, its own command and args unchanged.

Why: the agent is what gives a job in-place restarts, hot spares, start-up and hang detection
and progress. Baked into Phalanx's image only, it reached only programs built on that image. The
injected agent is one zipapp that needs nothing but the image's Python (see
`phalanx.agent.bundle`), so a user's own image gets it without a rebuild.

What each pod got is written on it (`phalanx.dev/agent`), and why, since a job can lose the
agent for reasons the user should see: the spec opted out, the operator has no agent image, or
the template sets no `command` (Kubernetes does not tell the operator an image's entrypoint;
the Phalanx trainer image's entrypoint is the agent already).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Final, Literal

from phalanx.models import labels
from phalanx.models.job import TrainingJob
from phalanx.operator.builder.children import Manifest
from phalanx.operator.builder.env import BuildSettings

AGENT_DIR: Final = "/opt/phalanx-agent"
"""Where the agent's volume is mounted, in the init container and in the training container."""
AGENT_FILE: Final = "phalanx-agent.pyz"
AGENT_VOLUME: Final = "phalanx-agent"
INIT_CONTAINER: Final = "phalanx-agent"
BUNDLED_AT: Final = "/opt/phalanx/" + AGENT_FILE
"""Where the control-plane image holds the zipapp, built with it (operator/Dockerfile)."""

AgentSource = Literal[
    "injected", "image", "disabled", "no-agent-image", "no-command", "own-launcher", "cannot-run"
]
"""What runs a pod's command: the injected agent; the image's own entrypoint, already the agent
(`phalanx-agent` named as the command), or the command bare for the reason named
(`own-launcher`: with several processes per pod, a command that is neither Python nor torchrun,
such as a shell script, may start the workers itself, and the agent would start it once per
worker; `cannot-run`: the agent injected into an earlier epoch's pods could not run in the
image; the job's AgentInjected condition says why)."""

PER_WORKER_PROGRAMS = ("python", "torchrun")
"""Commands the agent knows how to run once per worker (a name starting so: python3.11, ...)."""


def runs_per_worker(command: list[str], nproc_per_node: int) -> bool:
    """Whether the agent may start `command` once per worker: always with one worker per pod
    (the command is then the pod's one process, as it would be bare); with several, only a
    Python program or torchrun (which the agent runs as the pod's launcher)."""
    name = PurePosixPath(command[0]).name
    return nproc_per_node == 1 or name.startswith(PER_WORKER_PROGRAMS)


def source(
    job: TrainingJob, container: Manifest, settings: BuildSettings, allowed: bool = True
) -> AgentSource:
    """Whether the agent is injected into `container` (the pod's first), or why not."""
    command = container.get("command") or []
    if command and PurePosixPath(command[0]).name == "phalanx-agent":
        return "image"
    if not job.spec.agent.inject:
        return "disabled"
    if not allowed:
        return "cannot-run"
    if settings.agent_image is None:
        return "no-agent-image"
    if not command:
        return "no-command"
    if not runs_per_worker(command, job.spec.nproc_per_node):
        return "own-launcher"
    return "injected"


def inject(
    job: TrainingJob, spec: Manifest, settings: BuildSettings, allowed: bool = True
) -> AgentSource:
    """Put the agent in front of the first container's command where it applies (and is
    `allowed`: the planner's word); returns what runs the command (for the pod's annotation)."""
    container = spec["containers"][0]
    found = source(job, container, settings, allowed)
    if found != "injected":
        return found
    spec.setdefault("volumes", []).append({"name": AGENT_VOLUME, "emptyDir": {}})
    mount = {"name": AGENT_VOLUME, "mountPath": AGENT_DIR}
    init = {
        "name": INIT_CONTAINER,
        "image": settings.agent_image,
        "command": ["cp", BUNDLED_AT, f"{AGENT_DIR}/{AGENT_FILE}"],
        "volumeMounts": [mount],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 1000,  # the control-plane image's user, whatever the pod's default
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    if policy := settings.agent_image_pull_policy:
        init["imagePullPolicy"] = policy
    spec["initContainers"] = [init, *spec.get("initContainers", [])]
    container["command"] = [
        job.spec.agent.python,
        f"{AGENT_DIR}/{AGENT_FILE}",
        *container["command"],
    ]
    container.setdefault("volumeMounts", []).append({**mount, "readOnly": True})
    return found


def annotate(metadata: Manifest, agent: AgentSource) -> None:
    metadata.setdefault("annotations", {})[labels.AGENT] = agent
