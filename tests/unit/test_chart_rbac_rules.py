"""The chart's RBAC names what it uses: no wildcard, nothing on secrets, and every verb justified
by the code that uses it (a table below); with namespaces to watch, Roles there and only what
must be cluster-wide stays so; the helm test pod holds no rights.
"""

from __future__ import annotations

import re

import pytest

from tests.support.chart import (
    CHART,
    VALUE_SETS,
    Helm,
    Manifest,
    of_kind,
)

# Every right the chart grants, and the code that uses it: (apiGroup, resource) -> verb -> why.
# A rule the chart renders that is not here fails, and so does one here that it no longer renders.
OPERATOR_RIGHTS: dict[tuple[str, str], dict[str, str]] = {
    ("phalanx.dev", "trainingjobs"): {
        "get": "cluster/status_write.py gone: a job deleted since its status write was refused",
        "list": "kopf watches TrainingJobs (handlers.py on.event)",
        "watch": "kopf watches TrainingJobs (handlers.py on.event)",
        "patch": "kopf removes the finalizer phalanx.dev/operator earlier operators put on",
        "delete": "cluster/writer.py delete_job (ttlSecondsAfterFinished)",
    },
    ("phalanx.dev", "trainingjobs/status"): {
        "update": "cluster/writer.py write_status: replace_namespaced_custom_object_status",
    },
    ("phalanx.dev", "trainingjobs/finalizers"): {
        "update": "children.py owner_reference blockOwnerDeletion (OwnerReferencesPermission"
        "Enforcement)",
    },
    ("", "pods"): {
        "list": "watch.py ListWatch._list (cluster/pod_watch.py PodWatch)",
        "watch": "watch.py ListWatch._watch (cluster/pod_watch.py PodWatch)",
        "create": "cluster/writer.py CreateNodePod, CreateStandbyPod",
        "delete": "cluster/writer.py delete_pods",
    },
    ("", "services"): {"create": "cluster/writer.py ensure_children headless_service"},
    ("", "serviceaccounts"): {"create": "cluster/writer.py ensure_children service_account"},
    ("", "configmaps"): {
        "create": "cluster/writer.py apply (server-side apply of an absent one)",
        "patch": "cluster/writer.py apply (server-side apply)",
    },
    ("", "events"): {"create": "cluster/writer.py emit; kopf's post_event"},
    ("rbac.authorization.k8s.io", "roles"): {
        "create": "cluster/writer.py ensure_children role",
        "patch": "report_leases.py grant_shards (a job grown past its report Leases)",
    },
    ("rbac.authorization.k8s.io", "rolebindings"): {
        "create": "cluster/writer.py ensure_children role_binding",
    },
    ("coordination.k8s.io", "leases"): {
        "list": "cluster/pod_watch.py LeaseWatch",
        "watch": "cluster/pod_watch.py LeaseWatch",
        "create": "cluster/writer.py ensure_children heartbeat_lease, report_leases; publish "
        "assignment_lease",
        "get": "held to grant it in the job's Role (children.py role): escalation check",
        "update": "held to grant it in the job's Role (children.py role): escalation check",
        "patch": "cluster/writer.py publish (the assignment); report_leases.py drop_reports",
    },
    ("policy", "poddisruptionbudgets"): {
        "create": "cluster/writer.py ensure_children disruption_budget"
    },
    ("kueue.x-k8s.io", "workloads"): {
        "list": "handlers.py kopf.index workloads_by_job",
        "watch": "handlers.py kopf.index workloads_by_job",
        "create": "kueue.py Workloads.ensure",
        "patch": "kueue.py Workloads.ensure (spec.active)",
        "get": "kueue.py Workloads._replace_status",
    },
    ("kueue.x-k8s.io", "workloads/status"): {"update": "kueue.py Workloads._replace_status"},
    ("scheduling.x-k8s.io", "podgroups"): {
        "create": "cluster/writer.py ensure_pod_group pod_group",
        "patch": "cluster/writer.py ensure_pod_group (minMember)",
    },
    ("scheduling.k8s.io", "priorityclasses"): {"get": "kueue.py Workloads._priority"},
    ("", "nodes"): {
        "list": "handlers.py kopf.index all_nodes",
        "watch": "handlers.py kopf.index all_nodes",
    },
    ("apiextensions.k8s.io", "customresourcedefinitions"): {
        "list": "kopf's resource_observer (observation.py)",
        "watch": "kopf's resource_observer (observation.py)",
    },
}
# Only when the operator watches some namespaces: kopf's namespace_observer.
OPERATOR_NAMESPACED_MODE_RIGHTS = {
    ("", "namespaces"): {
        "list": "kopf's namespace_observer (observation.py), not clusterwide",
        "watch": "kopf's namespace_observer (observation.py), not clusterwide",
    },
}
# The replicas' leader Lease, in the release namespace (templates/operator/leader-election.yaml).
LEADER_RIGHTS = {
    ("coordination.k8s.io", "leases"): {
        "create": "leader.py LeaderElector._create: the first replica makes the Lease",
        "get": "leader.py LeaderElector._try: who holds it (by name)",
        "update": "leader.py LeaderElector._try, release: take, renew, release (by name)",
    },
    ("", "serviceaccounts"): {
        "get": "leader.py LeaderElector._create: the Lease's owner, its own (by name)",
    },
}
API_RIGHTS: dict[tuple[str, str], dict[str, str]] = {
    ("authentication.k8s.io", "tokenreviews"): {"create": "auth.py Authorizer._review"},
    ("authorization.k8s.io", "subjectaccessreviews"): {"create": "auth.py Authorizer._access"},
    ("phalanx.dev", "trainingjobs"): {
        "list": "cache.py JobCache._relist",
        "watch": "cache.py JobCache._follow",
        "get": "kube.py KubeJobs.get (scale)",
        "create": "kube.py KubeJobs.create",
        "delete": "kube.py KubeJobs.delete",
        "patch": "kube.py KubeJobs.patch_spec (suspend, resume)",
    },
    ("phalanx.dev", "trainingjobs/scale"): {"patch": "kube.py KubeJobs.scale"},
    ("", "events"): {"list": "kube.py KubeJobs.events"},
    ("", "pods/log"): {"get": "kube.py KubeJobs.logs"},
}


