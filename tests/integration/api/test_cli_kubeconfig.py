"""The cluster verbs straight against the kube API with a kubeconfig (no `--server`): a
service account's kubeconfig, so the real API server's RBAC judges the user's own token.

Covers: submit, list, get, scale (within and outside replicas.min..max), suspend, resume, logs
(the pod of node rank N in the current epoch, tail and follow, through the API server's log
proxy to the test's stand-in kubelet), events and describe, watch and delete, checked against
what the API server stored; the namespace comes from the kubeconfig context; `get`, `list` and `watch` print
exactly what they print through the API service; a user without a Role gets exit 1 with the API
server's 403; `--server` with `--kubeconfig`, or neither, is refused with exit 2; `get` and
`list` run with FastAPI and the API service's code unimportable.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from typer.testing import CliRunner, Result

from harness.controlplane import ControlPlane, wait_until
from harness.jobs import job_manifest
from harness.rbac import Identity, grant, grant_jobs, identity
from phalanx.cli.kubedirect import DirectClient
from phalanx.cli.main import app
from phalanx.models import GROUP, PLURAL, VERSION
from tests.support.kubelet_logs import serving_logs

cli = CliRunner()
NO_ENV = {"PHALANX_SERVER": None, "PHALANX_TOKEN": None, "PHALANX_NAMESPACE": None,
          "KUBECONFIG": None}  # fmt: skip
LOG_RULES = [k8s.V1PolicyRule(api_groups=[""], resources=["pods/log"], verbs=["get"])]
EVENT_RULES = [k8s.V1PolicyRule(api_groups=[""], resources=["events"], verbs=["list"])]
LOG_LINES = ["step 1 loss 2.00", "step 2 loss 1.50", "step 3 loss 1.20"]


def run(*args: str) -> Result:
    """The CLI, with none of the connection variables of the shell running the tests."""
    return cli.invoke(app, list(args), env=NO_ENV)


def user_kubeconfig(plane: ControlPlane, who: Identity, path: Path, namespace: str) -> Path:
    """A kubeconfig for `who`: the test API server and its CA, the service account's token, and
    `namespace` as the context's namespace."""
    cluster = yaml.safe_load(plane.kubeconfig.read_text())["clusters"][0]
    context = {"cluster": cluster["name"], "user": who.name, "namespace": namespace}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": who.name, "user": {"token": who.kube_token}}],
        "contexts": [{"name": who.name, "context": context}],
        "current-context": who.name,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def connected_user(
    kube_client: k8s.ApiClient, control_plane: ControlPlane, namespace: str, tmp_path: Path,
    name: str, **rights: list[k8s.V1PolicyRule],
) -> tuple[Identity, list[str]]:  # fmt: skip
    """A service account with rights on jobs and on `rights` (a role's name: its rules), and
    the CLI flags that act as it straight on the API server (its kubeconfig)."""
    user = identity(kube_client, namespace, name)
    grant_jobs(kube_client, namespace, user)
    for role, rules in rights.items():
        grant(kube_client, namespace, user, role, rules)
    kubeconfig = user_kubeconfig(control_plane, user, tmp_path / "kc", namespace)
    return user, ["--kubeconfig", str(kubeconfig)]


def through_service(api_url: str, user: Identity, namespace: str) -> list[str]:
    """The CLI flags that act as `user` through the API service (its token)."""
    return ["--server", api_url, "--token", user.token, "-n", namespace]


def job_file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job_manifest(name)))
    return path


def stored(kube_client: k8s.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    job = k8s.CustomObjectsApi(kube_client).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return cast(dict[str, Any], job)


def set_status(kube_client: k8s.ApiClient, namespace: str, name: str, **status: Any) -> None:
    """Play the operator: write the job's status."""
    k8s.CustomObjectsApi(kube_client).patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, name, {"status": status}
    )


