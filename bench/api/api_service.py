"""The API service benchmark's service and cluster under test: the API service as its own
process, the jobs it serves, the wait for its cache to hold them, and the cross-checks that both
sides answer with the same jobs before anything is timed (`bench.api.api` times the reads)."""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from kubernetes import client as k8s

from harness.controlplane import ControlPlane, wait_until
from harness.jobs import operator_job
from harness.rbac import Identity
from phalanx.kubeconfig import load_configuration
from phalanx.models.job import GROUP, PLURAL, VERSION
from phalanx.server.settings import ServerSettings

NAMESPACE = "bench"


@contextlib.contextmanager
def running_service(settings: ServerSettings, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m phalanx.server` with `settings` in its environment, stopped on exit. It serves
    TLS as the chart runs it (the kube API's side of the comparison is TLS too)."""
    env = {
        **os.environ,
        "PHALANX_API_KUBECONFIG": str(settings.kubeconfig),
        "PHALANX_API_HOST": settings.host,
        "PHALANX_API_PORT": str(settings.port),
        "PHALANX_API_TLS_CERT_FILE": str(settings.tls_cert_file),
        "PHALANX_API_TLS_KEY_FILE": str(settings.tls_key_file),
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "phalanx.server"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def create_jobs(api: k8s.ApiClient, n: int) -> list[str]:
    """`n` TrainingJobs job-0000... in NAMESPACE, 8 at a time; their names."""
    custom = k8s.CustomObjectsApi(api)
    names = [f"job-{i:04d}" for i in range(n)]

    def create(name: str) -> None:
        custom.create_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, PLURAL, operator_job(name)
        )

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, names))
    return names


def wait_for_cache(api: httpx.Client, proc: subprocess.Popen[bytes], n: int, log: Path) -> None:
    """Until /readyz is 200 and a list shows all `n` jobs."""

    def holds_all() -> bool:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-4000:]
            raise RuntimeError(f"the API service exited with {proc.returncode}:\n{tail}")
        try:
            if api.get("/readyz").status_code != 200:
                return False
            page = api.get("/api/v1/jobs", params={"namespace": NAMESPACE, "limit": 1})
        except httpx.TransportError:
            return False
        body = page.json() if page.status_code == 200 else {}
        return bool(body) and len(body["items"]) + body["remaining"] == n

    wait_until(holds_all, 120, f"the API service's cache to hold {n} jobs", interval=0.2)


def check_agreement(api: httpx.Client, kube: httpx.Client, page: int, name: str) -> str:
    """The first page of names and one job's uid, from both sides; raises if they differ."""
    mine = api.get("/api/v1/jobs", params={"namespace": NAMESPACE, "limit": page}).json()
    theirs = kube.get(kube_jobs(), params={"limit": page}).json()
    api_names = [j["name"] for j in mine["items"]]
    kube_names = [j["metadata"]["name"] for j in theirs["items"]]
    if api_names != kube_names:
        if sorted(api_names) != sorted(kube_names):
            raise AssertionError(f"first pages differ: {api_names[:5]}... vs {kube_names[:5]}...")
        order = "same names, different order"
    else:
        order = "same names, same order"
    uid = api.get(f"/api/v1/namespaces/{NAMESPACE}/jobs/{name}").json()["uid"]
    kube_uid = kube.get(f"{kube_jobs()}/{name}").json()["metadata"]["uid"]
    if uid != kube_uid:
        raise AssertionError(f"{name}: uid {uid} from the API, {kube_uid} from kube")
    return f"first page of {page}: {order}; {name}: same uid"


def kube_requests(plane: ControlPlane) -> Counter[tuple[str, str]]:
    """Requests the kube-apiserver has served so far, by (resource, verb), from its metrics."""
    pki = plane.pki
    tls = ssl.create_default_context(cafile=str(pki.ca_cert))
    tls.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
    text = httpx.get(f"{plane.server}/metrics", verify=tls, timeout=30).text
    counts: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
            counts[labels.get("resource", ""), labels.get("verb", "")] += int(
                float(line.rsplit(" ", 1)[1])
            )
    return counts


def cache_probe(plane: ControlPlane, api: httpx.Client, page: int, n: int = 100) -> str:
    """What the kube-apiserver served while the API service answered `n` lists: the lists must
    come from the cache, so no LIST of trainingjobs may reach it."""
    before = kube_requests(plane)
    if not before[PLURAL, "LIST"]:  # the cache's first list and check_agreement's came before
        raise AssertionError("no LIST of trainingjobs in the apiserver's metrics: parse failed")
    for _ in range(n):
        api.get("/api/v1/jobs", params={"namespace": NAMESPACE, "limit": page}).raise_for_status()
    after = kube_requests(plane)
    lists = after[PLURAL, "LIST"] - before[PLURAL, "LIST"]
    reviews = after["subjectaccessreviews", "POST"] - before["subjectaccessreviews", "POST"]
    tokens = after["tokenreviews", "POST"] - before["tokenreviews", "POST"]
    if lists:
        raise AssertionError(f"{lists} LISTs of {PLURAL} reached the API server during {n} lists")
    return (
        f"while the service answered {n} lists, the kube-apiserver served 0 LISTs of {PLURAL}, "
        f"{reviews} SubjectAccessReviews and {tokens} TokenReviews"
    )


def kube_jobs() -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{NAMESPACE}/{PLURAL}"


def kube_client_for(plane: ControlPlane, who: Identity) -> Callable[[], httpx.Client]:
    """Clients of the API server (URL and CA from the kubeconfig) that present `who`'s token."""
    conf = load_configuration(plane.kubeconfig)
    tls = ssl.create_default_context(cafile=conf.ssl_ca_cert)
    return lambda: httpx.Client(
        base_url=conf.host, verify=tls, headers=who.kube_headers, timeout=60
    )


def versions(plane: ControlPlane, kube: httpx.Client) -> str:
    apiserver = kube.get("/version").json().get("gitVersion", "?")
    etcd = subprocess.run(
        [str(plane.bin_dir / "etcd"), "--version"], capture_output=True, text=True, check=False
    ).stdout.split("\n")[0]
    return f"kube-apiserver {apiserver}, {etcd.lower().replace(' version:', '')}"
