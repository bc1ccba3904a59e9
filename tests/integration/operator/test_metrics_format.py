"""Both /metrics endpoints (the operator's, the API service's) pass `promtool check metrics`,
the linter Prometheus ships: names, units, help text, counter suffixes, histogram shape.

The operator runs as a real process with its metrics port open and a job goes through a failure
and a recovery first, so every family has samples; the API service has answered 200, 401 and 404.
promtool comes from the project's binary script (built from the Prometheus Go module).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
from kubernetes import client as k8s

from harness.controlplane import ControlPlane, binaries_dir, free_port, wait_until
from harness.jobs import operator_job
from harness.rbac import grant_jobs, identity
from phalanx.models.job import GROUP, PLURAL, VERSION
from tests.support.apiserver import running_api
from tests.support.kubelet import FakeKubelet
from tests.support.operator_process import operator_process


def promtool_check(text: str) -> str:
    """promtool's complaints about `text` (empty when clean); fails the test on a bad exit."""
    result = subprocess.run(
        [str(binaries_dir() / "promtool"), "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
    )
    problems = (result.stdout + result.stderr).strip()
    assert result.returncode == 0 or problems, f"promtool exited {result.returncode} silently"
    return problems


def test_promtool_accepts_a_clean_exposition_and_flags_a_bad_one() -> None:
    """The check can fail: a counter without `_total` is reported."""
    bad = "# HELP requests Requests.\n# TYPE requests counter\nrequests 1\n"
    assert 'counter metrics should have "_total" suffix' in promtool_check(bad)
    good = "# HELP requests_total Requests.\n# TYPE requests_total counter\nrequests_total 1\n"
    assert promtool_check(good) == ""


def test_both_metrics_endpoints_pass_promtool(
    control_plane: ControlPlane,
    kube_client: k8s.ApiClient,
    namespace: str,
    kubelet: FakeKubelet,
    tmp_path: Path,
) -> None:
    port = free_port()
    operator_metrics = f"http://127.0.0.1:{port}/metrics"
    k8s.CustomObjectsApi(kube_client).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, operator_job("scraped")
    )
    with operator_process(control_plane, namespace, tmp_path / "operator.log", port):
        kubelet.start_gang("scraped", 1, 4)
        kubelet.exit("scraped-1-2", 1, message="boom")
        kubelet.start_gang("scraped", 2, 4)
        kubelet.heartbeat("scraped", {"epoch": 2, "step": 1})  # recovered: a recovery sample

        def recovered() -> bool:
            try:
                text = httpx.get(operator_metrics, timeout=5).text
            except httpx.TransportError:
                return False
            return "phalanx_recovery_seconds_count" in text and 'class="application"' in text

        wait_until(recovered, 60, "the operator's metrics to show a recovery", interval=0.5)
        operator_text = httpx.get(operator_metrics, timeout=5).text

    user = identity(kube_client, namespace, "scraper")
    grant_jobs(kube_client, namespace, user)
    with running_api(kube_client) as url:
        jobs = f"{url}/api/v1/namespaces/{namespace}/jobs"
        assert httpx.get(
            f"{url}/api/v1/jobs?namespace={namespace}", headers=user.headers
        ).is_success
        assert httpx.get(f"{jobs}/scraped", headers=user.headers).is_success
        assert httpx.get(f"{jobs}/nope", headers=user.headers).status_code == 404
        assert httpx.get(f"{jobs}/scraped").status_code == 401
        api_text = httpx.get(f"{url}/metrics", timeout=5).text

    assert "phalanx_restarts_total" in operator_text
    assert "phalanx_api_requests_total" in api_text
    assert promtool_check(operator_text) == ""
    assert promtool_check(api_text) == ""
