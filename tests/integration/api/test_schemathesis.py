"""Property-based tests of the whole REST API from its own OpenAPI document (schemathesis), with
the real API server behind the service: no 5xx, and every response conforms to the document
(status code, content type, headers, body schema).

Generated path parameters are the namespace and jobs that exist half of the time (schemathesis
dictionaries), so reads, scales, suspends and deletes reach real jobs and not only 404s. The live
progress stream is left out: on a running job it never ends, by design.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kubernetes import client as k8s

from harness.jobs import operator_job
from harness.rbac import grant, grant_jobs, identity
from phalanx.models.job import GROUP, PLURAL, VERSION

CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
)
JOBS = ("alpha", "beta", "gamma")
MAX_EXAMPLES = 30
REACH_REAL_JOBS = [
    f"{method} /api/v1{path}"
    for method, path in [
        ("GET", "/jobs"),
        ("GET", "/namespaces/{namespace}/jobs/{name}"),
        ("PUT", "/namespaces/{namespace}/jobs/{name}/scale"),
        ("POST", "/namespaces/{namespace}/jobs/{name}/suspend"),
        ("POST", "/namespaces/{namespace}/jobs/{name}/resume"),
        ("DELETE", "/namespaces/{namespace}/jobs/{name}"),
        ("GET", "/namespaces/{namespace}/jobs/{name}/history"),
    ]
]
"""Operations that must have succeeded on a real job at least once: the run did not only meet
401s, 403s and 404s."""


def _config(namespace: str) -> str:
    """Real names half of the time; only the last job may be deleted, so the others stay for
    the operations tested after `deleteJob`; scales within the jobs' replicas half of the time."""
    keep, deletable = json.dumps(list(JOBS[:-1])), json.dumps(list(JOBS[-1:]))
    return f"""
[dictionaries.namespaces]
values = ["{namespace}"]

[dictionaries.jobs]
values = {keep}

[dictionaries.deletable]
values = {deletable}

[dictionaries.nodes]
values = [2, 3, 4]

[parameters]
"path.namespace" = {{ dictionary = "namespaces", probability = 0.7 }}
"query.namespace" = {{ dictionary = "namespaces", probability = 0.7 }}
"path.name" = {{ dictionary = "jobs", probability = 0.5 }}
"body.nodes" = {{ dictionary = "nodes", probability = 0.5 }}

[[operations]]
include-operation-id = "deleteJob"
parameters = {{ "path.name" = {{ dictionary = "deletable", probability = 0.5 }} }}
"""


def test_schemathesis_finds_no_server_error_and_no_schema_violation(
    api_url: str, kube_client: k8s.ApiClient, namespace: str, tmp_path: Path
) -> None:
    fuzzer = identity(kube_client, namespace, "fuzzer")
    grant_jobs(kube_client, namespace, fuzzer)
    grant(kube_client, namespace, fuzzer, "observe", [
        k8s.V1PolicyRule(api_groups=[""], resources=["events"], verbs=["list"]),
        k8s.V1PolicyRule(api_groups=[""], resources=["pods/log"], verbs=["get"]),
    ])  # fmt: skip
    custom = k8s.CustomObjectsApi(kube_client)
    for name in JOBS:
        custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, operator_job(name)
        )
    config = tmp_path / "schemathesis.toml"
    config.write_text(_config(namespace))
    report = tmp_path / "report.json"

    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "st"),
            "--config-file", str(config),
            "--no-color",
            "run", f"{api_url}/openapi.json",
            "--checks", ",".join(CHECKS),
            "--header", f"Authorization: Bearer {fuzzer.token}",
            "--exclude-operation-id", "streamJobProgress",
            "--max-examples", str(MAX_EXAMPLES),
            "--request-timeout", "20",
            "--seed", "20261122",
            "--workers", "1",
            "--generation-database", "none",
            "--report", "json", "--report-json-path", str(report),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,  # its crash cache (for `st replay`) goes there, not into the checkout
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    cases = json.loads(report.read_text())["test_cases"]
    assert cases["with_failures"] == cases["errored"] == 0, output
    assert cases["generated"] >= 10 * MAX_EXAMPLES, cases
    print(f"schemathesis: {cases['generated']} cases, none failed")
    accepted = {
        operation: sum(phase["accepted"] for phase in rates.values())
        for operation, rates in json.loads(report.read_text())["valid_rates"].items()
    }
    for operation in REACH_REAL_JOBS:
        assert accepted.get(operation, 0) > 0, f"{operation} never got past 4xx: {accepted}"
