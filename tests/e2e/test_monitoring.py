"""Monitoring as installed: a real Prometheus (built from its Go module, `tests/tools/kind.sh
prometheus`) scrapes the operator with the scrape configuration the Prometheus Operator makes of
the chart's own ServiceMonitor (`tests/e2e/prometheus_operator.py`), while a training job runs
and has a worker killed. Then every query of the shipped Grafana dashboard, its variables set to
that job, must return series; each query that selects by `job` must return the training job's
own. With the ServiceMonitor's `honorLabels` off, the Prometheus Operator's target labels would
take `namespace` and `job` (ours would be exported_*), and those queries would select nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

import pytest
import yaml
from kubernetes import client as k8s

from tests.e2e.cluster import KIND_SH, REPO_ROOT, KindCluster, for_kind, run, wait_for
from tests.e2e.conftest import SYSTEM_NAMESPACE, VALUES
from tests.e2e.faults import kill_worker
from tests.e2e.jobs import training_job
from tests.e2e.prometheus_operator import scrape_configs

pytestmark = pytest.mark.e2e
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "phalanx-jobs.json"
JOB = "monitored"
SCRAPE = "5s"
PROMETHEUS = "prometheus"


def operator_service_monitor(kind: KindCluster) -> dict[str, Any]:
    """The chart's ServiceMonitor of the operator, rendered with the suite's values."""
    rendered = kind.helm(
        "template", "phalanx", str(REPO_ROOT / "charts/phalanx"), "--namespace", SYSTEM_NAMESPACE,
        "--values", str(VALUES), "--set", "serviceMonitor.enabled=true",
        "--set", f"serviceMonitor.interval={SCRAPE}", "--show-only", "templates/servicemonitor.yaml",
    ).stdout  # fmt: skip
    monitors = [d for d in yaml.safe_load_all(rendered) if d]
    [monitor] = [
        m for m in monitors
        if m["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/component") == "operator"
    ]  # fmt: skip
    return cast(dict[str, Any], monitor)


def install_prometheus(kind: KindCluster, namespace: str, config: dict[str, Any]) -> None:
    """Prometheus in `namespace`, on the control-plane node (the suite stops workers), allowed
    to discover the operator's endpoints in the Phalanx namespace."""
    image = run(["bash", str(KIND_SH), "prometheus"], timeout=1500).stdout.strip().splitlines()[-1]
    core, rbac = kind.core, kind_rbac(kind)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": PROMETHEUS}})
    rbac.create_namespaced_role(SYSTEM_NAMESPACE, {
        "metadata": {"name": f"{namespace}-prometheus"},
        "rules": [{"apiGroups": [""], "resources": ["endpoints", "services", "pods"],
                   "verbs": ["get", "list", "watch"]}],
    })  # fmt: skip
    rbac.create_namespaced_role_binding(SYSTEM_NAMESPACE, {
        "metadata": {"name": f"{namespace}-prometheus"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": f"{namespace}-prometheus"},
        "subjects": [{"kind": "ServiceAccount", "name": PROMETHEUS, "namespace": namespace}],
    })  # fmt: skip
    core.create_namespaced_config_map(namespace, {
        "metadata": {"name": PROMETHEUS}, "data": {"prometheus.yml": yaml.safe_dump(config)},
    })  # fmt: skip
    labels = {"app": PROMETHEUS}
    kind_apps(kind).create_namespaced_deployment(namespace, {
        "metadata": {"name": PROMETHEUS},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {
                "serviceAccountName": PROMETHEUS,
                "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
                "tolerations": [{"key": "node-role.kubernetes.io/control-plane",
                                 "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{
                    "name": PROMETHEUS, "image": image, "imagePullPolicy": "Never",
                    "args": ["--config.file=/etc/prometheus/prometheus.yml",
                             "--storage.tsdb.path=/prometheus", "--web.listen-address=:9090"],
                    "ports": [{"name": "web", "containerPort": 9090}],
                    "readinessProbe": {"httpGet": {"path": "/-/ready", "port": 9090}},
                    "volumeMounts": [{"name": "config", "mountPath": "/etc/prometheus"},
                                     {"name": "data", "mountPath": "/prometheus"}],
                }],
                "volumes": [{"name": "config", "configMap": {"name": PROMETHEUS}},
                            {"name": "data", "emptyDir": {}}],
            },
        }},
    })  # fmt: skip
    core.create_namespaced_service(namespace, {
        "metadata": {"name": PROMETHEUS},
        "spec": {"selector": labels, "ports": [{"name": "web", "port": 9090, "targetPort": 9090}]},
    })  # fmt: skip
    kind.kubectl("-n", namespace, "rollout", "status", f"deployment/{PROMETHEUS}", "--timeout=180s")


