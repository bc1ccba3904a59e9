"""A platform team's first mistakes, each named in the job's conditions by the part of a real
cluster that found it: the scheduler (a claim that does not exist, more GPUs than a node has),
the API server's ServiceAccount admission, the kubelet (a Secret that does not exist) and
strict field validation (a misspelt container field: no pod runs without it).

Each job is watched from its creation; the seconds until its condition named the cause are
recorded (`record`, for the report), not asserted: a deadline only bounds the wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.cluster import KindCluster, for_kind, record
from tests.e2e.jobs import training_job

pytestmark = pytest.mark.e2e
DEADLINE = 60


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions", []) if c["type"] == kind), {})


def job(name: str, *, pod: dict[str, Any] | None = None, **container: Any) -> dict[str, Any]:
    """The reference trainer on one node pod, its template changed by `pod` and `container`."""
    manifest = training_job(name, steps=20, nodes=(1, 1), gpus=None)
    template = manifest["spec"]["template"]["spec"]
    template.update(pod or {})
    template["containers"][0].update(container)
    return for_kind(manifest)


def named(kind: KindCluster, namespace: str, manifest: dict[str, Any], kind_: str,
          check: Callable[[dict[str, Any]], bool], case: str) -> dict[str, Any]:  # fmt: skip
    """Create the job; its condition `kind_` once `check` holds, with the seconds it took."""
    name = manifest["metadata"]["name"]
    started = time.monotonic()
    kind.create_job(namespace, manifest)
    status = kind.wait_status(namespace, name, lambda s: check(condition(s, kind_)),
                              f"{kind_} naming the cause", timeout=DEADLINE)  # fmt: skip
    record(case, seconds=round(time.monotonic() - started, 2))
    return condition(status, kind_)


def test_a_missing_claim_account_and_secret_are_named(kind: KindCluster, namespace: str) -> None:
    claim = job("no-claim", pod={"volumes": [
        {"name": "data", "persistentVolumeClaim": {"claimName": "no-such-claim"}}]},
        volumeMounts=[{"name": "data", "mountPath": "/data"}])  # fmt: skip
    found = named(kind, namespace, claim, "Unschedulable",
                  lambda c: c.get("reason") == "PodUnschedulable", "named-missing-claim")  # fmt: skip
    assert 'persistentvolumeclaim "no-such-claim" not found' in found["message"], found

    account = job("no-account", pod={"serviceAccountName": "no-such-account"})
    found = named(kind, namespace, account, "ConfigurationError",
                  lambda c: c.get("reason") == "MissingObject", "named-missing-account")  # fmt: skip
    assert 'serviceaccount "no-such-account" not found' in found["message"], found

    secret = job("no-secret", env=[{"name": "HF_TOKEN", "valueFrom": {
        "secretKeyRef": {"name": "no-such-secret", "key": "token"}}}])  # fmt: skip
    found = named(kind, namespace, secret, "ConfigurationError",
                  lambda c: c.get("status") == "True", "named-missing-secret")  # fmt: skip
    assert 'secret "no-such-secret" not found' in found["message"], found


def test_too_many_gpus_carry_the_schedulers_reason(kind: KindCluster, namespace: str) -> None:
    greedy = job("too-many-gpus", resources={"limits": {"nvidia.com/gpu": 64}})
    found = named(kind, namespace, greedy, "Unschedulable",
                  lambda c: c.get("reason") == "PodUnschedulable", "named-insufficient-gpu")  # fmt: skip
    assert "Insufficient nvidia.com/gpu" in found["message"], found


def test_a_misspelt_container_field_is_refused(kind: KindCluster, namespace: str) -> None:
    misspelt = job("misspelt", resourcs={"limits": {"nvidia.com/gpu": 1}})
    found = named(kind, namespace, misspelt, "ConfigurationError",
                  lambda c: c.get("reason") == "RefusedByAPIServer", "named-misspelt-field")  # fmt: skip
    assert 'unknown field "spec.containers[0].resourcs"' in found["message"], found
    assert kind.node_pods(namespace, "misspelt") == [], "no pod runs without the field"
