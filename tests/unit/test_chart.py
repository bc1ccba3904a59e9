"""The Helm chart (charts/phalanx): helm lint and the helm-unittest suites pass; the values
schema refuses typos; the env the chart sets is what the operator's and the API service's
settings read; every pod runs with secure defaults; the optional parts come and go with their
toggles. RBAC: test_chart_rbac_rules.py; deploy/: test_deploy_manifests.py.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
from pathlib import Path

import pytest

from harness.controlplane import REPO_ROOT
from phalanx.operator.settings import OperatorSettings
from phalanx.server.settings import ServerSettings
from tests.support.chart import (
    CHART,
    VALUE_SETS,
    Helm,
    Manifest,
    env_of,
    named,
    of_kind,
)

DEPLOY = REPO_ROOT / "deploy"
DASHBOARD = DEPLOY / "grafana/phalanx-jobs.json"

# -- helm's own checks -------------------------------------------------------------------------


def test_helm_lint_passes_strictly(helm: Helm) -> None:
    result = helm.run("lint", "--strict", str(CHART))
    assert result.returncode == 0, result.stdout + result.stderr


def test_helm_unittest_suites_pass(helm: Helm) -> None:
    result = helm.run("unittest", str(CHART))
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    suites = sorted(p.name for p in (CHART / "tests").glob("*_test.yaml"))
    assert re.search(rf"Test Suites:\s+{len(suites)} passed", result.stdout), result.stdout


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("foo=bar", "additional properties 'foo' not allowed"),
        ("operator.namespace=team-a", "additional properties 'namespace' not allowed"),
        (
            "operator.leaderElection.leaseSecond=10",
            "additional properties 'leaseSecond' not allowed",
        ),
        ("api.service.nodePort=30080", "additional properties 'nodePort' not allowed"),
        ("operator.nccl.NCCL_IB_DISABLE=1", "got number, want string"),
    ],
)
def test_the_schema_refuses_unknown_keys_and_wrong_types(
    helm: Helm, setting: str, message: str
) -> None:
    result = helm.run("lint", str(CHART), "--set", setting)
    assert result.returncode != 0
    assert message in result.stdout + result.stderr


def test_kubernetes_older_than_1_29_is_refused(helm: Helm) -> None:
    result = helm.run("template", "phalanx", str(CHART), "--kube-version", "1.28.9")
    assert result.returncode != 0
    assert "chart requires kubeVersion: >=1.29.0-0" in result.stderr
    assert helm.run("template", "phalanx", str(CHART), "--kube-version", "1.29.0").returncode == 0


def test_the_package_holds_the_helm_test_but_not_the_unittest_suites(
    helm: Helm, tmp_path: Path
) -> None:
    result = helm.run("package", str(CHART), "--destination", str(tmp_path))
    assert result.returncode == 0, result.stderr
    with tarfile.open(next(tmp_path.glob("phalanx-*.tgz"))) as archive:
        names = set(archive.getnames())
    assert "phalanx/templates/tests/smoke-test.yaml" in names
    assert "phalanx/dashboards/phalanx-jobs.json" in names
    assert "phalanx/values.schema.json" in names
    assert not [n for n in names if n.startswith("phalanx/tests/")]


# -- the env the chart sets is what the settings read -----------------------------------------


def settings_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], prefix: str) -> None:
    """Make `env` the only variables with `prefix` in the environment the settings read."""
    for name in [n for n in os.environ if n.startswith(prefix)]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def test_the_operator_reads_every_setting_the_chart_sets(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    operator = named(
        helm.render(
            "operator.namespaces={team-b,team-a}",
            "operator.nccl.NCCL_SOCKET_IFNAME=eth0",
            "operator.nccl.NCCL_IB_HCA=mlx5",
            "operator.unhealthyNodeLabels.example\\.com/health={Failing,Replace}",
            "operator.growCooldownSeconds=12.5",
            "operator.resyncSeconds=15",
        ),
        "Deployment",
        "phalanx-operator",
    )
    env = env_of(operator)
    fields = {f"PHALANX_OPERATOR_{name.upper()}" for name in OperatorSettings.model_fields}
    assert set(env) <= fields, set(env) - fields
    settings_env(monkeypatch, env, "PHALANX_OPERATOR_")
    settings = OperatorSettings()
    assert settings.namespaces == ["team-a", "team-b"]
    assert settings.nccl_defaults == {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "mlx5"}
    assert settings.unhealthy_labels() == {"example.com/health": frozenset({"Failing", "Replace"})}
    assert settings.grow_cooldown_seconds == 12.5
    assert settings.resync_seconds == 15
    assert settings.metrics_port == 8080
    assert settings.liveness_endpoint == "http://0.0.0.0:8081/healthz"
    assert settings.master_port == 29500
    assert settings.cluster_domain == "cluster.local"


def test_the_operator_defaults_in_the_chart_are_the_operators_own(
    default_render: list[Manifest], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chart's default values change nothing: it runs the operator as documented. But for
    agent injection, on by default in the chart: its image is the chart's own image reference,
    which the operator's process cannot know (unset there: nothing injected); and leader
    election, for the chart's replicas (a process started alone acts at once), with the pod's
    name as its identity."""
    settings_env(
        monkeypatch,
        env_of(named(default_render, "Deployment", "phalanx-operator")),
        "PHALANX_OPERATOR_",
    )
    from_chart = OperatorSettings()
    for name in OperatorSettings.model_fields:
        monkeypatch.delenv(f"PHALANX_OPERATOR_{name.upper()}", raising=False)
    injection = {
        "agent_image": "phalanx/controlplane:0.1.0",
        "agent_image_pull_policy": "IfNotPresent",
        "leader_election": True,
        "leader_owner": "phalanx-operator",
    }
    assert from_chart.model_dump(include=set(injection)) == injection
    unset = dict.fromkeys(injection) | {"leader_election": False}
    assert from_chart.model_copy(update=unset) == OperatorSettings()


