"""The quickstart job with its checkpoints in an S3 bucket (`checkpoint.url: s3://...`) on a real
S3 server (versitygw on loopback, tests/support/object_store.py), a node killed at step 60.

Covers: the job saves to the bucket and, after the kill, resumes from storage (memory snapshots
off, so the resume is the bucket's) at a new world size, 3 ranks reading what 4 wrote; the
newest object under the job's prefix, a partial upload (its shards, no `.metadata`), is skipped;
the job finishes, and every sample is used exactly once per data epoch over the kept steps.
Credentials reach the workers as the AWS SDKs read them (AWS_* in the environment, as a
Secret's `envFrom` gives them on a cluster).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.gang import check_exactly_once, kept_trajectory, records
from tests.support.local import manifest, phalanx
from tests.support.object_store import running_object_store

BUCKET, PREFIX = "training", "quickstart"
STEPS, GLOBAL_BATCH, DATASET = 120, 16, 240  # the reference trainer's synthetic set: 240 samples
PARTIAL = 1_000_000
"""A step far ahead of the run's, so the partial upload stays the newest object under the
prefix all run long (pruning removes only partial uploads older than the newest valid one)."""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_quickstart_resumes_from_an_s3_bucket_at_a_new_world_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_object_store(tmp_path / "s3") as store:
        for name, value in store.client_env().items():
            monkeypatch.setenv(name, value)  # the `phalanx run` below passes them on
        partial = store.folder / BUCKET / PREFIX / f"step-{PARTIAL}"
        partial.mkdir(parents=True)
        (partial / "__0_0.distcp").write_bytes(b"\0" * 4096)  # an upload cut short
        job = manifest(
            tmp_path,
            checkpoint={"dir": None, "url": f"s3://{BUCKET}/{PREFIX}", "intervalSteps": 20,
                        "memoryIntervalSteps": 0},
            trainer={"steps": STEPS},
        )  # fmt: skip
        run = phalanx("run", str(job), "--workdir", str(tmp_path / "run"), "-o", "json",
                      "--kill-node-at", "step:60", timeout=540)  # fmt: skip
        assert run.code == 0, run.stderr[-4000:]
        summary = run.summary
        saved = sorted(p.name for p in (store.folder / BUCKET / PREFIX).iterdir())

    assert summary["phase"] == "Succeeded", summary["message"]
    assert summary["restarts"]["total"] == 1, summary["restarts"]
    resumes = [r for r in records(tmp_path / "run") if r.get("event") == "resume"]
    [resume] = [r for r in resumes if r["from"] is not None]  # the first is the fresh start
    assert resume["source"] == "storage", resume
    assert 40 <= resume["from"] < PARTIAL, f"from the bucket's newest valid checkpoint: {resume}"
    assert resume["world"] == 3, "4 ranks saved it, 3 loaded it"
    assert f"step-{STEPS}" in saved, saved
    assert f"step-{PARTIAL}" in saved, "a newer partial upload is skipped, not deleted"

    losses, samples = kept_trajectory(tmp_path / "run")
    assert sorted(losses) == list(range(1, STEPS + 1))
    check_exactly_once(samples, DATASET, GLOBAL_BATCH, STEPS)
