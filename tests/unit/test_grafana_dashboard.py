"""The shipped Grafana dashboard queries only metrics the operator exports, and has a panel for
each one a job's owner watches (the reconcile's parts and the progress flag are the operator's
own business)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import generate_latest

from phalanx.operator.metrics import OperatorMetrics

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "phalanx-jobs.json"
SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")


def family(name: str) -> str:
    return next((name.removesuffix(s) for s in SUFFIXES if name.endswith(s)), name)


def test_every_query_names_a_metric_the_operator_exports() -> None:
    text = generate_latest(OperatorMetrics().registry).decode()
    exported = {family(n) for n in re.findall(r"^# TYPE (\S+)", text, re.MULTILINE)}
    board = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in board["panels"] for t in p["targets"]]
    assert len(queries) >= 6
    for query in queries:
        names = re.findall(r"\b(phalanx_[a-z_]+)", query)
        assert names, query
        for name in names:
            assert family(name) in exported, f"{name} in {query!r} is not exported"


UNSHOWN = {"phalanx_reconcile_part_seconds", "phalanx_progress_reported",
           "phalanx_operator_leader"}  # which replica acts: about the operator, not a job  # fmt: skip


def test_every_job_metric_has_a_panel() -> None:
    text = generate_latest(OperatorMetrics().registry).decode()
    exported = {family(n) for n in re.findall(r"^# TYPE (\S+)", text, re.MULTILINE)}
    board = json.loads(DASHBOARD.read_text())
    shown = {family(n) for p in board["panels"] for t in p["targets"]
             for n in re.findall(r"\b(phalanx_[a-z_]+)", t["expr"])}  # fmt: skip
    assert exported - UNSHOWN <= shown, exported - UNSHOWN - shown
