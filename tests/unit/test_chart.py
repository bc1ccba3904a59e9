"""The Helm chart (charts/phalanx) and the plain manifests rendered from it (deploy/).

Covers: helm lint and the helm-unittest suites pass; the values schema refuses typos; RBAC is
least privilege (no wildcard, nothing on secrets, every verb justified by the code that uses
it); the env the chart sets is what the operator's and the API service's settings read; every
pod runs with secure defaults; the optional parts come and go with their toggles; deploy/ equals
the chart's default render, and the drift check fails when it does not; `kubectl kustomize
deploy/` builds. helm and helm-unittest are built once from Go modules (make chart-tools).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from phalanx.operator.settings import OperatorSettings
from phalanx.server.settings import ServerSettings
from tests.support.chart import (
    CHART,
    RENDER_DEPLOY,
    Helm,
    Manifest,
    build_helm,
    env_of,
    named,
    of_kind,
)
from tests.support.controlplane import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"
DASHBOARD = DEPLOY / "grafana/phalanx-jobs.json"
K8S_BINARIES = REPO_ROOT / "tests/tools/k8s-binaries.sh"

# Every right the chart grants, and the code that uses it: (apiGroup, resource) -> verb -> why.
# A rule the chart renders that is not here fails, and so does one here that it no longer renders.
OPERATOR_RIGHTS: dict[tuple[str, str], dict[str, str]] = {
    ("phalanx.dev", "trainingjobs"): {
        "list": "kopf watches TrainingJobs (handlers.py on.event, daemon)",
        "watch": "kopf watches TrainingJobs (handlers.py on.event, daemon)",
        "patch": "kopf adds and removes its finalizer phalanx.dev/operator",
        "delete": "execute.py _delete_job (ttlSecondsAfterFinished)",
    },
    ("phalanx.dev", "trainingjobs/status"): {
        "update": "execute.py _write_status: replace_namespaced_custom_object_status",
    },
    ("phalanx.dev", "trainingjobs/finalizers"): {
        "update": "children.py owner_reference blockOwnerDeletion (OwnerReferencesPermission"
        "Enforcement)",
    },
    ("", "pods"): {
        "list": "handlers.py kopf.index pods_by_job",
        "watch": "handlers.py kopf.index pods_by_job",
        "create": "execute.py CreateNodePod, CreateStandbyPod",
        "delete": "execute.py _delete_pods",
    },
    ("", "services"): {"create": "execute.py _ensure_children headless_service"},
    ("", "serviceaccounts"): {"create": "execute.py _ensure_children service_account"},
    ("", "events"): {"create": "execute.py _emit; kopf's post_event"},
    ("rbac.authorization.k8s.io", "roles"): {"create": "execute.py _ensure_children role"},
    ("rbac.authorization.k8s.io", "rolebindings"): {
        "create": "execute.py _ensure_children role_binding",
    },
    ("coordination.k8s.io", "leases"): {
        "list": "handlers.py kopf.index heartbeats_by_job",
        "watch": "handlers.py kopf.index heartbeats_by_job",
        "create": "execute.py _ensure_children heartbeat_lease",
        "get": "held to grant it in the job's Role (children.py role): escalation check",
        "update": "held to grant it in the job's Role (children.py role): escalation check",
        "patch": "held to grant it in the job's Role (children.py role): escalation check",
    },
    ("scheduling.x-k8s.io", "podgroups"): {"create": "execute.py _create_custom pod_group"},
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

VALUE_SETS = {
    "defaults": (),
    "namespaces": ("operator.namespaces={team-a,team-b}",),
    "no-api": ("api.enabled=false",),
    "everything-on": (
        "serviceMonitor.enabled=true",
        "networkPolicy.enabled=true",
        "operator.nccl.NCCL_SOCKET_IFNAME=eth0",
    ),
}


@pytest.fixture(scope="session")
def helm() -> Helm:
    """The pinned helm and helm-unittest; the first build takes a few minutes."""
    return build_helm()


@pytest.fixture(scope="session")
def default_render(helm: Helm) -> list[Manifest]:
    return helm.render()


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
        ("operator.replicas=2", "additional properties 'replicas' not allowed"),
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
    roles = roles_of(default_render, "operator")
    assert [r["kind"] for r in roles] == ["ClusterRole"]
    assert rights(roles) == expected(OPERATOR_RIGHTS)


def test_watching_namespaces_makes_roles_there_and_keeps_only_cluster_rights_cluster_wide(
    helm: Helm,
) -> None:
    manifests = helm.render("operator.namespaces={team-a,team-b}")
    roles = roles_of(manifests, "operator")
    cluster = [r for r in roles if r["kind"] == "ClusterRole"]
    namespaced = [r for r in roles if r["kind"] == "Role"]
    assert sorted(r["metadata"]["namespace"] for r in namespaced) == ["team-a", "team-b"]
    assert set(rights(cluster)) == {
        ("", "nodes"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
        ("", "namespaces"),
    }
    for role in namespaced:
        assert not {("", "nodes"), ("", "namespaces")} & set(rights([role]))
    assert rights(roles) == expected({**OPERATOR_RIGHTS, **OPERATOR_NAMESPACED_MODE_RIGHTS})
    bindings = of_kind(manifests, "RoleBinding")
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
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
    assert settings.grow_cooldown_seconds == 12.5
    assert settings.resync_seconds == 15
    assert settings.metrics_port == 8080
    assert settings.liveness_endpoint == "http://0.0.0.0:8081/healthz"
    assert settings.master_port == 29500
    assert settings.cluster_domain == "cluster.local"


def test_the_operator_defaults_in_the_chart_are_the_operators_own(
    default_render: list[Manifest], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chart's default values change nothing: it runs the operator as documented."""
    settings_env(
        monkeypatch,
        env_of(named(default_render, "Deployment", "phalanx-operator")),
        "PHALANX_OPERATOR_",
    )
    from_chart = OperatorSettings()
    for name in OperatorSettings.model_fields:
        monkeypatch.delenv(f"PHALANX_OPERATOR_{name.upper()}", raising=False)
    assert from_chart == OperatorSettings()


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
    for name in ServerSettings.model_fields:
        monkeypatch.delenv(f"PHALANX_API_{name.upper()}", raising=False)
    assert from_chart == ServerSettings()


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


