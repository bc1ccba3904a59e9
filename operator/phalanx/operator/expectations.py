"""What the executor expects to see after its own creates, as Kubernetes' controllers keep it.

Why: a reconcile that runs before the watch shows the pods the last one created plans them
again, and the API server answers each create with 409: at 1 000 jobs, 6 028 of the operator's
~25 000 requests were such conflicts, each a round trip that another job's reconcile waited
behind. A pod created is not created again until the pod watch shows it (every event of the job's
pods reports it seen, as the reconciler does), or for `EXPECTATION_SECONDS`; the job's other
children (Service, ServiceAccount, Role, RoleBinding, Leases) once per epoch of the job.

The lifetime is Kubernetes' own (ExpectationsTimeout, 5 min): at 1 000 jobs on 2 cores a plan
could wait 30 s for a thread and the watch trail as long, and a 30 s lifetime let 7 920 of 8 000
pods be created twice. It matters only where the watch never shows a pod (created and deleted
within a relist of the watch): its epoch's start-up deadline restarts the job, under new names.
"""

from __future__ import annotations

import threading
import time

JobKey = tuple[str, str]
EXPECTATION_SECONDS = 300.0
"""How long a created pod that the watch has not shown is not created again."""


class Expectations:
    """Per job: pods created and not yet seen, and the (uid, epoch) whose children were made.
    Used from the executor's worker threads."""

    def __init__(self, lifetime: float = EXPECTATION_SECONDS) -> None:
        self.lifetime = lifetime
        self._pods: dict[JobKey, dict[str, float]] = {}
        self._children: dict[JobKey, tuple[str, int]] = {}
        self._lock = threading.Lock()

    def forget(self, key: JobKey) -> None:
        with self._lock:
            self._pods.pop(key, None)
            self._children.pop(key, None)

    def seen(self, key: JobKey, pods: set[str]) -> None:
        """Pods of the job the watch showed: expectations of them are met."""
        with self._lock:
            expected = self._pods.get(key)
            if expected:
                for name in pods & expected.keys():
                    del expected[name]

    def pod_expected(self, key: JobKey, name: str) -> bool:
        """Whether pod `name` was created lately and not seen since."""
        with self._lock:
            created = self._pods.get(key, {}).get(name)
        return created is not None and time.monotonic() - created < self.lifetime

    def pod_created(self, key: JobKey, name: str) -> None:
        with self._lock:
            self._pods.setdefault(key, {})[name] = time.monotonic()

    def children_made(self, key: JobKey, made: tuple[str, int]) -> bool:
        """Whether the job's other children were made for `made` (its uid and epoch)."""
        with self._lock:
            return self._children.get(key) == made

    def children_created(self, key: JobKey, made: tuple[str, int]) -> None:
        with self._lock:
            self._children[key] = made
