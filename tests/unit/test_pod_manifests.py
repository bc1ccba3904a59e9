"""The pods the builder makes for every shipped example are pods the Kubernetes client accepts.

Found on kind: `nvidia.com/gpu: 2` (an integer, as users write it) reached the client unchanged,
and the client refused the pod before sending it, so every job that asked for GPUs retried its
reconcile forever. The client validates a body against its own V1Pod model, which this test uses.
"""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from phalanx.models import TrainingJob
from phalanx.operator.builder import BuildSettings, env_config_map, node_pod, rank_env, standby_pod
from tests.support import container_env, podsecurity
from tests.support.manifests import example_paths, load_yaml


@pytest.mark.parametrize("inject", [False, True], ids=["bare", "agent-injected"])
@pytest.mark.parametrize("path", example_paths(), ids=lambda p: p.stem)
def test_node_and_standby_pods_of_every_example_are_valid_pods(path: object, inject: bool) -> None:
    manifest = load_yaml(path)  # type: ignore[arg-type]
    manifest["metadata"] |= {"namespace": "team", "uid": "u-1"}
    job = TrainingJob.model_validate(manifest)
    settings = BuildSettings(agent_image="phalanx/controlplane:0.1.0" if inject else None)
    built = (
        node_pod(job, 1, 0, 2, settings),
        *(standby_pod(job, 1, 0, settings, warm=w) for w in (False, True)),
    )
    for pod in built:
        k8s.V1Pod.model_validate(pod)
        for container in pod["spec"]["containers"]:
            for quantities in (container.get("resources") or {}).values():
                assert all(isinstance(v, str) for v in quantities.values()), quantities


def test_a_new_pod_rendezvouses_where_a_carried_over_rank_0_listens() -> None:
    manifest = load_yaml(example_paths()[0])
    manifest["metadata"] |= {"namespace": "team", "uid": "u-1"}
    job = TrainingJob.model_validate(manifest)
    name = job.metadata.name
    own = node_pod(job, 4, 2, 3, BuildSettings())
    joining = node_pod(job, 4, 2, 3, BuildSettings(), master=f"{name}-1-0")

    def addr(pod: dict[str, object]) -> str:
        env = pod["spec"]["containers"][0]["env"]  # type: ignore[index]
        return next(e["value"] for e in env if e["name"] == "MASTER_ADDR")  # type: ignore[no-any-return]

    assert addr(own) == f"{name}-4-0.{name}.team.svc.cluster.local"
    assert addr(joining) == f"{name}-1-0.{name}.team.svc.cluster.local"


