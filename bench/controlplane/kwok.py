"""The cluster around the operator in the control-plane benchmark: kube-scheduler and kwok on the
project's API server, kwok's fake nodes, and what a node loss looks like to the control plane.

Why kwok: a real kubelet per node would need a machine per node; kwok (sigs.k8s.io/kwok) plays
every node's kubelet in one process, so pods are scheduled by the real kube-scheduler, bound,
reported Running and deleted as on a cluster, at thousands of pods on a laptop.

A node loss is played as the node lifecycle controller reports one once the node stopped posting
status: kwok stops managing the node (its annotation is removed), its Ready condition becomes
Unknown and it gets the `unreachable` taints, so the scheduler places nothing new there. Pods on
it stay as they were until someone deletes them: the operator (with grace period 0, as for any
pod on a lost node).
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from kubernetes import client as k8s

from harness.controlplane import ControlPlane

ROOT = Path(__file__).resolve().parents[2]
MANAGED = "kwok.x-k8s.io/node"
"""The annotation kwok selects the nodes it plays by."""
SCHEDULER_QPS = 500
"""The scheduler's client rate (its default, 50/s, binds 8 000 pods in 160 s; large clusters
raise it, as this does)."""
POD_STAGE_PARALLELISM = 32
"""How many pods kwok moves on (to Running, to gone) at once. Its default, 4, has every node's
simulated kubelet wait for the same 4 status writes, where each real kubelet writes its own
pods' status: in a storm on the 2-core machine, a replacement pod was scheduled in 1 s and then
waited 6 s (p50) for kwok to say it ran. Same for every controller the bench measures."""


def _pod_stage(name: str, when: str, then: str) -> str:
    """A kwok Stage of pods: `then` (its `next`, indented) for pods `when` (its expressions)."""
    return ("apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\n"
            f"metadata: {{name: {name}}}\nspec:\n  resourceRef: {{apiGroup: v1, kind: Pod}}\n"
            f"  selector:\n    matchExpressions:\n{when}  next:\n{then}")  # fmt: skip


RUNNING = """\
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: Ready, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
      containerStatuses:
      {{ range .spec.containers }}
      - {name: {{ .name | Quote }}, image: {{ .image | Quote }}, ready: true, restartCount: 0,
         started: true, state: {running: {startedAt: {{ $now | Quote }}}}}
      {{ end }}
      hostIP: 10.0.0.1
      podIP: 10.0.0.1
      phase: Running
      startTime: {{ $now | Quote }}
"""
POD_STAGES = "---\n".join((
    _pod_stage("pod-ready", "    - {key: .metadata.deletionTimestamp, operator: DoesNotExist}\n"
                            "    - {key: .status.podIP, operator: DoesNotExist}\n", RUNNING),
    _pod_stage("pod-delete", "    - {key: .metadata.deletionTimestamp, operator: Exists}\n",
               "    finalizers: {empty: true}\n    delete: true\n"),
))  # fmt: skip
"""What kwok does to pods: Running once scheduled, gone once deleted, as its own default stages,
less the one that completes a Job's pods as soon as they run. Every controller's pods stay
Running, as a training gang's do: with that stage, the Job controller's pods completed while it
created the rest (a status write by kwok, the Job controller's patch of its tracking finalizer,
its Job status writes), work Phalanx's pods, owned by a TrainingJob, never caused. Init
containers are not played (the bench's pods have none: its operator injects no agent)."""


def _tool(script: str, name: str) -> Path:
    directory = subprocess.run(["bash", str(ROOT / "tests/tools" / script), "--print-dir"],
                               check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    path = Path(directory) / name
    if not path.exists():
        how = "k8s-binaries.sh kube-scheduler" if script.startswith("k8s") else f"{script} kwok"
        raise SystemExit(f"{path} is missing: build it with `bash tests/tools/{how}`")
    return path


@contextlib.contextmanager
def scheduler_and_kwok(plane: ControlPlane, workdir: Path) -> Iterator[None]:
    """kube-scheduler and kwok running against `plane` until the block ends."""
    config = workdir / "scheduler.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        f"clientConnection: {{kubeconfig: {plane.kubeconfig}, qps: {SCHEDULER_QPS}, "
        f"burst: {2 * SCHEDULER_QPS}}}\nleaderElection: {{leaderElect: false}}\n"
    )
    kwok_config = workdir / "kwok.yaml"
    kwok_config.write_text(
        "apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\n"
        f"options: {{podPlayStageParallelism: {POD_STAGE_PARALLELISM}}}\n---\n{POD_STAGES}"
    )
    commands = {
        "kube-scheduler": [str(_tool("k8s-binaries.sh", "kube-scheduler")), f"--config={config}",
                           "--secure-port=0", "--v=1"],
        "kwok": [str(_tool("cluster-tools.sh", "kwok")), f"--kubeconfig={plane.kubeconfig}",
                 f"--config={kwok_config}",
                 "--manage-all-nodes=false", f"--manage-nodes-with-annotation-selector={MANAGED}=fake",
                 "--cidr=10.0.0.1/16", "--node-ip=10.0.0.1"],
    }  # fmt: skip
    processes = []
    try:
        for name, argv in commands.items():
            with (workdir / f"{name}.log").open("wb") as log:
                processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
        yield
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def node_name(index: int) -> str:
    return f"kwok-node-{index:04d}"


def add_nodes(core: k8s.CoreV1Api, count: int) -> list[str]:
    """`count` kwok nodes, each with room for 110 pods. The API server taints a new node
    not-ready; the node lifecycle controller (not run here) lifts the taint once the node is
    Ready, kwok makes it Ready, and this lifts the taint."""
    room = {"cpu": "64", "memory": "512Gi", "pods": "110"}

    def add(index: int) -> str:
        name = node_name(index)
        core.create_node({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {MANAGED: "fake"},
                         "labels": {"kubernetes.io/hostname": name, "type": "kwok"}},
            "status": {"capacity": room, "allocatable": room},
        })  # fmt: skip
        core.patch_node(name, {"spec": {"taints": []}})
        return name

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(add, range(count)))


def stop_playing(core: k8s.CoreV1Api, names: list[str]) -> None:
    """kwok no longer plays the nodes: their kubelets are gone, no heartbeat is posted."""
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda name: core.patch_node(name, {"metadata": {"annotations": {
            MANAGED: None}}}), names))  # fmt: skip


def lose_nodes(core: k8s.CoreV1Api, names: list[str]) -> None:
    """The nodes stop: kwok no longer plays them, Ready is Unknown, the unreachable taints."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    stop_playing(core, names)

    def lose(name: str) -> None:
        core.patch_node(name, {"spec": {"taints": [
            {"key": "node.kubernetes.io/unreachable", "effect": effect, "timeAdded": now}
            for effect in ("NoSchedule", "NoExecute")]}})  # fmt: skip
        core.patch_node_status(name, {"status": {"conditions": [{
            "type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.",
            "lastHeartbeatTime": now, "lastTransitionTime": now}]}})  # fmt: skip

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lose, names))