def kind_rbac(kind: KindCluster) -> k8s.RbacAuthorizationV1Api:
    return k8s.RbacAuthorizationV1Api(kind.api)


def kind_apps(kind: KindCluster) -> k8s.AppsV1Api:
    return k8s.AppsV1Api(kind.api)


def ask(kind: KindCluster, namespace: str, path: str, **params: str) -> Any:
    """Prometheus's HTTP API through the API server's service proxy: its `data`."""
    api = kind.api
    method, url, headers, _, _ = api.param_serialize(
        "GET", f"/api/v1/namespaces/{{namespace}}/services/{PROMETHEUS}:9090/proxy/{path}",
        path_params={"namespace": namespace}, query_params=list(params.items()),
        auth_settings=["BearerToken"],
    )  # fmt: skip
    answer: Any = api.call_api(method, url, headers)
    try:
        body = json.loads(answer.read())
    finally:
        answer.response.release_conn()
    assert body.get("status") == "success", body
    return body["data"]


def dashboard_queries(namespace: str) -> list[tuple[str, str]]:
    """Every panel query of the shipped dashboard as (panel title, PromQL), its variables set."""
    board = json.loads(DASHBOARD.read_text())
    found = []
    for panel in board["panels"]:
        for target in panel["targets"]:
            # As Grafana sets a single value: as it is (DNS names hold no regex metacharacter).
            query = target["expr"].replace("$namespace", namespace).replace("$job", JOB)
            found.append((panel["title"], query))
    return found


def missing_series(kind: KindCluster, namespace: str) -> list[str]:
    """The dashboard queries (and its variables) that return nothing for the job yet."""
    missing = []
    values = ask(
        kind, namespace, "api/v1/label/namespace/values", **{"match[]": "phalanx_world_size"}
    )
    if namespace not in values:
        missing.append(f"variable namespace: {values}")
    jobs = ask(kind, namespace, "api/v1/label/job/values",
               **{"match[]": f'phalanx_world_size{{namespace="{namespace}"}}'})  # fmt: skip
    if JOB not in jobs:
        missing.append(f"variable job: {jobs}")
    for title, query in dashboard_queries(namespace):
        series = ask(kind, namespace, "api/v1/query", query=query)["result"]
        by_job = "job=~" in query
        if not series or (by_job and not any(s["metric"].get("job") == JOB for s in series)):
            missing.append(f"{title}: {query} -> {[s['metric'] for s in series]}")
    return missing


@pytest.fixture
def prometheus(kind: KindCluster, phalanx: str, namespace: str) -> Iterator[str]:
    monitor = operator_service_monitor(kind)
    config = {"global": {"scrape_interval": SCRAPE, "evaluation_interval": SCRAPE},
              "scrape_configs": scrape_configs(monitor)}  # fmt: skip
    assert config["scrape_configs"][0]["honor_labels"] is True
    try:
        install_prometheus(kind, namespace, config)
        yield namespace
    finally:
        for delete in (kind_rbac(kind).delete_namespaced_role_binding,
                       kind_rbac(kind).delete_namespaced_role):  # fmt: skip
            delete(f"{namespace}-prometheus", SYSTEM_NAMESPACE, _preload_content=False)


def test_every_dashboard_query_returns_the_training_jobs_series(
    kind: KindCluster, namespace: str, prometheus: str
) -> None:
    kind.create_job(namespace, for_kind(training_job(JOB, steps=2000, nodes=(2, 2))))
    kind.wait_status(namespace, JOB, lambda s: (s.get("progress") or {}).get("step", 0) >= 5,
                     "training", timeout=300)  # fmt: skip
    kill_worker(kind, kind.running_pod(namespace, JOB, 1, 1))
    kind.wait_status(namespace, JOB,
                     lambda s: s.get("epoch", 0) >= 2 and (s.get("progress") or {}).get("epoch") == s["epoch"],
                     "recovered: the new epoch reports steps", timeout=300)  # fmt: skip

    last: list[str] = []

    def complete() -> bool:
        nonlocal last
        last = missing_series(kind, namespace)
        return not last

    try:
        wait_for(complete, 120, "every dashboard query to return the job's series", interval=5)
    except (TimeoutError, AssertionError) as error:
        raise AssertionError("queries without the job's series:\n" + "\n".join(last)) from error
    assert len(dashboard_queries(namespace)) >= 13, "every panel's query was asked"
