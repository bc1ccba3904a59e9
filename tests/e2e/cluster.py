"""The kind cluster as the end-to-end tests see it: kubectl and helm with its kubeconfig, the node
containers (to lose a node for real), and the test-only adaptations a CPU kind cluster needs.

Test-only adaptations, each one labelled where it is made:
- **Fake GPUs.** kind nodes have no GPUs; each worker advertises `nvidia.com/gpu` as an extended
  resource (a node status patch, as the Kubernetes docs describe for extended resources), so jobs
  that ask for GPUs schedule one node pod per node, as on a GPU cluster. The trainer finds no CUDA
  and trains on CPU with gloo.
- **Mounted torch.** The suite's trainer image leaves torch out (`TORCH=mounted`); every node pod
  mounts the host's torch read-only at /opt/phalanx-torch (see tests/tools/kind.sh).
- **A shared checkpoint volume.** Each test namespace gets a PersistentVolumeClaim
  `phalanx-checkpoints`, bound to a hostPath volume on a folder shared by every node.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from prometheus_client.parser import text_string_to_metric_families

from phalanx.local.faults import parse_duration
from phalanx.models.job import GROUP, PLURAL, VERSION

REPO_ROOT = Path(__file__).resolve().parents[2]
KIND_SH = REPO_ROOT / "tests/tools/kind.sh"
FAKE_GPUS_PER_NODE = "2"
TORCH_VOLUME = {
    "name": "phalanx-torch",
    "hostPath": {"path": "/opt/phalanx-torch", "type": "Directory"},
}
TORCH_MOUNT = {"name": "phalanx-torch", "mountPath": "/opt/phalanx-torch", "readOnly": True}
CHECKPOINT_CLAIM = "phalanx-checkpoints"
KUBERNETES_NODE_GRACE_SECONDS = 50.0
"""kube-controller-manager's --node-monitor-grace-period default in v1.33 (50 s since v1.32)."""
SHARED_IN_NODE = "/var/phalanx/shared"
ARTIFACTS = Path(os.environ.get("PHALANX_TEST_ARTIFACTS", REPO_ROOT / "build/test-artifacts"))