def test_the_api_service_reads_every_setting_the_chart_sets(
    default_render: list[Manifest], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = env_of(named(default_render, "Deployment", "phalanx-api"))
    fields = {f"PHALANX_API_{name.upper()}" for name in ServerSettings.model_fields}
    assert set(env) <= fields, set(env) - fields
    settings_env(monkeypatch, env, "PHALANX_API_")
    from_chart = ServerSettings()
    assert (from_chart.host, from_chart.port) == ("0.0.0.0", 8000)
    assert not from_chart.insecure_local_credentials
    assert from_chart.tls, "the chart serves HTTPS by default"
    assert not from_chart.insecure_http
    assert from_chart.tls_cert_file == Path("/etc/phalanx/tls/tls.crt")
    for name in ServerSettings.model_fields:
        monkeypatch.delenv(f"PHALANX_API_{name.upper()}", raising=False)
    # Beside its address and certificate, the chart's settings are the service's defaults.
    served = {"host": "0.0.0.0", "tls_cert_file": from_chart.tls_cert_file,
              "tls_key_file": from_chart.tls_key_file}  # fmt: skip
    assert from_chart == ServerSettings().model_copy(update=served)


# -- pods ---------------------------------------------------------------------------------------


def pod_specs(manifests: list[Manifest]) -> list[tuple[str, Manifest]]:
    specs = [
        (m["metadata"]["name"], m["spec"]["template"]["spec"])
        for m in of_kind(manifests, "Deployment")
    ]
    return specs + [(m["metadata"]["name"], m["spec"]) for m in of_kind(manifests, "Pod")]


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_every_pod_runs_with_secure_defaults(helm: Helm, values: tuple[str, ...]) -> None:
    manifests = helm.render(*values) + helm.render(*values, tests=True)
    specs = pod_specs(manifests)
    assert len(specs) == (2 if "api.enabled=false" in values else 3)
    for name, spec in specs:
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True, name
        assert pod["runAsUser"] == 1000, name
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert spec["automountServiceAccountToken"] is True, name
        assert spec["enableServiceLinks"] is False, name
        assert not spec.get("hostNetwork"), name
        assert not spec.get("hostPID"), name
        assert {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}} in spec["volumes"], name
        for container in spec["containers"] + spec.get("initContainers", []):
            ctx = container["securityContext"]
            assert ctx["runAsNonRoot"] is True, name
            assert ctx["runAsUser"] == 1000, name
            assert ctx["readOnlyRootFilesystem"] is True, name
            assert ctx["allowPrivilegeEscalation"] is False, name
            assert ctx["capabilities"] == {"drop": ["ALL"]}, name
            assert ctx["seccompProfile"] == {"type": "RuntimeDefault"}, name
            assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"], name
            assert container["image"] == "phalanx/controlplane:0.1.0", name


def test_service_accounts_mount_no_token_unless_a_pod_asks(
    default_render: list[Manifest],
) -> None:
    accounts = of_kind(default_render, "ServiceAccount")
    assert sorted(a["metadata"]["name"] for a in accounts) == ["phalanx-api", "phalanx-operator"]
    assert all(a["automountServiceAccountToken"] is False for a in accounts)


