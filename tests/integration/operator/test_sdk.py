"""The Python SDK against the API service, with the operator running and the test as kubelet.

Covers: `create` from a manifest, `wait_for(name, "Succeeded", timeout)` returning once every node
pod exited 0, `list` pages, the async client's `get`, and the SDK's typed errors (404, 422).
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from kubernetes import client as k8s

from harness.jobs import operator_job
from harness.rbac import grant, grant_jobs, identity
from phalanx.sdk import AsyncClient, Client, InvalidError, NotFoundError
from tests.integration.operator.conftest import Cluster
from tests.support.apiserver import running_api


def test_wait_for_returns_when_the_job_succeeds(
    cluster: Cluster, kube_client: k8s.ApiClient, namespace: str
) -> None:
    user = identity(kube_client, namespace, "sdk-user")
    grant_jobs(kube_client, namespace, user)
    with (
        running_api(kube_client, authz_cache_seconds=0.0) as url,
        Client(url, token=user.token, namespace=namespace) as phalanx,
        ThreadPoolExecutor(1) as pool,
    ):
        created = phalanx.create(operator_job("done", nprocPerNode=1))
        assert created.name == "done"
        waiting = pool.submit(phalanx.wait_for, "done", "Succeeded", 60)
        cluster.kubelet.start_gang("done", 1, 4)
        assert not waiting.done(), "wait_for returned before the job succeeded"
        for rank in range(4):
            cluster.kubelet.exit(f"done-1-{rank}", 0, reason="Completed")
        job = waiting.result(timeout=60)
        assert job.status is not None
        assert job.status.phase == "Succeeded"
        assert [j.name for page in phalanx.list() for j in page.items] == ["done"]

        async def async_get() -> str | None:
            async with AsyncClient(url, token=user.token, namespace=namespace) as client:
                fetched = await client.get("done")
                return fetched.status.phase if fetched.status else None

        assert asyncio.run(async_get()) == "Succeeded"

        base, headers = f"{url}/api/v1/namespaces/{namespace}/jobs/done", user.headers
        cluster.wait_event("done", "Succeeded")
        events = httpx.get(f"{base}/events", headers=headers, timeout=10)
        assert events.status_code == 403, "events need their own RBAC grant (core events)"
        read_events = k8s.V1PolicyRule(api_groups=[""], resources=["events"], verbs=["list"])
        grant(kube_client, namespace, user, "events", [read_events])
        events = httpx.get(f"{base}/events", headers=headers, timeout=10)
        reasons = [e["reason"] for e in events.json()["items"]]
        assert {"Started", "Succeeded"} <= set(reasons)  # (timestamps have 1 s resolution)
        checkpoints = httpx.get(f"{base}/checkpoints", headers=headers, timeout=10).json()
        assert checkpoints["location"] == "/ckpt"
        assert checkpoints["requestedIntervalSteps"] == 100, "the spec's cadence, by its name"
        assert checkpoints["intervalSteps"] is None, "the fake kubelet's pods report none"
        assert "no checkpoint reported" in checkpoints["note"]
        with httpx.stream("GET", f"{base}/progress", headers=headers, timeout=10) as stream:
            lines = [line for line in stream.iter_lines() if line.startswith(("event:", "data:"))]
        assert lines[0] == "event: progress"
        assert json.loads(lines[1].removeprefix("data: "))["phase"] == "Succeeded"
        with pytest.raises(NotFoundError):
            phalanx.get("absent")
        with pytest.raises(InvalidError, match=r"spec\.replicas\.min"):
            phalanx.create(operator_job("bad", replicas={"min": 0, "max": 2}))
