"""Fixtures of the kind suite: the cluster, Phalanx installed with Helm, a namespace per test, and
what a failed test leaves behind (operator logs, `kubectl describe` of its pods, kind's logs).

The cluster comes from `make kind-up` (tests/tools/kind.sh); `make e2e` makes it and runs this
suite. Measurements (fault -> first training step of the new epoch) are appended to
`<artifacts>/e2e-recovery.jsonl` for the report; the file holds one run's: it is emptied when
the run's first e2e test starts (`bench.kind_*` stamp what they find with the commit).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cluster import ARTIFACTS, KIND_SH, REPO_ROOT, KindCluster, run

RELEASE = "phalanx"
SYSTEM_NAMESPACE = "phalanx-system"
_HERE = Path(__file__).parent
VALUES = _HERE / "values-kind.yaml"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here is marked `e2e`; those marked `last` (helm uninstall) run at the end."""
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
    items.sort(key=lambda item: item.get_closest_marker("last") is not None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture(scope="session", autouse=True)
def _this_runs_records() -> None:
    """Records of earlier runs are not this run's: the report would stamp them with this
    commit."""
    (ARTIFACTS / "e2e-recovery.jsonl").unlink(missing_ok=True)


@pytest.fixture(scope="session")
def kind() -> KindCluster:
    cluster = KindCluster.connect()
    cluster.advertise_fake_gpus()
    return cluster


@pytest.fixture(scope="session")
def phalanx(kind: KindCluster) -> str:
    """Phalanx installed from charts/phalanx with the suite's values; returns its namespace."""
    kind.helm("upgrade", "--install", RELEASE, str(REPO_ROOT / "charts/phalanx"),
              "--namespace", SYSTEM_NAMESPACE, "--create-namespace", "--values", str(VALUES),
              "--wait", "--timeout", "5m")  # fmt: skip
    return SYSTEM_NAMESPACE


@pytest.fixture
def namespace(kind: KindCluster, phalanx: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace with the shared checkpoint claim; its pods are described on failure."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:30].strip("-")
    name = f"e2e-{slug}-{uuid.uuid4().hex[:4]}"
    kind.make_namespace(name)
    yield name
    if request.node.stash.get(_FAILED, False):
        save_artifacts(kind, name, request.node.name)
    kind.restore_nodes()
    kind.drop_namespace(name)


def save_artifacts(kind: KindCluster, namespace: str, test: str) -> None:
    """Operator logs, `kubectl describe` of the test's pods and jobs, and `kind export logs`."""
    out = ARTIFACTS / "e2e" / re.sub(r"[^A-Za-z0-9_.-]+", "_", test)
    out.mkdir(parents=True, exist_ok=True)
    for file, args in {
        "operator.log": ["logs", "-n", SYSTEM_NAMESPACE, "-l", "app.kubernetes.io/component=operator",
                         "--tail=-1", "--prefix"],
        "pods.txt": ["describe", "pods", "-n", namespace],
        "trainingjobs.yaml": ["get", "trainingjobs", "-n", namespace, "-o", "yaml"],
        "events.txt": ["get", "events", "-n", namespace, "--sort-by=.lastTimestamp"],
        "pod-logs.txt": ["logs", "-n", namespace, "-l", "phalanx.dev/role=node", "--tail=200",
                         "--prefix", "--all-containers"],
    }.items():  # fmt: skip
        done = kind.kubectl(*args, check=False)
        (out / file).write_text(done.stdout + done.stderr)
    run(["bash", KIND_SH, "export-logs", out / "kind"], check=False, timeout=600)
