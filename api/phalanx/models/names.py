"""The names of the objects a TrainingJob owns, and the limit on the job's name that keeps them
all valid for every epoch the job can reach.

Why a limit: each child's name is built from the job's name, and Kubernetes refuses names that are
too long or badly formed. The strictest are the node pods' hostnames `<job>-<epoch>-<rank>`
(DNS-1123 labels, at most 63 characters) and the headless Service `<job>`, which is also the
pods' subdomain (a DNS-1035 label: lowercase letters, digits and '-', starting with a letter). The
rest fit easily: PodGroup `<job>-<epoch>` (also a pod label value, at most 63), standby pods
`<job>-<epoch>-s<i>` (a warm one is also its hostname, one character over 63 only at the last
epoch with a 50-character name and 10 000 standbys: that one stays cold), ServiceAccount, Role
and RoleBinding `<job>-phalanx`, Leases
`<job>-heartbeat` and `<job>-assignment` (DNS-1123 subdomains of at most 253), and the
`phalanx.dev/job` label (63).

The epoch grows without a natural bound (restarts, resizes, resumes), so it gets one:
`MAX_EPOCH` (6 digits), which the planner never passes (the job fails with EpochLimitReached
instead), and ranks have `MAX_NODES` (`spec.replicas.max`, so at most 5 digits). What is left of
63 characters is the name's share: `MAX_NAME_LENGTH` = 63 - 2 separators - 6 - 5 = 50. Like
Kubernetes' CronJob (52 characters, for its timestamp suffix) and JobSet (which checks that the
names it derives fit), the limit is refused at admission rather than names being shortened.
"""

from __future__ import annotations

import re
from typing import Final

from phalanx.models.rules import CelRule

DNS_LABEL_MAX: Final = 63
"""Kubernetes' longest DNS label: a pod's hostname and subdomain, a Service, a label value."""

MAX_EPOCH: Final = 999_999
"""The last epoch a job can reach: every epoch's pod hostnames still fit."""

MAX_NODES: Final = 100_000
"""Most node pods a job may have (`spec.replicas.max`): ranks have at most 5 digits."""

MAX_NAME_LENGTH: Final = (
    DNS_LABEL_MAX - len(f"-{MAX_EPOCH}-{MAX_NODES - 1}")  # 63 - 13 = 50
)
"""Longest `metadata.name` of a TrainingJob."""

NAME_PATTERN: Final = "^[a-z]([-a-z0-9]*[a-z0-9])?$"
"""A DNS-1035 label (without its length): what a Service name must be."""

_NAME = re.compile(NAME_PATTERN)

GENERATED_SUFFIX_LENGTH: Final = 5
"""The API server appends 5 random characters to `generateName`..."""
GENERATE_NAME_MAX_PREFIX: Final = DNS_LABEL_MAX - GENERATED_SUFFIX_LENGTH
"""...after cutting the prefix to 58 characters."""

NAME_MESSAGE: Final = (
    "metadata.name must be a DNS-1035 label (lowercase letters, digits and '-', starting with a "
    f"letter and ending with a letter or digit) of at most {MAX_NAME_LENGTH} characters, so that "
    f"pod hostnames <name>-<epoch>-<rank> fit in {DNS_LABEL_MAX} characters (epochs up to "
    f"{MAX_EPOCH}, ranks up to {MAX_NODES - 1})"
)


def name_fits(name: str) -> bool:
    """`name` is a DNS-1035 label of at most `MAX_NAME_LENGTH` characters."""
    return len(name) <= MAX_NAME_LENGTH and _NAME.fullmatch(name) is not None


def job_name_fits(name: str | None, generate_name: str | None = None) -> bool:
    """The name a job has, or the longest the API server can generate for it, fits; a manifest
    with neither is left to the API server (it requires one)."""
    if name is None and generate_name:
        name = generated_name(generate_name)
    return name is None or name_fits(name)


def generated_name(prefix: str) -> str:
    """The longest name the API server can generate from `generateName: prefix` (its random
    characters are lowercase letters and digits, so their value does not matter here)."""
    return prefix[:GENERATE_NAME_MAX_PREFIX] + "x" * GENERATED_SUFFIX_LENGTH


NAME_RULE: Final = CelRule(
    # The name cannot change, so the rule is checked when a job is created: jobs created before
    # it existed can still be updated (and their status written).
    rule=(
        f"self.metadata.name.size() <= {MAX_NAME_LENGTH} && "
        f"self.metadata.name.matches('{NAME_PATTERN}')"
    ),
    message=NAME_MESSAGE,
    field_path=".metadata.name",
    check=lambda job: job_name_fits(job.metadata.name, job.metadata.generate_name),
    create_only=True,
)
"""The rule on the TrainingJob's root: CEL there can read `metadata.name` (and only it and
`generateName`), after the API server generated the name from `generateName`."""


# The children's names. The builders and the local backend use these, nothing else.


def node_pod_name(job: str, epoch: int, rank: int) -> str:
    """`<job>-<epoch>-<rank>`: also the pod's hostname, so rank 0 has a stable DNS name."""
    return f"{job}-{epoch}-{rank}"


def standby_pod_name(job: str, epoch: int, index: int) -> str:
    """`<job>-<epoch>-s<index>`; a warm standby's hostname too, where it fits a DNS label."""
    return f"{job}-{epoch}-s{index}"


def service_name(job: str) -> str:
    """The headless Service, and the node pods' subdomain."""
    return job


def lease_name(job: str) -> str:
    """The heartbeat Lease node rank 0's agent renews."""
    return f"{job}-heartbeat"


def assignment_lease_name(job: str) -> str:
    """The Lease whose annotation publishes each epoch's assignment to the pods' agents."""
    return f"{job}-assignment"


def service_account_name(job: str) -> str:
    """The node pods' ServiceAccount, and the Role and RoleBinding that let it update the Lease."""
    return f"{job}-phalanx"


def env_config_map_name(job: str) -> str:
    """The ConfigMap of the variables every node pod of the job gets alike (the pods take it by
    envFrom; what differs per pod or epoch is on the pod)."""
    return f"{job}-phalanx-env"


def disruption_budget_name(job: str) -> str:
    """The PodDisruptionBudget that holds evictions off the node pods while they move."""
    return job


def workload_name(job: str, asked_in_epoch: int = 0) -> str:
    """The Kueue Workload through which a queued job is admitted: the job's name for the first
    one; a later one, asked for to grow past a partial admission, names the epoch it was asked
    in (one at a time, and each growth starts a new epoch)."""
    return job if asked_in_epoch == 0 else f"{job}-grow-{asked_in_epoch}"


def pod_group_name(job: str) -> str:
    """The job's PodGroup, also the value of its node pods' pod-group label, in every epoch: a
    replacement pod joins the group its carried-over peers are in."""
    return job


def event_name_prefix(job: str) -> str:
    """`<job>.`: the `generateName` of the Events about the job (the API server appends a
    random suffix), as Kubernetes names an object's events `<object>.<suffix>`."""
    return f"{job}."
