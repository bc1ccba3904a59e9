"""A TrainingJob's name is refused at admission unless every object named after it is valid for
every epoch the job can reach.

Covers: the name rule as a table (boundary lengths, dots, case, first and last characters,
generateName); the same words in Python as in the CRD; jobs stored before the rule are still
readable; and, at the limit (longest name, last epoch, last rank, many spares), every child the
builders make has a name, hostname, subdomain and label values Kubernetes accepts.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from harness.jobs import job_manifest
from phalanx.models import ObjectMeta, TrainingJob, crdgen, field_errors, names
from phalanx.operator import builder
from phalanx.operator.builder.env import master_addr

DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(rf"{DNS1123_LABEL.pattern}(\.{DNS1123_LABEL.pattern})*")
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def fits(value: str, pattern: re.Pattern[str], limit: int = 63) -> bool:
    """`value` is what Kubernetes' validation with this pattern and length limit accepts."""
    return len(value) <= limit and pattern.fullmatch(value) is not None


def manifest(**metadata: Any) -> dict[str, Any]:
    """The job with the most children whose names carry the job's (`job_manifest`)."""
    name = metadata.pop("name", None)
    replicas = {"min": 1, "max": names.MAX_NODES}
    scheduler = "scheduler-plugins-scheduler"
    return job_manifest(
        name, metadata=metadata, replicas=replicas, spares=3, gang=True, schedulerName=scheduler
    )


def refusal(**metadata: Any) -> list[str]:
    """The errors for a job with this metadata, as `field: message`; [] when it is admitted."""
    try:
        TrainingJob.from_manifest(manifest(**metadata))
    except ValidationError as error:
        return [str(e) for e in field_errors(error)]
    return []


NAME_ERROR = f"metadata.name: {names.NAME_MESSAGE}"


@pytest.mark.parametrize(
    ("name", "admitted"),
    [
        ("a", True),
        ("my-job", True),
        ("job-2", True),
        ("a" * 50, True),
        ("a" * 51, False),
        ("a" * 60, False),
        ("a" * 63, False),
        ("my.job", False),
        ("MyJob", False),
        ("my-Job", False),
        ("2job", False),
        ("-job", False),
        ("job-", False),
        ("my_job", False),
        ("", False),
    ],
    ids=lambda v: f"len{len(v)}" if isinstance(v, str) and len(v) > 12 else str(v),
)
def test_name_rule(name: str, admitted: bool) -> None:
    assert names.name_fits(name) is admitted
    assert refusal(name=name) == ([] if admitted else [NAME_ERROR])


@pytest.mark.parametrize(
    ("prefix", "admitted"),
    [("a" * 45, True), ("a" * 46, False), ("job-", True), ("Job-", False), ("7-", False)],
)
def test_generate_name_is_judged_by_the_longest_name_it_can_become(
    prefix: str, admitted: bool
) -> None:
    """The API server adds 5 characters to generateName before it validates."""
    assert refusal(generateName=prefix) == ([] if admitted else [NAME_ERROR])


def test_the_limit_leaves_room_for_the_last_epoch_and_rank() -> None:
    longest_hostname = names.node_pod_name("a" * names.MAX_NAME_LENGTH, names.MAX_EPOCH,
                                           names.MAX_NODES - 1)  # fmt: skip
    assert names.MAX_NAME_LENGTH == 50
    assert len(longest_hostname) == names.DNS_LABEL_MAX


def test_message_names_the_field_and_the_limit() -> None:
    assert names.NAME_MESSAGE.startswith("metadata.name must be a DNS-1035 label")
    assert f"at most {names.MAX_NAME_LENGTH} characters" in names.NAME_MESSAGE
    description = ObjectMeta.model_fields["name"].description
    assert f"at most {names.MAX_NAME_LENGTH} characters" in (description or "")


def test_crd_checks_the_name_on_create_only_and_points_at_it() -> None:
    schema = crdgen.openapi_schema()
    (rule,) = schema["x-kubernetes-validations"]
    assert rule["fieldPath"] == ".metadata.name"
    assert rule["message"] == names.NAME_MESSAGE
    assert rule["optionalOldSelf"] is True
    assert rule["rule"].startswith("oldSelf.hasValue() || (")
    assert f"size() <= {names.MAX_NAME_LENGTH}" in rule["rule"]
    assert schema["properties"]["metadata"]["properties"]["name"]["type"] == "string"


def test_a_job_stored_before_the_rule_is_still_read() -> None:
    """The operator reads stored jobs; the name rule applies when a job is created."""
    old = manifest(name="a-job-created-before-names-were-limited-to-fifty-chars")
    with pytest.raises(ValidationError):
        TrainingJob.from_manifest(old)
    assert TrainingJob.from_stored(old).metadata.name == old["metadata"]["name"]


def test_every_child_is_valid_at_the_limit() -> None:
    """The longest name, the last epoch, the last rank: what the API server will see."""
    job = TrainingJob.from_manifest(manifest(name="a" * names.MAX_NAME_LENGTH, namespace="n" * 63))
    settings = builder.BuildSettings()
    epoch, rank = names.MAX_EPOCH, names.MAX_NODES - 1
    pod = builder.node_pod(job, epoch, rank, names.MAX_NODES, settings, pod_group=True)
    standby = builder.standby_pod(job, epoch, names.MAX_NODES, settings)
    warm = builder.standby_pod(job, epoch, 9_999, settings, warm=True)
    too_long = builder.standby_pod(job, epoch, 10_000, settings, warm=True)
    assert warm["spec"]["hostname"] == warm["metadata"]["name"]
    assert fits(warm["spec"]["hostname"], DNS1123_LABEL)
    assert "hostname" not in too_long["spec"], "a hostname over 63 characters: it stays cold"
    others = [
        builder.headless_service(job, settings.master_port),
        builder.heartbeat_lease(job),
        builder.service_account(job),
        builder.role(job),
        builder.role_binding(job),
        builder.pod_group(job, names.MAX_NODES),
    ]
    for obj in (pod, standby, warm, *others):
        name = obj["metadata"]["name"]
        assert fits(name, DNS1123_SUBDOMAIN, 253), name
        for key, value in obj["metadata"]["labels"].items():
            assert fits(value, LABEL_VALUE), (name, key, value)
    assert pod["metadata"]["name"] == pod["spec"]["hostname"]
    for label in (pod["spec"]["hostname"], pod["spec"]["subdomain"]):
        assert fits(label, DNS1123_LABEL), label
    service = others[0]["metadata"]["name"]
    assert fits(service, DNS1035_LABEL)
    assert service == pod["spec"]["subdomain"]
    assert len(master_addr(job, epoch, settings)) <= 253
