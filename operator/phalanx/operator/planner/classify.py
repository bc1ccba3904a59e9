"""Failure classification (design §3): which class a failed pod's failure belongs to.

application: user code exited non-zero; counts against maxRestarts.
infrastructure: the platform failed the pod (OOM, eviction, lost or NotReady node, deletion by
someone else, signal, collective timeout, hang); counts against maxInfraRestarts.
configuration: the pod cannot start as specified (image pull, bad config); a condition, no restart.

The rules are a table, checked in order; the first that matches decides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from phalanx.models import exits
from phalanx.models.conditions import ConditionType, FailureReason
from phalanx.models.status import FailureClass
from phalanx.operator.planner.observed import NodeView, PodView

CONFIGURATION_WAITING_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
    }
)


@dataclass(frozen=True)
class Verdict:
    """A pod's failure, classified."""

    failure_class: FailureClass
    reason: str
    pod: str | None = None
    node: str | None = None
    exit_code: int | None = None
    message: str | None = None


@dataclass(frozen=True)
class Facts:
    """What a rule may look at besides the pod."""

    nodes: Mapping[str, NodeView]
    retryable_exit_codes: frozenset[int]


Rule = tuple[str, Callable[[PodView, Facts], bool], FailureClass, Callable[[PodView], str]]


def _exit_reason(pod: PodView) -> str:
    return exit_reason(pod.exit_code)


def exit_reason(code: int | None) -> str:
    """The failure an infrastructure exit code names (the agent's codes, or a signal's)."""
    if code == exits.COMMUNICATION:
        return FailureReason.COLLECTIVE_FAILURE
    if code == exits.PREFLIGHT:
        return FailureReason.PREFLIGHT_FAILED
    if code == exits.CHECKPOINTED:
        return FailureReason.CHECKPOINTED_STOP
    if code == exits.STOPPED:
        return FailureReason.HANG
    if code == exits.OOM_KILLED:
        return FailureReason.OOM_KILLED
    if code is not None and exits.killed_by_signal(code):
        return FailureReason.KILLED
    return FailureReason.RETRYABLE_EXIT_CODE


def _node_not_ready(pod: PodView, facts: Facts) -> bool:
    node = facts.nodes.get(pod.node_name) if pod.node_name else None
    return node is not None and not node.ready


def _infra_exit(pod: PodView, facts: Facts) -> bool:
    code = pod.exit_code
    return (
        pod.failed
        and code is not None
        and (
            code in exits.INFRASTRUCTURE_CODES
            or exits.killed_by_signal(code)
            or code in facts.retryable_exit_codes
        )
    )


AGENT_START_ERRORS = frozenset({"StartError", "ContainerCannotRun"})
"""How the runtime reports a container whose command it could not execute (containerd, Docker)."""


def _agent_cannot_run(pod: PodView, _: Facts) -> bool:
    """The injected agent never ran: its interpreter is not in the image (the container could
    not start), or is too old (the agent's own exit code)."""
    return (
        pod.agent_injected
        and pod.phase == "Failed"
        and (
            pod.terminated_reason in AGENT_START_ERRORS or pod.exit_code == exits.AGENT_UNSUPPORTED
        )
    )


RULES: tuple[Rule, ...] = (
    (
        "image or container config",
        lambda p, _: p.waiting_reason in CONFIGURATION_WAITING_REASONS,
        "configuration",
        lambda p: p.waiting_reason or ConditionType.CONFIGURATION_ERROR,
    ),
    ("injected agent cannot run", _agent_cannot_run, "configuration",
     lambda _: FailureReason.AGENT_CANNOT_RUN),
    ("checkpoint storage unavailable",
     lambda p, _: p.failed and p.exit_code == exits.STORAGE_UNAVAILABLE, "configuration",
     lambda _: FailureReason.CHECKPOINT_STORAGE_UNAVAILABLE),
    ("disruption", lambda p, _: p.disruption_reason is not None, "infrastructure",
     lambda p: p.disruption_reason or "DisruptionTarget"),
    ("evicted", lambda p, _: p.pod_reason == "Evicted", "infrastructure", lambda _: "Evicted"),
    ("oom", lambda p, _: p.terminated_reason == "OOMKilled", "infrastructure",
     lambda _: FailureReason.OOM_KILLED),
    ("deleted", lambda p, _: p.deleting, "infrastructure", lambda _: FailureReason.POD_DELETED),
    ("node not ready", _node_not_ready, "infrastructure",
     lambda _: FailureReason.NODE_NOT_READY),
    ("node lost", lambda p, _: p.phase == "Unknown", "infrastructure",
     lambda _: FailureReason.NODE_LOST),
    ("platform exit", _infra_exit, "infrastructure", _exit_reason),
    ("user code", lambda p, _: p.failed, "application", lambda _: FailureReason.ERROR),
)  # fmt: skip


def classify(pod: PodView, facts: Facts) -> Verdict | None:
    """The failure of `pod`, or None if it has not failed."""
    for _name, matches, failure_class, reason in RULES:
        if matches(pod, facts):
            return Verdict(
                failure_class=failure_class,
                reason=reason(pod),
                pod=pod.name,
                node=pod.node_name,
                exit_code=pod.exit_code,
                message=pod.message,
            )
    return None


def restart_class(verdicts: list[Verdict]) -> FailureClass:
    """The class a gang restart is counted under: infrastructure wins, since peers of a lost
    rank often fail in user code (a collective error) as a consequence."""
    if any(v.failure_class == "infrastructure" for v in verdicts):
        return "infrastructure"
    return "application"
