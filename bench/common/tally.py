"""What the control-plane benchmark sees, through watches rather than polling: when each node pod
first appeared and first ran, where it runs, and each job's phase and epoch.

Why watches, read raw: listing 8 000 pods every half second would cost the machine more CPU than
the operator it measures, and so would turning every event into the client's model objects; a
raw watch parses each event's JSON once and stamps it when it arrives.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s

from phalanx.models.labels import JOB

GROUP, VERSION, PLURAL = "phalanx.dev", "v1alpha1", "trainingjobs"


@dataclass
class PodSeen:
    job: str
    node: str | None
    phase: str | None
    deleting: bool


@dataclass
class Tally:
    """The namespace's node pods and jobs as the watches last saw them, with first-seen times."""

    created: dict[str, float] = field(default_factory=dict)
    """Pod name -> when it was first seen (monotonic)."""
    running: dict[str, float] = field(default_factory=dict)
    """Pod name -> when it was first seen Running."""
    pods: dict[str, PodSeen] = field(default_factory=dict)
    jobs: dict[str, tuple[str | None, int]] = field(default_factory=dict)
    """Job name -> (phase, epoch)."""
    running_at: dict[tuple[str, int], float] = field(default_factory=dict)
    """(job name, epoch) -> when the job was first seen Running at that epoch (monotonic)."""
    epoch_at: dict[tuple[str, int], float] = field(default_factory=dict)
    """(job name, epoch) -> when the job was first seen at that epoch (monotonic)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        name, now = pod["metadata"]["name"], time.monotonic()
        status, spec = pod.get("status") or {}, pod.get("spec") or {}
        with self.lock:
            if kind == "DELETED":
                self.pods.pop(name, None)
                return
            self.created.setdefault(name, now)
            if status.get("phase") == "Running":
                self.running.setdefault(name, now)
            self.pods[name] = PodSeen(
                job=(pod["metadata"].get("labels") or {}).get(JOB, ""),
                node=spec.get("nodeName"), phase=status.get("phase"),
                deleting=pod["metadata"].get("deletionTimestamp") is not None,
            )  # fmt: skip

    def on_job(self, kind: str, job: dict[str, Any]) -> None:
        status = job.get("status") or {}
        with self.lock:
            if kind == "DELETED":
                self.jobs.pop(job["metadata"]["name"], None)
            else:
                name, phase, epoch = (
                    job["metadata"]["name"],
                    status.get("phase"),
                    status.get("epoch", 0),
                )
                self.jobs[name] = (phase, epoch)
                self.epoch_at.setdefault((name, epoch), time.monotonic())
                if phase == "Running":
                    self.running_at.setdefault((name, epoch), time.monotonic())

    def jobs_running(
        self, names: set[str] | None = None, after: dict[str, int] | None = None
    ) -> int:
        """Jobs Running (of `names`; at an epoch past the one in `after`)."""
        with self.lock:
            return sum(1 for name, (phase, epoch) in self.jobs.items()
                       if phase == "Running" and (names is None or name in names)
                       and (after is None or epoch > after[name]))  # fmt: skip

    def running_again(self, name: str, after: int) -> float | None:
        """When the job was first seen Running at an epoch past `after` (None: not yet)."""
        with self.lock:
            times = [
                t for (job, epoch), t in self.running_at.items() if job == name and epoch > after
            ]
        return min(times, default=None)

    def nth_created(self, n: int) -> float:
        with self.lock:
            return sorted(self.created.values())[n - 1]


def start_watches(
    api: k8s.ApiClient, namespace: str, tally: Tally, selector: str, trainingjobs: bool = True
) -> None:
    """Daemon threads that feed `tally` until the API server goes away (pods only, for a
    baseline's jobs, without `trainingjobs`)."""
    core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)

    def pods(**kw: Any) -> Any:
        return core.list_namespaced_pod(namespace, label_selector=selector, **kw)

    def jobs(**kw: Any) -> Any:
        return custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, **kw)

    watches = [(pods, tally.on_pod), *([(jobs, tally.on_job)] if trainingjobs else [])]
    for call, handler in watches:
        threading.Thread(target=follow, args=(call, handler), daemon=True).start()


def follow(call: Callable[..., Any], handler: Callable[[str, dict[str, Any]], None],
           stopped: threading.Event | None = None) -> None:  # fmt: skip
    """Feed `handler` each event of the watch `call` makes, resumed where it stopped, until the
    API server goes away (or `stopped` is set)."""
    version = ""
    while stopped is None or not stopped.is_set():
        try:
            response = call(watch=True, resource_version=version, allow_watch_bookmarks=True,
                            timeout_seconds=600, _preload_content=False)  # fmt: skip
            for line in response:
                event = json.loads(line)
                version = event["object"]["metadata"].get("resourceVersion", version)
                if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                    handler(event["type"], event["object"])
                elif event["type"] == "ERROR":
                    version = ""  # expired: start over from the current state
                    break
        except Exception:  # the API server stopped at the end of the run
            return
