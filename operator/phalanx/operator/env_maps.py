"""Each job's env ConfigMap (`builder.env_config_map`): the variables all its node pods get
alike, kept as the job's spec says.

Why kept, not made once: spec.checkpoint, spec.trainer and spec.nccl may change while the job
runs, and the next epoch's pods must start with the new values, as they did when every variable
was written on the pod. A pod reads the ConfigMap when its containers start, so it is written
before the pods that read it are created: whenever its data differ from what this operator
last wrote for the job (and once per job after the operator restarts, not knowing). A
server-side apply makes it or makes it so in one request; forced, because an edit by hand is
not the spec.
"""

from __future__ import annotations

from kubernetes import client as k8s

from phalanx.models.job import TrainingJob
from phalanx.operator import builder, writes
from phalanx.operator.expectations import JobKey

FIELD_MANAGER = "phalanx-operator"
"""The field manager of what the operator applies."""


class EnvConfigMaps:
    """The env ConfigMaps of every job this operator runs. Used from worker threads; one job's
    reconciles do not overlap."""

    def __init__(self, api: k8s.ApiClient, build: builder.BuildSettings) -> None:
        self.api = api
        self.build = build
        self._written: dict[JobKey, tuple[str, dict[str, str]]] = {}
        """Per job: its uid and the data last applied."""

    def ensure(self, job: TrainingJob) -> None:
        """Apply the job's ConfigMap unless it was applied with these data already. Raises
        ApiException when the API server refuses it."""
        namespace = job.metadata.namespace or "default"
        manifest = builder.env_config_map(job, self.build)
        key = (namespace, job.metadata.name or "")
        wanted = (job.metadata.uid or "", manifest["data"])
        if self._written.get(key) == wanted:
            return
        writes.apply(self.api, namespace, manifest, FIELD_MANAGER)
        self._written[key] = wanted

    def forget(self, key: JobKey) -> None:
        """The job is gone: its ConfigMap goes with it (owner reference)."""
        self._written.pop(key, None)
