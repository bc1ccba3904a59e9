"""The executor's part in the agents' report Leases (`phalanx.models.report_shards`): the job's
Role kept naming every shard its pods write, and a deleted pod's report dropped from its shard.

Why the Role is patched: it is made once, with the job's first epoch, for the shards
spec.replicas.max needed then; a job that grows needs its new pods' shards (one per rank past
`SHARED_RANKS`) granted before they report (the names only grow: a pod made before the
job shrank still writes the shard of its name).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from phalanx.models import labels
from phalanx.models.job import TrainingJob
from phalanx.models.names import lease_name, service_account_name
from phalanx.models.report_shards import report_lease
from phalanx.operator import builder
from phalanx.operator.cluster.answers import discard, tolerate


def grant_shards(rbac: k8s.RbacAuthorizationV1Api, job: TrainingJob) -> None:
    """The job's existing Role made to name all the report Leases its pods may write now
    (nothing to do for a job whose reports fit the heartbeat Lease)."""
    if builder.report_shard_count(job) < 2:
        return
    name, namespace = job.metadata.name or "", job.metadata.namespace or "default"
    body = {"rules": builder.role(job)["rules"]}  # a merge patch replaces the list whole
    try:
        discard(
            rbac.patch_namespaced_role(
                service_account_name(name), namespace, body, _preload_content=False
            )
        )
    except ApiException as error:
        tolerate(error, 404)  # deleted since: the next epoch's children make it anew


def drop_reports(
    coordination: k8s.CoordinationV1Api, job: TrainingJob, pods: Iterable[str]
) -> None:
    """Remove deleted pods' reports from the Leases they are on (a merge patch with null removes
    a key): one patch per shard."""
    heartbeat = lease_name(job.metadata.name or "")
    by_lease: dict[str, dict[str, None]] = defaultdict(dict)
    for pod in pods:
        by_lease[report_lease(heartbeat, pod)][labels.AGENT_REPORT_PREFIX + pod] = None
    for lease, reports in by_lease.items():
        try:
            discard(
                coordination.patch_namespaced_lease(
                    lease, job.metadata.namespace or "default",
                    {"metadata": {"annotations": reports}}, _preload_content=False,
                )
            )  # fmt: skip
        except ApiException as error:
            tolerate(error, 404)