def test_verbs_with_a_kubeconfig_act_on_the_api_server_as_its_user(
    api_url: str,
    kube_client: k8s.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    tmp_path: Path,
) -> None:
    user, direct = connected_user(kube_client, control_plane, namespace, tmp_path, "cli-user",
                                  logs=LOG_RULES)  # fmt: skip
    rest = through_service(api_url, user, namespace)

    submitted = run("submit", str(job_file(tmp_path, "kc-job")), *direct, "-o", "json")
    assert submitted.exit_code == 0, submitted.output
    assert json.loads(submitted.stdout)["namespace"] == namespace  # the context's namespace
    assert stored(kube_client, namespace, "kc-job")["spec"]["replicas"] == {"min": 2, "max": 4}

    listed = run("list", *direct, "-o", "json")
    assert listed.exit_code == 0, listed.output
    assert [j["name"] for j in json.loads(listed.stdout)] == ["kc-job"]
    got = run("get", "kc-job", *direct, "-o", "json")
    assert got.exit_code == 0, got.output
    wait_until(
        lambda: (
            run("get", "kc-job", *rest, "-o", "json").stdout == got.stdout
            and run("list", *rest, "-o", "json").stdout == listed.stdout
        ),
        10,
        "the API service to print the same job (its watch cache follows)",
    )

    scaled = run("scale", "kc-job", "3", *direct)
    assert scaled.exit_code == 0, scaled.output
    assert stored(kube_client, namespace, "kc-job")["spec"]["replicas"]["desired"] == 3
    out_of_range = run("scale", "kc-job", "9", *direct)
    assert out_of_range.exit_code == 1
    assert "422: spec.replicas.desired: " in out_of_range.output
    assert "(2..4), got 9" in out_of_range.output
    assert stored(kube_client, namespace, "kc-job")["spec"]["replicas"]["desired"] == 3

    suspended = run("suspend", "kc-job", *direct, "-o", "json")
    assert suspended.exit_code == 0, suspended.output
    assert json.loads(suspended.stdout)["spec"]["suspend"] is True
    assert stored(kube_client, namespace, "kc-job")["spec"]["suspend"] is True
    resumed = run("resume", "kc-job", *direct)
    assert resumed.exit_code == 0, resumed.output
    assert stored(kube_client, namespace, "kc-job")["spec"]["suspend"] is False

    no_epoch = run("logs", "kc-job", *direct)
    assert no_epoch.exit_code == 1
    assert "404: job kc-job has no node rank 0 in epoch 0" in no_epoch.output
    set_status(kube_client, namespace, "kc-job", phase="Running", epoch=2, nodes=2, worldSize=2)
    no_pod = run("logs", "kc-job", "--node", "1", *direct)  # no kubelet here: no such pod
    assert no_pod.exit_code == 1
    assert '404: pods "kc-job-2-1" not found' in no_pod.output

    deleted = run("delete", "kc-job", *direct)
    assert deleted.exit_code == 0, deleted.output
    with pytest.raises(ApiException) as gone:
        stored(kube_client, namespace, "kc-job")
    assert gone.value.status == 404
    missing = run("get", "kc-job", *direct)
    assert missing.exit_code == 1
    assert '404: trainingjobs.phalanx.dev "kc-job" not found' in missing.output


