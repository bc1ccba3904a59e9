"""Which programs each spec field reaches, as its registered effect shows (see
`phalanx.models.reach`). The field's description, or its nearest enclosing object's, must say
the same: `tests/unit/test_spec_fields.py`.

How each was decided, by where its effect lands (the effect modules beside this one): on the pods
or in the planner's decisions -> every program; in a variable only the resume library parses
(`library_setting`) -> scripts using phalanx.resume and the reference trainer, which uses it; in
a PHALANX_TRAINER_* setting -> the reference trainer; in what the agent does with its workers
or with a standby pod -> programs under the agent; in a judgement of reported steps -> programs
that report progress.
"""

from __future__ import annotations

from phalanx.models.reach import Reach

EVERY = frozenset({Reach.EVERY_PROGRAM})
LIBRARY = frozenset({Reach.RESUME_LIBRARY, Reach.REFERENCE_TRAINER})
REFERENCE = frozenset({Reach.REFERENCE_TRAINER})
AGENT = frozenset({Reach.UNDER_AGENT})
REPORTING = frozenset({Reach.REPORTING})

REACHES: dict[str, frozenset[Reach]] = {
    "replicas.min": EVERY,
    "replicas.max": EVERY,
    "replicas.desired": EVERY,
    "nprocPerNode": EVERY,
    "parallelism.tensor": EVERY,  # the sizes the planner picks; PHALANX_TENSOR_PARALLEL on pods
    "parallelism.pipeline": EVERY,
    "template": EVERY,
    "checkpoint.dir": EVERY,  # PHALANX_CHECKPOINT_DIR on every pod; the library saves there
    "checkpoint.url": EVERY,
    "checkpoint.intervalSteps": LIBRARY,
    "checkpoint.intervalSeconds": LIBRARY,
    "checkpoint.keep": LIBRARY,
    "checkpoint.memoryIntervalSteps": LIBRARY,
    "checkpoint.memoryOverheadPercent": LIBRARY,
    "checkpoint.async": LIBRARY,
    "trainer.globalBatchSize": REFERENCE,
    "trainer.sharding": REFERENCE,
    "trainer.mixedPrecision": REFERENCE,
    "trainer.activationCheckpointing": REFERENCE,
    "trainer.steps": REFERENCE,
    "trainer.seed": REFERENCE,
    "failurePolicy.maxRestarts": EVERY,
    "failurePolicy.maxInfraRestarts": EVERY,
    "failurePolicy.backoff.initialSeconds": EVERY,
    "failurePolicy.backoff.maxSeconds": EVERY,
    "failurePolicy.retryableExitCodes": EVERY,
    "failurePolicy.hangTimeoutSeconds": frozenset({Reach.UNDER_AGENT, Reach.REPORTING}),
    "failurePolicy.startupTimeoutSeconds": REPORTING,  # a first step it must see reported
    "failurePolicy.stragglerFactor": REPORTING,
    "failurePolicy.scheduleTimeoutSeconds": EVERY,
    "nccl.socketIfname": EVERY,  # NCCL's own variables, on every pod
    "nccl.ibHca": EVERY,
    "nccl.debug": EVERY,
    "nccl.timeoutSeconds": LIBRARY,  # torch reads no variable for it: the library sets it
    "nccl.env": EVERY,
    "gang": EVERY,
    "schedulerName": EVERY,
    "priorityClassName": EVERY,
    "suspend": EVERY,
    "ttlSecondsAfterFinished": EVERY,
    "activeDeadlineSeconds": EVERY,
    "spares": AGENT,  # a standby pod takes a rank only through its agent
    "agent.inject": EVERY,
    "agent.python": EVERY,
    "memory.gpuMemory": EVERY,  # the sizes the planner may shrink to, and `phalanx plan`
    "memory.model.parameters": EVERY,
    "memory.model.layers": EVERY,
    "memory.model.hidden": EVERY,
    "memory.model.sequenceLength": EVERY,
    "memory.model.microBatchSize": EVERY,
    "memory.model.precision": EVERY,
    "memory.model.sharding": EVERY,
    "memory.model.activationCheckpointing": EVERY,
}
"""Spec field path -> the programs it reaches."""
