"""A job becomes a gang of rank-assigned pods with the env contract, owned children, and no
restart loop for configuration errors; deleting the job deletes everything it owns.

Scenarios 1, 11 and 12 of the operator issue.
"""

from __future__ import annotations

from kubernetes import client as k8s

from harness.controlplane import wait_until
from phalanx.models import env, labels
from tests.integration.operator.conftest import NCCL_DEFAULTS, Cluster
from tests.support import container_env


def test_job_gets_rank_assigned_pods_with_the_env_contract(cluster: Cluster) -> None:
    cluster.create_job("gang", nccl={"debug": "INFO", "env": {"NCCL_SOCKET_IFNAME": "ib0"}})
    pods = cluster.kubelet.wait_pods("gang", epoch=1, count=4)
    uid = cluster.job("gang")["metadata"]["uid"]
    ns = cluster.namespace
    master = f"gang-1-0.gang.{ns}.svc.cluster.local"
    common = k8s.CoreV1Api(cluster.api).read_namespaced_config_map("gang-phalanx-env", ns)
    assert [(o.kind, o.uid) for o in common.metadata.owner_references] == [("TrainingJob", uid)]
    for rank, pod in pods.items():
        assert pod.metadata.name == f"gang-1-{rank}"
        assert (pod.spec.hostname, pod.spec.subdomain, pod.spec.restart_policy) == (
            f"gang-1-{rank}",
            "gang",
            "Never",
        )
        assert [(o.kind, o.uid, o.controller) for o in pod.metadata.owner_references] == [
            ("TrainingJob", uid, True)
        ]
        assert pod.metadata.labels[labels.EPOCH] == "1"
        stored = cluster.api.sanitize_for_serialization(pod)
        got = container_env.resolved(stored, {"gang-phalanx-env": common.data or {}})
        expected = {
            env.MASTER_ADDR: master, env.MASTER_PORT: "29500", env.NNODES: "4",
            env.NODE_RANK: str(rank), env.NPROC_PER_NODE: "2",
            "PET_MASTER_ADDR": master, "PET_MASTER_PORT": "29500", "PET_NNODES": "4",
            "PET_NODE_RANK": str(rank), "PET_NPROC_PER_NODE": "2",
            env.PHALANX_JOB: "gang", env.PHALANX_NAMESPACE: ns, env.PHALANX_EPOCH: "1",
            env.PHALANX_CHECKPOINT_DIR: "/ckpt", env.PHALANX_TENSOR_PARALLEL: "1",
            env.PHALANX_PIPELINE_PARALLEL: "1", env.PHALANX_DATA_PARALLEL: "8",
            env.PHALANX_HEARTBEAT_LEASE: "gang-heartbeat",
            env.PHALANX_ASSIGNMENT_LEASE: "gang-assignment",
            env.PHALANX_POD_NAME: f"gang-1-{rank}",  # from the downward API: its own name
            # the checkpoint cadence, as the reference trainer's settings
            "PHALANX_CHECKPOINT_INTERVAL_STEPS": "100",
            "PHALANX_CHECKPOINT_KEEP": "3",
            "PHALANX_CHECKPOINT_ASYNC": "true", env.TORCH_NCCL_ASYNC_ERROR_HANDLING: "1",
            # torchrun's worker contract, for what is the same on every pod: the job's uid as
            # the run id, maxRestarts' default, the first epoch's restart count
            env.ROLE_NAME: "default", env.TORCHELASTIC_RUN_ID: uid,
            env.TORCHELASTIC_MAX_RESTARTS: "3", env.TORCHELASTIC_RESTART_COUNT: "0",
            env.TORCHELASTIC_USE_AGENT_STORE: "False",
            "PHALANX_CHECKPOINT_MEMORY_INTERVAL_STEPS": "10",
            "PHALANX_CHECKPOINT_MEMORY_OVERHEAD_PERCENT": "1",
            # spec.trainer unset: its documented defaults, not the trainer's own
            "PHALANX_TRAINER_GLOBAL_BATCH_SIZE": "32", "PHALANX_TRAINER_SHARDING": "ddp",
            "PHALANX_TRAINER_MIXED_PRECISION": "none", "PHALANX_TRAINER_SEED": "0",
            "PHALANX_TRAINER_ACTIVATION_CHECKPOINTING": "false",
            # cluster defaults merged with the job's nccl; the job wins
            "NCCL_SOCKET_IFNAME": "ib0", "NCCL_IB_DISABLE": NCCL_DEFAULTS["NCCL_IB_DISABLE"], "NCCL_DEBUG": "INFO",
        }  # fmt: skip
        assert got == expected
    service = k8s.CoreV1Api(cluster.api).read_namespaced_service("gang", ns)
    assert service.spec.cluster_ip == "None"
    assert service.spec.publish_not_ready_addresses is True
    assert service.metadata.owner_references[0].uid == uid
    role = k8s.RbacAuthorizationV1Api(cluster.api).read_namespaced_role("gang-phalanx", ns)
    assert role.rules[0].resource_names == ["gang-heartbeat"]
    assert role.rules[1].resource_names == ["gang-assignment"]
    assert role.rules[1].verbs == ["get", "list", "watch"]
    assert (
        k8s.CoordinationV1Api(cluster.api)
        .read_namespaced_lease("gang-heartbeat", ns)
        .metadata.owner_references
    )
    status = cluster.wait_status(
        "gang", lambda s: s.get("epoch") == 1 and s.get("worldSize") == 8, "epoch 1"
    )
    assert (status["nodes"], status["phase"]) == (4, "Pending")
    cluster.wait_event("gang", "Started")

    cluster.kubelet.start_gang("gang", 1, 4)
    status = cluster.wait_status("gang", lambda s: s.get("phase") == "Running", "Running")
    running = next(c for c in status["conditions"] if c["type"] == "Running")
    assert running["status"] == "True"
    assert running["observedGeneration"] == 1
    cluster.wait_metric("phalanx_world_size", 8, namespace=cluster.namespace, job="gang")
    cluster.wait_metric("phalanx_jobs", 1, phase="Running")