def test_events_and_describe_show_the_jobs_story_both_ways(
    api_url: str,
    kube_client: k8s.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    tmp_path: Path,
) -> None:
    """The operator's part played by the test: a status with a condition and a failure, and a
    Warning Event about the job (another object's Event is not the job's)."""
    user, direct = connected_user(kube_client, control_plane, namespace, tmp_path, "describer",
                                  events=EVENT_RULES)  # fmt: skip
    rest = through_service(api_url, user, namespace)
    assert run("submit", str(job_file(tmp_path, "told")), *direct).exit_code == 0
    failure = {"epoch": 1, "class": "infrastructure", "reason": "NodeNotReady",
               "pod": "told-1-1", "node": "worker-3", "message": "node worker-3 went silent"}  # fmt: skip
    condition = {"type": "Ready", "status": "True", "reason": "Training", "message": "2 nodes",
                 "lastTransitionTime": "2026-12-07T01:00:00Z"}  # fmt: skip
    set_status(kube_client, namespace, "told", phase="Running", epoch=2, nodes=2, worldSize=2,
               failures=[failure], conditions=[condition],
               restarts={"infrastructure": 1, "total": 1})  # fmt: skip
    core = k8s.CoreV1Api(kube_client)
    for kind, name in (("TrainingJob", "told"), ("Pod", "told")):
        core.create_namespaced_event(namespace, k8s.CoreV1Event(
            metadata=k8s.V1ObjectMeta(generate_name="told-"), type="Warning", reason="Restart",
            message=f"{kind}: epoch 2 after node worker-3 went silent", count=1,
            involved_object=k8s.V1ObjectReference(kind=kind, name=name, namespace=namespace),
            last_timestamp=datetime.now(UTC),
        ))  # fmt: skip

    listed = run("events", "told", *direct, "-o", "json")
    assert listed.exit_code == 0, listed.output
    told = json.loads(listed.stdout)
    assert [(e["type"], e["reason"], e["message"]) for e in told] == [
        ("Warning", "Restart", "TrainingJob: epoch 2 after node worker-3 went silent")
    ], "the job's own Event only"
    wait_until(lambda: run("events", "told", *rest, "-o", "json").stdout == listed.stdout, 10,
               "the API service to list the same events")  # fmt: skip
    table = run("events", "told", *direct)
    assert re.search(r"Warning\s+Restart\s+TrainingJob: epoch 2", table.stdout), table.stdout

    for way in (direct, rest):
        described = run("describe", "told", *way)
        assert described.exit_code == 0, described.output
        for shown in (r"Ready\s+True\s+Training\s+2 nodes",
                      r"Restarts: 1 \(application 0, infrastructure 1\)",
                      r"1\s+infrastructure\s+NodeNotReady\s+told-1-1\s+worker-3\s+-\s+node worker-3",
                      r"Warning\s+Restart\s+1\s+TrainingJob: epoch 2"):  # fmt: skip
            assert re.search(shown, described.stdout), (shown, described.stdout)


