"""What the executor expects to see after its own creates, as Kubernetes' controllers keep it.

Why: a reconcile that runs before the watch shows the pods the last one created plans them again,
and the API server answers each create with 409: a quarter of the operator's requests were such
conflicts at 1 000 jobs (docs/figures.md, "Requests"), each a round trip that another job's
reconcile waited behind. A pod created is not created again until a reconcile's view of the pods
holds it, or for `EXPECTATION_SECONDS`; the job's other children (Service, ServiceAccount, Role,
RoleBinding, Leases) once per job and report shard count. Seen by a reconcile, not by each watch
event: a plan made from a view without the pod may be carried out after the pod was created, and
must find the expectation there (met by the watch). Deletes likewise: a pod deleted is not deleted
again until a reconcile's view shows it going (or gone; for a forced delete, gone: a pod on a lost
node shows Terminating from the node controller's eviction before our force removes it), except to
force what was graceful (a storm deleted pods again that were already going, answered 404).

The lifetime is Kubernetes' own (ExpectationsTimeout, 5 min): at many jobs on a small machine a
plan could wait long for a thread and the watch trail as long, and a shorter lifetime let most
pods be created twice. It matters only where no reconcile sees a pod (created and deleted before
one runs): that pod is made again 5 min later, not at once.
"""

from __future__ import annotations

import threading
import time

JobKey = tuple[str, str]
EXPECTATION_SECONDS = 300.0
"""How long a created pod that the watch has not shown is not created again."""


class Expectations:
    """Per job: pods created and not yet seen, and the (uid, report shards) whose children were
    made. Used from the executor's worker threads."""

    def __init__(self, lifetime: float = EXPECTATION_SECONDS) -> None:
        self.lifetime = lifetime
        self._pods: dict[JobKey, dict[str, float]] = {}
        self._children: dict[JobKey, tuple[str, int]] = {}
        self._deleted: dict[JobKey, dict[str, tuple[float, bool]]] = {}
        """Pods deleted and not yet seen going: when, and whether forced."""
        self._lock = threading.Lock()

    def forget(self, key: JobKey) -> None:
        with self._lock:
            self._pods.pop(key, None)
            self._children.pop(key, None)
            self._deleted.pop(key, None)

    def seen(self, key: JobKey, pods: set[str], going: set[str] | None = None) -> None:
        """The job's pods a reconcile's view holds, and those of them being deleted: creations
        of the pods held, and deletions of those going or gone, are met."""
        with self._lock:
            expected = self._pods.get(key)
            if expected:
                for name in pods & expected.keys():
                    del expected[name]
            deleted = self._deleted.get(key)
            if deleted:  # a forced delete removes the pod: only its absence meets it
                met = [n for n, (_, forced) in deleted.items()
                       if n not in pods or (n in (going or set()) and not forced)]  # fmt: skip
                for name in met:
                    del deleted[name]

    def delete_expected(self, key: JobKey, name: str, force: bool) -> bool:
        """Whether pod `name` was deleted lately (forced, where `force`) and not seen going."""
        with self._lock:
            deleted = self._deleted.get(key, {}).get(name)
        if deleted is None or time.monotonic() - deleted[0] >= self.lifetime:
            return False
        return deleted[1] or not force

    def pod_deleted(self, key: JobKey, name: str, force: bool) -> None:
        with self._lock:
            self._deleted.setdefault(key, {})[name] = (time.monotonic(), force)

    def pod_expected(self, key: JobKey, name: str) -> bool:
        """Whether pod `name` was created lately and not seen since."""
        with self._lock:
            created = self._pods.get(key, {}).get(name)
        return created is not None and time.monotonic() - created < self.lifetime

    def pod_created(self, key: JobKey, name: str) -> None:
        with self._lock:
            self._pods.setdefault(key, {})[name] = time.monotonic()

    def children_made(self, key: JobKey, made: tuple[str, int]) -> bool:
        """Whether the job's other children were made for `made` (its uid and report shard
        count)."""
        with self._lock:
            return self._children.get(key) == made

    def children_created(self, key: JobKey, made: tuple[str, int]) -> None:
        with self._lock:
            self._children[key] = made
