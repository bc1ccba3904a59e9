"""The scope of each of the operator's rights in the default (cluster-wide) install, on the real
API server with the chart's objects applied: every rule of its ClusterRole holds in a team's
namespace (a SubjectAccessReview per verb, and a real write of each child kind with the
operator's own token), and in kube-system, where the chart's ValidatingAdmissionPolicy takes the
writes back, every write verb the ClusterRole grants on a child kind is refused, while its
reads, its events and its TrainingJobs' status stay allowed (a job created there is told why it
fails). kube-system stands for each of operator.excludedNamespaces: the policy names them all.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import utils as k8s_utils
from kubernetes.client.exceptions import ApiException

from harness.controlplane import ControlPlane, wait_until
from phalanx.operator.cluster import kube
from tests.integration.test_chart_rbac import token_for, token_kubeconfig
from tests.support.chart import Helm, Manifest, build_helm, of_kind
from tests.unit.test_chart_rbac_rules import OPERATOR_RIGHTS

KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
         "ValidatingAdmissionPolicyBinding")  # fmt: skip
EXCLUDED = "kube-system"
CLUSTER_SCOPED = {("", "nodes"), ("apiextensions.k8s.io", "customresourcedefinitions")}
WRITES = {"create", "update", "patch", "delete"}
PODGROUPS = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")


@dataclass
class Operator:
    """The chart's operator identity, installed cluster-wide, and a client with its token."""

    user: str
    api: k8s.ApiClient


@pytest.fixture
def operator(
    control_plane: ControlPlane, kube_client: k8s.ApiClient, namespace: str, tmp_path: Path
) -> Iterator[Operator]:
    helm: Helm = build_helm()
    release = f"r{uuid.uuid4().hex[:8]}"
    rendered: list[Manifest] = helm.render(release=release, namespace=namespace)
    objects = [m for m in rendered if m["kind"] in KINDS]
    assert {m["kind"] for m in objects} == set(KINDS)
    for manifest in objects:
        k8s_utils.create_from_dict(kube_client, manifest)
    [account] = [m["metadata"]["name"] for m in of_kind(objects, "ServiceAccount")
                 if m["metadata"]["labels"]["app.kubernetes.io/component"] == "operator"]  # fmt: skip
    token = token_for(kube_client, namespace, account)
    config = kube.load_configuration(token_kubeconfig(control_plane, token, tmp_path / "op.yaml"))
    api = kube.api_client(config, threads=4)
    try:
        yield Operator(f"system:serviceaccount:{namespace}:{account}", api)
    finally:
        api.close()
        rbac = k8s.RbacAuthorizationV1Api(kube_client)
        admission = k8s.AdmissionregistrationV1Api(kube_client)
        for m in of_kind(objects, "ClusterRoleBinding"):
            rbac.delete_cluster_role_binding(m["metadata"]["name"])
        for m in of_kind(objects, "ClusterRole"):
            rbac.delete_cluster_role(m["metadata"]["name"])
        for m in of_kind(objects, "ValidatingAdmissionPolicyBinding"):
            admission.delete_validating_admission_policy_binding(m["metadata"]["name"])
        for m in of_kind(objects, "ValidatingAdmissionPolicy"):
            admission.delete_validating_admission_policy(m["metadata"]["name"])


def allowed(kube_client: k8s.ApiClient, user: str, group: str, resource: str, verb: str,
            namespace: str | None) -> bool:  # fmt: skip
    name, _, sub = resource.partition("/")
    review = k8s.V1SubjectAccessReview(spec=k8s.V1SubjectAccessReviewSpec(
        user=user, groups=["system:serviceaccounts", "system:authenticated"],
        resource_attributes=k8s.V1ResourceAttributes(
            group=group, resource=name, subresource=sub or None, verb=verb, namespace=namespace),
    ))  # fmt: skip
    result = k8s.AuthorizationV1Api(kube_client).create_subject_access_review(review)
    return bool(result.status.allowed)


