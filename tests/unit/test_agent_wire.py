"""The agent's JSON (standard library only) and the operator's pydantic models are one protocol.

Covers: every field of an assignment and of a report, both directions, parsed by the other side
into the same values; a malformed assignment is refused by the agent as the model refuses it.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from phalanx.agent.wire import Assignment, Report, WireError, heartbeat_epoch
from phalanx.models.assignment import AgentReport, EpochAssignment

T0 = datetime(2026, 11, 25, 16, 30, 1, 250000, tzinfo=UTC)


def test_an_assignment_the_operator_writes_is_read_by_the_agent() -> None:
    model = EpochAssignment(
        epoch=7, nodes=3, master_addr="job-7-0.job.ns.svc", master_port=29517,
        ranks={"job-7-0": 0, "job-6-2": 1, "job-7-2": 2},
    )  # fmt: skip
    read = Assignment.from_json(model.model_dump_json(by_alias=True))
    assert dataclasses.asdict(read) == model.model_dump()


def test_a_report_the_agent_writes_is_read_by_the_operator_field_for_field() -> None:
    report = Report(
        pod="job-3-1", state="running", time=T0, epoch=3, exit_code=137, message="killed",
        failed_at=T0, workers={"2": 4242, "3": 4243}, phase="first-step", renewed=T0,
        renew_seconds=2.5, silent_nodes={0: 4.2, 5: 12.0},
    )  # fmt: skip
    model = AgentReport.model_validate_json(report.to_json())
    assert model.model_dump() == dataclasses.asdict(report)
    assert {f.name for f in dataclasses.fields(Report)} == set(AgentReport.model_fields)


def test_unset_fields_are_left_out_as_the_model_leaves_them() -> None:
    report = Report(pod="p", state="standby", time=T0)
    model = AgentReport.model_validate_json(report.to_json())
    ours = json.loads(report.to_json())
    assert ours.keys() == json.loads(model.model_dump_json(by_alias=True, exclude_none=True)).keys()


@pytest.mark.parametrize(
    "raw",
    [
        '{"epoch": -1, "nodes": 1, "masterAddr": "a", "masterPort": 1, "ranks": {}}',
        '{"epoch": 1, "nodes": 0, "masterAddr": "a", "masterPort": 1, "ranks": {}}',
        '{"epoch": 1, "nodes": 1, "masterAddr": "", "masterPort": 1, "ranks": {}}',
        '{"epoch": 1, "nodes": 1, "masterAddr": "a", "masterPort": 70000, "ranks": {}}',
        '{"epoch": 1, "nodes": 1, "masterAddr": "a", "masterPort": 1, "ranks": {"p": -1}}',
        '{"epoch": 1, "nodes": 1, "masterAddr": "a", "masterPort": 1}',
        "[1, 2]",
        "not json",
    ],
)
def test_a_malformed_assignment_is_refused_by_both_sides(raw: str) -> None:
    with pytest.raises(WireError):
        Assignment.from_json(raw)
    with pytest.raises(ValidationError):
        EpochAssignment.model_validate_json(raw)


def test_the_heartbeat_epoch_is_read_without_the_model() -> None:
    assert heartbeat_epoch('{"epoch": 4, "step": 9}') == 4
    assert heartbeat_epoch('{"step": 9}') is None
    assert heartbeat_epoch("{broken") is None
