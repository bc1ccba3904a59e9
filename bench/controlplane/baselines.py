"""The control-plane benchmark's baselines: the same jobs x pods made by the kube Job controller
and by Kubeflow's training operator, each on a fresh API server with the same flags, the same
kube-scheduler and the same kwok nodes as Phalanx's run (`bench.controlplane.controlplane`).

- **The kube Job controller** (kube-controller-manager's `job` controller): N Indexed Jobs of M
  completions, all parallel. It is this machine's floor for creating pods, so its client limits
  are lifted (`JOB_CONTROLLER_ARGS`: a shipped controller-manager allows 20 requests a second)
  and it runs its default 5 job workers.
- **The same, with Phalanx's pods** (`like_phalanx`): each Job's pod template is the pod
  Phalanx's builder makes for the bench's TrainingJob (its env contract, labels, /dev/shm volume),
  and a headless Service selects each Job's pods and names their subdomain, as the Kubernetes
  docs' Indexed Job with pod-to-pod communication has it (Phalanx's pods need the same for their
  DNS names). Like for like: the same payload, and the scheduler's default spreading, which a
  Service selecting the pods turns on, paid by both.
- **Kubeflow's training operator v1.8.1** (`tests/tools/cluster-tools.sh training-operator`),
  PyTorchJob only, as its manifests deploy it: one worker thread, controller-runtime's client
  limits (20 requests a second, bursts of 30), which no flag changes. Out of the cluster here,
  so its webhook certificate is the one its cert rotator writes to a Secret, copied to the folder
  a mounted Secret would fill, and its ValidatingWebhookConfiguration matches no request (the
  API server cannot reach a webhook served on this machine by a Service name): its admission
  check is not part of its figures.

Each run reports apply -> all pods created and -> all pods Running, the requests its controller
made (the audit log: the training operator signs in as the audited identity, like Phalanx's
operator) and the CPU seconds of its controller and of the API server.
"""

from __future__ import annotations

import base64
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from bench.common.process_stats import cpu_seconds, peak_rss_mib
from bench.common.tally import Tally, start_watches
from bench.controlplane import kwok
from bench.controlplane.audit import audit_args, operator_kubeconfig, requests_between
from harness.controlplane import ControlPlane, running_control_plane, wait_until
from harness.jobs import operator_job
from phalanx.models.job import TrainingJob
from phalanx.operator import builder
from phalanx.operator.settings import OperatorSettings

NAMESPACE = "bench"
PODS_PER_NODE = 8
IMAGE = "phalanx/trainer:test"
JOB_CONTROLLER_ARGS = ("--kube-api-qps=1000", "--kube-api-burst=2000")
KUBEFLOW_NAMESPACE = "kubeflow"
KUBEFLOW_SECRET = "training-operator-webhook-cert"
KUBEFLOW_WEBHOOK = "validator.training-operator.kubeflow.org"
KUBEFLOW_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
"""Where the training operator's webhook server reads its certificate (fixed in its code)."""
WAIT_SECONDS = 1800


def _container() -> dict[str, Any]:
    return {"name": "trainer", "image": IMAGE}


def indexed_job(name: str, pods: int, template: dict[str, Any] | None = None) -> dict[str, Any]:
    """An Indexed Job of `pods` completions, all running at once (as a gang's ranks), of pods
    like `template` where given (`phalanx_template`)."""
    spec = {"restartPolicy": "Never", "containers": [_container()]}
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"completionMode": "Indexed", "completions": pods, "parallelism": pods,
                 "template": template or {"spec": spec}},
    }  # fmt: skip


PER_POD_FIELDS = ("hostname", "serviceAccountName")
"""What Phalanx's pod spec has that a Job's template leaves to others: the Job controller names
an Indexed Job's pods' hosts itself, and Phalanx's pods run as their job's own service account,
which a Job's pods do not have."""