def test_the_next_epoch_starts_with_the_spec_as_it_is_now(cluster: Cluster) -> None:
    """The variables all the job's pods get alike are in its env ConfigMap, which a pod reads
    when it starts: a spec changed while the job runs reaches the next epoch's pods, as it did
    when every variable was on the pod, and the ConfigMap says so (made again, if it was
    deleted) before those pods exist."""
    cluster.create_job("follow")
    cluster.kubelet.start_gang("follow", 1, 4)
    cluster.wait_status("follow", lambda s: s.get("phase") == "Running", "Running")
    core = k8s.CoreV1Api(cluster.api)

    def interval() -> str:
        data = core.read_namespaced_config_map("follow-phalanx-env", cluster.namespace).data
        return str(data[env.PHALANX_CHECKPOINT_INTERVAL_STEPS])

    assert interval() == "100"
    cluster.patch_spec("follow", {"checkpoint": {"intervalSteps": 7}})
    core.delete_namespaced_config_map("follow-phalanx-env", cluster.namespace)  # by hand
    cluster.kubelet.exit("follow-1-1", 1)  # an application failure: a new epoch, new pods
    wait_until(lambda: cluster.kubelet.pods("follow", epoch=2), 30, "a pod of epoch 2")
    assert interval() == "7"


def test_deleting_the_job_leaves_no_children(cluster: Cluster) -> None:
    cluster.create_job("doomed")
    cluster.kubelet.start_gang("doomed", 1, 4)
    cluster.wait_status("doomed", lambda s: s.get("phase") == "Running", "Running")
    core, rbac = k8s.CoreV1Api(cluster.api), k8s.RbacAuthorizationV1Api(cluster.api)
    selector = f"{labels.JOB}=doomed"

    def children() -> list[str]:
        ns = cluster.namespace
        found = [
            p.metadata.name for p in core.list_namespaced_pod(ns, label_selector=selector).items
        ]
        found += [
            s.metadata.name for s in core.list_namespaced_service(ns, label_selector=selector).items
        ]
        found += [
            c.metadata.name
            for c in core.list_namespaced_config_map(ns, label_selector=selector).items
        ]
        found += [
            a.metadata.name
            for a in core.list_namespaced_service_account(ns, label_selector=selector).items
        ]
        found += [
            r.metadata.name for r in rbac.list_namespaced_role(ns, label_selector=selector).items
        ]
        found += [
            b.metadata.name
            for b in rbac.list_namespaced_role_binding(ns, label_selector=selector).items
        ]
        found += [
            lease.metadata.name
            for lease in k8s.CoordinationV1Api(cluster.api)
            .list_namespaced_lease(ns, label_selector=selector)
            .items
        ]
        return found

    # 4 pods, Service, env ConfigMap, ServiceAccount, Role, RoleBinding, 2 Leases
    assert len(children()) == 11
    k8s.CustomObjectsApi(cluster.api).delete_namespaced_custom_object(
        "phalanx.dev", "v1alpha1", cluster.namespace, "trainingjobs", "doomed"
    )
    wait_until(lambda: children() == [], 60, "the garbage collector to delete the job's children")


def test_image_pull_error_sets_a_condition_without_a_restart_loop(cluster: Cluster) -> None:
    cluster.create_job("badimage")
    pods = cluster.kubelet.wait_pods("badimage", 1, 4)
    for pod in pods.values():
        cluster.kubelet.bind(pod.metadata.name, "node-0")
        cluster.kubelet.image_pull_error(pod.metadata.name)
    status = cluster.wait_status(
        "badimage",
        lambda s: any(
            c["type"] == "ConfigurationError" and c["status"] == "True"
            for c in s.get("conditions", [])
        ),
        "a ConfigurationError condition",
    )
    condition = next(c for c in status["conditions"] if c["type"] == "ConfigurationError")
    assert condition["reason"] == "ImagePullBackOff"
    assert "badimage-1-" in condition["message"]
    # More reconciles happen (the status changes again), and still no restart.
    before = cluster.metric("phalanx_reconcile_duration_seconds_count")
    for pod in pods.values():
        cluster.kubelet.image_pull_error(pod.metadata.name)
    wait_until(
        lambda: cluster.metric("phalanx_reconcile_duration_seconds_count") >= before + 3,
        30,
        "three more reconciles",
    )
    # Each reconcile says where its time went: queued for a slot, plan, execute, of which
    # waiting for the API server, and the operator's own.
    for part in ("wait", "plan", "execute", "api", "own"):
        assert cluster.metric("phalanx_reconcile_part_seconds_count", part=part) >= before + 3
    status = cluster.status("badimage")
    assert (status["epoch"], status["restarts"]["total"]) == (1, 0)
    assert cluster.kubelet.pods("badimage", 1).keys() == {0, 1, 2, 3}
    assert cluster.event_reasons("badimage").count("ConfigurationError") == 1
