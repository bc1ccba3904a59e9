"""The chart on a real cluster: what it renders is valid for the API server, `helm test` passes,
the operator has only the rights the chart gives it, its standby replica finishes a resize whose
leader froze, and `helm uninstall` leaves nothing of Phalanx behind (the CRD stays, by
design)."""

from __future__ import annotations

import time

import pytest
from kubernetes import client as k8s

from tests.e2e.cluster import REPO_ROOT, KindCluster, for_kind, record, run, wait_for
from tests.e2e.conftest import RELEASE, VALUES
from tests.e2e.faults import freeze_pod
from tests.e2e.jobs import training_job


def test_the_chart_renders_objects_the_api_server_accepts(kind: KindCluster, phalanx: str) -> None:
    """`helm template | kubectl apply --dry-run=server` (the test hook's pod needs its service
    account to exist, so hooks are left out, as `helm install` would create them apart)."""
    rendered = kind.helm("template", RELEASE, str(REPO_ROOT / "charts/phalanx"), "--namespace",
                         phalanx, "--values", str(VALUES), "--skip-tests").stdout  # fmt: skip
    applied = kind.kubectl("apply", "--dry-run=server", "-f", "-", stdin=rendered).stdout
    assert "deployment.apps/phalanx-operator" in applied, applied
    assert "customresourcedefinition.apiextensions.k8s.io/trainingjobs.phalanx.dev" in applied


def test_helm_test_passes(kind: KindCluster, phalanx: str) -> None:
    done = kind.helm("test", RELEASE, "--namespace", phalanx, check=False)
    # The test pod is deleted when it succeeds, and kept when it fails: its logs say why.
    logs = kind.kubectl("logs", "-n", phalanx, "phalanx-test", check=False)
    assert done.returncode == 0, done.stdout + done.stderr + logs.stdout + logs.stderr


def test_the_operator_cannot_read_secrets(kind: KindCluster, phalanx: str) -> None:
    accounts = kind.core.list_namespaced_service_account(phalanx).items
    components = {"operator", "api"}
    names = [
        str(a.metadata.name)
        for a in accounts
        if str((a.metadata.labels or {}).get("app.kubernetes.io/component")) in components
    ]
    assert len(names) == 2, names
    for name in names:
        identity = f"system:serviceaccount:{phalanx}:{name}"
        for verb in ("get", "list", "watch"):
            asked = kind.kubectl(
                "auth", "can-i", verb, "secrets", "--all-namespaces", "--as", identity, check=False
            )
            assert asked.stdout.strip() == "no", f"{identity} may {verb} secrets"
    operator = next(n for n in names if n.endswith("operator"))
    asked = kind.kubectl("auth", "can-i", "create", "pods", "-n", "default",
                         "--as", f"system:serviceaccount:{phalanx}:{operator}", check=False)  # fmt: skip
    assert asked.stdout.strip() == "yes"  # the check above can tell yes from no


