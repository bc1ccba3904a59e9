"""The chaos soak's report (docs/soak.md): faults by kind, how each was found, recoveries,
goodput, and the invariants, held or broken."""

from __future__ import annotations

import statistics

from tests.e2e.soak import Soak


def render(soak: Soak, seed: int, grace: float) -> str:
    """The soak's report (docs/soak.md)."""
    f = soak.figures()
    lines = [
        f"# Chaos soak on kind: {soak.minutes:g} minutes",
        "",
        "`make soak MINUTES=N` (tests/e2e/soak.py): the reference trainer on 2 node pods with a "
        "hot spare, the failure policy at its defaults, while faults from the kind matrix strike "
        f"one at a time at random (seed {seed}), each healed once the job trains again. Kind "
        f"cluster on this machine (2 cores), node-monitor grace period {grace:g} s.",
        "",
        "| fault | struck | found as | restarts | fault to training again, p50 |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in sorted(f["faults"]):
        mine = [s for s in soak.struck if s.fault == name]
        reasons = sorted({r for s in mine for r in s.reasons})
        restarts = sorted({s.restarts for s in mine})
        times = [s.training_again - s.at for s in mine if s.training_again]
        p50 = f"{statistics.median(times):.1f} s" if times else "-"
        lines.append(f"| {name} | {len(mine)} | {', '.join(reasons) or '-'} "
                     f"| {'/'.join(map(str, restarts))} each | {p50} |")  # fmt: skip
    tail = f["tail"]
    lines += [
        "",
        f"All {len(soak.struck)} faults: fault to training again p50 "
        + (f"{f['p50']:.1f} s, {tail['label']} {tail['value']:.1f} s" if tail else "-")
        + ". Goodput (status.goodput at the end): "
        + (f"{soak.goodput:.1%}" if soak.goodput is not None else "-")
        + f". Kept steps: {soak.kept_steps}; the worst loss difference from an uninterrupted run: "
        + (f"{soak.worst_loss_difference:.2e}" if soak.worst_loss_difference is not None else "-")
        + f"; unreadable audit lines: {soak.unreadable_audit_lines}.",
        "",
        "## Invariants",
        "",
    ]
    lines += [f"- **broken**: {b}" for b in soak.broken] or [
        "Every invariant held: each fault found as its kind with one restart and no restart "
        "without a fault (the default hang timeout never fired on the healthy job); no rank held "
        "by two pods; the status agreed with the pods; every sample used exactly once per data "
        "epoch; the losses those of an uninterrupted run; nothing left after delete."
    ]
    return "\n".join(lines) + "\n"