def test_the_operator_runs_a_standby_replica_and_without_leader_election_only_one(
    default_render: list[Manifest], helm: Helm
) -> None:
    operator = named(default_render, "Deployment", "phalanx-operator")
    assert operator["spec"]["replicas"] == 2
    assert operator["spec"]["strategy"] == {"type": "RollingUpdate"}
    alone = named(
        helm.render("operator.leaderElection.enabled=false", "operator.replicas=1"),
        "Deployment", "phalanx-operator",
    )  # fmt: skip
    assert alone["spec"]["replicas"] == 1
    assert alone["spec"]["strategy"] == {"type": "Recreate"}
    container = operator["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["phalanx-operator"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8080, "health": 8081}


# -- toggles --------------------------------------------------------------------------------------


def components(manifests: list[Manifest]) -> set[str]:
    labels = [m["metadata"].get("labels") or {} for m in manifests]
    return {label.get("app.kubernetes.io/component", "") for label in labels}


def test_default_render_holds_the_crd_both_components_and_the_dashboard(
    default_render: list[Manifest],
) -> None:
    kinds = sorted((m["kind"], m["metadata"]["name"]) for m in default_render)
    assert kinds == [
        ("ClusterRole", "phalanx-api"),
        ("ClusterRole", "phalanx-operator"),
        ("ClusterRoleBinding", "phalanx-api"),
        ("ClusterRoleBinding", "phalanx-operator"),
        ("ConfigMap", "phalanx-dashboard"),
        ("CustomResourceDefinition", "trainingjobs.phalanx.dev"),
        ("Deployment", "phalanx-api"),
        ("Deployment", "phalanx-operator"),
        ("Role", "phalanx-operator-leader"),  # the operator replicas' leader Lease
        ("RoleBinding", "phalanx-operator-leader"),
        ("Secret", "phalanx-api-tls"),  # the API service's certificate (no cert-manager here)
        ("Service", "phalanx-api"),
        ("Service", "phalanx-operator-metrics"),
        ("ServiceAccount", "phalanx-api"),
        ("ServiceAccount", "phalanx-operator"),
        # the operator's writes refused in kube-system and the other excluded namespaces
        ("ValidatingAdmissionPolicy", "phalanx-operator-excluded-namespaces"),
        ("ValidatingAdmissionPolicyBinding", "phalanx-operator-excluded-namespaces"),
    ]
    crd = of_kind(default_render, "CustomResourceDefinition")[0]
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_api_enabled_false_removes_every_api_object(helm: Helm) -> None:
    manifests = helm.render("api.enabled=false", "serviceMonitor.enabled=true")
    assert "api" not in components(manifests)
    assert "operator" in components(manifests)
    tests = helm.render("api.enabled=false", tests=True)
    assert env_of_pod(named(tests, "Pod", "phalanx-test"))["PHALANX_API_URL"] == ""


def env_of_pod(pod: Manifest) -> dict[str, str]:
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"] if "value" in e}


def test_crds_enabled_false_leaves_the_crd_out(helm: Helm) -> None:
    assert not of_kind(helm.render("crds.enabled=false"), "CustomResourceDefinition")


def test_service_monitors_and_network_policies_only_when_enabled(
    helm: Helm, default_render: list[Manifest]
) -> None:
    assert not of_kind(default_render, "ServiceMonitor", "NetworkPolicy")
    on = helm.render("serviceMonitor.enabled=true", "networkPolicy.enabled=true")
    assert sorted(m["metadata"]["name"] for m in of_kind(on, "ServiceMonitor")) == [
        "phalanx-api",
        "phalanx-operator",
    ]
    policies = {m["metadata"]["name"]: m for m in of_kind(on, "NetworkPolicy")}
    assert sorted(policies) == ["phalanx-api", "phalanx-operator"]
    for policy in policies.values():
        assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
        egress_ports = {p["port"] for rule in policy["spec"]["egress"] for p in rule["ports"]}
        assert egress_ports == {443, 6443}
    # Every port a policy admits is one the component's pods serve.
    for name, policy in policies.items():
        deployment = named(on, "Deployment", name)
        served = {
            p["name"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
        }
        admitted = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
        assert admitted <= served, name


def test_the_dashboard_configmap_is_the_shipped_dashboard(default_render: list[Manifest]) -> None:
    config = named(default_render, "ConfigMap", "phalanx-dashboard")
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config["data"]["phalanx-jobs.json"] == DASHBOARD.read_text()
    assert json.loads(config["data"]["phalanx-jobs.json"])["uid"] == "phalanx-jobs"