def test_the_standby_operator_finishes_a_resize_when_the_leader_freezes(
    kind: KindCluster, phalanx: str, namespace: str
) -> None:
    """The chart's two operator replicas. The leader deleted the moment a resize's epoch is
    written would hand over at once (it releases the Lease on SIGTERM); frozen instead (its
    cgroup's freezer: a stalled machine, which renews nothing and says nothing), it leaves the
    resize half done. The standby takes the Lease once it expires (leaseSeconds 10) and finishes
    the resize, with no duplicate pod; thawed, the old leader acts no more and restarts."""
    kind.create_job(namespace, for_kind(training_job("resize", steps=300, nodes=(1, 3))))
    running = kind.wait_status(namespace, "resize", lambda s: s.get("phase") == "Running" and s.get("nodes") == 3,
                               "Running on 3 nodes", timeout=300)  # fmt: skip
    leader = kind.operator_leader()
    operators = kind.core.list_namespaced_pod(
        phalanx, label_selector="app.kubernetes.io/component=operator"
    ).items
    assert leader in {p.metadata.name for p in operators}, "the leader is one of the replicas"
    assert len(operators) == 2, "the chart runs a standby replica"
    kind.kubectl("scale", "tj/resize", "--replicas=2", "-n", namespace)
    # The executor writes the new epoch to the status before it touches any pod: freezing the
    # leader the moment the epoch moves leaves the resize half done.
    kind.wait_status(namespace, "resize", lambda s: s.get("epoch", 0) > running["epoch"],
                     "the resize to start", timeout=60)  # fmt: skip
    [leading] = [p for p in operators if p.metadata.name == leader]
    freeze_pod(leading)
    frozen = time.time()
    try:
        wait_for(lambda: kind.operator_leader() not in (None, leader), 120, "a standby to lead",
                 interval=0.2)  # fmt: skip
        takeover_s = round(time.time() - frozen, 1)
    finally:
        freeze_pod(leading, frozen=False)
    print(f"leader frozen -> the standby leads: {takeover_s} s (leaseSeconds 10)")
    record("operator-leader-frozen", takeover_s=takeover_s, lease_seconds=10)
    wait_for(lambda: _restarts(kind, phalanx, leader) > 0, 120,
             "the thawed leader to exit and stand by anew")  # fmt: skip
    done = kind.wait_status(
        namespace, "resize", lambda s: s.get("phase") == "Succeeded", "Succeeded", timeout=600
    )
    assert done["nodes"] == 2, done
    pods = kind.node_pods(namespace, "resize")
    seats = [
        (p.metadata.labels["phalanx.dev/epoch"], p.metadata.labels["phalanx.dev/node-rank"])
        for p in pods
    ]
    assert len(seats) == len(set(seats)), f"duplicate pods: {sorted(seats)}"
    # The last epoch's pods: those created for it, and those carried into it in place (they keep
    # the labels of the epoch that created them; status.current.ranks names them).
    carried = set((done.get("current") or {}).get("ranks") or {})
    last = [
        p
        for p in pods
        if p.metadata.labels["phalanx.dev/epoch"] == str(done["epoch"])
        or p.metadata.name in carried
    ]
    assert len(last) == 2, ([p.metadata.name for p in pods], carried)


def _restarts(kind: KindCluster, namespace: str, pod: str) -> int:
    statuses = kind.core.read_namespaced_pod(pod, namespace).status.container_statuses or []
    return sum(s.restart_count for s in statuses)


@pytest.mark.last
def test_helm_uninstall_leaves_no_phalanx_pods_services_roles_or_leases(
    kind: KindCluster, phalanx: str
) -> None:
    def namespaces_left() -> list[str]:  # with why the namespace controller holds each one
        return [
            f"{ns.metadata.name}: "
            + "; ".join(
                c.message or c.type for c in ns.status.conditions or () if c.status == "True"
            )
            for ns in kind.core.list_namespace(label_selector="phalanx.dev/e2e=true").items
        ]

    try:
        wait_for(lambda: not namespaces_left(), 180, "the test namespaces to be gone")
    except AssertionError as error:
        raise AssertionError(f"{error}: {namespaces_left()}") from None
    kind.helm("uninstall", RELEASE, "--namespace", phalanx, "--wait", "--timeout", "3m")
    rbac = k8s.RbacAuthorizationV1Api(kind.api)
    leases = k8s.CoordinationV1Api(kind.api)

    def leftovers() -> list[str]:
        found = []
        for selector in ("app.kubernetes.io/instance=" + RELEASE, "phalanx.dev/job"):
            found += [
                f"pod/{o.metadata.name}"
                for o in kind.core.list_pod_for_all_namespaces(label_selector=selector).items
            ]
            found += [
                f"service/{o.metadata.name}"
                for o in kind.core.list_service_for_all_namespaces(label_selector=selector).items
            ]
            found += [
                f"role/{o.metadata.name}"
                for o in rbac.list_role_for_all_namespaces(label_selector=selector).items
            ]
            found += [
                f"clusterrole/{o.metadata.name}"
                for o in rbac.list_cluster_role(label_selector=selector).items
            ]
            found += [
                f"lease/{o.metadata.name}"
                for o in leases.list_lease_for_all_namespaces(label_selector=selector).items
            ]
        return found

    def leader_lease_left() -> bool:  # the operator's, not the chart's: owned by its account
        try:
            leases.read_namespaced_lease("phalanx-operator-leader", phalanx)
        except k8s.ApiException as error:
            return bool(error.status != 404)
        return True

    wait_for(lambda: not leftovers(), 120, "nothing of Phalanx left", interval=2)
    wait_for(lambda: not leader_lease_left(), 60, "the operators' leader Lease gone", interval=1)
    crds = run(
        [
            kind.kubectl_bin,
            "--kubeconfig",
            kind.kubeconfig,
            "get",
            "crd",
            "trainingjobs.phalanx.dev",
        ],
        check=False,
    )
    assert crds.returncode == 0, "the CRD is kept on uninstall (helm.sh/resource-policy: keep)"
