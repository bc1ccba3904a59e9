"""The executor's expectations of its own creates, against the real API server.

A reconcile that runs before the watch shows the pods the last one created plans them again; the
API server would answer each create with 409 (6 028 of ~25 000 requests at 1 000 jobs before
expectations). The executor does not create a pod it created until the reconciler reports it
seen, or until the expectation lapses (a pod deleted before it was ever seen is made again).
The pod is deleted behind the executor's back here, so that a create, if one were made, would
succeed and show. Deletes likewise: a pod deleted is not deleted again until a reconcile's view
shows it going or gone, unless the delete is forced now. The job's other children are made once
per job (and report shard count) in an operator's life, not once per epoch: a restart sends none
of their creates, a new operator makes a missing one again, and a job that needs more report
shards gets them.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from harness.controlplane import wait_until
from harness.jobs import operator_job
from phalanx.models.job import GROUP, PLURAL, VERSION, TrainingJob
from phalanx.models.names import lease_name, node_pod_name
from phalanx.models.report_shards import shard_lease
from phalanx.operator.builder import BuildSettings, report_shard_count
from phalanx.operator.cluster.pod_watch import LeaseIndex, PodIndex
from phalanx.operator.execute import Executor
from phalanx.operator.handlers import Reconciler
from phalanx.operator.metrics import OperatorMetrics
from phalanx.operator.planner import CreateNodePod, DeletePods, EnsureChildren, Plan, PlannerConfig

LAPSE_SECONDS = 1.0


def _exists(core: k8s.CoreV1Api, name: str, namespace: str) -> bool:
    try:
        core.read_namespaced_pod(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def _job(kube_client: k8s.ApiClient, namespace: str, name: str) -> tuple[dict[str, Any], TrainingJob]:  # fmt: skip
    """A TrainingJob in the API server (no operator runs here): as stored, and parsed."""
    raw = cast(dict[str, Any], k8s.CustomObjectsApi(kube_client).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, operator_job(name)))  # fmt: skip
    return raw, TrainingJob.from_stored(raw)


def test_a_created_pod_is_not_created_again_until_seen_or_its_expectation_lapses(
    kube_client: k8s.ApiClient, namespace: str
) -> None:
    core = k8s.CoreV1Api(kube_client)
    raw, job = _job(kube_client, namespace, "expect")
    executor = Executor(kube_client, BuildSettings(), OperatorMetrics(), LAPSE_SECONDS)
    plan = Plan([CreateNodePod(epoch=1, rank=0, nodes=2)])
    name, key = node_pod_name("expect", 1, 0), (namespace, "expect")

    def apply() -> None:
        executor.apply(raw, job, plan, datetime.now(UTC))

    def delete() -> None:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        wait_until(lambda: not _exists(core, name, namespace), 30, f"{name} deleted")

    apply()
    assert _exists(core, name, namespace)
    delete()
    apply()  # the watch has not shown it yet: no second create
    assert not _exists(core, name, namespace), "created again while it was expected"

    executor.seen(key, {name}, set())  # seen (and gone since): the expectation is met
    apply()
    assert _exists(core, name, namespace), "a pod seen and gone is created again"

    delete()
    time.sleep(LAPSE_SECONDS)  # the expectation's lifetime itself is what is tested
    apply()
    assert _exists(core, name, namespace), "an expectation that lapsed no longer holds"


def test_a_deleted_pod_is_not_deleted_again_until_seen_going_unless_forced(
    kube_client: k8s.ApiClient, namespace: str
) -> None:
    core = k8s.CoreV1Api(kube_client)
    raw, job = _job(kube_client, namespace, "unexpect")
    executor = Executor(kube_client, BuildSettings(), OperatorMetrics())
    name, key = node_pod_name("unexpect", 1, 0), (namespace, "unexpect")
    pod = {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x"}]}}

    def make() -> None:  # behind the executor's back: a delete, if one were made, would show
        core.create_namespaced_pod(namespace, pod)

    def delete(force: bool = False) -> None:
        executor.apply(raw, job, Plan([DeletePods((name,), force)]), datetime.now(UTC))

    make()
    delete()
    wait_until(lambda: not _exists(core, name, namespace), 30, f"{name} deleted")
    make()
    delete()  # the view has not shown it going: no second delete
    assert _exists(core, name, namespace), "deleted again while its deletion was expected"

    executor.seen(key, {name}, set())  # still there, not going: still expected
    delete()
    assert _exists(core, name, namespace)
    delete(force=True)  # forcing what was graceful is not a repeat
    wait_until(lambda: not _exists(core, name, namespace), 30, f"{name} deleted, forced")
    make()
    executor.seen(key, {name}, {name})  # Terminating (the node controller's), not gone
    delete(force=True)
    assert _exists(core, name, namespace), "a forced delete is met only by the pod's absence"

    executor.seen(key, set(), set())  # seen gone: met
    delete(force=True)
    wait_until(lambda: not _exists(core, name, namespace), 30, "a pod seen gone deleted again")


def test_children_are_made_once_per_job_and_shard_count_not_per_epoch(
    kube_client: k8s.ApiClient, namespace: str
) -> None:
    core = k8s.CoreV1Api(kube_client)
    leases = k8s.CoordinationV1Api(kube_client)
    raw, job = _job(kube_client, namespace, "kids")
    service = job.metadata.name or ""

    def ensure(executor: Executor, epoch: int, of: TrainingJob = job) -> None:
        executor.apply(raw, of, Plan([EnsureChildren(epoch)]), datetime.now(UTC))

    def service_exists() -> bool:
        return any(s.metadata.name == service
                   for s in core.list_namespaced_service(namespace).items)  # fmt: skip

    executor = Executor(kube_client, BuildSettings(), OperatorMetrics())
    ensure(executor, 1)
    assert service_exists()
    core.delete_namespaced_service(service, namespace)  # behind its back: a create would show
    wait_until(lambda: not service_exists(), 30, "the Service deleted")
    ensure(executor, 2)  # a restart: its children were made for this job already
    assert not service_exists(), "a restart sent the job's child creates again"

    ensure(Executor(kube_client, BuildSettings(), OperatorMetrics()), 2)  # a new operator
    assert service_exists(), "a new operator did not make the missing Service again"

    grown = job.model_copy(deep=True)
    grown.spec.replicas.max = 16  # report shards for ranks it had none for
    last = shard_lease(lease_name("kids"), report_shard_count(grown) - 1)
    assert last != shard_lease(lease_name("kids"), report_shard_count(job) - 1)
    ensure(executor, 3, grown)
    assert leases.read_namespaced_lease(last, namespace).metadata.name == last


def test_a_reconcile_of_a_job_the_api_server_no_longer_has_stops_and_creates_nothing(
    kube_client: k8s.ApiClient, namespace: str
) -> None:
    """A loop whose watch missed the job's deletion: its next reconcile plans epoch 1 from the
    body it holds, the status write first answers 404, and the reconcile says the job is gone
    (None, its loop stops: `loops`) before any child or pod is made for it."""
    raw, _ = _job(kube_client, namespace, "vanished")
    k8s.CustomObjectsApi(kube_client).delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "vanished"
    )
    reconciler = Reconciler(
        Executor(kube_client, BuildSettings(), OperatorMetrics()), OperatorMetrics(),
        PlannerConfig(), 30.0, None,
    )  # fmt: skip
    pods, leases = PodIndex(), LeaseIndex()
    pods.listed = leases.listed = True
    key = (namespace, "vanished")
    assert asyncio.run(reconciler.reconcile(key, raw, pods, leases, {})) is None
    assert k8s.CoreV1Api(kube_client).list_namespaced_pod(namespace).items == []
    assert k8s.CoreV1Api(kube_client).list_namespaced_service(namespace).items == []