def test_the_jobs_common_variables_come_from_its_configmap_and_the_templates_own_win() -> None:
    """What all the job's pods get alike is in its env ConfigMap, last of the container's envFrom
    sources (the last wins a name they share: a ConfigMap of the template's does not override
    Phalanx's variables); on the pod only what differs per pod or epoch; the template's own
    `env` wins over every envFrom source, as it won over Phalanx's variables before."""
    manifest = load_yaml(example_paths()[0])
    manifest["metadata"] |= {"namespace": "team", "uid": "u-1"}
    [container] = manifest["spec"]["template"]["spec"]["containers"]
    container["env"] = [{"name": "NCCL_DEBUG", "value": "WARN"}]
    container["envFrom"] = [{"configMapRef": {"name": "mine"}}]
    job = TrainingJob.model_validate(manifest)
    settings = BuildSettings(nccl_defaults={"NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "1"})
    pod = node_pod(job, 2, 1, 3, settings)
    config = env_config_map(job, settings)
    name, common = config["metadata"]["name"], config["data"]
    assert name == f"{job.metadata.name}-phalanx-env"
    assert config["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    [built] = pod["spec"]["containers"]
    assert built["envFrom"] == [
        {"configMapRef": {"name": "mine"}},
        {"configMapRef": {"name": name}},
    ]
    on_pod = [e["name"] for e in built["env"]]
    assert on_pod == [*rank_env(job, 2, 1, 3, settings), "PHALANX_POD_NAME", "NCCL_DEBUG"]
    assert not set(rank_env(job, 2, 1, 3, settings)) & set(common), "each variable in one place"

    mine = {"PHALANX_JOB": "not-mine", "MINE": "1", "NCCL_IB_DISABLE": "0"}
    variables = container_env.resolved(pod, {"mine": mine, name: common})
    assert variables["NCCL_DEBUG"] == "WARN", "the template's env wins"
    assert (variables["PHALANX_JOB"], variables["NCCL_IB_DISABLE"]) == (job.metadata.name, "1")
    assert variables["MINE"] == "1"
    assert variables["NODE_RANK"] == "1"


def test_a_warm_standby_is_the_template_standing_by_and_a_cold_one_only_holds_capacity() -> None:
    manifest = load_yaml(example_paths()[0])
    manifest["metadata"] |= {"namespace": "team", "uid": "u-1"}
    job = TrainingJob.model_validate(manifest)
    name = job.metadata.name
    template = job.spec.template.spec.containers[0]

    warm = standby_pod(job, 3, 1, BuildSettings(), warm=True)
    [container] = warm["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (container["image"], container.get("args")) == (template.image, template.args)
    assert env["PHALANX_STANDBY"] == "1"
    assert "PHALANX_POD_NAME" in env, "its agent finds itself in an assignment by name"
    assert container_env.built(job, warm)["PHALANX_JOB"] == name, "and the job's variables"
    assert warm["metadata"]["labels"]["phalanx.dev/warm"] == "true"
    assert warm["metadata"]["labels"]["phalanx.dev/role"] == "standby"
    assert (warm["spec"]["hostname"], warm["spec"]["subdomain"]) == (f"{name}-3-s1", name), (
        "a spare that takes rank 0 must be where MASTER_ADDR points"
    )

    cold = standby_pod(job, 3, 1, BuildSettings())
    [idle] = cold["spec"]["containers"]
    assert idle["command"] == ["sleep", "infinity"]
    assert "phalanx.dev/warm" not in cold["metadata"]["labels"]


def test_the_jobs_pods_prefer_distinct_nodes_unless_the_template_places_them() -> None:
    """Stated, so that kube-scheduler's default constraints (for pods a Service selects: hosts
    and zones) do not apply; a template's own constraints replace it, on spares too."""
    manifest = load_yaml(example_paths()[0])
    manifest["metadata"] |= {"namespace": "team", "uid": "u-1"}
    job = TrainingJob.model_validate(manifest)
    name = job.metadata.name
    pods = [node_pod(job, 1, 0, 2, BuildSettings()), standby_pod(job, 1, 0, BuildSettings()),
            standby_pod(job, 1, 0, BuildSettings(), warm=True)]  # fmt: skip
    for pod in pods:
        assert pod["spec"]["topologySpreadConstraints"] == [{
            "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"phalanx.dev/job": name}},
        }], pod["metadata"]["name"]  # fmt: skip
        assert pod["metadata"]["labels"]["phalanx.dev/job"] == name, "it selects the job's pods"

    zones = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
              "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"a": "b"}}}]  # fmt: skip
    manifest["spec"]["template"]["spec"]["topologySpreadConstraints"] = zones
    own = TrainingJob.model_validate(manifest)
    for pod in (node_pod(own, 1, 0, 2, BuildSettings()), standby_pod(own, 1, 0, BuildSettings())):
        assert pod["spec"]["topologySpreadConstraints"] == zones


def test_node_pods_get_host_memory_at_dev_shm_unless_they_mount_their_own() -> None:
    """The agent keeps its workers' memory snapshots under /dev/shm across epochs; the runtime's
    default there is 64 MiB."""
    manifest = load_yaml(example_paths()[0])
    manifest["metadata"] |= {"namespace": "team", "uid": "u-1"}
    job = TrainingJob.model_validate(manifest)
    pod = node_pod(job, 1, 0, 2, BuildSettings())
    [volume] = [v for v in pod["spec"]["volumes"] if v.get("emptyDir", {}).get("medium")]
    assert volume["emptyDir"] == {"medium": "Memory"}
    for container in pod["spec"]["containers"]:
        assert {"name": volume["name"], "mountPath": "/dev/shm"} in container["volumeMounts"]

    containers = manifest["spec"]["template"]["spec"]["containers"]
    containers[0]["volumeMounts"] = [{"name": "mine", "mountPath": "/dev/shm"}]
    manifest["spec"]["template"]["spec"]["volumes"] = [{"name": "mine", "emptyDir": {}}]
    own = node_pod(TrainingJob.model_validate(manifest), 1, 0, 2, BuildSettings())
    assert [v["name"] for v in own["spec"]["volumes"]] == ["mine"]


def test_the_checkpoint_cadence_reaches_the_reference_trainer() -> None:
    """spec.checkpoint.intervalSeconds and memoryIntervalSteps become the trainer's settings
    (tests/trainer/test_checkpoint_cadence.py and tests/local/test_inplace.py show their effect
    there), so neither is accepted and ignored."""
    manifest = load_yaml(example_paths()[0])
    manifest["metadata"] |= {"namespace": "team", "uid": "u-1"}
    manifest["spec"]["checkpoint"] |= {"intervalSeconds": 600, "memoryIntervalSteps": 0}
    job = TrainingJob.model_validate(manifest)
    env = container_env.built(job, node_pod(job, 1, 0, 2, BuildSettings()))
    assert env["PHALANX_CHECKPOINT_INTERVAL_SECONDS"] == "600"
    assert env["PHALANX_CHECKPOINT_MEMORY_INTERVAL_STEPS"] == "0"


def test_pods_request_the_host_memory_their_memory_snapshots_hold() -> None:
    """The planner's figure for the memory snapshots (its action's, `planner.memory`) is added to
    the request, and to the limit the template set; a cold standby holds the same capacity;
    with none nothing is added."""
    manifest = load_yaml(example_paths()[0])
    manifest["metadata"] |= {"namespace": "team", "uid": "u-1"}
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"memory": "64Gi"}}
    added = 2 * 12 * 10**9

    def memory(job: dict[str, object], **kind: bool) -> dict[str, str]:
        built = TrainingJob.model_validate(job)
        if kind:
            pod = standby_pod(built, 1, 0, BuildSettings(), warm=kind["warm"], snapshot_bytes=added)
        else:
            pod = node_pod(built, 1, 0, 2, BuildSettings(), snapshot_bytes=added)
        resources = pod["spec"]["containers"][0]["resources"]
        return {group: resources[group]["memory"] for group in ("requests", "limits")}

    expected = f"{-(-(64 * 2**30 + added) // 2**20)}Mi"
    assert memory(manifest) == {"requests": expected, "limits": expected}, (
        "a limit without a request is the request too, as Kubernetes defaults it"
    )
    assert memory(manifest, warm=False) == memory(manifest), "a cold standby holds the same"
    container["resources"] = {"requests": {"memory": "8Gi"}}
    built = node_pod(
        TrainingJob.model_validate(manifest), 1, 0, 2, BuildSettings(), snapshot_bytes=added
    )
    assert built["spec"]["containers"][0]["resources"] == {
        "requests": {"memory": f"{-(-(8 * 2**30 + added) // 2**20)}Mi"}
    }, "no limit is made up"
    off = node_pod(TrainingJob.model_validate(manifest), 1, 0, 2, BuildSettings())
    assert off["spec"]["containers"][0]["resources"] == {"requests": {"memory": "8Gi"}}


RESTRICTED_POD = {"runAsNonRoot": True, "runAsUser": 1000,
                  "seccompProfile": {"type": "RuntimeDefault"}}  # fmt: skip
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


@pytest.mark.parametrize("inject", [False, True], ids=["bare", "agent-injected"])
def test_every_pod_of_a_restricted_template_passes_the_restricted_level(inject: bool) -> None:
    """A namespace that enforces `restricted` admits the node pods, and the warm and cold
    standbys, of a job whose template it admits (cold standbys used to carry no
    securityContext and were refused)."""
    manifest = load_yaml(example_paths()[0])
    manifest["metadata"] |= {"namespace": "team", "uid": "u-1"}
    template = manifest["spec"]["template"]["spec"]
    template["securityContext"] = RESTRICTED_POD
    for container in template["containers"]:
        container["securityContext"] = RESTRICTED_CONTAINER
    job = TrainingJob.model_validate(manifest)
    settings = BuildSettings(agent_image="phalanx/controlplane:0.1.0" if inject else None)
    built = {
        "node": node_pod(job, 1, 0, 2, settings),
        "warm standby": standby_pod(job, 1, 0, settings, warm=True),
        "cold standby": standby_pod(job, 1, 0, settings),
    }
    assert {kind: podsecurity.violations(pod) for kind, pod in built.items()} == {
        key: [] for key in built
    }
    template["securityContext"] = {}  # the check can fail: the template alone decides
    bare = TrainingJob.model_validate(manifest)
    assert podsecurity.violations(standby_pod(bare, 1, 0, settings))