def phalanx_template(
    name: str, pods: int, spec: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod template of Job `name` that makes the pods Phalanx's builder makes for a
    TrainingJob `name` of `pods` pods and `spec` (its rank 0's, less `PER_POD_FIELDS`), in the
    subdomain of the Job's headless Service (`headless_service`); and the ConfigMap its pods take
    the job's common variables from, as Phalanx makes it for the TrainingJob."""
    manifest = operator_job(name, **spec)
    manifest["metadata"].update(namespace=NAMESPACE, uid="00000000-0000-0000-0000-000000000000")
    job = TrainingJob.model_validate(manifest)
    settings = OperatorSettings().build_settings()
    pod = builder.node_pod(job, 1, 0, pods, settings)
    pod_spec = {k: v for k, v in pod["spec"].items() if k not in PER_POD_FIELDS}
    metadata = {k: pod["metadata"][k] for k in ("labels", "annotations") if k in pod["metadata"]}
    common = builder.env_config_map(job, settings)
    config_map = {**common, "metadata": {"name": common["metadata"]["name"]}}  # no owner here
    return {"metadata": metadata, "spec": {**pod_spec, "subdomain": name}}, config_map


def headless_service(name: str) -> dict[str, Any]:
    """The Service that gives Job `name`'s pods their DNS names."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"clusterIP": "None", "selector": {"batch.kubernetes.io/job-name": name}}}  # fmt: skip


def pytorch_job(name: str, pods: int) -> dict[str, Any]:
    """A PyTorchJob of one master and `pods` - 1 workers."""

    def replicas(count: int) -> dict[str, Any]:
        return {"replicas": count, "restartPolicy": "OnFailure",
                "template": {"spec": {"containers": [{**_container(), "name": "pytorch"}]}}}  # fmt: skip

    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {"Master": replicas(1), "Worker": replicas(pods - 1)}},
    }  # fmt: skip


@contextmanager
def _cluster(
    tmp: Path, jobs: int, pods: int, selector: str, controllers: str = ControlPlane.controllers,
    controller_args: tuple[str, ...] = (),
) -> Iterator[tuple[ControlPlane, k8s.ApiClient, Tally]]:  # fmt: skip
    with running_control_plane(tmp, audit_args(tmp), controllers, controller_args) as plane:
        api = k8s_config.new_client_from_config(config_file=str(plane.kubeconfig))
        core = k8s.CoreV1Api(api)
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=NAMESPACE)))
        with kwok.scheduler_and_kwok(plane, tmp):
            kwok.add_nodes(core, -(-jobs * pods // PODS_PER_NODE) + PODS_PER_NODE)
            tally = Tally()
            start_watches(api, NAMESPACE, tally, selector, trainingjobs=False)
            yield plane, api, tally


def _create_and_wait(
    tally: Tally, jobs: int, pods: int, create: Callable[[int], object], cpu: dict[str, int]
) -> dict[str, Any]:
    """Create the jobs from 8 client threads; the seconds to all pods created and Running, and
    the CPU seconds of the processes in `cpu` over it."""
    before = {name: cpu_seconds(pid) for name, pid in cpu.items()}
    started, wall_started = time.monotonic(), time.time()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(jobs)))
    applied = time.monotonic() - started
    expected = jobs * pods
    wait_until(lambda: len(tally.created) >= expected, WAIT_SECONDS, f"{expected} pods",
               interval=0.2)  # fmt: skip
    wait_until(lambda: len(tally.running) >= expected, WAIT_SECONDS, f"{expected} pods Running",
               interval=0.2)  # fmt: skip
    with tally.lock:
        running = sorted(tally.running.values())[expected - 1]
    return {
        "jobs": jobs, "nodes": pods, "pods": expected, "apply": applied,
        "all_created": tally.nth_created(expected) - started, "all_running": running - started,
        "cpu_seconds": {name: cpu_seconds(pid) - before[name] for name, pid in cpu.items()},
        "wall_started": wall_started, "wall_ended": time.time(),
    }  # fmt: skip


def measure_job_controller(
    jobs: int, pods: int, like_phalanx: dict[str, Any] | None = None
) -> dict[str, Any]:
    """`jobs` Indexed Jobs of `pods` completions, made by the kube Job controller; with
    `like_phalanx` (the spec of the bench's TrainingJobs), of Phalanx's pods, each Job with its
    headless Service and env ConfigMap (`phalanx_template`)."""
    with tempfile.TemporaryDirectory() as tmp, _cluster(
        Path(tmp), jobs, pods, "batch.kubernetes.io/job-name",
        "garbagecollector,namespace,job", JOB_CONTROLLER_ARGS,
    ) as (plane, api, tally):  # fmt: skip
        batch, core = k8s.BatchV1Api(api), k8s.CoreV1Api(api)
        names = [f"job-{index:04d}" for index in range(jobs)]
        # Built before the clock starts: the bench's CPU is not the Job controller's.
        like = [phalanx_template(name, pods, like_phalanx) if like_phalanx else None
                for name in names]  # fmt: skip

        def create(index: int) -> None:
            name, template = names[index], None
            if (made := like[index]) is not None:
                template, config_map = made
                core.create_namespaced_service(NAMESPACE, headless_service(name))
                core.create_namespaced_config_map(NAMESPACE, config_map)
            batch.create_namespaced_job(NAMESPACE, indexed_job(name, pods, template))

        figures = _create_and_wait(
            tally, jobs, pods, create, _processes(plane, "kube-controller-manager")
        )
    system = "kube Job controller" + (", Phalanx's pods" if like_phalanx is not None else "")
    return {"system": system, "flags": " ".join(JOB_CONTROLLER_ARGS), **figures}


def _processes(plane: ControlPlane, controller: str, pid: int | None = None) -> dict[str, int]:
    """The processes whose CPU a baseline's run reports: its controller (the controller-manager
    unless `pid`), the API server, etcd, and the scheduler and kwok it shares with Phalanx's."""
    shared = {p.name(): p.pid for p in psutil.Process().children()
              if p.name() in ("kube-scheduler", "kwok")}  # fmt: skip
    return {controller: plane.pids[2] if pid is None else pid, "kube-apiserver": plane.pids[1],
            "etcd": plane.pids[0], **shared}  # fmt: skip


def training_operator() -> tuple[Path, Path]:
    """The pinned training operator binary and its CRD folder (built by cluster-tools.sh)."""
    directory = subprocess.run(
        ["bash", str(kwok.ROOT / "tests/tools/cluster-tools.sh"), "--print-dir"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    binary, crds = Path(directory) / "training-operator", Path(directory) / "training-operator-crds"
    if not binary.exists() or not crds.is_dir():
        raise SystemExit(
            f"{binary} is missing: build it with `bash tests/tools/cluster-tools.sh training-operator`"
        )
    return binary, crds


def _no_op_webhook(core: k8s.CoreV1Api, api: k8s.ApiClient) -> None:
    """What the operator's cert rotator needs to be ready: its Secret, and a webhook
    configuration to put its CA in, one that matches no request."""
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=KUBEFLOW_NAMESPACE)))
    core.create_namespaced_secret(KUBEFLOW_NAMESPACE, k8s.V1Secret(
        metadata=k8s.V1ObjectMeta(name=KUBEFLOW_SECRET)))  # fmt: skip
    k8s.AdmissionregistrationV1Api(api).create_validating_webhook_configuration({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": KUBEFLOW_WEBHOOK},
        "webhooks": [{
            "name": "validate-pytorchjob.kubeflow.org", "admissionReviewVersions": ["v1"],
            "sideEffects": "None", "failurePolicy": "Ignore",
            "clientConfig": {"service": {"name": "training-operator", "namespace": KUBEFLOW_NAMESPACE,
                                         "path": "/validate-kubeflow-org-v1-pytorchjob"}},
            "rules": [{"apiGroups": ["kubeflow.org"], "apiVersions": ["v1"],
                       "operations": ["CONNECT"], "resources": ["nothing"]}],
        }],
    })  # fmt: skip


def _mount_certificate(core: k8s.CoreV1Api, stop: threading.Event) -> None:
    """Copy the Secret's certificate to the operator's certificate folder once it is written,
    as the kubelet's mount of it would."""
    while not stop.is_set():
        data = core.read_namespaced_secret(KUBEFLOW_SECRET, KUBEFLOW_NAMESPACE).data or {}
        if "tls.crt" in data and "tls.key" in data:
            KUBEFLOW_CERT_DIR.mkdir(parents=True, exist_ok=True)
            for name, value in data.items():
                (KUBEFLOW_CERT_DIR / name).write_bytes(base64.b64decode(value))
            return
        stop.wait(0.2)


def measure_kubeflow(jobs: int, pods: int) -> dict[str, Any]:
    """`jobs` PyTorchJobs of `pods` pods, made by Kubeflow's training operator."""
    binary, crds = training_operator()
    with tempfile.TemporaryDirectory() as tmp, _cluster(
        Path(tmp), jobs, pods, "training.kubeflow.org/job-name"
    ) as (plane, api, tally):  # fmt: skip
        core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
        subprocess.run([str(plane.kubectl), "--kubeconfig", str(plane.kubeconfig), "apply",
                        "--server-side", "-f", str(crds / "kubeflow.org_pytorchjobs.yaml")],
                       check=True, capture_output=True)  # fmt: skip
        _no_op_webhook(core, api)
        stop = threading.Event()
        env = {**os.environ, "KUBECONFIG": str(operator_kubeconfig(plane, Path(tmp))),
               "MY_POD_NAMESPACE": KUBEFLOW_NAMESPACE}  # fmt: skip
        with (Path(tmp) / "training-operator.log").open("wb") as log:
            operator = subprocess.Popen(
                [str(binary), "--enable-scheme=pytorchjob", "--metrics-bind-address=0",
                 "--health-probe-bind-address=0"],
                env=env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        mounter = threading.Thread(target=_mount_certificate, args=(core, stop), daemon=True)
        mounter.start()
        try:
            log_path = Path(tmp) / "training-operator.log"
            wait_until(lambda: _controller_started(log_path, operator), 120,
                       "the training operator's PyTorchJob controller")  # fmt: skip
            figures = _create_and_wait(
                tally, jobs, pods,
                lambda i: custom.create_namespaced_custom_object(
                    "kubeflow.org", "v1", NAMESPACE, "pytorchjobs", pytorch_job(f"job-{i:04d}", pods)),
                _processes(plane, "training-operator", operator.pid),
            )  # fmt: skip
            peak_rss = peak_rss_mib(operator.pid)
        finally:
            stop.set()
            operator.kill()
            operator.wait()
        requests = requests_between(Path(tmp), figures["wall_started"], figures["wall_ended"])
    return {
        "system": "Kubeflow training operator v1.8.1", "flags": "PyTorchJob only, as deployed",
        **figures, "api_requests": requests["requests"], "api_by_code": requests["by_code"],
        "api_by_verb": requests["by_verb"], "peak_rss_mib": peak_rss,
    }  # fmt: skip


def _controller_started(log: Path, operator: subprocess.Popen[bytes]) -> bool:
    text = log.read_text(errors="replace") if log.exists() else ""
    if operator.poll() is not None:
        raise RuntimeError(f"the training operator exited {operator.returncode}:\n{text[-3000:]}")
    return any("Starting workers" in line and "pytorchjob" in line for line in text.splitlines())
