"""The `restricted` Pod Security Standard's checks that a pod's own spec decides, as the API
server's PodSecurity admission applies them (k8s.io/pod-security-admission, policy v1.33).

Why here and not only on kind: every builder change can be checked in a second, and the kind test
(a namespace enforcing `restricted`) proves the same checks against the real admission. Only the
checks a pod built from a restricted template could fail are listed; each names its field.
"""

from __future__ import annotations

from typing import Any

ALLOWED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                   "persistentVolumeClaim", "projected", "secret"}  # fmt: skip


def violations(pod: dict[str, Any]) -> list[str]:
    """What keeps `pod` out of a namespace that enforces `restricted` ([] when nothing does)."""
    spec = pod["spec"]
    found = []
    pod_context = spec.get("securityContext") or {}
    containers = [*spec.get("initContainers", []), *spec["containers"]]
    for volume in spec.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= ALLOWED_VOLUMES:
            found.append(f"volume {volume['name']}: {sorted(kinds)} is not allowed")
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(flag):
            found.append(f"spec.{flag}")
    for container in containers:
        where = f"container {container['name']}"
        context = container.get("securityContext") or {}
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{where}: securityContext.allowPrivilegeEscalation must be false")
        if "ALL" not in (context.get("capabilities") or {}).get("drop", []):
            found.append(f"{where}: securityContext.capabilities.drop must include ALL")
        if set((context.get("capabilities") or {}).get("add", [])) - {"NET_BIND_SERVICE"}:
            found.append(f"{where}: securityContext.capabilities.add beyond NET_BIND_SERVICE")
        if context.get("privileged"):
            found.append(f"{where}: securityContext.privileged")
        if context.get("runAsNonRoot", pod_context.get("runAsNonRoot")) is not True:
            found.append(f"{where}: runAsNonRoot must be true (pod or container)")
        if context.get("runAsUser", pod_context.get("runAsUser")) == 0:
            found.append(f"{where}: runAsUser 0")
        seccomp = context.get("seccompProfile", pod_context.get("seccompProfile")) or {}
        if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
            found.append(f"{where}: seccompProfile must be RuntimeDefault or Localhost")
        for port in container.get("ports", []):
            if port.get("hostPort"):
                found.append(f"{where}: hostPort {port['hostPort']}")
    return found
