"""No TrainingJob spec field is accepted and ignored.

Every field of the spec, found by walking the spec models, must have a registered effect (see
`tests/unit/spec_effects`): a job built with the field changed differs from one with the field at
its default, on the pods the builder makes, in the env contract as the trainer parses it, or in a
planner decision. A new field without a registered effect fails here; so does a field whose
consumer stops reading it.
"""

from __future__ import annotations

import pytest

from phalanx.models.reach import phrase, stated
from tests.unit.spec_effects.build import job
from tests.unit.spec_effects.fields import descriptions, field_value, spec_field_paths
from tests.unit.spec_effects.reach import REACHES
from tests.unit.spec_effects.registry import EFFECTS

FIELDS = spec_field_paths()


def test_fields_are_found_by_camel_case_path_down_to_their_leaves() -> None:
    assert {"replicas.min", "checkpoint.async", "failurePolicy.backoff.initialSeconds"} <= set(
        FIELDS
    )
    assert "template" in FIELDS, "the pod template is one field"
    assert not [p for p in FIELDS if p.startswith("template.")]
    assert "failurePolicy.backoff" not in FIELDS, "a nested object is not a leaf"


@pytest.mark.parametrize("path", FIELDS)
def test_every_spec_field_has_a_registered_effect(path: str) -> None:
    assert path in EFFECTS, (
        f"spec.{path} has no registered effect: add an Effect to tests/unit/spec_effects "
        "(pods.py, contract.py or planner.py) showing what it changes, or remove the field"
    )


def test_every_registered_effect_is_a_spec_field() -> None:
    assert sorted(EFFECTS.keys() - set(FIELDS)) == [], "stale entries: the field is gone"


@pytest.mark.parametrize("path", sorted(EFFECTS))
def test_changing_a_field_changes_what_it_governs(path: str) -> None:
    effect = EFFECTS[path]
    variant, baseline = job(effect.variant), job(effect.baseline)
    assert field_value(variant.spec, path) != field_value(baseline.spec, path), (
        f"the check of spec.{path} must build jobs that differ in spec.{path}"
    )
    seen = effect.observe(variant)
    assert seen == effect.expect
    assert seen != effect.observe(baseline), f"spec.{path} is accepted and ignored"


def test_every_spec_field_registers_the_programs_it_reaches() -> None:
    assert sorted(set(FIELDS) ^ REACHES.keys()) == [], (
        "register each field's reach in tests/unit/spec_effects/reach.py (and only fields)"
    )


@pytest.mark.parametrize("path", FIELDS)
def test_every_field_description_says_which_programs_it_reaches(path: str) -> None:
    """The nearest description that states a reach (the field's own, else its enclosing
    object's) states the registered one, so `kubectl explain` tells a user which programs a
    field reaches."""
    said = next((r for d in descriptions(path) if (r := stated(d)) is not None), None)
    expected = phrase(REACHES[path])
    assert said is not None, f"spec.{path}: no description says `{expected}`"
    assert said == REACHES[path], f"spec.{path} says {phrase(said)!r}, registered {expected!r}"
