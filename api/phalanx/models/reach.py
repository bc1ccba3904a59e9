"""Which programs a spec field reaches: the words every field's description ends with.

Why: a TrainingJob runs any program, and not every field can reach every program. The number of
pods does; a checkpoint cadence reaches only programs that read it. A field whose description
does not say so presents itself as job-wide and is then silently ignored by the program that
does not read it. Each leaf field's description, or the nearest enclosing object's, ends with
`Reaches: <who>.` in these words, and `tests/unit/test_spec_fields.py` holds every field to the
programs that its registered effect shows it reaching.
"""

from __future__ import annotations

import re
from enum import StrEnum

PREFIX = "Reaches:"


class Reach(StrEnum):
    """Who a field reaches, from the widest to the narrowest."""

    EVERY_PROGRAM = "every program"
    """The pods, their scheduling and env, the operator's decisions: whatever runs in them."""
    UNDER_AGENT = "programs under the agent"
    """Any program the agent launches (the Phalanx image, or any image it is injected into)."""
    REPORTING = "programs that report progress"
    """Programs that report steps (phalanx.progress, the Lightning and Hugging Face callbacks,
    phalanx.resume, the reference trainer), under the agent."""
    RESUME_LIBRARY = "scripts using phalanx.resume"
    REFERENCE_TRAINER = "the reference trainer"


def phrase(reaches: frozenset[Reach]) -> str:
    """`Reaches: the reference trainer, scripts using phalanx.resume.`, in the enum's order."""
    return f"{PREFIX} {', '.join(r.value for r in Reach if r in reaches)}."


_STATEMENT = re.compile(rf"{PREFIX}\s+(.+?)\.(?:\s|$)")


def stated(description: str | None) -> frozenset[Reach] | None:
    """The reach a description states (None: it states none); ValueError for unknown words."""
    found = _STATEMENT.search(" ".join((description or "").split()))
    if found is None:
        return None
    words = [part.strip() for part in found.group(1).split(",")]
    known = {r.value: r for r in Reach}
    unknown = [w for w in words if w not in known]
    if unknown:
        raise ValueError(f"unknown reach {unknown}: say one of {sorted(known)}")
    return frozenset(known[w] for w in words)