def test_every_rule_holds_in_a_teams_namespace_and_cluster_rules_only_read(
    operator: Operator, kube_client: k8s.ApiClient, namespace: str
) -> None:
    for (group, resource), verbs in OPERATOR_RIGHTS.items():
        scope = None if (group, resource) in CLUSTER_SCOPED else namespace
        for verb in verbs:
            assert allowed(kube_client, operator.user, group, resource, verb, scope), (
                f"{verb} {group}/{resource} in {scope or 'the cluster'}"
            )
        if (group, resource) in CLUSTER_SCOPED:
            assert not set(verbs) & WRITES, f"{group}/{resource}: a cluster-scoped write"
    assert not allowed(kube_client, operator.user, "", "secrets", "get", namespace)
    assert not allowed(kube_client, operator.user, "", "namespaces", "create", None)


def child_writes(
    namespace: str, dry_run: str | None = None
) -> tuple[str, dict[str, Callable[[k8s.ApiClient], Any]]]:
    """Each write verb the ClusterRole grants on a child kind, as the executor makes it, on
    objects of one name (returned). `dry_run="All"`: admitted or refused, never stored."""
    name = f"scope-{uuid.uuid4().hex[:6]}"
    meta = k8s.V1ObjectMeta(name=name, namespace=namespace)
    lease_rule = k8s.V1PolicyRule(api_groups=["coordination.k8s.io"], resources=["leases"],
                                  verbs=["get", "update"])  # fmt: skip
    pod = k8s.V1Pod(metadata=meta, spec=k8s.V1PodSpec(containers=[
        k8s.V1Container(name="c", image="busybox")]))  # fmt: skip
    binding = k8s.V1RoleBinding(
        metadata=meta, role_ref=k8s.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role",
                                              name=name),
        subjects=[k8s.RbacV1Subject(kind="ServiceAccount", name=name, namespace=namespace)])  # fmt: skip
    group = {"apiVersion": "/".join(PODGROUPS[:2]), "kind": "PodGroup", "metadata": {"name": name},
             "spec": {"minMember": 1}}  # fmt: skip
    budget = k8s.V1PodDisruptionBudget(metadata=meta, spec=k8s.V1PodDisruptionBudgetSpec(
        max_unavailable=0, selector=k8s.V1LabelSelector(match_labels={"phalanx.dev/job": name})))  # fmt: skip
    kw: dict[str, Any] = {"dry_run": dry_run} if dry_run else {}
    core, rbac = k8s.CoreV1Api, k8s.RbacAuthorizationV1Api
    leases, custom = k8s.CoordinationV1Api, k8s.CustomObjectsApi
    return name, {
        "create pods": lambda api: core(api).create_namespaced_pod(namespace, pod, **kw),
        "create services": lambda api: core(api).create_namespaced_service(
            namespace, k8s.V1Service(metadata=meta, spec=k8s.V1ServiceSpec(cluster_ip="None")), **kw),
        "create serviceaccounts": lambda api: core(api).create_namespaced_service_account(
            namespace, k8s.V1ServiceAccount(metadata=meta), **kw),
        "create configmaps": lambda api: core(api).create_namespaced_config_map(
            namespace, k8s.V1ConfigMap(metadata=meta, data={"A": "1"}), **kw),
        "patch configmaps": lambda api: core(api).patch_namespaced_config_map(
            name, namespace, {"data": {"A": "2"}}, **kw),
        "create roles": lambda api: rbac(api).create_namespaced_role(
            namespace, k8s.V1Role(metadata=meta, rules=[lease_rule]), **kw),
        "create rolebindings": lambda api: rbac(api).create_namespaced_role_binding(
            namespace, binding, **kw),
        "create leases": lambda api: leases(api).create_namespaced_lease(
            namespace, k8s.V1Lease(metadata=meta, spec=k8s.V1LeaseSpec(holder_identity="x")), **kw),
        "patch leases": lambda api: leases(api).patch_namespaced_lease(
            name, namespace, {"metadata": {"annotations": {"phalanx.dev/x": "1"}}}, **kw),
        "update leases": lambda api: leases(api).replace_namespaced_lease(
            name, namespace, leases(api).read_namespaced_lease(name, namespace), **kw),
        "create podgroups": lambda api: custom(api).create_namespaced_custom_object(
            *PODGROUPS[:2], namespace, PODGROUPS[2], group, **kw),
        "patch podgroups": lambda api: custom(api).patch_namespaced_custom_object(
            *PODGROUPS[:2], namespace, PODGROUPS[2], name, {"spec": {"minMember": 2}}, **kw),
        "create poddisruptionbudgets": lambda api: k8s.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
            namespace, budget, **kw),
        "delete pods": lambda api: core(api).delete_namespaced_pod(name, namespace, **kw),
    }  # fmt: skip