def rights(roles: list[Manifest]) -> dict[tuple[str, str], set[str]]:
    """(apiGroup, resource) -> verbs, over every rule of `roles`."""
    granted: dict[tuple[str, str], set[str]] = {}
    for role in roles:
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    granted.setdefault((group, resource), set()).update(rule["verbs"])
    return granted


def roles_of(manifests: list[Manifest], component: str) -> list[Manifest]:
    return [
        m
        for m in of_kind(manifests, "ClusterRole", "Role")
        if m["metadata"]["labels"]["app.kubernetes.io/component"] == component
    ]


def expected(table: dict[tuple[str, str], dict[str, str]]) -> dict[tuple[str, str], set[str]]:
    return {key: set(verbs) for key, verbs in table.items()}


# -- RBAC ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_rbac_has_no_wildcard_and_nothing_on_secrets(helm: Helm, values: tuple[str, ...]) -> None:
    roles = of_kind(helm.render(*values, tests=True), "ClusterRole", "Role")
    roles += of_kind(helm.render(*values), "ClusterRole", "Role")
    assert roles
    for role in roles:
        where = f"{role['kind']} {role['metadata']['name']}"
        for rule in role["rules"]:
            assert "nonResourceURLs" not in rule, where
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert not [v for v in rule.get(field, []) if "*" in v], f"{where}: {rule}"
            assert not [r for r in rule["resources"] if r.split("/")[0] == "secrets"], where
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), where


def test_the_operator_holds_exactly_the_rights_its_code_uses(
    default_render: list[Manifest],
) -> None:
    cluster_role, leader_role = roles_of(default_render, "operator")
    assert (cluster_role["kind"], cluster_role["metadata"]["name"]) == (
        "ClusterRole", "phalanx-operator"
    )  # fmt: skip
    assert rights([cluster_role]) == expected(OPERATOR_RIGHTS)
    # its replicas' leader Lease (leader.py), in phalanx-system, by name
    assert (leader_role["kind"], leader_role["metadata"]["name"]) == (
        "Role", "phalanx-operator-leader"
    )  # fmt: skip
    assert rights([leader_role]) == expected(LEADER_RIGHTS)


def test_watching_namespaces_makes_roles_there_and_keeps_only_cluster_rights_cluster_wide(
    helm: Helm,
) -> None:
    manifests = helm.render("operator.namespaces={team-a,team-b}")
    roles = roles_of(manifests, "operator")
    cluster = [r for r in roles if r["kind"] == "ClusterRole"]
    namespaced = [r for r in roles if r["kind"] == "Role"]
    # and the leader Lease's Role in the release namespace, whatever the operator watches
    assert sorted(r["metadata"]["namespace"] for r in namespaced) == [
        "phalanx-system", "team-a", "team-b"
    ]  # fmt: skip
    cluster_scoped = {
        ("", "nodes"),
        ("scheduling.k8s.io", "priorityclasses"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
        ("", "namespaces"),
    }
    assert set(rights(cluster)) == cluster_scoped
    for role in namespaced:
        assert not cluster_scoped & set(rights([role]))
    watched = [r for r in roles if r["metadata"]["name"] != "phalanx-operator-leader"]
    assert rights(watched) == expected({**OPERATOR_RIGHTS, **OPERATOR_NAMESPACED_MODE_RIGHTS})
    bindings = of_kind(manifests, "RoleBinding")
    assert sorted(b["metadata"]["namespace"] for b in bindings) == [
        "phalanx-system", "team-a", "team-b"
    ]  # fmt: skip
    for binding in bindings:
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "phalanx-operator", "namespace": "phalanx-system"}
        ]


def test_the_api_service_holds_exactly_the_rights_its_code_uses(
    default_render: list[Manifest],
) -> None:
    assert rights(roles_of(default_render, "api")) == expected(API_RIGHTS)


def test_the_helm_test_pod_holds_no_rights(helm: Helm) -> None:
    tests = helm.render(tests=True)
    assert not of_kind(tests, "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
    assert of_kind(tests, "Pod")


def test_every_rbac_rule_has_a_comment_naming_the_code_that_uses_it() -> None:
    for template in sorted(CHART.glob("templates/**/rbac.yaml")):
        lines = template.read_text().splitlines()
        rules = [i for i, line in enumerate(lines) if line.lstrip().startswith("- apiGroups:")]
        assert rules, template
        for i in rules:
            assert lines[i - 1].lstrip().startswith("#"), f"{template.name}:{i + 1} no comment"
            comment = " ".join(lines[j] for j in range(max(0, i - 5), i))
            assert re.search(r"\w+\.py|kopf", comment), f"{template.name}:{i + 1}: {comment}"


def test_bindings_point_at_the_chart_service_accounts(default_render: list[Manifest]) -> None:
    accounts = {m["metadata"]["name"] for m in of_kind(default_render, "ServiceAccount")}
    roles = {m["metadata"]["name"] for m in of_kind(default_render, "ClusterRole")}
    for binding in of_kind(default_render, "ClusterRoleBinding"):
        assert binding["roleRef"]["name"] in roles
        for subject in binding["subjects"]:
            assert subject["name"] in accounts
            assert subject["namespace"] == "phalanx-system"
