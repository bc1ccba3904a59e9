"""What the kind suite measured for programs in a user's own image, for the benchmark report.

`make e2e` appends one record per measured fault to build/test-artifacts/e2e-recovery.jsonl
(`record` in tests/e2e/cluster.py). `python -m bench.kind.kind_figures` keeps the user-image records
of that run in bench/results/kind/any-image.jsonl, with the commit they ran at, and
`python -m bench.report` renders them as the report's "Any program" section. They are kind
figures (real pods and containers on this machine's kind cluster), not local-backend ones, and
are not compared with the local-backend tables.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "build" / "test-artifacts" / "e2e-recovery.jsonl"
KEPT = ROOT / "bench" / "results" / "kind" / "any-image.jsonl"
PREFIX = "user-image-"
FAULTS = {
    "worker-killed": "a worker SIGKILLed",
    "rank-stopped": "a rank SIGSTOPped",
    "node-lost-spare": "a node lost, `spares: 1`",
}


WHERE_THE_TIME_GOES = (
    "Where the seconds go. A worker SIGKILLed: the gang restarts in place at once; a plain "
    "script trains again in about 0.5 s, while Lightning, the Hugging Face Trainer and "
    "DeepSpeed take 3 to 4 s, which is their new workers importing the framework (the agent's "
    "warm fork server preloads torch only). A rank SIGSTOPped: these programs report no "
    "steps, so it is found by its agent in the process table after the default 10 s, then "
    "restarted in place. A node lost with a hot spare: the lost pod's agent stops answering "
    "its peers' pings (`phalanx.agent.peers`); node rank 0's agent, whose own workers failed "
    "when the collective broke, names it silent 2 s later (PeerSilent), and the job restarts "
    "once, the spare taking the rank; the rest is the programs' own start. Before the peer "
    "watch (commit 3bb88fb) the survivors' exit 1 made it an application failure, the restart "
    "waited out the 10 s application backoff and the lost pod was replaced only after it: 14 to "
    "17 s."
)


def collect(source: Path = SOURCE, kept: Path = KEPT) -> list[dict[str, Any]]:
    """The user-image records of the last e2e run in `source`, written to `kept`."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()  # fmt: skip
    records = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    mine = [
        {"fault": _fault(r["case"]), **r, "commit": commit}
        for r in records
        if r["case"].startswith(PREFIX)
    ]
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text("".join(json.dumps(r) + "\n" for r in mine))
    return mine


def _fault(case: str) -> str:
    """The fault a record's case names (`user-image-<program>-<fault>`)."""
    return next((fault for fault in FAULTS if case.endswith(fault)), case.removeprefix(PREFIX))


def section(records: list[dict[str, Any]]) -> list[str]:
    """The report's section: each program and fault, the newest measurement of each."""
    newest: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        newest[(record["job"], record["fault"])] = record
    lines = [
        "## Any program on kind: a user's image with the agent injected",
        "",
        "Measured by `make e2e` on this machine's kind cluster (Kubernetes v1.33.13, 3 worker "
        "nodes; real pods and containers), at the commits shown. The image is "
        "`tests/e2e/images/user-python.Dockerfile`: python3 and torch, nothing of Phalanx; the "
        "operator injects the agent. The figure is the time from the fault to the program's "
        "first training step after its resume, read from the program's own step log.",
        "",
        "| program (job) | image | fault | fault to training again | resumed from step | "
        "failures recorded | commit |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (job, fault), r in sorted(newest.items()):
        failures = ", ".join(r.get("failures") or []) or "-"
        lines.append(
            f"| {job} | `{r['image']}` | {FAULTS.get(fault, fault)} | "
            f"{r['fault_to_first_step_s']:.2f} s | {r['resumed_from_step']} | {failures} | "
            f"{r['commit']} |"
        )
    return [*lines, "", WHERE_THE_TIME_GOES, ""]


def append_cases(source: Path, kept: Path, cases: Iterable[str]) -> list[dict[str, Any]]:
    """The records of `cases` in the run's `source`, appended to `kept` with the commit they ran
    at (earlier runs' records stay: a report shows each case's newest)."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=True, cwd=ROOT).stdout.strip()  # fmt: skip
    wanted = set(cases)
    records = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    mine = [{**r, "commit": commit} for r in records if r.get("case") in wanted]
    kept.parent.mkdir(parents=True, exist_ok=True)
    with kept.open("a") as out:
        out.write("".join(json.dumps(r) + "\n" for r in mine))
    return mine


def load(kept: Path = KEPT) -> list[dict[str, Any]]:
    if not kept.exists():
        return []
    return [json.loads(line) for line in kept.read_text().splitlines() if line.strip()]


Collect = Callable[[Path, Path], list[dict[str, Any]]]


def cli(description: str, collect_run: Collect, source: Path, kept: Path) -> int:
    """`python -m bench.<module> [SOURCE] [--kept FILE]`: keep a run's records, print them."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("source", type=Path, nargs="?", default=source)
    parser.add_argument("--kept", type=Path, default=kept)
    args = parser.parse_args()
    for record in collect_run(args.source, args.kept):
        print(json.dumps(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli(__doc__.splitlines()[0], collect, SOURCE, KEPT))