def run(args: Sequence[str | Path], *, check: bool = True, timeout: float = 300,
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run a command, returning its output; a failure names the command and its stderr."""
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=timeout, input=stdin
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, args))} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
    return done


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 1.0) -> Any:
    """Poll `check` until it returns something truthy (returned), or fail naming `what`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


@dataclass
class KindCluster:
    """A running kind cluster made by tests/tools/kind.sh."""

    name: str
    kubeconfig: Path
    state: Path
    kubectl_bin: Path
    helm_bin: Path
    api: k8s.ApiClient

    @classmethod
    def connect(cls) -> KindCluster:
        kubeconfig = Path(run(["bash", KIND_SH, "kubeconfig"]).stdout.strip())
        if not kubeconfig.exists():
            raise AssertionError(f"no kind cluster: {kubeconfig} is missing (run `make kind-up`)")
        k8s_bin = Path(
            run(["bash", REPO_ROOT / "tests/tools/k8s-binaries.sh", "--print-dir"]).stdout.strip()
        )
        tools = Path(
            run(["bash", REPO_ROOT / "tests/tools/cluster-tools.sh", "--print-dir"]).stdout.strip()
        )
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(str(kubeconfig), client_configuration=configuration)
        return cls(
            name="phalanx-e2e",
            kubeconfig=kubeconfig,
            state=kubeconfig.parent,
            kubectl_bin=k8s_bin / "kubectl",
            helm_bin=tools / "helm",
            api=k8s.ApiClient(configuration),
        )

    # -- tools --------------------------------------------------------------------------------

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None,
                timeout: float = 300) -> subprocess.CompletedProcess[str]:  # fmt: skip
        return run([self.kubectl_bin, "--kubeconfig", self.kubeconfig, *args],
                   check=check, stdin=stdin, timeout=timeout)  # fmt: skip

    def kubectl_popen(self, *args: str) -> subprocess.Popen[str]:
        """kubectl left running (an exec that holds something until it is ended)."""
        return subprocess.Popen(
            [str(self.kubectl_bin), "--kubeconfig", str(self.kubeconfig), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    def helm(
        self, *args: str, check: bool = True, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        return run(
            [self.helm_bin, "--kubeconfig", self.kubeconfig, *args], check=check, timeout=timeout
        )

    @property
    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.api)

    @property
    def custom(self) -> k8s.CustomObjectsApi:
        return k8s.CustomObjectsApi(self.api)

    # -- nodes --------------------------------------------------------------------------------

    def workers(self) -> list[str]:
        nodes = self.core.list_node().items
        return sorted(str(n.metadata.name) for n in nodes
                      if "node-role.kubernetes.io/control-plane" not in (n.metadata.labels or {}))  # fmt: skip

    def ready(self, node: str) -> bool:
        conditions = self.core.read_node(node).status.conditions or []
        return any(c.type == "Ready" and c.status == "True" for c in conditions)

    def advertise_fake_gpus(self) -> None:
        """TEST-ONLY FAKE: each worker offers `nvidia.com/gpu` (see the module docstring)."""
        for node in self.workers():
            # The scheduler reads allocatable, which the kubelet would only derive from the
            # capacity at its next status update: set both.
            patch = [{"op": "add", "path": f"/status/{field}/nvidia.com~1gpu", "value": FAKE_GPUS_PER_NODE}
                     for field in ("capacity", "allocatable")]  # fmt: skip
            self.core.patch_node_status(node, patch)

    def stop_node(self, node: str) -> None:
        """Lose a node for real: its container (kubelet, containerd, pods) stops at once."""
        run(["docker", "kill", "--signal", "SIGKILL", node])

    def start_node(self, node: str) -> None:
        """Bring a lost node back, with its pod routes, and wait until it is Ready."""
        run(["docker", "start", node])
        wait_for(lambda: self.ready(node), 180, f"node {node} Ready again", interval=2)
        run(["bash", KIND_SH, "net"])
        self.advertise_fake_gpus()

    def operator_leader(self) -> str | None:
        """The operator pod that acts: the holder of the replicas' leader Lease (the chart's
        phalanx-operator-leader in phalanx-system)."""
        try:
            lease = k8s.CoordinationV1Api(self.api).read_namespaced_lease(
                "phalanx-operator-leader", "phalanx-system"
            )
        except k8s.ApiException:
            return None
        return lease.spec.holder_identity if lease.spec else None

    def operator_metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        """The acting operator's /metrics through the API server's pod proxy, by sample name and
        labels (the standby replica's have no jobs: not through the Service)."""
        leader = self.operator_leader()
        assert leader, "no operator holds the leader Lease"
        text = self.kubectl(
            "get", "--raw", f"/api/v1/namespaces/phalanx-system/pods/{leader}:8080/proxy/metrics",
        ).stdout  # fmt: skip
        return {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }

    def node_monitor_grace_seconds(self) -> float:
        """kube-controller-manager's node-monitor-grace-period on this cluster, from its pod's
        command (tests/tools/kind.sh sets it; Kubernetes v1.33's default is 50 s)."""
        pods = self.core.list_namespaced_pod(
            "kube-system", label_selector="component=kube-controller-manager"
        ).items
        for argument in pods[0].spec.containers[0].command if pods else []:
            if argument.startswith("--node-monitor-grace-period="):
                return parse_duration(argument.split("=", 1)[1])
        return KUBERNETES_NODE_GRACE_SECONDS

    def partition(self, a: k8s.V1Pod, b: k8s.V1Pod, *, heal: bool = False) -> None:
        """Drop every packet between two pods (or, `heal`, stop dropping them): iptables rules
        in the FORWARD chain of both pods' nodes, so that each pod stays up, Ready and reachable
        by the others, as when a link or a switch port between two machines fails."""
        pair = (str(a.status.pod_ip), str(b.status.pod_ip))
        for node in {str(a.spec.node_name), str(b.spec.node_name)}:
            for source, target in (pair, pair[::-1]):
                rule = ["-s", source, "-d", target, "-j", "DROP"]
                run(["docker", "exec", node, "iptables", "-D" if heal else "-I", "FORWARD",
                     *([] if heal else ["1"]), *rule], check=not heal)  # fmt: skip

    def freeze_node(self, node: str) -> None:
        """A silent node: every process of its container freezes (the cgroup freezer), so its
        sockets stay open and its kubelet stops posting, as on a power loss or a stuck kernel."""
        run(["docker", "pause", node])

    def thaw_node(self, node: str) -> None:
        """Unfreeze a silent node and wait until it is Ready."""
        run(["docker", "unpause", node])
        wait_for(lambda: self.ready(node), 180, f"node {node} Ready again", interval=2)

    def restore_nodes(self) -> None:
        """Start or thaw every node container a test stopped or froze and left so (it failed
        half-way)."""
        names = run(["bash", KIND_SH, "nodes"]).stdout.split()
        for node in names:
            state = run(["docker", "inspect", "-f", "{{.State.Running}} {{.State.Paused}}", node])
            running, paused = state.stdout.split()
            if paused == "true":
                self.thaw_node(node)
            elif running != "true":
                self.start_node(node)

    # -- TrainingJobs -------------------------------------------------------------------------

    def create_job(self, namespace: str, manifest: dict[str, Any]) -> None:
        self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, manifest)

    def job(self, namespace: str, name: str) -> dict[str, Any]:
        return cast(dict[str, Any], self.custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name))  # fmt: skip

    def status(self, namespace: str, name: str) -> dict[str, Any]:
        return cast(dict[str, Any], self.job(namespace, name).get("status") or {})

    def wait_status(self, namespace: str, name: str, check: Callable[[dict[str, Any]], bool],
                    what: str, timeout: float = 300) -> dict[str, Any]:  # fmt: skip
        def ok() -> dict[str, Any] | None:
            status = self.status(namespace, name)
            if status.get("phase") == "Failed" and "Failed" not in what:
                raise AssertionError(
                    f"{name} failed while waiting for {what}: {json.dumps(status)}"
                )
            return status if check(status) else None

        return cast(
            dict[str, Any], wait_for(ok, timeout, f"{namespace}/{name}: {what}", interval=0.5)
        )

    def node_pods(self, namespace: str, job: str, epoch: int | None = None) -> list[k8s.V1Pod]:
        selector = f"phalanx.dev/job={job},phalanx.dev/role=node"
        if epoch is not None:
            selector += f",phalanx.dev/epoch={epoch}"
        return list(self.core.list_namespaced_pod(namespace, label_selector=selector).items)

    def epoch_ranks(self, namespace: str, job: str, epoch: int) -> dict[str, int]:
        """Pod -> node rank in `epoch`: the pods created for it (their labels) and, while it is
        the job's epoch, those of earlier epochs that run it in place (the status's
        `current.ranks`: a restart or a resize carries pods over with their first labels)."""
        ranks = {str(p.metadata.name): int(p.metadata.labels["phalanx.dev/node-rank"])
                 for p in self.node_pods(namespace, job, epoch)
                 if not p.metadata.deletion_timestamp}  # fmt: skip
        status = self.status(namespace, job)
        if status.get("epoch") == epoch:
            ranks.update((status.get("current") or {}).get("ranks") or {})
        return ranks

    def running_pod(self, namespace: str, job: str, epoch: int, rank: int) -> k8s.V1Pod:
        """The Running node pod at `rank` in `epoch` (`epoch_ranks`)."""

        def find() -> k8s.V1Pod | None:
            named = {p for p, r in self.epoch_ranks(namespace, job, epoch).items() if r == rank}
            pods = [p for p in self.node_pods(namespace, job) if str(p.metadata.name) in named]
            return next((p for p in pods if p.status.phase == "Running"), None)

        return cast(k8s.V1Pod, wait_for(find, 180, f"{job} epoch {epoch} rank {rank} running"))

    def events(self, namespace: str, name: str) -> list[k8s.CoreV1Event]:
        items = self.core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={name}").items  # fmt: skip
        return sorted(items, key=lambda e: e.metadata.creation_timestamp)

    # -- per-test namespaces ------------------------------------------------------------------

    def shared_dir(self, namespace: str) -> Path:
        """The host folder behind the namespace's checkpoint volume (every node sees it)."""
        return self.state / "shared" / namespace

    def step_log(self, namespace: str, job: str) -> list[dict[str, Any]]:
        """What a user script wrote to `<its checkpoint dir>/steps.jsonl` (deploy/examples'
        scripts: `resumed` and `step` records with their times)."""
        log = self.shared_dir(namespace) / job / "steps.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def make_namespace(self, namespace: str) -> None:
        """A namespace with the shared checkpoint claim bound to its own hostPath volume."""
        self.core.create_namespace(
            {"metadata": {"name": namespace, "labels": {"phalanx.dev/e2e": "true"}}}
        )
        folder = self.shared_dir(namespace)
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o1777)
        self.core.create_persistent_volume({
            "metadata": {"name": f"{namespace}-checkpoints", "labels": {"phalanx.dev/e2e": "true"}},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "hostPath": {"path": f"{SHARED_IN_NODE}/{namespace}", "type": "Directory"},
                "claimRef": {"namespace": namespace, "name": CHECKPOINT_CLAIM},
            },
        })  # fmt: skip
        self.core.create_namespaced_persistent_volume_claim(namespace, {
            "metadata": {"name": CHECKPOINT_CLAIM},
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                     "volumeName": f"{namespace}-checkpoints",
                     "resources": {"requests": {"storage": "1Gi"}}},
        })  # fmt: skip
        # Pods that name an unbound claim are not scheduled: a job would start short of nodes.
        wait_for(lambda: self.core.read_namespaced_persistent_volume_claim(
            CHECKPOINT_CLAIM, namespace).status.phase == "Bound", 60, f"{namespace}'s claim Bound")  # fmt: skip

    def drop_namespace(self, namespace: str) -> None:
        self.core.delete_namespace(namespace)
        self.core.delete_persistent_volume(f"{namespace}-checkpoints")