def test_logs_with_a_kubeconfig_read_node_rank_n_of_the_current_epoch(
    kube_client: k8s.ApiClient, control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    _, direct = connected_user(kube_client, control_plane, namespace, tmp_path, "reader",
                               logs=LOG_RULES)  # fmt: skip
    assert run("submit", str(job_file(tmp_path, "logged")), *direct).exit_code == 0
    set_status(kube_client, namespace, "logged", phase="Running", epoch=3, nodes=2, worldSize=2)
    core = k8s.CoreV1Api(kube_client)
    node = f"node-{namespace}"  # nodes are cluster-wide: one per test
    core.create_node(k8s.V1Node(metadata=k8s.V1ObjectMeta(name=node)))
    spec = k8s.V1PodSpec(node_name=node, containers=[k8s.V1Container(name="trainer", image="i")])
    pods = ("logged-3-0", "logged-3-1", "logged-2-1")
    for pod in pods:
        core.create_namespaced_pod(
            namespace, k8s.V1Pod(metadata=k8s.V1ObjectMeta(name=pod), spec=spec)
        )
    try:
        with serving_logs(core, control_plane.pki, [node]) as kubelet:
            for pod in pods:
                kubelet.append(pod, *(f"{pod} {line}" for line in LOG_LINES))
            tail = run("logs", "logged", "--node", "1", "--tail", "2", *direct)
            assert tail.exit_code == 0, tail.output
            assert tail.stdout == "".join(f"logged-3-1 {line}\n" for line in LOG_LINES[-2:])
            assert any("/logged-3-1/trainer?" in r and "tailLines=2" in r for r in kubelet.requests)

            following: list[Result] = []
            follower = threading.Thread(
                target=lambda: following.append(
                    run("logs", "logged", "-f", "--node", "1", *direct)
                ),
                daemon=True,
            )
            follower.start()
            wait_until(lambda: any("follow=true" in r for r in kubelet.requests), 10, "a follow")
            kubelet.append("logged-3-1", "logged-3-1 done \u2713")  # UTF-8 across the wire
            kubelet.finish("logged-3-1")
            follower.join(timeout=20)
            assert not follower.is_alive(), "logs -f did not end when the container did"
    finally:  # no kubelet will finish a graceful deletion of these pods: none then
        for pod in pods:
            core.delete_namespaced_pod(pod, namespace, grace_period_seconds=0)
        core.delete_node(node)
    assert following[0].exit_code == 0, following[0].output
    followed = [*(f"logged-3-1 {line}" for line in LOG_LINES), "logged-3-1 done \u2713"]
    assert following[0].stdout == "".join(f"{line}\n" for line in followed)


def test_watch_with_a_kubeconfig_follows_the_job_until_it_ends(
    api_url: str,
    kube_client: k8s.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    tmp_path: Path,
) -> None:
    user, direct = connected_user(kube_client, control_plane, namespace, tmp_path, "watcher")
    assert run("submit", str(job_file(tmp_path, "watched")), *direct).exit_code == 0
    set_status(kube_client, namespace, "watched", phase="Running", epoch=1, nodes=2, worldSize=4)
    with DirectClient.from_kubeconfig(direct[1], None, namespace) as jobs:
        progress = jobs.progress("watched")
        first = next(progress)  # read before the change below; the watch resumes from that read
        assert first is not None
        assert (first.phase, first.epoch) == ("Running", 1)
        set_status(kube_client, namespace, "watched", phase="Succeeded", progress={"step": 40})
        rest_of_it = list(progress)  # ends by itself once the job has ended
    assert [(s.phase, s.step) for s in rest_of_it if s is not None] == [("Succeeded", 40)]

    result = run("watch", "watched", *direct)
    assert result.exit_code == 0, result.output
    assert "watched  Succeeded  epoch 1  nodes 2  world 4  step 40  restarts 0" in result.output

    rest = through_service(api_url, user, namespace)
    wait_until(
        lambda: run("watch", "watched", *rest).output == result.output,
        10,
        "the API service's watch to print the same",
    )


WITHOUT_SERVICE = """
import sys
from importlib.abc import MetaPathFinder


class Unimportable(MetaPathFinder):
    # The API service and its web stack, as if they were not installed.
    def find_spec(self, name, path=None, target=None):
        service = name == "phalanx.server" or name.startswith("phalanx.server.")
        if service or name.partition(".")[0] in {"fastapi", "starlette", "uvicorn"}:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None


sys.meta_path.insert(0, Unimportable())
from phalanx.cli.main import main

sys.argv[0] = "phalanx"
main()
"""


def test_the_kubeconfig_mode_needs_no_fastapi(
    kube_client: k8s.ApiClient, control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    _, direct = connected_user(kube_client, control_plane, namespace, tmp_path, "no-fastapi")
    assert run("submit", str(job_file(tmp_path, "lean")), *direct).exit_code == 0

    def without_service(*args: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        command = [sys.executable, "-c", WITHOUT_SERVICE, *args]
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)

    blocked = without_service("openapi")  # the verb that prints the service's document needs it
    assert blocked.returncode != 0
    assert "No module named 'phalanx.server" in blocked.stderr
    for verb in (["get", "lean"], ["list"]):
        lean = without_service(*verb, *direct, "-o", "json")
        assert lean.returncode == 0, lean.stderr
        assert lean.stdout == run(*verb, *direct, "-o", "json").stdout
    assert [j["name"] for j in json.loads(lean.stdout)] == ["lean"]


def test_a_user_without_a_role_gets_the_api_servers_403(
    api_url: str,
    kube_client: k8s.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    tmp_path: Path,
) -> None:
    user = identity(kube_client, namespace, "nobody")
    kubeconfig = user_kubeconfig(control_plane, user, tmp_path / "kc", namespace)
    direct = run("list", "--kubeconfig", str(kubeconfig))
    assert direct.exit_code == 1
    assert direct.output.startswith(
        f'error: 403: trainingjobs.phalanx.dev is forbidden: User "{user.username}" cannot list '
        f'resource "trainingjobs" in API group "phalanx.dev" in the namespace "{namespace}"'
    ), direct.output
    through_service = run("list", "--server", api_url, "--token", user.token, "-n", namespace)
    assert through_service.output == direct.output
    submit = run("submit", str(job_file(tmp_path, "denied")), "--kubeconfig", str(kubeconfig))
    assert submit.exit_code == 1
    assert f'User "{user.username}" cannot create resource "trainingjobs"' in submit.output


def test_connection_flags_that_conflict_or_are_missing_are_exit_2(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    both = run("list", "--server", "http://localhost:1", "--kubeconfig", str(kubeconfig))
    assert both.exit_code == 2
    assert "--server" in both.output
    assert "--kubeconfig" in both.output
    neither = cli.invoke(app, ["list"], env={**NO_ENV, "HOME": str(tmp_path)})
    assert neither.exit_code == 2
    assert "pass --server URL" in neither.output
    assert "--kubeconfig PATH" in neither.output