def test_child_writes_go_through_in_a_teams_namespace(
    podgroup_crd: None, operator: Operator, namespace: str
) -> None:
    for what, write in child_writes(namespace)[1].items():
        try:
            write(operator.api)
        except ApiException as error:
            raise AssertionError(f"{what} in {namespace}: {error.status} {error.body}") from None


def test_every_child_write_is_refused_in_an_excluded_namespace(
    podgroup_crd: None, operator: Operator, kube_client: k8s.ApiClient
) -> None:
    """Dry runs (admission runs, nothing is stored), on a pod, a Lease, a ConfigMap and a Role
    the admin made there for the updates, the delete and the binding to act on."""
    name, writes = child_writes(EXCLUDED, dry_run="All")
    core, leases = k8s.CoreV1Api(kube_client), k8s.CoordinationV1Api(kube_client)
    meta = k8s.V1ObjectMeta(name=name, namespace=EXCLUDED)
    core.create_namespaced_pod(EXCLUDED, k8s.V1Pod(metadata=meta, spec=k8s.V1PodSpec(
        containers=[k8s.V1Container(name="c", image="busybox")])))  # fmt: skip
    leases.create_namespaced_lease(EXCLUDED, k8s.V1Lease(metadata=meta))
    core.create_namespaced_config_map(EXCLUDED, k8s.V1ConfigMap(metadata=meta))
    rbac = k8s.RbacAuthorizationV1Api(kube_client)
    rbac.create_namespaced_role(EXCLUDED, k8s.V1Role(metadata=meta, rules=[k8s.V1PolicyRule(
        api_groups=["coordination.k8s.io"], resources=["leases"], verbs=["get"])]))  # fmt: skip
    custom = k8s.CustomObjectsApi(kube_client)
    custom.create_namespaced_custom_object(*PODGROUPS[:2], EXCLUDED, PODGROUPS[2], {
        "apiVersion": "/".join(PODGROUPS[:2]), "kind": "PodGroup", "metadata": {"name": name},
        "spec": {"minMember": 1}})  # fmt: skip

    def refusal(what: str) -> str | None:
        """The API server's words when it refused `what`; None when it let it through."""
        try:
            writes[what](operator.api)
        except ApiException as error:
            return f"{error.status} {error.body}"
        return None

    try:
        # the policy takes effect once the API server's informer has it (about a second)
        wait_until(lambda: refusal("create serviceaccounts") is not None, 30, "the policy")
        for what in writes:
            words = refusal(what)
            assert words is not None, f"{what} in {EXCLUDED} went through"
            assert words.startswith(("403", "422")), words
            assert "operator.excludedNamespaces" in words, words
        granted = {verb for (_, resource), verbs in OPERATOR_RIGHTS.items()
                   if resource in {"pods", "services", "serviceaccounts", "configmaps", "roles",
                                   "rolebindings",
                                   "leases", "podgroups", "poddisruptionbudgets"}
                   for verb in set(verbs) & WRITES}  # fmt: skip
        assert granted == {what.split()[0] for what in writes}, "a granted write not tried"
        k8s.CoreV1Api(operator.api).list_namespaced_pod(EXCLUDED)  # reads stay allowed
        k8s.CoreV1Api(operator.api).create_namespaced_event(EXCLUDED, k8s.CoreV1Event(
            metadata=k8s.V1ObjectMeta(generate_name="scope-"),
            involved_object=k8s.V1ObjectReference(kind="TrainingJob", name="j", namespace=EXCLUDED),
            reason="Failed", message="told why", type="Warning"))  # fmt: skip
    finally:
        core.delete_namespaced_pod(name, EXCLUDED, grace_period_seconds=0)
        leases.delete_namespaced_lease(name, EXCLUDED)
        core.delete_namespaced_config_map(name, EXCLUDED)
        rbac.delete_namespaced_role(name, EXCLUDED)
        custom.delete_namespaced_custom_object(*PODGROUPS[:2], EXCLUDED, PODGROUPS[2], name)