def test_the_operator_is_a_single_replica_recreated_on_rollout(
    default_render: list[Manifest],
) -> None:
    operator = named(default_render, "Deployment", "phalanx-operator")
    assert operator["spec"]["replicas"] == 1
    assert operator["spec"]["strategy"] == {"type": "Recreate"}
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
        ("Service", "phalanx-api"),
        ("Service", "phalanx-operator-metrics"),
        ("ServiceAccount", "phalanx-api"),
        ("ServiceAccount", "phalanx-operator"),
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


# -- deploy/ ------------------------------------------------------------------------------------


def test_deploy_equals_the_chart_default_render(helm: Helm) -> None:
    result = subprocess.run(["bash", str(RENDER_DEPLOY), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_deploy_manifests_are_the_default_render_plus_the_namespace(
    default_render: list[Manifest],
) -> None:
    shipped = [d for d in yaml.safe_load_all((DEPLOY / "manifests/phalanx.yaml").read_text()) if d]
    namespace = shipped[0]
    assert namespace["kind"] == "Namespace"
    assert namespace["metadata"]["name"] == "phalanx-system"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert shipped[1:] == default_render


@pytest.fixture
def repo_copy(tmp_path: Path, helm: Helm) -> Path:
    """The parts of the repository render-deploy.sh reads and writes, in a scratch folder."""
    for part in ("charts/phalanx", "deploy", "tests/tools"):
        shutil.copytree(REPO_ROOT / part, tmp_path / part)
    return tmp_path


def check_copy(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(root / "tests/tools/render-deploy.sh"), "--check"],
        capture_output=True,
        text=True,
    )


def test_the_drift_check_fails_with_a_diff_when_the_manifests_differ(repo_copy: Path) -> None:
    assert check_copy(repo_copy).returncode == 0
    manifests = repo_copy / "deploy/manifests/phalanx.yaml"
    manifests.write_text(manifests.read_text().replace("replicas: 1", "replicas: 2", 1))
    result = check_copy(repo_copy)
    assert result.returncode == 1
    assert "deploy/manifests/phalanx.yaml differs" in result.stderr
    assert "-  replicas: 2" in result.stdout
    assert "+  replicas: 1" in result.stdout


def test_the_drift_check_fails_when_the_chart_changes_and_deploy_is_not_rendered(
    repo_copy: Path,
) -> None:
    values = repo_copy / "charts/phalanx/values.yaml"
    values.write_text(
        values.read_text().replace("revisionHistoryLimit: 5", "revisionHistoryLimit: 3")
    )
    result = check_copy(repo_copy)
    assert result.returncode == 1
    assert "+  revisionHistoryLimit: 3" in result.stdout
    write = subprocess.run(
        ["bash", str(repo_copy / "tests/tools/render-deploy.sh")], capture_output=True, text=True
    )
    assert write.returncode == 0, write.stderr
    assert check_copy(repo_copy).returncode == 0


def test_the_drift_check_fails_when_the_chart_dashboard_is_not_the_shipped_one(
    repo_copy: Path,
) -> None:
    copy = repo_copy / "charts/phalanx/dashboards/phalanx-jobs.json"
    copy.write_text(copy.read_text().replace("Phalanx: training jobs", "Edited in the chart"))
    result = check_copy(repo_copy)
    assert result.returncode == 1
    assert "charts/phalanx/dashboards/phalanx-jobs.json differs" in result.stderr


def kubectl() -> Path:
    result = subprocess.run(
        ["bash", str(K8S_BINARIES), "kubectl"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"make binaries (kubectl) failed:\n{result.stderr[-3000:]}"
    return Path(result.stdout.strip().splitlines()[-1]) / "kubectl"


def identity(manifest: Manifest) -> tuple[str, str, str]:
    meta = manifest["metadata"]
    return manifest["kind"], meta.get("namespace", ""), meta["name"]


def test_kubectl_kustomize_builds_deploy_without_the_examples() -> None:
    result = subprocess.run(
        [str(kubectl()), "kustomize", str(DEPLOY)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    built = [d for d in yaml.safe_load_all(result.stdout) if d]
    shipped = [d for d in yaml.safe_load_all((DEPLOY / "manifests/phalanx.yaml").read_text()) if d]
    assert sorted(map(identity, built)) == sorted(map(identity, shipped))
    assert not [m for m in built if m["kind"] == "TrainingJob"]
