"""The operator's requests as the API server saw them: an identity of its own (a static token)
and an audit policy that logs that identity's requests only, at Metadata level.

Why the audit log: it is the API server's own record, so it counts every request the operator
makes (kopf's watches and status patches as well as the executor's writes) and says how long the
server took with each (received -> response), which is the time a reconcile spends queued and
served in the API server rather than in the operator.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.controlplane import ControlPlane

AUDIT_USER = "phalanx-operator"
TOKEN = "phalanx-bench-operator-token"
AGENTS_TOKEN = "phalanx-bench-agents-token"
"""The simulated agents' identity (`bench.controlplane.agent_fleet`) where one fleet plays many jobs' pods:
an identity apart, so the audit log counts the operator's requests alone."""
"""The operator's bearer token on the benchmark's own loopback API server, for one run."""


def audit_args(workdir: Path) -> tuple[str, ...]:
    """kube-apiserver flags: the operator's token, and an audit log of its requests."""
    (workdir / "tokens.csv").write_text(
        f'{TOKEN},{AUDIT_USER},{AUDIT_USER},"system:masters"\n'
        f'{AGENTS_TOKEN},phalanx-bench-agents,phalanx-bench-agents,"system:masters"\n'
    )
    (workdir / "audit-policy.yaml").write_text(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n"
        # kopf's patches of jobs with their answers: a refused one's cause is in its body
        f"- level: RequestResponse\n  users: [{AUDIT_USER}]\n  verbs: [patch]\n"
        "  resources: [{group: phalanx.dev, resources: [trainingjobs]}]\n"
        f"- level: Metadata\n  users: [{AUDIT_USER}]\n- level: None\n"
    )
    return (
        f"--token-auth-file={workdir / 'tokens.csv'}",
        f"--audit-policy-file={workdir / 'audit-policy.yaml'}",
        f"--audit-log-path={workdir / 'audit.log'}",
        "--audit-log-mode=batch", "--audit-log-maxsize=0",
    )  # fmt: skip


def operator_kubeconfig(plane: ControlPlane, workdir: Path) -> Path:
    """A kubeconfig that signs in as the operator's identity."""
    path = workdir / "operator.kubeconfig"
    path.write_text(
        f"apiVersion: v1\nkind: Config\nclusters:\n- name: bench\n  cluster:\n"
        f"    server: {plane.server}\n    certificate-authority: {plane.pki.ca_cert}\n"
        f"users:\n- name: operator\n  user: {{token: {TOKEN}}}\n"
        "contexts:\n- name: bench\n  context: {cluster: bench, user: operator}\n"
        "current-context: bench\n"
    )
    return path


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def requests_between(workdir: Path, start: float, end: float) -> dict[str, Any]:
    """The operator's requests received between two wall-clock times: how many, by verb and
    resource, the answers' status codes and the API server's time for the requests that end
    (watches excluded), p50/p99, and the 20 most frequent refused requests with their answers."""
    by_verb: Counter[str] = Counter()
    by_code: Counter[int] = Counter()
    refused: Counter[str] = Counter()
    served: list[float] = []
    for line in (workdir / "audit.log").read_text().splitlines():
        event = json.loads(line)
        if event["user"]["username"] != AUDIT_USER:
            continue
        received = _seconds(event["requestReceivedTimestamp"])
        if not start <= received < end:
            continue
        verb = event["verb"]
        if event["stage"] == "ResponseStarted" or (
            verb != "watch" and event["stage"] == "ResponseComplete"
        ):
            resource = (event.get("objectRef") or {}).get("resource") or event["requestURI"].split(
                "?"
            )[0]
            subresource = (event.get("objectRef") or {}).get("subresource")
            what = f"{verb} {resource}{'/' + subresource if subresource else ''}"
            by_verb[what] += 1
        if verb != "watch" and event["stage"] == "ResponseComplete":
            served.append(_seconds(event["stageTimestamp"]) - received)
            answer = event.get("responseStatus") or {}
            by_code[answer.get("code", 0)] += 1
            if answer.get("code", 0) >= 400:  # which requests, and the API server's words
                words = re.sub(r'"[^"]*"', '"…"', _words(event, answer))[:240] + _sent(event)
                refused[f"{what} {answer.get('code')}: {words}"] += 1  # names left out: by kind
    served.sort()
    return {
        "requests": sum(by_verb.values()), "by_verb": dict(by_verb.most_common()),
        "by_code": dict(sorted(by_code.items())),
        "refused": dict(refused.most_common(20)),
        "p50": statistics.median(served) if served else 0.0,
        "p99": served[min(len(served) - 1, int(0.99 * len(served)))] if served else 0.0,
    }  # fmt: skip


def _words(event: dict[str, Any], answer: dict[str, Any]) -> str:
    """Why a request was refused: the Status in the response body where the policy logged it
    (its causes name the field), else the audit's summary."""
    body = event.get("responseObject") or {}
    causes = (body.get("details") or {}).get("causes") or []
    words = "; ".join(f"{c.get('field', '')}: {c.get('message', '')}" for c in causes)
    return words or str(body.get("message") or answer.get("message", ""))


def _sent(event: dict[str, Any]) -> str:
    """What a refused request sent, where the policy logged it (the shape, not the names)."""
    sent = event.get("requestObject")
    return f" (sent {json.dumps(sent, sort_keys=True)[:160]})" if sent else ""
