"""Every TrainingJob spec field, and how its effect shows: the registry that
`tests/unit/test_spec_fields.py` checks against the spec models.

Split by where a field shows: `pods` (the built pod manifests), `contract` (the env contract and
the trainer settings parsed from it) and `planner` (the planner's decisions).
"""
