"""The words of a job's status: its condition types, and the reasons the planner gives.

Why enumerations: the planner sets, clears and branches on these words, and scripts, `kubectl
wait --for=condition=...` and the API's readers match them; a typo in one place would be a
condition nobody ever sees. They are `StrEnum`s, so each member *is* its wire string: the models
keep `str` fields (a Kubernetes condition or reason may be any CamelCase word), the CRD does not
change, and a member compares equal to the string read back from the API server.

Reasons that come from Kubernetes (a pod's Evicted, OOMKilled, ImagePullBackOff...) are data the
planner passes through, not words it chooses; they stay strings.
"""

from __future__ import annotations

from enum import StrEnum


class ConditionType(StrEnum):
    """The conditions a TrainingJob's status carries (`status.conditions[].type`)."""

    RUNNING = "Running"
    """True while every node pod of the current epoch runs."""

    RESTARTING = "Restarting"
    """True from a failure until the new epoch trains."""

    RESIZING = "Resizing"
    """True from a shrink, a grow or a scale until the new epoch trains."""

    SUSPENDED = "Suspended"
    """spec.suspend is true: every pod is deleted."""

    SUCCEEDED = "Succeeded"
    """Every node rank exited 0."""

    FAILED = "Failed"
    """The job ended without succeeding."""

    CONFIGURATION_ERROR = "ConfigurationError"
    """A pod cannot start as specified, or the API server refused one of the job's objects."""

    UNSCHEDULABLE = "Unschedulable"
    """Too few node pods schedule for the job's smallest valid size."""

    AGENT_INJECTED = "AgentInjected"
    """False once the agent injected into the node pods could not run in their image (no
    Python, or one older than 3.9): the job runs its command bare from then on, and the message
    names what it loses. Absent while nothing went wrong."""

    PROGRESS_REPORTED = "ProgressReported"
    """True once the job's program reported a step (phalanx.progress), False while it is known
    to report none; then `progress` and `goodput` are absent, not 0."""

    CHECKPOINT_FAILING = "CheckpointFailing"
    """True while the program's checkpoint saves fail (a full volume, a lost mount): training
    goes on, resumable from the last committed checkpoint and memory snapshots; False once a
    save commits again. Absent while no save failed."""

    SLOW_RANKS = "SlowRanks"
    """True while ranks are stragglers (slower than stragglerFactor x the others) that the job
    keeps, because leaving their nodes would leave fewer node pods than replicas.min; False
    once none is slow. Absent while no straggler was kept (a straggler whose node the job can
    leave is a Straggler restart instead)."""