def for_kind(manifest: dict[str, Any]) -> dict[str, Any]:
    """TEST-ONLY: the manifest with this suite's adaptations (module docstring): the mounted torch
    in every container, and the namespace's checkpoint claim at /checkpoints unless the job
    mounts one itself."""
    job = copy.deepcopy(manifest)
    spec = job["spec"]["template"].setdefault("spec", {})
    volumes = spec.setdefault("volumes", [])
    volumes.append(TORCH_VOLUME)
    has_claim = any(
        v.get("persistentVolumeClaim", {}).get("claimName") == CHECKPOINT_CLAIM for v in volumes
    )
    if not has_claim:
        volumes.append(
            {"name": "checkpoints", "persistentVolumeClaim": {"claimName": CHECKPOINT_CLAIM}}
        )
    for container in spec["containers"]:
        mounts = container.setdefault("volumeMounts", [])
        mounts.append(TORCH_MOUNT)
        if not has_claim:
            mounts.append({"name": "checkpoints", "mountPath": "/checkpoints"})
    return job


def first_step_after(log: Path, epoch: int) -> tuple[int, float] | None:
    """The epoch and the trainer's timestamp of the first training step of any epoch after
    `epoch`, from its step log (losses.jsonl). An epoch that never trained (its pods could not
    be scheduled, say) has no step there."""
    if not log.exists():
        return None
    for line in log.read_text().splitlines():
        record = json.loads(line)
        if record.get("epoch", 0) > epoch and "loss" in record:
            return int(record["epoch"]), float(record["time"])
    return None


def last_step_of(log: Path, epoch: int) -> float:
    """The trainer's timestamp of the last training step of `epoch` in its step log: when a job
    that stalls stopped training (the operator counts a Hang's recovery from there)."""
    times = [
        float(record["time"])
        for record in map(json.loads, log.read_text().splitlines())
        if record.get("epoch", 0) == epoch and "loss" in record
    ]
    if not times:
        raise AssertionError(f"no training step of epoch {epoch} in {log}")
    return max(times)


def api_seconds(timestamp: str) -> float:
    """An API timestamp (a failure's, a condition's) in seconds since the epoch: the operator,
    the trainer and the tests share this machine's clock."""
    return datetime.fromisoformat(timestamp).timestamp()


def record(case: str, **figures: Any) -> None:
    """Append one measurement to `<artifacts>/e2e-recovery.jsonl` (read for the report)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with (ARTIFACTS / "e2e-recovery.jsonl").open("a") as out:
        out.write(json.dumps({"case": case, **figures}) + "\n")