class ConditionReason(StrEnum):
    """The reasons the planner itself gives a condition (`status.conditions[].reason`)."""

    STARTING = "Starting"
    ALL_RANKS_RUNNING = "AllRanksRunning"
    RESTARTING = "Restarting"
    RECOVERED = "Recovered"
    RESIZED = "Resized"
    SUSPENDED = "Suspended"
    RESUMED = "Resumed"
    SUCCEEDED = "Succeeded"
    ALL_RANKS_SUCCEEDED = "AllRanksSucceeded"
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"
    POD_UNSCHEDULABLE = "PodUnschedulable"
    """Unschedulable: the scheduler cannot place a pod of the epoch; the message is its own
    reason (a missing claim, too little nvidia.com/gpu, an untolerated taint), given at once,
    before scheduleTimeoutSeconds shrinks the gang."""
    SCHEDULED = "Scheduled"
    STEPS_REPORTED = "StepsReported"
    NO_STEPS_REPORTED = "NoStepsReported"
    SAVE_FAILED = "SaveFailed"
    """CheckpointFailing: the program reported a failed save."""
    SAVE_COMMITTED = "SaveCommitted"
    """CheckpointFailing cleared: a later save committed."""
    BELOW_MINIMUM = "BelowMinimum"
    """SlowRanks: leaving the slow ranks' nodes would leave fewer node pods than replicas.min."""
    NO_SLOW_RANKS = "NoSlowRanks"
    """SlowRanks cleared: no rank is a straggler any more."""
    WAITING_FOR_ADMISSION = "WaitingForAdmission"
    """Suspended: Kueue has not admitted the job's Workload (yet, or again)."""
    EVICTED_BY_KUEUE = "EvictedByKueue"
    """Suspended: Kueue evicts the job's Workload (preempted, deactivated...): it stops and
    waits to be admitted again."""
    KUEUE_NOT_SERVED = "KueueNotServed"
    """ConfigurationError: the job names a Kueue queue, but the cluster serves no Workloads."""
    REFUSED_BY_API_SERVER = "RefusedByAPIServer"
    """ConfigurationError: the API server refused one of the job's objects as Invalid."""
    MISSING_OBJECT = "MissingObject"
    """ConfigurationError: the API server refuses the job's pods for want of an object the spec
    names (a ServiceAccount); creating them is tried again until it exists."""
    SPEC_CHANGED = "SpecChanged"
    RESOLVED = "Resolved"
    # Why a job Failed:
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    DOES_NOT_FIT_IN_MEMORY = "DoesNotFitInMemory"
    EPOCH_LIMIT_REACHED = "EpochLimitReached"
    RESTART_BUDGET_EXHAUSTED = "RestartBudgetExhausted"
    AGENT_CANNOT_RUN = "AgentCannotRun"
    NAMESPACE_EXCLUDED = "NamespaceExcluded"
    """The operator runs no job in this namespace (its excludedNamespaces)."""


class EpochReason(StrEnum):
    """Why an epoch started (`status.current.reason`); a resize's is also its Resizing reason."""

    CREATED = "Created"
    RESUMED = "Resumed"
    RESTART = "Restart"
    SHRINK = "Shrink"
    """Pods did not schedule: the gang shrinks to those that did."""
    GROW = "Grow"
    """Capacity returned."""
    SCALE = "Scale"
    """The desired size went down (`kubectl scale`)."""
    DRAIN = "Drain"
    """The cluster is taking a node away (cordoned, drained, tainted or labelled unhealthy):
    its ranks saved their step and left it, for a hot spare or a smaller gang."""


class FailureReason(StrEnum):
    """The failures the planner names itself (`status.failures[].reason`, and a Restarting
    condition's reason); the others are Kubernetes' own words, passed through."""

    ERROR = "Error"
    """User code exited non-zero."""
    COLLECTIVE_FAILURE = "CollectiveFailure"
    CHECKPOINTED_STOP = "CheckpointedStop"
    """The workers checkpointed and stopped because a peer's pod is being stopped (exit 77)."""
    PREFLIGHT_FAILED = "PreflightFailed"
    KILLED = "Killed"
    """Killed by a signal."""
    OOM_KILLED = "OOMKilled"
    """Killed for memory: Kubernetes' word for a container, the agent's for a worker the kernel's
    OOM killer picked (exit 74)."""
    AGENT_CANNOT_RUN = "AgentCannotRun"
    """The agent injected into the pod could not run in its image (no Python there to run it,
    or one older than 3.9). Not counted against a budget: the job goes on without it."""
    CHECKPOINT_STORAGE_UNAVAILABLE = "CheckpointStorageUnavailable"
    """The pod's image lacks the Python module spec.checkpoint.url's filesystem needs (exit 80):
    a configuration error, named before the job trains; no restart."""
    RETRYABLE_EXIT_CODE = "RetryableExitCode"
    POD_DELETED = "PodDeleted"
    NODE_NOT_READY = "NodeNotReady"
    NODE_LOST = "NodeLost"
    AGENT_UNRESPONSIVE = "AgentUnresponsive"
    PEER_SILENT = "PeerSilent"
    """A live peer's agent no longer hears the pod's agent (a frozen or cut-off machine: its
    sockets stay open and its node still looks Ready)."""
    HANG = "Hang"
    STRAGGLER = "Straggler"
    STARTUP_TIMEOUT = "StartupTimeout"
